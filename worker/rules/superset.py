"""A detector pattern turned into Hyperscan expressions that find where it may *start*.

The compiled scan (:mod:`~veredito.worker.rules.scan`) runs every detector pattern at once over
the text *reversed*: a match of the reversed pattern that ends at offset ``j`` of the reversed
text is a match of the pattern that starts at ``n - j`` of the text. Hyperscan reports every end
offset, so the scan gives every position where the pattern may start, and Python's ``re`` then
confirms each one with ``pattern.match(text, start)`` — exactly what ``finditer`` would have
tried there (see :meth:`Scan.finditer <veredito.worker.rules.scan.Scan.finditer>`).

Hyperscan has no lookarounds, no ``\\b`` and no Unicode classes, so the expression is a
*superset* of the pattern, read from the pattern's own parse tree (``re._parser``):

- every character class becomes the set of Latin-1 bytes it holds; every character beyond
  Latin-1 is scanned as one stand-in byte (:data:`WIDE`), which every class that holds any such
  character also holds;
- lookarounds, ``\\b``, ``^`` and ``$`` are dropped (always true: a superset), lazy and
  possessive repeats become plain ones, groups become ``(?:...)``;
- one lookbehind is kept, because it is what makes most of them selective: one at the start
  of the pattern (``\\d(?<![\\w.,/]\\d)``: a number's first digit), read as one more character
  the reversed pattern must see after it (``k``, the number of such characters, is added back:
  the start is ``n + k - j``); the reversed text ends with a NUL, the character "before" the
  start, which no such class holds;
- a pattern that starts with a choice is split into one expression per branch, so that each
  branch keeps its own leading lookbehind (the gazetteer's prefix trees).

A superset never loses a start, so the scan cannot lose a mention; ``tests/test_rules_engines.py``
checks, on the corpus and on generated text, that every position where a pattern matches is
among the starts, and that both engines find the same mentions.
"""

from __future__ import annotations

import codecs
import importlib
import re
from collections.abc import Sequence
from typing import Any

__all__ = ["WIDE", "Unsupported", "buffer", "encode", "expressions", "forward"]

_parser: Any = importlib.import_module("re._parser")  # no type stubs: a private module
_c: Any = importlib.import_module("re._constants")

WIDE = 0x81  # the byte every character beyond Latin-1 is scanned as (U+0081 is never written)
_WIDE_CHAR = chr(WIDE)
_ALL = frozenset(range(256))
_CATEGORIES = {
    _c.CATEGORY_DIGIT: re.compile(r"\d"),
    _c.CATEGORY_NOT_DIGIT: re.compile(r"\D"),
    _c.CATEGORY_WORD: re.compile(r"\w"),
    _c.CATEGORY_NOT_WORD: re.compile(r"\W"),
    _c.CATEGORY_SPACE: re.compile(r"\s"),
    _c.CATEGORY_NOT_SPACE: re.compile(r"\S"),
}
# categories that never hold "\n" (a lookbehind's "." then holds every character they hold)
_NO_NEWLINE = frozenset({_c.CATEGORY_DIGIT, _c.CATEGORY_WORD})
_SINGLE = (_c.LITERAL, _c.NOT_LITERAL, _c.ANY, _c.IN)
_REPEATS = (_c.MAX_REPEAT, _c.MIN_REPEAT, _c.POSSESSIVE_REPEAT)
_ZERO_WIDTH = (_c.AT, _c.ASSERT, _c.ASSERT_NOT)

Item = tuple[Any, Any]  # (opcode, argument) of re's parse tree


class Unsupported(ValueError):
    """A pattern the conversion does not handle: it is then scanned by ``re`` alone."""


def _member(item: Item, ch: str, dotall: bool) -> bool:
    """Does the single-character ``item`` match ``ch`` (any character)?"""
    op, av = item
    code = ord(ch)
    if op is _c.LITERAL:
        return bool(code == av)
    if op is _c.NOT_LITERAL:
        return bool(code != av)
    if op is _c.ANY:
        return dotall or ch != "\n"
    if op is _c.IN:
        negate, hit = False, False
        for iop, iav in av:
            if iop is _c.NEGATE:
                negate = True
            elif iop is _c.LITERAL:
                hit = hit or code == iav
            elif iop is _c.RANGE:
                hit = hit or iav[0] <= code <= iav[1]
            elif iop is _c.CATEGORY and iav in _CATEGORIES:
                hit = hit or _CATEGORIES[iav].fullmatch(ch) is not None
            else:
                raise Unsupported(f"class item {iop}")
        return hit != negate
    raise Unsupported(f"not one character: {op}")


def _wide(item: Item) -> bool:
    """Can the single-character ``item`` match a character beyond Latin-1?"""
    op, av = item
    if op in (_c.NOT_LITERAL, _c.ANY):
        return True
    if op is _c.LITERAL:
        return bool(av >= 256)
    for iop, iav in av:
        if iop in (_c.NEGATE, _c.CATEGORY):
            return True
        if (iop is _c.LITERAL and iav >= 256) or (iop is _c.RANGE and iav[1] >= 256):
            return True
    return False


