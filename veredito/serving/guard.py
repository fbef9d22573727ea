"""The HTTP server's own defences, below the routes (docs/security.md).

- :func:`serve_forever` runs an aiohttp app like ``web.run_app`` (SIGTERM and SIGINT drain it,
  exit 0) with :class:`GuardedHandler` as the connection protocol:

  - a **header timeout**: a connection must deliver a complete request head within
    ``header_timeout`` seconds of opening, or of the end of its previous response (keep-alive
    idle time counts), or it is closed. A thousand slow or silent connections are gone after
    that time instead of being held;
  - **no request text in logs or bodies**: a request aiohttp cannot parse (a header value with a
    control character, a bad request line) is answered with a fixed JSON ``400`` and logged at
    DEBUG without the offending bytes, which may hold a token.

- :class:`HostPolicy`: the ``Host`` (and ``Origin``, when a browser sends one) a request may
  name. Reads without a token are open only on loopback, and a web page the operator visits
  could otherwise reach them through DNS rebinding (its own name resolving to 127.0.0.1): the
  default allow-list is the loopback names, ``VEREDITO_ALLOWED_HOSTS`` names others.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

__all__ = ["LOOPBACK_NAMES", "GuardedHandler", "HostPolicy", "serve_forever"]

log = logging.getLogger(__name__)

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
BAD_REQUEST = (
    b'{"error": {"code": "bad_request", "message": "the request is not valid HTTP/1.1 '
    b'(its request line or a header name or value)"}}'
)


class GuardedHandler(RequestHandler):
    """aiohttp's connection protocol with a header timeout and quiet parse errors."""

    header_timeout: float = 10.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._idle_since: float | None = self._loop.time()
        self._head_handle: asyncio.TimerHandle | None = self._loop.call_later(
            self.header_timeout, self._check_head
        )

    def data_received(self, data: bytes) -> None:
        before = self._request_count
        super().data_received(data)
        if self._request_count > before:
            self._idle_since = None  # a whole request head came: the handler has it now

    def log_access(self, request: BaseRequest, response: Any, time: float | None) -> None:
        super().log_access(request, response, time)
        if not self._messages:
            self._idle_since = self._loop.time()  # waiting for the next request's head

    def _check_head(self) -> None:
        self._head_handle = None
        if self.transport is None or self._force_close:
            return
        now = self._loop.time()
        idle_since = self._idle_since
        if idle_since is not None and now - idle_since >= self.header_timeout:
            log.debug("closing a connection that sent no request head in %.0f s", now - idle_since)
            self.force_close()
            with contextlib.suppress(Exception):
                self.transport.close()
            return
        due = self.header_timeout if idle_since is None else idle_since + self.header_timeout - now
        self._head_handle = self._loop.call_later(max(due, 0.05), self._check_head)

    def connection_lost(self, exc: BaseException | None) -> None:
        if getattr(self, "_head_handle", None) is not None:
            assert self._head_handle is not None
            self._head_handle.cancel()
            self._head_handle = None
        super().connection_lost(exc)

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        # aiohttp logs these at ERROR with the parser's message, which quotes the bad bytes (a
        # token with a control character, say), and sends that message back: neither here.
        log.debug("unparseable request (%s)", type(exc).__name__ if exc else status)
        if request.writer.output_size > 0:
            raise ConnectionError("response already sent")
        body = BAD_REQUEST if status < 500 else b'{"error": {"code": "internal_error"}}'
        response = web.Response(status=status, body=body, content_type="application/json")
        response.force_close()
        return response


def guard(server: web.Server, header_timeout: float) -> None:
    """Make ``server`` (an AppRunner's, after ``setup``) build :class:`GuardedHandler`s."""
    handler = type("Handler", (GuardedHandler,), {"header_timeout": header_timeout})

    class GuardedServer(web.Server):
        def __call__(self) -> RequestHandler:
            return handler(self, loop=self._loop, **self._kwargs)  # type: ignore[no-any-return]

    server.__class__ = GuardedServer


async def serve_forever(
    app: web.Application,
    host: str,
    port: int,
    *,
    header_timeout: float,
    shutdown_timeout: float,
    ready: Callable[[], None],
    backlog: int = 2048,
) -> None:
    """Serve ``app`` until SIGTERM or SIGINT, then drain it (``shutdown_timeout``).

    The interpreter switches threads every millisecond instead of every five: pages rendered
    and bodies parsed in worker threads then hold up the event loop (``/healthz``, the other
    tenants' requests) for at most about a millisecond at a time."""
    sys.setswitchinterval(0.001)
    runner = web.AppRunner(
        app,
        access_log=None,
        shutdown_timeout=shutdown_timeout,
        handle_signals=False,
        keepalive_timeout=header_timeout,
    )
    await runner.setup()
    assert runner.server is not None
    guard(runner.server, header_timeout)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        site = web.TCPSite(runner, host, port, backlog=backlog)
        await site.start()
        ready()
        await stop.wait()
    finally:
        await runner.cleanup()


def _host_name(value: str) -> str:
    """The name of a ``Host`` header or an ``Origin``'s netloc, lower case, without the port."""
    value = value.strip().lower()
    if value.startswith("["):  # [::1]:8080
        return value[1:].partition("]")[0]
    if value.count(":") == 1:
        return value.partition(":")[0]
    return value.rstrip(".")


class HostPolicy:
    """The host names a request may name; ``None`` names nothing (any host)."""

    def __init__(self, names: Iterable[str] | None) -> None:
        self.names = None if names is None else {_host_name(n) for n in names if n.strip()}

    @classmethod
    def from_setting(cls, setting: str | None, *, open_reads: bool) -> HostPolicy:
        """``VEREDITO_ALLOWED_HOSTS`` when set; otherwise loopback names when reads are open
        without a token, and any host when every read needs one."""
        if setting and setting.strip():
            return cls(setting.split(","))
        return cls(LOOPBACK_NAMES if open_reads else None)

    def refusal(self, request: web.Request) -> tuple[int, str, str] | None:
        """``(status, code, message)`` when the request's Host or Origin is not allowed."""
        if self.names is None:
            return None
        if _host_name(request.headers.get("Host", "")) not in self.names:
            return (
                421,
                "host_not_allowed",
                "this server does not answer for that Host (VEREDITO_ALLOWED_HOSTS)",
            )
        origin = request.headers.get("Origin")
        if origin is not None and origin != "null":
            netloc = urlsplit(origin).netloc
            if _host_name(netloc) not in self.names:
                return (
                    403,
                    "origin_not_allowed",
                    "requests from that Origin are refused (VEREDITO_ALLOWED_HOSTS)",
                )
        return None
