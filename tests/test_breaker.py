"""The circuit breaker: judge outages are waited out, not turned into failed verdicts."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from tests.llm_server import ServerThread
from tests.test_llm_judge import settings_for, triple
from veredito.worker.judges import build_judge, new_session
from veredito.worker.llm.breaker import CircuitBreaker, CircuitState
from veredito.worker.metrics import Metrics
from veredito.worker.pipeline import Outcome, Pipeline


def breaker(**extra: Any) -> tuple[CircuitBreaker, CollectorRegistry]:
    registry = CollectorRegistry()
    options: dict[str, Any] = {"failure_threshold": 3, "open_seconds": 0.2}
    options.update(extra)
    return CircuitBreaker(metrics=Metrics(registry), **options), registry


def state(registry: CollectorRegistry) -> float | None:
    return registry.get_sample_value("veredito_judge_circuit_state")


async def test_opens_after_consecutive_failures_then_probes_and_closes() -> None:
    b, registry = breaker()
    for _ in range(3):
        assert await b.acquire() is False
        b.failure()
    assert b.state is CircuitState.OPEN and state(registry) == 2
    started = time.monotonic()
    probe = await b.acquire()  # waits out the open delay, then goes as the probe
    assert probe is True and time.monotonic() - started >= 0.15
    assert b.state is CircuitState.HALF_OPEN and state(registry) == 1
    others = [asyncio.ensure_future(b.acquire()) for _ in range(5)]
    await asyncio.sleep(0.05)
    assert not any(o.done() for o in others)  # only the probe goes while half-open
    b.success(probe)
    assert await asyncio.gather(*others) == [False] * 5
    assert b.state is CircuitState.CLOSED and state(registry) == 0
    transitions = {
        to: registry.get_sample_value("veredito_judge_circuit_transitions_total", {"to": to})
        for to in ("open", "half_open", "closed")
    }
    assert transitions == {"open": 1, "half_open": 1, "closed": 1}


async def test_a_failed_probe_reopens_for_longer() -> None:
    b, _ = breaker(max_open_seconds=10)
    for _ in range(3):
        b.failure()
    probe = await b.acquire()
    b.failure(probe)
    assert b.state is CircuitState.OPEN
    started = time.monotonic()
    await b.acquire()
    assert time.monotonic() - started >= 0.35  # 0.2 s doubled


async def test_a_cancelled_probe_lets_another_probe() -> None:
    b, _ = breaker()
    for _ in range(3):
        b.failure()
    probe = await b.acquire()
    waiting = asyncio.ensure_future(b.acquire())
    await asyncio.sleep(0.05)
    assert not waiting.done()
    b.release(probe)
    assert await asyncio.wait_for(waiting, 1) is True


async def test_failure_rate_over_the_window_opens() -> None:
    b, _ = breaker(failure_threshold=1000, min_requests=10, failure_rate=0.5)
    for i in range(20):
        if b.state is not CircuitState.CLOSED:
            break
        b.failure() if i % 2 else b.success()
    assert b.state is CircuitState.OPEN


async def test_failures_under_the_rate_keep_it_closed() -> None:
    b, _ = breaker(failure_threshold=5, min_requests=10, failure_rate=0.5)
    for i in range(200):
        b.failure() if i % 8 == 0 else b.success()
    assert b.state is CircuitState.CLOSED


async def test_retry_after_pauses_every_request() -> None:
    b, _ = breaker()
    b.pause(0.3)
    started = time.monotonic()
    await asyncio.gather(*(b.acquire() for _ in range(10)))
    assert time.monotonic() - started >= 0.25


async def judge_all(server: ServerThread, n: int, metrics: Metrics, **extra: Any) -> list[Outcome]:
    settings = settings_for(
        server, prompts="claims", breaker_failures=3, breaker_open_seconds=0.1, **extra
    )
    async with new_session(settings) as session:
        judge = build_judge(settings, session, metrics, hold_on_refused_key=True)
        pipeline = Pipeline(judge, settings.limits, metrics)
        return list(
            await asyncio.gather(
                *(pipeline.evaluate({"triple": triple(f"n{i}")}) for i in range(n))
            )
        )


async def test_an_outage_longer_than_every_retry_fails_nothing(llm_server: ServerThread) -> None:
    """Two tries per request, a judge down for 1.5 s: every triple waits and ends ok."""
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    llm_server.script.down = True
    task = asyncio.ensure_future(judge_all(llm_server, 30, metrics, llm_max_attempts=2))
    deadline = time.monotonic() + 5
    while state(registry) != 2:
        assert time.monotonic() < deadline, "the circuit never opened"
        await asyncio.sleep(0.02)
    await asyncio.sleep(1.5)
    assert not task.done()
    llm_server.script.down = False
    outcomes = await asyncio.wait_for(task, 30)
    assert [o.verdict.status for o in outcomes] == ["ok"] * 30
    assert state(registry) == 0
    # while open, only probes reach the judge: far fewer requests than 30 triples x 2 tries/s
    assert llm_server.script.served < 30 * 2 + 30


async def test_a_quiet_worker_holds_its_one_triple_through_an_outage(
    llm_server: ServerThread,
) -> None:
    """A worker holding one triple never sees the 10 consecutive failures that open the
    circuit: its request, having failed all but its last try with no answer since it began,
    opens it, and waits like the others (a CI run once saw it become a failed verdict)."""
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    llm_server.script.down = True
    settings = settings_for(
        llm_server, prompts="claims", breaker_failures=10, breaker_open_seconds=0.1,
        llm_max_attempts=3,
    )  # fmt: skip
    async with new_session(settings) as session:
        judge = build_judge(settings, session, metrics, hold_on_refused_key=True)
        task = asyncio.ensure_future(
            Pipeline(judge, settings.limits, metrics).evaluate({"triple": triple("alone")})
        )
        deadline = time.monotonic() + 10
        while state(registry) != 2:
            assert time.monotonic() < deadline, "the circuit never opened"
            assert not task.done(), task.result().verdict
            await asyncio.sleep(0.02)
        await asyncio.sleep(1.0)  # longer than every try and backoff together
        assert not task.done()
        llm_server.script.down = False
        outcome = await asyncio.wait_for(task, 30)
    assert outcome.verdict.status == "ok"
    assert state(registry) == 0


async def test_a_refused_key_holds_triples_until_it_is_accepted(
    llm_server: ServerThread, caplog: pytest.LogCaptureFixture
) -> None:
    registry = CollectorRegistry()
    llm_server.script.refuse_key = True
    task = asyncio.ensure_future(judge_all(llm_server, 5, Metrics(registry)))
    deadline = time.monotonic() + 5
    while state(registry) != 2:
        assert time.monotonic() < deadline, "the circuit never opened"
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.5)
    assert not task.done()
    assert any(r.levelname == "ERROR" and "credentials" in r.getMessage() for r in caplog.records)
    llm_server.script.refuse_key = False
    outcomes = await asyncio.wait_for(task, 30)
    assert [o.verdict.status for o in outcomes] == ["ok"] * 5


async def test_random_faults_fail_nothing(llm_server: ServerThread) -> None:
    """12 % of requests fail (500, 503, 429, hangs past the timeout, resets, malformed)."""
    llm_server.script.fault_rate = 0.12
    llm_server.script.hang_seconds = 1.0
    outcomes = await judge_all(llm_server, 300, Metrics(CollectorRegistry()), llm_timeout=0.5)
    assert [o.verdict.status for o in outcomes].count("ok") == 300
    assert set(llm_server.script.faults) >= {"http500", "http503", "http429", "reset", "malformed"}
