"""The rules judge's reasoning: index the context, split the answer, judge each claim.

A mention is **grounded** when one of its keys is in the context, **contradicted** when the
context has a mention of the same kind with another value (another law number, another amount,
another deadline in the same unit, a CPF with a digit changed, another city), and **invented**
otherwise. Public bodies and programmes are never "another value" of each other: one the
context does not name is invented. A CPF or CNPJ with wrong check digits that is not in the
context is reported as ``invalid_check_digit``.

A claim takes the verdict of its worst mention (contradicted, then invented) and that mention's
category. A claim without mentions is judged on lexical support: the share of its content stems
found in the context; too little support makes it ``invented`` (or ``partial``) with the
category GENERICA. A claim saying the context does not say something is grounded.

What is particular to a family of facts lives with its detector: the same law with another year
(``laws.year_conflict``), the right body of another state (``bodies.other_state``), a state
implied by a body or court (``places.implied_place``), a date given in parts, a number with or
without its prefix and how near the nearest value is (``amounts``), and whether a value sits in
the clause about the same thing (``slots``). The context is read in ``context``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from veredito.worker.rules.amounts import QUANTITIES, grounded_by_parts, nearest, same_number
from veredito.worker.rules.bodies import other_state
from veredito.worker.rules.context import (
    CHUNK_CACHE,
    ContextIndex,
    _build,
    _mentions_per_text,
    _probed_index,
    index_context,
)
from veredito.worker.rules.context import _chunk_text as _chunk_text  # where it lived before
from veredito.worker.rules.derive import Derivation, derive
from veredito.worker.rules.detectors import Mention, detectors_for, find_mentions
from veredito.worker.rules.laws import year_conflict
from veredito.worker.rules.markdown import META as _META
from veredito.worker.rules.markdown import claims_of, clean, is_advice
from veredito.worker.rules.mention import Incomplete
from veredito.worker.rules.places import implied_place
from veredito.worker.rules.slots import Slot, same_slot, topic_overlap, wrong_slot
from veredito.worker.rules.text import content_stems, digitise, fold

__all__ = [
    "CHUNK_CACHE",
    "AnswerJudgement",
    "Check",
    "ClaimJudgement",
    "ContextIndex",
    "Slot",
    "check_text",
    "check_texts",
    "index_context",
    "judge",
    "judge_answer",
    "judge_claim",
]

# lexical support (share of a claim's content stems found in the context)
INVENTED_BELOW = 0.15
PARTIAL_BELOW = 0.25
MIN_CONTENT_WORDS = 7
# advice and courtesy carry no fact to check ("Sugiro confirmar com a seguradora.")
_ADVICE = re.compile(
    r"(?:^\W*|\b)(?:sugiro|sugerimos|recomendo|recomendamos|recomenda-se|o\s+ideal|vale\s+(?:a\s+pena\s+)?"
    r"(?:confirmar|verificar|consultar)|procure|consulte|confirme|verifique|entre\s+em\s+contato|"
    r"em\s+caso\s+de\s+d[uú]vida|qualquer\s+d[uú]vida|fique\s+[àa]\s+vontade|espero|"
    r"estou\s+[àa]\s+disposi|se\s+precisar|posso\s+ajudar|lembre-se|importante:|aten[cç][aã]o:|"
    r"[eé]\s+(?:aconselh[aá]vel|recomend[aá]vel|prudente|importante|fundamental|essencial)\s+"
    r"(?:que\s+)?(?:manter|guardar|consultar|verificar|conferir|realizar|buscar|procurar|fazer|"
    r"acompanhar|o\s+contribuinte)|consultar\s+(?:um|uma|o|a)\s+(?:contador|profission|especialist|"
    r"advogad))",
    re.IGNORECASE,
)

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Check:
    mention: Mention
    status: str  # grounded | invented | contradicted
    # absent_from_context | conflicts_with_context | invalid_check_digit | derived
    finding: str | None
    derivation: Derivation | None = None
    # for a finding, what the confidence rests on (worker/confidence.py): why (year,
    # other_state, wrong_slot, same_slot, kind_elsewhere, kind_absent, given), and for a
    # quantity how near the nearest context value of its kind is (1: equal, towards 0: far)
    why: str | None = None
    nearest: float | None = None


@dataclass
class AnswerJudgement:
    claims: list[ClaimJudgement]
    non_claims: int  # headings, source lists, footers: dropped, not judged


@dataclass
class ClaimJudgement:
    text: str
    verdict: str
    category: str | None
    chunk_idx: int | None
    checks: list[Check] = field(default_factory=list)
    # what the verdict rests on, for its confidence (:mod:`veredito.worker.confidence`):
    # checks (mentions checked), lexical (the share of its content words in the context),
    # meta (talks about the answer itself), advice, short (too few content words to judge)
    basis: str = "checks"
    support: float | None = None  # the lexical share, when it was computed
    words: int = 0  # distinct content stems
    # "advice" (markdown.is_advice: a recommendation, courtesy, talk about the answer), never
    # flagged nor counted in the score; None for a claim of fact
    kind: str | None = None


# Chunks whose clauses, tokens, stems and mentions stay cached: a RAG app retrieves the same
# chunks again and again. About 17 KB of Python objects per distinct chunk (measured with
# tracemalloc on bench/corpus.py triples), so about 70 MB when full; 8,192 of each took a worker


def _check(
    mention: Mention, ctx: ContextIndex, claim: str = "", own: frozenset[str] = frozenset()
) -> Check:
    """``mention`` of the digitised ``claim`` (whose mentions have the keys ``own``) checked
    against the context."""
    if not mention.keys.isdisjoint(ctx.keys) or grounded_by_parts(mention, ctx):
        for why, conflict in (
            ("year", year_conflict),
            ("other_state", other_state),
        ):
            if conflict(mention, ctx):
                return Check(mention, "contradicted", "conflicts_with_context", why=why)
        if wrong_slot(mention, claim, ctx):
            return Check(mention, "contradicted", "conflicts_with_context", why="wrong_slot")
        return Check(mention, "grounded", None)
    if mention.keys & ctx.given:  # a value the user gave in the query ...
        if not mention.contradictable:
            return Check(mention, "grounded", None)
        if not ctx.complete:
            raise Incomplete
        if ctx.personal or not (mention.kinds & ctx.kinds and topic_overlap(mention, claim, ctx)):
            # ... when the answer speaks of the user's case, or the context says nothing else
            return Check(mention, "grounded", None)
    if not mention.contradictable and fold(mention.text) in ctx.folded:
        return Check(mention, "grounded", None)  # named in a way the detectors did not catch
    if implied_place(mention, ctx):
        return Check(mention, "grounded", None)  # "Procon-PE" names Pernambuco
    if same_number(mention, ctx):
        return Check(mention, "grounded", None)  # "(91) 3201-2700" and "91 3201 2700"
    quantity = any(k.startswith(QUANTITIES) for k in mention.keys)
    if (mention.contradictable or quantity) and not ctx.complete:
        raise Incomplete  # another value of its kind, or an operand, may be in a clause not read
    if quantity:
        folded_claim = fold(claim)
        for key in mention.keys:
            derivation = derive(
                key,
                ctx.sources - mention.keys,
                folded_claim,
                own - mention.keys,
                ctx.cues,
                ctx.answer,
                ctx.given,
            )
            if derivation is not None:
                return Check(mention, "grounded", "derived", derivation)
    if mention.contradictable and mention.kinds & ctx.kinds and same_slot(mention, claim, ctx):
        status, finding, why = "contradicted", "conflicts_with_context", "same_slot"
    else:
        status, finding = "invented", "absent_from_context"
        why = "kind_elsewhere" if mention.kinds & ctx.kinds else "kind_absent"
    if mention.keys & ctx.given:
        why = "given"
    if mention.invalid:
        finding = "invalid_check_digit"
    near = nearest(mention, ctx) if quantity else None
    return Check(mention, status, finding, why=why, nearest=near)


def check_text(text: str, ctx: ContextIndex | Sequence[str], query: str = "") -> list[Check]:
    """Every mention in ``text`` checked against the context."""
    return check_texts([text], ctx, query)[0]


def _operands_grounded(checks: list[Check]) -> list[Check]:
    """A number the claim computes with is not a claim of its own: "em 12 meses, isso soma
    R$ 2.400" takes 12 as the factor of a derived value, so "12 meses" is grounded with it."""
    used = {
        operand
        for c in checks
        if c.derivation is not None
        for operand in c.derivation.operands
        if operand.replace(".", "").replace("/", "").isdigit()
    }
    used |= {part for u in list(used) for part in u.split("/")}
    if not used:
        return checks
    out = []
    for c in checks:
        values = {k.partition("|")[2] for k in c.mention.keys}
        if (
            c.status != "grounded"
            and values & used
            and any(k.startswith(QUANTITIES) for k in c.mention.keys)
        ):
            out.append(Check(c.mention, "grounded", "derived", c.derivation))
        else:
            out.append(c)
    return out


