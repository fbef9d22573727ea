"""Resident memory of the rules judge over many distinct triples, in one process.

    .venv/bin/python bench/rules_memory.py [--n 100000] [--seed 1] [--engine re|hyperscan|auto]

Judges ``--n`` distinct ``bench/corpus.py`` triples (``veredito run --judge rules``'s code,
:func:`~veredito.worker.judges.rules.judge_triple`) one after the other and prints the process's
RSS (``/proc/self/status``) after 1,000, 10,000, 50,000 and ``--n`` of them, as JSON: the chunk
caches fill by about 1,400 triples (4,096 chunks), so RSS should stay flat from 10,000 on. This
is the judge alone; ``bench/memory.py`` measures a whole worker through a broker.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--engine", choices=("re", "hyperscan", "auto"), default="auto")
    args = parser.parse_args()
    os.environ["VEREDITO_RULES_ENGINE"] = args.engine

    from bench.corpus import triples
    from veredito.producer.triple import parse_triple
    from veredito.worker.judges.rules import judge_triple
    from veredito.worker.rules.scan import engine

    marks = sorted({m for m in (1_000, 10_000, 50_000, args.n) if m <= args.n})
    found: dict[str, float] = {}
    started = time.perf_counter()
    for i, row in enumerate(triples(args.n, args.seed), start=1):
        judge_triple(parse_triple(row))
        if i in marks:
            found[f"rss_mib_after_{i}"] = round(rss_mib(), 1)
    out = {
        "engine": engine(),
        "triples": args.n,
        **found,
        "seconds": round(time.perf_counter() - started, 1),
    }
    if 10_000 in marks and args.n > 10_000:
        growth = found[f"rss_mib_after_{args.n}"] / found["rss_mib_after_10000"] - 1
        out["growth_after_10000"] = f"{100 * growth:+.1f} %"
    print(json.dumps(out))


if __name__ == "__main__":
    main()
