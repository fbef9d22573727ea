"""The read side of ``veredito serve``: the verdicts API and the review page (pt-BR).

Routes (mounted when ``serve`` is given a store):

- ``GET /v1/verdicts?app=&status=&hallucinated=&category=&verdict=&since=&until=&release=``
  ``&cursor=&limit=`` newest first, keyset pagination (``next_cursor``); ``GET /v1/verdicts/{id}``;
  ``GET /v1/stats?app=&since=&until=`` (answers, hallucinated, by status, category and verdict).
- ``GET /v1/releases``, ``GET /v1/compare``: releases compared (:mod:`veredito.web.releases`).
- ``GET /v1/calibration``, ``GET /v1/calibrations``: the calibration refitted from the labels
  (:mod:`veredito.web.calibrations`).
- ``GET /`` the list with its filters and counts, ``GET /verdicts/{id}`` one answer with its
  claims highlighted, ``GET /static/review.css``, ``GET /static/review.js``;
- the reviewers' sign-in, labelling forms and queue: :mod:`veredito.web.page_labels`.

Read tokens (``VEREDITO_READ_TOKENS``, ``token`` or ``token:app``) are separate from ingest
tokens: neither opens the other's routes. The API takes ``Authorization: Bearer``; the page also
takes HTTP Basic with the token as password, so a browser can ask for it, and a reviewer's
session cookie (a grant for the reviewer's app). A ``token:app`` token sees only that app. With no
read tokens, reads are open only when the server listens on loopback (or with
``--insecure-no-auth``).

Everything on the page that comes from a verdict or a reviewer is escaped by Jinja2's
autoescape, and the page is sent with a Content-Security-Policy that allows no script, but for
the answer page with its labelling form: that one allows the server's own ``review.js``
(``script-src 'self'``: no inline script, no eval).
"""

from __future__ import annotations

import asyncio
import logging
from datetime import date, timedelta
from importlib import resources
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from veredito.producer.ingest import Grant
from veredito.serving.heavy import HEAVY, HEAVY_BYTES
from veredito.store import StoreUnavailable
from veredito.store.sql import AmbiguousId
from veredito.web import page_labels
from veredito.web import session as sessions
from veredito.web.calibrations import CALIBRATION_ROUTES, add_calibration_routes
from veredito.web.calibrations import openapi_paths as calibration_paths
from veredito.web.labels import LABEL_ROUTES, add_label_routes
from veredito.web.reading import (
    MAX_LIMIT,
    PAGE_SIZE,
    REVIEW,
    STATUSES,
    BadParameter,
    Review,
    _api_grant,
    _call,
    _clean,
    _filters,
    _grant,
    _json_error,
    _limit,
    _unavailable,
    _visible,
    app_parameter,
)
from veredito.web.releases import RELEASE_ROUTES, add_release_routes, openapi_paths
from veredito.web.render import (
    PERIODS,
    _page_weight,
    _render,
    _row,
    _store_away_page,
    _verdict_page,
    _verdict_page_parts,
)
from veredito.worker.verdict import CATEGORIES, VERDICTS

__all__ = ["API_ROUTES", "PAGE_ROUTES", "add_routes", "openapi_part"]

log = logging.getLogger(__name__)

API_ROUTES = (
    "/v1/verdicts",
    "/v1/verdicts/{id}",
    "/v1/stats",
    *LABEL_ROUTES,
    *RELEASE_ROUTES,
    *CALIBRATION_ROUTES,
)
PAGE_ROUTES = (
    "/",
    "/verdicts/{id}",
    "/static/review.css",
    "/static/review.js",
    "/entrar",
    "/sair",
    "/verdicts/{id}/rotulos",
    "/verdicts/{id}/envios",
    "/revisar/proxima",
)


async def api_list(request: web.Request) -> web.Response:
    grant = _api_grant(request)
    if isinstance(grant, web.Response):
        return grant
    try:
        filters = _filters(request.query, grant)
        limit = _limit(request.query)
        cursor = _clean("cursor", request.query.get("cursor", "")) or None
        store = request.app[REVIEW].store
        page = await _call(request, store.list_verdicts, filters, cursor=cursor, limit=limit)
    except BadParameter as exc:
        return _json_error(400, "invalid_parameter", str(exc))
    except ValueError as exc:  # a cursor this server never gave
        return _json_error(400, "invalid_parameter", str(exc))
    except StoreUnavailable as exc:
        return _unavailable(exc)
    return web.json_response({"items": page.items, "next_cursor": page.next_cursor})


def _key(request: web.Request, grant: Grant) -> tuple[str, str | None]:
    """The (id, app) a request for one verdict names: a ``token:app`` token's app, else the
    ``app`` parameter (``app=`` empty: the verdicts that name no app), else any app."""
    verdict_id = _clean("id", request.match_info["id"])
    if grant.app is not None:
        return verdict_id, grant.app
    return verdict_id, app_parameter(request.query)


