"""Publishing verdicts and dead-letter records with kombu (broker confirms on RabbitMQ)."""

from __future__ import annotations

import json
from typing import Any

from kombu import Producer

from producer import topology
from worker.verdict import Verdict

__all__ = ["publish_dead_letter", "publish_verdict"]

RETRY_POLICY = {"max_retries": 10, "interval_start": 0.2, "interval_step": 0.5, "interval_max": 5}


def publish_verdict(producer: Producer, verdict: Verdict) -> None:
    """Persistent, ``message_id`` = triple id, routed ``verdict.<status>.<app>``."""
    exchange = topology.verdicts_exchange()
    producer.publish(
        verdict.model_dump_json().encode("utf-8"),
        exchange=exchange,
        declare=[exchange],  # also teaches kombu's Redis emulation that it is a topic exchange
        routing_key=topology.verdict_routing_key(verdict.status, verdict.app),
        message_id=verdict.id,
        delivery_mode=2,
        content_type="application/json",
        content_encoding="utf-8",
        retry=True,
        retry_policy=RETRY_POLICY,
    )


def publish_dead_letter(producer: Producer, record: dict[str, Any]) -> None:
    producer.publish(
        json.dumps(record, ensure_ascii=False, default=str).encode("utf-8"),
        exchange="",
        routing_key=topology.DEAD_QUEUE,
        message_id=str(record.get("id")),
        delivery_mode=2,
        content_type="application/json",
        content_encoding="utf-8",
        headers={"x-veredito-reason": str(record.get("reason"))},
        retry=True,
        retry_policy=RETRY_POLICY,
    )
