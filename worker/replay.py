"""``veredito replay``: send dead-lettered triples back to ``veredito.triples``.

Reads ``veredito.dead`` one message at a time. A worker's dead-letter record (a failed verdict's
``envelope``) and a task message RabbitMQ dead-lettered itself (delivery limit reached, or a task
that could not publish its verdict) both carry the original envelope; it is published again with
broker confirms, and only then is the dead message acked. Anything else is left in the queue.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from kombu import Connection

from veredito.producer import topology
from veredito.producer.publish import TriplePublisher

__all__ = ["ReplayReport", "replay"]

log = logging.getLogger(__name__)


@dataclass
class ReplayReport:
    replayed: int = 0
    left: int = 0
    repeats: int = 0  # records of a triple already replayed in this run (dropped)


def _read(body: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """(the original envelope, the record's triple id) of a dead message; None where absent."""
    try:
        value = json.loads(body)
    except ValueError:
        return None, None
    if isinstance(value, dict) and isinstance(value.get("envelope"), dict):
        record_id = value.get("id")  # our dead-letter record
        return value["envelope"], record_id if isinstance(record_id, str) else None
    if isinstance(value, list) and len(value) == 3 and isinstance(value[1], dict):
        return dict(value[1]), None  # a Celery task message dead-lettered by the broker
    return None, None


def replay(broker_url: str, limit: int | None = None) -> ReplayReport:
    report = ReplayReport()
    unusable = []
    replayed_ids: set[str] = set()
    with Connection(broker_url) as conn, TriplePublisher(broker_url) as publisher:
        queue = topology.dead_queue(broker_url)(conn.channel())
        queue.declare()
        while limit is None or report.replayed < limit:
            message = queue.get(no_ack=False)
            if message is None:
                break
            body = message.body if isinstance(message.body, bytes) else message.body.encode()
            envelope, record_id = _read(body)
            if envelope is None:
                unusable.append(message)
                continue
            if record_id is not None and record_id in replayed_ids:
                # a second record of one failed triple (its worker died between publishing and
                # marking it done, and it was judged again): one replay is enough
                message.ack()
                report.repeats += 1
                continue
            envelope.pop("produced_at", None)
            publisher.publish(envelope, label="replay")
            publisher.flush()  # confirmed before the dead letter goes
            message.ack()
            report.replayed += 1
            if record_id is not None:
                replayed_ids.add(record_id)
        for message in unusable:  # back in the queue, for a person to read
            message.requeue()
            report.left += 1
    log.info(
        "replayed %d dead letters",
        report.replayed,
        extra={"left": report.left, "repeats": report.repeats},
    )
    return report
