"""OpenLLMetry (Traceloop) with LangChain: Traceloop.init pointed at veredito, the token as a
header."""

from __future__ import annotations

import os

from common import MODEL, MODEL_URL, QUESTIONS, report, retrieve, system_prompt
from traceloop.sdk import Traceloop

Traceloop.init(
    app_name="sac-bot",
    api_endpoint=os.environ["VEREDITO_URL"],
    headers={"Authorization": f"Bearer {os.environ['VEREDITO_TOKEN']}"},
    disable_batch=True,
    telemetry_enabled=False,
)

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
for question in QUESTIONS:
    answer = chain.invoke(question)
    report(question, retrieved["last"], answer)
