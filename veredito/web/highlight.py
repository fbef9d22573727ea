"""Where each claim sits in the answer, and which words of a cited chunk it shares.

Both return plain (text, tag) segments; the template escapes every piece, so nothing of the
answer, the claims or the context is ever written into the page as markup.

The work is bounded, whatever a verdict holds (an answer of 256 KiB, thousands of claims, a
chunk of 256 KiB cited by every claim): ``claim_spans`` is linear in the answer and the claims
(at most ``MAX_CANDIDATES`` places tried per claim), and ``marked_chunk`` reads a large chunk once
and then shows each claim at most ``EXCERPT_CHARS`` characters of it.
"""

from __future__ import annotations

import re
import threading
from array import array
from bisect import bisect_left
from collections import OrderedDict, defaultdict
from dataclasses import dataclass
from urllib.parse import quote

from veredito.worker.rules.text import STOPWORDS, fold

__all__ = [
    "EXCERPT_CHARS",
    "MAX_CANDIDATES",
    "ChunkWords",
    "Segment",
    "claim_spans",
    "marked_chunk",
    "path_segment",
    "segments",
]

_WORD = re.compile(r"\w+", re.UNICODE)
_WORD_CHAR = re.compile(r"\w", re.UNICODE)

MAX_CANDIDATES = 64  # places in the answer tried per claim (places already taken not counted)
_KEY_WORDS = 3  # a claim's candidate places: where the answer has its first three words
_ID = 8  # bytes of one word's id (array "Q")

EXCERPT_CHARS = 3000  # the most of a cited chunk shown under one claim (the page shows it all once)
_LEAD = 300  # of which before the first word the claim shares with the chunk


@dataclass(frozen=True, slots=True)
class Segment:
    text: str
    claim: int | None = None  # index of the claim this piece of the answer states
    marked: bool = False  # a chunk word the claim shares


def path_segment(value: str) -> str:
    """``value`` as one URL path segment: every ``/``, ``?``, ``#``, ``%`` and non-ASCII byte is
    percent-encoded (Jinja's ``urlencode`` leaves ``/`` as it is). The template filter
    ``segment``."""
    return quote(value, safe="")


def _words(text: str) -> list[tuple[str, int, int]]:
    return [(fold(m.group()), m.start(), m.end()) for m in _WORD.finditer(text)]


# -- claims in the answer ---------------------------------------------------------------------
def _root(parent: list[int], at: int) -> int:
    """Union-find with path halving: the first index from ``at`` that was not dropped."""
    while (up := parent[at]) != at:
        parent[at] = parent[up]
        at = parent[at]
    return at


class _Candidates:
    """The answer's word positions where one key (a claim's first words) starts.

    A position whose key words were taken by a located claim can never be used again (taken
    words stay taken), so it is dropped the first time it is seen; two union-find arrays then skip
    dropped positions in either direction, so each position costs one look in all."""

    __slots__ = ("after", "before", "positions")

    def __init__(self, positions: list[int]) -> None:
        self.positions = positions
        self.after = list(range(len(positions) + 1))  # after[j] == j: j is live; len: none
        self.before = list(range(len(positions) + 1))  # the same, one place up: 0 is none

    def next_live(self, j: int) -> int:
        """The first live index >= j, ``len(positions)`` when none is left."""
        return _root(self.after, j)

    def previous_live(self, j: int) -> int:
        """The last live index <= j, -1 when none is left."""
        return _root(self.before, j + 1) - 1

    def drop(self, j: int) -> None:
        self.after[j] = j + 1
        self.before[j + 1] = j


class _Answer:
    """The answer as a string of fixed-width word ids, with the words claims have taken."""

    def __init__(self, answer: str) -> None:
        words = _words(answer)
        self.bounds = [(start, end) for _, start, end in words]
        self.vocabulary: dict[str, int] = {}
        add = self.vocabulary.setdefault
        self.ids = array("Q", [add(word, len(self.vocabulary)) for word, _, _ in words]).tobytes()
        self.size = len(words)
        self.taken = bytearray(self.size)

    def needle(self, claim: str) -> bytes | None:
        """The claim's words as ids; None when it has none, or one the answer never uses."""
        ids = array("Q")
        for word, _, _ in _words(claim):
            found = self.vocabulary.get(word)
            if found is None:
                return None
            ids.append(found)
        return ids.tobytes() if ids else None

    def positions(self, width: int, keys: set[bytes]) -> dict[bytes, list[int]]:
        """Where each of ``keys`` (``width`` words each) starts in the answer: one pass."""
        found: defaultdict[bytes, list[int]] = defaultdict(list)
        ids, step = self.ids, width * _ID
        for start in range(self.size - width + 1):
            key = ids[start * _ID : start * _ID + step]
            if key in keys:
                found[key].append(start)
        return found


