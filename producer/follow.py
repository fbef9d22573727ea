"""``veredito produce --follow PATH_OR_GLOB``: JSONL files published as they grow.

- Files are known by identity — device, inode and a hash of their first bytes — not by name, so a
  file renamed by rotation (``app.log`` → ``app.log.1``) is read to its end exactly once, whether
  or not the glob also matches its new name, and the new ``app.log`` is read from its start.
- A file that becomes shorter than what was read (``copytruncate``) is read again from its start.
  (logrotate's own caveat holds: lines written between the last read — at most ``poll`` seconds
  ago — and the truncation are in the copy only.)
- Only complete lines are published: a last line without its newline waits for it.
- A checkpoint (``--checkpoint``; JSON, written to a temporary file, fsynced, renamed) keeps each
  file's identity, byte offset and line number, and is written only after the broker confirmed
  every line before the offset. After a restart, even after SIGKILL, reading resumes there:
  nothing is lost. A line confirmed in the moment between the broker's confirm and the
  checkpoint's fsync is published again on restart, with the same message id (derived from the
  file's identity and the line's offset): the worker's done markers and the sinks drop it.
"""

from __future__ import annotations

import glob
import hashlib
import json
import logging
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from veredito.producer.mapping import Mapper
from veredito.producer.publish import ProduceReport, TriplePublisher, stopped_by_signals
from veredito.producer.reader import parse_line
from veredito.producer.sampling import Dedup
from veredito.producer.triple import Limits

__all__ = ["Checkpoint", "checkpoint_for", "follow", "follow_files"]

log = logging.getLogger(__name__)

HEAD_BYTES = 256
CHUNK = 1024 * 1024
SAVE_EVERY = 200  # lines published between two checkpoint writes while a file streams
NAMESPACE = uuid.UUID("5d1b3a1e-7f3c-4b8e-9a51-0c2f6f9e7a10")


@dataclass
class Position:
    offset: int = 0
    line: int = 0
    path: str = ""


