"""Reading triples from JSONL files and standard input.

Every non-blank line becomes an :class:`InputLine`: either a decoded JSON value or the reason it
could not be decoded.  Nothing is skipped silently; blank lines are the only lines ignored.
"""

from __future__ import annotations

import hashlib
import io
import json
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

__all__ = [
    "MAX_NESTING",
    "InputLine",
    "nested_deeper_than",
    "open_input",
    "parse_line",
    "read_lines",
    "with_release",
]

# A line nested deeper is refused: a triple needs a few levels (metadata may use 32), and a value
# hundreds of levels deep makes the JSON encoders downstream (kombu's, at a deeper stack) raise
# RecursionError.
MAX_NESTING = 64


@dataclass(frozen=True, slots=True)
class InputLine:
    line: int
    text: str
    value: Any = None
    error: str | None = None  # set when the line is not JSON

    @property
    def fallback_id(self) -> str:
        """A deterministic id for a line that has none of its own (first 32 hex of sha256)."""
        return hashlib.sha256(self.text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def open_input(path: str) -> IO[str]:
    """Open ``path`` for reading as UTF-8 text; ``-`` is standard input.

    Bytes that are not UTF-8 never stop the reading: they become lone surrogates
    (``surrogateescape``), so the line is reported as invalid instead.
    """
    if path == "-":
        if isinstance(sys.stdin, io.TextIOWrapper):
            sys.stdin.reconfigure(encoding="utf-8", errors="surrogateescape")
        return sys.stdin
    return Path(path).open(encoding="utf-8", errors="surrogateescape")


def read_lines(stream: IO[str]) -> Iterator[InputLine]:
    for number, text in enumerate(stream, 1):
        item = parse_line(number, text)
        if item is not None:
            yield item


def with_release(lines: Iterable[InputLine], release: str) -> Iterator[InputLine]:
    """The lines with ``metadata.release`` set to ``release`` on every object (spec §18's
    ``run --release``); a line that is not an object is left for the contract to reject."""
    for item in lines:
        value = item.value
        metadata = value.get("metadata") if isinstance(value, dict) else None
        # a metadata that is not an object is left as it is: the contract rejects it
        if item.error is None and isinstance(value, dict) and isinstance(metadata, dict | None):
            metadata = {**(metadata or {}), "release": release}
            item = InputLine(item.line, item.text, {**value, "metadata": metadata})
        yield item


def parse_line(number: int, text: str) -> InputLine | None:
    """One line as a value or the reason it is not JSON; None for a blank line."""
    stripped = text.strip()
    if not stripped:
        return None
    try:
        value = json.loads(stripped)
    except (ValueError, RecursionError) as exc:
        if isinstance(exc, json.JSONDecodeError):
            reason = f"{exc.msg} at column {exc.colno}"
        elif isinstance(exc, RecursionError):
            reason = f"nested deeper than {MAX_NESTING} levels"
        else:  # a number past the integer string conversion limit
            reason = str(exc).split(";")[0]
        return InputLine(number, stripped, error=f"not valid JSON ({reason})")
    if nested_deeper_than(value, MAX_NESTING):
        reason = f"nested deeper than {MAX_NESTING} levels"
        return InputLine(number, stripped, error=f"not valid JSON ({reason})")
    return InputLine(number, stripped, value=value)


def nested_deeper_than(value: object, limit: int) -> bool:
    """Whether ``value`` has lists or objects more than ``limit`` levels deep (no recursion)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Iterable[object] = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False
