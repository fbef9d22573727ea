"""Releases compared over HTTP (spec §18), mounted with the verdicts API:

- ``GET /v1/releases?app=`` the releases the app's verdicts name, newest first (by when each was
  first seen): ``release``, ``first_seen``, ``last_seen``, ``answers`` (judged), ``verdicts``;
- ``GET /v1/compare?app=&base=&head=&since=&until=&confident=`` the comparison of
  :mod:`veredito.comparison` between two of them: ``head`` defaults to the newest release and
  ``base`` to the one before it, neither ever ``unknown`` (untagged traffic) nor ``other`` (the
  metrics' bucket), which are compared only when named. Where reviewers' labels of the uniform
  slice exist on both sides, the judge's precision on each (``GET /v1/agreement``'s figures,
  per release) is given beside the rates.

Read and review tokens as for the verdicts API; a ``token:app`` token reads its app only (an
``app`` it does not hold is not found, as elsewhere). ``400`` naming the parameter: no app, a
release that is not one, unknown or equal releases, ``confident`` not a boolean.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from aiohttp import web

from veredito.comparison import Tally, compare_tallies
from veredito.producer.triple import check_release
from veredito.store import StoreUnavailable
from veredito.store.base import Filters
from veredito.web.reading import (
    REVIEW,
    BadParameter,
    Review,
    _api_grant,
    _call,
    _clean,
    _filters,
    _json_error,
    _unavailable,
    add_refresh,
    app_parameter,
)
from veredito.web.reviewing import agreement_of

__all__ = [
    "RELEASE_ROUTES",
    "add_release_routes",
    "comparison",
    "openapi_paths",
    "refresh_releases",
]

log = logging.getLogger(__name__)

RELEASE_ROUTES = ("/v1/releases", "/v1/compare")
MAX_RELEASES = 100
# not releases of their own: untagged traffic (``unknown``) and the metrics' bucket of demoted
# releases (``other``, which a triple may also name): never chosen as a default base or head,
# nor as the gauges' pair; named explicitly (``base=unknown``), they are compared as any other
UNNAMED = frozenset({"unknown", "other"})


def _app(request: web.Request, grant: Any) -> str:
    if grant.app is not None:
        return str(grant.app)
    app = app_parameter(request.query)
    if app is None:
        raise BadParameter("app", "name the app whose releases to read (app=)")
    return app


def _release(query: Any, name: str) -> str | None:
    value = _clean(name, str(query.get(name, ""))).strip()
    if not value:
        return None
    problem = check_release(value)
    if problem is not None:
        raise BadParameter(name, problem)
    return value


def _boolean(query: Any, name: str) -> bool:
    value = _clean(name, str(query.get(name, ""))).strip().lower()
    if value in ("", "false", "0"):
        return False
    if value in ("true", "1"):
        return True
    raise BadParameter(name, "use true or false")


async def api_releases(request: web.Request) -> web.Response:
    grant = _api_grant(request)
    if isinstance(grant, web.Response):
        return grant
    try:
        app = _app(request, grant)
        store = request.app[REVIEW].store
        found = await _call(request, store.releases, app, MAX_RELEASES)
    except BadParameter as exc:
        return _json_error(400, "invalid_parameter", str(exc))
    except StoreUnavailable as exc:
        return _unavailable(exc)
    return web.json_response({"app": app, "releases": found})


def _precision(result: dict[str, Any]) -> dict[str, dict[str, Any]] | None:
    """Per row, the judge's precision on the uniform slice's labels; None with no labels."""
    uniform = result["uniform"]
    if not uniform["answers"]:
        return None
    rows = {"answer": uniform["answer_level"], **uniform["categories"]}
    return {
        name: {"precision": figures["precision"], "labelled": figures["labelled"],
               "precision_interval": figures["precision_interval"]}
        for name, figures in rows.items()
    }  # fmt: skip


def comparison(
    store: Any,
    app: str,
    base: str,
    head: str,
    *,
    since: str | None = None,
    until: str | None = None,
    confident: bool = False,
    threshold: float = 0.8,
    share: float | None = None,
    cache: Any = None,
) -> dict[str, Any]:
    """The comparison of two of ``app``'s releases from the store (a worker thread's work):
    the figures of each side, the judge's precision on each where ``share`` (the uniform
    slice) is given and both sides have labels there."""
    kind = "confident" if confident else "all"
    sides = []
    for release in (base, head):
        figures = store.release_figures(
            app, release, since=since, until=until, threshold=threshold
        )[kind]
        sides.append(
            Tally(
                answers=figures["answers"],
                hallucinated=figures["hallucinated"],
                categories=figures["categories"],
            )
        )
    for name, release, side in zip(("base", "head"), (base, head), sides, strict=True):
        if side.answers == 0:
            raise BadParameter(name, f"{release!r} has no judged answers in this period")
    precision: list[dict[str, Any] | None] = [None, None]
    if share is not None:
        for i, release in enumerate((base, head)):
            filters = Filters(app=app, release=release, since=since, until=until)
            precision[i] = _precision(agreement_of(store, filters, None, share, cache))
    if precision[0] is None or precision[1] is None:
        precision = [None, None]
    result = compare_tallies(
        sides[0],
        sides[1],
        base_name=base,
        head_name=head,
        confident=confident,
        threshold=threshold,
        base_precision=precision[0],
        head_precision=precision[1],
    )
    return {"app": app, "since": since, "until": until, **result}


def refresh_releases(
    store: Any,
    gauges: Any,
    *,
    kept: int = 3,
    min_answers: int = 200,
    threshold: float = 0.8,
    max_apps: int = 50,
) -> dict[str, int]:
    """Set the release gauges of spec §18 from the store (a worker thread's work): for each app
    (at most ``max_apps``), its ``kept`` newest releases' hallucination rates, all and
    confident, and their judged answers; and whether the newest named release (neither
    ``unknown`` nor ``other``) among them regressed against the named one before it, per row, on
    confident hallucinations (what the alerts fire on, spec §17) and only when both have at
    least ``min_answers`` judged answers. Series of apps and releases no longer published are
    dropped (a stale gauge must not keep an alert firing). Returns the number of apps and
    releases published, for the log."""
    published = {"apps": 0, "releases": 0}
    apps = store.apps(max_apps)
    for app in apps:
        newest = [r["release"] for r in store.releases(app, kept)]
        named = [r for r in newest if r not in UNNAMED]  # the pair: the newest two named
        figures = store.releases_figures(app, newest, threshold=threshold)
        rates: dict[str, dict[str, float]] = {}
        answers: dict[str, int] = {}
        for release in newest:
            every, sure = figures[release]["all"], figures[release]["confident"]
            answers[release] = every["answers"]
            if every["answers"]:
                rates[release] = {
                    "all": every["hallucinated"] / every["answers"],
                    "confident": sure["hallucinated"] / sure["answers"],
                }
        regressed: dict[tuple[str, str, str], bool] | None = None
        if len(named) >= 2 and min(answers[named[0]], answers[named[1]]) >= min_answers:
            head, base = named[0], named[1]
            sides = [
                Tally(
                    answers=figures[release]["confident"]["answers"],
                    hallucinated=figures[release]["confident"]["hallucinated"],
                    categories=figures[release]["confident"]["categories"],
                )
                for release in (base, head)
            ]
            result = compare_tallies(
                sides[0], sides[1], base_name=base, head_name=head, confident=True,
                threshold=threshold,
            )  # fmt: skip
            regressed = {(base, head, row["category"]): bool(row["regressed"])
                         for row in result["rows"]}  # fmt: skip
        gauges.publish(app or "default", rates, answers, regressed)
        published["apps"] += 1
        published["releases"] += len(rates)
    for gone in set(gauges.apps) - {app or "default" for app in apps}:
        gauges.forget(gone)
    return published


def _release_refresh(review: Review) -> Callable[[], Any]:
    """One refresh of the release gauges (:func:`~veredito.web.reading.add_refresh`)."""
    return functools.partial(
        refresh_releases, review.store, review.release_gauges, kept=review.releases_kept,
        min_answers=review.release_min_answers, threshold=review.alert_confidence,
    )  # fmt: skip


async def api_compare(request: web.Request) -> web.Response:
    grant = _api_grant(request)
    if isinstance(grant, web.Response):
        return grant
    review = request.app[REVIEW]
    try:
        app = _app(request, grant)
        base, head = _release(request.query, "base"), _release(request.query, "head")
        confident = _boolean(request.query, "confident")
        window = _filters(
            {k: request.query.get(k, "") for k in ("since", "until")}, grant
        )  # the same time parameters as the verdicts API
        known = [r["release"] for r in await _call(request, review.store.releases, app, 10_000)]
        if head is None:
            if not known:
                raise BadParameter("head", f"the app {app!r} has no verdicts yet")
            named = [r for r in known if r not in UNNAMED]
            if not named:
                raise BadParameter(
                    "head", f"the app {app!r} names no release ({', '.join(known)}): name one"
                )
            head = named[0]
        if head not in known:
            raise BadParameter("head", f"{head!r} is not a release of {app!r}")
        if base is None:
            older = [r for r in known[known.index(head) + 1 :] if r not in UNNAMED]
            if not older:
                raise BadParameter(
                    "base", f"{head!r} is the app's oldest named release: name the base"
                )
            base = older[0]
        if base not in known:
            raise BadParameter("base", f"{base!r} is not a release of {app!r}")
        if base == head:
            raise BadParameter("base", "base and head are the same release")
        result = await _call(
            request,
            comparison,
            review.store,
            app,
            base,
            head,
            since=window.since,
            until=window.until,
            confident=confident,
            threshold=review.alert_confidence,
            share=review.sample_share,
            cache=review.agreements,
        )
    except BadParameter as exc:
        return _json_error(400, "invalid_parameter", str(exc))
    except StoreUnavailable as exc:
        return _unavailable(exc)
    return web.json_response(result)


def add_release_routes(app: web.Application) -> None:
    app.router.add_get("/v1/releases", api_releases)
    app.router.add_get("/v1/compare", api_compare)
    add_refresh(app, "release gauges", _release_refresh, lambda r: r.release_gauges is not None)


def openapi_paths(
    param: Callable[..., dict[str, Any]], errors: dict[str, Any], security: list[Any]
) -> dict[str, Any]:
    """The two routes for ``serve``'s OpenAPI document (``param`` and ``errors`` as the verdicts
    API's part makes them)."""
    app = param("app", "the app (a token:app token's own app is used)")
    return {
        "/v1/releases": {
            "get": {
                "summary": "The app's releases, newest first by first seen (spec §18)",
                "security": security,
                "parameters": [app],
                "responses": {
                    "200": {
                        "description": "release, first_seen, last_seen, answers (judged), verdicts",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    },
                    **errors,
                },
            }
        },
        "/v1/compare": {
            "get": {
                "summary": "Two releases compared, answer level and per category (spec §18)",
                "security": security,
                "parameters": [
                    app,
                    param(
                        "base",
                        "the release compared against (default: the named one "
                        "before head; never unknown or other unless named)",
                    ),
                    param(
                        "head",
                        "the release under test (default: the newest named: not unknown or other)",
                    ),
                    param("since", "ISO 8601 moment or a span back from now: 1h, 7d"),
                    param("until", "ISO 8601 moment or span, exclusive"),
                    param(
                        "confident",
                        "true: only confident hallucinations count",
                        enum=["true", "false", "1", "0"],
                    ),
                ],
                "responses": {
                    "200": {
                        "description": "per row, each side's rate with its Wilson interval, the "
                        "difference with its Newcombe interval, regressed or improved",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    },
                    **errors,
                },
            }
        },
    }
