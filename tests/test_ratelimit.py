"""Shared rate limits on the judge (worker/ratelimit.py): the algorithm, its Redis script against
the same algorithm in Python, and four worker processes against a test judge that answers 429
above a fixed rate."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import uuid
from pathlib import Path

import pytest

from tests.conftest import require_service
from tests.llm_server import Script, ServerThread
from tests.test_broker_e2e import BROKERS, reset_broker, running_worker, veredito
from veredito.worker.ratelimit import (
    BURST_MS,
    LocalLimiter,
    RateLimiter,
    RedisLimiter,
    estimate_tokens,
)

REDIS = "redis://127.0.0.1:6379/14"


def test_requests_are_spaced_at_the_rate_after_a_second_of_burst() -> None:
    limiter = LocalLimiter(rpm=600, tpm=0)  # one every 100 ms
    waits = [limiter.reserve(0.0, 1)[0] for _ in range(30)]
    burst = int(BURST_MS / 100) + 1
    assert waits[:burst] == [0.0] * burst  # the burst: half a second's worth
    assert waits[burst:] == pytest.approx([100.0 * k for k in range(1, 31 - burst)])


def test_tokens_per_minute_bound_the_requests_by_their_size() -> None:
    limiter = LocalLimiter(rpm=0, tpm=60_000)  # 1,000 tokens a second
    assert limiter.reserve(0.0, 2_000)[0] == 0.0
    assert limiter.reserve(0.0, 500)[0] == pytest.approx(2_000.0 - BURST_MS)
    limiter.correct(-1_500)  # the first used 500, not 2,000: give the difference back
    assert limiter.reserve(0.0, 10)[0] == pytest.approx(1_000.0 - BURST_MS)


def test_a_429_halves_the_rate_once_a_second_and_it_recovers_linearly() -> None:
    limiter = LocalLimiter(rpm=600, tpm=0, recovery=10.0)
    assert limiter.decrease(0.0, None) == 0.5
    # the same overload: not halved again (0.05 recovered in the half second)
    assert limiter.decrease(500.0, None) == pytest.approx(0.55)
    assert limiter.decrease(1_000.0, None) == pytest.approx(0.3)  # 0.6 recovered, then halved
    assert limiter.reserve(6_000.0, 1)[1] == pytest.approx(0.3 + 0.5)
    assert limiter.reserve(60_000.0, 1)[1] == 1.0
    for k in range(10):
        limiter.decrease(100_000.0 + 1_000 * k, None)
    assert limiter.reserve(109_000.0, 1)[1] >= 0.1  # never below a tenth


def test_retry_after_pauses_every_request() -> None:
    limiter = LocalLimiter(rpm=6_000, tpm=0)
    limiter.decrease(0.0, 3_000.0)
    assert limiter.reserve(10.0, 1)[0] == pytest.approx(2_990.0)


def test_estimate_counts_the_prompt_and_a_bounded_completion() -> None:
    assert estimate_tokens(3_000, 2_048) == 1_000 + 512
    assert estimate_tokens(30, 100) == 10 + 100


@pytest.mark.broker
def test_the_redis_script_is_the_same_algorithm() -> None:
    """The same sequence through Lua on a real Redis and through Python gives the same waits
    and factors."""
    require_service(6379, "Redis")
    model = f"test-{uuid.uuid4().hex[:8]}"
    local = LocalLimiter(rpm=1_200, tpm=90_000, recovery=20.0)
    shared = RedisLimiter(REDIS, model, 1_200, 90_000, recovery=20.0)

    async def run() -> list[tuple[float, float]]:
        out = []
        steps = [("r", 0.0, 700), ("r", 1.0, 3_000), ("d", 50.0, None), ("r", 60.0, 900),
                 ("c", None, -400), ("r", 80.0, 100), ("d", 300.0, 2_000.0), ("r", 400.0, 50),
                 ("d", 1_500.0, None), ("r", 9_000.0, 800), ("r", 30_000.0, 10)]  # fmt: skip
        for op, now, arg in steps:
            if op == "r":
                expected = local.reserve(now, arg)
                got = await shared.reserve(now, arg)
                out.append((expected[0] - got[0], expected[1] - got[1]))
            elif op == "d":
                out.append((local.decrease(now, arg) - await shared.decrease(now, arg), 0.0))
            else:
                local.correct(arg)
                await shared.correct(arg)
        await shared._redis.delete(shared.key)
        await shared.aclose()
        return out

    for wait_diff, factor_diff in asyncio.run(run()):
        assert abs(wait_diff) < 1e-6 and abs(factor_diff) < 1e-9


def test_without_redis_each_process_limits_itself() -> None:
    """Redis unreachable: the limiter says so once and goes on with its own state."""
    limiter = RateLimiter(600, 0, model="m", redis_url="redis://127.0.0.1:1/0")

    async def run() -> list[float]:
        return [await limiter.acquire(1) for _ in range(int(BURST_MS / 100) + 2)]

    waits = asyncio.run(run())
    burst = int(BURST_MS / 100) + 1
    assert waits[:burst] == [0.0] * burst and waits[burst] == pytest.approx(0.1, abs=0.02)
    assert limiter._warned


@pytest.mark.broker
def test_four_workers_share_one_rate_and_no_triple_fails(tmp_path: Path) -> None:
    """Four worker processes, each allowed 64 evaluations in flight, against a judge that answers
    429 above 600 requests a minute: with VEREDITO_LLM_RPM=600 shared through Redis, the judge
    sees no more than 600 a minute (within 10 %), and every triple gets an ok verdict."""
    url, port = BROKERS["rabbitmq"]
    require_service(port, "RabbitMQ")
    require_service(6379, "Redis")
    reset_broker(url)
    n, rpm = 240, 600
    lines = [
        json.dumps({"id": f"rl-{i:04d}", "query": f"Qual o prazo do pedido {i}?",
                    "context": [f"O prazo do pedido {i} é de {i % 28 + 2} dias."],
                    "answer": f"O prazo é de {i % 28 + 2} dias."})
        for i in range(n)
    ]  # fmt: skip
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(lines) + "\n")
    script = Script(rpm_limit=rpm, record=False, latency=0.05)
    redis_db = "redis://127.0.0.1:6379/14"
    with ServerThread(script) as judge:
        env = {k: v for k, v in os.environ.items() if not k.startswith("VEREDITO_")}
        env.update(
            VEREDITO_BROKER_URL=url,
            VEREDITO_LLM_BASE_URL=judge.base_url,
            VEREDITO_LLM_API_KEY="sk-test",
            VEREDITO_LLM_MODEL=f"rl-{uuid.uuid4().hex[:8]}",  # a fresh shared state
            VEREDITO_PROMPTS="claims",
            VEREDITO_LLM_RPM=str(rpm),
            VEREDITO_REDIS_URL=redis_db,
        )
        assert veredito("produce", str(source), env=env).returncode == 0
        out = tmp_path / "verdicts.jsonl"
        with contextlib.ExitStack() as stack:
            started = [stack.enter_context(running_worker(env, 64)) for _ in range(4)]
            results = veredito("results", "--out", str(out), "--limit", str(n),
                               "--idle-timeout", "90", env=env, timeout=240)  # fmt: skip
            assert results.returncode == 0, results.stderr
        for w in started:
            assert w.returncode == 0, w.stderr[-2000:]
    verdicts = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(verdicts) == n
    assert {v["status"] for v in verdicts} == {"ok"}
    times = sorted(script.accepted_at)
    assert len(times) == n
    # after the first second's burst, the judge never sees more than the rate (+10 %)
    span = times[-1] - times[0]
    seen = f"{len(times)} in {span:.1f} s, {script.rejected_429} answered 429"
    allowed = rpm / 60 * span * 1.1 + rpm / 60 * BURST_MS / 1000 + 1
    assert len(times) <= allowed, seen
    for start in times:
        window = [t for t in times if start <= t < start + 5.0]
        assert len(window) <= rpm / 60 * 5.0 * 1.1 + rpm / 60 * BURST_MS / 1000 + 1
    reset_broker(url)
