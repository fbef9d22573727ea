"""Text out of the JSON that tracing conventions put in attributes: chat messages (OpenAI's
``[{"role", "content"}]``, the GenAI conventions' ``[{"role", "parts": [{"type": "text",
"content"}]}]``, LangChain's serialised messages), a chain's ``{"question": …}`` inputs and
``{"output": …}`` outputs, LangChain's ``generations``. A question is the last user message; an
answer the last assistant text. A value that is not JSON is the text itself."""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "ANSWER_KEYS",
    "QUERY_KEYS",
    "answer_text",
    "assistant_text",
    "documents_in",
    "loads",
    "plain",
    "question_text",
    "system_texts",
    "user_text",
]

QUERY_KEYS = ("query", "question", "input", "user_input", "prompt", "user_prompt", "q")
ANSWER_KEYS = ("answer", "output", "text", "response", "result", "content", "final_result")
_ROLES = {
    "human": "user",
    "humanmessage": "user",
    "user": "user",
    "ai": "assistant",
    "aimessage": "assistant",
    "assistant": "assistant",
    "model": "assistant",
    "system": "system",
    "systemmessage": "system",
    "tool": "tool",
    "toolmessage": "tool",
}


def loads(value: Any) -> Any:
    """A JSON string parsed (objects, arrays and JSON-encoded strings); anything else, and text
    that only looks like JSON, as it is."""
    if isinstance(value, str) and value:
        first = value[0]
        if first.isspace():  # rare: only then is the text copied to look past the blanks
            stripped = value.strip()
            first = stripped[:1]
            last = stripped[-1:]
        else:
            last = value.rstrip()[-1:] if first == '"' else ""
        if first in ("{", "[") or (first == '"' and last == '"' and len(value) > 1):
            # an object, an array, or a JSON-encoded string (a decorator's return value)
            try:
                return json.loads(value)
            except ValueError:
                return value
    return value


def _content(value: Any) -> str | None:
    """The text of a message's content: a string, or parts with ``text``/``content``."""
    if isinstance(value, str):
        return value if value.strip() else None
    if isinstance(value, list):
        texts = []
        for part in value:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and part.get("type", "text") in ("text", "output_text"):
                text = part.get("text", part.get("content"))
                if isinstance(text, str):
                    texts.append(text)
        joined = "".join(texts)
        return joined if joined.strip() else None
    return None


def _message(item: Any) -> tuple[str, str | None] | None:
    """``(role, text)`` of one message in any of the shapes above; None if it is not one."""
    if not isinstance(item, dict):
        return None
    if item.get("lc") == 1 and isinstance(item.get("kwargs"), dict):  # LangChain serialised
        name = str((item.get("id") or [""])[-1]).lower()
        kwargs = item["kwargs"]
        return _ROLES.get(name, str(kwargs.get("type") or "")), _content(kwargs.get("content"))
    role = item.get("role", item.get("type"))
    if not isinstance(role, str) or role.lower() not in _ROLES:
        return None
    if "parts" in item:
        return _ROLES[role.lower()], _content(item["parts"])
    return _ROLES[role.lower()], _content(item.get("content"))


def _messages(value: Any) -> list[tuple[str, str | None]] | None:
    """The messages a value holds: a list of messages (or of lists of them, as LangChain's
    batches), or an object with ``messages``; None when it holds none."""
    if isinstance(value, dict):
        for key in ("messages", "input_messages", "output_messages", "all_messages"):
            if key in value:
                return _messages(value[key])
        single = _message(value)
        return [single] if single else None
    if isinstance(value, list) and value:
        if all(isinstance(v, list) for v in value):  # [[messages of one call], …]
            value = value[-1]
        found = [m for m in (_message(v) for v in value) if m is not None]
        return found or None
    return None


def _last(messages: list[tuple[str, str | None]], role: str) -> str | None:
    texts = [text for who, text in messages if who == role and text]
    return texts[-1] if texts else None


def user_text(value: Any) -> str | None:
    """The last user message of messages (a JSON string or parsed)."""
    found = _messages(loads(value))
    return _last(found, "user") if found else None


