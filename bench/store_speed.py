"""Verdicts into SQLite and PostgreSQL: the store alone, and ``veredito results`` from RabbitMQ.

    .venv/bin/python bench/store_speed.py [--n 20000] [--repeat 3] [--stores sqlite,postgresql]

1. Judges ``--n`` distinct triples of ``bench/corpus.py`` with the rules judge; every verdict
   carries its input (query, three chunks, answer: about 3 KB of JSON) and one of five apps.
2. For each store, ``--repeat`` times, into a new empty database:
   - ``store``: ``Store.write`` in batches of 500 from this process (one transaction each);
   - ``sink``: the verdicts published to ``veredito.verdicts`` first, then one
     ``veredito results --to URL --limit N`` process timed as a whole (start-up, migration,
     consuming, committing, acking), and as it reports itself from its first message taken to
     its last ack (``sink_steady``);
   - ``read``: on the full database, the review page's queries (a page of 50 with filters, and
     the counts) timed 50 times each, median in milliseconds.

Prints medians as JSON. The targets of issue 11: at least 5,000 verdicts/s into PostgreSQL from
one sink process, 10,000/s into SQLite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import corpus  # noqa: E402
from veredito.producer import topology  # noqa: E402
from veredito.producer.confirms import Publisher  # noqa: E402
from veredito.store import Filters, SQLStore, open_store  # noqa: E402
from veredito.worker.judges.rules import RulesJudge  # noqa: E402
from veredito.worker.pipeline import Pipeline  # noqa: E402
from veredito.worker.publish import verdict_message  # noqa: E402

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
PG_BENCH = "postgresql://postgres@127.0.0.1:5432/veredito_bench"
APPS = ("sac-varejo", "rh-folha", "fiscal-irpf", "saude-plano", "gov-beneficios")


async def judged(n: int) -> list[Any]:
    pipeline = Pipeline(RulesJudge())
    rng = random.Random(7)
    out = []
    for i, triple in enumerate(corpus.triples(n, seed=11)):
        triple["metadata"] = {"app": APPS[i % len(APPS)]}
        verdict = (await pipeline.evaluate({"triple": triple})).verdict
        moment = time.time() - rng.uniform(0, 7 * 86400)
        verdict.evaluated_at = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(moment)) + (
            f".{rng.randrange(10**6):06d}Z"
        )
        out.append(verdict)
    return out


def fresh(kind: str, folder: Path, run: int) -> str:
    if kind == "sqlite":
        return f"sqlite:///{folder / f'bench-{run}.db'}"
    import psycopg

    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute("DROP DATABASE IF EXISTS veredito_bench WITH (FORCE)")
        admin.execute("CREATE DATABASE veredito_bench")
    return PG_BENCH


def time_store(url: str, bodies: list[bytes]) -> float:
    store = open_store(url)
    started = time.perf_counter()
    for i in range(0, len(bodies), 500):
        store.write(bodies[i : i + 500])
    elapsed = time.perf_counter() - started
    store.close()
    return len(bodies) / elapsed


def time_sink(url: str, messages: list[Any], broker: str, batch: int) -> tuple[float, float]:
    """(verdicts/s of the whole process, start-up included; verdicts/s from its first message
    to its last ack, as it reports)."""
    topology.delete_queues(broker)
    publisher = Publisher(broker, declare=(topology.verdicts_queue,)).start()
    for i in range(0, len(messages), 1000):
        publisher.publish(messages[i : i + 1000])
    publisher.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("VEREDITO_")}
    env["VEREDITO_BROKER_URL"] = broker
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "veredito", "results", "--to", url, "--limit", str(len(messages)),
         "--batch", str(batch)],
        env=env, cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(done.stderr[-2000:])
    steady = float(done.stderr.rsplit(", ", 1)[-1].split("/s")[0])
    return len(messages) / elapsed, steady


def time_reads(url: str) -> dict[str, float]:
    store = open_store(url)
    assert isinstance(store, SQLStore)
    since = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime(time.time() - 86400))
    cases = {
        "page_all_ms": lambda: store.list_verdicts(Filters(), limit=50),
        "page_app_hallucinated_ms": lambda: store.list_verdicts(
            Filters(app="fiscal-irpf", hallucinated=True), limit=50
        ),
        "page_category_ms": lambda: store.list_verdicts(
            Filters(category="PRAZO_VALOR", app="sac-varejo"), limit=50
        ),
        "stats_last_day_ms": lambda: store.stats(Filters(since=since)),
        "get_ms": lambda: store.get("missing-id"),
    }
    out = {}
    for name, call in cases.items():
        times = []
        for _ in range(50):
            started = time.perf_counter()
            call()
            times.append((time.perf_counter() - started) * 1000)
        out[name] = round(statistics.median(times), 2)
    store.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--stores", default="sqlite,postgresql")
    parser.add_argument("--batch", type=int, default=1000, help="the sink's --batch")
    parser.add_argument("--broker", default="amqp://guest:guest@127.0.0.1:5672//")
    args = parser.parse_args()
    print(f"judging {args.n} distinct triples ...", file=sys.stderr)
    verdicts = asyncio.run(judged(args.n))
    bodies = [v.model_dump_json().encode() for v in verdicts]
    messages = [verdict_message(v) for v in verdicts]
    report: dict[str, Any] = {
        "n": args.n,
        "sink_batch": args.batch,
        "verdict_bytes": round(sum(map(len, bodies)) / len(bodies)),
        "claims_per_verdict": round(sum(len(v.claims) for v in verdicts) / len(verdicts), 2),
    }
    with tempfile.TemporaryDirectory() as tmp:
        for kind in args.stores.split(","):
            store_rates, sink_rates, steady_rates = [], [], []
            reads: dict[str, float] = {}
            for run in range(args.repeat):
                print(f"{kind}: run {run + 1}", file=sys.stderr)
                store_rates.append(time_store(fresh(kind, Path(tmp), 2 * run), bodies))
                url = fresh(kind, Path(tmp), 2 * run + 1)
                whole, steady = time_sink(url, messages, args.broker, args.batch)
                sink_rates.append(whole)
                steady_rates.append(steady)
                reads = time_reads(url)
            report[kind] = {
                "store_per_s": round(statistics.median(store_rates)),
                "sink_per_s": round(statistics.median(sink_rates)),
                "sink_steady_per_s": round(statistics.median(steady_rates)),
                "store_runs": [round(x) for x in store_rates],
                "sink_runs": [round(x) for x in sink_rates],
                "sink_steady_runs": [round(x) for x in steady_rates],
                "reads_on_full_db": reads,
            }
    topology.delete_queues(args.broker)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
