"""The candidates for the rules judge's compiled scan, measured on the same texts.

    .venv/bin/pip install hyperscan google-re2 pyahocorasick
    .venv/bin/python bench/rules_engines.py [--n 300] [--seed 1] [--repeat 5]

Every chunk and answer of ``--n`` ``bench/corpus.py`` triples (digitised, as the detectors read
them) is read for the matches of every detector pattern the scan holds
(:mod:`~veredito.worker.rules.scan`), five ways; microseconds per text (median of
``--repeat``), and the one-off cost of building each engine:

- ``re``: each pattern's own ``finditer`` over the whole text (the pure-Python path);
- ``hyperscan``: one pass of the two compiled databases (reversed supersets, see
  :mod:`~veredito.worker.rules.superset`), then ``re.match`` only where a pattern may start —
  the engine ``VEREDITO_RULES_ENGINE=hyperscan`` runs;
- ``re2-set``: one pass of a google-re2 ``Set`` of the same supersets read forwards, which says
  *which* patterns occur (not where), then ``re``'s ``finditer`` over the whole text for those;
- ``re2-set (gate only)``: the ``Set`` pass alone;
- ``aho-corasick (names only)``: pyahocorasick over the gazetteer's names and acronyms, the only
  patterns made of literals (ASCII names, positions of every occurrence), against ``re``'s two
  prefix trees for the same names; the other patterns (digits, classes, repeats) it cannot hold.

Each way's matches are checked equal to ``re``'s. Prints JSON lines, then a table.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _texts(n: int, seed: int) -> list[tuple[str, str]]:
    from bench.corpus import triples
    from veredito.worker.rules.mention import fold_same_length
    from veredito.worker.rules.text import digitise

    out = []
    for row in triples(n, seed):
        for text in [*row["context"], row["answer"]]:
            digits = digitise(text)
            out.append((digits, fold_same_length(digits)))
    return out


def _time(work: Callable[[], Any], repeat: int, count: int) -> float:
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        runs.append(time.perf_counter() - started)
    return statistics.median(runs) / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    import veredito.worker.rules.detectors  # noqa: F401  (registers every family's patterns)
    from veredito.worker.rules import names, scan, superset

    texts = _texts(args.n, args.seed)
    chars = sum(len(t) for t, _ in texts) / len(texts)
    patterns = [p for p in scan.patterns() if p.scanned and p.resolve() is not None]
    regexes = {p.index: p.resolve() for p in patterns}

    def haystack(p: scan.Pattern, pair: tuple[str, str]) -> str:
        return pair[1] if p.folded else pair[0]

    def spans(found: dict[int, list[re.Match[str]]]) -> dict[int, list[tuple[int, int]]]:
        return {i: [m.span() for m in ms] for i, ms in found.items() if ms}

    def read_re(pair: tuple[str, str]) -> dict[int, list[re.Match[str]]]:
        return {p.index: list(regexes[p.index].finditer(haystack(p, pair))) for p in patterns}  # type: ignore[union-attr]

    expected = [spans(read_re(pair)) for pair in texts]
    rows: list[dict[str, Any]] = []

    def report(way: str, per_text: float, build_s: float, note: str = "") -> None:
        row = {"way": way, "us_per_text": round(per_text, 1), "build_s": round(build_s, 3)}
        rows.append({**row, "note": note})
        print(json.dumps(row))

    report("re", _time(lambda: [read_re(p) for p in texts], args.repeat, len(texts)), 0.0)

    started = time.perf_counter()
    scan.use_engine("hyperscan")
    scan.scan("", "")
    build = time.perf_counter() - started
    if scan.engine() == "hyperscan":

        def read_hs(pair: tuple[str, str]) -> dict[int, list[re.Match[str]]]:
            s = scan.scan(*pair)
            return {p.index: list(s.finditer(p)) for p in patterns}

        assert [spans(read_hs(pair)) for pair in texts] == expected
        per = _time(lambda: [read_hs(p) for p in texts], args.repeat, len(texts))
        report("hyperscan", per, build, "positions; re confirms each")
    scan.use_engine(None)

    try:
        import re2
    except ImportError:
        print(json.dumps({"way": "re2-set", "skipped": "pip install google-re2"}))
    else:
        started = time.perf_counter()
        options = re2.Options()
        options.encoding = re2.Options.Encoding.LATIN1
        options.max_mem = 256 << 20
        sets: dict[bool, Any] = {}
        members: dict[bool, list[int]] = {False: [], True: []}
        for folded in (False, True):
            found_set = re2.Set.SearchSet(options)
            for p in patterns:
                if p.folded == folded:
                    found_set.Add(superset.forward(regexes[p.index]).encode("latin-1"))  # type: ignore[arg-type]
                    members[folded].append(p.index)
            found_set.Compile()
            sets[folded] = found_set
        build = time.perf_counter() - started
        by_index = {p.index: p for p in patterns}

        def gate(pair: tuple[str, str]) -> list[int]:
            out: list[int] = []
            for folded in (False, True):
                hits = sets[folded].Match(superset.encode(pair[1] if folded else pair[0]))
                out += [members[folded][i] for i in hits or ()]
            return out

        def read_re2(pair: tuple[str, str]) -> dict[int, list[re.Match[str]]]:
            return {
                i: list(regexes[i].finditer(haystack(by_index[i], pair)))  # type: ignore[union-attr]
                for i in gate(pair)
            }

        assert [spans(read_re2(pair)) for pair in texts] == expected
        per = _time(lambda: [read_re2(p) for p in texts], args.repeat, len(texts))
        report("re2-set", per, build, "which patterns occur; re reads the text for those")
        per = _time(lambda: [gate(p) for p in texts], args.repeat, len(texts))
        held = sum(len(gate(p)) for p in texts) / len(texts)
        report("re2-set (gate only)", per, build, f"{held:.1f} of {len(patterns)} patterns occur")

    try:
        import ahocorasick
    except ImportError:
        print(json.dumps({"way": "aho-corasick", "skipped": "pip install pyahocorasick"}))
    else:
        started = time.perf_counter()
        automata = {}
        for which, ids in (("ACRONYMS", names._ACRONYM_IDS), ("NAMES", names._NAME_IDS)):
            automaton = ahocorasick.Automaton()
            for name in ids:
                automaton.add_word(name, name)
            automaton.make_automaton()
            automata[which] = automaton
        build = time.perf_counter() - started
        trie = [names.ACRONYMS, names.NAMES]

        def read_ac(pair: tuple[str, str]) -> int:
            return sum(1 for p in trie for _ in automata[p.name].iter(haystack(p, pair)))

        def read_trie(pair: tuple[str, str]) -> int:
            return sum(1 for p in trie for _ in regexes[p.index].finditer(haystack(p, pair)))  # type: ignore[union-attr]

        per_re = _time(lambda: [read_trie(p) for p in texts], args.repeat, len(texts))
        per = _time(lambda: [read_ac(p) for p in texts], args.repeat, len(texts))
        report("re (the names' two prefix trees)", per_re, 0.0)
        report(
            "aho-corasick (names only)",
            per,
            build,
            "literal occurrences before the boundary checks; 2 of the patterns",
        )

    print(f"\n{len(texts)} texts of {chars:.0f} characters, {len(patterns)} patterns")
    print("| way | µs per text | build (s) | note |\n|---|---:|---:|---|")
    for row in rows:
        print(f"| {row['way']} | {row['us_per_text']} | {row['build_s']} | {row['note']} |")


if __name__ == "__main__":
    main()