def _keys(mentions: Sequence[Mention]) -> frozenset[str]:

    return frozenset(k for m in mentions for k in m.keys)


# what a user's own words can ground: their figures, dates, IDs and places, never a law, a body
# or a programme (asking about the Auxílio Gás does not make the answer's facts about it true)
_GIVEN_KINDS = (
    *QUANTITIES,
    "year",
    "monthyear",
    "daymonth",
    "dayofmonth",
    "clock",
    "cpf",
    "cnpj",
    "city",
    "uf",
)


# the user's own facts: a statement, or a question in the first person ("paguei R$ 150 a mais",
# "minha filha tem cinco anos?"); "a operadora pode exigir 2 anos?" gives no fact
_FIRST_PERSON = re.compile(
    r"\b(?:eu|meu|minha|meus|minhas|me|comigo|paguei|recebi|recebo|ganho|ganhei|tenho|tive|"
    r"trabalhei|trabalho|comprei|fiz|sou|estou|moro|fui|pago|nasci|assinei|contratei|fechei)\b",
    re.IGNORECASE,
)


def _query_keys(query: str) -> frozenset[str]:
    if not query:
        return frozenset()
    facts = " ".join(
        s
        for s in re.split(r"(?<=[.!?])\s+", query)
        if not s.rstrip().endswith("?") or _FIRST_PERSON.search(s)
    )
    if not facts:
        return frozenset()
    return frozenset(  # primary keys only: "20 dias" must not ground "20 salários mínimos"
        k for m in find_mentions(digitise(facts)) for k in m.keys if k.startswith(_GIVEN_KINDS)
    )