class Checkpoint:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.files: dict[str, Position] = {}
        if path.exists():
            data = json.loads(path.read_text(encoding="utf-8"))
            for key, value in data.get("files", {}).items():
                self.files[key] = Position(value["offset"], value["line"], value.get("path", ""))

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        data = {"files": {k: vars(v) for k, v in self.files.items()}}
        with tmp.open("w", encoding="utf-8") as f:
            json.dump(data, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@dataclass
class Followed:
    inode: str  # dev:ino, what the open file is while it is followed
    key: str  # dev:ino:hash of its first line, what the checkpoint knows it by across restarts
    handle: IO[bytes]
    position: Position
    last_growth: float


def inode_of(st: os.stat_result) -> str:
    return f"{st.st_dev}:{st.st_ino}"


def identity(handle: IO[bytes]) -> str | None:
    """``dev:ino:hash of the first line`` (at most 256 bytes); None until a first line is
    complete (an append-only file's first line never changes after that)."""
    st = os.fstat(handle.fileno())
    handle.seek(0)
    head = handle.read(HEAD_BYTES)
    cut = head.find(b"\n")
    if cut < 0 and len(head) < HEAD_BYTES:
        return None
    first = head[: cut + 1] if cut >= 0 else head
    return f"{inode_of(st)}:{hashlib.sha256(first).hexdigest()[:16]}"


def follow(
    pattern: str,
    publisher: TriplePublisher,
    checkpoint: Checkpoint,
    report: ProduceReport,
    stop: Callable[[], bool],
    poll: float = 0.2,
) -> None:
    followed: dict[str, Followed] = {}
    while not stop():
        for path in sorted(glob.glob(pattern)):
            _open(path, followed, checkpoint)
        busy = False
        for item in list(followed.values()):
            busy |= _read(item, publisher, checkpoint, report, stop)
            if stop():
                break
        _forget_finished(followed, pattern)
        if not busy:
            time.sleep(poll)
    commit(publisher, checkpoint)


def _open(path: str, followed: dict[str, Followed], checkpoint: Checkpoint) -> None:
    try:
        st = os.stat(path)
    except OSError:
        return
    if inode_of(st) in followed:
        return
    try:
        handle = open(path, "rb")  # noqa: SIM115 - kept open across polls, closed in _forget
    except OSError:
        return
    key = identity(handle)
    if key is None:
        handle.close()
        return
    inode = inode_of(os.fstat(handle.fileno()))
    position = checkpoint.files.setdefault(key, Position(path=path))
    position.path = path
    followed[inode] = Followed(inode, key, handle, position, time.monotonic())
    log.info("following %s", path, extra={"offset": position.offset})


def _read(
    item: Followed,
    publisher: TriplePublisher,
    checkpoint: Checkpoint,
    report: ProduceReport,
    stop: Callable[[], bool],
) -> bool:
    position = item.position
    size = os.fstat(item.handle.fileno()).st_size
    if size < position.offset:  # copytruncate: the same file, shorter than what was read
        log.warning("%s was truncated: reading it again from its start", position.path)
        position.offset, position.line = 0, 0
        commit(publisher, checkpoint)
    if size == position.offset:
        return False
    if position.offset == 0:  # (re)started from the top: its first line may be new
        key = identity(item.handle)
        if key is None:
            return False
        if key != item.key:
            checkpoint.files.pop(item.key, None)
            checkpoint.files[key] = position
            item.key = key
    item.handle.seek(position.offset)
    data = item.handle.read(CHUNK)
    end = data.rfind(b"\n") + 1  # only complete lines
    if end == 0:
        return False
    item.last_growth = time.monotonic()
    since_save = 0
    start = 0
    while start < end and not stop():
        stop_at = data.index(b"\n", start) + 1
        raw = data[start:stop_at]
        text = raw.decode("utf-8", errors="surrogateescape")
        position.line += 1
        line = parse_line(position.line, text)
        if line is not None:
            task_id = str(uuid.uuid5(NAMESPACE, f"{item.key}:{position.offset}"))
            problem = publisher.publish_line(line, position.path, task_id)
            report.last_line = position.line
            if problem is not None:
                report.add_rejection(f"{position.path}: {problem}")
            else:
                report.accepted += 1
        position.offset += len(raw)
        start = stop_at
        since_save += 1
        if since_save >= SAVE_EVERY:
            commit(publisher, checkpoint)
            since_save = 0
    commit(publisher, checkpoint)
    return True


def commit(publisher: TriplePublisher, checkpoint: Checkpoint) -> None:
    """The offsets may be saved only once every line before them is confirmed."""
    publisher.flush()
    checkpoint.save()


def _forget_finished(followed: dict[str, Followed], pattern: str) -> None:
    """Close files that the pattern no longer names (renamed away, deleted) once read to their
    end and quiet for a few seconds (a writer may still append to a renamed file)."""
    matched: set[str] = set()
    for path in glob.glob(pattern):
        try:
            st = os.stat(path)
        except OSError:
            continue
        matched.add(inode_of(st))
    now = time.monotonic()
    for inode, item in list(followed.items()):
        size = os.fstat(item.handle.fileno()).st_size
        idle = now - item.last_growth > 5.0
        if inode not in matched and size == item.position.offset and idle:
            item.handle.close()
            del followed[inode]


def follow_files(
    pattern: str,
    broker_url: str,
    checkpoint_path: Path,
    limits: Limits = Limits(),
    *,
    sample_rate: float = 1.0,
    dedup: Dedup | None = None,
    mapper: Mapper | None = None,
    poll: float = 0.2,
    on_ready: Callable[[], None] | None = None,
) -> ProduceReport:
    """Follow until SIGTERM or SIGINT (``report.stopped_by``); the checkpoint is then saved.
    ``on_ready`` runs once the signals are handled (from then on SIGTERM stops it cleanly)."""
    report = ProduceReport()
    checkpoint = Checkpoint(checkpoint_path)
    with stopped_by_signals(report):
        if on_ready is not None:
            on_ready()
        publisher = TriplePublisher(
            broker_url, limits, sample_rate=sample_rate, dedup=dedup, mapper=mapper
        )
        with publisher:
            follow(
                pattern, publisher, checkpoint, report, lambda: report.stopped_by is not None, poll
            )
            report.sampled_out = publisher.skipped["sampled_out"]
            report.duplicates = publisher.skipped["duplicate"]
    return report


def checkpoint_for(pattern: str) -> Path:
    """The default checkpoint of a pattern: under $XDG_STATE_HOME (~/.local/state)/veredito."""
    state = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    digest = hashlib.sha256(os.path.abspath(pattern).encode()).hexdigest()[:16]
    return state / "veredito" / f"follow-{digest}.json"
