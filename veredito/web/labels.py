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

import json
import logging
import math
from collections.abc import Callable
from typing import Any

from aiohttp import web

from veredito.labels import (
    MAX_LABEL_BYTES,
)
from veredito.producer.serve import CONFIG, JsonError
from veredito.store import SQLStore, StoreUnavailable, parse_when
from veredito.store.sql import AmbiguousId
from veredito.web.reading import (
    REVIEW,
    BadParameter,
    Review,
    _api_grant,
    _call,
    _clean,
    _filters,
    _limit,
    add_refresh,
    app_parameter,
)
from veredito.web.reviewing import (
    JUDGES,
    Reviewer,
    _app_of,
    _error,
    agreement_of,
    disagreements,
    listed,
    refresh_precision,
    submit,
)
from veredito.worker.verdict import CATEGORIES, VERDICTS

__all__ = ["LABEL_ROUTES", "add_label_routes", "openapi_paths"]

log = logging.getLogger(__name__)

LABEL_ROUTES = (
    "/v1/verdicts/{id}/labels",
    "/v1/verdicts/{id}/labels/{submission}",
    "/v1/review/next",
    "/v1/agreement",
)


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


def _store_away(exc: StoreUnavailable | None = None) -> web.Response:
    if exc is not None:  # the driver's message names the host and database, never a secret
        log.warning("the store cannot be reached for labels (%s)", exc)
    return _json(503, _error("store_unavailable", "the verdict store cannot be reached"))


def _reviewer_or_refusal(request: web.Request) -> Reviewer | web.Response:
    """The reviewer of a bearer review token; 403 for a read or ingest token, 401 for none."""

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


def _target_app(request: web.Request, forced: str | None) -> str | None:
    """The app a request names: a scoped token's own, else ``?app=`` exactly as given."""
    return forced if forced is not None else app_parameter(request.query)


def _refused(review: Any, reviewer: Reviewer, reason: str) -> None:
    review.metrics.refused.labels(reviewer.app if reviewer.app is not None else "*", reason).inc()


def too_fast(review: Any, reviewer: Reviewer) -> float | None:
    """The seconds this reviewer must wait before another label write (counted in the refusals
    metric), or None: go ahead."""
    wait: float | None = review.limits.take(reviewer.name)
    if wait is not None:
        _refused(review, reviewer, "rate")
    return wait


def retry_after(wait: float) -> str:
    return str(max(1, math.ceil(wait)))


async def post_labels(request: web.Request) -> web.Response:
    reviewer = _reviewer_or_refusal(request)
    if isinstance(reviewer, web.Response):
        return reviewer
    review = request.app[REVIEW]
    wait = too_fast(review, reviewer)
    if wait is not None:  # before the body is read: a flood costs the server next to nothing
        return web.json_response(
            _error("too_many_requests", f"label writes are limited to {review.limits.rate:g} a "
                   f"second per reviewer (VEREDITO_REVIEW_RATE); retry in {retry_after(wait)} s"),
            status=429, headers={"Retry-After": retry_after(wait)},
        )  # fmt: skip
    verdict_id = _clean("id", request.match_info["id"])
    app = _target_app(request, None)
    body = await read_label_body(request)
    try:
        status, payload = await _call(
            request, submit, review.store, reviewer, app, verdict_id, body,
            review.max_submissions, review.sample_share,
        )  # fmt: skip
    except StoreUnavailable as exc:
        return _store_away(exc)
    if status == 201:
        review.metrics.labels.labels(str(payload["app"])).inc(
            len(payload["claims"]) + len(payload["missed"])
            + (payload["hallucinated"] is not None or payload["note"] is not None)
        )  # fmt: skip
        log.info(
            "labels stored", extra={"reviewer": reviewer.name, "submission": payload["submission"]}
        )
    elif payload["error"]["code"] == "too_many_submissions":
        _refused(review, reviewer, "cap")
    return _json(status, payload)


def _find(
    store: SQLStore, app: str | None, verdict_id: str, forced: str | None
) -> tuple[int, dict[str, Any]] | str:
    """The app of a verdict a reader may see, or ``(status, error)``."""
    try:
        verdict = store.get(verdict_id, app)
    except AmbiguousId as exc:
        return 409, _error(
            "ambiguous_id", f"{len(exc.apps)} apps have a verdict with this id: name one with ?app="
        )
    if verdict is None or (forced is not None and _app_of(verdict) != forced):
        return 404, _error("not_found", "no verdict with this id")
    return _app_of(verdict)


def _labels_view(
    store: SQLStore, app: str | None, verdict_id: str, forced: str | None, after: int | None,
    limit: int,
) -> tuple[int, dict[str, Any]]:  # fmt: skip
    found = _find(store, app, verdict_id, forced)
    if not isinstance(found, str):
        return found
    page, next_after = store.submissions_page(found, verdict_id, after=after, limit=limit)
    return 200, {
        "verdict_id": verdict_id,
        "app": found,
        "labels": [listed(s) for s in page],
        "next_cursor": None if next_after is None else str(next_after),
        "disagreements": disagreements(store.latest_labels(found, verdict_id)),
    }


