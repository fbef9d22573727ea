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

import json
import logging
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from veredito.producer import topology
from veredito.producer.confirms import Outgoing, Publisher
from veredito.producer.mapping import Mapper
from veredito.producer.reader import InputLine
from veredito.producer.sampling import Dedup, sampled_in
from veredito.producer.triple import InvalidTriple, Limits, parse_triple

__all__ = ["ProduceReport", "TriplePublisher", "produce", "stopped_by_signals", "task_outgoing"]

log = logging.getLogger(__name__)


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


def task_outgoing(envelope: dict[str, Any], label: str, task_id: str | None = None) -> Outgoing:
    """A ``veredito.evaluate`` task message for the envelope, ready for the confirm publisher."""
    task_id = task_id or str(uuid.uuid4())
    body, headers = task_message(envelope, task_id, label)
    return Outgoing(
        body=json.dumps(body, ensure_ascii=False).encode("utf-8"),
        exchange=topology.TRIPLES_QUEUE,
        routing_key=topology.TRIPLES_QUEUE,
        message_id=task_id,
        headers=headers,
    )


class TriplePublisher:
    """Publishes triples to ``veredito.triples`` in windows: :meth:`publish` queues a message,
    and every ``window`` messages — or at :meth:`flush`, and on leaving the ``with`` block — the
    window goes out as one batch and waits for the broker's confirms of all of it (one round
    trip, not one per message; :class:`veredito.producer.confirms.Publisher`). A caller that
    must know a message is confirmed (a checkpoint, an ack) calls :meth:`flush` first."""

    def __init__(
        self,
        broker_url: str,
        limits: Limits = Limits(),
        *,
        sample_rate: float = 1.0,
        dedup: Dedup | None = None,
        mapper: Mapper | None = None,
        window: int = 500,
    ) -> None:
        self.broker_url = broker_url
        self.mapper = mapper
        self.limits = limits
        self.sample_rate = sample_rate
        self.dedup = dedup
        self.window = window
        self.skipped: Counter[str] = Counter()
        self._publisher: Publisher | None = None
        self._pending: list[Outgoing] = []
        self._pending_ids: list[str] = []  # triple ids to remember for dedup once confirmed

    def __enter__(self) -> TriplePublisher:
        self._publisher = Publisher(
            self.broker_url,
            declare=(topology.triples_queue, topology.dead_queue, topology.verdicts_queue),
            attempts=30,  # a broker restart is waited out (about two minutes)
        ).start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if exc_type is None:
                self.flush()
        finally:
            if self._publisher is not None:
                self._publisher.close()
            self._publisher = None

    def publish(self, envelope: dict[str, Any], label: str, task_id: str | None = None) -> None:
        """Queue one task message; it is confirmed at the next :meth:`flush`. ``task_id``: the
        message's id when a repeat must carry the same one (``--follow``), else a new uuid4."""
        if self._publisher is None:
            raise RuntimeError("use TriplePublisher as a context manager")
        envelope.setdefault("produced_at", time.time())
        self._pending.append(task_outgoing(envelope, label, task_id))
        if len(self._pending) >= self.window:
            self.flush()

    def flush(self) -> None:
        """Publish what is queued and wait until the broker confirmed all of it."""
        if not self._pending or self._publisher is None:
            return
        self._publisher.publish(self._pending)
        if self.dedup is not None:
            self.dedup.remember(self._pending_ids)
        self._pending, self._pending_ids = [], []

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
        self._pending_ids.append(triple.id)  # remembered once confirmed
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
    idle: Callable[[], bool] | None = None,
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
            sent = 0
            for item in lines:
                if report.stopped_by is not None:
                    break
                skipped = sum(publisher.skipped.values())
                problem = publisher.publish_line(item, input_name)
                if problem is not None:
                    report.add_rejection(str(problem))
                elif sum(publisher.skipped.values()) == skipped:
                    report.accepted += 1
                sent += 1
                if sent % publisher.window == 0 or (idle is not None and idle()):
                    publisher.flush()  # a full window, or a stream with nothing more yet
                    report.last_line = item.line  # every line up to here is confirmed
                last = item.line
            publisher.flush()
            if sent:
                report.last_line = last
            report.sampled_out = publisher.skipped["sampled_out"]
            report.duplicates = publisher.skipped["duplicate"]
    log.info(
        "produced %d triples",
        report.accepted + report.rejected,
        extra={"accepted": report.accepted, "rejected": report.rejected},
    )
    return report
