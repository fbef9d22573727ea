"""What ``serve`` tells and refuses over OTLP/HTTP beyond the happy path (issues 23 and 28): a
trace not judged is counted with its reason; spans and GenAI log records that are dropped are
told in ``partial_success``; ``POST /v1/logs`` holds issue 23's limits as ``/v1/traces`` does
(records per request, body size, backlog, each token's own quota). A real ``serve`` on a real
broker throughout; OTLP/gRPC's side is in ``tests/test_otlp_grpc.py``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.test_otlp_conventions import FIRST, SAC, SECOND, TOKEN, bodies, post
from tests.test_serve import call, queued, serving
from tests.test_serve import rabbitmq as rabbitmq  # the fixture
from veredito.producer.otlp import PROTOBUF

DOC = "O prazo de arrependimento é de 7 dias a partir do recebimento do produto."
ROOT_ID, RETRIEVER_ID = "ab" * 8, "cd" * 8


# -- exports, in OTLP/JSON or protobuf -------------------------------------------------------------
def attr(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "value": {"stringValue": value}}


def span(
    trace_id: str, span_id: str, name: str, parent: str = "", **attributes: str
) -> dict[str, Any]:
    """An OTLP/JSON span (``attributes`` with dots as ``__``)."""
    found = {
        "traceId": trace_id,
        "spanId": span_id,
        "name": name,
        "startTimeUnixNano": "1700000000000000000",
        "attributes": [attr(key.replace("__", "."), value) for key, value in attributes.items()],
    }
    if parent:
        found["parentSpanId"] = parent
    return found


def rag(trace_id: str, *extra: dict[str, Any]) -> list[dict[str, Any]]:
    """A complete trace: a chain root (question, answer) around a retriever (one document);
    ``extra`` spans go between the two, the root last (as SDKs export it)."""
    return [
        span(trace_id, RETRIEVER_ID, "retrieve", ROOT_ID, openinference__span__kind="RETRIEVER",
             retrieval__documents__0__document__content=DOC),
        *extra,
        span(trace_id, ROOT_ID, "rag", openinference__span__kind="CHAIN",
             input__value="Qual o prazo para desistir?", output__value=FIRST),
    ]  # fmt: skip


def traces_json(spans: list[dict[str, Any]]) -> bytes:
    resource = {"attributes": [attr("service.name", "svc")]}
    return json.dumps(
        {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": spans}]}]}
    ).encode()


def traces_pb(spans: list[dict[str, Any]]) -> bytes:
    """The same spans as an ``ExportTraceServiceRequest``."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    service = resource_spans.resource.attributes.add()
    service.key, service.value.string_value = "service.name", "svc"
    out = resource_spans.scope_spans.add().spans
    for given in spans:
        made = out.add()
        made.trace_id = bytes.fromhex(given["traceId"])
        made.span_id = bytes.fromhex(given["spanId"])
        made.parent_span_id = bytes.fromhex(given.get("parentSpanId", ""))
        made.name = given["name"]
        made.start_time_unix_nano = int(given["startTimeUnixNano"])
        for item in given["attributes"]:
            kv = made.attributes.add()
            kv.key, kv.value.string_value = item["key"], item["value"]["stringValue"]
    return request.SerializeToString()


# a log record: (trace id or "", span id or "", event name or "", its body's content)
Record = tuple[str, str, str, str]


def logs_json(records: list[Record]) -> bytes:
    out = []
    for trace_id, span_id, name, content in records:
        made: dict[str, Any] = {"body": {"kvlistValue": {"values": [attr("content", content)]}}}
        if trace_id:
            made.update(traceId=trace_id, spanId=span_id)
        if name:
            made["eventName"] = name
        out.append(made)
    return json.dumps({"resourceLogs": [{"scopeLogs": [{"logRecords": out}]}]}).encode()


def logs_pb(records: list[Record], base: bytes = b"") -> bytes:
    """An ``ExportLogsServiceRequest`` of these records (after ``base``'s, when given)."""
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    request = ExportLogsServiceRequest.FromString(base)
    out = request.resource_logs.add().scope_logs.add().log_records
    for trace_id, span_id, name, content in records:
        made = out.add()
        made.trace_id, made.span_id = bytes.fromhex(trace_id), bytes.fromhex(span_id)
        made.event_name = name
        kv = made.body.kvlist_value.values.add()
        kv.key, kv.value.string_value = "content", content
    return request.SerializeToString()


def event_flood(start: int, count: int) -> bytes:
    """``count`` GenAI events, each of its own trace (whose spans never come), as protobuf."""
    return logs_pb(
        [(f"{n:032x}", "f" * 16, "gen_ai.user.message", "oi") for n in range(start, start + count)]
    )


def metric(text: str, series: str) -> float | None:
    """The value of one series in a /metrics text; None when it is not there."""
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    return None


def metrics(base: str) -> str:
    text = call(base, "GET", "/metrics", token=None)[1]
    assert isinstance(text, str)
    return text


