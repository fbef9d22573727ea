"""Reviewers' labels over HTTP (spec §16): post and read labels, the review queue, the agreement,
and the metrics that carry the judge's measured precision to Prometheus.

Routes (mounted with the read side when ``serve`` has a store):

- ``POST /v1/verdicts/{id}/labels`` (a review token): one submission, ``201`` with it as stored;
- ``GET /v1/verdicts/{id}/labels`` (read or review token): every reviewer's submissions, and the
  claims on which reviewers' latest labels disagree;
- ``GET /v1/review/next?app=`` (a review token): ``{"id", "app", "reason"}``, ``204`` when the
  queue is dry;
- ``GET /v1/agreement?app=&since=&until=&judge=`` (read or review token): the judge against the
  labels, from the uniform slice; the labels of answers chosen to teach are counted apart.

Review tokens are ``VEREDITO_REVIEW_TOKENS="token:reviewer[:app]"``: the reviewer's name is
recorded on every label, and with ``:app`` the token labels and reads that app only. A read or an
ingest token on a write route gets ``403``, as does a review token for another app.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import threading
from collections import Counter as Tally
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge

from veredito.labels import (
    MAX_LABEL_BYTES,
    LabelError,
    agreement,
    agreement_from,
    collector_paused,
    counts_of,
    labelled_record,
    parse_submission,
)
from veredito.producer.ingest import (
    Grant,
    TokenError,
    bearer,
    match_token,
    token_entries,
)
from veredito.producer.serve import JsonError
from veredito.store import Filters, SQLStore, StoreUnavailable
from veredito.store.sql import AmbiguousId, submissions
from veredito.worker.verdict import CATEGORIES, VERDICTS

__all__ = [
    "LABEL_ROUTES",
    "AgreementCache",
    "ReviewMetrics",
    "ReviewTokens",
    "Reviewer",
    "agreement_of",
    "refresh_precision",
    "submit",
]

log = logging.getLogger(__name__)

LABEL_ROUTES = ("/v1/verdicts/{id}/labels", "/v1/review/next", "/v1/agreement")
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

    def session_key(self, reviewer: Reviewer) -> str:
        """An opaque name of the reviewer's token, for the page's session cookie."""
        for token, known in self._tokens:
            if known is reviewer:
                return hashlib.sha256(b"session:" + token).hexdigest()[:32]
        raise KeyError(reviewer.name)

    def by_session_key(self, key: str) -> Reviewer | None:
        found = None
        for token, reviewer in self._tokens:
            mine = hashlib.sha256(b"session:" + token).hexdigest()[:32]
            if hmac.compare_digest(mine.encode(), key.encode("ascii", "replace")):
                found = reviewer
        return found


class ReviewMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.lock = threading.Lock()
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
        self, store: SQLStore, keys: list[tuple[str, str, float, int, int]]
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
    With ``cache``, each answer's share is computed once per new label (serve keeps one)."""
    if cache is None:  # a one-off (calibrate --from-store): one pass over every answer
        uniform_: tuple[list[dict[str, Any]], list[dict[str, Any]]] = ([], [])
        chosen_: tuple[list[dict[str, Any]], list[dict[str, Any]]] = ([], [])
        label_rows = 0
        with collector_paused():
            for verdict, labels, key in store.labelled(filters, judge):
                into = uniform_ if key < share else chosen_
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
    for app, verdict_id, key, _, label_count in keys:
        part = shares.get((app, verdict_id))
        if part is None:
            continue
        slice_ = "uniform" if key < share else "chosen"
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
    store: SQLStore, reviewer: Reviewer, app: str | None, verdict_id: str, body: Any
) -> tuple[int, dict[str, Any]]:
    """Check and store one submission (from a worker thread): ``(status, answer)``."""
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
    stored = store.add_labels(verdict_app, verdict_id, reviewer.name, submission.labels)
    if stored is None:
        return 404, _error("not_found", "no verdict with this id")
    return 201, stored


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


