"""HTTP bodies into triple objects: our own route's shapes, and aferiq-eval's (spec §13).

``read_body`` turns a request body into the list of values it carries — one JSON object, a JSON
array of them, or NDJSON — or raises :class:`BodyError` naming what is wrong (the line, for
NDJSON). ``from_aferiq`` maps aferiq-eval's payloads onto the triple contract: a RAG trace
already is one (``{"query", "context", "answer"}``); an agent trace ``{"trace_id", "goal",
"final_answer", "steps", "tool_specs"}`` becomes query = goal, answer = final answer, context =
the outputs of its ``retrieval`` and ``tool`` steps, id = the trace id. The values are then
checked by :func:`veredito.producer.triple.parse_triple` like any other input.
"""

from __future__ import annotations

import hmac
import io
import json
from dataclasses import dataclass
from typing import Any

from veredito.producer.mapping import Mapper, parse_maps
from veredito.producer.reader import MAX_NESTING, nested_deeper_than, read_lines

__all__ = ["NDJSON", "BodyError", "Grant", "Tokens", "from_aferiq", "read_body"]

NDJSON = "application/x-ndjson"
CONTEXT_STEPS = ("retrieval", "tool")


class BodyError(ValueError):
    """The body is not what the route takes; the message says why (and which line)."""


def read_body(data: bytes, content_type: str) -> list[Any]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BodyError(f"the body is not UTF-8 (byte {exc.start})") from None
    if content_type == NDJSON:
        values = []
        for item in read_lines(io.StringIO(text)):
            if item.error is not None:
                raise BodyError(f"line {item.line}: {item.error}")
            values.append(item.value)
        if not values:
            raise BodyError("the body has no lines")
        return values
    if nested_deeper_than(text, MAX_NESTING):
        raise BodyError(f"not valid JSON (nested deeper than {MAX_NESTING} levels)")
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise BodyError(f"not valid JSON: {exc}") from None
    if isinstance(value, list):
        if not value:
            raise BodyError("the array is empty")
        return value
    return [value]


def is_agent_trace(value: object) -> bool:
    return isinstance(value, dict) and ("steps" in value or "goal" in value)


def from_aferiq(value: Any) -> Any:
    """aferiq-eval's payload as a triple object; anything else is returned unchanged."""
    if not is_agent_trace(value):
        return value
    steps = value.get("steps")
    context = [
        step["step_output"]
        for step in (steps if isinstance(steps, list) else [])
        if isinstance(step, dict)
        and step.get("step_type") in CONTEXT_STEPS
        and isinstance(step.get("step_output"), str)
        and step["step_output"].strip()
    ]
    triple: dict[str, Any] = {
        "query": value.get("goal"),
        "context": context,
        "answer": value.get("final_answer"),
        "metadata": {"source": "aferiq-agent"},
    }
    if isinstance(value.get("metadata"), dict):
        triple["metadata"] = {**value["metadata"], **triple["metadata"]}
    if isinstance(value.get("trace_id"), str) and value["trace_id"]:
        triple["id"] = value["trace_id"]
    return triple


@dataclass(frozen=True)
class Grant:
    """What a valid token brings: the app forced on its triples, the mapping of its shapes."""

    app: str | None = None
    mapper: Mapper | None = None


class Tokens:
    """``VEREDITO_INGEST_TOKENS``: ``token``, ``token:app`` (the app forced on its triples) or
    ``token:app:preset`` (its bodies read with a mapping preset of :mod:`.mapping`; the app may
    be empty: ``token::langchain``), comma-separated. Every comparison is constant-time."""

    def __init__(self, spec: str | None) -> None:
        self._tokens: list[tuple[bytes, Grant]] = []
        for part in (spec or "").split(","):
            token, _, rest = part.strip().partition(":")
            app, _, preset = rest.partition(":")
            if not token:
                continue
            mapper = Mapper(parse_maps([preset.strip()])) if preset.strip() else None
            self._tokens.append((token.encode(), Grant(app.strip() or None, mapper)))

    def __bool__(self) -> bool:
        return bool(self._tokens)

    def check(self, header: str | None) -> Grant | None:
        """What the token of an ``Authorization`` header grants; None when it is not valid."""
        scheme, _, given = (header or "").partition(" ")
        if scheme.lower() != "bearer" or not given:
            return None
        found: Grant | None = None
        candidate = given.strip().encode()
        for token, grant in self._tokens:  # no early exit: the time says nothing about the match
            if hmac.compare_digest(token, candidate):
                found = grant
        return found
