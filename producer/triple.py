"""The triple contract (spec §3): what a producer may send and how it is normalised.

A raw input object is turned into a :class:`Triple` or an :class:`InvalidTriple` that names the
field and the reason.  The worker applies the same function to every task payload, so a triple
from any producer is judged by one contract.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "RELEASE_PATTERN",
    "InvalidTriple",
    "Limits",
    "Triple",
    "check_metadata",
    "check_release",
    "fallback_id",
    "parse_triple",
    "triple_id",
]

QUERY_KEYS = ("query", "question", "user_input", "input")
CONTEXT_KEYS = ("context", "contexts", "retrieved_contexts", "chunks", "documents")
ANSWER_KEYS = ("answer", "response", "output")
MAX_ID_LENGTH = 128
MAX_METADATA_DEPTH = 32
LONE_SURROGATE = "contains an invalid Unicode character (lone surrogate)"
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True, slots=True)
class Limits:
    max_chunks: int = 64
    max_bytes: int = 256 * 1024


class InvalidTriple(ValueError):
    """A triple that breaks the contract.  ``field`` names the offending field.

    Picklable (Celery may move it between processes): all state is in ``args``.
    """

    def __init__(self, field: str, reason: str, line: int | None = None) -> None:
        super().__init__(field, reason, line)
        self.field = field
        self.reason = reason
        self.line = line

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line is not None else ""
        return f"{where}{self.field}: {self.reason}"


@dataclass(frozen=True, slots=True)
class Triple:
    id: str
    query: str
    context: tuple[str, ...]
    answer: str
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def app(self) -> str | None:
        app = self.metadata.get("app")
        return app if isinstance(app, str) and app else None

    @property
    def release(self) -> str:
        """The release that answered (spec §18), ``unknown`` when the triple names none."""
        release = self.metadata.get("release")
        return release if isinstance(release, str) and release else "unknown"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "query": self.query,
            "context": list(self.context),
            "answer": self.answer,
            "metadata": self.metadata,
        }


def triple_id(query: str, context: tuple[str, ...] | list[str], answer: str) -> str:
    """First 32 hex of sha256 over the canonical JSON of ``[query, context-list, answer]``.

    Canonical JSON here is ``json.dumps`` with ``ensure_ascii=False`` and ``(",", ":")``
    separators, encoded as UTF-8.
    """
    canonical = json.dumps(
        [query, list(context), answer], ensure_ascii=False, separators=(",", ":")
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:32]


def _pick(raw: Mapping[str, Any], keys: tuple[str, ...]) -> tuple[bool, Any]:
    for key in keys:
        if key in raw:
            return True, raw[key]
    return False, None


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    return {
        bool: "boolean",
        int: "number",
        float: "number",
        str: "string",
        list: "list",
        dict: "object",
    }.get(type(value), type(value).__name__)


def parse_triple(raw: object, limits: Limits = Limits(), line: int | None = None) -> Triple:
    """Validate and normalise one input object; raise :class:`InvalidTriple` naming the field."""
    if not isinstance(raw, Mapping):
        raise InvalidTriple("triple", f"must be a JSON object, got {_type_name(raw)}", line)

    found, query = _pick(raw, QUERY_KEYS)
    if not found:
        raise InvalidTriple("query", f"missing (also accepted: {', '.join(QUERY_KEYS[1:])})", line)
    if not isinstance(query, str):
        raise InvalidTriple("query", f"must be a string, got {_type_name(query)}", line)
    if not query.strip():
        raise InvalidTriple("query", "must not be empty", line)
    if _SURROGATE.search(query):
        raise InvalidTriple("query", LONE_SURROGATE, line)

    found, context = _pick(raw, CONTEXT_KEYS)
    if not found:
        raise InvalidTriple(
            "context", f"missing (also accepted: {', '.join(CONTEXT_KEYS[1:])})", line
        )
    chunks = _parse_context(context, limits, line)

    found, answer = _pick(raw, ANSWER_KEYS)
    if not found:
        raise InvalidTriple(
            "answer", f"missing (also accepted: {', '.join(ANSWER_KEYS[1:])})", line
        )
    if not isinstance(answer, str):
        raise InvalidTriple("answer", f"must be a string, got {_type_name(answer)}", line)
    if _SURROGATE.search(answer):
        raise InvalidTriple("answer", LONE_SURROGATE, line)

    metadata = raw.get("metadata")
    if metadata is None:
        metadata = {}
    else:
        check_metadata(metadata, line)

    size = len(query.encode()) + len(answer.encode()) + sum(len(c.encode()) for c in chunks)
    if size > limits.max_bytes:
        raise InvalidTriple(
            "triple",
            f"{size} bytes of text, limit is {limits.max_bytes} (VEREDITO_MAX_TRIPLE_BYTES)",
            line,
        )

    given_id = raw.get("id")
    if given_id is None:
        tid = triple_id(query, chunks, answer)
    elif not isinstance(given_id, str) or not given_id:
        raise InvalidTriple("id", "must be a non-empty string when present", line)
    elif len(given_id) > MAX_ID_LENGTH:
        raise InvalidTriple("id", f"{len(given_id)} characters, limit is {MAX_ID_LENGTH}", line)
    elif _SURROGATE.search(given_id):
        raise InvalidTriple("id", LONE_SURROGATE, line)
    else:
        tid = given_id

    return Triple(id=tid, query=query, context=chunks, answer=answer, metadata=metadata)


def _parse_context(context: object, limits: Limits, line: int | None) -> tuple[str, ...]:
    if isinstance(context, str):
        if not context.strip():
            raise InvalidTriple("context", "must not be an empty string", line)
        if _SURROGATE.search(context):
            raise InvalidTriple("context", LONE_SURROGATE, line)
        return (context,)
    if not isinstance(context, list):
        raise InvalidTriple(
            "context",
            f"must be a list of strings or one string, got {_type_name(context)}",
            line,
        )
    if not context:
        raise InvalidTriple(
            "context", "no chunks: with nothing retrieved there is nothing to judge against", line
        )
    if len(context) > limits.max_chunks:
        raise InvalidTriple(
            "context",
            f"{len(context)} chunks, limit is {limits.max_chunks} (VEREDITO_MAX_CHUNKS)",
            line,
        )
    for i, chunk in enumerate(context):
        if not isinstance(chunk, str):
            raise InvalidTriple(
                "context", f"chunk {i} must be a string, got {_type_name(chunk)}", line
            )
        if not chunk.strip():
            raise InvalidTriple("context", f"chunk {i} is empty", line)
        if _SURROGATE.search(chunk):
            raise InvalidTriple("context", f"chunk {i} {LONE_SURROGATE}", line)
    return tuple(context)


def check_metadata(metadata: object, line: int | None = None) -> dict[str, Any]:
    """``metadata`` itself if it is a JSON object that any JSON encoder can carry unchanged.

    Raise :class:`InvalidTriple` (field ``metadata``) otherwise: not an object, nested deeper
    than ``MAX_METADATA_DEPTH`` levels, a key that is not a string, NaN or Infinity, a lone
    surrogate, or a value JSON has no type for.
    """
    if not isinstance(metadata, dict):
        raise InvalidTriple("metadata", f"must be an object, got {_type_name(metadata)}", line)
    problem = _json_problem(metadata, 1)
    if problem is not None:
        raise InvalidTriple("metadata", problem, line)
    app = metadata.get("app")
    if isinstance(app, str):
        if app != app.strip():
            raise InvalidTriple("metadata.app", f"{app!r} has leading or trailing whitespace", line)
        if _APP_CONTROL.search(app):
            raise InvalidTriple("metadata.app", "contains a control character", line)
    if "release" in metadata:
        problem = check_release(metadata["release"])
        if problem is not None:
            raise InvalidTriple("metadata.release", problem, line)
    return metadata


# spec §18: a release is a label value, a store column and a URL parameter: short and plain
RELEASE_PATTERN = re.compile(r"[A-Za-z0-9._+-]{1,64}")
MAX_RELEASE_LENGTH = 64
# where a release the contract refuses came from, when a route took it from another field
# (``metadata.release_from``, set by that route): the rejection names it
RELEASE_FROM = {
    "service.version": "the resource's service.version",
    "app_version": "the trace's metadata.app_version",
    "version": "the trace's metadata.version",
}


def check_release(release: object) -> str | None:
    """Why ``release`` cannot name a release (spec §18: at most 64 characters of
    ``[A-Za-z0-9._+-]``); None when it can. ``null`` is allowed: absent, read as ``unknown``."""
    if release is None:
        return None
    if not isinstance(release, str):
        return f"must be a string, got {_type_name(release)}"
    if not release:
        return "must not be empty (leave it out: absent means unknown)"
    if len(release) > MAX_RELEASE_LENGTH:
        return f"{len(release)} characters, limit is {MAX_RELEASE_LENGTH}"
    if not RELEASE_PATTERN.fullmatch(release):
        bad = next(c for c in release if not RELEASE_PATTERN.fullmatch(c))
        return f"{bad!r} is not allowed: use letters, digits and . _ + - only"
    return None


# an app's name is matched exactly everywhere (the store, ?app=, tokens, metrics): a space at
# either end or a control character would make an app nobody can name
_APP_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _json_problem(value: object, depth: int) -> str | None:
    """Why ``value`` cannot be written as strict UTF-8 JSON; None if it can."""
    if value is None or isinstance(value, bool | str | int | float):
        if isinstance(value, str) and _SURROGATE.search(value):
            return LONE_SURROGATE
        if isinstance(value, float) and not math.isfinite(value):
            return "contains NaN or Infinity, which JSON cannot carry"
        if isinstance(value, int) and value.bit_length() > 10_000:
            return "contains a number too large to write"
        return None
    if depth > MAX_METADATA_DEPTH:
        return f"nested deeper than {MAX_METADATA_DEPTH} levels"
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"keys must be strings, got {_type_name(key)}"
            problem = _json_problem(key, depth) or _json_problem(item, depth + 1)
            if problem is not None:
                return problem
        return None
    if isinstance(value, list | tuple):
        for item in value:
            problem = _json_problem(item, depth + 1)
            if problem is not None:
                return problem
        return None
    return f"contains a {_type_name(value)}, which JSON cannot carry"


def fallback_id(value: object) -> str:
    """A deterministic id for an input that is not a valid triple.  Never raises."""
    given = value.get("id") if isinstance(value, dict) else None
    if isinstance(given, str) and 0 < len(given) <= 128 and _encodable(given):
        return given
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, sort_keys=True, default=str)
        except (RecursionError, TypeError, ValueError):  # too deep, mixed keys, huge ints, cycles
            text = json.dumps(_bounded(value, 32), sort_keys=True)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: no verdict could carry it
        return False
    return True


def _bounded(value: object, depth: int) -> object:
    """``value`` as plain JSON types, cut off ``depth`` levels down: for :func:`fallback_id`."""
    if isinstance(value, bool | float | str) or value is None:
        return value
    if isinstance(value, int):
        return value if value.bit_length() <= 10_000 else f"int:{value:x}"
    if depth <= 0:
        return "..."
    if isinstance(value, dict):
        return {str(k): _bounded(v, depth - 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_bounded(v, depth - 1) for v in value]
    return type(value).__name__


def rejection(raw: object, exc: InvalidTriple) -> str:
    """The message of a rejected triple: the error, and what a trace's assembly looked for when
    the field came from OpenTelemetry spans (``metadata.otlp.looked_for``)."""
    message = str(exc)
    metadata = raw.get("metadata") if isinstance(raw, Mapping) else None
    origin = metadata.get("release_from") if isinstance(metadata, Mapping) else None
    if exc.field == "metadata.release" and isinstance(origin, str) and origin in RELEASE_FROM:
        message = str(InvalidTriple(f"{exc.field} (from {RELEASE_FROM[origin]})", exc.reason,
                                    exc.line))  # fmt: skip
    otlp = metadata.get("otlp") if isinstance(metadata, Mapping) else None
    looked = otlp.get("looked_for") if isinstance(otlp, Mapping) else None
    if isinstance(looked, Mapping) and isinstance(looked.get(exc.field), str):
        message += f"; looked for {looked[exc.field]}"
    return message


def partial_input(raw: object) -> dict[str, Any] | None:
    """What a rejected triple did carry, for its verdict's ``input``: the query, the context's
    chunks and the answer that are text; None when none is."""
    if not isinstance(raw, Mapping):
        return None
    found: dict[str, Any] = {}
    for name, keys in (("query", QUERY_KEYS), ("answer", ANSWER_KEYS)):
        value = next((raw[k] for k in keys if isinstance(raw.get(k), str)), None)
        if value is not None and not _SURROGATE.search(value):
            found[name] = value
    context = next((raw[k] for k in CONTEXT_KEYS if k in raw), None)
    if isinstance(context, str):
        context = [context]
    if isinstance(context, list):
        chunks = [c for c in context if isinstance(c, str) and not _SURROGATE.search(c)]
        if chunks:
            found["context"] = chunks
    return found or None