_BYTES: dict[tuple[str, bool], frozenset[int]] = {}


def _bytes(item: Item, dotall: bool) -> frozenset[int]:
    """The bytes the single-character ``item`` matches (:data:`WIDE` for the rest)."""
    key = (repr(item), dotall)
    found = _BYTES.get(key)
    if found is None:
        out = {b for b in range(256) if _member(item, chr(b), dotall)}
        if _wide(item):
            out.add(WIDE)
        found = _BYTES[key] = frozenset(out)
    return found


def _class(byteset: frozenset[int]) -> str:
    if not byteset:
        raise Unsupported("a class that matches nothing")
    ordered = sorted(byteset)
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        first, last = ordered[i], ordered[j]
        parts.append(f"\\x{first:02x}" if i == j else f"\\x{first:02x}-\\x{last:02x}")
        i = j + 1
    return "[" + "".join(parts) + "]"


def _emit(seq: Sequence[Item], dotall: bool, backwards: bool = True) -> str:
    """The expression of ``seq``, reversed unless not ``backwards`` (zero-width items
    dropped)."""
    parts = [_emit_item(item, dotall, backwards) for item in seq]
    return "".join(reversed(parts) if backwards else parts)


def _emit_item(item: Item, dotall: bool, backwards: bool = True) -> str:
    op, av = item
    if op in _SINGLE:
        return _class(_bytes(item, dotall))
    if op is _c.BRANCH:
        return "(?:" + "|".join(_emit(alt, dotall, backwards) for alt in av[1]) + ")"
    if op is _c.SUBPATTERN:
        _group, add, remove, body = av
        if (add | remove) & (re.IGNORECASE | re.DOTALL | re.MULTILINE):
            raise Unsupported("inline flags")
        return "(?:" + _emit(body, dotall, backwards) + ")"
    if op is _c.ATOMIC_GROUP:
        return "(?:" + _emit(av, dotall, backwards) + ")"
    if op in _REPEATS:
        low, high, body = av
        if high == _c.MAXREPEAT:
            quantifier = f"{{{low},}}"
        elif low == high:
            quantifier = f"{{{low}}}"
        else:
            quantifier = f"{{{low},{high}}}"
        return "(?:" + _emit(body, dotall, backwards) + ")" + quantifier
    if op in _ZERO_WIDTH:
        return ""
    raise Unsupported(f"{op}")


def _positions(item: Item) -> list[list[Item]] | None:
    """For an item of fixed width, the single-character items that may stand at each of its
    positions; ``None`` for any other item."""
    op, av = item
    if op in _SINGLE:
        return [[item]]
    if op is _c.BRANCH:
        alternatives = [_seq_positions(alt) for alt in av[1]]
        widths = {len(a) for a in alternatives if a is not None}
        if any(a is None for a in alternatives) or len(widths) != 1:
            return None
        width = widths.pop()
        return [[item for a in alternatives if a for item in a[i]] for i in range(width)]
    if op is _c.SUBPATTERN:
        return _seq_positions(av[3])
    if op in (_c.MAX_REPEAT, _c.MIN_REPEAT) and av[0] == av[1] <= 8:
        inner = _seq_positions(av[2])
        return None if inner is None else inner * av[0]
    return None


def _seq_positions(seq: Sequence[Item]) -> list[list[Item]] | None:
    out: list[list[Item]] = []
    for item in seq:
        found = None if item[0] in _ZERO_WIDTH else _positions(item)
        if found is None:
            return None
        out += found
    return out


def _explicit(item: Item) -> list[str] | None:
    """The characters of a small, explicit class (no categories, not negated)."""
    op, av = item
    if op is _c.LITERAL:
        return [chr(av)]
    if op is not _c.IN or not all(iop in (_c.LITERAL, _c.RANGE) for iop, _ in av):
        return None
    out: list[str] = []
    for iop, iav in av:
        if iop is _c.LITERAL:
            out.append(chr(iav))
        elif iav[1] - iav[0] > 1024:
            return None
        else:
            out += [chr(x) for x in range(iav[0], iav[1] + 1)]
    return out


def _within(items: list[Item], outer: Item, dotall: bool) -> bool:
    """Is every character any of ``items`` matches also matched by ``outer``? (False when
    unsure: the lookbehind is then dropped, which stays a superset.)"""
    for item in items:
        if item == outer:
            continue
        chars = _explicit(item)
        if chars is not None:
            if not all(_member(outer, ch, dotall) for ch in chars):
                return False
            continue
        op, av = item
        if (
            outer[0] is _c.ANY
            and not dotall
            and op is _c.IN
            and all(
                iop in (_c.LITERAL, _c.RANGE) or (iop is _c.CATEGORY and iav in _NO_NEWLINE)
                for iop, iav in av
            )
            and not _member(item, "\n", dotall)
        ):
            continue  # "\d" or "[A-Z]" within "." (anything but a new line)
        return False
    return True


