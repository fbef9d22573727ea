"""Messages on ``veredito.triples`` that are not tasks we can run never stop a worker.

Celery's own handling of a bad message logs its body (user text, possibly a CPF) at CRITICAL and
then acks it (a body that does not decode: gone without a trace), rejects it (pickle or an
unknown content type, an unknown task name: gone on Redis, which has no dead-lettering), or
crashes the worker (a JSON body that is not a protocol-2 triple of args, kwargs and embed).

:class:`PoisonAwareConsumer` (Celery's ``worker_consumer``) turns each of these into a dead-letter
record on ``veredito.dead`` — the reason, the error's type, the message's headers and its body
(base64, the first MiB) — acks the message once the record is confirmed, logs one WARNING line
without any of the body, and carries on. A record that cannot be published leaves the message
to come back (requeued), so nothing is dropped while the broker is unwell.

Messages that decode but carry a wrong argument shape, an invalid triple, 50 MB of text or lone
surrogates reach the task and become ``rejected`` verdicts (:func:`.celery_app.envelope_from_call`,
:func:`veredito.producer.triple.parse_triple`).

**Returns are not faults.** RabbitMQ's quorum queue counts every return of an unacked message
(``x-delivery-count``) — a worker killed or stopped while holding it, however innocent the
triple — and dead-letters it past the queue's delivery limit (5, which cannot be raised on a
declared queue: :mod:`veredito.producer.topology`). So a triple delivered with a count of
:data:`~veredito.producer.topology.RENEW_AT` or more is renewed before anything else: a copy
with the same body and headers, the returns so far added up in ``x-veredito-returns``, is
published to the queue and confirmed, and only then is the original acked. The copy starts from
a count of 0, so worker deaths and judge outages never dead-letter a triple; a triple is
dead-lettered for its own faults only (a reply invalid twice and the like, which the task turns
into a ``failed`` verdict and a record). One guard remains for a message that kills every worker
that takes it: past ``VEREDITO_MAX_RETURNS`` returns in all (default 100; 0 never) it is
dead-lettered here as ``returned_too_often``. A copy that cannot be published (the broker is
unwell) leaves the original to be judged as it is.
"""

from __future__ import annotations

import base64
import hashlib
import logging
from typing import Any

from celery.worker.consumer.consumer import Consumer

from veredito.producer import topology
from veredito.worker.verdict import utc_now

__all__ = ["MAX_BODY", "PoisonAwareConsumer", "poison_record", "renewal", "returns_so_far"]

log = logging.getLogger(__name__)

MAX_BODY = 1024 * 1024


def poison_record(message: Any, reason: str, exc: BaseException | None) -> dict[str, Any]:
    body = message.body
    raw = body if isinstance(body, bytes) else str(body).encode("utf-8", "surrogatepass")
    headers = message.headers if isinstance(message.headers, dict) else {}
    properties = message.properties if isinstance(message.properties, dict) else {}
    ident = headers.get("id") or properties.get("message_id") or properties.get("correlation_id")
    return {
        "id": str(ident) if ident else hashlib.sha256(raw).hexdigest()[:32],
        "reason": reason,
        "error": type(exc).__name__
        if exc is not None
        else ("not a task message" if reason == "not_a_task" else reason),
        "task": str(headers.get("task")) if headers.get("task") is not None else None,
        "content_type": message.content_type,
        "content_encoding": message.content_encoding,
        "headers": {str(k): repr(v)[:500] for k, v in headers.items()},
        "body_base64": base64.b64encode(raw[:MAX_BODY]).decode("ascii"),
        "body_bytes": len(raw),
        "truncated": len(raw) > MAX_BODY,
        "failed_at": utc_now(),
    }


def _count(value: Any) -> int:
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return 0


def returns_so_far(message: Any) -> tuple[int, int]:
    """(returns counted by the broker for this delivery, returns in all including renewals)."""
    headers = message.headers if isinstance(message.headers, dict) else {}
    count = _count(headers.get("x-delivery-count"))
    return count, count + _count(headers.get(topology.RETURNS_HEADER))


