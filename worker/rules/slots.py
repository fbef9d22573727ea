"""Slots: a context value and the clause it sits in, for telling apart what a value is about.

Amounts and IDs are checked against their clause, not only the context as a whole: "parto ...
180 dias" where the context says "300 dias para partos ...; 180 dias para os demais casos" has
the right number in the wrong slot (:func:`wrong_slot`: contradicted), and another value of the
same kind contradicts only when its clause speaks of the same thing as the claim
(:func:`same_slot`; other kinds — another law, article, CPF, city — always do). A claim that
computes ("ou seja", "no total", "×") takes its operands from anywhere (:func:`computes`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

from veredito.worker.rules.derive import CUES
from veredito.worker.rules.mention import CHUNK_CACHE, Incomplete, Mention
from veredito.worker.rules.text import content_stems, fold

__all__ = [
    "AMOUNT_KINDS",
    "SLOT_KINDS",
    "Slot",
    "SlottedContext",
    "computes",
    "same_slot",
    "topic_overlap",
    "wrong_slot",
]

# amounts whose value is checked against the clause it belongs to ("180 dias" for the wrong case)
AMOUNT_KINDS = ("duration:", "money", "percent", "count:")
# amounts and IDs: a value in the context, but in a clause about something else, is misplaced
SLOT_KINDS = (*AMOUNT_KINDS, "cnpj", "cpf", "rg")
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


def _slot_stems(text: str) -> frozenset[str]:
    """A clause's words for telling slots apart: content stems, but numbers, units, "prazo",
    "valor" and the words around IDs."""
    return _stems_without(text, _SLOT_IGNORE)


class SlottedContext(Protocol):
    """What the slot checks read of the context
    (:class:`~veredito.worker.rules.context.ContextIndex` is one): its slots, and whether every
    clause was read."""

    @property
    def slots(self) -> Sequence[Slot]:
        """The context's amounts and IDs with their clauses."""
        ...

    @property
    def complete(self) -> bool:
        """False when only the clauses holding a probe of the answer were read."""
        ...


def wrong_slot(mention: Mention, claim: str, ctx: SlottedContext) -> bool:
    """The value is in the context, but for something else: the claim's (``claim``, digitised)
    words sit with another value of the same kind ("parto ... 180 dias" where the context says
    "300 dias para partos ...; 180 dias para os demais casos")."""
    if not claim or not ctx.slots or not any(k.startswith(SLOT_KINDS) for k in mention.keys):
        return False
    if computes(claim):
        return False  # a computation takes its operands from anywhere
    claim_stems = _slot_stems(claim)
    if not claim_stems:
        return False
    keys, kinds = mention.keys, mention.kinds
    holding = [s for s in ctx.slots if not s.keys.isdisjoint(keys)]
    if holding and not any(_topic_stems(s.clause) for s in holding):
        return False  # "Faixa 1: até R$ 2.850;": the clause holding it says nothing to compare
    if not holding or any(not claim_stems.isdisjoint(s.stems) for s in holding):
        return False  # a clause holding the value shares a word with the claim
    if not ctx.complete:
        raise Incomplete  # the amounts of the same kind that were not read may decide
    return any(
        not claim_stems.isdisjoint(s.stems)
        for s in ctx.slots
        if not s.kinds.isdisjoint(kinds) and s.keys.isdisjoint(keys)
    )


def same_slot(mention: Mention, claim: str, ctx: SlottedContext) -> bool:
    """Does the context give a value of this kind *for the same thing*? For amounts: a context
    amount of the same kind whose clause shares a content word with the claim, or a claim that
    computes (a wrong result). Other kinds (another law, article, CPF, city) always do."""
    if not any(k.startswith(AMOUNT_KINDS) for k in mention.keys):
        return True  # another CPF, law, article or city always speaks of the same thing
    if computes(claim):
        return True
    if not _topic_stems(claim):
        return True  # "São 30 dias.": nothing but the value, about what was asked
    return topic_overlap(mention, claim, ctx)


def topic_overlap(mention: Mention, claim: str, ctx: SlottedContext) -> bool:
    """A context amount of the mention's kind sits in a clause sharing a word with the claim."""
    claim_stems = _topic_stems(claim)
    kinds = mention.kinds
    return any(
        not claim_stems.isdisjoint(_topic_stems(s.clause))
        for s in ctx.slots
        if not s.kinds.isdisjoint(kinds)
    )


_UNIT_WORDS = frozenset(content_stems("dia dias hora horas mes meses ano anos reais real"))


@lru_cache(maxsize=CHUNK_CACHE)
def computes(claim: str) -> bool:
    """The claim shows a computation ("ou seja", "total", "×"…)."""
    return CUES.search(fold(claim)) is not None


def _topic_stems(text: str) -> frozenset[str]:
    """What an amount is about: the content stems of its clause, but numbers and unit words."""
    return _stems_without(text, _UNIT_WORDS)


def _stems_without(text: str, ignore: frozenset[str]) -> frozenset[str]:
    return _word_stems(text) - ignore


@lru_cache(maxsize=CHUNK_CACHE)
def _word_stems(text: str) -> frozenset[str]:
    """The content stems of a clause or claim but numbers (asked for twice of most clauses: for
    the slot and for the topic)."""
    return frozenset(s for s in content_stems(text) if not s.isdigit())
