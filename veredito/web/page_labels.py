"""The reviewer's side of the review page (spec §16, "page"): signing in, labelling an answer with
plain HTML forms, and the review queue. The labels go through :func:`veredito.web.labels.submit`,
as those of ``POST /v1/verdicts/{id}/labels`` do, so both check and store them alike.

Routes:

- ``GET /entrar``, ``POST /entrar`` (form: ``token``): a review token (``VEREDITO_REVIEW_TOKENS``)
  gets a session cookie ``veredito_sessao`` = ``<session key>.<expiry>.<HMAC-SHA256>`` under
  ``Review.session_secret``: the reviewer's opaque session key, never the token; ``HttpOnly;
  SameSite=Strict; Path=/``, ``Secure`` over https, for 12 hours;
- ``POST /sair``: clears it;
- ``POST /verdicts/{id}/rotulos?app=``: the answer page's forms (``claim-N=certa|errada``,
  ``verdict-N``, ``category-N``, ``hallucinated=sim|nao|``, ``note``, ``missed-text``,
  ``missed-category``, ``missed-verdict``), translated into the JSON body of spec §16;
- ``GET /revisar/proxima?app=``: ``303`` to the reviewer's next answer, or a page saying the
  queue is dry.

Every form that posts carries ``csrf`` = HMAC(secret, ``"csrf:" + session payload``); a post
without it, or with a wrong one, is ``403`` and stores nothing. ``POST /entrar`` needs no session;
it refuses an ``Origin`` or ``Referer`` that names another host. The JSON API never reads the
cookie: it takes only ``Authorization: Bearer``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from aiohttp import web

from veredito.labels import MAX_LABEL_BYTES
from veredito.store import StoreUnavailable
from veredito.store.labelling import submissions
from veredito.web import render as pages
from veredito.web.highlight import path_segment
from veredito.web.labels import _refused, cursor_parameter, retry_after, too_fast
from veredito.web.reading import REVIEW, BadParameter, _call, _clean, app_parameter
from veredito.web.reviewing import disagreements, listed, submit
from veredito.web.session import (
    SESSION_COOKIE,
    SESSION_SECONDS,
    Session,
    _equal,
    may_label,
    queue_form,
    session_cookie,
    session_of,
    viewer,
)

__all__ = [
    "PAGE_LABEL_ROUTES",
    "add_page_label_routes",
    "form_body",
    "openapi_paths",
    "page_context",
]

log = logging.getLogger(__name__)

PAGE_LABEL_ROUTES = (
    "/entrar",
    "/sair",
    "/verdicts/{id}/rotulos",
    "/verdicts/{id}/envios",
    "/revisar/proxima",
)
MAX_FORM_FIELDS = 1000
MAX_QUEUE = 256  # characters of a queue's app name (fila)
NOTE_ON_PAGE = 500  # characters of a note the answer page and its history show
MISSED_ON_PAGE = 5  # missed spans of a submission they show
HISTORY_PAGE = 20  # submissions a history page shows
FORM = "application/x-www-form-urlencoded"
REASONS = {
    "uniform": "amostra uniforme",
    "judges_disagree": "juízes discordam",
    "low_confidence": "o juiz tem pouca confiança",
}
HALLUCINATED = {"sim": True, "nao": False}


def reason_label(reason: str) -> str | None:
    """The pt-BR words for a queue reason (``uniform``, ``judges_disagree``,
    ``rare_category:LEI``); None for anything else."""
    if reason in REASONS:
        return REASONS[reason]
    kind, _, category = reason.partition(":")
    if kind == "rare_category" and category in pages.CATEGORY_LABELS:
        return f"categoria rara: {pages.CATEGORY_LABELS[category]}"
    return None


# -- the form -----------------------------------------------------------------------------------
class FormError(ValueError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


async def read_form(request: web.Request) -> dict[str, str]:
    """A form-encoded body of at most 64 KiB, one value per name (the last one wins)."""
    if request.content_length is not None and request.content_length > MAX_LABEL_BYTES:
        raise FormError(413, f"O formulário passa de {MAX_LABEL_BYTES // 1024} KiB.")
    chunks, size = [], 0
    while chunk := await request.content.read(MAX_LABEL_BYTES + 1):
        size += len(chunk)
        if size > MAX_LABEL_BYTES:
            raise FormError(413, f"O formulário passa de {MAX_LABEL_BYTES // 1024} KiB.")
        chunks.append(chunk)
    if request.content_type != FORM:
        raise FormError(415, f"Envie o formulário como {FORM}.")
    try:
        text = b"".join(chunks).decode("utf-8")
        pairs = parse_qsl(text, keep_blank_values=True, max_num_fields=MAX_FORM_FIELDS)
    except (UnicodeDecodeError, ValueError):
        raise FormError(400, "O formulário não veio em UTF-8 ou tem campos demais.") from None
    return dict(pairs)


def _claim_keys(form: dict[str, str]) -> list[str]:
    names = [k.removeprefix("claim-") for k in form if k.startswith("claim-")]
    return sorted(names, key=lambda n: (not (n.isascii() and n.isdigit()), len(n), n))


def form_body(form: dict[str, str]) -> tuple[dict[str, Any], list[str]]:
    """The JSON body of spec §16 that a labelling form says, and the ``N`` of each item of its
    ``claims`` (to name the form's field when :func:`veredito.labels.parse_submission` refuses
    one). Nothing is checked here: every value goes to the same validation as the API's."""
    claims: list[dict[str, Any]] = []
    numbers: list[str] = []
    for n in _claim_keys(form):
        choice = form[f"claim-{n}"].strip()
        if not choice:
            continue
        idx: Any = int(n) if n.isascii() and n.isdigit() else n
        correct: Any = {"certa": True, "errada": False}.get(choice, choice)
        item: dict[str, Any] = {"claim_idx": idx, "correct": correct}
        if correct is not True:
            for name in ("verdict", "category"):
                value = form.get(f"{name}-{n}", "").strip()
                if value:
                    item[name] = value
        claims.append(item)
        numbers.append(n)
    body: dict[str, Any] = {}
    if claims:
        body["claims"] = claims
    text = form.get("missed-text", "")
    if text.strip():
        missed = {"text": text, "verdict": form.get("missed-verdict", "").strip() or "invented"}
        category = form.get("missed-category", "").strip()
        if category:
            missed["category"] = category
        body["missed"] = [missed]
    said = form.get("hallucinated", "").strip()
    if said:
        body["hallucinated"] = HALLUCINATED.get(said, said)
    if form.get("note", "").strip():
        body["note"] = form["note"]
    return body, numbers


