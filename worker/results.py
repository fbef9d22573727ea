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
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from kombu import Connection, Message
from kombu.exceptions import OperationalError

from veredito.producer import topology
from veredito.store import Store, StoreUnavailable, open_store

__all__ = ["ResultsSink", "collect"]

log = logging.getLogger(__name__)


@dataclass
class ResultsSink:
    store: Store
    ack_multiple: bool = False
    written: int = 0
    duplicates: int = 0
    store_outages: int = 0
    first_at: float | None = None  # monotonic: when the first message was taken
    last_at: float | None = None  # and when the last batch was acked

    @property
    def seconds(self) -> float:
        """From the first message taken to the last batch acked."""
        return (self.last_at - self.first_at) if self.first_at and self.last_at else 0.0

    def commit(self, bodies: list[bytes], stopping: Callable[[], bool]) -> tuple[int, int] | None:
        """Write ``bodies`` to the store; while the store is away, retry with backoff. None when
        ``stopping()`` turned true first. Runs in the writer thread: touches no message."""
        delay = 0.5
        while True:
            try:
                return self.store.write(bodies)
            except StoreUnavailable as exc:
                self.store_outages += 1
                log.warning("the store is away (%s); retrying in %.1f s", exc, delay)
                deadline = time.monotonic() + delay
                while time.monotonic() < deadline:
                    if stopping():
                        return None
                    time.sleep(0.1)
                delay = min(delay * 2, 10.0)

    def ack(self, batch: list[Message], counts: tuple[int, int]) -> None:
        """After the commit: count, then ack (on the consumer's thread, which owns the channel)."""
        self.written += counts[0]
        self.duplicates += counts[1]
        self.last_at = time.monotonic()
        if self.ack_multiple:  # AMQP: one frame acks the batch (all taken on this channel)
            batch[-1].ack(multiple=True)
        else:
            for message in batch:
                message.ack()


def _body(message: Message) -> bytes:
    body = message.body
    return body if isinstance(body, bytes) else body.encode()


def collect(
    broker_url: str,
    to: str | Store | None,
    *,
    limit: int | None = None,
    idle_timeout: float | None = None,
    batch_size: int = 1000,
    progress: Any = None,
    transport_options: dict[str, Any] | None = None,
    transport: str | None = None,
) -> ResultsSink:
    """Consume into ``to`` (a store or its URL; None is standard output) until ``limit``
    verdicts are written, ``idle_timeout`` passes idle, or a signal.

    Two batches are in hand at most: one being committed by the writer thread while the next
    fills; the broker's prefetch is two batches, so it stops sending when both are held."""
    store = to if to is not None and not isinstance(to, str) else open_store(to or "-")
    sink = ResultsSink(store, ack_multiple=topology.is_amqp(broker_url))

    stopping = False

    def stop(signum: int, _frame: Any) -> None:
        nonlocal stopping
        stopping = True

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    pending: list[Message] = []
    inflight: deque[tuple[Future[tuple[int, int] | None], list[Message]]] = deque()
    writer = ThreadPoolExecutor(1, thread_name_prefix="store-writer")
    state = {"last": time.monotonic(), "done": False, "halted": False}

    def on_message(message: Message) -> None:
        if sink.first_at is None:
            sink.first_at = time.monotonic()
        pending.append(message)

    def settle(block: bool) -> None:
        """Ack, in order, the batches the writer has committed."""
        while inflight and (block or inflight[0][0].done()):
            future, batch = inflight.popleft()
            counts = future.result()
            if counts is None:  # stopped while the store was away: left unacked
                state["halted"] = True
                continue
            before = sink.written
            sink.ack(batch, counts)
            if progress is not None:
                progress.update(sink.written - before)
            state["last"] = time.monotonic()

    def flush() -> None:
        if pending:
            if inflight:
                settle(block=True)
            batch = pending[:]
            pending.clear()
            bodies = [_body(m) for m in batch]
            inflight.append((writer.submit(sink.commit, bodies, lambda: stopping), batch))

    def consume(conn: Connection) -> None:
        queue = topology.verdicts_queue(broker_url)
        # on_message: the raw message, not decoded (the store reads the body itself)
        with conn.Consumer(
            queue, on_message=on_message, accept=["json"], prefetch_count=2 * batch_size
        ):
            while not stopping and not state["halted"]:
                try:
                    conn.drain_events(timeout=0.05)
                    if inflight and inflight[0][0].done():
                        settle(block=False)
                    if len(pending) < batch_size:
                        continue
                except TimeoutError:  # socket.timeout is TimeoutError
                    pass
                flush()
                settle(block=False)
                if limit is not None and sink.written >= limit:
                    break
                if (
                    idle_timeout is not None
                    and not inflight
                    and time.monotonic() - state["last"] > idle_timeout
                ):
                    break
            flush()  # SIGTERM: what was taken is committed and acked before exit
            settle(block=True)
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
                # those already stored are skipped as repeats). The writer finishes its batch.
                pending.clear()
                for future, _ in inflight:
                    future.result()
                inflight.clear()
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
        writer.shutdown(wait=True)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if to is None or isinstance(to, str):
            store.close()
    return sink
