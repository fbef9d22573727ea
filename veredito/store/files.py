"""``file:PATH.jsonl`` (the default store): verdicts appended one per line, fsynced per batch.

Ids already in the file (from an earlier run, or a redelivery after a crash) are not written
again.  A torn last line left by a crash mid-write is cut off at open: its message was never acked
and comes back.  ``-`` is standard output (no fsync, no memory of ids).
"""

from __future__ import annotations

import json
import logging
import os
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from veredito.store.base import app_of

__all__ = ["FileStore", "known_ids"]

log = logging.getLogger(__name__)


def known_ids(path: Path) -> set[tuple[str, str]]:
    """(app, id) of the verdicts already in ``path``; a torn last line is truncated away."""
    seen: set[tuple[str, str]] = set()
    if not path.exists():
        return seen
    with path.open("rb+") as f:
        data = f.read()
        end = data.rfind(b"\n") + 1
        if end != len(data):
            log.warning("cutting a torn last line from %s", path, extra={"bytes": len(data) - end})
            f.truncate(end)
            f.flush()
            os.fsync(f.fileno())
    for line in data[:end].splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict) and isinstance(value.get("id"), str):
            seen.add((app_of(value), value["id"]))
    return seen


class FileStore:
    def __init__(self, path: str | None) -> None:
        self.url = f"file:{path or '-'}"
        self.out: IO[bytes]
        if path is None or path == "-":
            self.out, self.seen, self.durable = sys.stdout.buffer, set(), False
            return
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        self.out = target.open("ab")
        regular = stat.S_ISREG(os.fstat(self.out.fileno()).st_mode)  # not /dev/null, not a FIFO
        self.seen = known_ids(target) if regular else set()
        self.durable = regular

    def write(self, verdicts: Sequence[bytes]) -> tuple[int, int]:
        written = duplicates = 0
        for body in verdicts:
            try:
                value = json.loads(body)
            except ValueError:
                value = None
            key = None  # (app, id): one app's id is not another's
            if isinstance(value, dict) and isinstance(value.get("id"), str):
                key = (app_of(value), value["id"])
            if key is not None and key in self.seen:
                duplicates += 1
                continue
            self.out.write(body.rstrip(b"\n") + b"\n")
            if key is not None:
                self.seen.add(key)
            written += 1
        self.out.flush()
        if self.durable:
            os.fsync(self.out.fileno())
        return written, duplicates

    def close(self) -> None:
        if self.out is not sys.stdout.buffer:
            self.out.close()
