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

Records that are no GenAI event (an app's own log lines) are ignored. A GenAI event that cannot
be used — without a trace and span id, or dropped as oversize by the buffer — is rejected: the
reply is the protocol's ``partial_success`` (``rejected_log_records`` and the reasons).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from veredito.producer.otlp.decode import (
    _dict,
    _json_attributes,
    _json_value,
    _list,
    _plural,
    _proto_value,
    dropped_reasons,
)
from veredito.producer.otlp.spans import MAX_SPANS_PER_TRACE, PROTOBUF, OTLPError, Span

__all__ = [
    "Event",
    "Logs",
    "apply_events",
    "decode_logs",
    "needs_events",
    "partial_logs_success",
    "read_logs",
]

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


@dataclass
class Logs:
    """What a logs export holds: its GenAI events, how many log records it has in all, and the
    GenAI events among them that describe no span (no trace or span id)."""

    events: list[Event] = field(default_factory=list)
    records: int = 0
    unusable: int = 0

    def take(self, event: Event | None) -> None:
        self.records += 1
        if event is _UNUSABLE:
            self.unusable += 1
        elif event is not None:
            self.events.append(event)

    def reply(
        self, content_type: str, drops: Mapping[str, int], per_trace: int = MAX_SPANS_PER_TRACE
    ) -> tuple[bytes, str]:
        """The ``ExportLogsServiceResponse``: ``partial_success`` with the GenAI events that
        describe no span and those the buffer dropped (``drops``, as
        :meth:`~veredito.producer.otlp.buffer.TraceAssembler.add_events` filled it)."""
        dropped, reasons = dropped_reasons(drops, "log record", per_trace)
        if self.unusable:
            reasons.insert(
                0,
                f"{_plural(self.unusable, 'GenAI log record')} without a trace and span id "
                "(they describe no span)",
            )
        return partial_logs_success(content_type, self.unusable + dropped, "; ".join(reasons))


def decode_logs(data: bytes, content_type: str) -> list[Event]:
    """The GenAI events of an ``ExportLogsServiceRequest`` (protobuf or OTLP/JSON); records
    without a trace and span id, or without a name, are left out (they describe no span)."""
    return read_logs(data, content_type).events


def read_logs(data: bytes, content_type: str) -> Logs:
    """An ``ExportLogsServiceRequest`` (protobuf or OTLP/JSON) read: :class:`Logs`."""
    logs = Logs()
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
        for event in _protobuf_events(request):
            logs.take(event)
        return logs
    try:
        body = json.loads(data)
    except ValueError as exc:
        raise OTLPError(f"not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise OTLPError("an OTLP/JSON logs export is an object with resourceLogs")
    for event in _json_events(body):
        logs.take(event)
    return logs


# a GenAI event without a trace and span id: it describes no span
_UNUSABLE = Event("", "", "", {})


def _event(trace_id: str, span_id: str, name: Any, attributes: dict[str, Any], body: Any
           ) -> Event | None:  # fmt: skip
    """The record's GenAI event; None for a record that is none (an app's log line);
    :data:`_UNUSABLE` for one that describes no span."""
    name = name or attributes.get("event.name")
    if not isinstance(name, str) or not name.startswith("gen_ai."):
        return None
    if not (trace_id.strip("0") and span_id.strip("0")):
        return _UNUSABLE
    return Event(trace_id.lower(), span_id.lower(), name, attributes, body)


def _protobuf_events(request: Any) -> Iterator[Event | None]:
    """Each record's :func:`_event`, None included (every record is counted)."""
    for resource_logs in request.resource_logs:
        for scope_logs in resource_logs.scope_logs:
            for record in scope_logs.log_records:
                yield _event(
                    record.trace_id.hex(),
                    record.span_id.hex(),
                    getattr(record, "event_name", ""),
                    {kv.key: _proto_value(kv.value) for kv in record.attributes},
                    _proto_value(record.body) if record.HasField("body") else None,
                )


def _json_events(body: dict[str, Any]) -> Iterator[Event | None]:
    for resource_logs in _list(body.get("resourceLogs")):
        for scope_logs in _list(resource_logs.get("scopeLogs")):
            for record in _list(scope_logs.get("logRecords")):
                yield _event(
                    str(record.get("traceId") or ""),
                    str(record.get("spanId") or ""),
                    record.get("eventName"),
                    _json_attributes(record.get("attributes")),
                    _json_value(_dict(record.get("body"))),
                )


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
