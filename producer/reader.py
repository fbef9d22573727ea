"""Reading triples from JSONL files and standard input.

Every non-blank line becomes an :class:`InputLine`: either a decoded JSON value or the reason it
could not be decoded.  Nothing is skipped silently; blank lines are the only lines ignored.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

__all__ = ["InputLine", "open_input", "read_lines"]


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
    """Open ``path`` for reading as UTF-8 text; ``-`` is standard input."""
    if path == "-":
        return sys.stdin
    return Path(path).open(encoding="utf-8", errors="surrogateescape")


def read_lines(stream: IO[str]) -> Iterator[InputLine]:
    for number, text in enumerate(stream, 1):
        stripped = text.strip()
        if not stripped:
            continue
        try:
            value = json.loads(stripped)
        except ValueError as exc:
            if isinstance(exc, json.JSONDecodeError):
                reason = f"{exc.msg} at column {exc.colno}"
            else:
                reason = str(exc)
            yield InputLine(number, stripped, error=f"not valid JSON ({reason})")
        else:
            yield InputLine(number, stripped, value=value)
