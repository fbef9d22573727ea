"""A complete trace into a triple (spec §3), whatever convention its spans follow:

- query: the root span's input, else a retriever's, else the last user prompt of an LLM span;
- context: the documents of the retriever spans, in start order, each in index order;
- answer: the root span's output, else the last LLM span's output;
- ``metadata.app``: the resource's ``service.name``; the id: the trace id.

How each convention's spans say these is its module's business (:mod:`.openinference`,
:mod:`.genai`).
"""

from __future__ import annotations

from typing import Any

from veredito.producer.otlp import genai, openinference
from veredito.producer.otlp.openinference import ANSWER_KEYS, QUERY_KEYS
from veredito.producer.otlp.spans import Span

__all__ = ["triple_from"]


def _kind(span: Span) -> str:
    kind = openinference.kind(span)
    if kind:
        return kind
    if genai.is_genai(span):
        return "LLM"
    if any(key.startswith("retrieval.documents.") for key in span.attributes):
        return "RETRIEVER"
    return ""


def _prompt(span: Span) -> str | None:
    return openinference.prompt(span) or genai.prompt(span)


def _completion(span: Span) -> str | None:
    return (
        openinference.completion(span)
        or genai.completion(span)
        or openinference.text(span, "output", ANSWER_KEYS)
    )


def triple_from(spans: list[Span]) -> dict[str, Any]:
    ordered = sorted(spans, key=lambda s: s.start)
    root = next((s for s in ordered if not s.parent_id.strip("0")), ordered[0])
    retrievers = [s for s in ordered if _kind(s) == "RETRIEVER"]
    llms = [s for s in ordered if _kind(s) == "LLM"]
    query = openinference.text(root, "input", QUERY_KEYS)
    for span in retrievers:
        query = query or openinference.text(span, "input", QUERY_KEYS)
    for span in reversed(llms):
        query = query or _prompt(span)
    answer = openinference.text(root, "output", ANSWER_KEYS)
    for span in reversed(llms):
        answer = answer or _completion(span)
    context = [doc for span in retrievers for doc in openinference.documents(span)]
    metadata: dict[str, Any] = {"source": "otlp", "trace_id": root.trace_id}
    if root.service:
        metadata["app"] = root.service
    return {
        "id": root.trace_id,
        "query": query,
        "context": context,
        "answer": answer,
        "metadata": metadata,
    }
