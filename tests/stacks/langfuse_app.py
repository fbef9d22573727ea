"""The Langfuse Python SDK v3, configured only by Langfuse's own environment (LANGFUSE_HOST,
LANGFUSE_PUBLIC_KEY, LANGFUSE_SECRET_KEY): ``@observe`` on the RAG function and its retriever,
the generation through ``langfuse.openai``."""

from __future__ import annotations

from common import MODEL, MODEL_URL, QUESTIONS, report, retrieve, system_prompt
from langfuse import get_client, observe
from langfuse.openai import OpenAI

client = OpenAI(base_url=MODEL_URL, api_key="x")


@observe(name="buscar", as_type="retriever")
def buscar(query: str) -> list[str]:
    return retrieve(query)


@observe(name="rag")
def rag(question: str) -> tuple[list[str], str]:
    docs = buscar(question)
    reply = client.chat.completions.create(
        model=MODEL, temperature=0, name="gerar-resposta",
        messages=[{"role": "system", "content": system_prompt(docs)},
                  {"role": "user", "content": question}],
    )  # fmt: skip
    return docs, reply.choices[0].message.content or ""


for question in QUESTIONS:
    context, answer = rag(question)
    report(question, context, answer)
get_client().flush()
get_client().shutdown()
