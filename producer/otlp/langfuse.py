"""Langfuse (its Python SDK v3, which exports OTLP to ``/api/public/otel/v1/traces``).

- kind, by ``langfuse.observation.type``: ``generation`` an LLM call, ``retriever``, ``tool``,
  ``embedding``, ``agent``, ``chain``; ``span`` (what ``@observe`` makes by default) is a step,
  a retriever when its output holds documents and its name says it retrieves;
- a span's input and output: ``langfuse.observation.input``/``langfuse.observation.output``
  (JSON: a generation's chat messages, a function's arguments and return value), and for the
  trace's root also ``langfuse.trace.input``/``langfuse.trace.output``.
"""

from __future__ import annotations

from veredito.producer.otlp import genai, messages
from veredito.producer.otlp.spans import Span

__all__ = ["answer", "documents", "kind", "question", "recognise", "system", "tool"]

_KINDS = {
    "generation": "LLM",
    "retriever": "RETRIEVER",
    "tool": "TOOL",
    "embedding": "EMBEDDING",
    "agent": "AGENT",
    "chain": "CHAIN",
    "span": "CHAIN",
    "evaluator": "EVALUATOR",
    "guardrail": "GUARDRAIL",
    "event": "EVENT",
}
_RETRIEVING = ("retriev", "search", "busca", "recuper", "documentos", "lookup", "fetch_doc")


def recognise(span: Span) -> bool:
    return "langfuse.observation.type" in span.attributes


def kind(span: Span) -> str:
    observation = str(span.attributes.get("langfuse.observation.type") or "").lower()
    found = _KINDS.get(observation, "")
    retrieving = any(word in span.name.lower() for word in _RETRIEVING)
    if found == "CHAIN" and retrieving and documents(span):
        return "RETRIEVER"
    return found


def question(span: Span) -> str | None:
    attributes = span.attributes
    if kind(span) == "LLM":
        return messages.user_text(attributes.get("langfuse.observation.input")) or genai.prompt(
            span
        )
    return messages.question_text(
        attributes.get("langfuse.observation.input") or attributes.get("langfuse.trace.input")
    )


def answer(span: Span) -> str | None:
    attributes = span.attributes
    if kind(span) == "LLM":
        return messages.answer_text(
            attributes.get("langfuse.observation.output")
        ) or genai.completion(span)
    return messages.answer_text(
        attributes.get("langfuse.observation.output") or attributes.get("langfuse.trace.output")
    )


def documents(span: Span) -> list[str]:
    return messages.documents_in(span.attributes.get("langfuse.observation.output"))


def tool(span: Span) -> tuple[str | None, list[str]]:
    return span.name or None, documents(span)


def system(span: Span) -> list[str]:
    """A generation's system messages."""
    return messages.system_texts(span.attributes.get("langfuse.observation.input"))
