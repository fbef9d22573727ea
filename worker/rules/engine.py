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
import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import TypeVar

from veredito.worker.rules import gazetteer as gz
from veredito.worker.rules.derive import CUES, Derivation, derive
from veredito.worker.rules.detectors import (
    DETECTORS,
    Detector,
    Mention,
    _fold_same_length,
    detectors_for,
    find_mentions,
)
from veredito.worker.rules.markdown import claims_of, clean
from veredito.worker.rules.probes import probes, tokens
from veredito.worker.rules.text import content_stems, digitise, fold

__all__ = [
    "AnswerJudgement",
    "Check",
    "ClaimJudgement",
    "ContextIndex",
    "check_text",
    "check_texts",
    "index_context",
    "judge_answer",
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

_META = re.compile(
    r"\b(?:n[aã]o\s+(?:[eé]\s+)?(?:informa|menciona|mencionad|diz|especifica|traz|cont[eé]m|"
    r"apresenta|fala|consta|detalha|cita|esclarece|aborda|indica|encontrei|localizei|h[aá]\s+"
    r"(?:informa|men[cç]|dados|detalhes|registro)|tenho\s+(?:essa|esta|a)?\s*informa|sei\b|"
    r"est[aá]\s+(?:no|nos|na|nas|claro)|aparece|possuo|disp[oõ]e|encontra-se)|"
    r"sem\s+informa[cç]|n[aã]o\s+foi\s+(?:poss[ií]vel|informad|mencionad|especificad))",
    re.IGNORECASE,
)


_QUANTITIES = ("money", "percent", "duration:", "count:", "number", "date", "daymonth")

_UF_CODES = frozenset(gz.UFS)
_UF_SUFFIX = re.compile(
    r"\b(?:TJ|TRE|TRT|TRF|MP|DPE)-?([A-Z]{2})\b|\b[A-Z][A-Za-z]{1,12}[-/]([A-Z]{2})\b"
)
_UF_DOMAIN = re.compile(r"\.([a-z]{2})\.gov\.br\b")
# a state's capital, said as "a capital" or through its court ("Comarca da Capital do TJRJ")
_CAPITALS = {
    "rio branco": "AC",
    "maceio": "AL",
    "macapa": "AP",
    "manaus": "AM",
    "salvador": "BA",
    "fortaleza": "CE",
    "brasilia": "DF",
    "vitoria": "ES",
    "goiania": "GO",
    "sao luis": "MA",
    "cuiaba": "MT",
    "campo grande": "MS",
    "belo horizonte": "MG",
    "belem": "PA",
    "joao pessoa": "PB",
    "curitiba": "PR",
    "recife": "PE",
    "teresina": "PI",
    "rio de janeiro": "RJ",
    "natal": "RN",
    "porto alegre": "RS",
    "porto velho": "RO",
    "boa vista": "RR",
    "florianopolis": "SC",
    "sao paulo": "SP",
    "aracaju": "SE",
    "palmas": "TO",
}

# an answer about the user's own case ("com renda de R$ 4.200, você fica na Faixa 2")
_PERSONAL = re.compile(r"\b(?:voce|voces|seu|sua|seus|suas|te|contigo|no seu caso)\b")

# amounts whose value is checked against the clause it belongs to ("180 dias" for the wrong case)
_AMOUNT_KINDS = ("duration:", "money", "percent", "count:")
# amounts and IDs: a value in the context, but in a clause about something else, is misplaced
_SLOT_KINDS = (*_AMOUNT_KINDS, "cnpj", "cpf", "rg")
_SLOT_IGNORE = frozenset(
    content_stems(
        "dia dias hora horas mes meses ano anos prazo valor reais "
        "cnpj cpf rg ltda s.a sa eireli me empresa nº numero inscrita inscrito"
    )
)


@dataclass(frozen=True, slots=True)
class Slot:
    """A context amount and the clause it sits in (digitised)."""

    keys: frozenset[str]
    kinds: frozenset[str]
    clause: str

    @property
    def stems(self) -> frozenset[str]:
        """The clause's content stems (computed when asked: few slots are ever compared)."""
        return _slot_stems(self.clause)


class ContextIndex:
    """What the judge knows of a context. ``complete`` is false when only the clauses holding a
    probe of the answer's mentions were read (:func:`_probed_index`): the keys found are then
    all in the context, but a key, kind or amount not found may still be there. Words and the
    folded text are computed when first asked for (the cross-check never asks)."""

    def __init__(
        self,
        chunks: tuple[str, ...],
        chunk_keys: tuple[frozenset[str], ...],
        slots: tuple[Slot, ...],
        complete: bool,
    ) -> None:
        self.chunks = chunks
        self.chunk_keys = chunk_keys
        self.keys: frozenset[str] = frozenset().union(*chunk_keys)
        self.kinds = frozenset(k.partition("|")[0] for k in self.keys)
        self.slots = slots
        self.complete = complete
        self.given: frozenset[str] = frozenset()  # the query's keys: the user's own values
        self.sources: frozenset[str] = self.keys  # what a derived value may be computed from
        self.personal = False  # the answer speaks to the user about their case
        self.cues = ""  # the folded answer: "em dobro" said once, a result later
        self.answer: frozenset[str] = frozenset()  # the answer's own keys (a "total" adds them)

    def attach(self, given: frozenset[str], answer: frozenset[str], text: str = "") -> ContextIndex:
        """Add the query's keys (values the user gave ground the answer's), the answer's
        (operands of a derived value) and the answer's folded ``text``."""
        self.given = given
        self.answer = answer
        self.sources = self.keys | given | answer
        self.cues = fold(text)
        self.personal = _PERSONAL.search(self.cues) is not None
        return self

    @cached_property
    def chunk_stems(self) -> tuple[frozenset[str], ...]:
        return tuple(_chunk_stems(chunk) for chunk in self.chunks)

    @cached_property
    def stems(self) -> frozenset[str]:
        return frozenset().union(*self.chunk_stems)

    @cached_property
    def folded(self) -> str:
        return fold(" \n ".join(self.chunks))

    @cached_property
    def implied_ufs(self) -> frozenset[str]:
        """States the context names only through a body or a court: "Procon-PE", "TJRJ",
        "Detran/SP", "procon.sp.gov.br"."""
        text = " \n ".join(self.chunks)
        found = {m.group(1) or m.group(2) for m in _UF_SUFFIX.finditer(text)}
        found |= {m.group(1).upper() for m in _UF_DOMAIN.finditer(text)}
        return frozenset(found & _UF_CODES)


_T = TypeVar("_T")


class _Incomplete(Exception):
    """A partial index cannot decide this mention: read the whole context."""


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


# Chunks whose clauses, tokens, stems and mentions stay cached: a RAG app retrieves the same
# chunks again and again. About 17 KB of Python objects per distinct chunk (measured with
# tracemalloc on bench/corpus.py triples), so about 70 MB when full; 8,192 of each took a worker
# at 400 in flight to 288 MiB (docs/benchmarks.md, "Memory").
CHUNK_CACHE = 4096

_CLAUSE_END = re.compile(r"[;:]\s+|\.\s+(?=[A-ZÁÉÍÓÚÂÊÔÃÕÇ])")


@dataclass(frozen=True, slots=True)
class _ChunkText:
    """A chunk cut into clauses, with the probe tokens of each clause."""

    clauses: tuple[str, ...]
    tokens: tuple[frozenset[bytes], ...]


@lru_cache(maxsize=CHUNK_CACHE)
def _chunk_text(chunk: str) -> _ChunkText:
    """Cached: a RAG app retrieves the same chunks again and again."""
    bounds = [0] + [m.end() for m in _CLAUSE_END.finditer(chunk)] + [len(chunk)]
    pairs = [(a, b) for a, b in itertools.pairwise(bounds) if b > a]
    folded = _fold_same_length(chunk)
    return _ChunkText(
        tuple(chunk[a:b] for a, b in pairs), tuple(tokens(folded[a:b]) for a, b in pairs)
    )


@lru_cache(maxsize=CHUNK_CACHE)
def _chunk_stems(chunk: str) -> frozenset[str]:
    return frozenset(content_stems(chunk))


@dataclass(frozen=True, slots=True)
class _ChunkIndex:
    keys: frozenset[str]
    slots: tuple[Slot, ...]


@lru_cache(maxsize=CHUNK_CACHE)
def _index_clauses(clauses: tuple[str, ...], detectors: tuple[Detector, ...]) -> _ChunkIndex:
    """The mentions ``detectors`` find in some clauses of a chunk (one pass over all of them),
    and their amounts with the words of the clause each sits in. Cached: a RAG app retrieves the
    same chunks again and again."""
    digitised = [digitise(c) for c in clauses]
    keys: set[str] = set()
    slots: list[Slot] = []
    for i, mentions in enumerate(_mentions_per_text(digitised, detectors)):
        for mention in mentions:
            keys |= mention.keys | mention.extra
            if any(k.startswith(_SLOT_KINDS) for k in mention.keys):
                slots.append(Slot(mention.keys, mention.kinds, digitised[i]))
    return _ChunkIndex(frozenset(keys), tuple(slots))


def index_context(
    chunks: Sequence[str], detectors: tuple[Detector, ...] = DETECTORS
) -> ContextIndex:
    """The context's mentions (those ``detectors`` find: by default every kind), words and
    amounts. :func:`judge_answer` and :func:`check_texts` given the chunks themselves index only
    what the answer's mentions need."""
    return _build(chunks, detectors, None, complete=True)


def _probed_index(
    chunks: Sequence[str], detectors: tuple[Detector, ...], mentions: Sequence[Mention]
) -> tuple[ContextIndex, frozenset[bytes] | None]:
    """An index of the clauses that hold a probe of one of ``mentions``' keys (the whole context
    when one of the keys has no probes), and the probes."""
    wanted: set[bytes] = set()
    for mention in mentions:
        for key in mention.keys:
            found = probes(key)
            if found is None:
                return _build(chunks, detectors, None, complete=True), None
            wanted |= found
    probed = frozenset(wanted)
    return _build(chunks, detectors, probed, complete=False), probed


def _build(
    chunks: Sequence[str],
    detectors: tuple[Detector, ...],
    wanted: frozenset[bytes] | None,
    complete: bool,
) -> ContextIndex:
    """Index the clauses that hold one of the ``wanted`` tokens (all when ``None``); when
    ``complete``, the others too, apart (so that the probed ones come from the cache)."""
    chunk_keys: list[frozenset[str]] = []
    slots: list[Slot] = []
    for chunk in chunks:
        text = _chunk_text(chunk)
        if wanted is None:
            groups = [text.clauses]
        else:
            hit = [not wanted.isdisjoint(t) for t in text.tokens]
            groups = [tuple(c for c, h in zip(text.clauses, hit, strict=True) if h)]
            if complete:
                groups.append(tuple(c for c, h in zip(text.clauses, hit, strict=True) if not h))
        keys: frozenset[str] = frozenset()
        for clauses in groups:
            if detectors and clauses:
                indexed = _index_clauses(clauses, detectors)
                keys |= indexed.keys
                slots.extend(indexed.slots)
        chunk_keys.append(keys)
    return ContextIndex(tuple(chunks), tuple(chunk_keys), tuple(slots), complete or not detectors)


def _slot_stems(text: str) -> frozenset[str]:
    """A clause's words for telling slots apart: content stems, but numbers, units, "prazo",
    "valor" and the words around IDs."""
    return _stems_without(text, _SLOT_IGNORE)


def _wrong_slot(mention: Mention, claim: str, ctx: ContextIndex) -> bool:
    """The value is in the context, but for something else: the claim's (``claim``, digitised)
    words sit with another value of the same kind ("parto ... 180 dias" where the context says
    "300 dias para partos ...; 180 dias para os demais casos")."""
    if not claim or not ctx.slots or not any(k.startswith(_SLOT_KINDS) for k in mention.keys):
        return False
    if _computes(claim):
        return False  # a computation takes its operands from anywhere
    claim_stems = _slot_stems(claim)
    if not claim_stems:
        return False
    keys, kinds = mention.keys, mention.kinds
    holding = [s for s in ctx.slots if s.keys & keys]
    if holding and not any(_topic_stems(s.clause) for s in holding):
        return False  # "Faixa 1: até R$ 2.850;": the clause holding it says nothing to compare
    same = [len(claim_stems & s.stems) for s in holding]
    if not same or max(same):
        return False
    if not ctx.complete:
        raise _Incomplete  # the amounts of the same kind that were not read may decide
    return any(claim_stems & s.stems for s in ctx.slots if s.kinds & kinds and not s.keys & keys)


def _same_number(mention: Mention, ctx: ContextIndex) -> bool:
    """A long number (a telephone, a protocol) written with or without its area code or
    prefix: the last eight digits of one end the other."""
    for key in mention.keys:
        kind, _, digits = key.partition("|")
        if kind != "number" or len(digits) < 8:
            continue
        for other in ctx.keys:
            theirs = other.partition("|")[2] if other.startswith("number|") else ""
            if len(theirs) >= 8 and (digits.endswith(theirs) or theirs.endswith(digits)):
                return True
    return False


def _other_state(mention: Mention, ctx: ContextIndex) -> bool:
    """ "Procon-SP" where the context names only the Procon-PR: the right body, another state's."""
    for key in mention.extra:
        if key.startswith("bodyuf|") and key not in ctx.keys:
            body = key.partition("|")[2].partition(":")[0]
            if any(k.startswith(f"bodyuf|{body}:") for k in ctx.keys):
                return True
    return False


def _implied_place(mention: Mention, ctx: ContextIndex) -> bool:
    """A state the context implies (:attr:`ContextIndex.implied_ufs`), or its capital when the
    context speaks of "a capital"."""
    for key in mention.keys:
        kind, _, value = key.partition("|")
        if kind == "uf" and value in ctx.implied_ufs:
            return True
        if kind == "city" and _CAPITALS.get(value) in ctx.implied_ufs and "capital" in ctx.folded:
            return True
    return False


def _same_slot(mention: Mention, claim: str, ctx: ContextIndex) -> bool:
    """Does the context give a value of this kind *for the same thing*? For amounts: a context
    amount of the same kind whose clause shares a content word with the claim, or a claim that
    computes (a wrong result). Other kinds (another law, article, CPF, city) always do."""
    if not any(k.startswith(_AMOUNT_KINDS) for k in mention.keys):
        return True  # another CPF, law, article or city always speaks of the same thing
    if _computes(claim):
        return True
    if not _topic_stems(claim):
        return True  # "São 30 dias.": nothing but the value, about what was asked
    return _topic_overlap(mention, claim, ctx)


def _topic_overlap(mention: Mention, claim: str, ctx: ContextIndex) -> bool:
    """A context amount of the mention's kind sits in a clause sharing a word with the claim."""
    claim_stems = _topic_stems(claim)
    kinds = mention.kinds
    return any(claim_stems & _topic_stems(s.clause) for s in ctx.slots if s.kinds & kinds)


_UNIT_WORDS = frozenset(content_stems("dia dias hora horas mes meses ano anos reais real"))


@lru_cache(maxsize=CHUNK_CACHE)
def _computes(claim: str) -> bool:
    """The claim shows a computation ("ou seja", "total", "×"…)."""
    return CUES.search(fold(claim)) is not None


def _topic_stems(text: str) -> frozenset[str]:
    """What an amount is about: the content stems of its clause, but numbers and unit words."""
    return _stems_without(text, _UNIT_WORDS)


@lru_cache(maxsize=CHUNK_CACHE)
def _stems_without(text: str, ignore: frozenset[str]) -> frozenset[str]:
    return frozenset(s for s in content_stems(text) if not s.isdigit()) - ignore


def _grounded_by_parts(mention: Mention, ctx: ContextIndex) -> bool:
    """``15/03/2024`` where the context says "de 15 de março a 31 de maio de 2024"."""
    for key in mention.keys:
        kind, _, value = key.partition("|")
        if kind == "date":
            year, month, day = value.split("-")
            if f"daymonth_free|{month}-{day}" in ctx.keys and f"year|{year}" in ctx.keys:
                return True
    return False


def _check(
    mention: Mention, ctx: ContextIndex, claim: str = "", own: frozenset[str] = frozenset()
) -> Check:
    """``mention`` of the digitised ``claim`` (whose mentions have the keys ``own``) checked
    against the context."""
    if mention.keys & ctx.keys or _grounded_by_parts(mention, ctx):
        for why, conflict in (
            ("year", _year_conflict),
            ("other_state", _other_state),
        ):
            if conflict(mention, ctx):
                return Check(mention, "contradicted", "conflicts_with_context", why=why)
        if _wrong_slot(mention, claim, ctx):
            return Check(mention, "contradicted", "conflicts_with_context", why="wrong_slot")
        return Check(mention, "grounded", None)
    if mention.keys & ctx.given:  # a value the user gave in the query ...
        if not mention.contradictable:
            return Check(mention, "grounded", None)
        if not ctx.complete:
            raise _Incomplete
        if ctx.personal or not (mention.kinds & ctx.kinds and _topic_overlap(mention, claim, ctx)):
            # ... when the answer speaks of the user's case, or the context says nothing else
            return Check(mention, "grounded", None)
    if not mention.contradictable and fold(mention.text) in ctx.folded:
        return Check(mention, "grounded", None)  # named in a way the detectors did not catch
    if _implied_place(mention, ctx):
        return Check(mention, "grounded", None)  # "Procon-PE" names Pernambuco
    if _same_number(mention, ctx):
        return Check(mention, "grounded", None)  # "(91) 3201-2700" and "91 3201 2700"
    quantity = any(k.startswith(_QUANTITIES) for k in mention.keys)
    if (mention.contradictable or quantity) and not ctx.complete:
        raise _Incomplete  # another value of its kind, or an operand, may be in a clause not read
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
    if mention.contradictable and mention.kinds & ctx.kinds and _same_slot(mention, claim, ctx):
        status, finding, why = "contradicted", "conflicts_with_context", "same_slot"
    else:
        status, finding = "invented", "absent_from_context"
        why = "kind_elsewhere" if mention.kinds & ctx.kinds else "kind_absent"
    if mention.keys & ctx.given:
        why = "given"
    if mention.invalid:
        finding = "invalid_check_digit"
    nearest = _nearest(mention, ctx) if quantity else None
    return Check(mention, status, finding, why=why, nearest=nearest)


def _nearest(mention: Mention, ctx: ContextIndex) -> float | None:
    """How near the nearest context value of the mention's kind is: ``exp(-|ln(a/b)|)``, 1 for
    equal values, towards 0 for far ones (a computed total is usually far from its operands, a
    mistyped value near the right one). None when the context has no number of its kind."""
    best: float | None = None
    for key in mention.keys:
        kind, _, raw = key.partition("|")
        mine = _number(raw)
        if mine is None or mine <= 0:
            continue
        for other in ctx.keys:
            if not other.startswith(kind + "|") or other == key:
                continue
            theirs = _number(other.partition("|")[2])
            if theirs is None or theirs <= 0:
                continue
            near = min(mine, theirs) / max(mine, theirs)
            if best is None or near > best:
                best = near
    return best


def _number(raw: str) -> float | None:
    try:
        return float(raw)
    except ValueError:
        return None


def _year_conflict(mention: Mention, ctx: ContextIndex) -> bool:
    """Same law number, another year (``Lei 8.078/1991`` where the context has ``/1990``)."""
    years = {k for k in mention.extra if k.startswith("lawyear|")}
    if not years or years & ctx.keys:
        return False
    laws = {k.partition("|")[2].partition("/")[0] for k in years}
    return any(
        k.startswith("lawyear|") and k.partition("|")[2].partition("/")[0] in laws for k in ctx.keys
    )


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
            and any(k.startswith(_QUANTITIES) for k in c.mention.keys)
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
    *_QUANTITIES,
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
    ``work`` finds that one cannot decide (:class:`_Incomplete`)."""
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
    except _Incomplete:
        complete = _build(chunks, detectors, wanted, complete=True)  # cannot raise again
        return work(complete.attach(given, answer, text))


_SEPARATOR = "\x1f"  # neither a word character nor a space: no pattern runs across it


def _mentions_per_text(
    digitised: Sequence[str], detectors: tuple[Detector, ...] = DETECTORS
) -> list[list[Mention]]:
    """The mentions of each text, found in one pass over all of them."""
    starts = []
    offset = 0
    for d in digitised:
        starts.append(offset)
        offset += len(d) + 1
    per_text: list[list[Mention]] = [[] for _ in digitised]
    for mention in find_mentions(_SEPARATOR.join(digitised), detectors):
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
            judge_claim(sentence, index, mentions, digits)
            for sentence, digits, mentions in zip(sentences, digitised, per_sentence, strict=True)
        ]

    return AnswerJudgement(_with_context(ctx, per_sentence, query, answer, claims), non_claims)