# -- routes -------------------------------------------------------------------------------------
async def read_label_body(request: web.Request) -> Any:
    """The JSON body of a label post, at most 64 KiB (413 past it), or 400."""
    if request.content_length is not None and request.content_length > MAX_LABEL_BYTES:
        raise JsonError(413, "too_large", f"a label body is at most {MAX_LABEL_BYTES} bytes")
    data = b""
    while chunk := await request.content.read(MAX_LABEL_BYTES + 1 - len(data)):
        data += chunk  # a body may come in several pieces: read to its end or past the limit
        if len(data) > MAX_LABEL_BYTES:
            raise JsonError(413, "too_large", f"a label body is at most {MAX_LABEL_BYTES} bytes")
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise JsonError(400, "invalid_body", "body: not valid UTF-8 JSON") from None


def _json(status: int, payload: dict[str, Any]) -> web.Response:
    return web.json_response(payload, status=status)


async def _in_thread(request: web.Request, fn: Any, *args: Any) -> Any:
    from veredito.web.review import REVIEW

    review = request.app[REVIEW]
    return await asyncio.get_running_loop().run_in_executor(review.executor, fn, *args)


def _reviewer_or_refusal(request: web.Request) -> Reviewer | web.Response:
    """The reviewer of a bearer review token; 403 for a read or ingest token, 401 for none."""
    from veredito.producer.serve import CONFIG
    from veredito.web.review import REVIEW

    review = request.app[REVIEW]
    header = request.headers.get("Authorization")
    reviewer = review.reviewers.check(header)
    if reviewer is not None:
        return reviewer
    other = review.tokens.check(header) is not None
    config = request.app.get(CONFIG)
    if config is not None and config.tokens.check(header) is not None:
        other = True
    if other:
        return _json(403, _error("forbidden", "a review token is needed (VEREDITO_REVIEW_TOKENS)"))
    return web.json_response(
        _error("unauthorized", "a valid 'Authorization: Bearer <token>' is needed "
               "(VEREDITO_REVIEW_TOKENS)"),
        status=401, headers={"WWW-Authenticate": "Bearer"},
    )  # fmt: skip


def _reader(request: web.Request) -> Grant | web.Response:
    """A read grant from a read token, a review token (its app) or open reads."""
    from veredito.web.review import _api_grant

    reviewer = request.app[_review_key()].reviewers.check(request.headers.get("Authorization"))
    if reviewer is not None:
        return Grant(app=reviewer.app)
    return _api_grant(request)


def _review_key() -> Any:
    from veredito.web.review import REVIEW

    return REVIEW


def _target_app(request: web.Request, forced: str | None) -> str | None:
    from veredito.web.review import _clean

    if forced is not None:
        return forced
    if "app" in request.query:
        return _clean("app", request.query["app"]).strip()
    return None


async def post_labels(request: web.Request) -> web.Response:
    reviewer = _reviewer_or_refusal(request)
    if isinstance(reviewer, web.Response):
        return reviewer
    from veredito.web.review import _clean

    verdict_id = _clean("id", request.match_info["id"])
    app = _target_app(request, None)
    body = await read_label_body(request)
    review = request.app[_review_key()]
    try:
        status, payload = await _in_thread(
            request, submit, review.store, reviewer, app, verdict_id, body
        )
    except StoreUnavailable:
        return _json(503, _error("store_unavailable", "the verdict store cannot be reached"))
    if status == 201:
        review.metrics.labels.labels(str(payload["app"])).inc(
            len(payload["claims"]) + len(payload["missed"])
            + (payload["hallucinated"] is not None or payload["note"] is not None)
        )  # fmt: skip
        log.info(
            "labels stored", extra={"reviewer": reviewer.name, "submission": payload["submission"]}
        )
    return _json(status, payload)


