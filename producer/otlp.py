"""OpenTelemetry traces in: OTLP/HTTP spans assembled per trace into triples.

``decode`` reads an ``ExportTraceServiceRequest`` in protobuf (``opentelemetry-proto``'s
messages) or in OTLP/JSON (ids in hex, as that encoding says) into :class:`Span` values.
:class:`TraceAssembler` keeps the spans of each trace until its root span (no parent) arrives —
spans of one trace may come in several requests and in any order — and then maps them:

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
``gen_ai.*`` attributes. The buffer is bounded (``max_traces``); a trace whose root has not come
after ``timeout`` seconds, or that is pushed out by a full buffer, is counted and logged — never
dropped silently. Spans wait in memory until their root comes: a crash loses the incomplete
traces of that moment (a complete one is published with confirms like any triple).
"""

from __future__ import annotations

import json
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

__all__ = ["OTLPError", "Span", "TraceAssembler", "decode", "empty_response"]

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
    if content_type == PROTOBUF:
        return _decode_protobuf(data)
    try:
        body = json.loads(data)
    except ValueError as exc:
        raise OTLPError(f"not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise OTLPError("an OTLP/JSON export is an object with resourceSpans")
    return _decode_json(body)


def _decode_protobuf(data: bytes) -> list[Span]:
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
    spans = []
    for resource_spans in request.resource_spans:
        resource = {kv.key: _proto_value(kv.value) for kv in resource_spans.resource.attributes}
        service = resource.get("service.name")
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(
                    Span(
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_id=span.parent_span_id.hex(),
                        name=span.name,
                        start=int(span.start_time_unix_nano),
                        attributes={kv.key: _proto_value(kv.value) for kv in span.attributes},
                        service=service if isinstance(service, str) else None,
                    )
                )
    return spans


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


def _decode_json(body: dict[str, Any]) -> list[Span]:
    spans = []
    for resource_spans in _list(body.get("resourceSpans")):
        resource = _json_attributes(_dict(resource_spans.get("resource")).get("attributes"))
        service = resource.get("service.name")
        for scope_spans in _list(resource_spans.get("scopeSpans")):
            for span in _list(scope_spans.get("spans")):
                trace_id, span_id = span.get("traceId"), span.get("spanId")
                if not isinstance(trace_id, str) or not isinstance(span_id, str):
                    raise OTLPError("every span needs traceId and spanId (hex strings)")
                spans.append(
                    Span(
                        trace_id=trace_id.lower(),
                        span_id=span_id.lower(),
                        parent_id=str(span.get("parentSpanId") or "").lower(),
                        name=str(span.get("name") or ""),
                        start=_int(span.get("startTimeUnixNano")),
                        attributes=_json_attributes(span.get("attributes")),
                        service=service if isinstance(service, str) else None,
                    )
                )
    return spans


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


@dataclass
class _Pending:
    spans: list[Span] = field(default_factory=list)
    first_seen: float = field(default_factory=time.monotonic)


class TraceAssembler:
    def __init__(self, timeout: float = 30.0, max_traces: int = 10_000) -> None:
        self.timeout = timeout
        self.max_traces = max_traces
        self._pending: OrderedDict[str, _Pending] = OrderedDict()
        self.dropped = {"incomplete": 0, "evicted": 0}

    def __len__(self) -> int:
        return len(self._pending)

    def add(self, spans: list[Span]) -> list[dict[str, Any]]:
        """Take spans; return the triples of the traces their roots completed."""
        roots: list[str] = []
        for span in spans:
            pending = self._pending.get(span.trace_id)
            if pending is None:
                pending = self._pending[span.trace_id] = _Pending()
                self._evict()
            pending.spans.append(span)
            if not span.parent_id.strip("0"):
                roots.append(span.trace_id)
        completed = []
        for trace_id in dict.fromkeys(roots):
            pending = self._pending.pop(trace_id, None)
            if pending is not None:
                completed.append(triple_from(pending.spans))
        return completed

    def expire(self) -> int:
        """Forget traces whose root has not come within the timeout; how many."""
        horizon = time.monotonic() - self.timeout
        expired = 0
        while self._pending:
            trace_id, pending = next(iter(self._pending.items()))
            if pending.first_seen > horizon:
                break
            del self._pending[trace_id]
            expired += 1
        if expired:
            self.dropped["incomplete"] += expired
            log.warning(
                "%d traces had no root span after %.0f s: not judged", expired, self.timeout
            )
        return expired

    def _evict(self) -> None:
        while len(self._pending) > self.max_traces:
            self._pending.popitem(last=False)
            self.dropped["evicted"] += 1
            log.warning(
                "trace buffer full (%d): the oldest incomplete trace is dropped", self.max_traces
            )