def renewal(message: Any, returns: int) -> Any:
    """The copy of a returned task message that goes back to the queue with a fresh count."""
    from veredito.worker.publish import Outgoing

    headers = message.headers if isinstance(message.headers, dict) else {}
    kept = {k: v for k, v in headers.items() if k != "x-delivery-count"}
    kept[topology.RETURNS_HEADER] = returns
    delivery = message.delivery_info if isinstance(message.delivery_info, dict) else {}
    body = message.body if isinstance(message.body, bytes) else str(message.body).encode()
    return Outgoing(
        body=body,
        exchange=str(delivery.get("exchange") or topology.TRIPLES_QUEUE),
        routing_key=str(delivery.get("routing_key") or topology.TRIPLES_QUEUE),
        message_id=str(headers.get("id") or ""),
        headers=kept,
    )


class PoisonAwareConsumer(Consumer):  # type: ignore[misc]
    def create_task_handler(self, *args: Any, **kwargs: Any) -> Any:
        handle = super().create_task_handler(*args, **kwargs)

        def on_task_received(message: Any) -> None:
            try:
                if self._renewed(message):
                    return
            except Exception as error:  # never a reason to dead-letter the triple
                log.warning("renewing a returned triple failed (%s)", type(error).__name__)
            try:
                handle(message)
            except Exception as exc:  # whatever Celery's handling trips on: never the worker
                self._dead_letter(message, "invalid_task", exc)

        return on_task_received

    def _renewed(self, message: Any) -> bool:
        """A triple returned :data:`RENEW_AT` times or more goes back as a fresh copy (or, past
        ``VEREDITO_MAX_RETURNS``, to the dead letters); True when this delivery is done with."""
        count, returns = returns_so_far(message)
        if count < topology.RENEW_AT or message.content_type != "application/json":
            return False
        from veredito.worker.celery_app import publisher, settings

        limit = settings().max_returns
        if limit and returns >= limit:
            log.error(
                "a triple was returned %d times by workers that died or stopped holding it: "
                "dead-lettered as returned_too_often (VEREDITO_MAX_RETURNS=%d)",
                returns,
                limit,
            )
            self._dead_letter(message, "returned_too_often", None)
            return True
        try:
            publisher().publish([renewal(message, returns)], timeout=60)
        except Exception as error:  # the broker is unwell: judge it from this delivery
            log.warning("a returned triple could not be renewed (%s)", type(error).__name__)
            return False
        try:
            message.ack()
        except Exception as error:  # the channel is gone: the original comes back by itself
            log.warning("a renewed triple's original could not be acked (%s)", type(error).__name__)
            return True
        level = logging.WARNING if returns >= 10 else logging.INFO
        log.log(
            level,
            "a triple returned %d times by workers that died or stopped holding it was renewed",
            returns,
            extra={"returns": returns, "task_id": str(message.headers.get("id"))},
        )
        return True

    def on_decode_error(self, message: Any, exc: BaseException) -> None:
        self._dead_letter(message, "undecodable", exc)

    def on_unknown_message(self, body: Any, message: Any) -> None:
        self._dead_letter(message, "not_a_task", None)

    def on_unknown_task(self, body: Any, message: Any, exc: BaseException) -> None:
        self._dead_letter(message, "unknown_task", exc)

    def on_invalid_task(self, body: Any, message: Any, exc: BaseException) -> None:
        self._dead_letter(message, "invalid_task", exc)

    def _dead_letter(self, message: Any, reason: str, exc: BaseException | None) -> None:
        from veredito.worker.celery_app import metrics, publisher
        from veredito.worker.publish import dead_letter_message

        record = poison_record(message, reason, exc)
        try:
            publisher().publish([dead_letter_message(record)], timeout=120)
        except Exception as error:  # the broker is unwell: the message must come back
            log.error(
                "a bad message could not be dead-lettered (%s); it goes back to the queue",
                type(error).__name__,
            )
            message.reject(requeue=True)
            return
        message.ack()
        metrics().dead_letters.labels(reason).inc()
        log.warning(
            "bad message on the triples queue dead-lettered: %s (%s)",
            reason,
            record["error"],
            extra={"reason": reason, "message_id": record["id"], "bytes": record["body_bytes"]},
        )