def _submission_view(
    store: SQLStore, app: str | None, verdict_id: str, forced: str | None, submission: str
) -> tuple[int, dict[str, Any]]:
    found = _find(store, app, verdict_id, forced)
    if not isinstance(found, str):
        return found
    whole = store.one_submission(found, verdict_id, submission)
    if whole is None:
        return 404, _error("not_found", "no submission with this id for this answer")
    return 200, whole


def cursor_parameter(query: Any) -> int | None:
    raw = _clean("cursor", str(query.get("cursor", ""))).strip()
    if not raw:
        return None
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 18:
        raise BadParameter("cursor", "not a cursor this server gave")
    return int(raw)


async def _labels_read(request: web.Request, view: Any, *extra: Any) -> web.Response:
    """A read of an answer's labels: ``view(store, app, id, forced app, *extra)`` in a worker
    thread, for a read or review token."""
    grant = _api_grant(request)
    if isinstance(grant, web.Response):
        return grant
    verdict_id = _clean("id", request.match_info["id"])
    app = _target_app(request, grant.app)
    store = request.app[REVIEW].store
    try:
        status, payload = await _call(request, view, store, app, verdict_id, grant.app, *extra)
    except StoreUnavailable as exc:
        return _store_away(exc)
    return _json(status, payload)


async def get_labels(request: web.Request) -> web.Response:
    after = cursor_parameter(request.query)
    return await _labels_read(request, _labels_view, after, _limit(request.query))


async def get_submission(request: web.Request) -> web.Response:
    submission = _clean("submission", request.match_info["submission"])
    return await _labels_read(request, _submission_view, submission)


async def review_next(request: web.Request) -> web.Response:
    reviewer = _reviewer_or_refusal(request)
    if isinstance(reviewer, web.Response):
        return reviewer
    review = request.app[REVIEW]
    app = _target_app(request, None)
    if reviewer.app is not None:
        if app is not None and app != reviewer.app:
            return _json(403, _error("forbidden", "this review token reviews only its own app"))
        app = reviewer.app
    try:
        found = await _call(
            request,
            lambda: review.store.next_for_review(
                reviewer.name, app, share=review.sample_share, teach_every=review.teach_every
            ),
        )
    except StoreUnavailable as exc:
        return _store_away(exc)
    if found is None:
        return web.Response(status=204)
    return _json(200, {"app": found[0], "id": found[1], "reason": found[2]})


async def get_agreement(request: web.Request) -> web.Response:
    grant = _api_grant(request)
    if isinstance(grant, web.Response):
        return grant

    review = request.app[REVIEW]
    filters = _filters(request.query, grant)
    judge = request.query.get("judge", "").strip() or None
    if judge is not None and judge not in JUDGES:
        raise BadParameter("judge", f"{judge!r} is not one of {', '.join(JUDGES)}")
    try:
        result = await _call(
            request,
            agreement_of,
            review.store,
            filters,
            judge,
            review.sample_share,
            review.agreements,
        )
    except StoreUnavailable as exc:
        return _store_away(exc)
    return _json(200, result)


def _precision_refresh(review: Review) -> Callable[[], None]:
    """One refresh of the precision gauges (:func:`~veredito.web.reading.add_refresh`)."""

    def refresh() -> None:
        review.metrics.floor.set(review.precision_floor)
        review.metrics.min_labels.set(review.min_labels)
        since = parse_when(review.window)
        refresh_precision(
            review.store, review.metrics, since, review.sample_share, review.agreements
        )

    return refresh


def add_label_routes(app: web.Application) -> None:
    app.router.add_post("/v1/verdicts/{id}/labels", post_labels)
    app.router.add_get("/v1/verdicts/{id}/labels", get_labels)
    app.router.add_get("/v1/verdicts/{id}/labels/{submission}", get_submission)
    app.router.add_get("/v1/review/next", review_next)
    app.router.add_get("/v1/agreement", get_agreement)
    add_refresh(app, "precision gauges", _precision_refresh)


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
                    "409": error(
                        "several apps have a verdict with this id (name one with app), or "
                        "this reviewer gave it VEREDITO_REVIEW_MAX_SUBMISSIONS submissions"
                    ),
                    "413": error("a label body over 64 KiB"),
                    "429": error(
                        "over VEREDITO_REVIEW_RATE for this reviewer; see Retry-After "
                        "(nothing read, nothing stored)"
                    ),
                },
            },
            "get": {
                "summary": "An answer's submissions, oldest first, a page at a time (notes cut "
                "to 1,000 characters, 10 missed spans each), and where reviewers' latest labels "
                "disagree",
                "security": read,
                "parameters": [
                    ident,
                    app,
                    query("limit", "submissions a page, 1 to 500 (default 50)"),
                    query("cursor", "next_cursor of the previous page"),
                ],
                "responses": {
                    "200": {"description": "labels, next_cursor and disagreements", **obj},
                    "400": error("a parameter is invalid (named in the message)"),
                    "401": error("missing or unknown token"),
                    "404": error("no verdict with this id"),
                },
            },
        },
        "/v1/verdicts/{id}/labels/{submission}": {
            "get": {
                "summary": "One submission whole (its note and every missed span)",
                "security": read,
                "parameters": [
                    ident,
                    {
                        "name": "submission",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string"},
                    },
                    app,
                ],
                "responses": {
                    "200": {"description": "the submission", **obj},
                    "401": error("missing or unknown token"),
                    "404": error("no verdict, or no submission, with this id"),
                },
            }
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
