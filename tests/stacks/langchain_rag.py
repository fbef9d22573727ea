"""The LangChain RAG app that the OpenInference and OpenLLMetry stacks both trace: a keyword
retriever, a prompt, the chat model, a parser (import it after the instrumentation is set up)."""

from __future__ import annotations

from typing import Any

from common import MODEL, MODEL_URL, retrieve, system_prompt
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnablePassthrough
from langchain_openai import ChatOpenAI

retrieved: dict[str, list[str]] = {}  # what the last question retrieved


class KeywordRetriever(BaseRetriever):
    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [Document(page_content=d) for d in retrieve(query)]


def _keep(docs: list[Document]) -> str:
    texts = [d.page_content for d in docs]
    retrieved["last"] = texts
    return "\n".join(texts)


def llm() -> ChatOpenAI:
    return ChatOpenAI(base_url=MODEL_URL, api_key="x", model=MODEL, temperature=0)


def chain() -> Any:
    prompt = ChatPromptTemplate.from_messages(
        [("system", system_prompt(["{context}"])), ("human", "{question}")]
    )
    return (
        {"context": KeywordRetriever() | _keep, "question": RunnablePassthrough()}
        | prompt
        | llm()
        | StrOutputParser()
    )


def separate(question: str) -> tuple[list[str], str]:
    """The retriever, then the model, called one after the other with no span around them: each
    call is a trace of its own. What was retrieved and what the model answered."""
    texts = [d.page_content for d in KeywordRetriever().invoke(question)]
    reply = llm().invoke([("system", system_prompt(texts)), ("human", question)])
    return texts, str(reply.content)
