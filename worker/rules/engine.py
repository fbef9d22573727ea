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

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from veredito.worker.rules.detectors import Mention, find_mentions
from veredito.worker.rules.text import content_stems, digitise, fold, split_sentences

__all__ = ["Check", "ClaimJudgement", "ContextIndex", "check_text", "index_context", "judge_answer"]

# lexical support (share of a claim's content stems found in the context)
INVENTED_BELOW = 0.15
PARTIAL_BELOW = 0.25
MIN_CONTENT_WORDS = 7
# advice and courtesy carry no fact to check ("Sugiro confirmar com a seguradora.")
_ADVICE = re.compile(
    r"(?:^\W*|\b)(?:sugiro|sugerimos|recomendo|recomendamos|recomenda-se|o\s+ideal|vale\s+(?:a\s+pena\s+)?"
    r"(?:confirmar|verificar|consultar)|procure|consulte|confirme|verifique|entre\s+em\s+contato|"
    r"em\s+caso\s+de\s+d[uú]vida|qualquer\s+d[uú]vida|fique\s+[àa]\s+vontade|espero|"
    r"estou\s+[àa]\s+disposi|se\s+precisar|posso\s+ajudar|lembre-se|importante:|aten[cç][aã]o:)",
    re.IGNORECASE,
)

_META = re.compile(
    r"\b(?:n[aã]o\s+(?:[eé]\s+)?(?:informa|menciona|mencionad|diz|especifica|traz|cont[eé]m|"
    r"apresenta|fala|consta|detalha|cita|esclarece|aborda|indica|encontrei|localizei|h[aá]\s+"
    r"(?:informa|men[cç]|dados|detalhes|registro)|tenho\s+(?:essa|esta|a)?\s*informa|sei\b|"
    r"est[aá]\s+(?:no|nos|na|nas|claro)|aparece|possuo|disp[oõ]e|encontra-se)|"
    r"sem\s+informa[cç]|n[aã]o\s+foi\s+(?:poss[ií]vel|informad|mencionad|especificad))",
    re.IGNORECASE,
)


# amounts whose value is checked against the clause it belongs to ("180 dias" for the wrong case)
_SLOT_KINDS = ("duration:", "money", "percent", "count:")
_SLOT_IGNORE = frozenset(content_stems("dia dias hora horas mes meses ano anos prazo valor reais"))


@dataclass(frozen=True, slots=True)
class Slot:
    """A context amount and the content stems of the clause it sits in."""

    keys: frozenset[str]
    kinds: frozenset[str]
    stems: frozenset[str]


@dataclass(frozen=True, slots=True)
class ContextIndex:
    chunks: tuple[str, ...]
    keys: frozenset[str]
    kinds: frozenset[str]
    chunk_keys: tuple[frozenset[str], ...]
    chunk_stems: tuple[frozenset[str], ...]
    stems: frozenset[str]
    folded: str
    slots: tuple[Slot, ...] = ()


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


_CLAUSE_END = re.compile(r"[;:]\s+|\.\s+(?=[A-ZÁÉÍÓÚÂÊÔÃÕÇ])")


@dataclass(frozen=True, slots=True)
class _ChunkIndex:
    keys: frozenset[str]
    stems: frozenset[str]
    slots: tuple[Slot, ...]


@lru_cache(maxsize=8192)
def _index_chunk(chunk: str) -> _ChunkIndex:
    """What the judge needs of one chunk. Cached: a RAG app retrieves the same chunks again and
    again, and a chunk's index does not depend on the question or the answer."""
    keys: set[str] = set()
    slots: list[Slot] = []
    text = digitise(chunk)
    bounds = [m.end() for m in _CLAUSE_END.finditer(text)] + [len(text)]
    clause_stems: dict[int, frozenset[str]] = {}
    for mention in find_mentions(text):
        keys |= mention.keys | mention.extra
        if any(k.startswith(_SLOT_KINDS) for k in mention.keys):
            clause = bisect.bisect_right(bounds, mention.start)
            if clause not in clause_stems:
                start = bounds[clause - 1] if clause else 0
                clause_stems[clause] = _slot_stems(
                    text[start : bounds[min(clause, len(bounds) - 1)]]
                )
            slots.append(Slot(mention.keys, mention.kinds, clause_stems[clause]))
    return _ChunkIndex(frozenset(keys), frozenset(content_stems(chunk)), tuple(slots))


def index_context(chunks: Sequence[str]) -> ContextIndex:
    indexed = [_index_chunk(chunk) for chunk in chunks]
    all_keys = frozenset().union(*(c.keys for c in indexed))
    return ContextIndex(
        chunks=tuple(chunks),
        keys=all_keys,
        kinds=frozenset(k.partition("|")[0] for k in all_keys),
        chunk_keys=tuple(c.keys for c in indexed),
        chunk_stems=tuple(c.stems for c in indexed),
        stems=frozenset().union(*(c.stems for c in indexed)),
        folded=fold(" \n ".join(chunks)),
        slots=tuple(slot for c in indexed for slot in c.slots),
    )


