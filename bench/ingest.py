"""How fast ``veredito serve`` takes triples into the broker, with confirms.

    .venv/bin/python bench/ingest.py [--broker amqp://guest:guest@127.0.0.1:5672//]
                                     [--clients 50] [--batch 20] [--seconds 20] [--repeat 3]

Starts ``veredito serve`` (one process) and, in this process, ``--clients`` aiohttp clients that
post distinct triples (five topics, values varied per triple, about 600 characters each) as fast
as answers come back: first batches of ``--batch`` triples to ``POST /v1/triples``, then single
triples. Each answer is a 202, which ``serve`` sends only after the broker confirmed every
triple of the request. Reports triples/s, requests/s and latency percentiles (medians over
``--repeat`` runs) as JSON, and checks that the queue holds exactly the triples accepted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.chaos import make_triples  # noqa: E402
from veredito.producer import topology  # noqa: E402

TOKEN = "bench-token-2a7c9e4f1b"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_serve(broker: str, port: int) -> subprocess.Popen[str]:
    env = {**os.environ, "VEREDITO_BROKER_URL": broker, "VEREDITO_INGEST_TOKENS": TOKEN}
    env["VEREDITO_INGEST_MAX_BACKLOG"] = "10000000"
    process = subprocess.Popen(
        [sys.executable, "-m", "veredito", "serve", "--port", str(port)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    if "listening" not in process.stdout.readline():
        raise SystemExit("serve did not start")
    return process


async def load(
    base: str, bodies: list[bytes], clients: int, seconds: float
) -> tuple[int, int, list[float], float]:
    """(requests, triples accepted, latencies, elapsed)."""
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    latencies: list[float] = []
    accepted = 0
    next_body = 0
    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=connector) as session:
        deadline = time.perf_counter() + seconds

        async def client() -> None:
            nonlocal accepted, next_body
            while time.perf_counter() < deadline and next_body < len(bodies):
                body = bodies[next_body]
                next_body += 1
                started = time.perf_counter()
                async with session.post(base + "/v1/triples", data=body, headers=headers) as r:
                    answer = await r.json()
                    if r.status != 202:
                        raise SystemExit(f"HTTP {r.status}: {answer}")
                latencies.append(time.perf_counter() - started)
                accepted += len(answer["accepted"])

        began = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(clients)))
        elapsed = time.perf_counter() - began
    return len(latencies), accepted, latencies, elapsed


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def one_run(broker: str, clients: int, batch: int, seconds: float, offset: int) -> dict[str, Any]:
    topology.delete_queues(broker)
    port = free_port()
    serve = start_serve(broker, port)
    try:
        n = int(seconds * 15000)  # more than the server can take in the time
        lines, _ = make_triples(n, 0)
        triples = [json.loads(line) for line in lines]
        for i, t in enumerate(triples):
            t["id"] = f"ingest-{offset + i:08d}"
        if batch > 1:
            bodies = [
                json.dumps(triples[i : i + batch], ensure_ascii=False).encode()
                for i in range(0, len(triples), batch)
            ]
        else:
            bodies = [json.dumps(t, ensure_ascii=False).encode() for t in triples]
        requests, accepted, latencies, elapsed = asyncio.run(
            load(f"http://127.0.0.1:{port}", bodies, clients, seconds)
        )
        queued = topology.queue_depth(broker)
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=60)
    topology.delete_queues(broker)
    return {
        "triples_per_s": round(accepted / elapsed, 1),
        "requests_per_s": round(requests / elapsed, 1),
        "p50_ms": round(percentile(latencies, 0.50) * 1000, 2),
        "p99_ms": round(percentile(latencies, 0.99) * 1000, 2),
        "accepted": accepted,
        "queued": queued,
        "serve_exit": serve.returncode,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--broker", default="amqp://guest:guest@127.0.0.1:5672//")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--batch", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    report: dict[str, Any] = {"broker": args.broker.split("://")[0], "clients": args.clients}
    for label, batch in (("batches", args.batch), ("single", 1)):
        runs = [
            one_run(args.broker, args.clients, batch, args.seconds, offset=r * 10**7)
            for r in range(args.repeat)
        ]
        for run in runs:
            if run["queued"] != run["accepted"] or run["serve_exit"] != 0:
                raise SystemExit(f"lost or extra triples, or a bad exit: {run}")
        report[label] = {
            "batch": batch,
            **{
                key: statistics.median(run[key] for run in runs)
                for key in ("triples_per_s", "requests_per_s", "p50_ms", "p99_ms")
            },
            "runs": runs,
        }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