# What parse_submission says, in the page's language (the field is named apart).
MESSAGES = (
    ("must be a claim position", "não é uma afirmação desta resposta"),
    ("is labelled twice", "a afirmação veio duas vezes"),
    ("must be true or false", "escolha uma das opções"),
    ("must be one of", "não é uma das opções"),
    ("keeps the judge's verdict", "uma afirmação certa fica com o veredito do juiz"),
    (
        "is not a substring of the answer",
        "o trecho não está na resposta; copie-o exatamente como aparece nela",
    ),
    ("must be the span's text", "escreva o trecho"),
    ("does not carry its answer", "este veredito não traz a resposta"),
    ("is not grounded", "um trecho apontado não pode ser «apoiada»"),
    ("at most", "é longo demais"),
    ("contains a NUL character", "contém um caractere NUL"),
    ("is not valid Unicode", "não é Unicode válido"),
    (
        "says nothing",
        "nada a salvar: marque uma afirmação, aponte um trecho, diga se há alucinação ou escreva "
        "uma nota",
    ),
)


def page_error(field: str, message: str, numbers: list[str]) -> tuple[str, str]:
    """``(form field, pt-BR message naming it)`` of a :class:`veredito.labels.LabelError`."""
    head, dot, rest = field.partition(".")
    name, where = "formulário", "o formulário"
    if head.startswith("claims[") and head.endswith("]") and head[7:-1].isdigit():
        position = int(head[7:-1])
        n = numbers[position] if position < len(numbers) else "?"
        number = f"{int(n) + 1}" if n.isascii() and n.isdigit() else n
        part = rest if dot else ""
        name = f"{part}-{n}" if part in ("verdict", "category") else f"claim-{n}"
        where = {
            "verdict": f"o veredito certo da afirmação {number}",
            "category": f"a categoria certa da afirmação {number}",
        }.get(part, f"a afirmação {number}")
    elif head.startswith("missed"):
        part = rest if rest in ("category", "verdict") else "text"
        name = f"missed-{part}"
        where = {
            "text": "o trecho apontado",
            "category": "a categoria do trecho apontado",
            "verdict": "o veredito do trecho apontado",
        }[part]
    elif head == "hallucinated":
        name, where = "hallucinated", "«a resposta tem alucinação?»"
    elif head == "note":
        name, where = "note", "a nota"
    said = next((pt for en, pt in MESSAGES if en in message), message)
    return name, f"{where.capitalize()} ({name}): {said}."


