"""OpenTelemetry's GenAI semantic conventions.

- kind: a span with ``gen_ai.*`` attributes is an LLM call;
- the older per-message attributes: ``gen_ai.prompt.N.role``/``.content`` (the last user message
  is the question) and ``gen_ai.completion.0.content``.
"""

from __future__ import annotations

from veredito.producer.otlp.openinference import indexed
from veredito.producer.otlp.spans import Span

__all__ = ["completion", "is_genai", "prompt"]


def is_genai(span: Span) -> bool:
    return any(key.startswith("gen_ai.") for key in span.attributes)


def prompt(span: Span) -> str | None:
    pairs = zip(
        indexed(span.attributes, "gen_ai.prompt.", ".role"),
        indexed(span.attributes, "gen_ai.prompt.", ".content"),
        strict=False,
    )
    users = [content for role, content in pairs if role == "user" and isinstance(content, str)]
    return users[-1] if users else None


def completion(span: Span) -> str | None:
    value = span.attributes.get("gen_ai.completion.0.content")
    return value if isinstance(value, str) and value.strip() else None