async def api_get(request: web.Request) -> web.Response:
    grant = _api_grant(request)
    if isinstance(grant, web.Response):
        return grant
    verdict_id, app = _key(request, grant)
    try:
        verdict = await _call(request, request.app[REVIEW].store.get, verdict_id, app)
    except StoreUnavailable as exc:
        return _unavailable(exc)
    except AmbiguousId as exc:
        return _json_error(
            409,
            "ambiguous_id",
            f"{len(exc.apps)} apps have a verdict with this id: name one with ?app= "
            f"({', '.join(repr(a) for a in exc.apps)})",
        )
    verdict = _visible(verdict, grant)
    if verdict is None:
        return _json_error(404, "not_found", "no verdict with this id")
    return web.json_response(verdict)


async def api_stats(request: web.Request) -> web.Response:
    grant = _api_grant(request)
    if isinstance(grant, web.Response):
        return grant
    try:
        filters = _filters(request.query, grant)
        stats = await _call(request, request.app[REVIEW].store.stats, filters)
    except BadParameter as exc:
        return _json_error(400, "invalid_parameter", str(exc))
    except StoreUnavailable as exc:
        return _unavailable(exc)
    return web.json_response(stats)


async def _page_grant(request: web.Request) -> Grant | web.Response:
    """A read token (Basic) or open reads, else a reviewer's session: a read grant for the
    reviewer's app (every app for a reviewer of all)."""
    grant = _grant(request, page=True)
    if grant is not None:
        return grant
    session = await sessions.session_of(request)
    if session is not None:
        return Grant(app=session.reviewer.app)
    reviewers = bool(request.app[REVIEW].reviewers)
    return _render(
        "error.html",
        401,
        {"WWW-Authenticate": 'Basic realm="veredito", charset="UTF-8"'},
        title="Acesso restrito",
        message="Entre com um token de leitura (VEREDITO_READ_TOKENS) como senha"
        + (", ou como revisor." if reviewers else "."),
        sign_in=reviewers,
    )


async def page_list(request: web.Request) -> web.Response:
    grant = await _page_grant(request)
    if isinstance(grant, web.Response):
        return grant
    query = dict(request.query)
    period = query.pop("period", "24h")  # the first visit shows the last day
    days = {name: query.pop(name, "").strip() for name in ("de", "ate")}
    if days["de"] or days["ate"]:
        period = ""  # dates chosen: they are the range
    if period and "since" not in query:
        if period not in {p for p, _ in PERIODS}:
            period = ""
        else:
            query["since"] = period
    if query.get("only") == "1":
        query["hallucinated"] = "true"
    try:
        for name, day in days.items():
            if not day:
                continue
            try:
                chosen = date.fromisoformat(day)
            except ValueError:
                raise BadParameter(name, f"{day!r} não é uma data (AAAA-MM-DD)") from None
            if name == "de":
                query["since"] = chosen.isoformat()
            elif chosen < date.max:  # "até" includes the day chosen
                query["until"] = (chosen + timedelta(days=1)).isoformat()
        filters = _filters(query, grant)
        store = request.app[REVIEW].store
        cursor = _clean("cursor", request.query.get("cursor", "")) or None
        page = await _call(request, store.list_verdicts, filters, cursor=cursor, limit=PAGE_SIZE)
        stats = await _call(request, store.stats, filters)
    except (BadParameter, ValueError) as exc:
        return _render("error.html", 400, title="Filtro inválido", message=str(exc))
    except StoreUnavailable:
        return _store_away_page()
    keep = {k: v for k, v in request.query.items() if k != "cursor" and v}
    keep.setdefault("period", period)
    more = "?" + urlencode({**keep, "cursor": page.next_cursor}) if page.next_cursor else None
    session = await sessions.session_of(request)
    return _render(
        "list.html",
        viewer=sessions.viewer(session),
        sign_in=bool(request.app[REVIEW].reviewers),
        next_form=sessions.queue_form(session, filters.app or ""),
        rows=[_row(v) for v in page.items],
        stats=stats,
        form={
            "app": grant.app or request.query.get("app", ""),
            "app_locked": grant.app is not None,
            "category": request.query.get("category", ""),
            "verdict": request.query.get("verdict", ""),
            "status": request.query.get("status", ""),
            "period": period,
            "de": days["de"],
            "ate": days["ate"],
            "only": request.query.get("only") == "1",
            "confidence": request.query.get("confidence", ""),
        },
        more=more,
        first_page=cursor is None,
    )