# -- a trace not judged: counted, with its reason -------------------------------------------------
@pytest.mark.broker
def test_a_trace_not_judged_is_counted_with_its_reason_and_app(rabbitmq: str) -> None:
    """Found: ``veredito_ingest_traces_total{result="not_judged"}`` had no reason, and the
    assembler's count by reason was never exported."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceResponse,
    )

    retriever_only = bodies("openinference-separate")[0]  # a retriever with no span around it
    with serving(rabbitmq) as base:
        for token in (SAC, TOKEN, SAC):
            status, answer, _ = post(base, "/v1/traces", retriever_only, f"Bearer {token}")
            reply = ExportTraceServiceResponse.FromString(answer)
            assert status == 200 and reply.partial_success.rejected_spans == 1
        text = metrics(base)
    series = "veredito_ingest_otlp_not_judged_total"
    assert metric(text, f'{series}{{app="sac",reason="root_is_retriever"}}') == 2.0  # SAC's app
    assert metric(text, f'{series}{{app="unscoped",reason="root_is_retriever"}}') == 1.0
    assert metric(text, 'veredito_ingest_traces_total{result="not_judged"}') == 3.0
    assert [line for line in text.splitlines() if line.startswith(series + "{")] == [
        f'{series}{{app="sac",reason="root_is_retriever"}} 2.0',
        f'{series}{{app="unscoped",reason="root_is_retriever"}} 1.0',
    ]
    assert queued(rabbitmq) == []  # never judged as an answer


# -- partial_success: spans dropped as oversize ----------------------------------------------------
@pytest.mark.broker
def test_spans_dropped_as_oversize_are_told_in_partial_success(rabbitmq: str) -> None:
    """Found: a span the buffer dropped (past a trace's 2,000 spans, or over the byte quota by
    itself) was answered with an empty success."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceResponse,
    )

    first, second = "a" * 32, "b" * 32
    # 2,002 spans under the root: the first 2,000 are kept (the retriever among them), the two
    # past them are dropped, and the root, exported last, is always taken
    many = [span(first, f"{n:016x}", "step", ROOT_ID) for n in range(2, 2003)]
    with serving(rabbitmq, VEREDITO_OTLP_MAX_BYTES=str(1 << 20)) as base:
        status, said, _ = call(base, "POST", "/v1/traces", traces_json(rag(first, *many)))
        assert status == 200, said
        assert said["partialSuccess"]["rejectedSpans"] == "2"
        assert said["partialSuccess"]["errorMessage"] == (
            "2 spans dropped as oversize (each past the 2000 a trace may hold)"
        )
        (envelope,) = queued(rabbitmq)  # the trace is judged without them
        assert envelope["triple"]["context"] == [DOC] and envelope["triple"]["answer"] == FIRST
        # protobuf: a span over the token's byte quota by itself
        huge = span(second, "2" * 16, "step", ROOT_ID, big="x" * (1 << 20))
        body = traces_pb(rag(second, huge))
        status, answer, _ = post(base, "/v1/traces", body, f"Bearer {TOKEN}")
        reply = ExportTraceServiceResponse.FromString(answer)
        assert status == 200 and reply.partial_success.rejected_spans == 1
        assert reply.partial_success.error_message == (
            "1 span dropped as oversize (each over VEREDITO_OTLP_MAX_BYTES by itself)"
        )
        (envelope,) = queued(rabbitmq)
        assert envelope["triple"]["id"] == second and envelope["triple"]["context"] == [DOC]
        # a full success is still the empty reply
        status, answer, _ = post(base, "/v1/traces", traces_pb(rag("c" * 32)), f"Bearer {TOKEN}")
        assert status == 200 and answer == b""
        text = metrics(base)
    assert metric(text, 'veredito_ingest_otlp_dropped_total{app="unscoped",reason="oversize"}') == 3


# -- partial_success: GenAI log records that cannot be used -----------------------------------------
@pytest.mark.broker
def test_log_records_that_cannot_be_used_are_told_in_partial_success(rabbitmq: str) -> None:
    """Found: /v1/logs answered an empty success whatever it could not use. GenAI events with no
    trace and span id, or over the quota by themselves, are rejected; an app's own log lines
    are not GenAI events and are ignored, not rejected; the good events still join."""
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse

    (traces,) = bodies("genai-openai-v2-event-content")  # its LLM calls' messages come as events
    (logs,) = bodies("genai-openai-v2-event-content", "logs")  # 2 good events
    bad = logs_pb(
        [
            ("0" * 32, "0" * 16, "gen_ai.user.message", "Qual o prazo?"),  # no ids: no span
            ("d" * 32, "e" * 16, "", "an app's own log line"),  # no GenAI event: ignored
            ("d" * 32, "e" * 16, "gen_ai.user.message", "x" * (1 << 20)),  # over 1 MiB alone
        ],
        base=logs,
    )
    with serving(rabbitmq, VEREDITO_OTLP_MAX_BYTES=str(1 << 20)) as base:
        assert post(base, "/v1/traces", traces, f"Bearer {TOKEN}")[0] == 200  # held for events
        status, answer, content_type = post(base, "/v1/logs", bad, f"Bearer {TOKEN}")
        reply = ExportLogsServiceResponse.FromString(answer)
        assert status == 200 and content_type == PROTOBUF
        assert reply.partial_success.rejected_log_records == 2
        assert reply.partial_success.error_message == (
            "1 GenAI log record without a trace and span id (they describe no span); "
            "1 log record dropped as oversize (each over VEREDITO_OTLP_MAX_BYTES by itself)"
        )
        envelopes = queued(rabbitmq)  # the good events joined their spans
        assert sorted(e["triple"]["answer"] for e in envelopes) == sorted([FIRST, SECOND])
        # OTLP/JSON: the same, in its encoding; an export of app log lines only is a success
        no_ids = [("", "", "gen_ai.choice", "Sete dias."), ("", "", "gen_ai.user.message", "?")]
        status, said, _ = call(base, "POST", "/v1/logs", logs_json(no_ids))
        assert status == 200 and said["partialSuccess"]["rejectedLogRecords"] == "2"
        assert said["partialSuccess"]["errorMessage"].startswith("2 GenAI log records without")
        lines = [("d" * 32, "e" * 16, "", "app log")] * 3
        assert call(base, "POST", "/v1/logs", logs_json(lines))[:2] == (200, {})


