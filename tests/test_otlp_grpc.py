"""OTLP/gRPC in (issue 28): ``serve --otlp-grpc-port`` takes the OpenTelemetry SDK's own gRPC
exporter, with the same tokens, tenancy and limits as OTLP/HTTP."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from tests.test_otlp import ANSWER, CONTEXT, rag
from tests.test_otlp_conventions import FIRST, SAC, SECOND, TOKEN, bodies
from tests.test_serve import call, queued, serving
from tests.test_serve import rabbitmq as rabbitmq  # the fixture

grpc = pytest.importorskip("grpc")

TRACES = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
LOGS = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def grpc_serve(rabbitmq: str) -> Iterator[tuple[str, int]]:
    port = free_port()
    with serving(rabbitmq, "--otlp-grpc-port", str(port),
                 VEREDITO_OTLP_MAX_SPANS_PER_REQUEST="20") as base:  # fmt: skip
        yield base, port


def export(port: int, method: str, body: bytes, token: str | None) -> tuple[Any, bytes]:
    """One raw Export call: (status code, response bytes)."""
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary(method, request_serializer=None, response_deserializer=None)
        metadata = [("authorization", f"Bearer {token}")] if token else []
        try:
            return grpc.StatusCode.OK, call(body, metadata=metadata, timeout=20)
        except grpc.RpcError as exc:
            return exc.code(), b""


@pytest.mark.broker
def test_the_sdk_grpc_exporter_sends_spans_that_become_one_triple(
    grpc_serve: tuple[str, int], rabbitmq: str
) -> None:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    _, port = grpc_serve
    provider = TracerProvider(resource=Resource.create({"service.name": "sac-bot"}))
    exporter = OTLPSpanExporter(
        endpoint=f"http://127.0.0.1:{port}", insecure=True,
        headers={"authorization": f"Bearer {TOKEN}"},
    )  # fmt: skip
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    try:
        trace_id, _ = rag(provider.get_tracer("rag-app"), "Posso desistir da compra online?")
    finally:
        provider.shutdown()
    (envelope,) = queued(rabbitmq)
    triple = envelope["triple"]
    assert triple["id"] == trace_id and triple["metadata"]["app"] == "sac-bot"
    assert triple["query"] == "Posso desistir da compra online?"
    assert triple["context"] == CONTEXT and triple["answer"] == ANSWER


@pytest.mark.broker
def test_grpc_keeps_the_tokens_tenancy_and_limits(
    grpc_serve: tuple[str, int], rabbitmq: str
) -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
        ExportTraceServiceResponse,
    )

    _, port = grpc_serve
    chain = bodies("openinference-langchain")
    assert export(port, TRACES, chain[0], None)[0] == grpc.StatusCode.UNAUTHENTICATED
    assert (
        export(port, TRACES, chain[0], "nope-nope-nope-nope")[0] == grpc.StatusCode.UNAUTHENTICATED
    )
    assert export(port, TRACES, b"\xff\x00garbage", TOKEN)[0] == grpc.StatusCode.INVALID_ARGUMENT
    many = ExportTraceServiceRequest()
    for body in chain[:3]:
        part = ExportTraceServiceRequest()
        part.ParseFromString(body)
        many.resource_spans.extend(part.resource_spans)
    big = ExportTraceServiceRequest()
    for _ in range(7):  # 21 spans, over the limit of 20 a request
        big.resource_spans.extend(many.resource_spans)
    assert export(port, TRACES, big.SerializeToString(), TOKEN)[0] == (
        grpc.StatusCode.RESOURCE_EXHAUSTED
    )
    # tenancy: the first trace's children from one token and its root from another never meet
    first = chain[:9]  # the 9 spans of the first question, children first, the root last
    for body in first[:-1]:
        assert export(port, TRACES, body, SAC)[0] == grpc.StatusCode.OK
    status, reply = export(port, TRACES, first[-1], TOKEN)
    response = ExportTraceServiceResponse()
    response.ParseFromString(reply)
    assert status == grpc.StatusCode.OK and response.partial_success.rejected_spans == 1
    (alone,) = queued(rabbitmq)  # the root alone, without the other token's children
    assert alone["triple"]["context"] == [] and alone["triple"]["answer"] == FIRST
    for body in first[:-1]:
        assert export(port, TRACES, body, TOKEN)[0] == grpc.StatusCode.OK
    assert queued(rabbitmq) == []  # waiting for its root again, in this token's buffer
    assert export(port, TRACES, first[-1], TOKEN)[0] == grpc.StatusCode.OK
    (envelope,) = queued(rabbitmq)
    assert envelope["triple"]["answer"] == FIRST and len(envelope["triple"]["context"]) == 2


@pytest.mark.broker
def test_grpc_logs_join_their_tenants_traces(grpc_serve: tuple[str, int], rabbitmq: str) -> None:
    _, port = grpc_serve
    (traces,) = bodies("genai-openai-v2-event-content")
    (logs,) = bodies("genai-openai-v2-event-content", "logs")
    assert export(port, TRACES, traces, TOKEN)[0] == grpc.StatusCode.OK
    assert export(port, LOGS, logs, None)[0] == grpc.StatusCode.UNAUTHENTICATED
    assert export(port, LOGS, logs, SAC)[0] == grpc.StatusCode.OK  # another tenant's: no join
    assert queued(rabbitmq) == []
    assert export(port, LOGS, logs, TOKEN)[0] == grpc.StatusCode.OK
    envelopes = queued(rabbitmq)
    assert sorted(e["triple"]["answer"] for e in envelopes) == sorted([FIRST, SECOND])


def test_a_grpc_port_in_use_stops_serve(tmp_path: Any) -> None:
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "veredito", "serve", "--port", str(free_port()),
             "--otlp-grpc-port", str(holder.getsockname()[1])],
            env={**os.environ, "VEREDITO_INGEST_TOKENS": TOKEN,
                 "VEREDITO_BROKER_URL": "amqp://guest:guest@127.0.0.1:5672//"},
            cwd=ROOT, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    finally:
        holder.close()
    assert done.returncode == 2, done.stderr[-2000:]
    assert "OTLP/gRPC cannot listen" in done.stderr


# -- issue 23's limits over gRPC, as over HTTP ------------------------------------------------------
def refused(
    port: int, method: str, body: bytes, authorization: str | None = None
) -> tuple[Any, str, dict[str, Any]]:
    """One raw Export call with this ``authorization`` (as given): (status code, details,
    trailing metadata)."""
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        export = channel.unary_unary(method, request_serializer=None, response_deserializer=None)
        metadata = [("authorization", authorization)] if authorization is not None else []
        try:
            export(body, metadata=metadata, timeout=20)
        except grpc.RpcError as exc:
            return exc.code(), exc.details() or "", dict(exc.trailing_metadata() or ())
        return grpc.StatusCode.OK, "", {}


def retry_delay(trailers: dict[str, Any]) -> int:
    """The retry delay an OTLP exporter reads from an UNAVAILABLE (``RetryInfo``)."""
    from google.rpc.error_details_pb2 import RetryInfo

    return int(RetryInfo.FromString(trailers["google.rpc.retryinfo-bin"]).retry_delay.seconds)


@pytest.mark.broker
def test_grpc_refuses_what_http_refuses(rabbitmq: str) -> None:
    """Malformed or unknown ``authorization``: UNAUTHENTICATED; a message over
    VEREDITO_INGEST_MAX_BYTES or over the records a request may carry: RESOURCE_EXHAUSTED; spans
    and log records that cannot be used: partial_success; a full backlog: UNAVAILABLE with a
    retry delay, for traces and logs alike."""
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceResponse,
    )

    from tests.test_otlp_limits import DOC, ROOT_ID, logs_pb, span, traces_pb
    from tests.test_otlp_limits import rag as rag_trace

    port = free_port()
    with serving(
        rabbitmq, "--otlp-grpc-port", str(port), VEREDITO_OTLP_MAX_SPANS_PER_REQUEST="20",
        VEREDITO_INGEST_MAX_BYTES="65536", VEREDITO_OTLP_MAX_BYTES="60000",
        VEREDITO_INGEST_MAX_BACKLOG="1", VEREDITO_INGEST_BACKLOG_INTERVAL="3600",
    ) as base:  # fmt: skip
        trace = traces_pb(rag_trace("1" * 32))
        event = logs_pb([("1" * 32, "2" * 16, "gen_ai.user.message", "Qual o prazo?")])
        for method, body in ((TRACES, trace), (LOGS, event)):
            for authorization in (
                f"Basic {TOKEN}",
                "Bearer",
                TOKEN,
                f"Bearer {TOKEN}x",
                "Bearer nope-nope-nope-nope",
            ):
                code, details, _ = refused(port, method, body, authorization)
                assert code == grpc.StatusCode.UNAUTHENTICATED, (method, authorization)
                assert "VEREDITO_INGEST_TOKENS" in details
        # a message over VEREDITO_INGEST_MAX_BYTES (64 KiB)
        big_trace = traces_pb(
            rag_trace("2" * 32, span("2" * 32, "3" * 16, "s", ROOT_ID, x="x" * 70_000))
        )
        big_logs = logs_pb([("2" * 32, "3" * 16, "gen_ai.user.message", "x" * 70_000)])
        for method, body in ((TRACES, big_trace), (LOGS, big_logs)):
            code, _, _ = refused(port, method, body, f"Bearer {TOKEN}")
            assert code == grpc.StatusCode.RESOURCE_EXHAUSTED, method
        lines = [("4" * 32, f"{n:016x}", "", "an app's log line") for n in range(1, 22)]
        code, details, _ = refused(port, LOGS, logs_pb(lines), f"Bearer {TOKEN}")
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "21 log records" in details
        assert refused(port, LOGS, logs_pb(lines[:20]), f"Bearer {TOKEN}")[0] == grpc.StatusCode.OK
        # partial_success: a span over VEREDITO_OTLP_MAX_BYTES by itself, an event with no ids
        over = span("5" * 32, "3" * 16, "s", ROOT_ID, x="x" * 61_000)
        status, reply = export(port, TRACES, traces_pb(rag_trace("5" * 32, over)), SAC)
        said = ExportTraceServiceResponse.FromString(reply).partial_success
        assert status == grpc.StatusCode.OK and said.rejected_spans == 1
        assert "VEREDITO_OTLP_MAX_BYTES by itself" in said.error_message
        no_ids = logs_pb([("0" * 32, "0" * 16, "gen_ai.choice", "Sete dias."), *lines[:2]])
        status, reply = export(port, LOGS, no_ids, SAC)
        logs_said = ExportLogsServiceResponse.FromString(reply).partial_success
        assert status == grpc.StatusCode.OK and logs_said.rejected_log_records == 1
        assert "without a trace and span id" in logs_said.error_message
        (envelope,) = queued(rabbitmq)  # the trace, judged without its oversize span
        assert (
            envelope["triple"]["context"] == [DOC]
            and envelope["triple"]["metadata"]["app"] == "sac"
        )
        # the backlog: its limit is 1; two complete traces in one message are queued, and then
        # every export is refused until it drains
        both = traces_pb(rag_trace("6" * 32) + rag_trace("7" * 32))
        assert export(port, TRACES, both, TOKEN)[0] == grpc.StatusCode.OK
        for method, body in ((TRACES, trace), (LOGS, event)):
            code, details, trailers = refused(port, method, body, f"Bearer {TOKEN}")
            assert code == grpc.StatusCode.UNAVAILABLE, method
            assert "VEREDITO_INGEST_MAX_BACKLOG" in details and retry_delay(trailers) == 10
        # each call counted as the HTTP routes' are, its status as the HTTP code of that refusal
        # (the messages over the size limit are refused by gRPC itself, before serve sees them)
        metrics = call(base, "GET", "/metrics", token=None)[1]
        for route, code, least in (("grpc traces", "401", 5), ("grpc logs", "401", 5),
                                   ("grpc logs", "413", 1), ("grpc logs", "200", 2),
                                   ("grpc traces", "200", 2), ("grpc traces", "503", 1),
                                   ("grpc logs", "503", 1)):  # fmt: skip
            line = f'veredito_ingest_requests_total{{code="{code}",route="{route}"}}'
            counted = [float(x.split()[-1]) for x in metrics.splitlines() if x.startswith(line)]
            assert counted and counted[0] >= least, (route, code, counted)
    assert sorted(e["triple"]["id"] for e in queued(rabbitmq)) == ["6" * 32, "7" * 32]


@pytest.mark.broker
def test_grpc_without_the_broker_is_unavailable() -> None:
    """The broker away: UNAVAILABLE with a retry delay (HTTP's 503 and Retry-After), for traces
    and logs, over gRPC and OTLP/HTTP logs alike."""
    from tests.test_otlp_limits import logs_json, logs_pb, traces_pb
    from tests.test_otlp_limits import rag as rag_trace

    port = free_port()
    event = ("1" * 32, "2" * 16, "gen_ai.user.message", "Qual o prazo?")
    with serving("amqp://guest:guest@127.0.0.1:1//", "--otlp-grpc-port", str(port),
                 ready=False) as base:  # fmt: skip
        for method, body in ((TRACES, traces_pb(rag_trace("1" * 32))), (LOGS, logs_pb([event]))):
            code, details, trailers = refused(port, method, body, f"Bearer {TOKEN}")
            assert code == grpc.StatusCode.UNAVAILABLE, method
            assert "broker cannot be reached" in details and retry_delay(trailers) == 5
        status, said, headers = call(base, "POST", "/v1/logs", logs_json([event]))
        assert status == 503 and said["error"]["code"] == "broker_unavailable"
        assert headers["Retry-After"] == "5"


@pytest.mark.broker
def test_grpc_tenants_evict_only_their_own_traces(rabbitmq: str) -> None:
    """One token's flood of rootless traces and of GenAI events over gRPC evicts its own oldest
    traces, never another token's pending one, and is counted under its app. The flood is over
    256 KiB: parsed in another process, as over HTTP."""
    from tests.test_otlp_limits import event_flood, metric
    from tests.test_serve_security import rootless_export

    port = free_port()
    chain = bodies("openinference-langchain")
    flood = rootless_export(1, 8000)
    assert len(flood) > 256 * 1024
    with serving(rabbitmq, "--otlp-grpc-port", str(port), VEREDITO_OTLP_MAX_TRACES="50",
                 VEREDITO_INGEST_TRACE_TIMEOUT="120") as base:  # fmt: skip
        first = chain[:9]  # the 9 spans of the first question, children first, the root last
        for body in first[:-1]:
            assert export(port, TRACES, body, TOKEN)[0] == grpc.StatusCode.OK
        assert export(port, TRACES, flood, SAC)[0] == grpc.StatusCode.OK
        assert export(port, LOGS, event_flood(10**6, 200), SAC)[0] == grpc.StatusCode.OK
        assert export(port, TRACES, first[-1], TOKEN)[0] == grpc.StatusCode.OK
        (envelope,) = queued(rabbitmq)  # the unscoped token's trace kept all its spans
        assert envelope["triple"]["answer"] == FIRST and len(envelope["triple"]["context"]) == 2
        text = call(base, "GET", "/metrics", token=None)[1]
    # 8,000 traces for a quota of 50, then 200 events of traces of their own
    assert metric(text, 'veredito_ingest_otlp_dropped_total{app="sac",reason="evicted"}') == 8150
    assert 'veredito_ingest_otlp_dropped_total{app="unscoped"' not in text
