"""What judging costs: prices, the verdict cache and daily budgets, through ``veredito run``
against the local test judge (which reports 100 prompt and 20 completion tokens a call) and a
real Redis."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import redis

from tests.conftest import require_service
from tests.llm_server import ServerThread
from veredito.cli import main
from veredito.worker.llm.spend import Pricing, parse_budgets

REDIS = "redis://127.0.0.1:6379/14"


def test_prices_follow_the_model_name_and_the_overrides() -> None:
    table = Pricing()
    assert table.of("gpt-4o-mini") == (0.15, 0.60)
    assert table.of("gpt-4o-mini-2024-07-18") == (0.15, 0.60)  # a dated snapshot
    assert table.of("openai/gpt-4o") == (2.50, 10.00)  # as routers name it
    assert table.of("sabia-3") is None
    assert table.cost("sabia-3", 100, 20) is None
    assert table.cost("gpt-4o-mini", 1_000_000, 1_000_000) == pytest.approx(0.75)
    mine = Pricing(prompt=1.0, completion=2.0)
    assert mine.cost("sabia-3", 500_000, 250_000) == pytest.approx(1.0)
    assert Pricing(completion=1.0).of("gpt-4o") == (2.50, 1.0)


def test_budgets_are_read_and_a_bad_pair_is_named() -> None:
    assert parse_budgets("sac-bot:20, rh-bot:5.5,*:1") == {"sac-bot": 20.0, "rh-bot": 5.5, "*": 1.0}
    assert parse_budgets(None) == {}
    with pytest.raises(ValueError, match="'rh-bot' is not app:amount"):
        parse_budgets("sac-bot:20,rh-bot")
    with pytest.raises(ValueError, match="'x:-1'"):
        parse_budgets("x:-1")


@pytest.fixture
def redis_db() -> Iterator[redis.Redis]:
    require_service(6379, "Redis")
    client = redis.Redis.from_url(REDIS)
    client.flushdb()
    yield client
    client.flushdb()
    client.close()


def write_triples(path: Path, n: int, app: str = "sac-bot") -> None:
    rows = [
        json.dumps({"id": f"t{i}", "query": f"Qual o prazo {i}?",
                    "context": [f"O prazo {i} é de {i + 2} dias."],
                    "answer": f"O prazo é de {i + 2} dias. Procure o Procon.",
                    "metadata": {"app": app}})
        for i in range(n)
    ]  # fmt: skip
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")


def run(source: Path, out: Path, concurrency: int = 4) -> list[dict[str, object]]:
    code = main(
        ["run", str(source), "--out", str(out), "--concurrency", str(concurrency), "--no-progress"]
    )
    assert code == 0
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_each_verdict_carries_its_cost(
    llm_server: ServerThread, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VEREDITO_LLM_BASE_URL", llm_server.base_url)
    monkeypatch.setenv("VEREDITO_LLM_MODEL", "gpt-4o-mini")
    source = tmp_path / "in.jsonl"
    write_triples(source, 3)
    verdicts = run(source, tmp_path / "v.jsonl")
    # two prompts, 100 + 20 tokens each, at 0.15 and 0.60 dollars a million
    assert [v["cost_usd"] for v in verdicts] == [
        pytest.approx(2 * (100 * 0.15 + 20 * 0.6) / 1e6)
    ] * 3
    assert all(v["cached"] is False for v in verdicts)
    monkeypatch.setenv("VEREDITO_JUDGE", "rules")
    assert {v["cost_usd"] for v in run(source, tmp_path / "r.jsonl")} == {0.0}


def test_a_triple_seen_again_costs_no_call_and_the_same_verdict(
    llm_server: ServerThread,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    redis_db: redis.Redis,
) -> None:
    monkeypatch.setenv("VEREDITO_LLM_BASE_URL", llm_server.base_url)
    monkeypatch.setenv("VEREDITO_REDIS_URL", REDIS)
    monkeypatch.setenv("VEREDITO_CACHE_TTL", "60")
    source = tmp_path / "in.jsonl"
    write_triples(source, 8)
    fresh = run(source, tmp_path / "first.jsonl")
    calls = llm_server.script.served
    assert calls == 16
    again = run(source, tmp_path / "second.jsonl")
    assert llm_server.script.served == calls  # no call at all
    assert all(v["cached"] is True for v in again)

    def same(v: dict[str, object]) -> dict[str, object]:
        return {k: x for k, x in v.items() if k not in ("timings", "cached", "evaluated_at")}

    assert [same(v) for v in again] == [same(v) for v in fresh]
    assert len(redis_db.keys("veredito:cache:*")) == 8
    assert all(0 < redis_db.ttl(k) <= 60 for k in redis_db.keys("veredito:cache:*"))
    # another prompt set is another key: judged afresh
    monkeypatch.setenv("VEREDITO_PROMPTS", "claims")
    run(source, tmp_path / "third.jsonl")
    assert llm_server.script.served == calls + 8


def test_run_does_not_cache_unless_asked(
    llm_server: ServerThread,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    redis_db: redis.Redis,
) -> None:
    monkeypatch.setenv("VEREDITO_LLM_BASE_URL", llm_server.base_url)
    monkeypatch.setenv("VEREDITO_REDIS_URL", REDIS)
    source = tmp_path / "in.jsonl"
    write_triples(source, 2)
    run(source, tmp_path / "a.jsonl")
    run(source, tmp_path / "b.jsonl")
    assert llm_server.script.served == 8
    assert redis_db.keys("veredito:cache:*") == []


def test_past_its_daily_budget_an_app_is_judged_by_the_rules(
    llm_server: ServerThread,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    redis_db: redis.Redis,
) -> None:
    """The budget is shared through Redis: what other processes spent today counts."""
    monkeypatch.setenv("VEREDITO_LLM_BASE_URL", llm_server.base_url)
    monkeypatch.setenv("VEREDITO_LLM_MODEL", "gpt-4o-mini")
    monkeypatch.setenv("VEREDITO_REDIS_URL", REDIS)
    per_triple = 2 * (100 * 0.15 + 20 * 0.6) / 1e6
    monkeypatch.setenv("VEREDITO_BUDGET_DAILY", f"sac-bot:{per_triple * 5.5},rh-bot:1")
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    redis_db.set(f"veredito:spend:{today}:sac-bot", per_triple * 2)  # another worker spent this
    source = tmp_path / "in.jsonl"
    write_triples(source, 10)
    verdicts = run(source, tmp_path / "v.jsonl", concurrency=1)  # one at a time: exact
    assert len(verdicts) == 10 and {v["status"] for v in verdicts} == {"ok"}  # nothing dropped
    kinds = [v["judge"]["kind"] for v in verdicts]  # type: ignore[index]
    assert kinds == ["llm"] * 4 + ["rules"] * 6  # 2 + 4 spent = 6 > 5.5
    for v in verdicts[4:]:
        assert v["judge"]["fallback_reason"] == "budget"  # type: ignore[index]
        assert v["cost_usd"] == 0.0
    assert "fallback_reason" not in verdicts[0]["judge"]  # type: ignore[operator]
    spent = float(redis_db.get(f"veredito:spend:{today}:sac-bot") or 0)
    assert spent == pytest.approx(per_triple * 6)
    assert llm_server.script.served == 8


def test_budgets_count_in_the_process_without_redis(
    llm_server: ServerThread, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VEREDITO_LLM_BASE_URL", llm_server.base_url)
    monkeypatch.setenv("VEREDITO_LLM_MODEL", "gpt-4o-mini")
    monkeypatch.setenv("VEREDITO_BUDGET_DAILY", f"*:{2 * (100 * 0.15 + 20 * 0.6) / 1e6 * 2.5}")
    source = tmp_path / "in.jsonl"
    write_triples(source, 5, app=f"app-{uuid.uuid4().hex[:6]}")
    verdicts = run(source, tmp_path / "v.jsonl", concurrency=1)
    kinds = [v["judge"]["kind"] for v in verdicts]  # type: ignore[index]
    assert kinds == ["llm"] * 3 + ["rules"] * 2


@pytest.mark.broker
def test_the_worker_caches_by_default_when_it_has_redis(
    tmp_path: Path, redis_db: redis.Redis
) -> None:
    """The same triples produced again (new messages, so no done marker applies) are judged from
    the cache: no call, cached: true, the rest of the verdict as before."""
    import os

    from tests.test_broker_e2e import BROKERS, reset_broker, running_worker, veredito

    url, port = BROKERS["rabbitmq"]
    require_service(port, "RabbitMQ")
    reset_broker(url)
    source = tmp_path / "in.jsonl"
    write_triples(source, 6)
    with ServerThread() as judge:
        env = {k: v for k, v in os.environ.items() if not k.startswith("VEREDITO_")}
        env.update(VEREDITO_BROKER_URL=url, VEREDITO_LLM_BASE_URL=judge.base_url,
                   VEREDITO_LLM_API_KEY="sk-test", VEREDITO_REDIS_URL=REDIS)  # fmt: skip
        rounds = []
        with running_worker(env, 8) as worker:
            for name in ("first", "second"):
                assert veredito("produce", str(source), env=env).returncode == 0
                out = tmp_path / f"{name}.jsonl"
                done = veredito("results", "--out", str(out), "--limit", "6",
                                "--idle-timeout", "60", env=env)  # fmt: skip
                assert done.returncode == 0, done.stderr
                rounds.append([json.loads(line) for line in out.read_text().splitlines()])
                if name == "first":
                    served = judge.script.served
        assert worker.returncode == 0, worker.stderr[-2000:]
        assert served == 12 and judge.script.served == 12  # the second round: no call
    first = {v["id"]: v for v in rounds[0]}
    for v in rounds[1]:
        assert v["cached"] is True and first[v["id"]]["cached"] is False
        drop = ("timings", "cached", "evaluated_at")
        assert {k: x for k, x in v.items() if k not in drop} == {
            k: x for k, x in first[v["id"]].items() if k not in drop
        }
    reset_broker(url)