async def _page_answer(request: web.Request) -> tuple[Grant, dict[str, Any]] | web.Response:
    """The answer a page request names, that its reader may see; else the page that says why."""
    grant = await _page_grant(request)
    if isinstance(grant, web.Response):
        return grant
    verdict_id, app = _key(request, grant)
    try:
        verdict = await _call(request, request.app[REVIEW].store.get, verdict_id, app)
    except StoreUnavailable:
        return _store_away_page()
    except AmbiguousId as exc:
        return _render(
            "ambiguous.html", 409, title="Id de várias aplicações", verdict_id=verdict_id,
            apps=exc.apps,
        )  # fmt: skip
    verdict = _visible(verdict, grant)
    if verdict is None:
        return _render(
            "error.html", 404, title="Veredito não encontrado",
            message="Nenhum veredito com este id.",
        )  # fmt: skip
    return grant, verdict


async def page_verdict(request: web.Request) -> web.Response:
    found = await _page_answer(request)
    if isinstance(found, web.Response):
        return found
    _, verdict = found
    session = await sessions.session_of(request)
    store = request.app[REVIEW].store
    try:
        labels = await _call(
            request, page_labels.answer_labels, store, _row(verdict)["app"], _row(verdict)["id"]
        )
    except StoreUnavailable:
        return _store_away_page()
    try:
        parts = page_labels.page_context(verdict, labels, session, request.query)
    except BadParameter as exc:
        return _render("error.html", 400, title="Parâmetro inválido", message=str(exc))
    # highlighting and rendering are CPU work in proportion to the answer: off the event loop,
    # and for a long answer in another process (veredito/serving/heavy.py)
    args = (verdict, 200, session, parts, bool(request.app[REVIEW].reviewers))
    if _page_weight(verdict) > HEAVY_BYTES // 8 and HEAVY in request.app:
        body, status, headers = await request.app[HEAVY].run(_verdict_page_parts, *args)
        return web.Response(body=body, status=status, headers=headers)
    response: web.Response = await _call(request, _verdict_page, *args)
    return response


async def page_history(request: web.Request) -> web.Response:
    """Every submission of an answer, paged (the answer page shows each reviewer's latest)."""
    found = await _page_answer(request)
    if isinstance(found, web.Response):
        return found
    grant, verdict = found
    try:
        return await page_labels.history(request, grant, verdict)
    except BadParameter as exc:
        return _render("error.html", 400, title="Parâmetro inválido", message=str(exc))
    except StoreUnavailable:
        return _store_away_page()


async def stylesheet(request: web.Request) -> web.Response:
    css = resources.files("veredito.web").joinpath("static", "review.css").read_text()
    return web.Response(
        text=css, content_type="text/css", headers={"Cache-Control": "max-age=3600"}
    )


async def script(request: web.Request) -> web.Response:
    js = resources.files("veredito.web").joinpath("static", "review.js").read_text()
    return web.Response(
        text=js,
        content_type="text/javascript",
        headers={"Cache-Control": "max-age=3600", "X-Content-Type-Options": "nosniff"},
    )


def add_routes(app: web.Application, review: Review) -> None:
    app[REVIEW] = review
    app.router.add_get("/v1/verdicts", api_list)
    app.router.add_get("/v1/verdicts/{id}", api_get)
    app.router.add_get("/v1/stats", api_stats)
    app.router.add_get("/", page_list)
    app.router.add_get("/verdicts/{id}", page_verdict)
    app.router.add_get("/verdicts/{id}/envios", page_history)
    app.router.add_get("/static/review.css", stylesheet)
    app.router.add_get("/static/review.js", script)
    page_labels.add_page_label_routes(app)
    add_label_routes(app)
    add_release_routes(app)
    add_calibration_routes(app)

    async def close(_: web.Application) -> None:
        review.executor.shutdown(wait=False)
        await asyncio.get_running_loop().run_in_executor(None, review.store.close)

    app.on_cleanup.append(close)