# -- what the answer page shows a reviewer --------------------------------------------------------
def _said(row: dict[str, Any]) -> str:
    if row.get("correct"):
        return "certa"
    parts = [pages.VERDICT_LABELS.get(str(row.get("verdict")), "")]
    parts.append(pages.CATEGORY_LABELS.get(str(row.get("category")), ""))
    instead = ", ".join(p for p in parts if p)
    return "errada" + (f" → {instead}" if instead else "")


def queue_parameter(value: Any) -> str:
    """The ``fila`` of a form or link (the app whose queue the reviewer walks), as given:
    :class:`~veredito.web.reading.BadParameter` for a control character or more than
    :data:`MAX_QUEUE` characters."""
    queue = _clean("fila", str(value or ""))
    if len(queue) > MAX_QUEUE:
        raise BadParameter("fila", f"at most {MAX_QUEUE} characters (an app's name)")
    return queue


def _listed_notes(grouped: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Submissions as the page lists them (notes and missed spans cut)."""
    return [
        {
            "reviewer": s["reviewer"],
            "created_at": s["created_at"],
            "note": s["note"],
            "note_truncated": s["note_truncated"],
            "missed": s["missed"],
            "missed_more": s["missed_count"] - len(s["missed"]),
            "claims": len(s["claims"]),
            "wrong": sum(1 for c in s["claims"] if not c["correct"]),
            "hallucinated": s["hallucinated"],
        }
        for s in (listed(x, NOTE_ON_PAGE, MISSED_ON_PAGE) for x in grouped)
    ]


def page_context(
    verdict: dict[str, Any],
    labels: AnswerLabels,
    session: Session | None,
    query: Any,
    form: dict[str, str] | None = None,
    error: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """The answer page's reviewer parts: the labelling form (for a reviewer of this app, with
    their latest labels chosen, or what they just sent), each reviewer's latest note and missed
    spans (the older submissions behind a paged link), why the queue chose this answer, and
    whether the last save worked. Everything here is bounded by reviewers times claims,
    however many submissions the answer has."""
    app = pages._row(verdict)["app"]
    verdict_id = pages._row(verdict)["id"]
    me = session.reviewer.name if session is not None else None
    mine = me is not None and labels.counts.get(me, 0) > 0
    visible = me is None or mine
    notes = sorted(_listed_notes(submissions(labels.notes)), key=lambda n: str(n["created_at"]))
    queue = queue_parameter(query.get("fila", ""))
    total = sum(labels.counts.values())
    context: dict[str, Any] = {
        "labelling": None,
        "notes": notes if visible else [],
        "notes_hidden": me is not None and not mine and any(r != me for r in labels.counts),
        "history": {
            "link": f"/verdicts/{path_segment(verdict_id)}/envios?{urlencode({'app': app})}",
            "submissions": total,
        }
        if visible and total > len(notes)
        else None,
        "reason": reason_label(str(query.get("motivo", ""))),
        "saved": query.get("salvo") == "1",
        "previous_saved": query.get("anterior") == "salva",
        "next_form": queue_form(session, queue),
        "form_error": None
        if error is None
        else {
            "field": error[0],
            "message": error[1],
            "anchor": "rotular" if error[0] == "formulário" else f"f-{error[0]}",
        },
    }
    if session is None or not may_label(session, app):
        context["denied"] = session is not None
        return context
    context["denied"] = False
    count = len([c for c in verdict.get("claims") or [] if isinstance(c, dict)])
    claims: list[dict[str, Any]] = [
        {"choice": "", "verdict": "", "category": "", "others": []} for _ in range(count)
    ]
    hallucinated = ""
    for row in labels.latest:  # each reviewer's latest label of each claim
        if row["reviewer"] != me:
            continue
        idx = row["claim_idx"]
        if row["kind"] == "claim" and isinstance(idx, int) and 0 <= idx < count:
            wrong = not row["correct"]
            claims[idx].update(
                choice="errada" if wrong else "certa",
                verdict=(row["verdict"] or "") if wrong else "",
                category=(row["category"] or "") if wrong else "",
            )
        elif row["kind"] == "answer" and row["hallucinated"] is not None:
            hallucinated = "sim" if row["hallucinated"] else "nao"
    for item in disagreements(labels.latest):
        idx = item["claim_idx"]
        said = item["reviewers"]
        if item["kind"] != "claim" or me not in said or not 0 <= idx < count:
            continue
        claims[idx]["others"] = [
            {"name": name, "said": _said(label)}
            for name, label in said.items()
            if name != me and label != said[me]
        ]
    note = ""
    missed = {"text": "", "category": "GENERICA", "verdict": "invented"}
    if form is not None:  # a form sent back with an error: show what was sent
        for n, claim in enumerate(claims):
            choice = form.get(f"claim-{n}", "")
            claim.update(
                choice=choice if choice in ("certa", "errada") else "",
                verdict=form.get(f"verdict-{n}", ""),
                category=form.get(f"category-{n}", ""),
            )
        said = form.get("hallucinated", "")
        hallucinated = said if said in HALLUCINATED else ""
        note = form.get("note", "")
        missed = {
            "text": form.get("missed-text", ""),
            "category": form.get("missed-category", "GENERICA"),
            "verdict": form.get("missed-verdict", "invented"),
        }
    assert session is not None
    context["labelling"] = {
        "action": f"/verdicts/{path_segment(verdict_id)}/rotulos?{urlencode({'app': app})}",
        "csrf": session.csrf,
        "queue": queue,
        "claims": claims,
        "hallucinated": hallucinated,
        "note": note,
        "missed": missed,
    }
    return context


@dataclass(frozen=True)
class AnswerLabels:
    """What an answer's page reads of its labels: bounded, however many there are."""

    latest: list[dict[str, Any]]  # each reviewer's latest label of each claim (and answer)
    notes: list[dict[str, Any]]  # each reviewer's latest submission with a note or missed span
    counts: dict[str, int]  # submissions by reviewer


