"""OpenInference's LangChain instrumentation with Phoenix's register(), exporting OTLP/HTTP to
VEREDITO_URL/v1/traces with the ingest token (OTLP/gRPC to VEREDITO_GRPC when set). ``remote``: each question under an incoming W3C
traceparent (a service behind a traced gateway)."""

from __future__ import annotations

import os
import sys

from common import MODEL, MODEL_URL, QUESTIONS, report, retrieve, system_prompt
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

from langchain_core.callbacks import CallbackManagerForRetrieverRun  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.output_parsers import StrOutputParser  # noqa: E402
from langchain_core.prompts import ChatPromptTemplate  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from langchain_core.runnables import RunnablePassthrough  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402


class KeywordRetriever(BaseRetriever):
    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [Document(page_content=d) for d in retrieve(query)]


retrieved: dict[str, list[str]] = {}


def keep(docs: list[Document]) -> str:
    texts = [d.page_content for d in docs]
    retrieved["last"] = texts
    return "\n".join(texts)


prompt = ChatPromptTemplate.from_messages(
    [("system", system_prompt(["{context}"])), ("human", "{question}")]
)
llm = ChatOpenAI(base_url=MODEL_URL, api_key="x", model=MODEL, temperature=0)
chain = (
    {"context": KeywordRetriever() | keep, "question": RunnablePassthrough()}
    | prompt
    | llm
    | StrOutputParser()
)
remote = len(sys.argv) > 1 and sys.argv[1] == "remote"
for n, question in enumerate(QUESTIONS):
    if remote:
        from opentelemetry import context
        from opentelemetry.propagate import extract

        parent = {"traceparent": f"00-{n + 1:032x}-{n + 1:016x}-01"}
        token = context.attach(extract(parent))
        try:
            answer = chain.invoke(question)
        finally:
            context.detach(token)
    else:
        answer = chain.invoke(question)
    report(question, retrieved["last"], answer)
tracer_provider.force_flush()