def check_texts(
    texts: Sequence[str], ctx: ContextIndex | Sequence[str], query: str = ""
) -> list[list[Check]]:
    """:func:`check_text` for many texts, with one pass of the detectors over all of them.
    ``ctx`` may be the context's chunks: then only what the texts' mentions need is indexed.
    Values the ``query`` gives ground the texts' (the user's own figures)."""
    digitised = [digitise(clean(t)) for t in texts]
    per_text = _mentions_per_text(digitised)

    def check(index: ContextIndex) -> list[list[Check]]:
        return [
            [_check(mention, index, digits, _keys(mentions)) for mention in mentions]
            for digits, mentions in zip(digitised, per_text, strict=True)
        ]

    return _with_context(ctx, per_text, query, " ".join(texts), check)


def _with_context(
    ctx: ContextIndex | Sequence[str],
    per_text: Sequence[Sequence[Mention]],
    query: str,
    text: str,
    work: Callable[[ContextIndex], _T],
) -> _T:
    """Run ``work`` on the context as the texts' mentions need it: ``ctx`` itself when it is
    an index; else an index of the clauses holding their probes, and of the whole context when
    ``work`` finds that one cannot decide (:class:`~veredito.worker.rules.mention.Incomplete`)."""
    given = _query_keys(query)
    answer = frozenset(k for ms in per_text for m in ms for k in m.keys | m.extra)
    if isinstance(ctx, ContextIndex):
        return work(ctx.attach(given, answer, text))
    chunks = ctx
    mentions = [m for ms in per_text for m in ms]
    detectors = detectors_for(mentions)
    index, wanted = _probed_index(chunks, detectors, mentions)
    try:
        return work(index.attach(given, answer, text))
    except Incomplete:
        complete = _build(chunks, detectors, wanted, complete=True)  # cannot raise again
        return work(complete.attach(given, answer, text))


