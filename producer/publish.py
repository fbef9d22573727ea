"""Publishing triples as ``veredito.evaluate`` tasks, with broker confirms.

The producer does not import the worker: it writes Celery's task message protocol (version 2)
itself, with the JSON serializer.  The task's keyword arguments are the envelope::

    {"triple": <the input object, or null>, "source": {"input": "file.jsonl", "line": 7},
     "produced_at": <unix seconds>, "error": <why the line is not JSON, only then>,
     "raw": <the line's text, only then>}

Invalid inputs are published too: the worker turns them into ``rejected`` verdicts, so that
nothing a producer is given disappears without a verdict saying why.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from kombu import Connection, Producer

from veredito.producer import topology
from veredito.producer.mapping import Mapper
from veredito.producer.reader import InputLine
from veredito.producer.sampling import Dedup, sampled_in
from veredito.producer.triple import InvalidTriple, Limits, parse_triple

__all__ = ["ProduceReport", "TriplePublisher", "produce"]

log = logging.getLogger(__name__)

# A broker restart (RabbitMQ takes 5-20 s) is waited out: up to about 90 s of reconnecting.
RETRY_POLICY = {"max_retries": 30, "interval_start": 0.2, "interval_step": 0.5, "interval_max": 3}


@dataclass
class ProduceReport:
    accepted: int = 0
    rejected: int = 0
    problems: list[str] = field(default_factory=list)  # the first few rejection reasons
    last_line: int = 0  # the last input line published (and confirmed)
    sampled_out: int = 0  # valid triples left out by --sample
    duplicates: int = 0  # valid triples dropped by --dedup-window
    stopped_by: int | None = None  # the signal that stopped it before the end of its input

    def add_rejection(self, reason: str, keep: int = 20) -> None:
        self.rejected += 1
        if len(self.problems) < keep:
            self.problems.append(reason)


def task_message(
    kwargs: dict[str, Any], task_id: str, label: str
) -> tuple[list[Any], dict[str, Any]]:
    """Body and headers of a Celery protocol-2 task message.  ``argsrepr`` never holds user text."""
    headers = {
        "lang": "py",
        "task": topology.TASK_NAME,
        "id": task_id,
        "shadow": None,
        "eta": None,
        "expires": None,
        "group": None,
        "group_index": None,
        "retries": 0,
        "timelimit": [None, None],
        "root_id": task_id,
        "parent_id": None,
        "argsrepr": "()",
        "kwargsrepr": label,
        "origin": "veredito-producer",
        "ignore_result": True,
    }
    body = [[], kwargs, {"callbacks": None, "errbacks": None, "chain": None, "chord": None}]
    return body, headers


class TriplePublisher:
    """Publishes triples to ``veredito.triples``; each publish waits for the broker's confirm."""

    def __init__(
        self,
        broker_url: str,
        limits: Limits = Limits(),
        *,
        sample_rate: float = 1.0,
        dedup: Dedup | None = None,
        mapper: Mapper | None = None,
    ) -> None:
        self.broker_url = broker_url
        self.mapper = mapper
        self.limits = limits
        self.sample_rate = sample_rate
        self.dedup = dedup
        self.skipped: Counter[str] = Counter()
        self._connection: Connection | None = None
        self._producer: Producer | None = None

    def __enter__(self) -> TriplePublisher:
        conn = Connection(self.broker_url, transport_options={"confirm_publish": True})
        conn.ensure_connection(max_retries=3)
        channel = conn.channel()
        for queue in (
            topology.triples_queue(self.broker_url),
            topology.dead_queue(self.broker_url),
            topology.verdicts_queue(self.broker_url),
        ):
            queue(channel).declare()
        self._connection = conn
        self._producer = Producer(channel, exchange=topology.triples_exchange(), serializer="json")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._connection is not None:
            self._connection.release()
        self._connection = self._producer = None

    def publish(self, envelope: dict[str, Any], label: str, task_id: str | None = None) -> None:
        """Publish and wait for the broker's confirm. ``task_id``: the message's id when the
        caller needs a repeat to carry the same one (``--follow``), else a new uuid4."""
        if self._producer is None or self._connection is None:
            raise RuntimeError("use TriplePublisher as a context manager")
        envelope.setdefault("produced_at", time.time())
        task_id = task_id or str(uuid.uuid4())
        body, headers = task_message(envelope, task_id, label)
        publish = self._connection.ensure(self._producer, self._producer.publish, **RETRY_POLICY)
        publish(
            body,
            routing_key=topology.TRIPLES_QUEUE,
            headers=headers,
            correlation_id=task_id,
            delivery_mode=2,
        )

    def publish_object(
        self, value: Any, source: dict[str, Any] | None = None, task_id: str | None = None
    ) -> Exception | None:
        """Publish one input object; return the contract violation if it has one (still sent).
        A triple left out by sampling or dedup is counted in ``skipped`` and not sent."""
        if self.mapper is not None:
            value = self.mapper.apply(value)
        try:
            triple = parse_triple(value, self.limits, (source or {}).get("line"))
        except InvalidTriple as exc:
            self.publish({"triple": value, "source": source}, "rejected", task_id)
            return exc
        if not sampled_in(triple.id, self.sample_rate):
            self.skipped["sampled_out"] += 1
            return None
        if self.dedup is not None and self.dedup.seen([triple.id])[0]:
            self.skipped["duplicate"] += 1
            return None
        self.publish({"triple": triple.to_dict(), "source": source}, triple.id, task_id)
        if self.dedup is not None:
            self.dedup.remember([triple.id])  # confirmed by the broker by now
        return None

    def publish_line(
        self, item: InputLine, input_name: str, task_id: str | None = None
    ) -> Exception | str | None:
        source = {"input": input_name, "line": item.line}
        if item.error is not None:
            envelope = {"triple": None, "source": source, "error": item.error, "raw": item.text}
            self.publish(envelope, "rejected", task_id)
            return f"line {item.line}: {item.error}"
        return self.publish_object(item.value, source, task_id)


