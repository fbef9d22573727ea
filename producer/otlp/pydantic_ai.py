"""pydantic-ai agents, as Logfire (or pydantic-ai's own instrumentation) traces them.

- kind, by ``gen_ai.operation.name``: ``invoke_agent`` the agent (the trace's root), ``chat`` the
  model calls, ``execute_tool`` the tool calls (data format 2's span names ``agent run`` and
  ``running tool`` too);
- the agent's question: the last user message with text of its messages
  (``pydantic_ai.all_messages``, ``gen_ai.input.messages``, ``all_messages_events``), its answer
  ``final_result`` (a plain string; else the last assistant text);
- a tool call: ``gen_ai.tool.name``, its result ``gen_ai.tool.call.result`` (``tool_response`` in
  older versions): the agent's context, for the tools that retrieve (by default every tool:
  ``VEREDITO_OTLP_RETRIEVAL_TOOLS`` narrows it).
"""

from __future__ import annotations

from veredito.producer.otlp import genai, messages
from veredito.producer.otlp.spans import Span

__all__ = ["answer", "documents", "kind", "question", "recognise", "system", "tool"]

_MESSAGES = ("pydantic_ai.all_messages", "all_messages_events", "gen_ai.input.messages")


def recognise(span: Span) -> bool:
    attributes = span.attributes
    return (
        any(key.startswith(("logfire.", "pydantic_ai.")) for key in attributes)
        or "final_result" in attributes
        or "agent_name" in attributes
        or span.name in ("agent run", "running tool", "running tools")
    )


def kind(span: Span) -> str:
    """By ``gen_ai.operation.name`` (``invoke_agent``, ``chat``, ``execute_tool``), else by the
    span names of pydantic-ai's older data formats (``agent run``, ``running tool``)."""
    found = genai.kind(span)
    if found:
        return found
    name = span.name
    if name.startswith(("agent run", "invoke_agent")) or "final_result" in span.attributes:
        return "AGENT"
    if name.startswith(("running tool", "execute_tool")) and name != "running tools":
        return "TOOL"
    if name == "running tools":
        return "CHAIN"
    return "LLM" if name.startswith("chat ") else ""


def question(span: Span) -> str | None:
    for key in _MESSAGES:
        found = messages.user_text(span.attributes.get(key))
        if found:
            return found
    return genai.prompt(span)


def answer(span: Span) -> str | None:
    result = span.attributes.get("final_result")
    if isinstance(result, str) and result.strip():
        return messages.answer_text(result)
    for key in ("pydantic_ai.all_messages", "all_messages_events", "gen_ai.output.messages"):
        found = messages.assistant_text(span.attributes.get(key))
        if found:
            return found
    return genai.completion(span)


def documents(span: Span) -> list[str]:
    return []


def tool(span: Span) -> tuple[str | None, list[str]]:
    attributes = span.attributes
    name = attributes.get("gen_ai.tool.name")
    result = attributes.get("gen_ai.tool.call.result", attributes.get("tool_response"))
    return (name if isinstance(name, str) else None), messages.documents_in(result)


def system(span: Span) -> list[str]:
    return genai.system(span)
