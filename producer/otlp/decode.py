"""OTLP/HTTP trace exports decoded into :class:`~veredito.producer.otlp.spans.Span` values:
``ExportTraceServiceRequest`` in protobuf (``opentelemetry-proto``'s messages) or in OTLP/JSON (ids
in hex, as that encoding says)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator, Mapping
from typing import Any

from veredito.producer.otlp.spans import (
    ITEM_OVERHEAD,
    MAX_SPANS_PER_TRACE,
    PROTOBUF,
    SPAN_OVERHEAD,
    OTLPError,
    Span,
    nested_size,
)

__all__ = [
    "decode",
    "decode_iter",
    "dropped_reasons",
    "empty_response",
    "partial_success",
    "traces_reply",
]


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
    return _protobuf_spans(request, "flags" in _span_fields(ExportTraceServiceRequest))


def _span_fields(request_type: Any) -> Any:
    """The fields of the Span message (``flags`` came with OTLP 1.1; opentelemetry-proto
    before 1.23 has none)."""
    scope_spans = request_type.DESCRIPTOR.fields_by_name["resource_spans"].message_type
    spans = scope_spans.fields_by_name["scope_spans"].message_type.fields_by_name["spans"]
    return spans.message_type.fields_by_name


def _protobuf_spans(request: Any, has_flags: bool = True) -> Iterator[Span]:
    """The request's spans, each sized as it is read (:attr:`Span.size`: what
    :func:`~veredito.producer.otlp.buffer.span_size` would count, without a second walk)."""
    hexes: dict[bytes, str] = {}
    for resource_spans in request.resource_spans:
        resource = {kv.key: _proto_value(kv.value) for kv in resource_spans.resource.attributes}
        service = resource.get("service.name")
        if not isinstance(service, str):
            service = None
        base = SPAN_OVERHEAD + (len(service) if service else 0)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                pairs = span.attributes
                attributes: dict[str, Any] = {}
                size = base + len(pairs) * ITEM_OVERHEAD
                nested: list[Any] = []
                for kv in pairs:
                    key, value = kv.key, kv.value
                    found = value.string_value
                    if found:  # most attributes are text: read and sized at once
                        attributes[key] = found
                        size += len(key) + len(found)
                        continue
                    found = attributes[key] = _proto_value(value)
                    size += len(key)
                    if isinstance(found, str):  # bytes, read as hex
                        size += len(found)
                    elif isinstance(found, (list, dict)):
                        nested.append(found)
                if nested:
                    size += nested_size(nested)
                raw = span.trace_id
                trace_id = hexes.get(raw)
                if trace_id is None:  # the spans of a trace mostly come together
                    trace_id = hexes[raw] = raw.hex()
                span_id = span.span_id.hex()
                parent_id = span.parent_span_id.hex()
                name = span.name
                yield Span(
                    trace_id,
                    span_id,
                    parent_id,
                    name,
                    span.start_time_unix_nano,
                    attributes,
                    service,
                    resource,
                    span.flags if has_flags else 0,
                    # a key said twice is kept once: then span_size counts it at buffering
                    size + len(trace_id) + len(span_id) + len(parent_id) + len(name)
                    if len(attributes) == len(pairs)
                    else 0,
                    span.kind,
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
        if not isinstance(service, str):
            service = None
        base = SPAN_OVERHEAD + (len(service) if service else 0)
        for scope_spans in _list(resource_spans.get("scopeSpans")):
            for span in _list(scope_spans.get("spans")):
                trace_id, span_id = span.get("traceId"), span.get("spanId")
                if not isinstance(trace_id, str) or not isinstance(span_id, str):
                    raise OTLPError("every span needs traceId and spanId (hex strings)")
                attributes, size = _sized_attributes(span.get("attributes"))
                trace_id, span_id = trace_id.lower(), span_id.lower()
                parent_id = str(span.get("parentSpanId") or "").lower()
                name = str(span.get("name") or "")
                if size:
                    size += base + len(trace_id) + len(span_id) + len(parent_id) + len(name)
                yield Span(
                    trace_id,
                    span_id,
                    parent_id,
                    name,
                    _int(span.get("startTimeUnixNano")),
                    attributes,
                    service,
                    resource,
                    _int(flags) if (flags := span.get("flags")) is not None else 0,
                    size,
                    _kind(span.get("kind")),
                )


_KINDS = {"SPAN_KIND_SERVER": 2, "SPAN_KIND_CONSUMER": 5}


def _kind(value: Any) -> int:
    """OTLP/JSON's span ``kind``: an integer, or (as protobuf's JSON mapping also allows) the
    enum's name; 0 (unspecified) for anything else."""
    if isinstance(value, int):
        return value
    return _KINDS.get(value, 0) if isinstance(value, str) else 0


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


