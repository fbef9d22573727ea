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
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from worker.rules.detectors import Mention, find_mentions
from worker.rules.text import content_stems, digitise, fold, split_sentences

__all__ = ["Check", "ClaimJudgement", "ContextIndex", "check_text", "index_context", "judge_answer"]

# lexical support (share of a claim's content stems found in the context)
INVENTED_BELOW = 0.25
PARTIAL_BELOW = 0.4
MIN_CONTENT_WORDS = 5

_META = re.compile(
    r"\b(?:n[aã]o\s+(?:[eé]\s+)?(?:informa|menciona|mencionad|diz|especifica|traz|cont[eé]m|"
    r"apresenta|fala|consta|detalha|cita|esclarece|aborda|indica|encontrei|localizei|h[aá]\s+"
    r"(?:informa|men[cç]|dados|detalhes|registro)|tenho\s+(?:essa|esta|a)?\s*informa|sei\b|"
    r"est[aá]\s+(?:no|nos|na|nas|claro)|aparece|possuo|disp[oõ]e|encontra-se)|"
    r"sem\s+informa[cç]|n[aã]o\s+foi\s+(?:poss[ií]vel|informad|mencionad|especificad))",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class ContextIndex:
    chunks: tuple[str, ...]
    keys: frozenset[str]
    kinds: frozenset[str]
    chunk_keys: tuple[frozenset[str], ...]
    chunk_stems: tuple[frozenset[str], ...]
    stems: frozenset[str]
    folded: str


@dataclass(frozen=True, slots=True)
class Check:
    mention: Mention
    status: str  # grounded | invented | contradicted
    finding: str | None  # absent_from_context | conflicts_with_context | invalid_check_digit


@dataclass
class ClaimJudgement:
    text: str
    verdict: str
    category: str | None
    chunk_idx: int | None
    checks: list[Check] = field(default_factory=list)


def index_context(chunks: Sequence[str]) -> ContextIndex:
    chunk_keys: list[frozenset[str]] = []
    chunk_stems: list[frozenset[str]] = []
    for chunk in chunks:
        keys: set[str] = set()
        for mention in find_mentions(digitise(chunk)):
            keys |= mention.keys | mention.extra
        chunk_keys.append(frozenset(keys))
        chunk_stems.append(frozenset(content_stems(chunk)))
    all_keys = frozenset().union(*chunk_keys) if chunk_keys else frozenset()
    return ContextIndex(
        chunks=tuple(chunks),
        keys=all_keys,
        kinds=frozenset(k.partition("|")[0] for k in all_keys),
        chunk_keys=tuple(chunk_keys),
        chunk_stems=tuple(chunk_stems),
        stems=frozenset().union(*chunk_stems) if chunk_stems else frozenset(),
        folded=fold(" \n ".join(chunks)),
    )


def _check(mention: Mention, ctx: ContextIndex) -> Check:
    if mention.keys & ctx.keys:
        conflict = _year_conflict(mention, ctx)
        if conflict:
            return Check(mention, "contradicted", "conflicts_with_context")
        return Check(mention, "grounded", None)
    if not mention.contradictable and fold(mention.text) in ctx.folded:
        return Check(mention, "grounded", None)  # named in a way the detectors did not catch
    if mention.contradictable and mention.kinds & ctx.kinds:
        status, finding = "contradicted", "conflicts_with_context"
    else:
        status, finding = "invented", "absent_from_context"
    if mention.invalid:
        finding = "invalid_check_digit"
    return Check(mention, status, finding)


def _year_conflict(mention: Mention, ctx: ContextIndex) -> bool:
    """Same law number, another year (``Lei 8.078/1991`` where the context has ``/1990``)."""
    years = {k for k in mention.extra if k.startswith("lawyear|")}
    if not years or years & ctx.keys:
        return False
    laws = {k.partition("|")[2].partition("/")[0] for k in years}
    return any(
        k.startswith("lawyear|") and k.partition("|")[2].partition("/")[0] in laws for k in ctx.keys
    )


def check_text(text: str, ctx: ContextIndex) -> list[Check]:
    """Every mention in ``text`` checked against the context."""
    return [_check(mention, ctx) for mention in find_mentions(digitise(text))]


def _best_chunk(stems: Sequence[str], mention_keys: set[str], ctx: ContextIndex) -> int | None:
    best, best_score = None, 0.0
    wanted = set(stems)
    for i, (keys, chunk_stems) in enumerate(zip(ctx.chunk_keys, ctx.chunk_stems, strict=True)):
        score = 3 * len(mention_keys & keys) + len(wanted & chunk_stems)
        if score > best_score:
            best, best_score = i, score
    return best


def judge_claim(text: str, ctx: ContextIndex) -> ClaimJudgement:
    stems = content_stems(text)
    if _META.search(text):
        return ClaimJudgement(text, "grounded", None, _best_chunk(stems, set(), ctx))
    checks = check_text(text, ctx)
    grounded_keys = {k for c in checks if c.status == "grounded" for k in c.mention.keys}
    for status in ("contradicted", "invented"):
        bad = [c for c in checks if c.status == status]
        if bad:
            return ClaimJudgement(text, status, bad[0].mention.category, None, checks)
    chunk = _best_chunk(stems, grounded_keys, ctx)
    if checks or len(set(stems)) < MIN_CONTENT_WORDS:
        return ClaimJudgement(text, "grounded", None, chunk, checks)
    support = sum(1 for s in set(stems) if s in ctx.stems) / len(set(stems))
    if support < INVENTED_BELOW:
        return ClaimJudgement(text, "invented", "GENERICA", None, checks)
    if support < PARTIAL_BELOW:
        return ClaimJudgement(text, "partial", "GENERICA", chunk, checks)
    return ClaimJudgement(text, "grounded", None, chunk, checks)


def judge_answer(answer: str, ctx: ContextIndex) -> list[ClaimJudgement]:
    return [judge_claim(sentence, ctx) for sentence in split_sentences(answer)]