def _leading_context(seq: Sequence[Item], dotall: bool) -> list[frozenset[int]] | None:
    """The characters before the start that a leading lookbehind requires, nearest last, or
    ``None``. ``\\d(?<![\\w.,/]\\d)``: the lookbehind's last character is the digit already
    matched, so it says "not after [\\w.,/]"."""
    consumed: list[list[Item]] = []
    for item in seq:
        op, av = item
        if op in (_c.ASSERT, _c.ASSERT_NOT) and av[0] == -1:
            behind = _seq_positions(av[1])
            if behind is None or len(behind) <= len(consumed):
                return None
            if any(len(p) != 1 for p in behind):
                return None
            width, taken = len(behind), len(consumed)
            if not all(
                _within(consumed[i], behind[width - taken + i][0], dotall) for i in range(taken)
            ):
                return None
            before = [_bytes(behind[j][0], dotall) for j in range(width - taken)]
            if op is _c.ASSERT:
                return before
            if len(before) != 1:
                return None  # "not (A and B)" is no class
            return [(_ALL - before[0]) | {WIDE, 0}]
        found = None if op in _ZERO_WIDTH else _positions(item)
        if found is None:
            return None
        consumed += found
    return None


def _head(seq: Sequence[Item]) -> list[Item]:
    """``seq`` with its leading (unquantified) groups spliced in."""
    out = list(seq)
    while out and out[0][0] is _c.SUBPATTERN:
        out = list(out[0][1][3]) + out[1:]
    return out


def _branches(seq: Sequence[Item]) -> list[list[Item]]:
    """``seq`` split at a leading choice, one sequence per branch."""
    head = _head(seq)
    if head and head[0][0] is _c.BRANCH:
        out: list[list[Item]] = []
        for alternative in head[0][1][1]:
            out += _branches([*alternative, *head[1:]])
        return out
    return [head]


def _without_optional_tail(seq: list[Item], state: Any) -> list[Item]:
    """``seq`` without the items at its end that may match nothing (``(?:/(?P<year>...))?``,
    lookaheads): whether the pattern can start at a position does not depend on them, and the
    automaton is smaller without them."""
    out = list(seq)
    while len(out) > 1 and _parser.SubPattern(state, [out[-1]]).getwidth()[0] == 0:
        out.pop()
    return out


def expressions(pattern: re.Pattern[str]) -> list[tuple[str, int]]:
    """Hyperscan expressions whose matches on :func:`buffer` (the text reversed) end where
    ``pattern`` may start: ``(expression, k)``, the start being ``len(text) + k - end``."""
    if pattern.flags & (re.IGNORECASE | re.MULTILINE | re.VERBOSE | re.ASCII | re.LOCALE):
        raise Unsupported("flags")
    if isinstance(pattern.pattern, bytes):
        raise Unsupported("a bytes pattern")
    dotall = bool(pattern.flags & re.DOTALL)
    tree = _parser.parse(pattern.pattern, pattern.flags)
    if tree.getwidth()[0] == 0:
        raise Unsupported("a pattern that can match nothing at all")
    out: list[tuple[str, int]] = []
    for branch in _branches(list(tree)):
        seq = _without_optional_tail(branch, tree.state)
        body = _emit(seq, dotall)
        if not body:
            raise Unsupported("a branch that can match nothing at all")
        before = _leading_context(seq, dotall)
        if before is None:
            out.append((body, 0))
        else:
            out.append((body + "".join(_class(b) for b in reversed(before)), len(before)))
    if len(out) > 1 and not any(k for _, k in out):  # no branch keeps a lookbehind: one will do
        return [(_emit(_without_optional_tail(_head(list(tree)), tree.state), dotall), 0)]
    return out


def forward(pattern: re.Pattern[str]) -> str:
    """The superset of ``pattern`` read forwards, lookarounds dropped, over :func:`encode`-d
    text (for engines that only say whether a pattern occurs: ``bench/rules_engines.py``)."""
    if pattern.flags & (re.IGNORECASE | re.MULTILINE | re.VERBOSE | re.ASCII | re.LOCALE):
        raise Unsupported("flags")
    tree = _parser.parse(pattern.pattern, pattern.flags)
    return _emit(list(tree), bool(pattern.flags & re.DOTALL), backwards=False)


def encode(text: str) -> bytes:
    """``text`` one byte a character, forwards (beyond Latin-1: :data:`WIDE`)."""
    return text.encode("latin-1", _ERRORS)


def _stand_in(error: UnicodeError) -> tuple[str, int]:
    assert isinstance(error, UnicodeEncodeError)
    return _WIDE_CHAR * (error.end - error.start), error.end


_ERRORS = "veredito-rules-scan"


def buffer(text: str) -> bytes:
    """What the scan reads: ``text`` reversed, then NUL (the "character before" its start),
    one byte a character (beyond Latin-1: :data:`WIDE`)."""
    return (text[::-1] + "\x00").encode("latin-1", _ERRORS)


codecs.register_error(_ERRORS, _stand_in)
