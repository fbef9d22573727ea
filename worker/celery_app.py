"""The Celery application and the ``veredito.evaluate`` task.

Configuration is read when Celery first needs it (``on_configure``), or handed over by
``veredito worker`` through :func:`configure`; never at import.  The task:

1. hands the envelope to the process's async runtime and waits for the verdict;
2. publishes the verdict to ``veredito.verdicts`` (and a failed one's record to ``veredito.dead``),
   waiting for the broker's confirms;
3. returns, and only then does Celery ack the triple (``acks_late``).

If publishing fails after the publisher's retries, the task raises and the triple is rejected
without requeue, so RabbitMQ dead-letters it to ``veredito.dead``: nothing is acked without a
verdict.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from celery import Celery, signals

from veredito.producer import topology
from veredito.worker.logs import configure_logging
from veredito.worker.metrics import Metrics
from veredito.worker.pipeline import Outcome
from veredito.worker.publish import Publisher, dead_letter_message, verdict_message
from veredito.worker.runtime import Runtime
from veredito.worker.settings import Settings

__all__ = ["app", "celery_config", "configure", "evaluate"]

log = logging.getLogger(__name__)

app = Celery("veredito", set_as_current=False)

_state: dict[str, Any] = {}
_lock = threading.RLock()


def celery_config(settings: Settings) -> dict[str, Any]:
    url = settings.broker_url
    amqp = topology.is_amqp(url)
    return {
        "broker_url": url,
        "broker_transport_options": {"confirm_publish": True}
        if amqp
        else {"visibility_timeout": 3600},
        "broker_connection_retry_on_startup": True,
        "broker_pool_limit": max(10, settings.concurrency // 4),
        "task_serializer": "json",
        "accept_content": ["json"],
        "result_accept_content": ["json"],
        "result_serializer": "json",
        "task_ignore_result": True,
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "task_acks_on_failure_or_timeout": False,
        "task_queues": [topology.triples_queue(url)],
        "task_default_queue": topology.TRIPLES_QUEUE,
        "task_default_exchange": topology.TRIPLES_QUEUE,
        "task_default_routing_key": topology.TRIPLES_QUEUE,
        "task_create_missing_queues": False,
        "worker_pool": "threads",
        "worker_concurrency": settings.concurrency,
        "worker_prefetch_multiplier": 2,
        "worker_send_task_events": False,
        "worker_hijack_root_logger": False,
    }


def configure(settings: Settings) -> None:
    """Use these settings for this process (``veredito worker`` calls this before starting)."""
    _state["settings"] = settings
    app.conf.update(celery_config(settings))


@app.on_configure.connect
def _configure_from_environment(sender: Celery, **_: Any) -> None:
    if "settings" not in _state:
        settings = Settings()
        _state["settings"] = settings
        sender.conf.update(celery_config(settings))


def settings() -> Settings:
    value = _state.get("settings")
    if value is None:
        value = Settings()
        configure(value)
    assert isinstance(value, Settings)
    return value


def metrics() -> Metrics:
    with _lock:
        if "metrics" not in _state:
            current = settings()
            _state["metrics"] = Metrics(app_label_limit=current.app_label_limit)
        value = _state["metrics"]
    assert isinstance(value, Metrics)
    return value


def runtime() -> Runtime:
    value = _state.get("runtime")
    if value is None:
        with _lock:
            value = _state.get("runtime")
            if value is None:
                value = Runtime(settings(), metrics()).start()
                _state["runtime"] = value
    assert isinstance(value, Runtime)
    return value


def publisher() -> Publisher:
    value = _state.get("publisher")
    if value is None:
        with _lock:
            value = _state.get("publisher")
            if value is None:
                value = Publisher(settings().broker_url).start()
                _state["publisher"] = value
    assert isinstance(value, Publisher)
    return value


@signals.worker_init.connect
def _start(**_: Any) -> None:
    current = settings()
    port = current.metrics_port
    if port:
        metrics().serve(port)
        log.info("metrics on :%d/metrics", port)
    runtime()
    publisher()  # connects and declares the verdicts and dead-letter queues


@signals.worker_shutdown.connect
def _stop(**_: Any) -> None:
    value = _state.pop("runtime", None)
    if isinstance(value, Runtime):
        value.close()
    sender = _state.pop("publisher", None)
    if isinstance(sender, Publisher):
        sender.close()


@app.task(name=topology.TASK_NAME, bind=True, acks_late=True, reject_on_worker_lost=True)
def evaluate(
    self: Any,
    triple: Any = None,
    source: dict[str, Any] | None = None,
    produced_at: float | None = None,
    error: str | None = None,
    raw: str | None = None,
    **_: Any,
) -> str:
    envelope: dict[str, Any] = {"triple": triple, "source": source}
    if error is not None:
        envelope.update(error=error, raw=raw)
    sender = publisher()

    async def publish(outcome: Outcome) -> None:
        messages = [verdict_message(outcome.verdict)]
        if outcome.dead_letter is not None:
            messages.append(dead_letter_message(outcome.dead_letter))
        await sender.publish_async(messages)  # confirmed before Celery acks the triple

    outcome = runtime().evaluate(envelope, then=publish)
    latency = time.time() - produced_at if isinstance(produced_at, int | float) else None
    m = metrics()
    m.record_verdict(outcome.verdict, latency)
    if outcome.dead_letter is not None:
        m.dead_letters.labels(str(outcome.dead_letter["reason"])).inc()
    return outcome.verdict.status


@signals.setup_logging.connect
def _setup_logging(loglevel: Any = None, **_: Any) -> None:
    """Our logging, not Celery's: see :mod:`veredito.worker.logs`."""
    configure_logging(loglevel or settings().log_level)
