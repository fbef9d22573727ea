"""OpenTelemetry traces in: OTLP/HTTP spans assembled per trace into triples.

``decode`` (or ``decode_iter``, which yields the spans one by one) reads an
``ExportTraceServiceRequest`` in protobuf (``opentelemetry-proto``'s messages) or in OTLP/JSON (ids
in hex, as that encoding says) into :class:`Span` values. :class:`TraceAssembler` keeps the spans
of each trace until its root span (no parent) arrives — spans of one trace may come in several
requests and in any order — and then maps them:

- query: the root span's ``input.value``, else a retriever's, else the last user prompt of an LLM
  span (OpenInference ``llm.input_messages.N.message.*``, GenAI ``gen_ai.prompt.N.*``);
- context: the documents of the retriever spans, in start order, each in index order
  (``retrieval.documents.N.document.content``);
- answer: the root span's ``output.value``, else the last LLM span's output (``output.value``,
  ``llm.output_messages.0.message.content``, ``gen_ai.completion.0.content``);
- ``metadata.app``: the resource's ``service.name``; the id: the trace id.

A value whose ``*.mime_type`` is ``application/json`` is read for its ``query``/``question``/
``input`` (or ``answer``/``output``/``text``) field. Spans are classified by
``openinference.span.kind`` (RETRIEVER, LLM, CHAIN …) or, for GenAI spans, by their
``gen_ai.*`` attributes.

The buffers are per tenant: ``add(tenant, spans)`` files spans under (tenant, trace id), where the
tenant is an opaque string the server derives from the ingest token. Spans of one trace id sent by
two tenants never meet: each tenant's triple is built from its own spans only. Each tenant has its
own quotas (constructor keywords, defaults in brackets): pending traces ``max_traces`` [10 000],
pending spans ``max_spans`` [50 000] and estimated bytes of pending spans ``max_bytes`` [32 MiB]
(:func:`span_size`: the lengths of a span's ids, name and attribute keys and string values, nested
lists and maps walked, plus a fixed overhead per span and per attribute). A span that would exceed
a quota pushes out that tenant's oldest pending traces, whole, until it fits — never another
tenant's. A span bigger than ``max_bytes`` by itself, one beyond ``max_spans_per_trace`` [2 000]
spans of its trace (the first root span is always taken), or one whose trace alone would outgrow a
quota, is dropped. A trace whose root has not come within ``timeout`` seconds of its first span is
forgotten by :meth:`TraceAssembler.expire`.

Nothing is dropped silently: ``dropped`` counts evicted and incomplete traces and oversize spans,
``dropped_by_tenant`` the same per tenant, and one WARNING at most every ``log_interval`` seconds
[10] sums up the drops since the previous one (counts only: no tenant, trace id or span content;
a line per trace only at DEBUG). Spans wait in memory until their root comes: a crash loses the
incomplete traces of that moment (a complete one is published with confirms like any triple).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = [
    "OTLPError",
    "Span",
    "TraceAssembler",
    "decode",
    "decode_iter",
    "empty_response",
    "span_size",
]

log = logging.getLogger(__name__)

PROTOBUF = "application/x-protobuf"
QUERY_KEYS = ("query", "question", "input", "user_input")
ANSWER_KEYS = ("answer", "output", "text", "response")


class OTLPError(ValueError):
    """The body is not an OTLP trace export; the message says why."""


@dataclass
class Span:
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    start: int
    attributes: dict[str, Any]
    service: str | None = None


# -- decoding -----------------------------------------------------------------------------------


def decode(data: bytes, content_type: str) -> list[Span]:
    """All the spans of an export; :class:`OTLPError` before any is returned if it is malformed."""
    return list(decode_iter(data, content_type))


def decode_iter(data: bytes, content_type: str) -> Iterator[Span]:
    """The spans of an export one by one, made as they are taken (no list of them all).

    A body that is not an export at all raises :class:`OTLPError` here; an OTLP/JSON span without
    ids raises it while iterating, after the spans before it were yielded.
    """
    if content_type == PROTOBUF:
        return _decode_protobuf(data)
    try:
        body = json.loads(data)
    except ValueError as exc:
        raise OTLPError(f"not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise OTLPError("an OTLP/JSON export is an object with resourceSpans")
    return _decode_json(body)


def _decode_protobuf(data: bytes) -> Iterator[Span]:
    try:
        from google.protobuf.message import DecodeError
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )
    except ImportError as exc:  # pragma: no cover - the [otel] extra is missing
        raise OTLPError("OTLP needs opentelemetry-proto: pip install 'veredito[otel]'") from exc
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(data)
    except DecodeError as exc:
        raise OTLPError(f"not an OTLP protobuf export: {exc}") from None
    return _protobuf_spans(request)


def _protobuf_spans(request: Any) -> Iterator[Span]:
    for resource_spans in request.resource_spans:
        resource = {kv.key: _proto_value(kv.value) for kv in resource_spans.resource.attributes}
        service = resource.get("service.name")
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                yield Span(
                    trace_id=span.trace_id.hex(),
                    span_id=span.span_id.hex(),
                    parent_id=span.parent_span_id.hex(),
                    name=span.name,
                    start=int(span.start_time_unix_nano),
                    attributes={kv.key: _proto_value(kv.value) for kv in span.attributes},
                    service=service if isinstance(service, str) else None,
                )


def _proto_value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_proto_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _proto_value(kv.value) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, kind)


def _decode_json(body: dict[str, Any]) -> Iterator[Span]:
    for resource_spans in _list(body.get("resourceSpans")):
        resource = _json_attributes(_dict(resource_spans.get("resource")).get("attributes"))
        service = resource.get("service.name")
        for scope_spans in _list(resource_spans.get("scopeSpans")):
            for span in _list(scope_spans.get("spans")):
                trace_id, span_id = span.get("traceId"), span.get("spanId")
                if not isinstance(trace_id, str) or not isinstance(span_id, str):
                    raise OTLPError("every span needs traceId and spanId (hex strings)")
                yield Span(
                    trace_id=trace_id.lower(),
                    span_id=span_id.lower(),
                    parent_id=str(span.get("parentSpanId") or "").lower(),
                    name=str(span.get("name") or ""),
                    start=_int(span.get("startTimeUnixNano")),
                    attributes=_json_attributes(span.get("attributes")),
                    service=service if isinstance(service, str) else None,
                )


def _list(value: Any) -> list[Any]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _json_attributes(items: Any) -> dict[str, Any]:
    return {
        str(item.get("key")): _json_value(_dict(item.get("value")))
        for item in _list(items)
        if item.get("key") is not None
    }


def _json_value(value: dict[str, Any]) -> Any:
    for kind in ("stringValue", "boolValue", "doubleValue", "bytesValue"):
        if kind in value:
            return value[kind]
    if "intValue" in value:
        return _int(value["intValue"])
    if "arrayValue" in value:
        return [_json_value(_dict(v)) for v in _dict(value["arrayValue"]).get("values", [])]
    if "kvlistValue" in value:
        return _json_attributes(_dict(value["kvlistValue"]).get("values"))
    return None


def empty_response(content_type: str) -> tuple[bytes, str]:
    """The body of a full-success ``ExportTraceServiceResponse`` in the request's encoding."""
    if content_type == PROTOBUF:
        return b"", PROTOBUF  # all fields at their defaults: zero bytes
    return b"{}", "application/json"