def answer_labels(store: Any, app: str, verdict_id: str) -> AnswerLabels:
    """The three bounded reads of an answer's labels (from a worker thread)."""
    return AnswerLabels(
        store.latest_labels(app, verdict_id),
        store.latest_notes(app, verdict_id),
        store.submission_counts(app, verdict_id),
    )


# -- routes -------------------------------------------------------------------------------------
def _page(title: str, message: str, status: int, **headers: str) -> web.Response:
    return pages._render("error.html", status, headers or None, title=title, message=message)


def _redirect(location: str) -> web.Response:
    return web.Response(status=303, headers={"Location": location, "Cache-Control": "no-store"})


def _off() -> web.Response:
    return _page(
        "Revisão desligada",
        "Este servidor não tem revisores (VEREDITO_REVIEW_TOKENS).",
        404,
    )


def _https(request: web.Request) -> bool:
    forwarded = request.headers.get("X-Forwarded-Proto", "").split(",")[0].strip().lower()
    return request.secure or forwarded == "https"


def _same_origin(request: web.Request) -> bool:
    """An ``Origin`` (else a ``Referer``), when the browser sends one, names this host."""
    hosts = {request.headers.get("Host", "").strip().lower()}
    forwarded = request.headers.get("X-Forwarded-Host", "").split(",")[0].strip().lower()
    if forwarded:
        hosts.add(forwarded)
    for header in ("Origin", "Referer"):
        value = request.headers.get(header)
        if value is not None:
            return urlsplit(value.strip()).netloc.lower() in hosts - {""}
    return True


