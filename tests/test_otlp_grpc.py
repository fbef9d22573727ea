"""OTLP/gRPC in (issue 28): ``serve --otlp-grpc-port`` takes the OpenTelemetry SDK's own gRPC
exporter, with the same tokens, tenancy and limits as OTLP/HTTP."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from tests.test_otlp import ANSWER, CONTEXT, rag
from tests.test_otlp_conventions import FIRST, SAC, SECOND, TOKEN, bodies
from tests.test_serve import queued, serving
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