# -- mapping a trace onto a triple ----------------------------------------------------------


def _kind(span: Span) -> str:
    kind = str(span.attributes.get("openinference.span.kind") or "").upper()
    if kind:
        return kind
    if any(key.startswith("gen_ai.") for key in span.attributes):
        return "LLM"
    if any(key.startswith("retrieval.documents.") for key in span.attributes):
        return "RETRIEVER"
    return ""


def _text(span: Span, prefix: str, keys: tuple[str, ...]) -> str | None:
    value = span.attributes.get(f"{prefix}.value")
    if not isinstance(value, str) or not value.strip():
        return None
    if span.attributes.get(f"{prefix}.mime_type") == "application/json":
        try:
            parsed = json.loads(value)
        except ValueError:
            return value
        if isinstance(parsed, dict):
            for key in keys:
                if isinstance(parsed.get(key), str) and parsed[key].strip():
                    return str(parsed[key])
        return value
    return value


def _indexed(attributes: dict[str, Any], prefix: str, suffix: str) -> list[Any]:
    """Values of ``prefix.N.suffix`` in N order."""
    found: dict[int, Any] = {}
    for key, value in attributes.items():
        if key.startswith(prefix) and key.endswith(suffix):
            middle = key[len(prefix) : len(key) - len(suffix)]
            if middle.isdigit():
                found[int(middle)] = value
    return [found[i] for i in sorted(found)]


def _prompt(span: Span) -> str | None:
    pairs = list(
        zip(
            _indexed(span.attributes, "llm.input_messages.", ".message.role"),
            _indexed(span.attributes, "llm.input_messages.", ".message.content"),
            strict=False,
        )
    ) or list(
        zip(
            _indexed(span.attributes, "gen_ai.prompt.", ".role"),
            _indexed(span.attributes, "gen_ai.prompt.", ".content"),
            strict=False,
        )
    )
    users = [content for role, content in pairs if role == "user" and isinstance(content, str)]
    return users[-1] if users else None