# -- issue 23's limits on /v1/logs, as on /v1/traces ----------------------------------------------
@pytest.mark.broker
def test_logs_hold_the_limits_of_http_traces(rabbitmq: str) -> None:
    """Too many records in a request or too large a body: 413, as for spans; a full backlog:
    503 with Retry-After, for logs as for traces; nothing queued by a refused request."""
    with serving(
        rabbitmq, VEREDITO_OTLP_MAX_SPANS_PER_REQUEST="20", VEREDITO_INGEST_MAX_BYTES="65536",
        VEREDITO_INGEST_MAX_BACKLOG="1", VEREDITO_INGEST_BACKLOG_INTERVAL="3600",
    ) as base:  # fmt: skip
        lines: list[Record] = [("d" * 32, f"{n:016x}", "", "app log") for n in range(1, 22)]
        for path, body in (
            ("/v1/logs", logs_json(lines)),  # 21 records, GenAI events or not: each is read
            ("/v1/traces", traces_json([span("e" * 32, f"{n:016x}", "s") for n in range(1, 22)])),
        ):
            status, said, _ = call(base, "POST", path, body)
            assert status == 413 and said["error"]["code"] == "too_many_items", (path, said)
            assert "carries 21" in said["error"]["message"]
            assert "VEREDITO_OTLP_MAX_SPANS_PER_REQUEST" in said["error"]["message"]
        at_limit = logs_pb(lines[:20])
        assert call(base, "POST", "/v1/logs", at_limit, content_type=PROTOBUF)[0] == 200
        big = logs_json([("d" * 32, "e" * 16, "gen_ai.user.message", "x" * 70_000)])
        status, said, _ = call(base, "POST", "/v1/logs", big)
        assert status == 413 and "VEREDITO_INGEST_MAX_BYTES" in said["error"]["message"]
        # two complete traces: queued (a request is refused only when the backlog is already
        # over), and now the backlog is over its limit of 1
        two = traces_json(rag("1" * 32) + rag("2" * 32))
        assert call(base, "POST", "/v1/traces", two)[0] == 200
        for path, body in (
            ("/v1/logs", logs_json(lines[:1])),
            ("/v1/traces", traces_json(rag("3" * 32))),
        ):
            status, said, headers = call(base, "POST", path, body)
            assert status == 503 and said["error"]["code"] == "backlog_full", (path, said)
            assert headers["Retry-After"] == "10"
    assert sorted(e["triple"]["id"] for e in queued(rabbitmq)) == ["1" * 32, "2" * 32]


@pytest.mark.broker
def test_a_tokens_log_records_evict_only_its_own_traces(rabbitmq: str) -> None:
    """GenAI events count against their token's quota of pending traces: a flood of them from
    one token evicts its own oldest traces, never another token's, and is counted under its
    app."""
    trace = "f" * 32
    limits = {"VEREDITO_OTLP_MAX_TRACES": "50", "VEREDITO_INGEST_TRACE_TIMEOUT": "120"}
    with serving(rabbitmq, **limits) as base:
        *children, root = rag(trace)
        assert call(base, "POST", "/v1/traces", traces_json(children), token=TOKEN)[0] == 200
        status, answer, _ = post(base, "/v1/logs", event_flood(1, 200), f"Bearer {SAC}")
        assert status == 200 and answer == b""  # its events were taken; older ones made room
        assert call(base, "POST", "/v1/traces", traces_json([root]), token=TOKEN)[0] == 200
        (envelope,) = queued(rabbitmq)
        assert envelope["triple"]["id"] == trace and envelope["triple"]["context"] == [DOC]
        text = metrics(base)
    assert metric(text, 'veredito_ingest_otlp_dropped_total{app="sac",reason="evicted"}') == 150
    assert 'veredito_ingest_otlp_dropped_total{app="unscoped"' not in text
    assert metric(text, 'veredito_ingest_otlp_pending{unit="traces"}') == 50  # SAC's, at its quota
