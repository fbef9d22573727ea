"""The read side of ``veredito serve``: the verdicts API and the review page (pt-BR).

Routes (mounted when ``serve`` is given a store):

- ``GET /v1/verdicts?app=&status=&hallucinated=&category=&verdict=&since=&until=&cursor=&limit=``
  newest first, keyset pagination (``next_cursor``); ``GET /v1/verdicts/{id}``;
  ``GET /v1/stats?app=&since=&until=`` (answers, hallucinated, by status, category and verdict).
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
import base64
import binascii
import logging
import re
import secrets
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import date, timedelta
from importlib import resources
from typing import Any
from urllib.parse import urlencode

from aiohttp import web
from prometheus_client import CollectorRegistry

from veredito.producer.ingest import Grant, Tokens
from veredito.serving.heavy import HEAVY, HEAVY_BYTES
from veredito.store import Filters, SQLStore, StoreUnavailable, parse_when
from veredito.store.sql import AmbiguousId
from veredito.web import page_labels
from veredito.web.highlight import claim_spans, marked_chunk, path_segment, segments
from veredito.web.labels import (
    LABEL_ROUTES,
    AgreementCache,
    ReviewMetrics,
    ReviewTokens,
    add_label_routes,
)
from veredito.worker.verdict import CATEGORIES, VERDICTS

__all__ = ["API_ROUTES", "PAGE_ROUTES", "BadParameter", "Review", "add_routes"]

log = logging.getLogger(__name__)

API_ROUTES = ("/v1/verdicts", "/v1/verdicts/{id}", "/v1/stats", *LABEL_ROUTES)
PAGE_ROUTES = (
    "/",
    "/verdicts/{id}",
    "/static/review.css",
    "/static/review.js",
    "/entrar",
    "/sair",
    "/verdicts/{id}/rotulos",
    "/revisar/proxima",
)
STATUSES = ("ok", "rejected", "failed")
MAX_LIMIT = 500
CITED_BUDGET = 200_000  # characters of cited excerpts on one answer's page
PAGE_SIZE = 50
CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
CSP_SCRIPT = CSP.replace("style-src 'self';", "style-src 'self'; script-src 'self';")

VERDICT_LABELS = {
    "grounded": "apoiada",
    "partial": "parcial",
    "invented": "inventada",
    "contradicted": "contradiz o contexto",
}
VERDICT_PLURAL = {
    "grounded": "apoiadas",
    "partial": "parciais",
    "invented": "inventadas",
    "contradicted": "contradizem o contexto",
}
CATEGORY_LABELS = {
    "LEI": "Lei",
    "CNPJ_CPF_RG": "CNPJ/CPF/RG",
    "ENTIDADE_BR": "Órgão ou entidade",
    "PRAZO_VALOR": "Prazo ou valor",
    "POLITICA": "Programa ou política",
    "GEOGRAFIA_BR": "Lugar",
    "GENERICA": "Genérica",
}
STATUS_LABELS = {"ok": "avaliada", "rejected": "rejeitada", "failed": "falhou"}
FINDING_LABELS = {
    "absent_from_context": "ausente do contexto",
    "conflicts_with_context": "conflita com o contexto",
    "invalid_check_digit": "dígito verificador inválido",
    "derived": "calculado a partir do contexto",
}
CONFIDENCES = (("", "qualquer"), ("0.5", "≥ 0,5"), ("0.8", "≥ 0,8 (seguras)"),
               ("0.95", "≥ 0,95"))  # fmt: skip
PERIODS = (("1h", "última hora"), ("24h", "últimas 24 h"), ("7d", "últimos 7 dias"),
           ("30d", "últimos 30 dias"), ("", "todo o período"))  # fmt: skip


@dataclass
class Review:
    store: SQLStore
    tokens: Tokens = field(default_factory=lambda: Tokens(None))
    open_reads: bool = False  # no token needed (loopback, or --insecure-no-auth)
    executor: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(4, thread_name_prefix="store")
    )
    reviewers: ReviewTokens = field(default_factory=lambda: ReviewTokens(None))
    sample_share: float = 0.05  # the uniform slice: answers whose sample key is below this
    teach_every: int = 4  # every n-th answer of the queue is one chosen to teach
    window: str = "30d"  # the precision gauges' period
    refresh_seconds: float = 60.0
    precision_floor: float = 0.7  # exported for the alert rule
    min_labels: int = 30
    session_secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    metrics: ReviewMetrics = field(default_factory=lambda: ReviewMetrics(CollectorRegistry()))
    agreements: AgreementCache = field(default_factory=lambda: AgreementCache())


REVIEW: web.AppKey[Review] = web.AppKey("review")


class BadParameter(ValueError):
    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}")
        self.name = name


def _json_error(status: int, code: str, message: str, **headers: str) -> web.Response:
    return web.json_response(
        {"error": {"code": code, "message": message}}, status=status, headers=headers or None
    )


def _grant(request: web.Request, *, page: bool = False) -> Grant | None:
    """What a read token grants; None when the request may not read. The JSON API takes only
    ``Authorization: Bearer``; the page also takes HTTP Basic (the token as the password), which
    a browser remembers and sends by itself, so the API must not accept it."""
    review = request.app[REVIEW]
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    if page and scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
        except (binascii.Error, ValueError):  # not base64, not ASCII, not UTF-8
            decoded = ""
        header = f"Bearer {decoded.partition(':')[2]}"
    if review.tokens:
        found: Grant | None = review.tokens.check(header)
        return found
    return Grant() if review.open_reads else None


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _clean(name: str, value: str) -> str:
    """A parameter's value, or :class:`BadParameter` for one with a control character (NUL
    cannot even be sent to PostgreSQL)."""
    if _CONTROL.search(value):
        raise BadParameter(name, "contains a control character")
    return value


def _filters(query: Any, grant: Grant) -> Filters:
    def one(name: str, allowed: tuple[str, ...] | None = None) -> str | None:
        value = _clean(name, str(query.get(name, ""))).strip()
        if not value:
            return None
        if allowed is not None and value not in allowed:
            raise BadParameter(name, f"{value!r} is not one of {', '.join(allowed)}")
        return value

    hallucinated = one("hallucinated")
    if hallucinated is not None and hallucinated.lower() not in ("true", "false", "1", "0"):
        raise BadParameter("hallucinated", "use true or false")
    times: dict[str, str | None] = {}
    for name in ("since", "until"):
        value = one(name)
        try:
            times[name] = parse_when(value) if value else None
        except (ValueError, OverflowError) as exc:
            message = str(exc) if isinstance(exc, ValueError) else "out of range"
            raise BadParameter(name, message) from None
    confidence = one("confidence")
    min_confidence = None
    if confidence is not None:
        try:
            min_confidence = float(confidence)
        except ValueError:
            min_confidence = -1.0
        if not 0.0 <= min_confidence <= 1.0:
            raise BadParameter(
                "confidence", "a number from 0 to 1 (the least hallucination_confidence)"
            )
    app = one("app")
    if grant.app is not None:
        app = grant.app  # a token for one app sees that app only
    return Filters(
        app=app,
        status=one("status", STATUSES),
        hallucinated=None if hallucinated is None else hallucinated.lower() in ("true", "1"),
        category=one("category", CATEGORIES),
        verdict=one("verdict", VERDICTS),
        since=times["since"],
        until=times["until"],
        min_confidence=min_confidence,
    )


def _limit(query: Any) -> int:
    raw = _clean("limit", query.get("limit", "")).strip()
    if not raw:
        return PAGE_SIZE
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= MAX_LIMIT:
        raise BadParameter("limit", f"a whole number from 1 to {MAX_LIMIT}")
    return int(raw)


async def _call(request: web.Request, fn: Any, *args: Any, **kwargs: Any) -> Any:
    review = request.app[REVIEW]
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(review.executor, lambda: fn(*args, **kwargs))


def _visible(verdict: dict[str, Any] | None, grant: Grant) -> dict[str, Any] | None:
    if verdict is None or grant.app is None:
        return verdict
    metadata = verdict.get("metadata")
    app = metadata.get("app") if isinstance(metadata, dict) else None
    return verdict if app == grant.app else None


# -- the API ----------------------------------------------------------------------------------
def _api_grant(request: web.Request) -> Grant | web.Response:
    grant = _grant(request)
    if grant is None:
        return _json_error(
            401,
            "unauthorized",
            "a valid 'Authorization: Bearer <token>' is needed (VEREDITO_READ_TOKENS)",
            **{"WWW-Authenticate": "Bearer"},
        )
    return grant


def _unavailable(exc: StoreUnavailable) -> web.Response:
    log.warning("the store cannot be read (%s)", type(exc.__cause__ or exc).__name__)
    return _json_error(
        503, "store_unavailable", "the verdict store cannot be reached", **{"Retry-After": "5"}
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
    if "app" in request.query:
        return verdict_id, _clean("app", request.query["app"]).strip()
    return verdict_id, None


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


# -- the page ---------------------------------------------------------------------------------
def _environment() -> Any:
    try:
        import jinja2
    except ImportError:  # pragma: no cover - depends on the install
        raise RuntimeError("the review page needs Jinja2: pip install 'veredito[serve]'") from None
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("veredito.web", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(
        VERDICT_LABELS=VERDICT_LABELS,
        VERDICT_PLURAL=VERDICT_PLURAL,
        CATEGORY_LABELS=CATEGORY_LABELS,
        STATUS_LABELS=STATUS_LABELS,
        FINDING_LABELS=FINDING_LABELS,
        CATEGORIES=CATEGORIES,
        VERDICTS=VERDICTS,
        STATUSES=STATUSES,
        PERIODS=PERIODS,
        CONFIDENCES=CONFIDENCES,
    )
    # the reviewer's parts of the pages are off unless a handler turns them on
    env.globals.update(
        script=False, viewer=None, sign_in=False, next_link=None, labelling=None, notes=[],
        notes_hidden=False, denied=False, reason=None, saved=False, previous_saved=False,
        form_error=None,
    )  # fmt: skip
    env.filters["pct"] = lambda part, whole: f"{100 * part / whole:.1f}".replace(".", ",") + " %"
    env.filters["num"] = lambda value: f"{value:.2f}".replace(".", ",")
    env.filters["when"] = lambda text: str(text or "")[:19].replace("T", " ") + " UTC"
    env.filters["segment"] = path_segment
    return env


_ENV: Any = None


def _render(name: str, status: int = 200, headers: dict[str, str] | None = None, *,
            script: bool = False, **context: Any) -> web.Response:  # fmt: skip
    """A page; ``script``: it loads ``/static/review.js`` and its CSP allows that (and only
    that). ``viewer`` (the signed-in reviewer) and ``sign_in`` (offer it) fill the header."""
    global _ENV
    if _ENV is None:
        try:
            _ENV = _environment()
        except RuntimeError as exc:  # a base install: the API works, the page needs the extra
            return web.Response(text=str(exc), status=501, content_type="text/plain")
    html = _ENV.get_template(name).render(script=script, **context)
    return web.Response(
        text=html,
        status=status,
        content_type="text/html",
        charset="utf-8",
        headers={
            "Content-Security-Policy": CSP_SCRIPT if script else CSP,
            "X-Content-Type-Options": "nosniff",
            # same-origin, not no-referrer: a form's POST then carries this server's Origin
            # (no-referrer makes it "null"), which POST /entrar checks
            "Referrer-Policy": "same-origin",
            "Cache-Control": "no-store",
            **(headers or {}),
        },
    )


def _store_away_page() -> web.Response:
    return _render(
        "error.html", 503, {"Retry-After": "5"}, title="Base indisponível",
        message="A base de vereditos não responde agora. Tente de novo em instantes.",
    )  # fmt: skip


def _page_grant(request: web.Request) -> Grant | web.Response:
    """A read token (Basic) or open reads, else a reviewer's session: a read grant for the
    reviewer's app (every app for a reviewer of all)."""
    grant = _grant(request, page=True)
    if grant is not None:
        return grant
    session = page_labels.session_of(request)
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


