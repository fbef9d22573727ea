"""The worker's messages: verdicts and dead-letter records, published with confirms by
:class:`veredito.producer.confirms.Publisher` (see there for the batching)."""

from __future__ import annotations

import json
from typing import Any

from veredito.producer import topology
from veredito.producer.confirms import Outgoing, Publisher, PublishError
from veredito.worker.verdict import Verdict

__all__ = [
    "Outgoing",
    "PublishError",
    "Publisher",
    "dead_letter_message",
    "verdict_message",
    "verdict_publisher",
]


def verdict_publisher(broker_url: str) -> Publisher:
    """A publisher that declares the verdicts and dead-letter queues it publishes to."""
    return Publisher(broker_url, declare=(topology.verdicts_queue, topology.dead_queue))


def verdict_message(verdict: Verdict) -> Outgoing:
    """Persistent, ``message_id`` = triple id, routed ``verdict.<status>.<app>``."""
    return Outgoing(
        body=verdict.model_dump_json().encode("utf-8"),
        exchange=topology.VERDICTS_EXCHANGE,
        routing_key=topology.verdict_routing_key(verdict.status, verdict.app),
        message_id=verdict.id,
    )


def dead_letter_message(record: dict[str, Any]) -> Outgoing:
    return Outgoing(
        body=json.dumps(record, ensure_ascii=False, default=str).encode("utf-8"),
        exchange="",
        routing_key=topology.DEAD_QUEUE,
        message_id=str(record.get("id")),
        headers={"x-veredito-reason": str(record.get("reason"))},
    )
