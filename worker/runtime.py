"""The worker process's async runtime: one asyncio loop in a thread, one HTTP session.

Celery's ``threads`` pool runs each task in a thread that hands the evaluation to this loop and
waits for it.  So one process keeps ``concurrency`` evaluations in flight (each up to two judge
calls) while the I/O is multiplexed by one loop and one connection pool.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import CancelledError, Future
from typing import Any

import aiohttp

from veredito.worker.judges import Judge, build_judge, build_spending, new_session
from veredito.worker.metrics import Metrics
from veredito.worker.pipeline import Outcome, Pipeline
from veredito.worker.settings import Settings
from veredito.worker.spend import Spending

__all__ = ["Runtime"]


class Runtime:
    def __init__(self, settings: Settings, metrics: Metrics) -> None:
        self.settings = settings
        self.metrics = metrics
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
