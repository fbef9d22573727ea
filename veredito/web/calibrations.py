"""The calibration that refits itself (issue 30), mounted with the verdicts API:

- ``GET /v1/calibration`` the current calibration's body (a ``calibrate --fit`` file) with its
  ``version``; ``ETag`` is the version and ``If-None-Match`` answers ``304``; ``?version=N`` a
  stored one; ``404`` while the store has none (workers keep the shipped one);
- ``GET /v1/calibrations`` every stored version, newest first, with its held-out figures, whether
  it was adopted and which is current;
- the refit: every ``VEREDITO_REFIT_INTERVAL`` seconds, when ``VEREDITO_REFIT_MIN_LABELS``
  answers were labelled since the last fit, a candidate is fitted in a process of its own
  (:mod:`veredito.serving.refit`) and adopted only when it beats the current one on the uniform
  slice's held-out quarter; one INFO line says the version, the figures and the decision;
- the gauges ``veredito_calibration_version``, ``veredito_calibration_held_out_log_loss``,
  ``veredito_calibration_held_out_ece`` (the current version's) and the counter
  ``veredito_calibration_refits_total{outcome}``.

Read tokens as for the verdicts API, of every app: a calibration is fitted on every app's labels,
so a ``token:app`` token (read or review) gets ``403``.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge

from veredito.serving.heavy import HeavyPool
from veredito.store import StoreUnavailable
from veredito.web.reading import (
    REVIEW,
    BadParameter,
    Review,
    _api_grant,
    _call,
    _clean,
    _json_error,
    _unavailable,
    add_refresh,
)

__all__ = [
    "CALIBRATION_ROUTES",
    "CalibrationMetrics",
    "add_calibration_routes",
    "openapi_paths",
]

log = logging.getLogger(__name__)

CALIBRATION_ROUTES = ("/v1/calibration", "/v1/calibrations")


class CalibrationMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.version = Gauge(
            "veredito_calibration_version",
            "The current calibration's version in the store (0: none yet, the shipped one)",
            registry=registry,
        )
        self.log_loss = Gauge(
            "veredito_calibration_held_out_log_loss",
            "The current calibration's log loss on the uniform slice's held-out quarter when it "
            "was fitted (NaN: none yet)",
            registry=registry,
        )
        self.ece = Gauge(
            "veredito_calibration_held_out_ece",
            "The current calibration's expected calibration error on the uniform slice's "
            "held-out quarter when it was fitted (NaN: none yet)",
            registry=registry,
        )
        self.refits = Counter(
            "veredito_calibration_refits_total",
            "Calibrations refitted from reviewers' labels: adopted (better on the held-out "
            "quarter) or rejected (stored, not used)",
            ["outcome"],
            registry=registry,
        )
        for outcome in ("adopted", "rejected"):
            self.refits.labels(outcome)
        self.log_loss.set(math.nan)
        self.ece.set(math.nan)

    def show(self, current: dict[str, Any] | None) -> None:
        """The gauges of the current calibration (None: the store has none)."""
        if current is None:
            self.version.set(0)
            self.log_loss.set(math.nan)
            self.ece.set(math.nan)
            return
        mine = (current.get("figures") or {}).get("candidate") or {}
        self.version.set(current["version"])
        for gauge, key in ((self.log_loss, "log_loss"), (self.ece, "ece")):
            value = mine.get(key)
            gauge.set(float(value) if isinstance(value, int | float) else math.nan)


def _version_parameter(query: Any) -> int | None:
    raw = _clean("version", str(query.get("version", ""))).strip()
    if not raw:
        return None
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 9 or int(raw) < 1:
        raise BadParameter("version", "a stored calibration's version: a whole number from 1")
    return int(raw)


def _etag(version: int) -> str:
    return f'"{version}"'


def _matches(header: str | None, etag: str) -> bool:
    """``If-None-Match`` names this ETag (weak or strong), or is ``*``."""
    if not header:
        return False
    for tag in header.split(","):
        tag = tag.strip()
        if tag == "*" or tag.removeprefix("W/") == etag:
            return True
    return False


def _every_app(grant: Any) -> web.Response | None:
    if grant.app is not None:
        return _json_error(
            403,
            "forbidden",
            "the calibration is fitted on every app's labels: it needs a token of every app",
        )
    return None


async def get_calibration(request: web.Request) -> web.Response:
    grant = _api_grant(request)
    if isinstance(grant, web.Response):
        return grant
    refused = _every_app(grant)
    if refused is not None:
        return refused
    store = request.app[REVIEW].store
    try:
        version = _version_parameter(request.query)
        if version is None:
            version = await _call(request, store.current_calibration_version)
            if version is None:
                return _json_error(
                    404,
                    "not_found",
                    "the store has no calibration yet (clients keep the shipped one)",
                )
        etag = _etag(version)
        headers = {"ETag": etag, "Cache-Control": "no-cache"}
        if _matches(request.headers.get("If-None-Match"), etag):
            return web.Response(status=304, headers=headers)
        found = await _call(request, store.calibration, version)
    except BadParameter as exc:
        return _json_error(400, "invalid_parameter", str(exc))
    except StoreUnavailable as exc:
        return _unavailable(exc)
    if found is None:
        return _json_error(404, "not_found", f"no stored calibration has version {version}")
    return web.json_response({**found["body"], "version": version}, headers=headers)


async def list_calibrations(request: web.Request) -> web.Response:
    grant = _api_grant(request)
    if isinstance(grant, web.Response):
        return grant
    refused = _every_app(grant)
    if refused is not None:
        return refused
    store = request.app[REVIEW].store
    try:
        found = await _call(request, store.calibrations)
    except StoreUnavailable as exc:
        return _unavailable(exc)
    current = next((c["version"] for c in found if c["current"]), None)
    return web.json_response({"current": current, "calibrations": found})


def _show(review: Review) -> None:
    if review.calibration_metrics is not None:
        review.calibration_metrics.show(review.store.calibration())


def _gauges_refresh(review: Review) -> Callable[[], None]:
    """The current version's gauges (a rollback from the command line shows within a minute)."""
    return functools.partial(_show, review)


