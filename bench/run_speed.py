"""Speed of ``veredito run --judge llm`` on distinct triples: triples per second and CPU per triple.

    .venv/bin/python bench/run_speed.py [--n 2000] [--concurrency 400] [--latency 0.2]
                                        [--prompts claims] [--repeat 3] [--seed 1]

Writes ``--n`` distinct triples from ``bench/corpus.py`` to a temporary JSONL file, starts the
local OpenAI-compatible test server (``tests/llm_server.py``, every reply after ``--latency``
seconds) and runs ``veredito run --judge llm`` over the file once with the rules cross-check on
(``VEREDITO_CROSS_CHECK=flag``, the default) and once with it off, ``--repeat`` times each. The
rate is triples over the command's wall time (start-up included, about 0.5 s of it); the CPU is
the command's user plus system time (``wait4``), divided by the triples. Medians as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.corpus import triples  # noqa: E402
from bench.throughput import free_port, wait_for_port  # noqa: E402


def one_run(path: Path, args: argparse.Namespace, base_url: str, cross_check: str) -> dict:
    env = {
        **os.environ,
        "VEREDITO_LLM_BASE_URL": base_url,
        "VEREDITO_CROSS_CHECK": cross_check,
        "VEREDITO_LOG_LEVEL": "WARNING",
    }
    command = [
        sys.executable,
        "-m",
        "veredito",
        "run",
        str(path),
        "--judge",
        "llm",
        "--prompts",
        args.prompts,
        "--concurrency",
        str(args.concurrency),
        "--no-progress",
        "--out",
        os.devnull,
    ]
    started = time.perf_counter()
    child = subprocess.Popen(command, env=env, cwd=ROOT, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"veredito run exited with {os.waitstatus_to_exitcode(status)}")
    cpu = usage.ru_utime + usage.ru_stime
    return {
        "triples_per_s": args.n / wall,
        "cpu_ms_per_triple": cpu / args.n * 1000,
        "peak_rss_mib": usage.ru_maxrss / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=400)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--prompts", default="claims")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "tests" / "llm_server.py"),
            "--port",
            str(port),
            "--latency",
            str(args.latency),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    results: dict[str, list[dict]] = {"flag": [], "off": []}
    try:
        wait_for_port(port)
        base_url = f"http://127.0.0.1:{port}/v1"
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "triples.jsonl"
            with path.open("w", encoding="utf-8") as f:
                for t in triples(args.n, args.seed):
                    f.write(json.dumps(t, ensure_ascii=False) + "\n")
            for _ in range(args.repeat):
                for cross_check in ("flag", "off"):
                    run = one_run(path, args, base_url, cross_check)
                    results[cross_check].append(run)
                    print(
                        cross_check,
                        json.dumps({k: round(v, 3) for k, v in run.items()}),
                        file=sys.stderr,
                    )
    finally:
        server.terminate()
        server.wait(timeout=30)

    out: dict[str, object] = {
        "n": args.n,
        "concurrency": args.concurrency,
        "latency_s": args.latency,
        "prompts": args.prompts,
        "runs": args.repeat,
    }
    for cross_check, runs in results.items():
        out[f"cross_check_{cross_check}"] = {
            key: round(statistics.median(r[key] for r in runs), 2) for key in runs[0]
        }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
