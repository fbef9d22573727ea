"""The test judge (tests/llm_server.py) with two more things the reliability checks need:

- :class:`PerSecondScript`: a provider that enforces its limit over every sliding second (429
  with ``Retry-After`` above ``per_second`` requests in the last second), as providers enforce
  per-minute limits over short windows;
- :class:`LoggedServer`: a request log — for every completion request, when it came, which
  prompt (a hash of the first message), how many messages (2 for a re-ask) and whether it was
  answered with a valid completion — so that a check can see whether a triple was judged twice
  (two valid answers to the same prompt) rather than trust the done markers.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.llm_server import SCRIPT, Script, ServerThread, chat_completions, served

__all__ = ["Logged", "LoggedProcess", "LoggedServer", "PerSecondScript", "busiest"]


@dataclass
class Logged:
    at: float  # time.monotonic()
    prompt: str  # sha256 of the first message's content
    messages: int
    answered: bool  # a valid completion (not a fault, not a 429)


@dataclass
class PerSecondScript(Script):
    per_second: int = 0  # 0: no limit of its own (the base script's rpm_limit still applies)
    log: list[Logged] = field(default_factory=list)
    refused_at: list[float] = field(default_factory=list)
    _window: deque[float] = field(default_factory=deque)

    def over_limit(self, now: float) -> bool:
        if not self.per_second:
            return super().over_limit(now)
        while self._window and self._window[0] <= now - 1.0:
            self._window.popleft()
        if len(self._window) >= self.per_second:
            self.rejected_429 += 1
            self.refused_at.append(now)
            return True
        self._window.append(now)
        self.accepted_at.append(now)
        return False

    def answers(self) -> Counter[tuple[str, int]]:
        """Valid answers per (prompt, messages): more than one is a triple judged twice."""
        return Counter((e.prompt, e.messages) for e in self.log if e.answered)


async def _logged(request: web.Request) -> web.StreamResponse:
    script = request.app[SCRIPT]
    body = await request.json()
    response = await chat_completions(request)
    if isinstance(script, PerSecondScript):
        answered = False
        if response.status == 200 and isinstance(response, web.Response) and response.body:
            try:
                json.loads(bytes(response.body))  # type: ignore[arg-type]
                answered = True
            except ValueError:  # a malformed completion (a fault)
                answered = False
        messages = body.get("messages") or [{}]
        prompt = hashlib.sha256(str(messages[0].get("content", "")).encode()).hexdigest()
        script.log.append(Logged(time.monotonic(), prompt, len(messages), answered))
    return response


class LoggedServer(ServerThread):
    """:class:`ServerThread` whose completions go through the request log."""

    async def _start(self) -> None:
        app = web.Application(client_max_size=8 * 1024 * 1024)
        app[SCRIPT] = self.script
        app.router.add_post("/v1/chat/completions", _logged)
        app.router.add_get("/v1/_served", served)
        self._runner = web.AppRunner(
            app, access_log=None, shutdown_timeout=1.0, handler_cancellation=True
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self._port, backlog=2048)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


class LoggedProcess:
    """A :class:`LoggedServer` in a process of its own, for checks that time arrivals to the
    millisecond: in the test's process, the judge's thread shares the GIL and the garbage
    collector with everything the suite has left there, and a pause of theirs bunches the
    arrival times it records. ``script`` is the judge's final state once the block ends."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.port = 0
        self._process: Any = None
        self._conn: Any = None

    def __enter__(self) -> LoggedProcess:
        context = multiprocessing.get_context("spawn")
        self._conn, theirs = context.Pipe()
        self._process = context.Process(target=_serve_logged, args=(self.script, theirs))
        self._process.start()
        if not self._conn.poll(60):
            self._process.kill()
            raise RuntimeError("the test judge's process did not start in 60 s")
        self.port = self._conn.recv()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._conn.send("stop")
            if self._conn.poll(30):
                self.script = self._conn.recv()
        finally:
            self._process.join(timeout=30)
            if self._process.is_alive():
                self._process.kill()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


def _serve_logged(script: Script, conn: Any) -> None:
    with LoggedServer(script) as server:
        conn.send(server.port)
        conn.recv()  # "stop"
    conn.send(server.script)


def busiest(times: list[float], window: float = 1.0) -> int:
    """The most of ``times`` (sorted) within any ``window`` seconds."""
    best, j = 0, 0
    for i, t in enumerate(times):
        while times[j] <= t - window:
            j += 1
        best = max(best, i - j + 1)
    return best
