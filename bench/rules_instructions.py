"""Instructions per triple of the rules judge, counted by callgrind: a figure that does not drift.

    .venv/bin/python bench/rules_instructions.py [--n 200] [--seed 1] [--engine re|hyperscan]
        [--path judge|crosscheck] [--tree DIR]

Wall-clock figures on a shared 2-core VM drift by 30 % within an hour (``docs/benchmarks.md``);
instruction counts repeat to a fraction of a percent, so before/after comparisons of the rules
judge are made with them. The child process imports everything, compiles the patterns, judges 30
other triples (warm-up: the gazetteer, the compiled scan, the stem memo), then counts only the
``--n`` distinct ``bench/corpus.py`` triples (callgrind's instrumentation is switched on around
them through ``valgrind/callgrind.h``: a small C helper is compiled on the first run). ``--path
judge`` is ``veredito run --judge rules``'s work (:func:`~veredito.worker.rules.judge`);
``--path crosscheck`` is the cross-check's (:func:`~veredito.worker.rules.check_texts` of the
answer's sentences). ``--tree`` judges with another checkout's code (see ``bench/rules_speed.py``).
Needs ``valgrind`` and a C compiler; prints JSON.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
HELPER = r"""
#include <valgrind/callgrind.h>
void veredito_cg_start(void) { CALLGRIND_ZERO_STATS; CALLGRIND_START_INSTRUMENTATION; }
void veredito_cg_stop(void) { CALLGRIND_STOP_INSTRUMENTATION; CALLGRIND_DUMP_STATS; }
"""


def _helper() -> Path:
    out = Path(tempfile.gettempdir()) / "veredito-callgrind-helper.so"
    if not out.exists():
        source = out.with_suffix(".c")
        source.write_text(HELPER)
        subprocess.run(["cc", "-O1", "-shared", "-fPIC", "-o", str(out), str(source)], check=True)
    return out


def child(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(ROOT))
    if args.tree:  # before ROOT: its veredito package is the one imported
        sys.path.insert(0, str(Path(args.tree).resolve()))
    from bench.corpus import triples
    from veredito.worker.rules import check_texts, judge
    from veredito.worker.rules.markdown import claims_of

    batch = list(triples(args.n, args.seed))
    warm = list(triples(30, args.seed + 1000))
    claims = [claims_of(str(t["answer"]))[0] for t in [*warm, *batch]]

    def run(rows: list[dict[str, Any]], texts: list[list[str]]) -> None:
        for row, sentences in zip(rows, texts, strict=True):
            context, query = list(row["context"]), str(row["query"])
            if args.path == "judge":
                judge(str(row["answer"]), context, query)
            else:
                check_texts(sentences, context, query)

    import veredito.worker.rules as rules

    assert args.tree is None or str(Path(args.tree).resolve()) in rules.__file__, rules.__file__
    run(warm, claims[: len(warm)])
    helper = ctypes.CDLL(str(_helper()))
    helper.veredito_cg_start()
    run(batch, claims[len(warm) :])
    helper.veredito_cg_stop()
    try:
        from veredito.worker.rules.scan import engine

        name = engine()
    except ImportError:
        name = "re"
    print(json.dumps({"engine": name}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--engine", choices=("re", "hyperscan", "auto"), default="auto")
    parser.add_argument("--path", choices=("judge", "crosscheck"), default="judge")
    parser.add_argument("--tree", default=None)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    _helper()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        command = [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            f"--callgrind-out-file={out}.%p",
            sys.executable,
            __file__,
            "--child",
            *("--n", str(args.n), "--seed", str(args.seed), "--path", args.path),
            *(("--tree", args.tree) if args.tree else ()),
        ]
        env = {**os.environ, "VEREDITO_RULES_ENGINE": args.engine, "PYTHONHASHSEED": "0"}
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
        total = 0
        for dump in Path(tmp).glob("callgrind.out.*"):
            found = re.search(r"^totals:\s+(\d+)", dump.read_text(), re.MULTILINE)
            total += int(found.group(1)) if found else 0
        engine = json.loads(done.stdout.strip().splitlines()[-1])["engine"]
    print(
        json.dumps(
            {
                "path": args.path,
                "engine": engine,
                "tree": args.tree or "this checkout",
                "triples": args.n,
                "instructions": total,
                "instructions_per_triple": round(total / args.n),
            }
        )
    )


if __name__ == "__main__":
    main()
