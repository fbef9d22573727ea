"""Names and declarations of the broker entities (spec §9), shared by producer, worker and sinks.

On RabbitMQ the queues are quorum queues: replicated when the cluster has several nodes, fsynced.
``veredito.triples`` is declared with a delivery limit of 5 and dead-lettering to
``veredito.dead``, as every earlier version declared it: a queue's arguments cannot change once
declared (a different declaration fails with ``PRECONDITION_FAILED``) and a policy can only lower
a quorum queue's delivery limit, so the declaration stays as it is and old and new processes
share the queue. The broker counts every return of an unacked message, a worker killed while
holding it included; the worker therefore renews a triple that comes back for the
:data:`RENEW_AT`-th time — it publishes a copy (fresh count, the returns so far in the
:data:`RETURNS_HEADER` header) and acks the original — so that worker deaths and judge outages
never reach that limit (:mod:`veredito.worker.poison`). On Redis the same names are used with
kombu's emulation (no quorum, no dead-lettering by the broker; the worker still publishes its own
dead-letter records).
"""

from __future__ import annotations

from typing import Any

from kombu import Exchange, Queue

__all__ = [
    "DEAD_QUEUE",
    "DELIVERY_LIMIT",
    "RENEW_AT",
    "RETURNS_HEADER",
    "TASK_NAME",
    "TRIPLES_QUEUE",
    "VERDICTS_EXCHANGE",
    "VERDICTS_QUEUE",
    "dead_queue",
    "delete_queues",
    "is_amqp",
    "queue_depth",
    "triples_exchange",
    "triples_queue",
    "verdict_routing_key",
    "verdicts_exchange",
    "verdicts_queue",
]

TASK_NAME = "veredito.evaluate"
TRIPLES_QUEUE = "veredito.triples"
DEAD_QUEUE = "veredito.dead"
VERDICTS_EXCHANGE = "veredito.verdicts"
VERDICTS_QUEUE = "veredito.verdicts"
DELIVERY_LIMIT = 5  # as declared since the first version: never change it (see above)
RENEW_AT = 2  # a triple delivered with x-delivery-count ≥ this is renewed (three returns spare)
RETURNS_HEADER = "x-veredito-returns"  # returns before the last renewal


def is_amqp(broker_url: str) -> bool:
    return broker_url.split("://", 1)[0].lower() in {"amqp", "amqps", "pyamqp", "librabbitmq"}


def _quorum(broker_url: str, **extra: Any) -> dict[str, Any]:
    if not is_amqp(broker_url):
        return {}
    return {"x-queue-type": "quorum", **extra}


def triples_exchange() -> Exchange:
    return Exchange(TRIPLES_QUEUE, type="topic", durable=True)


def triples_queue(broker_url: str) -> Queue:
    return Queue(
        TRIPLES_QUEUE,
        triples_exchange(),
        routing_key=TRIPLES_QUEUE,
        durable=True,
        queue_arguments=_quorum(
            broker_url,
            **{
                "x-dead-letter-exchange": "",
                "x-dead-letter-routing-key": DEAD_QUEUE,
                "x-delivery-limit": DELIVERY_LIMIT,
            },
        ),
    )


def dead_queue(broker_url: str) -> Queue:
    return Queue(
        DEAD_QUEUE,
        Exchange(""),
        routing_key=DEAD_QUEUE,
        durable=True,
        queue_arguments=_quorum(broker_url),
    )


_VERDICTS_EXCHANGE = Exchange(VERDICTS_EXCHANGE, type="topic", durable=True)


def verdicts_exchange() -> Exchange:
    return _VERDICTS_EXCHANGE


def verdicts_queue(broker_url: str) -> Queue:
    return Queue(
        VERDICTS_QUEUE,
        verdicts_exchange(),
        routing_key="#",
        durable=True,
        queue_arguments=_quorum(broker_url),
    )


def queue_depth(broker_url: str, name: str = TRIPLES_QUEUE) -> int:
    """Messages ready in one of our queues; 0 for one not declared yet."""
    from kombu import Connection

    with Connection(broker_url, connect_timeout=2) as conn:
        conn.ensure_connection(max_retries=1)
        channel = conn.channel()
        if not is_amqp(broker_url):  # kombu's Redis has no passive declare of an empty list
            return int(channel.client.llen(name))
        try:
            return int(channel.queue_declare(queue=name, passive=True).message_count)
        except conn.channel_errors:
            return 0


def delete_queues(broker_url: str) -> None:
    """Delete veredito's three queues and every message in them (tests and benchmarks only)."""
    from kombu import Connection

    with Connection(broker_url) as conn:
        channel = conn.channel()
        for name in (TRIPLES_QUEUE, VERDICTS_QUEUE, DEAD_QUEUE):
            channel.queue_delete(name)
        if not is_amqp(broker_url):  # Redis: the lists themselves (kombu skips one it has no
            # binding for, as veredito.dead on the default exchange), and held messages
            stale = [TRIPLES_QUEUE, VERDICTS_QUEUE, DEAD_QUEUE]
            stale += ["unacked", "unacked_index", "unacked_mutex"]
            for name in (TRIPLES_QUEUE, VERDICTS_QUEUE):
                stale += [f"veredito:landing:{name}", f"veredito:landing:{name}:seen"]
            stale += ["veredito:consumers", "veredito:holders", "veredito:swept"]  # leases
            channel.client.delete(*stale)


def verdict_routing_key(status: str, app: str | None) -> str:
    """``verdict.<status>.<app or "default">``; the app is made safe for a topic key."""
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in (app or "default"))
    return f"verdict.{status}.{safe[:64] or 'default'}"
