"""``veredito serve``: triples in over HTTP (spec §13), queued with broker confirms.

Routes:

- ``POST /v1/triples``: one triple, a JSON array of them, or NDJSON. ``202`` with
  ``{"accepted": [ids], "rejected": [{"index", "id", "error"}]}`` once the broker confirmed every
  message. Rejected items are published too, so they come back as ``rejected`` verdicts.
- ``POST /api/v1/traces``: aferiq-eval's ingest contract (its RAG and agent traces), answered
  ``200`` as its client and its ``aferiq doctor`` expect; ``HEAD`` answers 200 for a valid key and
  401 otherwise. Its users set ``AFERIQ_DSN=http://TOKEN@host:port/api/v1/traces``.
- ``GET /healthz`` (alive), ``GET /readyz`` (broker reachable and the queue below its limit),
  ``GET /metrics``, ``GET /openapi.json``.

Every error is ``{"error": {"code", "message"}}``: 401 bad token, 413 body too large, 415 wrong
content type, 400 not JSON (naming the line for NDJSON), 503 with ``Retry-After`` when the broker
cannot be reached or ``veredito.triples`` holds more than ``max_backlog`` messages. A 2xx means
every triple of the request is in the queue; a 503 means none of them was taken.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from veredito.producer import topology
from veredito.producer.confirms import Outgoing, Publisher, PublishError
from veredito.producer.ingest import (
    NDJSON,
    BodyError,
    Grant,
    LangfuseKeys,
    Tokens,
    TooManyItems,
    from_aferiq,
    read_body,
)
from veredito.producer.otlp import (
    PROTOBUF,
    Assembled,
    OTLPError,
    Span,
    TraceAssembler,
    decode,
)
from veredito.producer.otlp.buffer import NOT_JUDGED_REASONS
from veredito.producer.otlp.decode import traces_reply
from veredito.producer.otlp.logs import Event, Logs, read_logs
from veredito.producer.publish import task_outgoing
from veredito.producer.sampling import Dedup, sampled_in
from veredito.producer.triple import (
    InvalidTriple,
    Limits,
    fallback_id,
    parse_triple,
    rejection,
)
from veredito.serving.guard import HostPolicy
from veredito.serving.heavy import HEAVY, HEAVY_BYTES

__all__ = ["CONFIG", "INGEST_ROUTES", "STATE", "IngestConfig", "JsonError", "State", "add_ingest"]

log = logging.getLogger(__name__)

JSON_TYPES = ("application/json", NDJSON)
LANGFUSE_ROUTE = "/api/public/otel/v1/traces"  # the Langfuse SDK's OTLP export (v3)
INGEST_ROUTES = ("/v1/triples", "/v1/traces", "/v1/logs", "/api/v1/traces", LANGFUSE_ROUTE)
EXPIRE_INTERVAL = 1.0  # seconds between two looks for OTLP traces past their timeout
CONFIG: web.AppKey[IngestConfig] = web.AppKey("config")
STATE: web.AppKey[State] = web.AppKey("state")


@dataclass
class IngestConfig:
    broker_url: str
    tokens: Tokens
    insecure_no_auth: bool = False
    max_bytes: int = 8 * 1024 * 1024
    max_backlog: int = 100_000
    limits: Limits = field(default_factory=Limits)
    backlog_interval: float = 1.0  # seconds between two reads of the queue's depth
    trace_timeout: float = 30.0
    trace_quiet: float = 2.0  # an orphan chain/agent root with nothing new for this long: done
    event_wait: float = 5.0  # a complete trace's wait for its LLM calls' GenAI events
    retrieval_tools: tuple[str, ...] = ()  # tools whose results are an agent's context; () all
    sample_rate: float = 1.0
    dedup: Dedup | None = None
    max_items: int = 1000  # triples one request may carry
    otlp_max_spans_per_request: int = 10_000
    otlp_max_traces: int = 10_000  # per tenant (token)
    otlp_max_spans: int = 50_000
    otlp_max_bytes: int = 32 * 1024 * 1024
    body_timeout: float = 60.0
    hosts: HostPolicy = field(default_factory=lambda: HostPolicy(None))
    max_rejected_listed: int = 100  # the rest of a request's rejections are counted
    langfuse_keys: LangfuseKeys | None = None  # Langfuse's Basic pairs for ingest tokens


class IngestMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.requests = Counter(
            "veredito_ingest_requests_total",
            "HTTP ingest requests, by route and status code",
            ["route", "code"],
            registry=registry,
        )
        self.triples = Counter(
            "veredito_ingest_triples_total",
            "Triples received over HTTP, by result (accepted, rejected, sampled_out, duplicate)",
            ["result"],
            registry=registry,
        )
        self.traces = Counter(
            "veredito_ingest_traces_total",
            "OpenTelemetry traces: complete (made a triple), not_judged (its root a retriever, an "
            "embedding or a tool call: no answer), incomplete (no root in time), evicted (buffer "
            "full), lost (assembled while the broker was away)",
            ["result"],
            registry=registry,
        )
        self.otlp_dropped = Counter(
            "veredito_ingest_otlp_dropped_total",
            "OTLP traces or spans dropped from the buffer of one token's app ('unscoped' for a "
            "token without one): evicted (over its quota), incomplete (no root in time), "
            "oversize (a span or trace over the limits)",
            ["app", "reason"],
            registry=registry,
        )
        self.otlp_not_judged = Counter(
            "veredito_ingest_otlp_not_judged_total",
            "OTLP traces not judged, by the token's app ('unscoped' for a token without one) and "
            "reason: root_is_retriever, root_is_embedding, root_is_reranker, root_is_tool (its "
            "root is no answer)",
            ["app", "reason"],
            registry=registry,
        )
        self.otlp_pending = Gauge(
            "veredito_ingest_otlp_pending",
            "OTLP spans waiting for their trace's root, all tokens together: traces, spans and "
            "estimated bytes",
            ["unit"],
            registry=registry,
        )
        self.duration = Histogram(
            "veredito_ingest_request_duration_seconds",
            "Time to answer an ingest request (including the broker's confirms)",
            ["route"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=registry,
        )


@dataclass
class State:
    publisher: Publisher | None  # None: ingest is off (a read-only server)
    metrics: IngestMetrics
    assembler: TraceAssembler
    backlog: int | None = None  # None: the broker could not be asked
    monitors: list[asyncio.Task[None]] = field(default_factory=list)
    apps: dict[str, str] = field(default_factory=dict)  # tenant -> app label of its metrics
    grants: dict[str, Grant] = field(default_factory=dict)  # tenant -> its grant (for expiry)
    exported_drops: dict[tuple[str, str], int] = field(default_factory=dict)
    export_lock: threading.Lock = field(default_factory=threading.Lock)


class JsonError(web.HTTPException):
    def __init__(
        self, status: int, code: str, message: str, headers: dict[str, str] | None = None
    ) -> None:
        self.status_code = status
        super().__init__(
            text=json.dumps({"error": {"code": code, "message": message}}),
            content_type="application/json",
            headers=headers,
        )


def authorize(request: web.Request) -> Grant:
    """What the token grants (a forced app, a mapping); raises 401 for a missing or unknown
    token. On Langfuse's route, a Basic pair of ``VEREDITO_LANGFUSE_KEYS`` stands for its
    ingest token."""
    config = request.app[CONFIG]
    if config.insecure_no_auth and not config.tokens:
        return Grant()
    header = request.headers.get("Authorization")
    if request.path == LANGFUSE_ROUTE and config.langfuse_keys:
        header = config.langfuse_keys.bearer_for(header)
    grant = config.tokens.check(header)
    if grant is None:
        raise JsonError(
            401,
            "unauthorized",
            "a valid 'Authorization: Bearer <token>' is needed (VEREDITO_INGEST_TOKENS)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return grant


def check_ready(state: State, config: IngestConfig, adding: int = 0) -> None:
    """503 when the broker is away, or when the queue plus the ``adding`` triples of this
    request would pass the backlog limit."""
    if state.backlog is None:
        raise JsonError(
            503, "broker_unavailable", "the broker cannot be reached", headers={"Retry-After": "5"}
        )
    if state.backlog + adding > config.max_backlog:
        raise JsonError(
            503,
            "backlog_full",
            f"{state.backlog} triples wait in {topology.TRIPLES_QUEUE}; {adding} more would pass "
            f"the limit of {config.max_backlog} (VEREDITO_INGEST_MAX_BACKLOG)",
            headers={"Retry-After": "10"},
        )


async def read_data(request: web.Request) -> bytes:
    """The body, within ``body_timeout`` seconds (a client trickling it gets 408)."""
    config = request.app[CONFIG]
    try:
        async with asyncio.timeout(config.body_timeout):
            return await request.read()
    except TimeoutError:
        raise JsonError(
            408,
            "body_timeout",
            f"the body did not arrive within {config.body_timeout:g} s "
            "(VEREDITO_SERVE_BODY_TIMEOUT)",
        ) from None


async def read_values(request: web.Request) -> list[Any]:
    config = request.app[CONFIG]
    content_type = request.content_type
    if content_type not in JSON_TYPES:
        raise JsonError(
            415,
            "unsupported_media_type",
            f"send application/json or {NDJSON}, not {content_type or 'nothing'}",
        )
    data = await read_data(request)
    loop = asyncio.get_running_loop()
    try:  # parsed off the event loop; a large body in another process (veredito/serving/heavy.py)
        if len(data) > HEAVY_BYTES and HEAVY in request.app:
            return await request.app[HEAVY].run(read_body, data, content_type, config.max_items)
        return await loop.run_in_executor(None, read_body, data, content_type, config.max_items)
    except TooManyItems as exc:
        raise JsonError(413, "too_many_items", str(exc)) from None
    except BodyError as exc:
        raise JsonError(400, "invalid_body", str(exc)) from None


def _dedup_key(app: str | None, triple_id: str) -> str:
    """Dedup is per app: one app's id does not make another's a duplicate."""
    return triple_id if not app else f"{app}\x1f{triple_id}"


YIELD_EVERY = 64  # items checked between two turns of the event loop


async def accept(
    request: web.Request | web.Application, grant: Grant, values: list[Any], source: str
) -> dict[str, Any]:
    """Check each value, publish the triples and rejections and wait for the broker; leave out,
    and report, what sampling and dedup drop. The caller has authorized the request and checked
    that the broker is ready for this many triples. The answer lists the first
    ``max_rejected_listed`` rejections and counts them all (``rejected_count``)."""
    web_app = request if isinstance(request, web.Application) else request.app
    config, state = web_app[CONFIG], web_app[STATE]
    forced_app = grant.app
    rejected: list[dict[str, Any]] = []
    rejected_count = 0
    sampled_out: list[str] = []
    messages: list[Outgoing] = []
    pending: list[tuple[str, str | None, Outgoing]] = []
    now = time.time()
    for index, value in enumerate(values):
        if index % YIELD_EVERY == YIELD_EVERY - 1:
            await asyncio.sleep(0)  # let /healthz and the other tenants' requests through
        origin = {"input": source, "index": index}
        if grant.mapper is not None:
            value = grant.mapper.apply(value)
        if forced_app is not None and isinstance(value, dict):
            metadata = value.get("metadata")
            value = {**value, "metadata": {**(metadata if isinstance(metadata, dict) else {})}}
            value["metadata"]["app"] = forced_app
        try:
            triple = parse_triple(value, config.limits)
        except InvalidTriple as exc:
            # the id its rejected verdict will carry
            rejected_count += 1
            if len(rejected) < config.max_rejected_listed:
                rejected.append(
                    {"index": index, "id": fallback_id(value), "error": rejection(value, exc)}
                )
            envelope = {"triple": value, "source": origin, "produced_at": now}
            messages.append(task_outgoing(envelope, "rejected"))
            continue
        if not sampled_in(triple.id, config.sample_rate):
            sampled_out.append(triple.id)
            continue
        envelope = {"triple": triple.to_dict(), "source": origin, "produced_at": now}
        app = triple.metadata.get("app") if isinstance(triple.metadata, dict) else None
        key = _dedup_key(app if isinstance(app, str) else None, triple.id)
        pending.append((triple.id, key, task_outgoing(envelope, triple.id)))
    duplicates: list[str] = []
    if config.dedup is not None and pending:
        seen = config.dedup.seen([str(key) for _, key, _ in pending])
        duplicates = [
            triple_id for (triple_id, _, _), was in zip(pending, seen, strict=True) if was
        ]
        pending = [item for item, was in zip(pending, seen, strict=True) if not was]
    accepted = [triple_id for triple_id, _, _ in pending]
    messages += [message for _, _, message in pending]
    try:
        assert state.publisher is not None  # ingest routes exist only with a publisher
        await state.publisher.publish_async(messages)
    except PublishError:
        raise JsonError(
            503,
            "broker_unavailable",
            "the broker did not confirm the triples: send the request again (a triple queued "
            "twice is stored once)",
            headers={"Retry-After": "5"},
        ) from None
    if state.backlog is not None:
        state.backlog += len(messages)  # until the next look at the queue
    if config.dedup is not None:
        config.dedup.remember([str(key) for _, key, _ in pending])  # confirmed: repeats dropped
    for result, count in (
        ("accepted", len(accepted)),
        ("rejected", rejected_count),
        ("sampled_out", len(sampled_out)),
        ("duplicate", len(duplicates)),
    ):
        if count:
            state.metrics.triples.labels(result).inc(count)
    return {
        "accepted": accepted,
        "rejected": rejected,
        "rejected_count": rejected_count,
        "sampled_out": sampled_out,
        "duplicates": duplicates,
    }


async def post_triples(request: web.Request) -> web.Response:
    grant = authorize(request)
    check_ready(request.app[STATE], request.app[CONFIG])
    values = await read_values(request)
    check_ready(request.app[STATE], request.app[CONFIG], adding=len(values))
    return web.json_response(await accept(request, grant, values, "http"), status=202)


async def post_aferiq(request: web.Request) -> web.Response:
    grant = authorize(request)
    check_ready(request.app[STATE], request.app[CONFIG])
    values = [from_aferiq(v) for v in await read_values(request)]
    check_ready(request.app[STATE], request.app[CONFIG], adding=len(values))
    return web.json_response(await accept(request, grant, values, "aferiq"), status=200)


def _otlp_spans(data: bytes, content_type: str, limit: int) -> list[Span]:
    spans = decode(data, content_type)
    if len(spans) > limit:
        raise TooManyItems(len(spans), limit)
    return spans


async def _otlp_items(request: web.Request, parse: Any, what: str) -> tuple[Grant, str, Any]:
    """An OTLP/HTTP export's token, content type and items (spans, or :class:`Logs`), parsed off
    the event loop (in another process when large); 415, 413 or 400 as they say."""
    config, state = request.app[CONFIG], request.app[STATE]
    grant = authorize(request)
    content_type = request.content_type
    if content_type not in (PROTOBUF, "application/json"):
        raise JsonError(
            415,
            "unsupported_media_type",
            f"OTLP/HTTP is {PROTOBUF} or application/json, not {content_type or 'nothing'}",
        )
    check_ready(state, config)
    data = await read_data(request)
    limit = config.otlp_max_spans_per_request
    try:
        if len(data) > HEAVY_BYTES and HEAVY in request.app:
            items: Any = await request.app[HEAVY].run(parse, data, content_type, limit)
        else:
            items = await asyncio.get_running_loop().run_in_executor(
                None, parse, data, content_type, limit
            )
    except TooManyItems as exc:
        raise JsonError(
            413,
            "too_many_items",
            f"the export carries {exc.count} {what}, over the limit of {exc.limit} per "
            "request (VEREDITO_OTLP_MAX_SPANS_PER_REQUEST): export smaller batches",
        ) from None
    except OTLPError as exc:
        raise JsonError(400, "invalid_body", str(exc)) from None
    state.apps.setdefault(grant.tenant, grant.app or "unscoped")
    state.grants[grant.tenant] = grant
    return grant, content_type, items


async def post_otlp(request: web.Request) -> web.Response:
    """OTLP/HTTP traces: spans wait, in their token's own buffer, for their trace to be complete,
    then become triples. Decoding and assembling run off the event loop."""
    grant, content_type, spans = await _otlp_items(request, _otlp_spans, "spans")
    loop = asyncio.get_running_loop()
    drops: dict[str, int] = {}  # the spans of this request dropped as oversize
    state = request.app[STATE]
    done = await loop.run_in_executor(None, _assemble, state, grant.tenant, spans, drops)
    del spans
    rejected_spans, reasons = await publish_traces(request.app, grant, done)
    body, response_type = traces_reply(content_type, rejected_spans, reasons, drops)
    return web.Response(body=body, content_type=response_type)


async def publish_traces(
    app: web.Application, grant: Grant, done: list[Assembled]
) -> tuple[int, list[str]]:
    """Publish the triples of assembled traces (their rejections become rejected verdicts, as
    for any triple); count the traces that are not judged. Returns the spans that could not
    become a triple and the first reasons (for OTLP's ``partial_success``)."""
    state = app[STATE]
    triples = [d.triple for d in done if d.triple is not None]
    rejected_spans, reasons = 0, list[str]()
    for d in done:
        if d.skipped:
            state.metrics.traces.labels("not_judged").inc()
            reason = d.skipped if d.skipped in NOT_JUDGED_REASONS else "other"  # a bounded label
            state.metrics.otlp_not_judged.labels(grant.app or "unscoped", reason).inc()
            rejected_spans += d.spans
            if len(reasons) < 3:
                reasons.append(f"trace {d.trace_id}: not judged ({d.skipped.replace('_', ' ')})")
    if triples:
        result = await accept(app, grant, triples, "otlp")
        state.metrics.traces.labels("complete").inc(len(triples))
        spans_of = {d.trace_id: d.spans for d in done if d.triple is not None}
        for item in result["rejected"]:
            rejected_spans += spans_of.get(str(item["id"]), 0)
            if len(reasons) < 3:
                reasons.append(f"trace {item['id']}: {item['error']}")
    return rejected_spans, reasons


def _otlp_events(data: bytes, content_type: str, limit: int) -> Logs:
    logs = read_logs(data, content_type)
    if logs.records > limit:  # every record is read: each counts
        raise TooManyItems(logs.records, limit)
    return logs


async def post_otlp_logs(request: web.Request) -> web.Response:
    """OTLP/HTTP logs: the GenAI events among them (the messages of LLM calls, when an
    instrumentation sends them as events) wait beside their trace's spans, in their token's own
    buffer, and join them when the trace is assembled. Other records are ignored; GenAI events
    that cannot be used (no trace and span id, oversize) are told in ``partial_success``."""
    grant, content_type, logs = await _otlp_items(request, _otlp_events, "log records")
    loop = asyncio.get_running_loop()
    state = request.app[STATE]
    drops: dict[str, int] = {}
    done = await loop.run_in_executor(
        None, _assemble_events, state, grant.tenant, logs.events, drops
    )
    await publish_traces(request.app, grant, done)
    body, response_type = logs.reply(content_type, drops)
    return web.Response(body=body, content_type=response_type)


def _assemble_events(
    state: State, tenant: str, events: list[Event], drops: dict[str, int] | None = None
) -> list[Assembled]:
    done = state.assembler.add_events(tenant, events, drops)
    export_drops(state)
    return done


def _assemble(
    state: State, tenant: str, spans: list[Span], drops: dict[str, int] | None = None
) -> list[Assembled]:
    """In an executor thread: the spans into the tenant's buffer, the drops into the metrics
    (and this request's into ``drops``)."""
    done = state.assembler.add_traces(tenant, spans, drops)
    export_drops(state)
    return done


def _expire(state: State) -> list[tuple[str, Assembled]]:
    """In an executor thread: the traces that will get no root, assembled or dropped."""
    dropped, done = state.assembler.expire_traces()
    if dropped or done:
        export_drops(state)
    return done


def export_drops(state: State) -> None:
    """Move the assembler's drop counts (per tenant and reason) into the metrics (from the
    executor threads: the assembler's lock may be held for a while by a large request)."""
    with state.export_lock:
        _export_drops(state)


def _export_drops(state: State) -> None:
    for (tenant, reason), total in state.assembler.drop_counts().items():
        done = state.exported_drops.get((tenant, reason), 0)
        if total > done:
            state.metrics.otlp_dropped.labels(state.apps.get(tenant, "unscoped"), reason).inc(
                total - done
            )
            if reason in ("evicted", "incomplete"):
                state.metrics.traces.labels(reason).inc(total - done)
            state.exported_drops[(tenant, reason)] = total
    pending = state.metrics.otlp_pending
    pending.labels("traces").set(len(state.assembler))
    pending.labels("spans").set(state.assembler.pending_spans())
    pending.labels("bytes").set(state.assembler.pending_bytes())


async def head_aferiq(request: web.Request) -> web.Response:
    authorize(request)
    return web.Response(status=200)


async def watch_backlog(app: web.Application) -> None:
    """Every ``backlog_interval`` s: how many triples wait (None when the broker is away).
    What this server queues in between is added as it is confirmed (:func:`check_ready`)."""
    state, config = app[STATE], app[CONFIG]
    loop = asyncio.get_running_loop()
    while True:
        await asyncio.sleep(config.backlog_interval)
        try:
            state.backlog = await loop.run_in_executor(
                None, topology.queue_depth, config.broker_url
            )
        except Exception as exc:  # any broker failure means "not ready", never a crash
            if state.backlog is not None:
                log.warning("the broker cannot be reached (%s)", type(exc).__name__)
            state.backlog = None


async def expire_traces(app: web.Application) -> None:
    """Every second: OTLP traces whose root span never came are assembled (a local root whose
    parent is elsewhere) and published, or dropped."""
    state = app[STATE]
    loop = asyncio.get_running_loop()
    while True:
        await asyncio.sleep(EXPIRE_INTERVAL)
        done = await loop.run_in_executor(None, _expire, state)
        by_tenant: dict[str, list[Assembled]] = {}
        for tenant, assembled in done:
            by_tenant.setdefault(tenant, []).append(assembled)
        for tenant, traces in by_tenant.items():
            try:
                await publish_traces(app, state.grants.get(tenant, Grant()), traces)
            except JsonError as exc:  # the broker is away: the traces are lost, and counted
                log.warning("%d OTLP traces could not be queued (%s)", len(traces), exc.reason)
                state.metrics.traces.labels("lost").inc(len(traces))
            except Exception as exc:  # the loop must go on whatever one batch did
                log.error("publishing expired OTLP traces failed (%s)", type(exc).__name__)


async def on_startup(app: web.Application) -> None:
    state = app[STATE]
    if state.publisher is None:
        return
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, state.publisher.start, False)
    try:
        state.backlog = await loop.run_in_executor(
            None, topology.queue_depth, app[CONFIG].broker_url
        )
    except Exception:
        state.backlog = None
    state.monitors = [
        asyncio.ensure_future(watch_backlog(app)),
        asyncio.ensure_future(expire_traces(app)),
    ]


