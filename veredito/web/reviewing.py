"""Reviewers and what their labels add up to: review tokens (``VEREDITO_REVIEW_TOKENS``), a
label submission checked and stored, the reviewers' disagreements, the agreement of the judge with
the labels (cached) and the precision gauges that carry it to Prometheus. No routes: those are in
:mod:`veredito.web.labels` (the API) and :mod:`veredito.web.page_labels` (the page)."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import threading
import time
from collections import Counter as Tally
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from veredito.labels import (
    DEFAULT_SHARE,
    LabelError,
    agreement,
    agreement_from,
    collector_paused,
    counts_of,
    labelled_record,
    parse_submission,
)
from veredito.producer.ingest import (
    TokenError,
    bearer,
    match_token,
    token_entries,
)
from veredito.store import Filters, SQLStore
from veredito.store.labelling import TooManySubmissions
from veredito.store.sql import AmbiguousId

__all__ = [
    "AgreementCache",
    "ReviewMetrics",
    "ReviewTokens",
    "Reviewer",
    "WriteLimits",
    "agreement_of",
    "disagreements",
    "listed",
    "refresh_precision",
    "submit",
]

log = logging.getLogger(__name__)

JUDGES = ("llm", "rules")


@dataclass(frozen=True)
class Reviewer:
    name: str
    app: str | None = None  # labels this app only


class ReviewTokens:
    """``VEREDITO_REVIEW_TOKENS``: ``token:reviewer`` or ``token:reviewer:app``, comma-separated;
    tokens of 16 printable ASCII characters or more, compared in constant time."""

    def __init__(self, spec: str | None) -> None:
        self._tokens: list[tuple[bytes, Reviewer]] = []
        for position, token, rest in token_entries(spec, "VEREDITO_REVIEW_TOKENS"):
            name, _, app = rest.partition(":")
            if not name.strip():
                raise TokenError(
                    f"VEREDITO_REVIEW_TOKENS: token {position} names no reviewer "
                    "(write token:reviewer or token:reviewer:app)"
                )
            self._tokens.append((token.encode(), Reviewer(name.strip(), app.strip() or None)))

    def __bool__(self) -> bool:
        return bool(self._tokens)

    def find(self, token: str) -> Reviewer | None:
        return match_token(self._tokens, token)

    def check(self, header: str | None) -> Reviewer | None:
        given = bearer(header)
        return None if given is None else self.find(given)

    @staticmethod
    def _key(token: bytes, secret: bytes) -> str:
        return hmac.new(secret, b"session-key:" + token, hashlib.sha256).hexdigest()[:32]

    def session_key(self, reviewer: Reviewer, secret: bytes) -> str:
        """An opaque name of the reviewer's token for the page's session cookie: an HMAC under
        the session secret, so a cookie is no oracle for guessing tokens offline."""
        for token, known in self._tokens:
            if known is reviewer:
                return self._key(token, secret)
        raise KeyError(reviewer.name)

    def by_session_key(self, key: str, secret: bytes) -> Reviewer | None:
        found = None
        given = key.encode("ascii", "replace")
        for token, reviewer in self._tokens:
            if hmac.compare_digest(self._key(token, secret).encode(), given):
                found = reviewer
        return found


class WriteLimits:
    """Label writes per reviewer: a token bucket each, ``rate`` submissions a second with bursts
    of ``burst`` (``VEREDITO_REVIEW_RATE``, ``VEREDITO_REVIEW_BURST``; rate 0 turns it off). One
    per ``serve`` process, used from its event loop only; one bucket per reviewer name, and
    names come from ``VEREDITO_REVIEW_TOKENS``, so the table is as small as that list."""

    def __init__(
        self, rate: float = 1.0, burst: int = 20, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate = rate
        self.burst = max(1, burst)
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}

    def take(self, reviewer: str) -> float | None:
        """None: go ahead (a submission is counted); else the seconds until the next one is
        allowed (nothing counted)."""
        if self.rate <= 0:
            return None
        now = self._clock()
        tokens, then = self._buckets.get(reviewer, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - then) * self.rate)
        if tokens >= 1.0:
            self._buckets[reviewer] = (tokens - 1.0, now)
            return None
        self._buckets[reviewer] = (tokens, now)
        return (1.0 - tokens) / self.rate


class ReviewMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.lock = threading.Lock()
        self.refused = Counter(
            "veredito_review_refused_total",
            "Label submissions refused: reason 'rate' (over VEREDITO_REVIEW_RATE, 429) or 'cap' "
            "(VEREDITO_REVIEW_MAX_SUBMISSIONS on one answer, 409); app is the review token's "
            "('*' for a reviewer of every app)",
            ["app", "reason"],
            registry=registry,
        )
        self.series: set[tuple[str, str, str]] = set()  # (app, category, judge) now exported
        self.labels = Counter(
            "veredito_review_labels_total",
            "Labels stored by reviewers (one per claim, missed span or answer-level label)",
            ["app"],
            registry=registry,
        )
        self.precision = Gauge(
            "veredito_judge_precision",
            "The judge's precision measured on reviewers' labels of the uniform slice, over "
            "VEREDITO_REVIEW_WINDOW; category 'answer' is the answer level",
            ["app", "category", "judge"],
            registry=registry,
        )
        self.precision_low = Gauge(
            "veredito_judge_precision_lower",
            "The lower end of the precision's 95 % Wilson interval",
            ["app", "category", "judge"],
            registry=registry,
        )
        self.floor = Gauge(
            "veredito_judge_precision_floor",
            "VEREDITO_REVIEW_PRECISION_FLOOR: the alert fires when a category's precision "
            "interval lies below it",
            registry=registry,
        )
        self.min_labels = Gauge(
            "veredito_judge_precision_min_labels",
            "VEREDITO_REVIEW_MIN_LABELS: the labels a precision must rest on before it alerts",
            registry=registry,
        )
        self.precision_labels = Gauge(
            "veredito_judge_precision_labels",
            "How many labelled answers (answer level) or flagged answers of the category the "
            "precision rests on",
            ["app", "category", "judge"],
            registry=registry,
        )


class AgreementCache:
    """Each labelled answer's share of the agreement (:func:`veredito.labels.counts_of`), kept
    until a new label of that answer comes: stored verdicts never change and labels are only
    added, so a refresh reads the bodies and labels of the answers labelled since the last one
    only. Thread-safe; a few hundred bytes an answer."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._shares: dict[tuple[str, str], tuple[int, Tally[tuple[str, ...]]]] = {}

    def shares(
        self, store: SQLStore, keys: list[tuple[str, str, bool, int, int]]
    ) -> dict[tuple[str, str], Tally[tuple[str, ...]]]:
        with self._lock:
            known = {k: v for k, v in self._shares.items()}
        stale = [
            (app, vid) for app, vid, _, last, _ in keys if known.get((app, vid), (0,))[0] != last
        ]
        fresh: dict[tuple[str, str], tuple[int, Tally[tuple[str, ...]]]] = {}
        newest = {(app, vid): last for app, vid, _, last, _ in keys}
        with collector_paused():
            for verdict, rows in store.labelled_answers(stale):
                key = (_app_of(verdict), str(verdict.get("id")))
                last = max((int(r["id"]) for r in rows), default=0)
                if last >= newest.get(key, 0):
                    fresh[key] = (last, counts_of(labelled_record(verdict, rows), verdict))
        with self._lock:
            self._shares.update(fresh)
            return {(app, vid): self._shares[(app, vid)][1] for app, vid, *_ in keys
                    if (app, vid) in self._shares}  # fmt: skip


