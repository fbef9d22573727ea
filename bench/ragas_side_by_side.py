"""RAGAS Faithfulness and veredito on the same samples, against the same test judge, in one run.

    python3 -m venv .venv-ragas
    .venv-ragas/bin/pip install -e '.[ragas]'      # ragas 0.4.3 and the pins it needs to import
    .venv-ragas/bin/python bench/ragas_side_by_side.py [--n 400] [--concurrency 16,200]

Not part of the test suite or CI: RAGAS pulls in LangChain and much else. Both sides get the
same ``--n`` distinct triples (``bench/corpus.py``) and call the same local OpenAI-compatible
test server (``tests/llm_server.py``, ``--latency`` per reply; it answers RAGAS's two prompts
too). For each concurrency, each side runs in a fresh child process (imports and start-up left
out of the figures), with that many samples in flight:

- **RAGAS**: ``Faithfulness`` (statement extraction, then one NLI call) through
  ``LangchainLLMWrapper(ChatOpenAI)``, ``single_turn_ascore`` per sample;
- **veredito**: ``veredito run``'s code path (``run_lines``) with its defaults: the LLM judge,
  both prompts, the rules cross-check on.

Printed per side and concurrency: samples/s, LLM calls per sample (counted by the server) and
CPU milliseconds per sample (the child's user plus system time over the scoring).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def cpu() -> float:
    usage = os.times()
    return usage.user + usage.system


_RAGAS: dict[str, Any] = {}


async def score_ragas(samples: list[dict[str, Any]], base_url: str, concurrency: int) -> None:
    import warnings

    warnings.filterwarnings("ignore")
    from langchain_openai import ChatOpenAI
    from ragas.dataset_schema import SingleTurnSample
    from ragas.llms import LangchainLLMWrapper
    from ragas.metrics import Faithfulness

    if "metric" not in _RAGAS:  # one client for the warm-up and the run, as a user would keep
        llm = LangchainLLMWrapper(
            ChatOpenAI(model="gpt-4o-mini", base_url=base_url, api_key="test", max_retries=0)
        )
        _RAGAS["metric"] = Faithfulness(llm=llm)
    metric = _RAGAS["metric"]
    limit = asyncio.Semaphore(concurrency)

    async def one(t: dict[str, Any]) -> float:
        sample = SingleTurnSample(
            user_input=t["query"], response=t["answer"], retrieved_contexts=t["context"]
        )
        async with limit:
            return float(await metric.single_turn_ascore(sample))

    await asyncio.gather(*(one(t) for t in samples))


async def score_veredito(samples: list[dict[str, Any]], base_url: str, concurrency: int) -> None:
    from veredito.producer.reader import read_lines
    from veredito.worker.run import run_lines
    from veredito.worker.settings import Settings

    os.environ["VEREDITO_LLM_BASE_URL"] = base_url
    settings = Settings(concurrency=concurrency)
    data = "".join(json.dumps(t, ensure_ascii=False) + "\n" for t in samples)
    summary = await run_lines(read_lines(io.StringIO(data)), settings, "bench", io.StringIO())
    if summary.ok != len(samples):
        raise SystemExit(f"veredito: {summary.ok} of {len(samples)} evaluated")


def served(base_url: str) -> int:
    with urllib.request.urlopen(base_url + "/_served") as response:
        return int(json.loads(response.read())["served"])


def child(side: str, n: int, seed: int, base_url: str, concurrency: int) -> dict[str, float]:
    from bench.corpus import triples

    samples = list(triples(n, seed))
    runner = score_ragas if side == "ragas" else score_veredito

    async def both() -> tuple[int, float, float]:  # one loop: RAGAS's client belongs to it
        await runner(samples[:8], base_url, 8)  # imports, prompt compilation, connections
        calls, started, used = served(base_url), time.perf_counter(), cpu()
        await runner(samples, base_url, concurrency)
        return calls, time.perf_counter() - started, cpu() - used

    calls, wall, used = asyncio.run(both())
    return {
        "samples_per_s": n / wall,
        "llm_calls_per_sample": (served(base_url) - calls) / n,
        "cpu_ms_per_sample": used / n * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=400)
    parser.add_argument("--concurrency", default="16,200")
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--base-url", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        side, _, level = args.child.partition(":")
        print(json.dumps(child(side, args.n, args.seed, args.base_url, int(level))))
        return

    from bench.throughput import free_port, wait_for_port

    port = free_port()
    server = subprocess.Popen(
        [
            *(sys.executable, str(ROOT / "tests" / "llm_server.py")),
            *("--port", str(port), "--latency", str(args.latency)),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base_url = f"http://127.0.0.1:{port}/v1"
    table: dict[str, dict[str, float]] = {}
    try:
        wait_for_port(port)
        for level in (int(c) for c in args.concurrency.split(",")):
            for side in ("ragas", "veredito"):
                out = subprocess.run(
                    [
                        *(sys.executable, __file__, "--child", f"{side}:{level}"),
                        *("--n", str(args.n), "--seed", str(args.seed), "--base-url", base_url),
                    ],
                    check=True,
                    capture_output=True,
                    text=True,
                    # RAGAS's usage tracking posts from the event loop; with no route out it
                    # stalls each batch ~5 s on DNS. Off, as anyone would run it offline.
                    env={
                        **os.environ,
                        "VEREDITO_LOG_LEVEL": "WARNING",
                        "RAGAS_DO_NOT_TRACK": "true",
                    },
                ).stdout
                row = json.loads(out.strip().splitlines()[-1])
                table[f"{side}@{level}"] = {k: round(v, 2) for k, v in row.items()}
                print(side, level, json.dumps(table[f"{side}@{level}"]), file=sys.stderr)
    finally:
        server.terminate()
        server.wait(timeout=30)
    for level in args.concurrency.split(","):
        r, v = table[f"ragas@{level}"], table[f"veredito@{level}"]
        table[f"speedup@{level}"] = {
            "samples_per_s": round(v["samples_per_s"] / r["samples_per_s"], 1),
            "cpu_per_sample": round(r["cpu_ms_per_sample"] / v["cpu_ms_per_sample"], 1),
        }
    print(json.dumps({"n": args.n, "latency_s": args.latency, **table}))


if __name__ == "__main__":
    main()