def _sized_attributes(items: Any) -> tuple[dict[str, Any], int]:
    """:func:`_json_attributes` and what :func:`~veredito.producer.otlp.buffer.span_size`
    counts for them, in one walk; the size 0 (sized at buffering) when a key is said twice."""
    attributes: dict[str, Any] = {}
    if not isinstance(items, list):
        return attributes, 0
    size = taken = 0
    nested: list[Any] = []
    for item in items:
        key = found = None
        try:  # most attributes are text: read and sized at once
            key = item["key"]
            found = item["value"]["stringValue"]
        except (KeyError, TypeError, IndexError):
            pass
        if type(key) is str and type(found) is str:
            attributes[key] = found
            size += len(key) + len(found)
            taken += 1
            continue
        if type(item) is not dict or item.get("key") is None:  # the long way
            continue
        key = str(item["key"])
        found = attributes[key] = _json_value(_dict(item.get("value")))
        size += len(key)
        taken += 1
        if isinstance(found, (str, bytes)):
            size += len(found)
        elif isinstance(found, (list, dict)):
            nested.append(found)
    if taken != len(attributes):
        return attributes, 0
    return attributes, size + taken * ITEM_OVERHEAD + (nested_size(nested) if nested else 0)


def _json_value(value: dict[str, Any]) -> Any:
    for kind in ("stringValue", "boolValue", "doubleValue"):
        if kind in value:
            return value[kind]
    if "bytesValue" in value:  # base64 in OTLP/JSON: hex, as the protobuf path gives it
        try:
            return base64.b64decode(str(value["bytesValue"]), validate=True).hex()
        except ValueError:
            raise OTLPError("an attribute's bytesValue is not base64") from None
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


def partial_success(content_type: str, rejected_spans: int, message: str) -> tuple[bytes, str]:
    """An ``ExportTraceServiceResponse`` that says ``rejected_spans`` spans could not become a
    triple and why (OTLP's ``partial_success``), in the request's encoding; the full success's
    empty body when none was rejected."""
    if rejected_spans <= 0:
        return empty_response(content_type)
    if content_type == PROTOBUF:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceResponse,
        )

        response = ExportTraceServiceResponse()
        response.partial_success.rejected_spans = rejected_spans
        response.partial_success.error_message = message
        return response.SerializeToString(), PROTOBUF
    body = {"partialSuccess": {"rejectedSpans": str(rejected_spans), "errorMessage": message}}
    return json.dumps(body).encode(), "application/json"


def _plural(count: int, unit: str) -> str:
    return f"{count} {unit}" if count == 1 else f"{count} {unit}s"


def dropped_reasons(
    drops: Mapping[str, int], unit: str = "span", per_trace: int = MAX_SPANS_PER_TRACE
) -> tuple[int, list[str]]:
    """What a request lost as oversize (the ``drops`` a
    :class:`~veredito.producer.otlp.buffer.TraceAssembler` add filled): how many of its
    ``unit`` (spans, log records), and one reason a kind, naming the setting that bounds it.
    Traces evicted to make room are not counted: they were taken by earlier requests."""
    texts = {
        "item_bytes": "each over VEREDITO_OTLP_MAX_BYTES by itself",
        "trace_items": f"each past the {per_trace} a trace may hold",
        "trace_quota": "each past what one trace may take of its token's quota "
        "(VEREDITO_OTLP_MAX_SPANS, VEREDITO_OTLP_MAX_BYTES)",
    }
    total, reasons = 0, []
    for detail, text in texts.items():
        count = drops.get(detail, 0)
        if count > 0:
            total += count
            reasons.append(f"{_plural(count, unit)} dropped as oversize ({text})")
    return total, reasons


def traces_reply(
    content_type: str, rejected_spans: int, reasons: list[str], drops: Mapping[str, int]
) -> tuple[bytes, str]:
    """The reply to a trace export: :func:`partial_success` with the spans that make no triple
    (``rejected_spans``, ``reasons``) and those the buffer dropped as oversize (``drops``)."""
    dropped, why = dropped_reasons(drops)
    return partial_success(content_type, rejected_spans + dropped, "; ".join(why + reasons))