def _completion(span: Span) -> str | None:
    for key in (
        "llm.output_messages.0.message.content",
        "gen_ai.completion.0.content",
    ):
        value = span.attributes.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return _text(span, "output", ANSWER_KEYS)


def triple_from(spans: list[Span]) -> dict[str, Any]:
    ordered = sorted(spans, key=lambda s: s.start)
    root = next((s for s in ordered if not s.parent_id.strip("0")), ordered[0])
    retrievers = [s for s in ordered if _kind(s) == "RETRIEVER"]
    llms = [s for s in ordered if _kind(s) == "LLM"]
    query = _text(root, "input", QUERY_KEYS)
    for span in retrievers:
        query = query or _text(span, "input", QUERY_KEYS)
    for span in reversed(llms):
        query = query or _prompt(span)
    answer = _text(root, "output", ANSWER_KEYS)
    for span in reversed(llms):
        answer = answer or _completion(span)
    context = [
        doc
        for span in retrievers
        for doc in _indexed(span.attributes, "retrieval.documents.", ".document.content")
        if isinstance(doc, str) and doc.strip()
    ]
    metadata: dict[str, Any] = {"source": "otlp", "trace_id": root.trace_id}
    if root.service:
        metadata["app"] = root.service
    return {
        "id": root.trace_id,
        "query": query,
        "context": context,
        "answer": answer,
        "metadata": metadata,
    }


# -- the buffer ----------------------------------------------------------------------------

SPAN_OVERHEAD = 200  # estimated bytes of a Span, its attribute dict and its id strings
ITEM_OVERHEAD = 64  # estimated bytes of an attribute, list item or map entry besides its strings
DROP_REASONS = ("incomplete", "evicted", "oversize")


def span_size(span: Span) -> int:
    """A cheap estimate of the memory a buffered span holds, in bytes.

    The lengths of its ids, name and service and of its attribute keys and string (or bytes)
    values, nested lists and maps walked, plus :data:`SPAN_OVERHEAD` per span and
    :data:`ITEM_OVERHEAD` per attribute, list item or map entry (so that a span of many tiny
    attributes is not taken for a small one).
    """
    size = (
        SPAN_OVERHEAD
        + len(span.trace_id)
        + len(span.span_id)
        + len(span.parent_id)
        + len(span.name)
        + (len(span.service) if span.service else 0)
    )
    attributes = span.attributes
    size += len(attributes) * ITEM_OVERHEAD + sum(map(len, attributes))  # the keys are str
    nested: list[Any] | None = None
    for value in attributes.values():
        if isinstance(value, str):
            size += len(value)
        elif isinstance(value, (list, dict)):
            if nested is None:
                nested = [value]
            else:
                nested.append(value)
        elif isinstance(value, bytes):
            size += len(value)
    while nested:  # a stack, not recursion: any depth decode took is walked
        container = nested.pop()
        size += len(container) * ITEM_OVERHEAD
        if isinstance(container, dict):
            size += sum(len(key) for key in container if isinstance(key, str))
            container = container.values()
        for item in container:
            if isinstance(item, (str, bytes)):
                size += len(item)
            elif isinstance(item, (list, dict)):
                nested.append(item)
    return size


class _Trace:
    """The pending spans of one trace of one tenant."""

    __slots__ = ("bytes", "first_seen", "root", "spans")

    def __init__(self, first_seen: float) -> None:
        self.spans: list[Span] = []
        self.bytes = 0
        self.first_seen = first_seen
        self.root = False  # its root span is buffered: the trace completes at the end of add


class _Tenant:
    """One tenant's pending traces, oldest first, and what they hold."""

    __slots__ = ("bytes", "spans", "traces")

    def __init__(self) -> None:
        self.traces: OrderedDict[str, _Trace] = OrderedDict()  # by trace id, in first-seen order
        self.spans = 0
        self.bytes = 0


