"""The two ends of the pipe: ``produce`` into the broker, ``results`` out of it into JSONL.

    .venv/bin/python bench/io_speed.py [--n 20000] [--repeat 3] [--broker amqp://…]

1. ``veredito produce`` publishes ``--n`` distinct triples (about 600 characters each) from a
   file, every one confirmed by the broker; timed as a whole process (start-up included).
2. ``veredito results`` consumes ``--n`` distinct verdicts (real verdicts of those triples by the
   rules judge, about 650 bytes each) into a JSONL file, fsyncing each batch before acking it;
   timed as a whole process.

Medians of ``--repeat`` runs, as JSON. The targets of issue 9: at least 5,000 per second each.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.chaos import make_triples  # noqa: E402
from veredito.producer import topology  # noqa: E402
from veredito.producer.confirms import Publisher  # noqa: E402
from veredito.worker.judges.rules import RulesJudge  # noqa: E402
from veredito.worker.pipeline import Pipeline  # noqa: E402
from veredito.worker.publish import verdict_message  # noqa: E402


def run(args: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "veredito", *args], env=env, cwd=ROOT, capture_output=True, text=True
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(done.stderr[-2000:])
    return elapsed


async def verdicts(triples: list[dict[str, object]]) -> list[object]:
    pipeline = Pipeline(RulesJudge())
    return [(await pipeline.evaluate({"triple": t})).verdict for t in triples]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--broker", default="amqp://guest:guest@127.0.0.1:5672//")
    args = parser.parse_args()
    env = {**os.environ, "VEREDITO_BROKER_URL": args.broker}
    lines, _ = make_triples(args.n, 0)
    judged = asyncio.run(verdicts([json.loads(line) for line in lines]))
    messages = [verdict_message(v) for v in judged]  # type: ignore[arg-type]
    produce_rates, results_rates = [], []
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "triples.jsonl"
        source.write_text("\n".join(lines) + "\n", encoding="utf-8")
        for r in range(args.repeat):
            topology.delete_queues(args.broker)
            produce_rates.append(args.n / run(["produce", str(source)], env))
            assert topology.queue_depth(args.broker) == args.n
            topology.delete_queues(args.broker)
            publisher = Publisher(args.broker, declare=(topology.verdicts_queue,)).start()
            for i in range(0, len(messages), 1000):
                publisher.publish(messages[i : i + 1000])
            publisher.close()
            out = Path(tmp) / f"verdicts-{r}.jsonl"
            seconds = run(["results", "--out", str(out), "--limit", str(args.n)], env)
            assert len(out.read_bytes().splitlines()) == args.n
            results_rates.append(args.n / seconds)
    topology.delete_queues(args.broker)
    print(
        json.dumps(
            {
                "n": args.n,
                "produce_per_s": round(statistics.median(produce_rates)),
                "results_per_s": round(statistics.median(results_rates)),
                "produce_runs": [round(x) for x in produce_rates],
                "results_runs": [round(x) for x in results_rates],
                "verdict_bytes": round(sum(len(m.body) for m in messages) / len(messages)),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
