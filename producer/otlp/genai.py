"""OpenTelemetry's GenAI semantic conventions (``opentelemetry-instrumentation-openai-v2`` and any
instrumentation that follows them).

- kind, by ``gen_ai.operation.name``: ``chat``, ``text_completion``, ``generate_content`` an LLM
  call; ``embeddings``; ``execute_tool`` a tool call; ``invoke_agent``, ``create_agent`` an agent;
  ``retrieval`` a retriever; a span with other ``gen_ai.*`` attributes and a model is an LLM call;
- an LLM call's messages: ``gen_ai.input.messages`` (JSON ``[{"role", "parts": [{"type": "text",
  "content"}]}]``; the last user message is the question) and ``gen_ai.output.messages``
  (the assistant's text is the answer), ``gen_ai.system_instructions`` apart; the older
  per-message attributes ``gen_ai.prompt.N.role``/``.content`` and ``gen_ai.completion.N.content``;
  GenAI events logged beside the span (``/v1/logs``) are joined to it first
  (:mod:`veredito.producer.otlp.logs`);
- a retrieval: ``gen_ai.retrieval.query.text`` and ``gen_ai.retrieval.documents`` (JSON, each
  document's ``content``, in order);
- a tool call: ``gen_ai.tool.name``, ``gen_ai.tool.call.result``.
"""

from __future__ import annotations

from veredito.producer.otlp import messages
from veredito.producer.otlp.openinference import indexed
from veredito.producer.otlp.spans import Span

__all__ = [
    "answer",
    "documents",
    "is_genai",
    "kind",
    "prompt",
    "question",
    "recognise",
    "system",
    "tool",
]

_KINDS = {
    "chat": "LLM",
    "text_completion": "LLM",
    "generate_content": "LLM",
    "completion": "LLM",
    "embeddings": "EMBEDDING",
    "embedding": "EMBEDDING",
    "execute_tool": "TOOL",
    "invoke_agent": "AGENT",
    "create_agent": "AGENT",
    "retrieval": "RETRIEVER",
    "retrieve": "RETRIEVER",
}


_LLM_KEYS = (
    "gen_ai.request.model",
    "gen_ai.response.model",
    "gen_ai.input.messages",
    "gen_ai.prompt.0.content",
)


def is_genai(span: Span) -> bool:
    return any(key.startswith("gen_ai.") for key in span.attributes)


recognise = is_genai


def kind(span: Span) -> str:
    attributes = span.attributes
    operation = str(attributes.get("gen_ai.operation.name") or "").lower()
    if operation in _KINDS:
        return _KINDS[operation]
    if "gen_ai.retrieval.documents" in attributes:
        return "RETRIEVER"
    if "gen_ai.tool.call.result" in attributes or "gen_ai.tool.name" in attributes:
        return "TOOL"
    if any(key in attributes for key in _LLM_KEYS):
        return "LLM"
    return ""


def prompt(span: Span) -> str | None:
    """The last user message of the call's input."""
    found = messages.user_text(span.attributes.get("gen_ai.input.messages"))
    if found:
        return found
    pairs = zip(
        indexed(span.attributes, "gen_ai.prompt.", ".role"),
        indexed(span.attributes, "gen_ai.prompt.", ".content"),
        strict=False,
    )
    users = [content for role, content in pairs if role == "user" and isinstance(content, str)]
    return users[-1] if users else None


def completion(span: Span) -> str | None:
    """The assistant's text of the call's output."""
    found = messages.assistant_text(span.attributes.get("gen_ai.output.messages"))
    if found:
        return found
    texts = [
        c
        for c in indexed(span.attributes, "gen_ai.completion.", ".content")
        if isinstance(c, str) and c.strip()
    ]
    return texts[0] if texts else None


def question(span: Span) -> str | None:
    query = span.attributes.get("gen_ai.retrieval.query.text")
    if isinstance(query, str) and query.strip():
        return query
    return prompt(span)


def answer(span: Span) -> str | None:
    return completion(span)


def documents(span: Span) -> list[str]:
    return messages.documents_in(span.attributes.get("gen_ai.retrieval.documents"))


def tool(span: Span) -> tuple[str | None, list[str]]:
    name = span.attributes.get("gen_ai.tool.name")
    result = span.attributes.get("gen_ai.tool.call.result")
    return (name if isinstance(name, str) else None), messages.documents_in(result)


def system(span: Span) -> list[str]:
    """The call's system instructions: ``gen_ai.system_instructions``, else the system
    messages of ``gen_ai.input.messages``."""
    attributes = span.attributes
    return messages.system_texts(attributes.get("gen_ai.system_instructions")) or (
        messages.system_texts(attributes.get("gen_ai.input.messages"))
    )
