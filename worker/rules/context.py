"""The context as the judge reads it: its clauses, the keys and slots of their mentions.

The answer drives the work (``docs/rules.md``, step 3): the answer's mentions are found first,
then only the context clauses holding one of their *probes* (:mod:`~veredito.worker.rules.probes`)
are read, by the detectors of the kinds the answer mentions (:func:`_probed_index`). Such an
index is not ``complete``: a key found is in the context, but one not found may still be, and the
judge reads the rest (:func:`_build` with ``complete=True``) before calling anything unsupported
(:class:`~veredito.worker.rules.mention.Incomplete`). Chunk texts, clauses, stems and mentions
are cached per chunk (:data:`~veredito.worker.rules.mention.CHUNK_CACHE`).
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache

from veredito.worker.rules import scan as sc
from veredito.worker.rules.detectors import DETECTORS, Detector, Mention, find_mentions
from veredito.worker.rules.mention import CHUNK_CACHE
from veredito.worker.rules.mention import fold_same_length as _fold_same_length
from veredito.worker.rules.places import implied_ufs
from veredito.worker.rules.probes import probes, tokens
from veredito.worker.rules.slots import SLOT_KINDS, Slot
from veredito.worker.rules.text import content_stems, digitise, fold

__all__ = ["CHUNK_CACHE", "ContextIndex", "index_context"]

# an answer about the user's own case ("com renda de R$ 4.200, você fica na Faixa 2")
_PERSONAL = re.compile(r"\b(?:voce|voces|seu|sua|seus|suas|te|contigo|no seu caso)\b")


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
        return implied_ufs(" \n ".join(self.chunks))


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
            if any(k.startswith(SLOT_KINDS) for k in mention.keys):
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


sc.on_engine_change(_index_clauses.cache_clear)  # the same mentions, but tests compare engines
