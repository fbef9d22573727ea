"""GenAI events sent as OTLP logs (``POST /v1/logs``), joined to the spans they describe.

OpenTelemetry's GenAI instrumentations can put the messages of an LLM call in log records instead
of span attributes (``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=EVENT_ONLY``): each
record carries the trace and span id of its chat span, and

- ``gen_ai.client.inference.operation.details`` (current): ``gen_ai.input.messages``,
  ``gen_ai.output.messages`` and ``gen_ai.system_instructions`` as structured attributes;
- the older per-message events ``gen_ai.system.message``, ``gen_ai.user.message``,
  ``gen_ai.assistant.message``, ``gen_ai.tool.message`` (body ``{"content"}``) and
  ``gen_ai.choice`` (body ``{"message": {"content"}}``).

The event's name is the record's ``event_name``, else its ``event.name`` attribute. Events are
kept beside their trace's spans (:class:`~veredito.producer.otlp.buffer.TraceAssembler`) and
become the chat span's ``gen_ai.input.messages``/``gen_ai.output.messages`` when the trace is
assembled; a span's own attributes win.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from veredito.producer.otlp.decode import (
    _dict,
    _json_attributes,
    _json_value,
    _list,
    _proto_value,
)
from veredito.producer.otlp.spans import PROTOBUF, OTLPError, Span

__all__ = ["Event", "apply_events", "decode_logs", "needs_events", "partial_logs_success"]

DETAILS = "gen_ai.client.inference.operation.details"
_ROLES = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
_CONTENT = ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.prompt.0.content",
            "gen_ai.completion.0.content")  # fmt: skip
_CALLS = ("chat", "text_completion", "generate_content")


@dataclass
class Event:
    trace_id: str
    span_id: str
    name: str
    attributes: dict[str, Any]
    body: Any = None

    def size(self) -> int:
        """A rough estimate of its memory, as :func:`~.buffer.span_size` counts a span's."""
        return 200 + len(json.dumps([self.attributes, self.body], default=str))


def decode_logs(data: bytes, content_type: str) -> list[Event]:
    """The GenAI events of an ``ExportLogsServiceRequest`` (protobuf or OTLP/JSON); records
    without a trace and span id, or without a name, are left out (they describe no span)."""
    if content_type == PROTOBUF:
        try:
            from google.protobuf.message import DecodeError
            from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
                ExportLogsServiceRequest,
            )
        except ImportError as exc:  # pragma: no cover - the [otel] extra is missing
            raise OTLPError("OTLP needs opentelemetry-proto: pip install 'veredito[otel]'") from exc
        request = ExportLogsServiceRequest()
        try:
            request.ParseFromString(data)
        except DecodeError as exc:
            raise OTLPError(f"not an OTLP protobuf logs export: {exc}") from None
        return list(_protobuf_events(request))
    try:
        body = json.loads(data)
    except ValueError as exc:
        raise OTLPError(f"not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise OTLPError("an OTLP/JSON logs export is an object with resourceLogs")
    return list(_json_events(body))


def _event(trace_id: str, span_id: str, name: Any, attributes: dict[str, Any], body: Any
           ) -> Event | None:  # fmt: skip
    name = name or attributes.get("event.name")
    if not (trace_id.strip("0") and span_id.strip("0")) or not isinstance(name, str):
        return None
    if not name.startswith("gen_ai."):
        return None
    return Event(trace_id.lower(), span_id.lower(), name, attributes, body)


def _protobuf_events(request: Any) -> Iterator[Event]:
    for resource_logs in request.resource_logs:
        for scope_logs in resource_logs.scope_logs:
            for record in scope_logs.log_records:
                event = _event(
                    record.trace_id.hex(),
                    record.span_id.hex(),
                    getattr(record, "event_name", ""),
                    {kv.key: _proto_value(kv.value) for kv in record.attributes},
                    _proto_value(record.body) if record.HasField("body") else None,
                )
                if event is not None:
                    yield event


def _json_events(body: dict[str, Any]) -> Iterator[Event]:
    for resource_logs in _list(body.get("resourceLogs")):
        for scope_logs in _list(resource_logs.get("scopeLogs")):
            for record in _list(scope_logs.get("logRecords")):
                event = _event(
                    str(record.get("traceId") or ""),
                    str(record.get("spanId") or ""),
                    record.get("eventName"),
                    _json_attributes(record.get("attributes")),
                    _json_value(_dict(record.get("body"))),
                )
                if event is not None:
                    yield event


def needs_events(span: Span) -> bool:
    """An LLM call of the GenAI conventions without its messages: they may come as events."""
    attributes = span.attributes
    return attributes.get("gen_ai.operation.name") in _CALLS and not any(
        key in attributes for key in _CONTENT
    )


def apply_events(spans: Sequence[Span], events: Sequence[Event]) -> None:
    """Put each span's events into its attributes (the attributes it already has win)."""
    if not events:
        return
    by_span: dict[str, list[Event]] = {}
    for event in events:
        by_span.setdefault(event.span_id, []).append(event)
    for span in spans:
        mine = by_span.get(span.span_id)
        if not mine:
            continue
        found: dict[str, Any] = {}
        inputs: list[dict[str, Any]] = []
        outputs: list[dict[str, Any]] = []
        for event in mine:
            if event.name == DETAILS:
                for key in ("gen_ai.input.messages", "gen_ai.output.messages",
                            "gen_ai.system_instructions"):  # fmt: skip
                    if key in event.attributes:
                        found[key] = event.attributes[key]
            elif event.name in _ROLES:
                body = event.body if isinstance(event.body, dict) else {}
                inputs.append({"role": _ROLES[event.name], "content": body.get("content")})
            elif event.name == "gen_ai.choice":
                body = event.body if isinstance(event.body, dict) else {}
                message = body.get("message")
                content = message.get("content") if isinstance(message, dict) else None
                outputs.append({"role": "assistant", "content": content})
        if inputs:
            found.setdefault("gen_ai.input.messages", inputs)
        if outputs:
            found.setdefault("gen_ai.output.messages", outputs)
        for key, value in found.items():
            span.attributes.setdefault(key, value)


def partial_logs_success(content_type: str, rejected: int, message: str) -> tuple[bytes, str]:
    """An ``ExportLogsServiceResponse``: empty for a full success, else ``partial_success``
    with the log records rejected."""
    if rejected <= 0:
        return (b"", PROTOBUF) if content_type == PROTOBUF else (b"{}", "application/json")
    if content_type == PROTOBUF:
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
            ExportLogsServiceResponse,
        )

        response = ExportLogsServiceResponse()
        response.partial_success.rejected_log_records = rejected
        response.partial_success.error_message = message
        return response.SerializeToString(), PROTOBUF
    body = {"partialSuccess": {"rejectedLogRecords": str(rejected), "errorMessage": message}}
    return json.dumps(body).encode(), "application/json"
