"""The review page's HTML: the Jinja2 environment (autoescape), the labels the page shows in
Portuguese, a verdict's row and claims as the templates read them, and the answer page itself
(rendered in the server's process, or for a long answer in one of the heavy-work pool's,
:mod:`veredito.serving.heavy`). Routes are in :mod:`veredito.web.review` and
:mod:`veredito.web.page_labels`."""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web

from veredito.store.base import release_of
from veredito.web import session as sessions
from veredito.web.highlight import claim_spans, marked_chunk, path_segment, segments
from veredito.web.reading import (
    STATUSES,
)
from veredito.worker.verdict import CATEGORIES, VERDICTS

__all__ = ["CATEGORY_LABELS", "CSP", "VERDICT_LABELS"]

log = logging.getLogger(__name__)

CITED_BUDGET = 200_000  # characters of cited excerpts on one answer's page
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
        script=False, viewer=None, sign_in=False, next_form=None, labelling=None, notes=[],
        notes_hidden=False, denied=False, reason=None, saved=False, previous_saved=False,
        form_error=None, history=None,
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
        "release": release_of(verdict),
        "status": _text(verdict.get("status")),
        "hallucinated": verdict.get("hallucinated") is True,
        "score": verdict.get("score"),
        "categories": [c for c in categories if c in CATEGORY_LABELS],
        "query": query if len(query) <= 140 else query[:139] + "…",
        "evaluated_at": _text(verdict.get("evaluated_at")),
    }


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
                # spec §17: a recommendation or courtesy, shown apart from the claims of fact
                "advice": claim.get("kind") == "advice",
            }
        )
    return segments(answer, spans) if answer else [], views, bool(given)


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
    session: sessions.Session | None,
    reviewing: dict[str, Any],
    sign_in: bool = True,
) -> web.Response:
    """The answer page; ``reviewing``: its reviewer parts
    (:func:`veredito.web.page_labels.page_context`)."""
    answer_segments, claims, has_input = _claims_view(verdict)
    given = _dict(verdict.get("input"))
    findings = [f for f in _list(verdict.get("rule_findings")) if isinstance(f, dict)]
    error = verdict.get("error") if isinstance(verdict.get("error"), dict) else None
    judge = _dict(verdict.get("judge"))
    return _render(
        "verdict.html",
        status,
        script=reviewing["labelling"] is not None,
        viewer=sessions.viewer(session),
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