async def on_cleanup(app: web.Application) -> None:
    state = app[STATE]
    for monitor in state.monitors:
        monitor.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await monitor
    if state.publisher is not None:
        await asyncio.get_running_loop().run_in_executor(None, state.publisher.close)


def add_ingest(
    app: web.Application,
    config: IngestConfig,
    registry: CollectorRegistry | None = None,
    *,
    enabled: bool = True,
) -> None:
    """The ingest side of ``app``: its config and state (metrics, the OTLP buffers), and, when
    ``enabled``, the publisher and the ingest routes."""
    app[CONFIG] = config
    publisher = None
    if enabled:
        publisher = Publisher(
            config.broker_url,
            declare=(topology.triples_queue, topology.dead_queue, topology.verdicts_queue),
        )
        app.router.add_post("/v1/triples", post_triples)
        app.router.add_post("/v1/traces", post_otlp)
        app.router.add_post(LANGFUSE_ROUTE, post_otlp)
        app.router.add_post("/v1/logs", post_otlp_logs)
        app.router.add_post("/api/v1/traces", post_aferiq)
        app.router.add_route("HEAD", "/api/v1/traces", head_aferiq)
    app[STATE] = State(
        publisher,
        IngestMetrics(registry or CollectorRegistry()),
        TraceAssembler(
            timeout=config.trace_timeout,
            max_traces=config.otlp_max_traces,
            max_spans=config.otlp_max_spans,
            max_bytes=config.otlp_max_bytes,
            quiet=config.trace_quiet,
            retrieval_tools=config.retrieval_tools or None,
            event_wait=config.event_wait,
        ),
    )
    app.on_startup.append(on_startup)
    app.on_cleanup.append(on_cleanup)