def _slot_stems(text: str) -> frozenset[str]:
    return frozenset(s for s in content_stems(text) if not s.isdigit()) - _SLOT_IGNORE


def _wrong_slot(mention: Mention, claim_stems: frozenset[str], ctx: ContextIndex) -> bool:
    """The value is in the context, but for something else: the claim's words sit with another
    value of the same kind ("parto ... 180 dias" where the context says "300 dias para partos ...;
    180 dias para os demais casos")."""
    if not claim_stems or not any(k.startswith(_SLOT_KINDS) for k in mention.keys):
        return False
    same = [len(claim_stems & s.stems) for s in ctx.slots if s.keys & mention.keys]
    other = [
        len(claim_stems & s.stems)
        for s in ctx.slots
        if s.kinds & mention.kinds and not s.keys & mention.keys
    ]
    return bool(same and other) and max(same) == 0 and max(other) >= 1


def _grounded_by_parts(mention: Mention, ctx: ContextIndex) -> bool:
    """``15/03/2024`` where the context says "de 15 de março a 31 de maio de 2024"."""
    for key in mention.keys:
        kind, _, value = key.partition("|")
        if kind == "date":
            year, month, day = value.split("-")
            if f"daymonth_free|{month}-{day}" in ctx.keys and f"year|{year}" in ctx.keys:
                return True
    return False


def _check(mention: Mention, ctx: ContextIndex, claim_stems: frozenset[str] = frozenset()) -> Check:
    if mention.keys & ctx.keys or _grounded_by_parts(mention, ctx):
        if _year_conflict(mention, ctx) or _wrong_slot(mention, claim_stems, ctx):
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
    return check_texts([text], ctx)[0]


def check_texts(texts: Sequence[str], ctx: ContextIndex) -> list[list[Check]]:
    """:func:`check_text` for many texts, with one pass of the detectors over all of them."""
    digitised = [digitise(t) for t in texts]
    per_text = _mentions_per_text(digitised)
    return [
        [_check(mention, ctx, _slot_stems(digits)) for mention in mentions]
        for digits, mentions in zip(digitised, per_text, strict=True)
    ]


_SEPARATOR = "\x1f"  # neither a word character nor a space: no pattern runs across it


def _mentions_per_text(digitised: Sequence[str]) -> list[list[Mention]]:
    starts = []
    offset = 0
    for d in digitised:
        starts.append(offset)
        offset += len(d) + 1
    per_text: list[list[Mention]] = [[] for _ in digitised]
    for mention in find_mentions(_SEPARATOR.join(digitised)):
        per_text[bisect.bisect_right(starts, mention.start) - 1].append(mention)
    return per_text


def _best_chunk(stems: Sequence[str], mention_keys: set[str], ctx: ContextIndex) -> int | None:
    best, best_score = None, 0.0
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
    if _META.search(text):
        return ClaimJudgement(text, "grounded", None, _best_chunk(stems, set(), ctx))
    if mentions is None or digits is None:
        checks = check_text(text, ctx)
    else:
        claim_stems = _slot_stems(digits)
        checks = [_check(m, ctx, claim_stems) for m in mentions]
    grounded_keys = {k for c in checks if c.status == "grounded" for k in c.mention.keys}
    for status in ("contradicted", "invented"):
        bad = [c for c in checks if c.status == status]
        if bad:
            return ClaimJudgement(text, status, bad[0].mention.category, None, checks)
    chunk = _best_chunk(stems, grounded_keys, ctx)
    if checks or len(set(stems)) < MIN_CONTENT_WORDS or _ADVICE.search(text):
        return ClaimJudgement(text, "grounded", None, chunk, checks)
    support = sum(1 for s in set(stems) if s in ctx.stems) / len(set(stems))
    if support < INVENTED_BELOW:
        return ClaimJudgement(text, "invented", "GENERICA", None, checks)
    if support < PARTIAL_BELOW:
        return ClaimJudgement(text, "partial", "GENERICA", chunk, checks)
    return ClaimJudgement(text, "grounded", None, chunk, checks)


def judge_answer(answer: str, ctx: ContextIndex) -> list[ClaimJudgement]:
    """Judge each sentence of ``answer``; the detectors run once over all of them."""
    sentences = split_sentences(answer)
    digitised = [digitise(s) for s in sentences]
    per_sentence = _mentions_per_text(digitised)
    return [
        judge_claim(sentence, ctx, mentions, digits)
        for sentence, digits, mentions in zip(sentences, digitised, per_sentence, strict=True)
    ]