def _labels_view(
    store: SQLStore, app: str | None, verdict_id: str, forced: str | None
) -> tuple[int, dict[str, Any]]:
    try:
        verdict = store.get(verdict_id, app)
    except AmbiguousId as exc:
        return 409, _error(
            "ambiguous_id", f"{len(exc.apps)} apps have a verdict with this id: name one with ?app="
        )
    if verdict is None or (forced is not None and _app_of(verdict) != forced):
        return 404, _error("not_found", "no verdict with this id")
    rows = store.labels_of(_app_of(verdict), verdict_id)
    return 200, {
        "verdict_id": verdict_id,
        "app": _app_of(verdict),
        "labels": submissions(rows),
        "disagreements": disagreements(rows),
    }


async def get_labels(request: web.Request) -> web.Response:
    grant = _reader(request)
    if isinstance(grant, web.Response):
        return grant
    from veredito.web.review import _clean

    verdict_id = _clean("id", request.match_info["id"])
    app = _target_app(request, grant.app)
    try:
        status, payload = await _in_thread(
            request, _labels_view, request.app[_review_key()].store, app, verdict_id, grant.app
        )
    except StoreUnavailable:
        return _json(503, _error("store_unavailable", "the verdict store cannot be reached"))
    return _json(status, payload)


async def review_next(request: web.Request) -> web.Response:
    reviewer = _reviewer_or_refusal(request)
    if isinstance(reviewer, web.Response):
        return reviewer
    review = request.app[_review_key()]
    app = _target_app(request, None)
    if reviewer.app is not None:
        if app is not None and app != reviewer.app:
            return _json(403, _error("forbidden", "this review token reviews only its own app"))
        app = reviewer.app
    try:
        found = await _in_thread(
            request,
            lambda: review.store.next_for_review(
                reviewer.name, app, share=review.sample_share, teach_every=review.teach_every
            ),
        )
    except StoreUnavailable:
        return _json(503, _error("store_unavailable", "the verdict store cannot be reached"))
    if found is None:
        return web.Response(status=204)
    return _json(200, {"app": found[0], "id": found[1], "reason": found[2]})


async def get_agreement(request: web.Request) -> web.Response:
    grant = _reader(request)
    if isinstance(grant, web.Response):
        return grant
    from veredito.web.review import BadParameter, _filters

    review = request.app[_review_key()]
    filters = _filters(request.query, grant)
    judge = request.query.get("judge", "").strip() or None
    if judge is not None and judge not in JUDGES:
        raise BadParameter("judge", f"{judge!r} is not one of {', '.join(JUDGES)}")
    try:
        result = await _in_thread(
            request,
            agreement_of,
            review.store,
            filters,
            judge,
            review.sample_share,
            review.agreements,
        )
    except StoreUnavailable:
        return _json(503, _error("store_unavailable", "the verdict store cannot be reached"))
    return _json(200, result)


async def precision_loop(app: web.Application) -> None:
    """Refresh the precision gauges every ``refresh_seconds`` (at least once a minute)."""
    from veredito.store import parse_when

    review = app[_review_key()]
    review.metrics.floor.set(review.precision_floor)
    review.metrics.min_labels.set(review.min_labels)
    loop = asyncio.get_running_loop()
    while True:
        try:
            since = parse_when(review.window)
            await loop.run_in_executor(
                review.executor, refresh_precision, review.store, review.metrics, since,
                review.sample_share, review.agreements,
            )  # fmt: skip
        except StoreUnavailable:
            log.warning("the precision gauges could not be refreshed: the store is away")
        except Exception as exc:  # the gauges must never take the server down
            log.error("refreshing the precision gauges failed (%s)", type(exc).__name__)
            log.debug("the failure", exc_info=True)
        await asyncio.sleep(review.refresh_seconds)


def add_label_routes(app: web.Application) -> None:
    app.router.add_post("/v1/verdicts/{id}/labels", post_labels)
    app.router.add_get("/v1/verdicts/{id}/labels", get_labels)
    app.router.add_get("/v1/review/next", review_next)
    app.router.add_get("/v1/agreement", get_agreement)
    task: dict[str, asyncio.Task[None]] = {}

    async def start(app: web.Application) -> None:
        task["loop"] = asyncio.ensure_future(precision_loop(app))

    async def stop(_: web.Application) -> None:
        if "loop" in task:
            task["loop"].cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task["loop"]

    app.on_startup.append(start)
    app.on_cleanup.insert(0, stop)