def _probability(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1:
        return float(value)
    return None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _claim_number(value: Any) -> int | None:
    return value + 1 if isinstance(value, int) and not isinstance(value, bool) else None


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _row(verdict: dict[str, Any]) -> dict[str, Any]:
    given = _dict(verdict.get("input"))
    metadata = _dict(verdict.get("metadata"))
    categories = _dict(verdict.get("categories"))
    query = _text(given.get("query"))
    return {
        "id": _text(verdict.get("id")),
        "app": _text(metadata.get("app")),
        "status": _text(verdict.get("status")),
        "hallucinated": verdict.get("hallucinated") is True,
        "score": verdict.get("score"),
        "categories": [c for c in categories if c in CATEGORY_LABELS],
        "query": query if len(query) <= 140 else query[:139] + "…",
        "evaluated_at": _text(verdict.get("evaluated_at")),
    }


async def page_list(request: web.Request) -> web.Response:
    grant = _page_grant(request)
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
    session = page_labels.session_of(request)
    return _render(
        "list.html",
        viewer=page_labels.viewer(session),
        sign_in=bool(request.app[REVIEW].reviewers),
        next_link=None if session is None else page_labels.queue_link(filters.app or ""),
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


def _claims_view(verdict: dict[str, Any]) -> tuple[list[Any], list[dict[str, Any]], bool]:
    given = _dict(verdict.get("input"))
    answer = _text(given.get("answer"))
    context = [c for c in _list(given.get("context")) if isinstance(c, str)]
    claims = [c for c in _list(verdict.get("claims")) if isinstance(c, dict)]
    texts = [_text(c.get("text")) for c in claims]
    spans = claim_spans(answer, texts) if answer else {}
    views = []
    budget = CITED_BUDGET  # excerpt characters on one page; past it a claim names its chunk only
    for index, claim in enumerate(claims):
        label = _text(claim.get("verdict"))
        chunk_idx = claim.get("chunk_idx")
        cited = None
        if isinstance(chunk_idx, int) and 0 <= chunk_idx < len(context):
            marked = marked_chunk(context[chunk_idx], texts[index]) if budget > 0 else []
            budget -= sum(len(s.text) for s in marked)
            cited = {"index": chunk_idx, "segments": marked}
        category = _text(claim.get("category"))
        views.append(
            {
                "number": index + 1,
                "text": texts[index],
                "verdict": label if label in VERDICT_LABELS else "invented",
                "category": category if category in CATEGORY_LABELS else "",
                "source": _text(claim.get("source")),
                "confidence": _probability(claim.get("confidence")),
                "in_answer": index in spans,
                "cited": cited,
            }
        )
    return segments(answer, spans) if answer else [], views, bool(given)


async def page_verdict(request: web.Request) -> web.Response:
    grant = _page_grant(request)
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
    session = page_labels.session_of(request)
    store = request.app[REVIEW].store
    try:
        rows = await _call(request, store.labels_of, _row(verdict)["app"], _row(verdict)["id"])
    except StoreUnavailable:
        return _store_away_page()
    parts = page_labels.page_context(verdict, rows, session, request.query)
    # highlighting and rendering are CPU work in proportion to the answer: off the event loop,
    # and for a long answer in another process (veredito/serving/heavy.py)
    args = (verdict, 200, session, parts, bool(request.app[REVIEW].reviewers))
    if _page_weight(verdict) > HEAVY_BYTES // 8 and HEAVY in request.app:
        body, status, headers = await request.app[HEAVY].run(_verdict_page_parts, *args)
        return web.Response(body=body, status=status, headers=headers)
    response: web.Response = await _call(request, _verdict_page, *args)
    return response


def _page_weight(verdict: dict[str, Any]) -> int:
    """Characters of the answer and the claims: what highlighting and rendering cost."""
    given = _dict(verdict.get("input"))
    claims = _list(verdict.get("claims"))
    return len(_text(given.get("answer"))) + sum(
        len(_text(c.get("text"))) for c in claims if isinstance(c, dict)
    )


def _verdict_page_parts(*args: Any) -> tuple[bytes, int, dict[str, str]]:
    """:func:`_verdict_page` in a worker process: the response as plain data."""
    response = _verdict_page(*args)
    body = response.body if isinstance(response.body, bytes) else b""
    headers = {k: v for k, v in response.headers.items() if k.lower() != "content-length"}
    return body, response.status, headers


def _verdict_page(
    verdict: dict[str, Any],
    status: int,
    session: page_labels.Session | None,
    reviewing: dict[str, Any],
    sign_in: bool = True,
) -> web.Response:
    """The answer page; ``reviewing``: its reviewer parts (:func:`page_labels.page_context`)."""
    answer_segments, claims, has_input = _claims_view(verdict)
    given = _dict(verdict.get("input"))
    findings = [f for f in _list(verdict.get("rule_findings")) if isinstance(f, dict)]
    error = verdict.get("error") if isinstance(verdict.get("error"), dict) else None
    judge = _dict(verdict.get("judge"))
    return _render(
        "verdict.html",
        status,
        script=reviewing["labelling"] is not None,
        viewer=page_labels.viewer(session),
        sign_in=sign_in,
        **reviewing,
        row=_row(verdict),
        query=_text(given.get("query")),
        answer=answer_segments,
        claims=claims,
        has_input=has_input,
        context=[c for c in _list(given.get("context")) if isinstance(c, str)],
        findings=[
            {
                "category": _text(f.get("category")),
                "text": _text(f.get("text")),
                "kind": _text(f.get("kind")),
                "claim": _claim_number(f.get("claim_idx")),
                "operation": _text(f.get("operation")),
                "operands": [str(o) for o in f.get("operands") or [] if isinstance(o, str)],
            }
            for f in findings
        ],
        error={"kind": _text(error.get("kind")), "message": _text(error.get("message"))}
        if error
        else None,
        judge={"kind": _text(judge.get("kind")), "model": _text(judge.get("model"))},
        reasoning=_text(verdict.get("reasoning")),
    )


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
    app.router.add_get("/static/review.css", stylesheet)
    app.router.add_get("/static/review.js", script)
    page_labels.add_page_label_routes(app)
    add_label_routes(app)

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
            "name": page_labels.SESSION_COOKIE,
            "description": "the review page's session (POST /entrar with a review token); "
            "page routes only, never the JSON API",
        },
    }
    return schemes, schemas, paths