async def sign_in_page(request: web.Request) -> web.Response:
    review = request.app[REVIEW]
    if not review.reviewers:
        return _off()
    return pages._render(
        "signin.html",
        viewer=viewer(await session_of(request)),
        error=None,
        left=request.query.get("saiu") == "1",
    )


async def sign_in(request: web.Request) -> web.Response:
    """A review token gets a session; unless the form says ``encerrar`` other than ``1`` (the
    page's checkbox, ticked by default), the older sessions of that token end first."""
    review = request.app[REVIEW]
    if not review.reviewers:
        return _off()
    if not _same_origin(request):
        return _page("Origem recusada", "Entre pela página de entrada deste servidor.", 403)
    try:
        form = await read_form(request)
    except FormError as exc:
        return pages._render("signin.html", exc.status, viewer=None, error=str(exc), left=False)
    reviewer = review.reviewers.find(form.get("token", "").strip())
    if reviewer is None:
        log.info("a review page sign-in was refused")
        return pages._render(
            "signin.html",
            401,
            viewer=None,
            left=False,
            error="Token de revisão inválido. Confira o token e tente de novo.",
        )
    key = review.reviewers.session_key(reviewer, review.session_secret)
    try:
        if form.get("encerrar", "1") == "1":
            generation = await _call(request, review.store.end_sessions, key)
        else:
            generation = await _call(request, review.store.session_generation, key)
    except StoreUnavailable:
        return pages._store_away_page()
    value = session_cookie(review.session_secret, key, generation, time.time())
    response = _redirect("/")
    response.set_cookie(
        SESSION_COOKIE,
        value,
        max_age=SESSION_SECONDS,
        path="/",
        httponly=True,
        samesite="Strict",
        secure=_https(request),
    )
    log.info("a reviewer signed in to the review page", extra={"reviewer": reviewer.name})
    return response


async def sign_out(request: web.Request) -> web.Response:
    """Ends every session of the reviewer's token on the server (the store's generation moves
    on: every replica, every restart), then clears the cookie."""
    if not _same_origin(request):
        return _page("Origem recusada", "Saia pela página deste servidor.", 403)
    session = await session_of(request)
    try:
        form = await read_form(request)
    except FormError as exc:
        return _page("Formulário inválido", str(exc), exc.status)
    if session is not None:
        if not _equal(form.get("csrf", ""), session.csrf):
            return _forged()
        await _call(request, request.app[REVIEW].store.end_sessions, session.key)
        log.info("a reviewer signed out", extra={"reviewer": session.reviewer.name})
    response = _redirect("/entrar?saiu=1")
    response.del_cookie(
        SESSION_COOKIE, path="/", httponly=True, samesite="Strict", secure=_https(request)
    )
    return response


async def _signed_form(request: web.Request, session: Session) -> dict[str, str] | web.Response:
    """The form of a signed-in reviewer's POST with its CSRF token checked; else the page that
    refuses it (nothing is done)."""
    try:
        form = await read_form(request)
    except FormError as exc:
        return _page("Formulário inválido", str(exc), exc.status)
    if not _equal(form.get("csrf", ""), session.csrf):
        return _forged()
    return form


def _forged() -> web.Response:
    return _page(
        "Formulário recusado",
        "O formulário não trouxe o código desta sessão (csrf). Recarregue a página e tente de "
        "novo; nada foi salvo.",
        403,
    )


def _count(review: Any, payload: dict[str, Any]) -> None:
    review.metrics.labels.labels(str(payload["app"])).inc(
        len(payload["claims"])
        + len(payload["missed"])
        + (payload["hallucinated"] is not None or payload["note"] is not None)
    )


