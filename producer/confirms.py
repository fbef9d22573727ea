"""Publishing with broker confirms, batched: one connection and one thread per process.

:class:`Publisher` owns one broker connection and one thread.  Callers (threads, or coroutines
through :meth:`Publisher.publish_async`) hand it messages and wait; it publishes whatever has
queued up as one batch and, on RabbitMQ, waits for the broker's confirms of the whole batch
(publisher confirms, ``multiple`` acks) before releasing the waiting callers.  So every message
is confirmed before its caller goes on (a worker acks its triple, ``serve`` answers 202), at the
cost of one round trip per batch instead of one per message.  A batch that fails (connection
lost, nack, no confirm in time) is published again on a fresh connection, up to ``attempts``
times: delivery is at least once.

The worker publishes verdicts and dead-letter records with it (:mod:`veredito.worker.publish`);
``veredito serve`` publishes triples.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from kombu import Connection, Producer, Queue

from veredito.producer import topology

__all__ = ["Outgoing", "PublishError", "Publisher"]

log = logging.getLogger(__name__)


class PublishError(ConnectionError):
    """The broker did not take the messages (after retries)."""


@dataclass(frozen=True, slots=True)
class Outgoing:
    body: bytes
    exchange: str
    routing_key: str
    message_id: str
    headers: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class _Job:
    messages: list[Outgoing]
    done: Future[None] = field(default_factory=Future)


class Publisher:
    def __init__(
        self,
        broker_url: str,
        *,
        declare: Sequence[Callable[[str], Queue]] = (),
        max_batch: int = 500,
        confirm_timeout: float = 30.0,
        attempts: int = 12,
    ) -> None:
        self.broker_url = broker_url
        self.declare = tuple(declare)
        self.confirms = topology.is_amqp(broker_url)
        self.max_batch = max_batch
        self.confirm_timeout = confirm_timeout
        self.attempts = attempts
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="veredito-publisher", daemon=True)
        self._connection: Any = None
        self._producer: Any = None
        self._next_tag = 1
        self._confirmed = 0
        self._nacked = False

    # -- called from any thread ---------------------------------------------------------------

    def start(self, require_broker: bool = True) -> Publisher:
        """Connect and start the thread. ``require_broker=False``: a broker that cannot be
        reached now is connected to on the first publish instead (``serve`` starts anyway and
        answers 503 until then)."""
        try:
            self._connect()
        except Exception as exc:
            if require_broker:
                raise
            log.warning("the broker cannot be reached yet (%s)", type(exc).__name__)
            self._disconnect()
        self._thread.start()
        return self

    def publish(self, messages: list[Outgoing], timeout: float | None = None) -> None:
        """Publish and wait until the broker has them (confirmed on RabbitMQ)."""
        if not self._thread.is_alive():
            raise PublishError("publisher is not running")
        job = _Job(messages)
        self._jobs.put(job)
        job.done.result(timeout)

    async def publish_async(self, messages: list[Outgoing]) -> None:
        """:meth:`publish` for a coroutine: waits without blocking its event loop."""
        if not self._thread.is_alive():
            raise PublishError("publisher is not running")
        job = _Job(messages)
        self._jobs.put(job)
        await asyncio.wrap_future(job.done)

    def close(self) -> None:
        if self._thread.is_alive():
            self._jobs.put(None)
            self._thread.join(timeout=30)
        self._disconnect()

    # -- the publisher thread -------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            first = self._jobs.get()
            if first is None:
                return
            batch = [first]
            count = len(first.messages)
            while count < self.max_batch:
                try:
                    job = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if job is None:
                    self._publish_batch(batch)
                    return
                batch.append(job)
                count += len(job.messages)
            self._publish_batch(batch)

    def _publish_batch(self, batch: list[_Job]) -> None:
        error: BaseException | None = None
        for attempt in range(1, self.attempts + 1):
            try:
                self._send([m for job in batch for m in job.messages])
            except Exception as exc:  # connection errors come in many types; all mean "again"
                error = exc
                log.warning(
                    "publishing %d messages failed (%s), try %d of %d",
                    sum(len(j.messages) for j in batch),
                    type(exc).__name__,
                    attempt,
                    self.attempts,
                )
                self._disconnect()
                time.sleep(min(0.2 * 2**attempt, 5.0))
                try:
                    self._connect()
                except Exception as reconnect_error:
                    error = reconnect_error
                continue
            for job in batch:
                job.done.set_result(None)
            return
        failure = PublishError(f"broker did not take the messages: {error!r}")
        for job in batch:
            job.done.set_exception(failure)

    def _send(self, messages: list[Outgoing]) -> None:
        if self._producer is None:
            self._connect()
        first_tag = self._next_tag
        for m in messages:
            self._producer.publish(
                m.body,
                exchange=m.exchange,
                routing_key=m.routing_key,
                message_id=m.message_id,
                headers=m.headers or None,
                delivery_mode=2,
                content_type="application/json",
                content_encoding="utf-8",
            )
            self._next_tag += 1
        if not self.confirms:
            return
        last_tag = self._next_tag - 1
        deadline = time.monotonic() + self.confirm_timeout
        while self._confirmed < last_tag:
            if self._nacked:
                raise PublishError("the broker refused (nack) a message")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no confirm for tags {first_tag}..{last_tag}")
            try:
                self._connection.drain_events(timeout=min(remaining, 1.0))
            except TimeoutError:
                continue
        if self._nacked:
            raise PublishError("the broker refused (nack) a message")

    def _on_ack(self, delivery_tag: int, multiple: bool) -> None:
        self._confirmed = max(self._confirmed, delivery_tag)

    def _on_nack(self, delivery_tag: int, multiple: bool) -> None:
        self._nacked = True

    def _connect(self) -> None:
        conn = Connection(self.broker_url)
        conn.ensure_connection(max_retries=3)
        channel = conn.channel()
        for make in self.declare:
            make(self.broker_url)(channel).declare()
        if self.confirms:
            channel.confirm_select()
            channel.events["basic_ack"].add(self._on_ack)
            channel.events["basic_nack"].add(self._on_nack)
        self._connection = conn
        self._producer = Producer(channel)
        self._next_tag, self._confirmed, self._nacked = 1, 0, False

    def _disconnect(self) -> None:
        conn, self._connection, self._producer = self._connection, None, None
        if conn is not None:
            try:
                conn.release()
            except Exception:  # already broken; nothing more to do
                log.debug("closing a broken connection failed", exc_info=True)
