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

The metrics port answers ``/healthz`` and ``/readyz`` from :class:`~.runtime.Health`: a consumer
bootstep (:class:`BrokerLink`) tells it when Celery's consumer connected and when it lost the
connection, the runtime's loop beats it every second.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import CancelledError
from typing import Any

from celery import Celery, bootsteps, signals
from celery.exceptions import Reject
from celery.worker.consumer.delayed_delivery import DelayedDelivery

from veredito.producer import topology
from veredito.worker.logs import configure_logging
from veredito.worker.marks import DoneMarks
from veredito.worker.metrics import Metrics
from veredito.worker.pipeline import Outcome
from veredito.worker.publish import (
    Publisher,
    PublishError,
    dead_letter_message,
    verdict_message,
    verdict_publisher,
)
from veredito.worker.runtime import Health, Runtime
from veredito.worker.settings import Settings

__all__ = ["BrokerLink", "app", "celery_config", "configure", "evaluate", "health"]

log = logging.getLogger(__name__)

MAX_RAW = 64 * 1024  # of a malformed task's arguments; its rejected verdict's id comes from them

app = Celery("veredito", set_as_current=False)

_state: dict[str, Any] = {}
_lock = threading.RLock()


def celery_config(settings: Settings) -> dict[str, Any]:
    url = settings.broker_url
    return {
        "broker_url": url,
        "broker_transport": settings.broker_transport(),
        "broker_transport_options": settings.broker_transport_options(),
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
        "worker_consumer": "veredito.worker.poison:PoisonAwareConsumer",
        "worker_concurrency": settings.concurrency,
        "worker_prefetch_multiplier": 2,
        "worker_send_task_events": False,
        # No remote control: its exclusive per-node queue makes a second worker with the same
        # node name (two on one host) die with RESOURCE_LOCKED, and nothing of ours uses it.
        "worker_enable_remote_control": False,
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
            _state["metrics"] = Metrics(
                app_label_limit=current.app_label_limit,
                alert_confidence=current.alert_confidence,
                releases_kept=current.releases_kept,
            )
        value = _state["metrics"]
    assert isinstance(value, Metrics)
    return value


def health() -> Health:
    with _lock:
        if "health" not in _state:
            current = settings()
            _state["health"] = Health(current.health_loop_stall, current.health_broker_grace)
        value = _state["health"]
    assert isinstance(value, Health)
    return value


class BrokerLink(bootsteps.StartStopStep):  # type: ignore[misc]
    """Celery's consumer runs its steps' ``start`` once connected and consuming, and their
    ``stop`` when the connection is lost (before it reconnects) or at shutdown.

    It starts after the consumer's last setup step, just before its loop: the delayed-delivery
    step (quorum queues) retries for up to 15 s on a broken connection before the loop sees the
    break, and a worker is not ready while that goes on."""

    requires = (DelayedDelivery,)

    def start(self, parent: Any) -> None:
        health().broker_connected()

    def stop(self, parent: Any) -> None:
        health().broker_lost()

    def shutdown(self, parent: Any) -> None:
        health().broker_lost()


app.steps["consumer"].add(BrokerLink)


def runtime() -> Runtime:
    value = _state.get("runtime")
    if value is None:
        with _lock:
            value = _state.get("runtime")
            if value is None:
                value = Runtime(settings(), metrics(), health()).start()
                _state["runtime"] = value
    assert isinstance(value, Runtime)
    return value


def publisher() -> Publisher:
    value = _state.get("publisher")
    if value is None:
        with _lock:
            value = _state.get("publisher")
            if value is None:
                value = verdict_publisher(settings().broker_url).start()
                _state["publisher"] = value
    assert isinstance(value, Publisher)
    return value


class StartupFailed(RuntimeError):
    """One or more of the worker's start-up steps failed (each is named)."""


def run_startup(steps: list[tuple[str, Callable[[], Any]]]) -> None:
    """Run every start-up step, the ones after a failed step too (each failure logged with its
    step's name), then :class:`StartupFailed` naming the failed ones: a failure never skips the
    rest silently, and never leaves a half-started worker behind."""
    failed = []
    for name, step in steps:
        try:
            step()
        except Exception as exc:
            log.critical("worker start-up: %s failed (%s: %s)", name, type(exc).__name__, exc)
            failed.append(f"{name}: {exc}")
    if failed:
        raise StartupFailed("; ".join(failed))


def _serve_metrics() -> None:
    port = settings().metrics_port
    if port:
        checks = {"/healthz": health().problem, "/readyz": health().unready}
        metrics().serve(port, checks=checks)
        log.info("metrics on :%d/metrics, health on /healthz and /readyz", port)


def _lease_liveness() -> None:
    # Redis: the consumer's lease is renewed only while the worker works (its event loop runs
    # and it has a broker connection, as /healthz says); a stuck worker's triples go to others.
    from veredito.worker.redis_transport import set_liveness

    set_liveness(lambda: health().problem() is None)


@signals.worker_init.connect
def _start(**_: Any) -> None:
    """The worker's start-up: the metrics port, the runtime, the verdict publisher (it connects
    and declares the verdicts and dead-letter queues), the Redis lease's liveness. Celery logs
    and swallows an exception from a signal handler, so a failure stops the process here."""
    try:
        run_startup(
            [("metrics", _serve_metrics), ("runtime", runtime), ("publisher", publisher),
             ("liveness", _lease_liveness)]
        )  # fmt: skip
    except StartupFailed as exc:
        log.critical("the worker stops: its start-up failed: %s", exc)
        print(f"veredito worker: start-up failed: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None


def done_marks() -> DoneMarks | None:
    if "marks" not in _state:
        with _lock:
            if "marks" not in _state:
                current = settings()
                url = current.marks_url
                _state["marks"] = DoneMarks(url, current.done_ttl) if url else None
    value = _state["marks"]
    assert value is None or isinstance(value, DoneMarks)
    return value


@signals.worker_shutting_down.connect
def _drain(**_: Any) -> None:
    """SIGTERM: Celery stops consuming and waits for the tasks it holds; after the grace, what is
    still in flight is cancelled and returned to the queue unacked (the tasks raise ``Reject``)."""
    grace = settings().shutdown_grace
    log.info("shutting down: %.0f s for the evaluations in flight", grace)

    def give_up() -> None:
        value = _state.get("runtime")
        if isinstance(value, Runtime):
            returned = value.abort()
            if returned:
                log.warning("grace over: %d evaluations go back to the queue", returned)

    timer = threading.Timer(grace, give_up)
    timer.daemon = True
    timer.start()


@signals.worker_shutdown.connect
def _stop(**_: Any) -> None:
    value = _state.pop("runtime", None)
    if isinstance(value, Runtime):
        value.abort()
        value.close()
    sender = _state.pop("publisher", None)
    if isinstance(sender, Publisher):
        sender.close()
    marks = _state.pop("marks", None)
    if isinstance(marks, DoneMarks):
        marks.close()


def envelope_from_call(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The envelope of a task message, whatever shape its arguments have.

    Producers send it as keyword arguments (``triple``, ``source``, ``produced_at``, and
    ``error``/``raw`` for a line that was not JSON). A plain ``evaluate.delay(triple)`` from a
    user's own Celery code is taken as the triple. Anything else becomes a rejected verdict."""
    if args:
        if len(args) == 1 and not kwargs and isinstance(args[0], dict):
            return {"triple": args[0], "source": None}
        return {
            "triple": None,
            "source": None,
            "error": "the task's arguments must be the triple or the producer's envelope "
            f"(got {len(args)} positional arguments)",
            "error_kind": "invalid_task",
            "raw": json.dumps([args, kwargs], default=str)[:MAX_RAW],
        }
    source = kwargs.get("source")
    envelope: dict[str, Any] = {
        "triple": kwargs.get("triple"),
        "source": source if isinstance(source, dict) else None,
    }
    if kwargs.get("error") is not None:
        envelope.update(error=str(kwargs["error"]), raw=kwargs.get("raw"))
    return envelope


@app.task(name=topology.TASK_NAME, bind=True, acks_late=True, reject_on_worker_lost=True)
def evaluate(self: Any, *args: Any, **kwargs: Any) -> str:
    envelope = envelope_from_call(args, kwargs)
    task_id = self.request.id
    marks = done_marks()
    m = metrics()
    if marks is not None and task_id and marks.is_done(task_id):
        m.redeliveries_skipped.inc()
        return "already_published"
    sender = publisher()

    async def publish(outcome: Outcome) -> None:
        messages = [verdict_message(outcome.verdict)]
        if outcome.dead_letter is not None:
            messages.append(dead_letter_message(outcome.dead_letter))
        await sender.publish_async(messages)  # confirmed before Celery acks the triple

    try:
        outcome = runtime().evaluate(envelope, then=publish)
    except CancelledError:
        raise Reject("shutting down", requeue=True) from None
    except PublishError:
        log.error("the broker did not take the verdict: the triple goes back to the queue")
        raise Reject("verdict not published", requeue=True) from None
    if marks is not None and task_id:
        marks.mark(task_id, outcome.verdict.status)
    produced_at = kwargs.get("produced_at")
    latency = time.time() - produced_at if isinstance(produced_at, int | float) else None
    m.record_verdict(outcome.verdict, latency)
    if outcome.dead_letter is not None:
        m.dead_letters.labels(str(outcome.dead_letter["reason"])).inc()
    return outcome.verdict.status


@signals.setup_logging.connect
def _setup_logging(loglevel: Any = None, **_: Any) -> None:
    """Our logging, not Celery's: see :mod:`veredito.worker.logs`."""
    configure_logging(loglevel or settings().log_level)