def openapi_paths() -> dict[str, Any]:
    """The label routes' part of ``serve``'s OpenAPI document."""

    def error(description: str) -> dict[str, Any]:
        return {
            "description": description,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
        }

    def query(name: str, description: str) -> dict[str, Any]:
        return {"name": name, "in": "query", "required": False, "description": description,
                "schema": {"type": "string"}}  # fmt: skip

    ident = {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
    app = query("app", "the app whose verdict this is (a token:…:app token forces its own)")
    review: list[dict[str, list[str]]] = [{"review": []}]
    read: list[dict[str, list[str]]] = [{"read": []}, {"review": []}]
    obj = {"content": {"application/json": {"schema": {"type": "object"}}}}
    claim = {
        "type": "object",
        "required": ["claim_idx", "correct"],
        "properties": {
            "claim_idx": {"type": "integer", "minimum": 0},
            "correct": {"type": "boolean"},
            "verdict": {"type": ["string", "null"], "enum": [*VERDICTS, None]},
            "category": {"type": ["string", "null"], "enum": [*CATEGORIES, None]},
        },
    }
    missed = {
        "type": "object",
        "required": ["text"],
        "properties": {
            "text": {"type": "string", "description": "a substring of the answer"},
            "category": {"type": "string", "enum": list(CATEGORIES)},
            "verdict": {"type": "string", "enum": ["partial", "invented", "contradicted"]},
        },
    }
    body = {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "description": "every field optional but one; at most 64 KiB",
                    "properties": {
                        "claims": {"type": "array", "items": claim},
                        "missed": {"type": "array", "items": missed},
                        "hallucinated": {"type": "boolean"},
                        "note": {"type": "string", "maxLength": 4000},
                    },
                }
            }
        },
    }
    return {
        "/v1/verdicts/{id}/labels": {
            "post": {
                "summary": "A reviewer's labels of one answer (spec §16)",
                "security": review,
                "parameters": [ident, app],
                "requestBody": body,
                "responses": {
                    "201": {"description": "the stored submission", **obj},
                    "400": error("a field is invalid (named in the message); nothing stored"),
                    "401": error("missing or unknown token"),
                    "403": error("not a review token, or one for another app"),
                    "404": error("no verdict with this id"),
                    "409": error("several apps have a verdict with this id: name one with app"),
                    "413": error("a label body over 64 KiB"),
                },
            },
            "get": {
                "summary": "Every reviewer's labels of one answer, and where they disagree",
                "security": read,
                "parameters": [ident, app],
                "responses": {
                    "200": {"description": "labels and disagreements", **obj},
                    "401": error("missing or unknown token"),
                    "404": error("no verdict with this id"),
                },
            },
        },
        "/v1/review/next": {
            "get": {
                "summary": "The next answer to label: the uniform slice, and answers chosen to "
                "teach",
                "security": review,
                "parameters": [app],
                "responses": {
                    "200": {"description": "{id, app, reason}", **obj},
                    "204": {"description": "nothing left to review"},
                    "403": error("not a review token, or one for another app"),
                },
            }
        },
        "/v1/agreement": {
            "get": {
                "summary": "The judge measured against the labels, with 95 % Wilson intervals",
                "security": read,
                "parameters": [
                    app,
                    query("since", "verdicts since (ISO 8601 or a span: 7d)"),
                    query("until", "verdicts before"),
                    query("judge", "llm or rules"),
                ],
                "responses": {
                    "200": {"description": "uniform-slice figures; chosen_to_teach apart", **obj},
                    "400": error("a parameter is invalid (named in the message)"),
                    "401": error("missing or unknown token"),
                },
            }
        },
    }
