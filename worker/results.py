"""``veredito results``: consume verdicts into a store (spec §14): JSONL, SQLite or PostgreSQL.

Messages are taken in batches; a batch is committed to the store (written and fsynced for a file,
one transaction for a database) and only then acked.  Ids already stored (from an earlier run, or
a redelivery after a crash) are acked without being written again.  A lost broker connection
(RabbitMQ restarting) is retried with backoff for as long as it takes.  A database that goes away
(PostgreSQL restarting) stops the acks: the batch in hand is retried with backoff, nothing more
is taken meanwhile, and the sink carries on once the database answers.  SIGTERM writes and acks
what was taken, then exits 0; if the database is away at that moment, the batch is left unacked
and comes back to the next sink.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import time
from dataclasses import dataclass
from typing import Any

from kombu import Connection, Message
from kombu.exceptions import OperationalError

from veredito.producer import topology
from veredito.worker.store import Store, StoreUnavailable, open_store

__all__ = ["ResultsSink", "collect"]

log = logging.getLogger(__name__)


@dataclass
class ResultsSink:
    store: Store
    written: int = 0
    duplicates: int = 0
    store_outages: int = 0

    def write_batch(self, batch: list[Message], stopping: Any = lambda: False) -> bool:
        """Commit ``batch`` to the store, then ack it; while the store is away, retry with
        backoff. False when ``stopping()`` turned true first (the batch stays unacked)."""
        bodies = [m.body if isinstance(m.body, bytes) else m.body.encode() for m in batch]
        delay = 0.5
        while True:
            try:
                written, duplicates = self.store.write(bodies)
                break
            except StoreUnavailable as exc:
                self.store_outages += 1
                log.warning("the store is away (%s); retrying in %.1f s", exc, delay)
                deadline = time.monotonic() + delay
                while time.monotonic() < deadline:
                    if stopping():
                        return False
                    time.sleep(0.1)
                delay = min(delay * 2, 10.0)
        self.written += written
        self.duplicates += duplicates
        for message in batch:
            message.ack()
        return True


def collect(
    broker_url: str,
    to: str | Store | None,
    *,
    limit: int | None = None,
    idle_timeout: float | None = None,
    batch_size: int = 200,
    progress: Any = None,
    transport_options: dict[str, Any] | None = None,
    transport: str | None = None,
) -> ResultsSink:
    """Consume into ``to`` (a store or its URL; None is standard output) until ``limit``
    verdicts are written, ``idle_timeout`` passes idle, or a signal."""
    store = to if to is not None and not isinstance(to, str) else open_store(to or "-")
    sink = ResultsSink(store)

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
            done = sink.write_batch(pending, lambda: stopping)
            if progress is not None:
                progress.update(sink.written - before)
            pending.clear()  # unacked when not done: the broker gives them to the next sink
            if done:
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
        if to is None or isinstance(to, str):
            store.close()
    return sink
