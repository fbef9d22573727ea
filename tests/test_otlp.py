"""OpenTelemetry in: the real SDK and its OTLP/HTTP exporter posting a small instrumented RAG
function's spans to ``serve``, OTLP/JSON split across requests, and the span mapping."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.test_serve import call, queued, serving
from tests.test_serve import rabbitmq as rabbitmq  # the fixture
from veredito.producer.otlp import Span, TraceAssembler, decode, triple_from

CONTEXT = ["Art. 49 do CDC: sete dias para desistir.", "Vale para compras fora da loja."]
ANSWER = "Você tem sete dias para desistir da compra."


@pytest.fixture
def tracer_to(request: pytest.FixtureRequest) -> Iterator[Any]:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    providers = []

    def make(base: str, token: str = "tok-a-4c1b9e77d2f0") -> Any:
        provider = TracerProvider(resource=Resource.create({"service.name": "sac-bot"}))
        exporter = OTLPSpanExporter(
            endpoint=f"{base}/v1/traces", headers={"Authorization": f"Bearer {token}"}
        )
        # each span is exported as it ends: the children reach serve before their root
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        providers.append(provider)
        return provider.get_tracer("rag-app")

    yield make
    for provider in providers:
        provider.shutdown()


def rag(tracer: Any, query: str) -> tuple[str, str]:
    with tracer.start_as_current_span(
        "rag", attributes={"openinference.span.kind": "CHAIN", "input.value": query}
    ) as root:
        attributes = {"openinference.span.kind": "RETRIEVER", "input.value": query}
        for i, chunk in enumerate(CONTEXT):
            attributes[f"retrieval.documents.{i}.document.content"] = chunk
        with tracer.start_as_current_span("retrieve", attributes=attributes):
            pass
        with tracer.start_as_current_span(
            "generate", attributes={"openinference.span.kind": "LLM", "output.value": ANSWER}
        ):
            pass
        root.set_attribute("output.value", ANSWER)
        return format(root.get_span_context().trace_id, "032x"), ANSWER


@pytest.mark.broker
def test_the_sdk_exporter_sends_spans_that_become_one_triple(rabbitmq: str, tracer_to: Any) -> None:
    with serving(rabbitmq) as base:
        tracer = tracer_to(base)
        trace_id, _ = rag(tracer, "Posso desistir da compra online?")
        text = call(base, "GET", "/metrics", token=None)[1]
        assert 'veredito_ingest_requests_total{code="200",route="/v1/traces"} 3.0' in text
        assert 'veredito_ingest_traces_total{result="complete"} 1.0' in text
    (envelope,) = queued(rabbitmq)
    triple = envelope["triple"]
    assert triple["id"] == trace_id
    assert triple["query"] == "Posso desistir da compra online?"
    assert triple["context"] == CONTEXT and triple["answer"] == ANSWER
    assert triple["metadata"]["app"] == "sac-bot" and envelope["source"]["input"] == "otlp"


def otlp_json(spans: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": "faq"}}]
                },
                "scopeSpans": [{"scope": {"name": "t"}, "spans": spans}],
            }
        ]
    }


def attr(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "value": {"stringValue": value}}


TRACE = "5b8efff798038103d269b633813fc60c"


def genai_child() -> dict[str, Any]:
    return {
        "traceId": TRACE,
        "spanId": "eee19b7ec3c1b174",
        "parentSpanId": "eee19b7ec3c1b173",
        "name": "chat",
        "startTimeUnixNano": "1700000000000000100",
        "attributes": [
            attr("gen_ai.system", "openai"),
            attr("gen_ai.prompt.0.role", "user"),
            attr("gen_ai.prompt.0.content", "Qual o prazo do INSS?"),
            attr("gen_ai.completion.0.content", "O INSS tem 45 dias."),
        ],
    }


def retriever_child() -> dict[str, Any]:
    return {
        "traceId": TRACE,
        "spanId": "eee19b7ec3c1b175",
        "parentSpanId": "eee19b7ec3c1b173",
        "name": "search",
        "startTimeUnixNano": "1700000000000000050",
        "attributes": [
            attr("openinference.span.kind", "RETRIEVER"),
            attr("retrieval.documents.1.document.content", "segundo"),
            attr("retrieval.documents.0.document.content", "O INSS deve decidir em 45 dias."),
        ],
    }


def root_span() -> dict[str, Any]:
    return {
        "traceId": TRACE,
        "spanId": "eee19b7ec3c1b173",
        "name": "handler",
        "startTimeUnixNano": "1700000000000000000",
    }


@pytest.mark.broker
def test_otlp_json_split_across_requests_and_errors(rabbitmq: str) -> None:
    with serving(rabbitmq, VEREDITO_INGEST_TRACE_TIMEOUT="1") as base:
        status, _, _ = call(base, "POST", "/v1/traces", otlp_json([genai_child()]))
        assert status == 200
        assert queued(rabbitmq) == []  # waiting for its root
        status, body, _ = call(
            base, "POST", "/v1/traces", otlp_json([root_span(), retriever_child()])
        )
        assert status == 200 and body == {}
        # a trace whose root never comes is counted, not silently dropped
        orphan = {**genai_child(), "traceId": "0" * 31 + "1"}
        assert call(base, "POST", "/v1/traces", otlp_json([orphan]))[0] == 200
        deadline = time.monotonic() + 15
        while (
            'veredito_ingest_traces_total{result="incomplete"} 1.0'
            not in call(base, "GET", "/metrics", token=None)[1]
        ):
            assert time.monotonic() < deadline, "the incomplete trace was never counted"
            time.sleep(0.2)
        assert call(base, "POST", "/v1/traces", "x", content_type="text/plain")[0] == 415
        assert (
            call(
                base,
                "POST",
                "/v1/traces",
                b"\xff\x00garbage",
                content_type="application/x-protobuf",
            )[0]
            == 400
        )
        assert call(base, "POST", "/v1/traces", otlp_json([]), token="nope")[0] == 401
    (envelope,) = queued(rabbitmq)
    triple = envelope["triple"]
    assert triple["id"] == TRACE and triple["metadata"]["app"] == "faq"
    assert triple["query"] == "Qual o prazo do INSS?" and triple["answer"] == "O INSS tem 45 dias."
    assert triple["context"] == ["O INSS deve decidir em 45 dias.", "segundo"]


def test_json_input_values_and_the_assembler_bound() -> None:
    spans = decode(
        json.dumps(
            otlp_json(
                [
                    {
                        **root_span(),
                        "attributes": [
                            attr("input.value", json.dumps({"question": "Q?"})),
                            attr("input.mime_type", "application/json"),
                            attr("output.value", "A."),
                        ],
                    }
                ]
            )
        ).encode(),
        "application/json",
    )
    assert triple_from(spans)["query"] == "Q?"
    assembler = TraceAssembler(max_traces=2)
    for i in range(3):
        assembler.add("tenant-a", [Span(f"t{i}", "s", "p", "child", 0, {})])
    assert len(assembler) == 2 and assembler.dropped["evicted"] == 1