def _slow_down(wait: float) -> web.Response:
    return _page(
        "Devagar",
        f"Muitos envios seguidos; nada foi salvo. Tente de novo em {retry_after(wait)} s.",
        429,
        **{"Retry-After": retry_after(wait)},
    )


async def post_labels(request: web.Request) -> web.Response:
    review = request.app[REVIEW]
    session = await session_of(request)
    if session is None:
        return _page(
            "Entre para rotular",
            "Só um revisor que entrou (em /entrar) rotula respostas; nada foi salvo.",
            403,
        )
    form = await _signed_form(request, session)
    if isinstance(form, web.Response):
        return form
    reviewer = session.reviewer
    # every field is checked before anything is written: a 400 stores nothing
    try:
        verdict_id = _clean("id", request.match_info["id"])
        app = app_parameter(request.query)
        queue = queue_parameter(form.get("fila", ""))
    except BadParameter as exc:
        return _page("Formulário inválido", f"{exc}; nada foi salvo.", 400)
    wait = too_fast(review, reviewer)
    if wait is not None:
        return _slow_down(wait)
    body, numbers = form_body(form)
    try:
        status, payload = await _call(
            request, submit, review.store, reviewer, app, verdict_id, body,
            review.max_submissions, review.sample_share,
        )  # fmt: skip
    except StoreUnavailable:
        return pages._store_away_page()
    if status == 201:
        _count(review, payload)
        log.info(
            "labels stored from the review page",
            extra={"reviewer": reviewer.name, "submission": payload["submission"]},
        )
        if form.get("acao") == "proxima":
            return await _next_answer(request, session, queue, saved=True)
        extra = {"fila": queue} if queue else {}
        query = urlencode({"app": payload["app"], "salvo": "1", **extra})
        return _redirect(f"/verdicts/{path_segment(verdict_id)}?{query}#rotulos")
    message = str(payload["error"]["message"])
    if status != 400:
        titles = {
            403: "Aplicação de outro revisor",
            404: "Veredito não encontrado",
            409: "Id de várias aplicações",
        }
        words = {
            403: f"Este revisor rotula só a aplicação «{reviewer.app}»; nada foi salvo.",
            404: "Nenhum veredito com este id; nada foi salvo.",
            409: "Mais de uma aplicação tem este id: escolha uma na lista.",
        }
        if payload["error"]["code"] == "too_many_submissions":
            _refused(review, reviewer, "cap")
            titles[409] = "Envios demais"
            words[409] = (
                f"Você já enviou {review.max_submissions} vezes rótulos desta resposta, o máximo "
                "(VEREDITO_REVIEW_MAX_SUBMISSIONS); os últimos valem. Nada foi salvo."
            )
        return _page(titles.get(status, "Erro"), words.get(status, message), status)
    field, _, said = message.partition(": ")
    error = page_error(field, said, numbers)
    where = reviewer.app if reviewer.app is not None else app
    try:
        verdict = await _call(request, review.store.get, verdict_id, where)
        if verdict is None:  # gone since submit() read it
            return _page("Veredito não encontrado", "Nenhum veredito com este id.", 404)
        labels = await _call(
            request, answer_labels, review.store, pages._row(verdict)["app"], verdict_id
        )
    except StoreUnavailable:
        return pages._store_away_page()
    context = page_context(verdict, labels, session, {"fila": queue}, form=form, error=error)
    response: web.Response = await _call(
        request, pages._verdict_page, verdict, 400, session, context
    )
    return response


