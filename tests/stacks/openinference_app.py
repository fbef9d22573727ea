"""OpenInference's LangChain instrumentation with Phoenix's register(), exporting OTLP/HTTP to
VEREDITO_URL/v1/traces with the ingest token (OTLP/gRPC to VEREDITO_GRPC when set).
``remote``: each question under an incoming W3C traceparent (a service behind a traced gateway);
``separate``: the retriever and the model called one after the other with no span around them
(four one-span traces)."""

from __future__ import annotations

import os
import sys

from common import QUESTIONS, report
from openinference.instrumentation.langchain import LangChainInstrumentor
from phoenix.otel import register

HEADERS = {"authorization": f"Bearer {os.environ['VEREDITO_TOKEN']}"}
if os.environ.get("VEREDITO_GRPC"):  # register()'s own default: OTLP/gRPC
    tracer_provider = register(
        project_name="sac-bot", endpoint=os.environ["VEREDITO_GRPC"], protocol="grpc",
        headers=HEADERS, batch=False,
    )  # fmt: skip
else:
    tracer_provider = register(
        project_name="sac-bot", endpoint=f"{os.environ['VEREDITO_URL']}/v1/traces",
        headers=HEADERS, batch=False,
    )  # fmt: skip
LangChainInstrumentor().instrument(tracer_provider=tracer_provider)

from langchain_rag import chain, retrieved, separate  # noqa: E402

mode = sys.argv[1] if len(sys.argv) > 1 else ""
rag = chain()
for n, question in enumerate(QUESTIONS):
    if mode == "separate":
        texts, answer = separate(question)
        report(question, texts, answer)
        continue
    if mode == "remote":
        from opentelemetry import context
        from opentelemetry.propagate import extract

        parent = {"traceparent": f"00-{n + 1:032x}-{n + 1:016x}-01"}
        token = context.attach(extract(parent))
        try:
            answer = rag.invoke(question)
        finally:
            context.detach(token)
    else:
        answer = rag.invoke(question)
    report(question, retrieved["last"], answer)
tracer_provider.force_flush()
