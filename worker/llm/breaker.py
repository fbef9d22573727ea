"""The circuit breaker in front of the judge: outages are waited out, not turned into failures.

One breaker per process, on the runtime's event loop; every judge request passes through
:meth:`CircuitBreaker.acquire` before it is sent and reports its outcome after.

    CLOSED ──(N consecutive retryable failures, or a failure rate over the window,
              or the judge refusing our key, or one request failing all but its last try
              with no answer since it began)──► OPEN
    OPEN ──(its delay has passed)──► HALF_OPEN: one request goes out as a probe, the rest wait
    HALF_OPEN ──probe succeeds──► CLOSED (everyone waiting goes)
    HALF_OPEN ──probe fails──► OPEN again, for twice as long (up to ``max_open_seconds``)

While the breaker is not closed no request leaves the process: the evaluations in flight wait in
:meth:`acquire`, the worker's pool threads stay busy, so Celery takes no new triples beyond its
prefetch, and nothing becomes a ``failed`` verdict. A 429's ``Retry-After`` pauses every request
of the process (:meth:`pause`), not only the one that got it.

State is a gauge (``veredito_judge_circuit_state``: 0 closed, 1 half-open, 2 open) and every
transition is counted (``veredito_judge_circuit_transitions_total{to}``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable
from enum import IntEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from veredito.worker.metrics import Metrics

__all__ = ["CircuitBreaker", "CircuitState"]

log = logging.getLogger(__name__)


class CircuitState(IntEnum):
    CLOSED = 0
    HALF_OPEN = 1
    OPEN = 2


class CircuitBreaker:
    def __init__(
        self,
        *,
        failure_threshold: int = 10,
        failure_rate: float = 0.5,
        window_seconds: float = 10.0,
        min_requests: int = 20,
        open_seconds: float = 2.0,
        max_open_seconds: float = 30.0,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.failure_threshold = failure_threshold
        self.failure_rate = failure_rate
        self.window_seconds = window_seconds
        self.min_requests = min_requests
        self.open_seconds = open_seconds
        self.max_open_seconds = max_open_seconds
        self._metrics = metrics
        self._clock = clock
        self.state = CircuitState.CLOSED
        self.opened = 0  # how many times it has opened: a failure seen after a change is an outage
        self.last_success = float("-inf")  # when the judge last answered (the clock's time)
        self._consecutive = 0
        self._outcomes: deque[tuple[float, bool]] = deque()  # (when, failed) within the window
        self._failures_in_window = 0
        self._delay = open_seconds
        self._open_until = 0.0
        self._pause_until = 0.0
        self._probing = False
        self._changed = asyncio.Event()
        if metrics is not None:
            metrics.circuit_state.set(0)

    # -- before a request ----------------------------------------------------------------------

    async def acquire(self) -> bool:
        """Wait until a request may go out; True when it goes as the half-open probe."""
        while True:
            now = self._clock()
            if self._pause_until > now:
                await self._wait(self._pause_until - now)
                continue
            if self.state is CircuitState.CLOSED:
                return False
            if self.state is CircuitState.OPEN:
                if now < self._open_until:
                    await self._wait(self._open_until - now)
                    continue
                self._move(CircuitState.HALF_OPEN)
            if not self._probing:
                self._probing = True
                return True
            await self._wait(None)

    def release(self, probe: bool) -> None:
        """A request that ends with no outcome (cancelled): let another one probe."""
        if probe and self._probing:
            self._probing = False
            self._notify()

    def pause(self, seconds: float) -> None:
        """A ``Retry-After``: no request of this process goes out for ``seconds``."""
        self._pause_until = max(self._pause_until, self._clock() + seconds)

    # -- after a request -----------------------------------------------------------------------

    def now(self) -> float:
        """The breaker's clock (``time.monotonic`` unless a test gives another)."""
        return self._clock()

    def trip(self) -> None:
        """One request has failed all but its last try with no answer from the judge anywhere in
        the process since it began: an outage, which a quiet process (a worker holding one
        triple) would never count to the threshold. Open the circuit, so that the request waits
        like the others instead of becoming a ``failed`` verdict."""
        if self.state is CircuitState.CLOSED:
            self._open()

    def success(self, probe: bool = False) -> None:
        self.last_success = self._clock()
        self._consecutive = 0
        self._remember(failed=False)
        if probe:
            self._probing = False
        if self.state is not CircuitState.CLOSED:
            self._delay = self.open_seconds
            self._move(CircuitState.CLOSED)
            log.info("the judge answers again: circuit closed, resuming")

    def failure(self, probe: bool = False, *, refused_key: bool = False) -> None:
        """A retryable failure (or, with ``refused_key``, a 401/403 that waiting may fix)."""
        self._consecutive += 1
        self._remember(failed=True)
        if probe:
            self._probing = False
        if refused_key:
            log.error(
                "the judge refuses our credentials (HTTP 401/403): holding every triple until it "
                "accepts them; check VEREDITO_LLM_API_KEY"
            )
        if self.state is CircuitState.HALF_OPEN and probe:
            self._delay = min(self._delay * 2, self.max_open_seconds)
            self._open()
        elif self.state is CircuitState.CLOSED and (refused_key or self._tripped()):
            self._open()

    # -- internals ------------------------------------------------------------------------------

    def _tripped(self) -> bool:
        if self._consecutive >= self.failure_threshold:
            return True
        n = len(self._outcomes)
        return n >= self.min_requests and self._failures_in_window >= self.failure_rate * n

    def _remember(self, *, failed: bool) -> None:
        now = self._clock()
        self._outcomes.append((now, failed))
        self._failures_in_window += failed
        horizon = now - self.window_seconds
        while self._outcomes and self._outcomes[0][0] < horizon:
            self._failures_in_window -= self._outcomes.popleft()[1]

    def _open(self) -> None:
        self._open_until = self._clock() + self._delay
        self.opened += 1
        self._outcomes.clear()
        self._failures_in_window = 0
        self._move(CircuitState.OPEN)
        log.warning(
            "the judge is failing: circuit open, holding triples for %.1f s",
            self._delay,
            extra={"consecutive_failures": self._consecutive},
        )

    def _move(self, state: CircuitState) -> None:
        if state is self.state:
            return
        self.state = state
        if self._metrics is not None:
            self._metrics.circuit_state.set(int(state))
            self._metrics.child(self._metrics.circuit_transitions, state.name.lower()).inc()
        self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def _wait(self, timeout: float | None) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout)
