"""Several workers sharing one judge's rate limit, then the same triples again from the cache.

    .venv/bin/python bench/shared_limits.py [--workers 4] [--rpm 600] [--n 600]
    .venv/bin/python bench/shared_limits.py --rpm 1200 --judge-per-second 22 --n 1800
    .venv/bin/python bench/shared_limits.py --rpm 1200 --judge-per-second 15 --n 2700

1. starts the local test judge answering 429 (``Retry-After: 1``) above ``--rpm`` requests a
   minute with a second of burst (or ``--judge-rpm``), or, with ``--judge-per-second``, above
   that many requests in any sliding second (as providers enforce per-minute limits over short
   windows); and ``--workers`` worker processes (64 evaluations in flight each, the claims
   prompt only) with ``VEREDITO_LLM_RPM=--rpm`` shared through Redis;
2. produces ``--n`` distinct triples and collects their verdicts: the judge's accepted rate over
   the run, after its first minute, over its busiest 10 s and in its busiest second, the 429s it
   answered, and the verdicts that failed;
3. unless ``--no-cache-round``, produces the same triples again (new messages, so no done marker
   applies) and collects them: how many the cache answered and how many calls reached the judge.

The broker and Redis come from ``VEREDITO_TEST_RABBITMQ_URL`` and ``VEREDITO_TEST_REDIS_URL`` when
set (a vhost and a db of one's own). Prints a JSON report.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.judge_log import PerSecondScript  # noqa: E402
from tests.judge_log import busiest as busiest_in  # noqa: E402
from tests.llm_server import ServerThread  # noqa: E402
from tests.test_broker_e2e import reset_broker, running_worker, veredito  # noqa: E402

BROKER = os.environ.get("VEREDITO_TEST_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672//")
REDIS = os.environ.get("VEREDITO_TEST_REDIS_URL", "redis://127.0.0.1:6379/12")


def triples(n: int) -> list[str]:
    return [
        json.dumps({"id": f"lim-{i:05d}", "query": f"Qual o prazo do pedido {i}?",
                    "context": [f"O prazo do pedido {i} é de {i % 28 + 2} dias úteis."],
                    "answer": f"O prazo é de {i % 28 + 2} dias úteis.",
                    "metadata": {"app": f"app-{i % 3}"}}, ensure_ascii=False)
        for i in range(n)
    ]  # fmt: skip


def busiest(times: list[float], window: float) -> int:
    best, j = 0, 0
    for i, t in enumerate(times):
        while times[j] < t - window:
            j += 1
        best = max(best, i - j + 1)
    return best


def collect(env: dict[str, str], source: Path, out: Path, n: int) -> list[dict[str, object]]:
    assert veredito("produce", str(source), env=env).returncode == 0
    done = veredito("results", "--out", str(out), "--limit", str(n), "--idle-timeout", "120",
                    env=env, timeout=1800)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(done.stderr[-2000:])
    return [json.loads(line) for line in out.read_text().splitlines()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--rpm", type=int, default=600)
    parser.add_argument("--n", type=int, default=600)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument(
        "--judge-rpm", type=int, help="the judge's own limit, if not --rpm (below it: AIMD at work)"
    )
    parser.add_argument(
        "--judge-per-second", type=int, help="the judge refuses above this many in any second"
    )
    parser.add_argument("--no-cache-round", action="store_true")
    args = parser.parse_args()
    reset_broker(BROKER)
    client = redis.Redis.from_url(REDIS)  # a fresh model name below: no shared state to clear
    stale = list(client.scan_iter("veredito:done:*")) + list(client.scan_iter("veredito:cache:*"))
    if stale:
        client.delete(*stale)
    client.close()
    judge_rpm = None if args.judge_per_second else args.judge_rpm or args.rpm
    script = PerSecondScript(
        rpm_limit=judge_rpm, per_second=args.judge_per_second or 0, record=False,
        latency=args.latency,
    )  # fmt: skip
    report: dict[str, object] = {
        "workers": args.workers, "rpm": args.rpm, "judge_rpm": judge_rpm,
        "judge_per_second": args.judge_per_second, "n": args.n,
    }  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp, ServerThread(script) as judge:
        source = Path(tmp) / "in.jsonl"
        source.write_text("\n".join(triples(args.n)) + "\n", encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith("VEREDITO_")}
        env.update(VEREDITO_BROKER_URL=BROKER, VEREDITO_LLM_BASE_URL=judge.base_url,
                   VEREDITO_LLM_API_KEY="sk-bench", VEREDITO_PROMPTS="claims",
                   VEREDITO_LLM_MODEL=f"gpt-4o-mini-{uuid.uuid4().hex[:6]}",
                   VEREDITO_LLM_RPM=str(args.rpm), VEREDITO_REDIS_URL=REDIS)  # fmt: skip
        with contextlib.ExitStack() as stack:
            for _ in range(args.workers):
                stack.enter_context(running_worker(env, 64))
            started = time.monotonic()
            first = collect(env, source, Path(tmp) / "first.jsonl", args.n)
            first_seconds = time.monotonic() - started
            times = sorted(script.accepted_at)
            span = times[-1] - times[0]
            later = [t for t in times if t >= times[0] + 60]
            later_span = later[-1] - later[0] if len(later) > 1 else 0
            report["first_round"] = {
                "seconds": round(first_seconds, 1),
                "judge_accepted": len(times),
                "judge_rate_per_min": round(len(times) / span * 60) if span else None,
                "judge_rate_per_s_after_first_minute": round(len(later) / later_span, 2)
                if later_span
                else None,
                "busiest_10s_per_min": busiest(times, 10.0) * 6,
                "busiest_second": busiest_in(times, 1.0),
                "judge_answered_429": script.rejected_429,
                "statuses": dict(Counter(str(v["status"]) for v in first)),
                "cost_usd": round(sum(float(v["cost_usd"] or 0) for v in first), 6),  # type: ignore[arg-type]
            }
            if args.no_cache_round:
                reset_broker(BROKER)
                print(json.dumps(report, indent=2))
                return
            served = script.served
            started = time.monotonic()
            second = collect(env, source, Path(tmp) / "second.jsonl", args.n)
            report["second_round"] = {
                "seconds": round(time.monotonic() - started, 1),
                "cached": sum(1 for v in second if v["cached"]),
                "judge_calls": script.served - served,
                "statuses": dict(Counter(str(v["status"]) for v in second)),
            }
    reset_broker(BROKER)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