async def _next_answer(
    request: web.Request, session: Session, queue: str, saved: bool = False
) -> web.Response:
    """Take the reviewer's next answer from the queue (a state change: POST only): ``303`` to
    it, or the page that says the queue is dry."""
    review = request.app[REVIEW]
    reviewer = session.reviewer
    app: str | None = queue or None
    if reviewer.app is not None:
        if app is not None and app != reviewer.app:
            return _page(
                "Aplicação de outro revisor",
                f"Este revisor revisa só a aplicação «{reviewer.app}».",
                403,
            )
        app = reviewer.app
    try:
        found = await _call(
            request,
            review.store.next_for_review,
            reviewer.name,
            app,
            share=review.sample_share,
            teach_every=review.teach_every,
        )
    except StoreUnavailable:
        return pages._store_away_page()
    if found is None:
        where = f" da aplicação «{app}»" if app else ""
        return pages._render(
            "error.html",
            200,
            viewer=viewer(session),
            title="Nada para revisar",
            message=("Rótulos salvos. " if saved else "")
            + f"Não há mais respostas{where} para revisar agora. Volte mais tarde.",
            next_form=queue_form(session, queue),
        )
    found_app, found_id, reason = found
    query = {"app": found_app, "motivo": reason}
    if queue:
        query["fila"] = queue
    if saved:
        query["anterior"] = "salva"
    return _redirect(f"/verdicts/{path_segment(found_id)}?{urlencode(query)}")


async def review_next_page(request: web.Request) -> web.Response:
    """``GET /revisar/proxima?app=``: changes nothing (a link, an ``<img>``, a prefetch must not
    take answers from the queue); a page with the button that does, a POST with the CSRF."""
    review = request.app[REVIEW]
    if not review.reviewers:
        return _off()
    session = await session_of(request)
    if session is None:
        return _redirect("/entrar")
    try:
        queue = queue_parameter(request.query.get("app", ""))
    except BadParameter as exc:
        return _page("Parâmetro inválido", str(exc), 400)
    return pages._render(
        "error.html",
        200,
        viewer=viewer(session),
        title="Próxima para revisar",
        message="Pegue a próxima resposta da fila de revisão"
        + (f" da aplicação «{queue}»." if queue else "."),
        next_form=queue_form(session, queue),
    )


async def review_next(request: web.Request) -> web.Response:
    """``POST /revisar/proxima`` (form: ``csrf``, ``app``): the next answer of the queue."""
    review = request.app[REVIEW]
    if not review.reviewers:
        return _off()
    if not _same_origin(request):
        return _page("Origem recusada", "Use os botões das páginas deste servidor.", 403)
    session = await session_of(request)
    if session is None:
        return _redirect("/entrar")
    form = await _signed_form(request, session)
    if isinstance(form, web.Response):
        return form
    try:
        queue = queue_parameter(form.get("app", ""))
    except BadParameter as exc:
        return _page("Formulário inválido", str(exc), 400)
    return await _next_answer(request, session, queue)


async def history(request: web.Request, grant: Any, verdict: dict[str, Any]) -> web.Response:
    """``GET /verdicts/{id}/envios?app=&cursor=``: every submission of an answer, newest first,
    :data:`HISTORY_PAGE` a page, notes and missed spans cut as in every list."""
    review = request.app[REVIEW]
    session = await session_of(request)
    app, verdict_id = pages._row(verdict)["app"], pages._row(verdict)["id"]
    after = cursor_parameter(request.query)
    counts = await _call(request, review.store.submission_counts, app, verdict_id)
    me = session.reviewer.name if session is not None else None
    hidden = me is not None and counts.get(me, 0) == 0 and bool(counts)
    items: list[dict[str, Any]] = []
    next_after = None
    if not hidden:
        page, next_after = await _call(
            request, review.store.submissions_page, app, verdict_id, after=after,
            limit=HISTORY_PAGE, newest_first=True,
        )  # fmt: skip
        items = _listed_notes(page)
    base = f"/verdicts/{path_segment(verdict_id)}/envios?"
    return pages._render(
        "history.html",
        viewer=viewer(session),
        sign_in=bool(review.reviewers),
        row=pages._row(verdict),
        back=f"/verdicts/{path_segment(verdict_id)}?{urlencode({'app': app})}",
        items=items,
        hidden=hidden,
        total=sum(counts.values()),
        older=base + urlencode({"app": app, "cursor": next_after}) if next_after else None,
    )


def add_page_label_routes(app: web.Application) -> None:
    app.router.add_get("/entrar", sign_in_page)
    app.router.add_post("/entrar", sign_in)
    app.router.add_post("/sair", sign_out)
    app.router.add_post("/verdicts/{id}/rotulos", post_labels)
    app.router.add_get("/revisar/proxima", review_next_page)
    app.router.add_post("/revisar/proxima", review_next)


