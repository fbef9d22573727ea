"""OpenInference spans (Arize Phoenix's instrumentations: LangChain, LlamaIndex, OpenAI …).

- kind: ``openinference.span.kind`` (``LLM``, ``RETRIEVER``, ``CHAIN``, ``AGENT``, ``TOOL``,
  ``EMBEDDING`` …);
- a span's input and output: ``input.value``/``output.value``; JSON values (``*.mime_type``
  ``application/json``) are read for the user's last message or a ``query``/``question``/``input``
  field (the input), the assistant's text or an ``answer``/``output``/``text`` field (the output),
  never taken whole;
- an LLM span's messages: ``llm.input_messages.N.message.role``/``.content`` (the last user
  message is the question), ``llm.output_messages.0.message.content``;
- a retriever's documents: ``retrieval.documents.N.document.content``, in N order;
- a tool call: ``tool.name``, its result the span's output.
"""

from __future__ import annotations

import json
from typing import Any

from veredito.producer.otlp import messages
from veredito.producer.otlp.spans import Span

__all__ = [
    "ANSWER_KEYS",
    "QUERY_KEYS",
    "answer",
    "completion",
    "documents",
    "indexed",
    "kind",
    "prompt",
    "question",
    "recognise",
    "system",
    "text",
    "tool",
]

QUERY_KEYS = ("query", "question", "input", "user_input")
ANSWER_KEYS = ("answer", "output", "text", "response")


def recognise(span: Span) -> bool:
    return "openinference.span.kind" in span.attributes


def kind(span: Span) -> str:
    """The span's OpenInference kind, upper case; empty when it has none."""
    return str(span.attributes.get("openinference.span.kind") or "").upper()


def question(span: Span) -> str | None:
    """What the span was asked: an LLM span's last user message, else its input as a question."""
    attributes = span.attributes
    if attributes.get("openinference.span.kind") in ("LLM", "llm"):
        found = prompt(span)
        if found:
            return found
    value = attributes.get("input.value")
    return messages.plain(value) or messages.question_text(value)


def answer(span: Span) -> str | None:
    """What the span answered: an LLM span's assistant message, else its output as an answer."""
    attributes = span.attributes
    if attributes.get("openinference.span.kind") in ("LLM", "llm"):
        found = completion(span)
        if found:
            return found
    value = attributes.get("output.value")
    return messages.plain(value) or messages.answer_text(value)


def tool(span: Span) -> tuple[str | None, list[str]]:
    name = span.attributes.get("tool.name")
    return (name if isinstance(name, str) else None), messages.documents_in(
        span.attributes.get("output.value")
    )


def text(span: Span, prefix: str, keys: tuple[str, ...]) -> str | None:
    """``input`` or ``output`` (``prefix``) of a span as text."""
    value = span.attributes.get(f"{prefix}.value")
    if not isinstance(value, str) or not value.strip():
        return None
    if span.attributes.get(f"{prefix}.mime_type") == "application/json":
        try:
            parsed = json.loads(value)
        except ValueError:
            return value
        if isinstance(parsed, dict):
            for key in keys:
                if isinstance(parsed.get(key), str) and parsed[key].strip():
                    return str(parsed[key])
        return value
    return value


def indexed(attributes: dict[str, Any], prefix: str, suffix: str) -> list[Any]:
    """Values of ``prefix.N.suffix`` in N order."""
    start, tail = len(prefix), len(suffix)
    found: dict[int, Any] = {}
    for key in [k for k in attributes if k.startswith(prefix) and k.endswith(suffix)]:
        middle = key[start : len(key) - tail]
        if middle.isdigit():
            found[int(middle)] = attributes[key]
    if len(found) < 2:
        return list(found.values())
    return [found[i] for i in sorted(found)]


def prompt(span: Span) -> str | None:
    """The last user message of an LLM span's input messages."""
    pairs = zip(
        indexed(span.attributes, "llm.input_messages.", ".message.role"),
        indexed(span.attributes, "llm.input_messages.", ".message.content"),
        strict=False,
    )
    users = [content for role, content in pairs if role == "user" and isinstance(content, str)]
    return users[-1] if users else None


def completion(span: Span) -> str | None:
    value = span.attributes.get("llm.output_messages.0.message.content")
    return value if isinstance(value, str) and value.strip() else None


def documents(span: Span) -> list[str]:
    """A retriever span's documents, in index order."""
    return [
        doc
        for doc in indexed(span.attributes, "retrieval.documents.", ".document.content")
        if isinstance(doc, str) and doc.strip()
    ]


def system(span: Span) -> list[str]:
    """An LLM span's system messages."""
    pairs = zip(
        indexed(span.attributes, "llm.input_messages.", ".message.role"),
        indexed(span.attributes, "llm.input_messages.", ".message.content"),
        strict=False,
    )
    return [c for role, c in pairs if role == "system" and isinstance(c, str) and c.strip()]
