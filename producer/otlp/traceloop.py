"""OpenLLMetry (Traceloop's ``traceloop-sdk`` and its ``opentelemetry-instrumentation-*``).

- kind, by ``traceloop.span.kind``: ``workflow`` (the app's entry, a chain), ``agent``, ``task``
  (a step: a retriever when its ``gen_ai.operation.name`` is ``vector_db_retrieve`` or its
  output holds documents), ``tool``; a span with
  ``llm.request.type`` is an LLM call (every span carries ``gen_ai.operation.name`` here, so that
  alone says nothing);
- a span's input and output: ``traceloop.entity.input``/``traceloop.entity.output`` (JSON: the
  decorators' ``{"args", "kwargs"}`` and return value, LangChain's ``{"inputs"}`` and
  ``{"outputs"}``), read for a question and an answer, never taken whole;
- an LLM call's messages: the GenAI attributes (:mod:`.genai`: ``gen_ai.input.messages``/
  ``gen_ai.output.messages``, or ``gen_ai.prompt.N.*``/``gen_ai.completion.N.*``);
- a retriever's documents: the LangChain documents of its ``traceloop.entity.output``.
"""

from __future__ import annotations

from veredito.producer.otlp import genai, messages
from veredito.producer.otlp.spans import Span

__all__ = ["answer", "documents", "kind", "question", "recognise", "system", "tool"]

_KINDS = {"workflow": "CHAIN", "agent": "AGENT", "tool": "TOOL", "task": "CHAIN"}


def recognise(span: Span) -> bool:
    attributes = span.attributes
    return (
        "traceloop.span.kind" in attributes
        or "llm.request.type" in attributes
        or any(key.startswith("traceloop.") for key in attributes)
    )


def _is_retriever(span: Span) -> bool:
    name = span.name.lower()
    if "retriev" in name or "vectorstore" in name or "search" in name:
        return bool(documents(span))
    output = messages.loads(span.attributes.get("traceloop.entity.output"))
    text = str(output)[:2000]
    return "'Document'" in text or '"Document"' in text or "page_content" in text


def kind(span: Span) -> str:
    attributes = span.attributes
    if "llm.request.type" in attributes:
        request = str(attributes["llm.request.type"]).lower()
        return "EMBEDDING" if request.startswith("embed") else "LLM"
    if attributes.get("gen_ai.operation.name") == "vector_db_retrieve":
        return "RETRIEVER"
    traceloop = str(attributes.get("traceloop.span.kind") or "").lower()
    if traceloop == "task" and _is_retriever(span):
        return "RETRIEVER"
    if traceloop in _KINDS:
        return _KINDS[traceloop]
    return genai.kind(span)


def question(span: Span) -> str | None:
    if kind(span) == "LLM":
        return genai.prompt(span)
    return messages.question_text(span.attributes.get("traceloop.entity.input"))


def answer(span: Span) -> str | None:
    if kind(span) == "LLM":
        return genai.completion(span)
    return messages.answer_text(span.attributes.get("traceloop.entity.output"))


def documents(span: Span) -> list[str]:
    return messages.documents_in(span.attributes.get("traceloop.entity.output"))


def tool(span: Span) -> tuple[str | None, list[str]]:
    name = span.attributes.get("traceloop.entity.name")
    return (name if isinstance(name, str) else None), documents(span)


def system(span: Span) -> list[str]:
    return genai.system(span)
