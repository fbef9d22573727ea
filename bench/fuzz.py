"""Fuzz the untrusted entry points with the property tests' own strategies and checks.

    .venv/bin/python bench/fuzz.py [--cases 100000] [--jobs 2] [--seed N] [--only parse_claims]

Runs every property of ``tests/test_properties.py`` (``PROPERTIES``: parse_triple, read_lines,
pipeline.evaluate, parse_claims, parse_faithfulness) with ``--cases`` generated cases shared
equally among them, one process per property (``--jobs`` at a time). Only Hypothesis's generate
and shrink phases run here: the explicit regression examples run in the test suite. Prints a
table of property, cases run (shrinking included), failures and seconds, then each failure with
its minimal example; exits 1 if any property failed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hypothesis import Phase, given, seed, settings

from tests.test_properties import PROPERTIES, SETTINGS


@dataclass
class Result:
    name: str
    cases: int = 0
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0


def _describe(exc: BaseException) -> str:
    notes = "\n".join(getattr(exc, "__notes__", []))
    first = str(exc).splitlines()[0] if str(exc) else ""
    text = f"{type(exc).__name__}: {first[:300]}\n{notes}"
    return text if len(text) < 4000 else text[:4000] + "\n[...]"


def run_property(name: str, cases: int, run_seed: int | None) -> Result:
    strategy, check = PROPERTIES[name]
    result = Result(name)

    def counted(case: object) -> None:
        result.cases += 1
        check(case)

    test = settings(
        SETTINGS, max_examples=cases, database=None, phases=(Phase.generate, Phase.shrink)
    )(given(strategy)(counted))
    if run_seed is not None:
        test = seed(run_seed)(test)
    started = time.perf_counter()
    try:
        test()
    except BaseExceptionGroup as group:  # several distinct bugs
        result.failures = [_describe(e) for e in group.exceptions]
    except Exception as exc:
        result.failures = [_describe(exc)]
    result.seconds = time.perf_counter() - started
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=100_000, help="total, shared equally")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--seed", type=int, default=None, help="repeat a run exactly")
    parser.add_argument("--only", action="append", choices=sorted(PROPERTIES), default=None)
    args = parser.parse_args(argv)
    names = args.only or list(PROPERTIES)
    share = max(1, args.cases // len(names))

    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=max(1, min(args.jobs, len(names)))) as pool:
        futures = [pool.submit(run_property, name, share, args.seed) for name in names]
        results = [f.result() for f in futures]
    elapsed = time.perf_counter() - started

    width = max(len(name) for name in names)
    print(f"{'property':<{width}}  {'cases':>8}  {'failures':>8}  {'seconds':>8}")
    for r in results:
        print(f"{r.name:<{width}}  {r.cases:>8}  {len(r.failures):>8}  {r.seconds:>8.1f}")
    total_failures = sum(len(r.failures) for r in results)
    print(
        f"{'total':<{width}}  {sum(r.cases for r in results):>8}  {total_failures:>8}  "
        f"{elapsed:>8.1f}  (wall, {args.jobs} jobs)"
    )
    for r in results:
        for failure in r.failures:
            print(f"\n--- {r.name} ---\n{failure}")
    return 1 if total_failures else 0


if __name__ == "__main__":
    sys.exit(main())
