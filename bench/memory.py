"""Memory of one ``veredito worker`` over a long run of distinct triples: does it grow?

    .venv/bin/python bench/memory.py [--n 100000] [--concurrency 400] [--cross-check flag]

Publishes ``--n`` distinct triples (``bench/corpus.py``, seed 3) to an empty
``veredito.triples``, starts the local test judge (200 ms) and one worker with ``--concurrency``
evaluations in flight, counts verdicts as they arrive and reads the worker's resident set size
(``VmRSS``) when 1,000, 10,000, 50,000 and ``--n`` verdicts have arrived, and its peak
(``VmHWM``) at the end. Prints JSON: RSS in MiB at each mark, and the growth from 10,000 to the
end as a share.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from kombu import Connection

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.corpus import triples  # noqa: E402
from bench.throughput import free_port, peak_rss_mib, reset, wait_for_port  # noqa: E402
from veredito.producer import topology  # noqa: E402
from veredito.producer.publish import TriplePublisher  # noqa: E402


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--concurrency", type=int, default=400)
    parser.add_argument("--cross-check", default="flag")
    parser.add_argument("--prompts", default="claims")
    parser.add_argument("--broker", default="amqp://guest:guest@127.0.0.1:5672//")
    parser.add_argument("--timeout", type=float, default=3600)
    args = parser.parse_args()
    marks = sorted({m for m in (1_000, 10_000, 50_000, args.n) if m <= args.n})

    port = free_port()
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "llm_server.py"), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    worker = None
    try:
        wait_for_port(port)
        reset(args.broker)
        with TriplePublisher(args.broker) as publisher:
            for t in triples(args.n, 3):
                publisher.publish_object(t)
        print(f"published {args.n}", file=sys.stderr)
        env = {
            **os.environ,
            "VEREDITO_BROKER_URL": args.broker,
            "VEREDITO_LLM_BASE_URL": f"http://127.0.0.1:{port}/v1",
            "VEREDITO_PROMPTS": args.prompts,
            "VEREDITO_CROSS_CHECK": args.cross_check,
            "VEREDITO_LOG_LEVEL": "WARNING",
        }
        worker = subprocess.Popen(
            [
                *(sys.executable, "-m", "veredito", "worker"),
                *("--concurrency", str(args.concurrency), "--metrics-port", "0"),
            ],
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        seen: dict[int, float] = {}
        count = 0
        started = time.monotonic()
        done = threading.Event()
        with Connection(args.broker) as conn:
            queue = topology.verdicts_queue(args.broker)

            def on_message(_body: Any, _message: Any) -> None:
                nonlocal count
                count += 1
                if count in marks:
                    seen[count] = rss_mib(worker.pid)
                    print(f"{count}: {seen[count]:.1f} MiB", file=sys.stderr)
                    if count == marks[-1]:
                        done.set()

            with conn.Consumer(queue, callbacks=[on_message], no_ack=True, prefetch_count=1000):
                while not done.is_set():
                    if time.monotonic() - started > args.timeout:
                        raise SystemExit(f"only {count} of {args.n} verdicts in {args.timeout}s")
                    if worker.poll() is not None:
                        raise SystemExit(f"the worker exited with {worker.returncode}")
                    with contextlib.suppress(TimeoutError):
                        conn.drain_events(timeout=0.5)
        elapsed = time.monotonic() - started
        peak = peak_rss_mib(worker.pid)
        base = seen.get(10_000, seen[marks[0]])
        print(
            json.dumps(
                {
                    "n": args.n,
                    "concurrency": args.concurrency,
                    "cross_check": args.cross_check,
                    "evals_per_s": round(args.n / elapsed, 1),
                    "rss_mib": {str(k): round(v, 1) for k, v in seen.items()},
                    "peak_rss_mib": round(peak or 0.0, 1),
                    "growth_after_10k": round(seen[marks[-1]] / base - 1, 3),
                }
            )
        )
    finally:
        if worker is not None:
            worker.send_signal(signal.SIGTERM)
            try:
                worker.wait(timeout=60)
            except subprocess.TimeoutExpired:
                worker.kill()
        reset(args.broker)
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
