"""Where each claim sits in the answer, and which words of a cited chunk it shares.

Both return plain (text, tag) segments; the template escapes every piece, so nothing of the
answer, the claims or the context is ever written into the page as markup.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from veredito.worker.rules.text import STOPWORDS, fold

__all__ = ["Segment", "claim_spans", "marked_chunk", "segments"]

_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True, slots=True)
class Segment:
    text: str
    claim: int | None = None  # index of the claim this piece of the answer states
    marked: bool = False  # a chunk word the claim shares


def _words(text: str) -> list[tuple[str, int, int]]:
    return [(fold(m.group()), m.start(), m.end()) for m in _WORD.finditer(text)]


def claim_spans(answer: str, claims: list[str]) -> dict[int, tuple[int, int]]:
    """(start, end) in ``answer`` of each claim found there, by the claim's sequence of words.

    Markdown, spacing and case do not matter (the rules judge strips ``**``, bullets and
    headings); a claim the judge paraphrased is not found and is listed on its own. Spans do not
    overlap: a claim whose words were already taken by an earlier one is left out."""
    words = _words(answer)
    folded = [w for w, _, _ in words]
    taken = [False] * len(words)
    spans: dict[int, tuple[int, int]] = {}
    for index, claim in enumerate(claims):
        wanted = [w for w, _, _ in _words(claim)]
        if not wanted:
            continue
        size = len(wanted)
        for start in range(len(folded) - size + 1):
            if folded[start : start + size] == wanted and not any(taken[start : start + size]):
                spans[index] = (words[start][1], words[start + size - 1][2])
                for k in range(start, start + size):
                    taken[k] = True
                break
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


def marked_chunk(chunk: str, claim: str) -> list[Segment]:
    """The chunk with the words it shares with the claim marked (not stopwords, not 1-letter)."""
    shared = {w for w, _, _ in _words(claim) if len(w) > 1 and w not in STOPWORDS}
    out: list[Segment] = []
    at = 0
    for word, start, end in _words(chunk):
        if word in shared:
            if start > at:
                out.append(Segment(chunk[at:start]))
            out.append(Segment(chunk[start:end], marked=True))
            at = end
    if at < len(chunk):
        out.append(Segment(chunk[at:]))
    return out
