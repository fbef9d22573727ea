"""What every store shares: the protocol, filters, time parsing and the rows of a verdict."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from veredito.labels import sample_key

__all__ = [
    "ClaimRow",
    "Filters",
    "Page",
    "Store",
    "StoreError",
    "StoreUnavailable",
    "VerdictRow",
    "app_of",
    "marks",
    "parse_when",
    "release_of",
    "rows_of",
    "sample_key",
    "timestamp",
]

TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def marks(n: int) -> str:
    """``n`` query placeholders, comma-separated (each dialect rewrites ``%s`` its way)."""
    return ", ".join(["%s"] * n)


class StoreError(Exception):
    """A store that cannot be used as configured (bad URL, schema newer than this code)."""


class StoreUnavailable(Exception):
    """The database cannot be reached or lost the connection: retry the same batch later."""


class Store(Protocol):
    url: str

    def write(self, verdicts: Sequence[bytes]) -> tuple[int, int]:
        """Commit ``verdicts`` (JSON bodies); return (written, already stored). Raises
        :class:`StoreUnavailable` when nothing of the batch can be vouched for."""

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Filters:
    app: str | None = None
    status: str | None = None
    hallucinated: bool | None = None
    category: str | None = None  # a claim not grounded in this category
    verdict: str | None = None  # a claim with this verdict (grounded, partial, ...)
    since: str | None = None  # timestamps in TIME_FORMAT (see parse_when)
    until: str | None = None
    min_confidence: float | None = None  # hallucination_confidence at least this
    release: str | None = None  # spec §18: the release that answered


@dataclass
class Page:
    items: list[dict[str, Any]] = field(default_factory=list)
    next_cursor: str | None = None


_RELATIVE = re.compile(r"^(\d+)\s*(m|min|h|d|w)$")
_UNITS = {"m": 60, "min": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime(TIME_FORMAT)


def parse_when(text: str, *, now: datetime | None = None) -> str:
    """``since``/``until``: an ISO 8601 moment (a date alone is its midnight UTC; no zone is UTC)
    or a span back from now (``15m``, ``1h``, ``7d``, ``2w``). Raises ValueError naming it."""
    value = text.strip()
    match = _RELATIVE.match(value)
    if match:
        seconds = int(match.group(1)) * _UNITS[match.group(2)]
        return timestamp((now or datetime.now(UTC)) - timedelta(seconds=seconds))
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00").replace(" ", "T", 1))
    except ValueError:
        raise ValueError(
            f"{text!r} is not a time: use ISO 8601 (2026-11-30T14:05:00Z) or a span (1h, 7d)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return timestamp(moment)


_CANONICAL = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


def _evaluated_at(value: Any) -> str:
    if isinstance(value, str) and _CANONICAL.fullmatch(value):
        return value  # what our verdicts carry: already UTC and fixed width
    if isinstance(value, str):
        try:
            return parse_when(value)
        except ValueError:
            pass
    return timestamp(datetime.now(UTC))


# id, app, status, hallucinated, score, faithfulness_score, judge_kind, judge_model,
# evaluated_at, categories, body, sample_key, hallucination_confidence, release
VerdictRow = tuple[
    str,
    str,
    str,
    bool,
    float | None,
    float | None,
    str | None,
    str | None,
    str,
    str | None,
    str,
    float,
    float | None,
    str,
]
# verdict_id, position, text, verdict, category, chunk_idx, source, app, confidence, release
# (the verdict's release when it is a judged answer, status ok; None otherwise)
ClaimRow = tuple[
    str, int, str, str, str | None, int | None, str | None, str, float | None, str | None
]


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _probability(value: Any) -> float | None:
    number = _number(value)
    return number if number is not None and 0.0 <= number <= 1.0 else None


def _text(value: Any) -> str | None:
    """A text column's value; NUL (which PostgreSQL's text cannot hold) becomes U+FFFD."""
    if not isinstance(value, str):
        return None
    return value.replace("\x00", "\ufffd") if "\x00" in value else value


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def app_of(verdict: dict[str, Any]) -> str:
    """The app a verdict belongs to, ``""`` when it names none: with its id, the verdict's key
    (one app's ``ticket-1001`` is not another's)."""
    meta = _dict(verdict.get("metadata"))
    return _text(meta.get("app")) or ""


def release_of(verdict: dict[str, Any]) -> str:
    """The release a verdict names (spec §18), ``unknown`` when none the contract would take."""
    release = _dict(verdict.get("metadata")).get("release")
    if isinstance(release, str) and _RELEASE.fullmatch(release):
        return release
    return "unknown"


_RELEASE = re.compile(r"[A-Za-z0-9._+-]{1,64}")


def rows_of(body: bytes) -> tuple[VerdictRow, list[ClaimRow]] | None:
    """The table rows of one verdict; None for a body that is not a verdict with a string id."""
    try:
        verdict = json.loads(body)
    except ValueError:
        return None
    if not isinstance(verdict, dict) or not isinstance(verdict.get("id"), str):
        return None
    verdict_id: str = verdict["id"]
    app = app_of(verdict)
    judge = _dict(verdict.get("judge"))
    faith = _dict(verdict.get("faithfulness"))
    categories = _dict(verdict.get("categories"))
    row: VerdictRow = (
        verdict_id,
        app,
        _text(verdict.get("status")) or "ok",
        verdict.get("hallucinated") is True,
        _number(verdict.get("score")),
        _number(faith.get("score")),
        _text(judge.get("kind")),
        _text(judge.get("model")),
        _evaluated_at(verdict.get("evaluated_at")),
        " ".join(sorted(str(c) for c in categories)) or None,
        body.decode("utf-8", "replace"),
        sample_key(app, verdict_id),
        _probability(verdict.get("hallucination_confidence")),
        release_of(verdict),
    )
    claims: list[ClaimRow] = []
    judged = row[2] == "ok"
    raw_claims = verdict.get("claims")
    for position, claim in enumerate(raw_claims if isinstance(raw_claims, list) else []):
        if not isinstance(claim, dict):
            continue
        chunk = claim.get("chunk_idx")
        claims.append(
            (
                verdict_id,
                position,
                _text(claim.get("text")) or "",
                _text(claim.get("verdict")) or "invented",
                _text(claim.get("category")),
                chunk
                if isinstance(chunk, int) and not isinstance(chunk, bool) and 0 <= chunk < 2**31
                else None,
                _text(claim.get("source")),
                app,
                _probability(claim.get("confidence")),
                row[13] if judged else None,
            )
        )
    return row, claims