def _best_chunk(stems: Sequence[str], mention_keys: set[str], ctx: ContextIndex) -> int | None:
    best, best_score = None, 0
    wanted = set(stems)
    for i, (keys, chunk_stems) in enumerate(zip(ctx.chunk_keys, ctx.chunk_stems, strict=True)):
        score = 3 * len(mention_keys & keys) + len(wanted & chunk_stems)
        if score > best_score:
            best, best_score = i, score
    return best


def judge_claim(
    text: str, ctx: ContextIndex, mentions: list[Mention] | None = None, digits: str | None = None
) -> ClaimJudgement:
    """Judge one claim; ``mentions`` (found in ``digits``, the digitised claim) when known."""
    stems = content_stems(text)
    words = len(set(stems))
    if _META.search(text):
        return ClaimJudgement(
            text, "grounded", None, _best_chunk(stems, set(), ctx), basis="meta", words=words
        )
    if mentions is None or digits is None:
        checks = check_text(text, ctx)
    else:
        own = frozenset(k for m in mentions for k in m.keys)
        checks = [_check(m, ctx, digits, own) for m in mentions]
    checks = _operands_grounded(checks)
    grounded_keys = {k for c in checks if c.status == "grounded" for k in c.mention.keys}
    for status in ("contradicted", "invented"):
        bad = [c for c in checks if c.status == status]
        if bad:
            return ClaimJudgement(text, status, bad[0].mention.category, None, checks, words=words)
    chunk = _best_chunk(stems, grounded_keys, ctx)
    if checks:
        return ClaimJudgement(text, "grounded", None, chunk, checks, words=words)
    if words < MIN_CONTENT_WORDS or _ADVICE.search(text):
        basis = "advice" if words >= MIN_CONTENT_WORDS else "short"
        return ClaimJudgement(text, "grounded", None, chunk, checks, basis=basis, words=words)
    support = sum(1 for s in set(stems) if s in ctx.stems) / words
    lexical = {"basis": "lexical", "support": support, "words": words}
    if support < INVENTED_BELOW:
        return ClaimJudgement(text, "invented", "GENERICA", None, checks, **lexical)  # type: ignore[arg-type]
    if support < PARTIAL_BELOW:
        return ClaimJudgement(text, "partial", "GENERICA", chunk, checks, **lexical)  # type: ignore[arg-type]
    return ClaimJudgement(text, "grounded", None, chunk, checks, **lexical)  # type: ignore[arg-type]


def _advice(text: str, ctx: ContextIndex) -> ClaimJudgement:
    """Advice (:func:`~veredito.worker.rules.markdown.is_advice`): neither flagged nor counted;
    what it rests on is what :func:`judge_claim` would say of a grounded claim with nothing
    checkable (``meta``, ``short`` or ``advice``)."""
    stems = content_stems(text)
    words = len(set(stems))
    basis = "meta" if _META.search(text) else "short" if words < MIN_CONTENT_WORDS else "advice"
    chunk = _best_chunk(stems, set(), ctx)
    return ClaimJudgement(
        text, "grounded", None, chunk, [], basis=basis, words=words, kind="advice"
    )


def judge_answer(
    answer: str, ctx: ContextIndex | Sequence[str], query: str = ""
) -> list[ClaimJudgement]:
    """Judge each claim of ``answer`` (see :func:`judge`)."""
    return judge(answer, ctx, query).claims


def judge(answer: str, ctx: ContextIndex | Sequence[str], query: str = "") -> AnswerJudgement:
    """Judge each sentence of ``answer`` (markdown and citation debris turned into sentences or
    dropped, :mod:`~veredito.worker.rules.markdown`); the detectors run once over all of them.
    ``ctx`` may be the context's chunks: the answer's mentions are found first, and the context
    is searched only for what they need. Values the ``query`` gives ground the answer's."""
    sentences, non_claims = claims_of(answer)
    digitised = [digitise(s) for s in sentences]
    per_sentence = _mentions_per_text(digitised)

    def claims(index: ContextIndex) -> list[ClaimJudgement]:
        return [
            _advice(sentence, index)
            if is_advice(sentence, len(mentions))
            else judge_claim(sentence, index, mentions, digits)
            for sentence, digits, mentions in zip(sentences, digitised, per_sentence, strict=True)
        ]

    return AnswerJudgement(_with_context(ctx, per_sentence, query, answer, claims), non_claims)