def agreement_of(
    store: SQLStore,
    filters: Filters,
    judge: str | None,
    share: float,
    cache: AgreementCache | None = None,
) -> dict[str, Any]:
    """The agreement of spec §16: the uniform slice's figures, and the other labels apart.
    Which answers are the uniform slice's is what their labels recorded when they were given
    (schema 8), not ``share``: the API, ``calibrate --from-store`` and ``labels export`` agree
    whatever the caller's ``VEREDITO_REVIEW_SAMPLE``; ``share`` is only reported (the share new
    labels are recorded with, on serve). With ``cache``, each answer's share is computed once
    per new label (serve keeps one)."""
    if cache is None:  # a one-off (calibrate --from-store): one pass over every answer
        uniform_: tuple[list[dict[str, Any]], list[dict[str, Any]]] = ([], [])
        chosen_: tuple[list[dict[str, Any]], list[dict[str, Any]]] = ([], [])
        label_rows = 0
        with collector_paused():
            for verdict, labels, in_slice in store.labelled(filters, judge):
                into = uniform_ if in_slice else chosen_
                into[0].append(labelled_record(verdict, labels))
                into[1].append(verdict)
                label_rows += len(labels)
        return {
            "app": filters.app, "judge": judge, "since": filters.since, "until": filters.until,
            "sample_share": share, "labels": label_rows, "uniform": agreement(*uniform_),
            "chosen_to_teach": agreement(*chosen_),
        }  # fmt: skip
    keys = store.labelled_keys(filters, judge)
    shares = cache.shares(store, keys)
    uniform: Tally[tuple[str, ...]] = Tally()
    chosen: Tally[tuple[str, ...]] = Tally()
    counted = {"uniform": 0, "chosen": 0}
    rows = 0
    for app, verdict_id, in_slice, _, label_count in keys:
        part = shares.get((app, verdict_id))
        if part is None:
            continue
        slice_ = "uniform" if in_slice else "chosen"
        (uniform if slice_ == "uniform" else chosen).update(part)
        counted[slice_] += 1
        rows += label_count
    return {
        "app": filters.app,
        "judge": judge,
        "since": filters.since,
        "until": filters.until,
        "sample_share": share,
        "labels": rows,
        "uniform": agreement_from(uniform, counted["uniform"]),
        "chosen_to_teach": agreement_from(chosen, counted["chosen"]),
    }