def refit_once(review: Review, pool: HeavyPool) -> dict[str, Any] | None:
    """One check for a refit, and the refit when it is due (from a store thread: the fit runs
    in ``pool``'s process); what it did, or None when none was due."""
    from veredito.serving.refit import due, refit_at

    is_due, _ = due(review.store, review.refit_min_labels)
    if not is_due:
        return None
    try:
        result = pool.submit(refit_at, review.store.url, review.refit_min_labels).result()
    except RuntimeError as exc:  # scikit-learn missing: the message says what to install
        log.warning("the calibration cannot be refitted: %s", exc)
        return None
    if "skipped" in result:
        log.info("calibration refit skipped: %s", result["skipped"])
        return result
    figures = result["figures"]
    mine, theirs = figures["candidate"], figures["compared_with"]
    outcome = "adopted" if result["adopted"] else "rejected"
    log.info(
        "calibration refit: version %d %s (held out: log loss %s, ECE %s; against %s: log loss "
        "%s, ECE %s; %d labelled answers, %d held-out claims): %s",
        result["version"], outcome, mine["log_loss"], mine["ece"],
        f"version {theirs['version']}" if theirs["version"] is not None else theirs["name"],
        theirs["log_loss"], theirs["ece"], figures["labels"]["answers"],
        figures["held_out"]["claims"], figures["reason"],
        extra={"calibration_version": result["version"], "outcome": outcome},
    )  # fmt: skip
    if review.calibration_metrics is not None:
        review.calibration_metrics.refits.labels(outcome).inc()
    _show(review)
    return result


def add_calibration_routes(app: web.Application) -> None:
    app.router.add_get("/v1/calibration", get_calibration)
    app.router.add_get("/v1/calibrations", list_calibrations)
    pool = HeavyPool(workers=1, modules=("veredito.serving.refit",))  # started on the first fit

    async def close(_: web.Application) -> None:
        pool.close()

    app.on_cleanup.append(close)
    add_refresh(app, "calibration gauges", _gauges_refresh)
    add_refresh(
        app,
        "calibration refit",
        lambda review: functools.partial(refit_once, review, pool),
        lambda review: review.refit,
        lambda review: review.refit_interval,
    )


def openapi_paths(
    param: Callable[..., dict[str, Any]], errors: dict[str, Any], security: list[Any]
) -> dict[str, Any]:
    """The two routes for ``serve``'s OpenAPI document."""
    forbidden = {
        "description": "a token of one app (the calibration is fitted on every app's labels)",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }
    return {
        "/v1/calibration": {
            "get": {
                "summary": "The current calibration (issue 30): a calibration file's body with "
                "its version; the ETag is the version",
                "security": security,
                "parameters": [
                    param("version", "a stored version, not the current", pattern=r"^\d+$"),
                    {
                        "name": "If-None-Match",
                        "in": "header",
                        "required": False,
                        "schema": {"type": "string"},
                        "description": "the ETag last read: 304 when it is still current",
                    },
                ],
                "responses": {
                    "200": {
                        "description": "the calibration (format veredito.calibration/1) and "
                        "version",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    },
                    "304": {"description": "unchanged since If-None-Match"},
                    "403": forbidden,
                    "404": {
                        "description": "no calibration yet (or none of this version): clients "
                        "keep the shipped one",
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/Error"}}
                        },
                    },
                    **errors,
                },
            }
        },
        "/v1/calibrations": {
            "get": {
                "summary": "Every stored calibration, newest first: held-out figures, adopted, "
                "current",
                "security": security,
                "responses": {
                    "200": {
                        "description": "current, and calibrations: version, created_at, name, "
                        "adopted, current, figures",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    },
                    "403": forbidden,
                    **errors,
                },
            }
        },
    }