@contextmanager
def stopped_by_signals(report: ProduceReport) -> Iterator[None]:
    """SIGTERM and SIGINT set ``report.stopped_by`` instead of killing: the caller stops between
    two lines, with everything before confirmed."""

    def stop(signum: int, _frame: Any) -> None:
        report.stopped_by = signum

    previous = {}
    if threading.current_thread() is threading.main_thread():
        previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def produce(
    lines: Iterable[InputLine],
    broker_url: str,
    input_name: str,
    limits: Limits = Limits(),
    *,
    sample_rate: float = 1.0,
    dedup: Dedup | None = None,
    mapper: Mapper | None = None,
) -> ProduceReport:
    """Publish every line, each confirmed by the broker before the next is read. SIGTERM or
    SIGINT stops it between two lines: what was published is confirmed, and the report says
    the last line published (``stopped_by`` is the signal)."""
    report = ProduceReport()
    with stopped_by_signals(report):
        publisher = TriplePublisher(
            broker_url, limits, sample_rate=sample_rate, dedup=dedup, mapper=mapper
        )
        with publisher:
            for item in lines:
                if report.stopped_by is not None:
                    break
                skipped = sum(publisher.skipped.values())
                problem = publisher.publish_line(item, input_name)
                report.last_line = item.line
                if problem is not None:
                    report.add_rejection(str(problem))
                elif sum(publisher.skipped.values()) == skipped:
                    report.accepted += 1
            report.sampled_out = publisher.skipped["sampled_out"]
            report.duplicates = publisher.skipped["duplicate"]
    log.info(
        "produced %d triples",
        report.accepted + report.rejected,
        extra={"accepted": report.accepted, "rejected": report.rejected},
    )
    return report
