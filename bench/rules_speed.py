"""Speed of the rules judge on distinct, realistic triples, on one core.

    .venv/bin/python bench/rules_speed.py [--n 2000] [--repeat 3] [--seed 1] [--tree DIR]

The triples come from ``bench/corpus.py``: three chunks of about 610 characters and an answer of
about 580, every chunk different, so no cache sees the same text twice. Each of ``--repeat``
runs judges the same ``--n`` triples in a fresh process (cold caches, as for new traffic) in one
thread; the median triples per second and CPU microseconds per triple are printed as JSON. The
``chunks_cached`` figure runs the same triples a second time in the last process, so every chunk
index comes from the judge's cache: a RAG app that retrieves the same chunks again sees that
(with ``--n`` above about 1,300 the 4,096 cached chunks no longer hold them all).
``VEREDITO_RULES_ENGINE=re`` or ``=hyperscan`` chooses the engine (``docs/rules.md``); the
one it ran is printed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _engine() -> str:
    try:
        from veredito.worker.rules.scan import engine
    except ImportError:  # a checkout from before the compiled scan (issue 21)
        return "re"
    return engine()


def one_run(n: int, seed: int) -> dict[str, float | str]:
    from bench.corpus import triples
    from veredito.producer.triple import parse_triple
    from veredito.worker.judges.rules import judge_triple

    batch = [parse_triple(t) for t in triples(n, seed)]
    warm = [parse_triple(t) for t in triples(50, seed + 1000)]
    for t in warm:  # compile the patterns and load the gazetteers first
        judge_triple(t)
    started, cpu = time.perf_counter(), time.process_time()
    for t in batch:
        judge_triple(t)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    again = time.perf_counter()
    for t in batch:
        judge_triple(t)
    cached = time.perf_counter() - again
    return {
        "engine": _engine(),
        "triples_per_s": n / wall,
        "cpu_us_per_triple": cpu / n * 1e6,
        "triples_per_s_chunks_cached": n / cached,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--tree",
        default=None,
        help="judge with another checkout's code: the folder holding its veredito package "
        "(scripts/typecheck-tree.sh makes one), to compare before and after",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.tree:
        sys.path.insert(0, str(Path(args.tree).resolve()))
    if args.child:
        print(json.dumps(one_run(args.n, args.seed)))
        return
    runs = []
    for _ in range(args.repeat):
        out = subprocess.run(
            [sys.executable, __file__, "--child", "--n", str(args.n), "--seed", str(args.seed)]
            + (["--tree", args.tree] if args.tree else []),
            check=True,
            capture_output=True,
            text=True,
        )
        runs.append(json.loads(out.stdout))
    print(
        json.dumps(
            {
                "triples": args.n,
                "runs": args.repeat,
                "engine": runs[0]["engine"],
                **{
                    k: round(statistics.median(float(r[k]) for r in runs), 1)
                    for k in runs[0]
                    if k != "engine"
                },
                "each_run_triples_per_s": [round(r["triples_per_s"]) for r in runs],
            }
        )
    )


if __name__ == "__main__":
    main()