def _fits(answer: _Answer, needle: bytes, start: int, size: int) -> bool:
    """One candidate check: the claim's words at ``start``, none of them taken. Two C-level
    scans of the claim's length, the only per-candidate work that is not O(1)."""
    return answer.ids.startswith(needle, start * _ID) and (
        answer.taken.find(1, start, start + size) == -1
    )


def claim_spans(answer: str, claims: list[str]) -> dict[int, tuple[int, int]]:
    """(start, end) in ``answer`` of each claim found there, by the claim's sequence of words.

    Markdown, spacing and case do not matter (the rules judge strips ``**``, bullets and
    headings); a claim the judge paraphrased is not found and is listed on its own. Spans do not
    overlap: a claim whose words were already taken by an earlier one is left out.

    Each claim is looked for where the previous located claim ended: among the places where the
    answer has the claim's first three words (the first one or two for shorter claims), the
    nearest ones after that point first, alternately with the nearest ones before it. Claims in
    answer order, the usual case, are found at once (mostly at the first place tried), and in
    the same places as a scan from the start of the answer would find them; out of order, a
    repeated sentence may be given another of its places than the first one in the answer.

    At most ``MAX_CANDIDATES`` places whose words are free are tried per claim (places already
    taken are skipped, each looked at once): a claim not found within them is reported as not
    located, like a paraphrase (the page lists it on its own), even if its words are free
    further away. Only a claim whose first words recur more than that many times around the
    point where it is looked for, far out of answer order, can be missed that way.

    Work: three passes over the answer's words at most (ids, then one per key length), the
    claims' words once each, and at most ``MAX_CANDIDATES`` candidate checks (``_fits``, each a
    C-level comparison of the claim's length) per claim, whatever the answer repeats; skipping
    taken places costs each place one look in all (union-find, amortised).
    """
    text = _Answer(answer)
    wanted: list[tuple[int, bytes, bytes, int] | None] = []
    keys: defaultdict[int, set[bytes]] = defaultdict(set)
    for claim in claims:
        needle = text.needle(claim)
        if needle is None:
            wanted.append(None)
            continue
        size = len(needle) // _ID
        width = min(_KEY_WORDS, size)
        key = needle[: width * _ID]
        keys[width].add(key)
        wanted.append((size, needle, key, width))
    index = {width: text.positions(width, found) for width, found in keys.items()}
    candidates: dict[tuple[int, bytes], _Candidates] = {}

    spans: dict[int, tuple[int, int]] = {}
    cursor = 0  # the word after the last located claim
    for number, entry in enumerate(wanted):
        if entry is None:
            continue
        size, needle, key, width = entry
        places = candidates.get((width, key))
        if places is None:
            positions = index[width].get(key)
            if not positions:
                continue
            places = candidates[width, key] = _Candidates(positions)
        middle = bisect_left(places.positions, cursor)
        ahead = places.next_live(middle)
        behind = places.previous_live(middle - 1)
        end = len(places.positions)
        tries = 0
        forward = True
        while tries < MAX_CANDIDATES:
            if ahead < end and (forward or behind < 0):
                j, forward_now = ahead, True
            elif behind >= 0:
                j, forward_now = behind, False
            else:
                break
            start = places.positions[j]
            if text.taken.find(1, start, start + width) != -1:
                places.drop(j)  # its first words are taken, for good: never looked at again
            else:
                tries += 1
                forward = not forward_now
                if _fits(text, needle, start, size):
                    places.drop(j)
                    text.taken[start : start + size] = b"\x01" * size
                    spans[number] = (text.bounds[start][0], text.bounds[start + size - 1][1])
                    cursor = start + size
                    break
            if forward_now:
                ahead = places.next_live(j + 1)
            else:
                behind = places.previous_live(j - 1)
    return spans


