"""Releases compared on a big store (spec §18, issue 29): ``GET /v1/compare`` on PostgreSQL with a
million verdicts, and whether the release gauges' refresh slows the sink.

    .venv/bin/python bench/release_compare.py [--verdicts 1000000] [--apps 10] [--releases 3]
        [--sink 50000] [--refresh-every 0] [--ingest 20] [--keep]

1. A fresh database (``veredito_bench_releases``) filled through the store's own write path (what
   ``veredito results --to postgresql://…`` runs), batches of 5,000: ``--verdicts`` distinct
   verdicts over ``--apps`` apps with ``--releases`` releases each (10 × 3 = 30 by default), one
   after the other in time over 30 days; each verdict 1 to 4 claims, the releases' hallucination
   rates apart (12 % to 30 %), categories and confidences drawn per claim (seeded).
2. ``veredito serve --store`` (one process): ``GET /v1/compare?app=A`` (the newest release against
   the one before) for every app, three rounds, each request timed; ``GET /v1/releases`` too.
3. The release gauges' refresh (``veredito.web.releases.refresh_releases``), timed alone.
4. The sink with and without it: ``--sink`` more verdicts written in batches of 500 (the sink's
   batch), once alone and once while the refresh runs in another thread of the same process
   (sharing its interpreter: harsher than serve in a process of its own), back to back or every
   ``--refresh-every`` seconds (serve runs it every ``VEREDITO_REVIEW_REFRESH``, 60 s).

5. Ingest with and without it: ``veredito serve --store`` (one process, RabbitMQ) taking distinct
   triples over ``POST /v1/triples`` (``bench/ingest.py``'s 50 clients, batches of 20) for
   ``--ingest`` seconds, once with serve's refreshes at their default (every 60 s: the window
   starts after the first one ended, so none runs in it) and once with them back to back
   (``VEREDITO_REVIEW_REFRESH=0.05``), twice each, taking turns; triples/s, and the queue checked
   to hold exactly the accepted triples.

Prints one JSON object. ``--keep`` leaves the database for another run (skipping step 1 when it
already holds the verdicts).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from veredito.store.sql import open_sql_store  # noqa: E402
from veredito.worker.verdict import CATEGORIES  # noqa: E402

ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
DATABASE = "veredito_bench_releases"
URL = f"postgresql://postgres@127.0.0.1:5432/{DATABASE}"
TOKEN = "bench-read-4f9a1c7e2b"
BROKER = "amqp://guest:guest@127.0.0.1:5672//"
START = datetime(2026, 10, 1, tzinfo=UTC)
WORDS = ("prazo", "multa", "contrato", "CNPJ", "Procon", "Lei", "artigo", "dias", "reembolso",
         "cláusula", "nota fiscal", "ICMS", "rescisão", "garantia")  # fmt: skip


def make_verdict(n: int, app: str, release: str, rate: float, at: datetime,
                 rng: random.Random) -> bytes:  # fmt: skip
    claims = []
    for k in range(rng.randint(1, 4)):
        bad = rng.random() < rate / 1.6
        claims.append({
            "text": f"{rng.choice(WORDS)} {n}-{k}: {rng.choice(WORDS)} {rng.randint(1, 90)} dias",
            "verdict": rng.choice(("invented", "contradicted", "partial")) if bad else "grounded",
            "category": rng.choice(CATEGORIES) if bad else None,
            "chunk_idx": None if bad else rng.randint(0, 2), "source": "rules",
            "confidence": round(rng.uniform(0.5, 0.99), 3),
        })  # fmt: skip
    flagged = [c for c in claims if c["verdict"] != "grounded"]
    categories: dict[str, int] = {}
    for claim in flagged:
        categories[claim["category"]] = categories.get(claim["category"], 0) + 1
    verdict = {
        "id": f"{app}-{n:08d}", "status": "ok" if rng.random() > 0.02 else "failed",
        "error": None, "judge": {"kind": "rules", "model": None}, "claims": claims,
        "score": round(1 - len(flagged) / len(claims), 3), "hallucinated": bool(flagged),
        "categories": categories,
        "hallucination_confidence": max((c["confidence"] for c in flagged), default=None),
        "metadata": {"app": app, "release": release},
        "evaluated_at": at.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
    }  # fmt: skip
    return json.dumps(verdict, ensure_ascii=False).encode()


def plan(apps: int, releases: int) -> list[tuple[str, str, float]]:
    """(app, release, hallucination rate) for every release, in time order within an app."""
    rng = random.Random(29)
    return [(f"bot-{a:02d}", f"2026.{r + 10}.{a}", round(rng.uniform(0.12, 0.30), 3))
            for a in range(apps) for r in range(releases)]  # fmt: skip


def fill(total: int, apps: int, releases: int) -> dict[str, Any]:
    import psycopg

    with psycopg.connect(ADMIN, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{DATABASE}"')
        admin.execute(f'CREATE DATABASE "{DATABASE}"')
    store = open_sql_store(URL)
    rng = random.Random(7)
    each = plan(apps, releases)
    per_release = total // len(each)
    span = timedelta(days=30) / releases
    batch: list[bytes] = []
    started = time.perf_counter()
    written = 0
    for index, (app, release, rate) in enumerate(each):
        first = START + span * (index % releases)
        for n in range(per_release):
            at = first + span * (n / per_release)
            batch.append(make_verdict(index * per_release + n, app, release, rate, at, rng))
            if len(batch) == 5000:
                written += store.write(batch)[0]
                batch = []
    if batch:
        written += store.write(batch)[0]
    seconds = time.perf_counter() - started
    with store._using() as conn:  # as an operator's autovacuum would have by now
        conn.execute("COMMIT")
        conn.execute("VACUUM ANALYZE verdicts")
        conn.execute("VACUUM ANALYZE claims")
    store.close()
    return {"verdicts": written, "seconds": round(seconds, 1),
            "verdicts_per_s": round(written / seconds)}  # fmt: skip


def get(base: str, path: str) -> tuple[float, Any]:
    request = urllib.request.Request(base + path)
    request.add_header("Authorization", f"Bearer {TOKEN}")
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=120) as response:
        body = json.loads(response.read())
    return time.perf_counter() - started, body


def through_serve(apps: int) -> dict[str, Any]:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("VEREDITO_")}
    env.update(VEREDITO_READ_TOKENS=TOKEN, VEREDITO_LOG_LEVEL="WARNING")
    process = subprocess.Popen(
        [sys.executable, "-m", "veredito", "serve", "--port", str(port), "--store", URL],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert process.stdout is not None and "listening" in process.stdout.readline()
    base = f"http://127.0.0.1:{port}"
    compare, listing = [], []
    regressed = 0
    try:
        for _ in range(3):
            for a in range(apps):
                seconds, body = get(base, f"/v1/compare?app=bot-{a:02d}")
                compare.append(seconds)
                regressed += bool(body["regressed"])
                seconds, _ = get(base, f"/v1/releases?app=bot-{a:02d}")
                listing.append(seconds)
    finally:
        process.terminate()
        process.wait(timeout=60)

    def figures(times: list[float]) -> dict[str, float]:
        ordered = sorted(times)
        return {"requests": len(times), "median_ms": round(statistics.median(times) * 1000, 1),
                "p95_ms": round(ordered[int(len(ordered) * 0.95) - 1] * 1000, 1),
                "max_ms": round(max(times) * 1000, 1)}  # fmt: skip

    return {"compare": figures(compare), "releases": figures(listing),
            "comparisons_regressed": regressed // 3}  # fmt: skip


def refresh_once() -> dict[str, Any]:
    from prometheus_client import CollectorRegistry

    from veredito.serving.release_gauges import ReleaseGauges
    from veredito.web.releases import refresh_releases

    store = open_sql_store(URL)
    gauges = ReleaseGauges(CollectorRegistry())
    try:
        started = time.perf_counter()
        published = refresh_releases(store, gauges)
        return {"seconds": round(time.perf_counter() - started, 2), **published}
    finally:
        store.close()


def sink(
    count: int, apps: int, with_refresh: bool, offset: int, every: float = 0.0
) -> dict[str, Any]:
    from prometheus_client import CollectorRegistry

    from veredito.serving.release_gauges import ReleaseGauges
    from veredito.web.releases import refresh_releases

    rng = random.Random(offset)
    at = START + timedelta(days=31)
    bodies = [make_verdict(offset + n, f"bot-{n % apps:02d}", "2026.99.0", 0.2,
                           at + timedelta(seconds=n), rng) for n in range(count)]  # fmt: skip
    stop = threading.Event()
    refreshes = [0]

    def refresher() -> None:
        store = open_sql_store(URL)
        gauges = ReleaseGauges(CollectorRegistry())
        try:
            while not stop.is_set():
                refresh_releases(store, gauges)
                refreshes[0] += 1
                stop.wait(every)
        finally:
            store.close()

    thread = threading.Thread(target=refresher, daemon=True)
    if with_refresh:
        thread.start()
    store = open_sql_store(URL)
    try:
        started = time.perf_counter()
        for i in range(0, count, 500):
            store.write(bodies[i : i + 500])
        seconds = time.perf_counter() - started
    finally:
        stop.set()
        if with_refresh:
            thread.join()
        store.close()
    return {"verdicts": count, "verdicts_per_s": round(count / seconds),
            "refreshes_meanwhile": refreshes[0]}  # fmt: skip


def ingest(seconds: float, every: float, offset: int) -> dict[str, Any]:
    """Triples/s into ``serve --store`` while its gauges refresh every ``every`` seconds."""
    import asyncio

    from bench.ingest import TOKEN as INGEST
    from bench.ingest import free_port, load, make_triples
    from veredito.producer import topology

    topology.delete_queues(BROKER)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("VEREDITO_")}
    env.update(VEREDITO_READ_TOKENS=TOKEN, VEREDITO_INGEST_TOKENS=INGEST,
               VEREDITO_BROKER_URL=BROKER, VEREDITO_INGEST_MAX_BACKLOG="10000000",
               VEREDITO_REVIEW_REFRESH=str(every), VEREDITO_LOG_LEVEL="WARNING")  # fmt: skip
    process = subprocess.Popen(
        [sys.executable, "-m", "veredito", "serve", "--port", str(port), "--store", URL],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert process.stdout is not None and "listening" in process.stdout.readline()
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120  # the first refresh (all gauges) ends before timing
        while "veredito_release_hallucination_rate{" not in _metrics(base):
            if time.monotonic() > deadline:
                raise SystemExit("serve's first release-gauge refresh did not end in 120 s")
            time.sleep(0.2)
        lines, _ = make_triples(int(seconds * 6000), 0)
        triples = [json.loads(line) for line in lines]
        for i, t in enumerate(triples):
            t["id"] = f"ingest-{offset + i:09d}"
        bodies = [json.dumps(triples[i : i + 20], ensure_ascii=False).encode()
                  for i in range(0, len(triples), 20)]  # fmt: skip
        _, accepted, latencies, elapsed = asyncio.run(load(base, bodies, 50, seconds))
        queued = topology.queue_depth(BROKER)
    finally:
        process.terminate()
        process.wait(timeout=60)
    topology.delete_queues(BROKER)
    if queued != accepted:
        raise SystemExit(f"the queue holds {queued} triples, serve accepted {accepted}")
    return {"triples_per_s": round(accepted / elapsed), "accepted": accepted,
            "p99_ms": round(sorted(latencies)[int(len(latencies) * 0.99)] * 1000, 1)}  # fmt: skip


def _metrics(base: str) -> str:
    with urllib.request.urlopen(base + "/metrics", timeout=30) as response:
        return str(response.read().decode())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--verdicts", type=int, default=1_000_000)
    parser.add_argument("--apps", type=int, default=10)
    parser.add_argument("--releases", type=int, default=3, help="releases per app")
    parser.add_argument("--sink", type=int, default=50_000)
    parser.add_argument("--keep", action="store_true", help="keep (and reuse) the database")
    parser.add_argument(
        "--refresh-every",
        type=float,
        default=0.0,
        help="seconds between refreshes beside the sink (serve's default is 60; 0: back to back)",
    )
    parser.add_argument(
        "--ingest",
        type=float,
        default=20.0,
        help="seconds of HTTP ingest with and without the refresh (0: skip)",
    )
    args = parser.parse_args()
    result: dict[str, Any] = {"verdicts": args.verdicts, "apps": args.apps,
                              "releases": args.apps * args.releases}  # fmt: skip
    reuse = False
    if args.keep:
        try:
            store = open_sql_store(URL)
            with store._using() as conn:
                reuse = conn.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0] >= args.verdicts
            store.close()
        except Exception:
            reuse = False
    if not reuse:
        result["fill"] = fill(args.verdicts, args.apps, args.releases)
    result["serve"] = through_serve(args.apps)
    result["refresh"] = refresh_once()
    fresh = 10**9 + int(time.time()) % 10**6 * 10**3  # ids no run wrote before (--keep)
    result["sink alone"] = sink(args.sink, args.apps, False, fresh)
    key = (
        f"sink with the refresh every {args.refresh_every:g} s"
        if args.refresh_every
        else ("sink with the refresh back to back")
    )
    result[key] = sink(args.sink, args.apps, True, fresh + 10**7, args.refresh_every)
    if args.ingest:
        runs: dict[str, list[dict[str, Any]]] = {"every 60 s": [], "back to back": []}
        for turn in range(4):
            key = ("every 60 s", "back to back")[turn % 2]
            every = 60.0 if turn % 2 == 0 else 0.05
            runs[key].append(ingest(args.ingest, every, fresh + (turn + 3) * 10**7))
        for key, each in runs.items():
            result[f"ingest, refreshes {key}"] = each
    if not args.keep:
        import psycopg

        with psycopg.connect(ADMIN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