def openapi_paths() -> dict[str, Any]:
    """The reviewer's page routes, for ``serve``'s OpenAPI document (HTML, not JSON)."""
    html = {"content": {"text/html": {"schema": {"type": "string"}}}}
    see_other = {"description": "signed in (or saved): go on to Location"}
    form: dict[str, Any] = {"required": True, "content": {FORM: {"schema": {"type": "object"}}}}
    session: list[dict[str, list[str]]] = [{"reviewSession": []}]

    def page(description: str) -> dict[str, Any]:
        return {"description": description, **html}

    return {
        "/entrar": {
            "get": {
                "summary": "The reviewers' sign-in form (pt-BR HTML)",
                "security": [],
                "responses": {"200": page("the form"), "404": page("no review tokens")},
            },
            "post": {
                "summary": "Sign in with a review token (form field token): sets the session "
                "cookie veredito_sessao (HttpOnly, SameSite=Strict)",
                "security": [],
                "requestBody": form,
                "responses": {
                    "303": see_other,
                    "401": page("not a review token: the form again, with the error"),
                    "403": page("an Origin or Referer of another host"),
                    "404": page("no review tokens"),
                },
            },
        },
        "/sair": {
            "post": {
                "summary": "Sign out: ends every session of the reviewer's token on the server "
                "(the store's generation), clears the cookie (form field csrf)",
                "security": session,
                "requestBody": form,
                "responses": {
                    "303": see_other,
                    "403": page("missing or wrong csrf, or an Origin of another host"),
                },
            }
        },
        "/verdicts/{id}/envios": {
            "get": {
                "summary": "Every submission of an answer, newest first, 20 a page (cursor)",
                "security": [{"read": []}, {"readBasic": []}, {"reviewSession": []}],
                "parameters": [
                    {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}},
                    {"name": "app", "in": "query", "required": False, "schema": {"type": "string"}},
                    {
                        "name": "cursor",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "string"},
                    },
                ],
                "responses": {
                    "200": page("the submissions"),
                    "400": page("a bad cursor"),
                    "404": page("no verdict with this id"),
                },
            }
        },
        "/verdicts/{id}/rotulos": {
            "post": {
                "summary": "The answer page's labelling forms: claim-N=certa|errada, verdict-N, "
                "category-N, hallucinated=sim|nao, note, missed-text, missed-category, "
                "missed-verdict, csrf; stored as POST /v1/verdicts/{id}/labels stores them",
                "security": session,
                "parameters": [
                    {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}},
                    {"name": "app", "in": "query", "required": False, "schema": {"type": "string"}},
                ],
                "requestBody": form,
                "responses": {
                    "303": see_other,
                    "400": page("a field is invalid: the answer page again, naming it"),
                    "403": page("no session, a missing or wrong csrf, or another app's answer"),
                    "404": page("no verdict with this id"),
                    "409": page(
                        "several apps have a verdict with this id, or the reviewer's "
                        "submissions of it reached VEREDITO_REVIEW_MAX_SUBMISSIONS"
                    ),
                    "413": page("a form over 64 KiB"),
                    "429": page("over VEREDITO_REVIEW_RATE; see Retry-After"),
                },
            }
        },
        "/revisar/proxima": {
            "get": {
                "summary": "A page with the button that takes the next answer (changes nothing)",
                "security": session,
                "parameters": [
                    {"name": "app", "in": "query", "required": False, "schema": {"type": "string"}},
                ],
                "responses": {
                    "200": page("the button"),
                    "303": {"description": "to /entrar"},
                },
            },
            "post": {
                "summary": "The signed-in reviewer's next answer to label (form: csrf, app)",
                "security": session,
                "requestBody": form,
                "responses": {
                    "200": page("nothing left to review"),
                    "303": {"description": "to /verdicts/{id}?app=&motivo=, or to /entrar"},
                    "403": page("a missing or wrong csrf, a foreign Origin, another app"),
                },
            },
        },
    }