class TraceAssembler:
    """Spans buffered per (tenant, trace id) until the trace's root comes; then its triple.

    Thread-safe: one lock guards the buffers and the counters (``add`` may run in a worker thread
    while ``expire`` runs on the event loop). ``dropped`` counts per reason (``incomplete`` and
    ``evicted`` traces, ``oversize`` spans), ``dropped_by_tenant`` the same per tenant; a caller
    reads their deltas around ``add``/``expire``.
    """

    def __init__(
        self,
        timeout: float = 30.0,
        *,
        max_traces: int = 10_000,
        max_spans: int = 50_000,
        max_bytes: int = 32 * 1024 * 1024,
        max_spans_per_trace: int = 2_000,
        log_interval: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        for name, bound in (
            ("max_traces", max_traces),
            ("max_spans", max_spans),
            ("max_bytes", max_bytes),
            ("max_spans_per_trace", max_spans_per_trace),
        ):
            if bound < 1:
                raise ValueError(f"{name} must be at least 1, not {bound}")
        self.timeout = timeout
        self.max_traces = max_traces
        self.max_spans = max_spans
        self.max_bytes = max_bytes
        self.max_spans_per_trace = max_spans_per_trace
        self.log_interval = log_interval
        self._clock = clock
        self._lock = threading.Lock()
        self._tenants: dict[str, _Tenant] = {}
        self.dropped: Counter[str] = Counter(dict.fromkeys(DROP_REASONS, 0))
        self.dropped_by_tenant: dict[str, Counter[str]] = {}
        self._unlogged: Counter[str] = Counter()  # drops since the last WARNING
        self._unlogged_tenants: set[str] = set()
        self._last_log: float | None = None

    # -- the picture, for gauges -----------------------------------------------------------

    def __len__(self) -> int:
        """Pending traces, all tenants together."""
        with self._lock:
            return sum(len(tenant.traces) for tenant in self._tenants.values())

    def pending(self, tenant: str) -> int:
        """The tenant's pending traces."""
        with self._lock:
            found = self._tenants.get(tenant)
            return len(found.traces) if found else 0

    def pending_spans(self, tenant: str | None = None) -> int:
        """Pending spans of the tenant, or of all tenants together."""
        with self._lock:
            return sum(t.spans for t in self._some(tenant))

    def pending_bytes(self, tenant: str | None = None) -> int:
        """Estimated bytes (:func:`span_size`) of the pending spans of the tenant, or of all."""
        with self._lock:
            return sum(t.bytes for t in self._some(tenant))

    def drop_counts(self) -> dict[tuple[str, str], int]:
        """Every (tenant, reason) total of :attr:`dropped_by_tenant`, read under the lock."""
        with self._lock:
            return {
                (tenant, reason): count
                for tenant, counts in self.dropped_by_tenant.items()
                for reason, count in counts.items()
            }

    def _some(self, tenant: str | None) -> list[_Tenant]:
        if tenant is None:
            return list(self._tenants.values())
        found = self._tenants.get(tenant)
        return [found] if found else []

    # -- spans in, triples out ---------------------------------------------------------------

    def add(self, tenant: str, spans: Iterable[Span]) -> list[dict[str, Any]]:
        """File the tenant's spans; return the triples of the traces their roots completed.

        A trace completes at the end of the call, so a root's children that come after it in the
        same call are in its triple. O(spans): each span is sized once, and each eviction pops
        a whole trace that was filed before.
        """
        debug = log.isEnabledFor(logging.DEBUG)
        max_traces, max_spans = self.max_traces, self.max_spans
        max_bytes, per_trace = self.max_bytes, self.max_spans_per_trace
        ready: list[list[Span]] = []
        warning: tuple[Any, ...] | None = None
        with self._lock:
            now = self._clock()
            buffer = self._tenants.get(tenant)
            if buffer is None:
                buffer = self._tenants[tenant] = _Tenant()
            traces = buffer.traces
            roots: dict[str, _Trace] = {}
            evicted = oversize = 0
            try:
                for span in spans:
                    size = span_size(span)
                    trace_id = span.trace_id
                    first_root = not span.parent_id.strip("0")
                    trace = traces.get(trace_id)
                    if trace is not None:
                        first_root = first_root and not trace.root
                    if size > max_bytes or (
                        trace is not None
                        and (
                            (len(trace.spans) >= per_trace and not first_root)
                            or len(trace.spans) >= max_spans
                            or trace.bytes + size > max_bytes
                        )
                    ):
                        oversize += 1
                        if debug:
                            log.debug(
                                "OTLP span %s of trace %s dropped: %d bytes, %d spans before it",
                                span.span_id,
                                trace_id,
                                size,
                                len(trace.spans) if trace else 0,
                            )
                        continue
                    if (
                        len(traces) + (trace is None) > max_traces
                        or buffer.spans >= max_spans
                        or buffer.bytes + size > max_bytes
                    ):
                        evicted += self._make_room(buffer, trace, size, debug)
                    if trace is None:
                        trace = traces[trace_id] = _Trace(now)
                    trace.spans.append(span)
                    trace.bytes += size
                    buffer.spans += 1
                    buffer.bytes += size
                    if first_root:
                        trace.root = True
                        roots[trace_id] = trace
                for trace_id, trace in roots.items():
                    if traces.get(trace_id) is trace:  # not evicted since its root came
                        del traces[trace_id]
                        buffer.spans -= len(trace.spans)
                        buffer.bytes -= trace.bytes
                        ready.append(trace.spans)
            finally:
                if not traces:
                    del self._tenants[tenant]
                self._count(tenant, "evicted", evicted)
                self._count(tenant, "oversize", oversize)
                warning = self._report(now)
        if warning:
            log.warning(*warning)
        return [triple_from(trace_spans) for trace_spans in ready]

    def _make_room(self, buffer: _Tenant, keep: _Trace | None, size: int, debug: bool) -> int:
        """Evict the tenant's oldest traces, but ``keep``, until one more span of ``size`` fits
        (``keep`` alone with it fits: ``add`` checked); how many were evicted."""
        traces = buffer.traces
        new_trace = keep is None
        kept: tuple[str, _Trace] | None = None
        evicted = 0
        while traces and (
            len(traces) + new_trace > self.max_traces
            or buffer.spans >= self.max_spans
            or buffer.bytes + size > self.max_bytes
        ):
            trace_id, trace = traces.popitem(last=False)
            if trace is keep:
                kept = (trace_id, trace)
                continue
            buffer.spans -= len(trace.spans)
            buffer.bytes -= trace.bytes
            evicted += 1
            if debug:
                log.debug(
                    "OTLP trace %s evicted from a full tenant buffer: %d spans",
                    trace_id,
                    len(trace.spans),
                )
        if kept is not None:  # back in its place, the oldest
            traces[kept[0]] = kept[1]
            traces.move_to_end(kept[0], last=False)
        return evicted

    def expire(self) -> int:
        """Forget the traces, of every tenant, whose root has not come within ``timeout``
        seconds of their first span; how many. O(tenants + expired traces)."""
        debug = log.isEnabledFor(logging.DEBUG)
        with self._lock:
            now = self._clock()
            horizon = now - self.timeout
            total = 0
            for tenant, buffer in list(self._tenants.items()):
                traces = buffer.traces
                expired = 0
                while traces:
                    trace_id = next(iter(traces))
                    trace = traces[trace_id]
                    if trace.first_seen > horizon:
                        break
                    del traces[trace_id]
                    buffer.spans -= len(trace.spans)
                    buffer.bytes -= trace.bytes
                    expired += 1
                    if debug:
                        log.debug(
                            "OTLP trace %s had no root span after %.0f s: %d spans forgotten",
                            trace_id,
                            self.timeout,
                            len(trace.spans),
                        )
                if not traces:
                    del self._tenants[tenant]
                self._count(tenant, "incomplete", expired)
                total += expired
            warning = self._report(now)
        if warning:
            log.warning(*warning)
        return total

    # -- counting and the summary line -------------------------------------------------------

    def _count(self, tenant: str, reason: str, n: int) -> None:
        if n <= 0:
            return
        self.dropped[reason] += n
        counts = self.dropped_by_tenant.get(tenant)
        if counts is None:
            counts = self.dropped_by_tenant[tenant] = Counter(dict.fromkeys(DROP_REASONS, 0))
        counts[reason] += n
        self._unlogged[reason] += n
        self._unlogged_tenants.add(tenant)

    def _report(self, now: float) -> tuple[Any, ...] | None:
        """The WARNING to log (outside the lock) if there were drops and the interval is over."""
        if not self._unlogged:
            return None
        if self._last_log is not None and now - self._last_log < self.log_interval:
            return None
        since = "since start"
        if self._last_log is not None:
            since = f"in the last {now - self._last_log:.0f} s"
        unlogged, tenants = self._unlogged, len(self._unlogged_tenants)
        self._unlogged, self._unlogged_tenants = Counter(), set()
        self._last_log = now
        return (
            "OTLP spans not judged %s: %d traces evicted from full tenant buffers, "
            "%d traces incomplete (no root span within %.0f s), %d oversize spans dropped, "
            "in %d tenant(s); pending now: %d traces, %d spans, ~%.1f MiB",
            since,
            unlogged["evicted"],
            unlogged["incomplete"],
            self.timeout,
            unlogged["oversize"],
            tenants,
            sum(len(t.traces) for t in self._tenants.values()),
            sum(t.spans for t in self._tenants.values()),
            sum(t.bytes for t in self._tenants.values()) / (1024 * 1024),
        )
