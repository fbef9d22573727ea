"""OTLP/gRPC in: ``veredito serve --otlp-grpc-port 4317`` (the ``[otel-grpc]`` extra, grpcio).

The collector's two services, ``TraceService/Export`` and ``LogsService/Export``, on the same
event loop as the HTTP routes and through the same steps: the ingest token from the
``authorization`` metadata (``Bearer TOKEN``, as the exporters' ``headers`` send it), the same
tenancy (each token's own buffer), the same limits (``VEREDITO_INGEST_MAX_BYTES`` per message,
``VEREDITO_OTLP_MAX_SPANS_PER_REQUEST`` spans or log records, the backlog), the same assembly
and the same ``partial_success`` (spans that make no triple or were dropped as oversize; GenAI
log records that describe no span or were dropped). Messages are taken as bytes and parsed off
the event loop (in another process when large, as OTLP/HTTP bodies are).

Status codes, as the OTLP exporters read them: ``UNAUTHENTICATED`` (no, malformed or unknown
token), ``INVALID_ARGUMENT`` (not an export), ``RESOURCE_EXHAUSTED`` (too many spans or
records, or a message over the size limit), ``UNAVAILABLE`` (the broker away or the backlog
full: the exporter retries, after the delay the ``google.rpc.retryinfo-bin`` trailer says, as
HTTP's ``Retry-After``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from aiohttp import web

from veredito.producer.ingest import Grant, HeaderError, TooManyItems
from veredito.producer.otlp import PROTOBUF, OTLPError
from veredito.producer.otlp.decode import traces_reply
from veredito.producer.otlp.spans import Span
from veredito.serving.heavy import HEAVY, HEAVY_BYTES

__all__ = ["add_grpc", "retry_info", "start_grpc"]

log = logging.getLogger(__name__)

TRACES = "opentelemetry.proto.collector.trace.v1.TraceService"
LOGS = "opentelemetry.proto.collector.logs.v1.LogsService"
# a gRPC status as the HTTP code OTLP/HTTP answers for the same refusal, so that
# veredito_ingest_requests_total{route="grpc traces"|"grpc logs",code} reads as the HTTP routes'
HTTP_CODES = {"OK": "200", "INVALID_ARGUMENT": "400", "UNAUTHENTICATED": "401",
              "RESOURCE_EXHAUSTED": "413", "UNAVAILABLE": "503", "CANCELLED": "499"}  # fmt: skip
RETRY_INFO = "google.rpc.retryinfo-bin"  # the trailer OTLP exporters read a retry delay from


def retry_info(seconds: int) -> bytes:
    """A ``google.rpc.RetryInfo`` whose ``retry_delay`` is ``seconds``, serialized by hand (the
    message is two nested varint fields; ``googleapis-common-protos`` is not needed)."""
    varint = bytearray()
    value = max(0, seconds)
    while True:
        byte, value = value & 0x7F, value >> 7
        varint.append(byte | (0x80 if value else 0))
        if not value:
            break
    duration = b"\x08" + bytes(varint)  # Duration.seconds, field 1
    return b"\x0a" + bytes([len(duration)]) + duration  # RetryInfo.retry_delay, field 1


def _refusal(exc: Any) -> tuple[str, tuple[tuple[str, bytes], ...]]:
    """What a :class:`~veredito.producer.serve.JsonError` (503) says, and its ``Retry-After``
    as a ``RetryInfo`` trailer."""
    try:
        message = str(json.loads(exc.text)["error"]["message"])
    except (TypeError, ValueError, KeyError):
        message = str(exc.reason or "not ready")
    after = exc.headers.get("Retry-After") if exc.headers else None
    trailer = ((RETRY_INFO, retry_info(int(after))),) if after and after.isdigit() else ()
    return message, trailer


async def _call(app: web.Application, kind: str, data: bytes, context: Any) -> bytes:
    import grpc

    from veredito.producer import serve

    config, state = app[serve.CONFIG], app[serve.STATE]
    metadata = {key.lower(): value for key, value in context.invocation_metadata() or ()}
    header = metadata.get("authorization")
    grant = None
    if config.insecure_no_auth and not config.tokens:
        grant = Grant()
    else:
        try:
            grant = config.tokens.check(header if isinstance(header, str) else None)
        except HeaderError:
            grant = None
    if grant is None:
        await context.abort(
            grpc.StatusCode.UNAUTHENTICATED,
            "a valid 'authorization: Bearer <token>' is needed (VEREDITO_INGEST_TOKENS)",
        )
    assert grant is not None
    try:
        serve.check_ready(state, config)
    except serve.JsonError as exc:
        message, trailer = _refusal(exc)
        await context.abort(grpc.StatusCode.UNAVAILABLE, message, trailer)
    loop = asyncio.get_running_loop()
    limit = config.otlp_max_spans_per_request
    parse = serve._otlp_spans if kind == "traces" else serve._otlp_events
    try:
        if len(data) > HEAVY_BYTES and HEAVY in app:  # as OTLP/HTTP: the loop stays free
            parsed: Any = await app[HEAVY].run(parse, data, PROTOBUF, limit)
        else:
            parsed = await loop.run_in_executor(None, parse, data, PROTOBUF, limit)
    except TooManyItems as exc:
        what = "spans" if kind == "traces" else "log records"
        await context.abort(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            f"the export carries {exc.count} {what}, over the limit of {exc.limit} per request "
            "(VEREDITO_OTLP_MAX_SPANS_PER_REQUEST): export smaller batches",
        )
    except OTLPError as exc:
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
    state.apps.setdefault(grant.tenant, grant.app or "unscoped")
    state.grants[grant.tenant] = grant
    drops: dict[str, int] = {}  # this message's spans or events dropped as oversize
    if kind == "traces":
        done = await loop.run_in_executor(None, _traces, state, grant.tenant, parsed, drops)
    else:
        done = await loop.run_in_executor(
            None, serve._assemble_events, state, grant.tenant, parsed.events, drops
        )
    try:
        rejected, reasons = await serve.publish_traces(app, grant, done)
    except serve.JsonError as exc:
        message, trailer = _refusal(exc)
        await context.abort(grpc.StatusCode.UNAVAILABLE, message, trailer)
    if kind == "traces":
        return traces_reply(PROTOBUF, rejected, reasons, drops)[0]
    return bytes(parsed.reply(PROTOBUF, drops)[0])


def _traces(state: Any, tenant: str, spans: list[Span], drops: dict[str, int]) -> Any:
    from veredito.producer import serve

    return serve._assemble(state, tenant, spans, drops)


async def start_grpc(app: web.Application, host: str, port: int) -> Any:
    """Start the OTLP/gRPC server for ``app``'s ingest (its config and state) on ``host:port``;
    the server (``await server.stop(grace)`` ends it)."""
    try:
        import grpc
    except ImportError:  # pragma: no cover - depends on the install
        raise RuntimeError(
            "--otlp-grpc-port needs grpcio: pip install 'veredito[otel-grpc]'"
        ) from None
    from veredito.producer import serve

    config = app[serve.CONFIG]

    def handler(kind: str) -> Any:
        route = f"grpc {kind}"

        async def export(data: bytes, context: Any) -> bytes:
            status = "OK"
            try:
                return await _call(app, kind, data, context)
            except BaseException:
                code = context.code() if callable(getattr(context, "code", None)) else None
                status = getattr(code, "name", None) or "UNKNOWN"
                raise
            finally:  # counted as HTTP requests are, the gRPC status as its HTTP code
                code_of = HTTP_CODES.get(status, "500")
                app[serve.STATE].metrics.requests.labels(route, code_of).inc()

        return grpc.unary_unary_rpc_method_handler(
            export, request_deserializer=None, response_serializer=None
        )

    server = grpc.aio.server(
        options=[
            ("grpc.max_receive_message_length", config.max_bytes),
            ("grpc.max_send_message_length", 4 * 1024 * 1024),
        ]
    )
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(TRACES, {"Export": handler("traces")}),
            grpc.method_handlers_generic_handler(LOGS, {"Export": handler("logs")}),
        )
    )
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        bound = server.add_insecure_port(address)
    except RuntimeError:
        bound = 0
    if bound == 0:
        raise RuntimeError(
            f"OTLP/gRPC cannot listen on {address} (--otlp-grpc-port, VEREDITO_OTLP_GRPC_PORT): "
            "is the port in use?"
        )
    await server.start()
    log.info("OTLP/gRPC on %s", address)
    return server


def add_grpc(app: web.Application, host: str, port: int) -> None:
    """Serve OTLP/gRPC beside ``app`` while it runs."""
    held: dict[str, Any] = {}

    async def start(app: web.Application) -> None:
        held["server"] = await start_grpc(app, host, port)

    async def stop(_: web.Application) -> None:
        server = held.pop("server", None)
        if server is not None:
            await server.stop(5)

    app.on_startup.append(start)
    app.on_cleanup.insert(0, stop)
