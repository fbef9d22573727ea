"""OpenTelemetry's own openai-v2 instrumentation (GenAI conventions), the SDK's OTLP exporters
configured by the standard environment (OTEL_EXPORTER_OTLP_ENDPOINT, _HEADERS, _COMPRESSION; the
gRPC ones when OTEL_EXPORTER_OTLP_PROTOCOL is ``grpc``, as the SDK's own configuration picks them),
the messages captured on the spans (SPAN_ONLY) or as events on /v1/logs (EVENT_ONLY). The
retrieval span follows the conventions, each document's text as ``content``."""

from __future__ import annotations

import json
import os

import openai
from common import MODEL, MODEL_URL, QUESTIONS, report, retrieve, system_prompt
from opentelemetry import trace
from opentelemetry._logs import set_logger_provider
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

if os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") == "grpc":
    from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
else:
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

resource = Resource.create({"service.name": "sac-bot"})
tracer_provider = TracerProvider(resource=resource)
tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
logger_provider = LoggerProvider(resource=resource)
logger_provider.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter()))
set_logger_provider(logger_provider)
OpenAIInstrumentor().instrument(tracer_provider=tracer_provider, logger_provider=logger_provider)
tracer = tracer_provider.get_tracer("rag_app")
client = openai.OpenAI(base_url=MODEL_URL, api_key="x")

for question in QUESTIONS:
    with tracer.start_as_current_span("rag"):
        with tracer.start_as_current_span(
            "retrieval docs", kind=trace.SpanKind.CLIENT,
            attributes={"gen_ai.operation.name": "retrieval", "gen_ai.data_source.id": "docs",
                        "gen_ai.retrieval.query.text": question},
        ) as span:  # fmt: skip
            docs = retrieve(question)
            span.set_attribute("gen_ai.retrieval.documents", json.dumps(
                [{"id": f"doc-{n}", "score": 1.0, "content": d} for n, d in enumerate(docs)],
                ensure_ascii=False))  # fmt: skip
        reply = client.chat.completions.create(
            model=MODEL, temperature=0,
            messages=[{"role": "system", "content": system_prompt(docs)},
                      {"role": "user", "content": question}],
        )  # fmt: skip
    report(question, docs, reply.choices[0].message.content or "")
tracer_provider.shutdown()
logger_provider.shutdown()