def segments(answer: str, spans: dict[int, tuple[int, int]]) -> list[Segment]:
    """The answer cut into plain pieces and claim pieces, in order."""
    out: list[Segment] = []
    at = 0
    for index, (start, end) in sorted(spans.items(), key=lambda item: item[1]):
        if start > at:
            out.append(Segment(answer[at:start]))
        out.append(Segment(answer[start:end], claim=index))
        at = end
    if at < len(answer):
        out.append(Segment(answer[at:]))
    return out


# -- the chunk a claim cites ------------------------------------------------------------------
class ChunkWords:
    """A context chunk read once: where each of its (folded) words first occurs.

    ``marked_chunk`` makes one per large chunk and keeps the last few; a caller that marks many
    claims against the same chunks can make one per chunk itself and pass it instead."""

    __slots__ = ("first", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        first: dict[str, int] = {}
        for match in _WORD.finditer(text):
            first.setdefault(fold(match.group()), match.start())
        self.first = first

    def sharing(self, text: str) -> ChunkWords:
        """The same words for an equal string (no reading again)."""
        other = object.__new__(type(self))
        other.text, other.first = text, self.first
        return other


class _ChunkCache:
    """The ``ChunkWords`` of the chunks marked last, up to ``budget`` characters of chunk in all
    (a verdict's whole context fits: triples are 256 KiB at most by default)."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, ChunkWords] = OrderedDict()
        self._size = 0

    def get(self, chunk: str) -> ChunkWords:
        with self._lock:
            found = self._entries.pop(chunk, None)
            if found is not None:
                if found.text is not chunk:  # the same text from another page: key it by this
                    found = found.sharing(chunk)  # string, found by identity, not compared
                self._entries[chunk] = found  # the newest
                return found
        made = ChunkWords(chunk)  # outside the lock: the page's other threads go on
        with self._lock:
            if chunk not in self._entries:
                self._entries[chunk] = made
                self._size += len(chunk)
            while self._size > self.budget and len(self._entries) > 1:
                old, _ = self._entries.popitem(last=False)
                self._size -= len(old)
        return made

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._size = 0


_CHUNKS = _ChunkCache(budget=1 << 20)


def _excerpt(text: str, shared: set[str], words: ChunkWords | None) -> tuple[int, int]:
    """The part of the chunk shown: all of it when short, else ``EXCERPT_CHARS`` characters from
    a little before the first word it shares with the claim (the start when none)."""
    if len(text) <= EXCERPT_CHARS:
        return 0, len(text)
    if words is None:
        words = _CHUNKS.get(text)
    first = [words.first[w] for w in shared if w in words.first]
    start = max(0, min(first, default=0) - _LEAD)
    end = min(len(text), start + EXCERPT_CHARS)
    return max(0, end - EXCERPT_CHARS), end


def marked_chunk(chunk: str | ChunkWords, claim: str) -> list[Segment]:
    """The chunk with the words it shares with the claim marked (not stopwords, not 1-letter).

    A chunk longer than ``EXCERPT_CHARS`` is cut to that many characters around the first word
    it shares with the claim, a ``…`` segment standing for each cut (the page shows every chunk
    whole once, in its context section). The chunk is read once, not once per claim: pass a
    ``ChunkWords``, or the last chunks' are kept."""
    words = chunk if isinstance(chunk, ChunkWords) else None
    text = chunk.text if isinstance(chunk, ChunkWords) else chunk
    shared = {w for w, _, _ in _words(claim) if len(w) > 1 and w not in STOPWORDS}
    start, end = _excerpt(text, shared, words)
    found = list(_WORD.finditer(text, start, end))
    cut_start, cut_end = start, end
    # a word the cut goes through is left out, so that the excerpt starts and ends between words
    if start > 0 and found and found[0].start() == start and _WORD_CHAR.match(text, start - 1):
        start = found.pop(0).end()
    if end < len(text) and found and found[-1].end() == end and _WORD_CHAR.match(text, end):
        end = found.pop().start()
    if start >= end:  # one word longer than the excerpt: cut through it
        start, end, found = cut_start, cut_end, []

    out: list[Segment] = []
    if start > 0:
        out.append(Segment("…"))
    at = start
    for match in found:
        if fold(match.group()) in shared:
            if match.start() > at:
                out.append(Segment(text[at : match.start()]))
            out.append(Segment(match.group(), marked=True))
            at = match.end()
    if at < end:
        out.append(Segment(text[at:end]))
    if end < len(text):
        out.append(Segment("…"))
    return out
