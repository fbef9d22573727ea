"""HTTP bodies into triple objects: our own route's shapes, and aferiq-eval's (spec §13).

``read_body`` turns a request body into the list of values it carries — one JSON object, a JSON
array of them, or NDJSON — or raises :class:`BodyError` naming what is wrong (the line, for
NDJSON). ``from_aferiq`` maps aferiq-eval's payloads onto the triple contract: a RAG trace
already is one (``{"query", "context", "answer"}``); an agent trace ``{"trace_id", "goal",
"final_answer", "steps", "tool_specs"}`` becomes query = goal, answer = final answer, context =
the outputs of its ``retrieval`` and ``tool`` steps, id = the trace id, ``metadata.release`` its
metadata's ``release``, else ``app_version``, else ``version`` (spec §18). The values are then
checked by :func:`veredito.producer.triple.parse_triple` like any other input.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import io
import json
from dataclasses import dataclass
from typing import Any, TypeVar

from veredito.producer.mapping import Mapper, parse_maps
from veredito.producer.reader import MAX_NESTING, nested_deeper_than, read_lines
from veredito.producer.triple import check_release

__all__ = [
    "MIN_TOKEN_LENGTH",
    "NDJSON",
    "BodyError",
    "Grant",
    "HeaderError",
    "TokenError",
    "Tokens",
    "TooManyItems",
    "count_items",
    "from_aferiq",
    "read_body",
]

NDJSON = "application/x-ndjson"
CONTEXT_STEPS = ("retrieval", "tool")
RELEASE_KEYS = ("app_version", "version")  # an agent trace's metadata naming the app's version


class BodyError(ValueError):
    """The body is not what the route takes; the message says why (and which line)."""


class TooManyItems(ValueError):
    """A body carrying more triples than one request may (``VEREDITO_INGEST_MAX_ITEMS``)."""

    def __init__(self, count: int, limit: int) -> None:
        super().__init__(
            f"the body carries {count} items, over the limit of {limit} per request "
            "(VEREDITO_INGEST_MAX_ITEMS): send them in several requests"
        )
        self.count = count
        self.limit = limit

    def __reduce__(self) -> tuple[type[TooManyItems], tuple[int, int]]:
        return TooManyItems, (self.count, self.limit)  # it crosses processes (serving/heavy.py)


def count_items(data: bytes, content_type: str) -> int | None:
    """How many items an NDJSON body carries (its non-blank lines), counted without parsing;
    None for JSON, whose items are known only once it is parsed."""
    if content_type != NDJSON:
        return None
    return sum(1 for line in data.splitlines() if line.strip())


def read_body(data: bytes, content_type: str, max_items: int | None = None) -> list[Any]:
    """The values of a body, or :class:`BodyError`; :class:`TooManyItems` past ``max_items``
    (checked before an NDJSON body is parsed)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BodyError(f"the body is not UTF-8 (byte {exc.start})") from None
    if content_type == NDJSON:
        counted = count_items(data, content_type)
        if max_items is not None and counted is not None and counted > max_items:
            raise TooManyItems(counted, max_items)
        values = []
        for item in read_lines(io.StringIO(text)):
            if item.error is not None:
                raise BodyError(f"line {item.line}: {item.error}")
            values.append(item.value)
        if not values:
            raise BodyError("the body has no lines")
        return values
    try:
        value = json.loads(text)
    except RecursionError:
        raise BodyError(f"not valid JSON (nested deeper than {MAX_NESTING} levels)") from None
    except ValueError as exc:
        raise BodyError(f"not valid JSON: {exc}") from None
    if nested_deeper_than(value, MAX_NESTING + 1):  # the array holding the triples is a level
        raise BodyError(f"not valid JSON (nested deeper than {MAX_NESTING} levels)")
    if isinstance(value, list):
        if not value:
            raise BodyError("the array is empty")
        if max_items is not None and len(value) > max_items:
            raise TooManyItems(len(value), max_items)
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
        metadata = triple["metadata"]
        if "release" not in metadata:  # spec §18: the app's version, where the trace names it
            for key in RELEASE_KEYS:
                if isinstance(metadata.get(key), str):
                    metadata["release"] = metadata[key]
                    if check_release(metadata[key]) is not None:  # named by where it came from
                        metadata["release_from"] = key
                    break
    if isinstance(value.get("trace_id"), str) and value["trace_id"]:
        triple["id"] = value["trace_id"]
    return triple


MIN_TOKEN_LENGTH = 16

_T = TypeVar("_T")


class TokenError(ValueError):
    """A configured token list that cannot be used (too short, odd characters); the message names
    the entry by its position, never its value."""


class HeaderError(ValueError):
    """An ``Authorization`` header that no token could match (not printable ASCII)."""


@dataclass(frozen=True)
class Grant:
    """What a valid token brings: the app forced on its triples, the mapping of its shapes, and
    ``tenant``, an opaque name of the token (a hash prefix, never the token) that keys what the
    server keeps per tenant (OTLP spans waiting for their root)."""

    app: str | None = None
    mapper: Mapper | None = None
    tenant: str = "anonymous"


def _printable_ascii(value: str) -> bool:
    return value.isascii() and value.isprintable()


