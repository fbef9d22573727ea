"""The worker process's async runtime: one asyncio loop in a thread, one HTTP session.

Celery's ``threads`` pool runs each task in a thread that hands the evaluation to this loop and
waits for it.  So one process keeps ``concurrency`` evaluations in flight (each up to two judge
calls) while the I/O is multiplexed by one loop and one connection pool.

:class:`Health` is what the metrics port's ``/healthz`` and ``/readyz`` answer: the loop beats it
every second, and Celery's consumer says when it holds a broker connection and when it lost it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import CancelledError, Future
from typing import Any

import aiohttp

from veredito.worker.judges import Judge, build_judge, build_spending, new_session
from veredito.worker.llm.spend import Spending
from veredito.worker.metrics import Metrics
from veredito.worker.pipeline import Outcome, Pipeline
from veredito.worker.settings import Settings

__all__ = ["HEARTBEAT_SECONDS", "Health", "Runtime"]

HEARTBEAT_SECONDS = 1.0


class Health:
    """Whether the worker works: its event loop runs, and it holds a broker connection or lost it
    less than ``broker_grace`` seconds ago.

    Each fact is written by the thread that knows it (the loop's heartbeat, Celery's consumer) and
    read by the HTTP server's threads, all under one lock. Before the first connection the grace
    runs from start-up, so a worker that never reaches its broker fails too.
    """

    def __init__(
        self,
        loop_stall: float,
        broker_grace: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.loop_stall = loop_stall
        self.broker_grace = broker_grace
        self._clock = clock
        self._lock = threading.Lock()
        now = clock()
        self._beat = now
        self._connected = False
        self._lost_at = now

    def beat(self) -> None:
        now = self._clock()
        with self._lock:
            self._beat = now

    def broker_connected(self) -> None:
        with self._lock:
            self._connected = True

    def broker_lost(self) -> None:
        now = self._clock()
        with self._lock:
            if self._connected:
                self._connected = False
                self._lost_at = now

    def problem(self) -> str | None:
        """Why ``/healthz`` fails (restart this worker), or None while it works."""
        now = self._clock()
        with self._lock:
            beat, connected, lost_at = self._beat, self._connected, self._lost_at
        if now - beat > self.loop_stall:
            return f"the event loop has not run for {now - beat:.0f} s"
        if not connected and now - lost_at > self.broker_grace:
            return f"no broker connection for {now - lost_at:.0f} s"
        return None

    def unready(self) -> str | None:
        """Why ``/readyz`` fails (not consuming now), or None: no grace for the broker here."""
        problem = self.problem()
        if problem is not None:
            return problem
        with self._lock:
            connected = self._connected
        return None if connected else "not connected to the broker"


class Runtime:
    def __init__(self, settings: Settings, metrics: Metrics, health: Health | None = None) -> None:
        self.settings = settings
        self.metrics = metrics
        self.health = health
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="veredito-loop", daemon=True
        )
        self._session: aiohttp.ClientSession | None = None
        self._judge: Judge | None = None
        self._spending: Spending | None = None
        self.pipeline: Pipeline | None = None
        self._inflight: set[Future[Outcome]] = set()
        self._inflight_lock = threading.Lock()
        self.aborting = False

    def start(self) -> Runtime:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._setup(), self._loop).result(timeout=30)
        return self

    async def _setup(self) -> None:
        self._session = new_session(self.settings)
        self._judge = build_judge(
            self.settings, self._session, self.metrics, hold_on_refused_key=True, worker=True
        )
        self._spending = build_spending(self.settings)
        self.pipeline = Pipeline(
            self._judge,
            self.settings.limits,
            self.metrics,
            keep_input=self.settings.verdict_input,
            spending=self._spending,
            redact_stored=self.settings.redact_stored,
        )
        if self.health is not None:
            self._heartbeat()

    def _heartbeat(self) -> None:
        """Runs on the loop every second: a loop held up by blocking code stops beating."""
        assert self.health is not None
        self.health.beat()
        self._loop.call_later(HEARTBEAT_SECONDS, self._heartbeat)

    def submit(
        self, envelope: dict[str, Any], then: Callable[[Outcome], Awaitable[None]] | None = None
    ) -> Future[Outcome]:
        """Evaluate on the loop; ``then`` (say, publishing the verdict) runs there right after."""
        if self.pipeline is None:
            raise RuntimeError("runtime not started")
        if self.aborting:
            raise CancelledError("shutting down")
        pipeline = self.pipeline

        async def run() -> Outcome:
            outcome = await pipeline.evaluate(envelope)
            if then is not None:
                await then(outcome)
            return outcome

        future = asyncio.run_coroutine_threadsafe(run(), self._loop)
        with self._inflight_lock:
            self._inflight.add(future)
        future.add_done_callback(self._forget)
        return future

    def _forget(self, future: Future[Outcome]) -> None:
        with self._inflight_lock:
            self._inflight.discard(future)

    def abort(self) -> int:
        """Cancel every evaluation in flight (the shutdown grace is over); new ones are refused.
        Their waiting threads get ``CancelledError``: the task returns the triple to the queue."""
        self.aborting = True
        with self._inflight_lock:
            pending = list(self._inflight)
        for future in pending:
            future.cancel()
        return len(pending)

    def evaluate(
        self, envelope: dict[str, Any], then: Callable[[Outcome], Awaitable[None]] | None = None
    ) -> Outcome:
        """Evaluate from any thread, blocking that thread until ``then`` has run too."""
        return self.submit(envelope, then).result()

    def close(self) -> None:
        if not self._thread.is_alive():
            return

        async def shutdown() -> None:
            if self._judge is not None:
                await self._judge.aclose()
            if self._spending is not None:
                await self._spending.aclose()
            if self._session is not None:
                await self._session.close()

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
