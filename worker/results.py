"""``veredito results``: consume verdicts and append them to a JSONL file.

Messages are taken in batches; a batch is written, flushed and fsynced, and only then acked.  Ids
already in the file (from an earlier run, or a redelivery after a crash) are acked without being
written again.  A torn last line left by a crash mid-write is cut off at start: its message was
never acked and comes back.  A lost broker connection (RabbitMQ restarting) is retried with
backoff for as long as it takes; SIGTERM writes and acks what was taken, then exits 0.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import stat
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from kombu import Connection, Message
from kombu.exceptions import OperationalError

from veredito.producer import topology

__all__ = ["ResultsSink", "collect"]

log = logging.getLogger(__name__)


def _known_ids(path: Path) -> set[str]:
    """Ids of the verdicts already in ``path``; a torn last line is truncated away."""
    seen: set[str] = set()
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
            seen.add(value["id"])
    return seen


@dataclass
class ResultsSink:
    out: IO[bytes]
    seen: set[str]
    durable: bool
    written: int = 0
    duplicates: int = 0

    def write_batch(self, batch: list[Message]) -> None:
        for message in batch:
            body: bytes = message.body if isinstance(message.body, bytes) else message.body.encode()
            try:
                verdict_id = json.loads(body).get("id")
            except (ValueError, AttributeError):
                verdict_id = None
            if verdict_id is not None and verdict_id in self.seen:
                self.duplicates += 1
                continue
            self.out.write(body.rstrip(b"\n") + b"\n")
            if verdict_id is not None:
                self.seen.add(verdict_id)
            self.written += 1
        self.out.flush()
        if self.durable:
            os.fsync(self.out.fileno())
        for message in batch:
            message.ack()


def collect(
    broker_url: str,
    out_path: str | None,
    *,
    limit: int | None = None,
    idle_timeout: float | None = None,
    batch_size: int = 200,
    progress: Any = None,
    transport_options: dict[str, Any] | None = None,
    transport: str | None = None,
) -> ResultsSink:
    """Consume until ``limit`` verdicts are written, ``idle_timeout`` passes idle, or a signal."""
    if out_path is None or out_path == "-":
        sink = ResultsSink(sys.stdout.buffer, set(), durable=False)
    else:
        path = Path(out_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        out = path.open("ab")
        regular = stat.S_ISREG(os.fstat(out.fileno()).st_mode)  # not /dev/null, not a FIFO
        sink = ResultsSink(out, _known_ids(path) if regular else set(), durable=regular)

    stopping = False

    def stop(signum: int, _frame: Any) -> None:
        nonlocal stopping
        stopping = True

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    pending: list[Message] = []
    state = {"last": time.monotonic(), "done": False}

    def on_message(_body: Any, message: Message) -> None:
        pending.append(message)

    def flush() -> None:
        if pending:
            before = sink.written
            sink.write_batch(pending)
            if progress is not None:
                progress.update(sink.written - before)
            pending.clear()
            state["last"] = time.monotonic()

    def consume(conn: Connection) -> None:
        queue = topology.verdicts_queue(broker_url)
        with conn.Consumer(
            queue, callbacks=[on_message], accept=["json"], prefetch_count=batch_size
        ):
            while not stopping:
                try:
                    conn.drain_events(timeout=0.2)
                    if len(pending) < batch_size:
                        continue
                except TimeoutError:  # socket.timeout is TimeoutError
                    pass
                flush()
                if limit is not None and sink.written >= limit:
                    break
                if idle_timeout is not None and time.monotonic() - state["last"] > idle_timeout:
                    break
            flush()  # SIGTERM: what was taken is written, fsynced and acked before exit
        state["done"] = True

    delay = 0.5
    try:
        while not stopping and not state["done"]:
            conn = Connection(
                broker_url, transport=transport, transport_options=transport_options or {}
            )
            try:
                conn.ensure_connection(max_retries=1)
                consume(conn)
                delay = 0.5
            except (
                *conn.connection_errors,
                *conn.channel_errors,
                OperationalError,
                OSError,
            ) as exc:
                # Messages taken on the lost channel cannot be acked: they come again (and
                # those already written are skipped as repeats).
                pending.clear()
                log.warning(
                    "lost the broker (%s); reconnecting in %.1f s", type(exc).__name__, delay
                )
                deadline = time.monotonic() + delay
                while not stopping and time.monotonic() < deadline:
                    time.sleep(0.1)
                delay = min(delay * 2, 10.0)
            finally:
                with contextlib.suppress(Exception):
                    conn.release()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if sink.out is not sys.stdout.buffer:
            sink.out.close()
    return sink