def system_texts(value: Any) -> list[str]:
    """The system messages' texts (or system instruction parts) of messages."""
    parsed = loads(value)
    if (
        isinstance(parsed, list)
        and parsed
        and all(isinstance(p, dict) and "role" not in p and "type" in p for p in parsed)
    ):  # gen_ai.system_instructions: parts, no messages
        text = _content(parsed)
        return [text] if text else []
    found = _messages(parsed) or []
    return [text for who, text in found if who == "system" and text]


def assistant_text(value: Any) -> str | None:
    """The last assistant text of messages, or of LangChain's ``generations``."""
    value = loads(value)
    if isinstance(value, dict) and isinstance(value.get("generations"), list):
        batches = [g for g in value["generations"] if isinstance(g, list) and g]
        if batches and isinstance(batches[-1][0], dict):
            first = batches[-1][0]
            text = first.get("text")
            if isinstance(text, str) and text.strip():
                return text
            return assistant_text(first.get("message"))
    if isinstance(value, dict) and isinstance(value.get("choices"), list):  # an OpenAI reply
        return assistant_text([c.get("message") for c in value["choices"] if isinstance(c, dict)])
    found = _messages(value)
    return _last(found, "assistant") if found else None


def _field(value: Any, keys: tuple[str, ...], depth: int = 0) -> str | None:
    """The first of ``keys`` that holds text, in an object or the objects it nests (``args``,
    ``kwargs``, ``inputs``, ``outputs`` …), three levels at most."""
    if isinstance(value, str):
        return value if value.strip() else None
    if depth > 3:
        return None
    if isinstance(value, dict):
        for key in keys:
            if key in value:
                found = _field(value[key], keys, depth + 1)
                if found:
                    return found
        for key in ("inputs", "outputs", "kwargs", "args", "input", "output", "data"):
            if key in value and key not in keys:
                found = _field(value[key], keys, depth + 1)
                if found:
                    return found
    if isinstance(value, list) and len(value) == 1:
        return _field(value[0], keys, depth + 1)
    return None


def plain(value: Any) -> str | None:
    """``value`` when it is plain text (not JSON, nor blank at its start): the common case,
    answered without parsing; None otherwise (the caller reads it the long way)."""
    if type(value) is str and value:
        first = value[0]
        if first not in '{["' and not first.isspace():
            return value
    return None


def question_text(value: Any) -> str | None:
    """A span input as a question: plain text, the last user message of chat messages, or a
    question-like field of an object; None when none of these (never the whole JSON)."""
    parsed = loads(value)
    if isinstance(parsed, str):
        return parsed if parsed and not parsed.isspace() else None
    return user_text(parsed) or _field(parsed, QUERY_KEYS)


def answer_text(value: Any) -> str | None:
    """A span output as an answer: plain text, the last assistant text of chat messages or
    generations, or an answer-like field of an object; None otherwise."""
    parsed = loads(value)
    if isinstance(parsed, str):
        return parsed if parsed and not parsed.isspace() else None
    return assistant_text(parsed) or _field(parsed, ANSWER_KEYS)


_DOC_TEXT = ("page_content", "content", "text", "document", "pageContent", "chunk")


def documents_in(value: Any) -> list[str]:
    """Documents' texts out of a retriever's (or a tool's) output: a list of strings, of
    objects with ``page_content``/``content``/``text`` (LangChain documents, serialised or not),
    or an object holding such a list (``documents``, ``output``, ``outputs`` …)."""
    value = loads(value)
    if isinstance(value, dict):
        if value.get("lc") == 1 and isinstance(value.get("kwargs"), dict):
            return documents_in([value])
        for key in ("documents", "docs", "output", "outputs", "result", "results", "data"):
            if key in value:
                return documents_in(value[key])
        text = next((value[k] for k in _DOC_TEXT if isinstance(value.get(k), str)), None)
        return [text] if text and text.strip() else []
    if isinstance(value, str):
        return [value] if value.strip() else []
    out: list[str] = []
    if isinstance(value, list):
        for item in value:
            if isinstance(item, str):
                if item.strip():
                    out.append(item)
            elif isinstance(item, dict):
                inner = item.get("kwargs") if item.get("lc") == 1 else item
                if isinstance(inner, dict):
                    text = next((inner[k] for k in _DOC_TEXT if isinstance(inner.get(k), str)),
                                None)  # fmt: skip
                    if text and text.strip():
                        out.append(text)
    return out
