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
"""

from __future__ import annotations

import base64
import hashlib
import logging
from typing import Any

from celery.worker.consumer.consumer import Consumer

from veredito.worker.verdict import utc_now

__all__ = ["MAX_BODY", "PoisonAwareConsumer", "poison_record"]

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
        "error": type(exc).__name__ if exc is not None else "not a task message",
        "task": str(headers.get("task")) if headers.get("task") is not None else None,
        "content_type": message.content_type,
        "content_encoding": message.content_encoding,
        "headers": {str(k): repr(v)[:500] for k, v in headers.items()},
        "body_base64": base64.b64encode(raw[:MAX_BODY]).decode("ascii"),
        "body_bytes": len(raw),
        "truncated": len(raw) > MAX_BODY,
        "failed_at": utc_now(),
    }


class PoisonAwareConsumer(Consumer):  # type: ignore[misc]
    def create_task_handler(self, *args: Any, **kwargs: Any) -> Any:
        handle = super().create_task_handler(*args, **kwargs)

        def on_task_received(message: Any) -> None:
            try:
                handle(message)
            except Exception as exc:  # whatever Celery's handling trips on: never the worker
                self._dead_letter(message, "invalid_task", exc)

        return on_task_received

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