def token_entries(spec: str | None, name: str) -> list[tuple[int, str, str]]:
    """The entries of a comma-separated token setting (``name``, for the messages) as
    (position, token, what follows its first colon), each token checked: at least 16 printable
    ASCII characters without spaces (:class:`TokenError` names the entry by its position, never
    its value). Empty entries are skipped."""
    entries: list[tuple[int, str, str]] = []
    for position, part in enumerate((spec or "").split(","), start=1):
        token, _, rest = part.strip().partition(":")
        if not token:
            continue
        if not _printable_ascii(token) or " " in token:
            raise TokenError(f"{name}: token {position} has a character other than printable ASCII")
        if len(token) < MIN_TOKEN_LENGTH:
            raise TokenError(
                f"{name}: token {position} is {len(token)} characters long; use at least "
                f"{MIN_TOKEN_LENGTH} (for example: python -c 'import secrets; "
                "print(secrets.token_urlsafe(24))')"
            )
        entries.append((position, token, rest))
    return entries


def bearer(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer`` header; None without one. :class:`HeaderError`
    for a header no token could ever match (not printable ASCII)."""
    scheme, _, given = (header or "").partition(" ")
    if scheme.lower() != "bearer" or not given:
        return None
    if not _printable_ascii(given):
        raise HeaderError("Authorization: the header is not printable ASCII")
    return given


def match_token(known: list[tuple[bytes, _T]], given: str) -> _T | None:
    """What ``given`` maps to among ``known``, compared in constant time against every entry (no
    early exit: the time says nothing about which matched, or whether one did)."""
    if not _printable_ascii(given):
        return None
    found: _T | None = None
    candidate = given.strip().encode()
    for token, value in known:
        if hmac.compare_digest(token, candidate):
            found = value
    return found


class Tokens:
    """``VEREDITO_INGEST_TOKENS``: ``token``, ``token:app`` (the app forced on its triples) or
    ``token:app:preset`` (its bodies read with a mapping preset of :mod:`.mapping`; the app may
    be empty: ``token::langchain``), comma-separated. Every comparison is constant-time.

    A token is at least 16 printable ASCII characters without spaces, colons or commas; a
    shorter one is refused at start (:class:`TokenError`), since a short token can be guessed.
    ``name`` is the setting, for the messages."""

    def __init__(self, spec: str | None, name: str = "VEREDITO_INGEST_TOKENS") -> None:
        self._tokens: list[tuple[bytes, Grant]] = []
        for _, token, rest in token_entries(spec, name):
            app, _, preset = rest.partition(":")
            mapper = Mapper(parse_maps([preset.strip()])) if preset.strip() else None
            tenant = hashlib.sha256(token.encode()).hexdigest()[:16]
            self._tokens.append((token.encode(), Grant(app.strip() or None, mapper, tenant)))

    def __bool__(self) -> bool:
        return bool(self._tokens)

    def check(self, header: str | None) -> Grant | None:
        """What the token of an ``Authorization: Bearer`` header grants; None when it is not
        valid. :class:`HeaderError` for a header no token could ever match (non-ASCII)."""
        given = bearer(header)
        return None if given is None else match_token(self._tokens, given)


class LangfuseKeys:
    """``VEREDITO_LANGFUSE_KEYS``: ``public key:secret key:ingest token``, comma-separated. The
    Langfuse SDK sends ``Authorization: Basic base64(public:secret)`` to
    ``/api/public/otel/v1/traces``; a pair listed here is taken as its ingest token (the token's
    app and tenancy with it), so a Langfuse user changes only the host. Compared in constant
    time; each token must be one of ``VEREDITO_INGEST_TOKENS`` (checked at start)."""

    def __init__(self, spec: str | None, tokens: Tokens) -> None:
        self._pairs: list[tuple[bytes, str]] = []
        for position, part in enumerate((spec or "").split(","), start=1):
            if not part.strip():
                continue
            public, _, rest = part.strip().partition(":")
            secret, _, token = rest.partition(":")
            if not (public and secret and token):
                raise TokenError(
                    f"VEREDITO_LANGFUSE_KEYS: entry {position} is not public:secret:ingest-token"
                )
            if not (_printable_ascii(public) and _printable_ascii(secret)):
                raise TokenError(
                    f"VEREDITO_LANGFUSE_KEYS: entry {position} has a character other than "
                    "printable ASCII"
                )
            if len(secret) < MIN_TOKEN_LENGTH:
                raise TokenError(
                    f"VEREDITO_LANGFUSE_KEYS: entry {position}'s secret key is shorter than "
                    f"{MIN_TOKEN_LENGTH} characters"
                )
            if tokens.check(f"Bearer {token}") is None:
                raise TokenError(
                    f"VEREDITO_LANGFUSE_KEYS: entry {position} names no token of "
                    "VEREDITO_INGEST_TOKENS"
                )
            self._pairs.append((f"{public}:{secret}".encode(), token))

    def __bool__(self) -> bool:
        return bool(self._pairs)

    def bearer_for(self, header: str | None) -> str | None:
        """The ``Authorization: Bearer`` header a Langfuse ``Basic`` header stands for; the
        header itself when it is not Basic; None for a Basic pair not listed."""
        scheme, _, value = (header or "").partition(" ")
        if scheme.lower() != "basic":
            return header
        try:
            decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            return None
        token = match_token(self._pairs, decoded)
        return None if token is None else f"Bearer {token}"