def refresh_precision(
    store: SQLStore,
    metrics: ReviewMetrics,
    since: str,
    share: float,
    cache: AgreementCache | None = None,
) -> None:
    """Set the precision gauges of every labelled app and judge (from a worker thread), and
    drop the series no longer computed (labels that aged out of the window): a stale precision
    must not keep an alert firing."""
    fresh: dict[tuple[str, str, str], dict[str, Any]] = {}
    for app in store.label_counts():
        for judge in JUDGES:
            result = agreement_of(store, Filters(app=app, since=since), judge, share, cache)
            result = result["uniform"]
            figures = {"answer": result["answer_level"], **result["categories"]}
            for category, numbers in figures.items():
                if numbers["labelled"]:
                    fresh[(app, category, judge)] = numbers
    gauges = (metrics.precision, metrics.precision_low, metrics.precision_labels)
    with metrics.lock:
        for key in metrics.series - set(fresh):
            for gauge in gauges:
                with contextlib.suppress(KeyError):
                    gauge.remove(*key)
        for key, numbers in fresh.items():
            metrics.precision.labels(*key).set(numbers["precision"])
            metrics.precision_low.labels(*key).set(numbers["precision_interval"][0])
            metrics.precision_labels.labels(*key).set(numbers["labelled"])
        metrics.series = set(fresh)


def submit(
    store: SQLStore,
    reviewer: Reviewer,
    app: str | None,
    verdict_id: str,
    body: Any,
    max_submissions: int | None = None,
    share: float = DEFAULT_SHARE,
) -> tuple[int, dict[str, Any]]:
    """Check and store one submission (from a worker thread): ``(status, answer)``. Everything
    is checked before anything is written: a 4xx stores nothing. ``share``: serve's uniform
    slice, recorded with each label (whether the answer is in it now)."""
    if reviewer.app is not None:
        if app is not None and app != reviewer.app:
            return 403, _error("forbidden", "this review token labels only its own app")
        app = reviewer.app
    try:
        verdict = store.get(verdict_id, app)
    except AmbiguousId as exc:
        apps = ", ".join(repr(a) for a in exc.apps)
        return 409, _error(
            "ambiguous_id",
            f"{len(exc.apps)} apps have a verdict with this id: name one with ?app= ({apps})",
        )
    if verdict is None:
        return 404, _error("not_found", "no verdict with this id")
    verdict_app = _app_of(verdict)
    if reviewer.app is not None and verdict_app != reviewer.app:
        return 404, _error("not_found", "no verdict with this id")
    try:
        submission = parse_submission(body, verdict)
    except LabelError as exc:
        return 400, _error("invalid_label", str(exc))
    try:
        stored = store.add_labels(
            verdict_app, verdict_id, reviewer.name, submission.labels,
            max_submissions=max_submissions, share=share,
        )  # fmt: skip
    except TooManySubmissions as exc:
        return 409, _error(
            "too_many_submissions",
            f"this reviewer has given this answer {exc.cap} submissions, the most allowed "
            "(VEREDITO_REVIEW_MAX_SUBMISSIONS); the latest counts",
        )
    if stored is None:
        return 404, _error("not_found", "no verdict with this id")
    return 201, stored


NOTE_IN_LISTS = 1000  # characters of a note a list shows
MISSED_IN_LISTS = 10  # missed spans of a submission a list shows


def listed(submission: dict[str, Any], note: int = NOTE_IN_LISTS, missed: int = MISSED_IN_LISTS
           ) -> dict[str, Any]:  # fmt: skip
    """A submission as a list shows it: its note cut to ``note`` characters
    (``note_truncated``), its first ``missed`` spans (``missed_count`` says how many it has);
    the whole is one request away (``GET /v1/verdicts/{id}/labels/{submission}``)."""
    text = submission.get("note")
    spans = submission.get("missed") or []
    long = isinstance(text, str) and len(text) > note
    return {
        **submission,
        "note": text[:note] if isinstance(text, str) and long else text,
        "note_truncated": long,
        "missed": spans[:missed],
        "missed_count": len(spans),
    }


def disagreements(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Claims (and the answer) on which reviewers' latest labels differ."""
    latest: dict[tuple[str, int | None], dict[str, tuple[Any, ...]]] = {}
    for row in rows:
        if row["kind"] == "claim":
            said: tuple[Any, ...] = (row["correct"], row["verdict"], row["category"])
        elif row["kind"] == "answer" and row["hallucinated"] is not None:
            said = (row["hallucinated"],)
        else:
            continue
        latest.setdefault((row["kind"], row["claim_idx"]), {})[str(row["reviewer"])] = said
    out = []
    for (kind, idx), by in sorted(latest.items(), key=lambda x: (x[0][0], x[0][1] or -1)):
        if len(set(by.values())) > 1:
            out.append(
                {
                    "kind": kind,
                    "claim_idx": idx,
                    "reviewers": {
                        name: dict(zip(("correct", "verdict", "category"), said, strict=False))
                        if kind == "claim"
                        else {"hallucinated": said[0]}
                        for name, said in sorted(by.items())
                    },
                }
            )
    return out


def _app_of(verdict: dict[str, Any]) -> str:
    metadata = verdict.get("metadata")
    app = metadata.get("app") if isinstance(metadata, dict) else None
    return app if isinstance(app, str) else ""


def _error(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}