def openapi_part() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(security schemes, schemas, paths) of the read routes, for ``serve``'s OpenAPI document."""

    def error(description: str) -> dict[str, Any]:
        return {
            "description": description,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
        }

    def param(name: str, description: str, **schema: Any) -> dict[str, Any]:
        return {
            "name": name,
            "in": "query",
            "required": False,
            "description": description,
            "schema": {"type": "string", **schema},
        }

    filters = [
        param("app", "metadata.app (a token:app read token forces its app)"),
        param("status", "verdict status", enum=list(STATUSES)),
        param("hallucinated", "true or false", enum=["true", "false", "1", "0"]),
        param("category", "an answer with a non-grounded claim of this category",
              enum=list(CATEGORIES)),
        param("verdict", "an answer with a claim of this verdict", enum=list(VERDICTS)),
        param("since", "ISO 8601 moment (UTC when no zone) or a span back from now: 15m, 1h, 7d"),
        param("until", "ISO 8601 moment or span, exclusive"),
        param("confidence", "answers whose hallucination_confidence is at least this (0 to 1)"),
        param("release", "metadata.release: the release that answered (spec §18)"),
    ]  # fmt: skip
    errors = {
        "400": error("a parameter is invalid (named in the message)"),
        "401": error("missing or unknown read token (VEREDITO_READ_TOKENS)"),
        "503": error("the verdict store cannot be reached; see Retry-After"),
    }
    security: list[dict[str, list[str]]] = [{"read": []}]
    html = {"content": {"text/html": {"schema": {"type": "string"}}}}
    page_security: list[dict[str, list[str]]] = [
        {"read": []},
        {"readBasic": []},
        {"reviewSession": []},
    ]
    paths: dict[str, Any] = {
        "/v1/verdicts": {
            "get": {
                "summary": "Verdicts, newest first (keyset pagination)",
                "security": security,
                "parameters": [
                    *filters,
                    param("cursor", "next_cursor of the previous page"),
                    param("limit", f"1 to {MAX_LIMIT} (default {PAGE_SIZE})", pattern=r"^\d+$"),
                ],
                "responses": {
                    "200": {
                        "description": "a page of verdicts",
                        "content": {
                            "application/json": {
                                "schema": {"$ref": "#/components/schemas/VerdictPage"}
                            }
                        },
                    },
                    **errors,
                },
            }
        },
        "/v1/verdicts/{id}": {
            "get": {
                "summary": "One verdict",
                "security": security,
                "parameters": [
                    {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}},
                    param(
                        "app",
                        "the app whose verdict this is (ids are per app; empty: the "
                        "verdicts that name none); a token:app read token forces its app",
                    ),
                ],
                "responses": {
                    "200": {
                        "description": "the verdict (spec §6)",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    },
                    "401": errors["401"],
                    "404": error("no verdict with this id (or not of the token's app)"),
                    "409": error("several apps have a verdict with this id: name one with app"),
                    "503": errors["503"],
                },
            }
        },
        "/v1/stats": {
            "get": {
                "summary": "Counts: answers, hallucinated, by status, category and claim verdict",
                "security": security,
                "parameters": filters,
                "responses": {
                    "200": {
                        "description": "the counts",
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/Stats"}}
                        },
                    },
                    **errors,
                },
            }
        },
        "/": {
            "get": {
                "summary": "The review page: recent answers, filters, counts (pt-BR HTML)",
                "security": page_security,
                "responses": {"200": {"description": "the page", **html}},
            }
        },
        "/verdicts/{id}": {
            "get": {
                "summary": "One answer: its claims highlighted, the chunks they cite",
                "security": page_security,
                "parameters": [
                    {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
                "responses": {
                    "200": {"description": "the page", **html},
                    "404": {"description": "no verdict with this id", **html},
                },
            }
        },
        "/static/review.css": {
            "get": {
                "summary": "the review page's stylesheet",
                "security": [],
                "responses": {"200": {"description": "CSS"}},
            }
        },
        "/static/review.js": {
            "get": {
                "summary": "the answer page's keyboard shortcuts (the page works without it)",
                "security": [],
                "responses": {"200": {"description": "JavaScript"}},
            }
        },
        **page_labels.openapi_paths(),
        **openapi_paths(param, errors, security),
        **calibration_paths(param, errors, security),
    }
    count = {"type": "integer", "minimum": 0}
    schemas = {
        "VerdictPage": {
            "type": "object",
            "required": ["items", "next_cursor"],
            "properties": {
                "items": {"type": "array", "items": {"type": "object"}},
                "next_cursor": {"type": ["string", "null"]},
            },
        },
        "Stats": {
            "type": "object",
            "required": ["answers", "hallucinated", "by_status", "by_category", "by_verdict"],
            "properties": {
                "answers": count,
                "hallucinated": count,
                "by_status": {"type": "object", "additionalProperties": count},
                "by_category": {
                    "type": "object",
                    "additionalProperties": {
                        "type": "object",
                        "properties": {"claims": count, "answers": count},
                    },
                },
                "by_verdict": {"type": "object", "additionalProperties": count},
            },
        },
    }
    schemes = {
        "read": {"type": "http", "scheme": "bearer", "description": "VEREDITO_READ_TOKENS"},
        "readBasic": {"type": "http", "scheme": "basic", "description": "any user, read token"},
        "review": {"type": "http", "scheme": "bearer", "description": "VEREDITO_REVIEW_TOKENS"},
        "reviewSession": {
            "type": "apiKey",
            "in": "cookie",
            "name": sessions.SESSION_COOKIE,
            "description": "the review page's session (POST /entrar with a review token); "
            "page routes only, never the JSON API",
        },
    }
    return schemes, schemas, paths
