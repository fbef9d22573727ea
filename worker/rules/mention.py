"""What the detectors find, and the pattern helpers the families share.

A :class:`Mention` has one or more *keys* (``"<kind>|<normalised value>"``): two surface forms of
the same fact get the same key (``Lei 8078/90`` and ``Lei nº 8.078, de 11 de setembro de 1990``
→ ``law|lei:8078``; ``CDC`` also carries ``law|lei:8078``; ``R$ 1.500,00`` and ``mil e
quinhentos reais`` → ``money|150000``). Comparison with the context works on keys only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from veredito.worker.rules.text import fold

if TYPE_CHECKING:
    from veredito.worker.rules.scan import Pattern, Scan

__all__ = [
    "CHUNK_CACHE",
    "Alternatives",
    "ContextView",
    "Incomplete",
    "Mention",
    "alternatives_source",
    "ci",
    "fold_same_length",
    "trie_pattern",
    "year",
]

# Chunks whose clauses, tokens, stems and mentions stay cached: a RAG app retrieves the same
# chunks again and again. About 17 KB of Python objects per distinct chunk (measured with
# tracemalloc on bench/corpus.py triples), so about 70 MB when full; 8,192 of each took a worker
# at 400 in flight to 288 MiB (docs/benchmarks.md, "Memory").
CHUNK_CACHE = 4096


class ContextView(Protocol):
    """What a family's checks read of the context (``laws.year_conflict``,
    ``amounts.nearest``, ``places.implied_place``…).
    :class:`~veredito.worker.rules.context.ContextIndex` is one; the families depend on this
    view, not on the module that builds it, so they stand below what assembles them
    (``context`` → ``detectors`` → the families → ``mention``)."""

    @property
    def keys(self) -> frozenset[str]:
        """Every key of the context's mentions."""
        ...

    @property
    def folded(self) -> str:
        """The context's text, folded (:func:`~veredito.worker.rules.text.fold`)."""
        ...

    @property
    def implied_ufs(self) -> frozenset[str]:
        """The states the context implies (a body's or a court's)."""
        ...


@dataclass(frozen=True, slots=True)
class Mention:
    category: str
    text: str
    keys: frozenset[str]
    start: int
    end: int
    contradictable: bool = True  # a different value of the same kind in the context contradicts
    invalid: bool = False  # e.g. a CPF/CNPJ whose check digits are wrong
    extra: frozenset[str] = frozenset()  # coarser keys a context mention also grounds

    @property
    def kinds(self) -> frozenset[str]:
        found = _KINDS.get(self.keys)
        if found is None:
            if len(_KINDS) >= 8192:  # bounded: the same few key sets come back again and again
                _KINDS.clear()
            found = _KINDS[self.keys] = frozenset(k.partition("|")[0] for k in self.keys)
        return found


_KINDS: dict[frozenset[str], frozenset[str]] = {}


def _fast_init() -> None:
    """``Mention(...)`` without the frozen dataclass's ``object.__setattr__`` per field (the
    detectors make tens of mentions a triple): the slots are set through their descriptors. Same
    signature, same object; assigning a field afterwards still raises."""
    names = [f for f in Mention.__dataclass_fields__]
    setters = [getattr(Mention, name).__set__ for name in names]
    assert names == [
        "category", "text", "keys", "start", "end", "contradictable", "invalid", "extra"
    ]  # fmt: skip
    set_category, set_text, set_keys, set_start, set_end, set_contra, set_invalid, set_extra = (
        setters
    )
    empty: frozenset[str] = frozenset()

    def __init__(
        self: Mention,
        category: str,
        text: str,
        keys: frozenset[str],
        start: int,
        end: int,
        contradictable: bool = True,
        invalid: bool = False,
        extra: frozenset[str] = empty,
    ) -> None:
        set_category(self, category)
        set_text(self, text)
        set_keys(self, keys)
        set_start(self, start)
        set_end(self, end)
        set_contra(self, contradictable)
        set_invalid(self, invalid)
        set_extra(self, extra)

    __init__.__qualname__ = "Mention.__init__"
    __init__.__doc__ = Mention.__init__.__doc__
    Mention.__init__ = __init__  # type: ignore[method-assign]


_fast_init()


class Incomplete(Exception):
    """A partial index (the clauses holding a probe) cannot decide this mention: read the whole
    context (:mod:`~veredito.worker.rules.context`)."""


def fold_same_length(text: str) -> str:
    """``fold`` that keeps every character's position (for mapping matches back)."""
    folded = fold(text)
    if len(folded) == len(text):
        return folded
    out = []
    for c in text:
        f = fold(c)
        out.append(f[0] if len(f) == 1 else (f[:1] or c))
    return "".join(out)


def ci(source: str) -> re.Pattern[str]:
    """A case- and accent-insensitive pattern, to run on ``fold``-ed text.

    ``re.IGNORECASE`` makes Python's matcher about nine times slower on these patterns; folding
    the text once and the pattern's literal letters at import is much cheaper.
    """
    out: list[str] = []
    i = 0
    while i < len(source):
        c = source[i]
        if c == "\\":
            out.append(source[i : i + 2])
            i += 2
        elif source.startswith("(?P<", i):
            j = source.index(">", i)
            out.append(source[i : j + 1])
            i = j + 1
        else:
            out.append(fold(c) if (c.isalpha() or c in "§°") else c)
            i += 1
    return re.compile("".join(out))


def year(two_or_four: str | None) -> int | None:
    """A year as a number: ``90`` is 1990, ``21`` is 2021."""
    if not two_or_four:
        return None
    value = int(two_or_four)
    if len(two_or_four) == 2:
        value += 1900 if value >= 30 else 2000
    return value


def trie_pattern(words: Iterable[str], guard: str = "") -> str:
    """One regex for many literal words, factored by common prefixes (Python's ``re`` tries the
    branches of a plain alternation one by one at every position). ``guard`` goes after the
    first character of every word (a lookbehind there keeps the fast scan for first letters)."""
    trie: dict[str, dict] = {}  # type: ignore[type-arg]
    for word in words:
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def build(node: dict[str, dict], top: bool = False) -> str:  # type: ignore[type-arg]
        branches = []
        optional = False
        for ch, child in sorted(node.items()):
            if ch == "":
                optional = True
                continue
            piece = r"[\s-]+" if ch == " " else re.escape(ch)
            branches.append(piece + (guard if top else "") + build(child))
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        if optional:
            return "(?:" + body + ")?"
        return body

    return build(trie, top=True)


_SPACES = re.compile(r"[\s-]+")


class Alternatives:
    """Many names in one prefix-factored pattern (registered with the scan); a match's
    normalised text gives its id."""

    __slots__ = ("idents", "pattern")

    def __init__(self, pattern: Pattern, idents: dict[str, str]) -> None:
        self.pattern = pattern
        self.idents = idents

    def matches(self, scan: Scan) -> Iterable[tuple[int, int, str]]:
        for m in scan.finditer(self.pattern):
            ident = self.idents.get(_SPACES.sub(" ", m.group(0)))
            if ident is not None:
                yield m.start(), m.end(), ident


def alternatives_source(
    pairs: Iterable[tuple[str, str]], boundary: str
) -> tuple[str, dict[str, str]]:
    """The pattern (as source) and the ids of many ``(name, id)`` pairs; a name must not follow
    a character of ``boundary`` nor be followed by a word character."""
    idents = {_SPACES.sub(" ", name): ident for name, ident in pairs}
    return rf"(?:{trie_pattern(idents, guard=f'(?<!{boundary}.)')})(?!\w)", idents
