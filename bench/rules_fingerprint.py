"""A fingerprint of everything the rules judge says, to prove a change leaves it byte-identical.

    .venv/bin/python bench/rules_fingerprint.py                 # print each set's sha256
    .venv/bin/python bench/rules_fingerprint.py --write         # rewrite the committed file
    .venv/bin/python bench/rules_fingerprint.py --dump DIR      # one JSON line per record, to diff
    VEREDITO_RULES_ENGINE=re .venv/bin/python bench/rules_fingerprint.py   # the pure-re path

For every record of ``tests/data/*.jsonl`` and :data:`CORPUS_N` triples of ``bench/corpus.py``
(seed :data:`CORPUS_SEED`), four views, each hashed per set:

- ``judge``: :func:`~veredito.worker.rules.judge` of the answer — each claim's text, verdict,
  category, chunk, basis, lexical support and words, its kind when it is advice, and each
  check's mention (category, text, keys, extra keys, span, flags), status, finding, why, nearest
  and derivation;
- ``crosscheck``: :func:`~veredito.worker.rules.check_texts` of those claims (the cross-check's
  path), the same fields per check;
- ``mentions``: every mention the detectors find in each chunk and in the answer (digitised);
- ``index``: the keys of the full :func:`~veredito.worker.rules.index_context` of the context.

``tests/test_rules_engines.py`` checks both engines against ``tests/data/rules_fingerprint.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

FINGERPRINT = ROOT / "tests" / "data" / "rules_fingerprint.json"
CORPUS_N = 2000
CORPUS_SEED = 1
VIEWS = ("judge", "crosscheck", "mentions", "index")


def sets() -> dict[str, list[dict[str, Any]]]:
    """The labelled sets and the benchmark corpus, by name."""
    from bench.corpus import triples

    out: dict[str, list[dict[str, Any]]] = {}
    for path in sorted((ROOT / "tests" / "data").glob("*.jsonl")):
        lines = path.read_text("utf-8").splitlines()
        out[path.stem] = [json.loads(line) for line in lines if line.strip()]
    out[f"corpus-{CORPUS_N}-seed{CORPUS_SEED}"] = list(triples(CORPUS_N, CORPUS_SEED))
    return out


def _mention(m: Any) -> list[Any]:
    return [
        m.category,
        m.text,
        sorted(m.keys),
        sorted(m.extra),
        m.start,
        m.end,
        m.contradictable,
        m.invalid,
    ]


def _check(c: Any) -> list[Any]:
    d = c.derivation
    return [
        _mention(c.mention),
        c.status,
        c.finding,
        c.why,
        None if c.nearest is None else repr(c.nearest),
        None if d is None else [d.operation, list(d.operands)],
    ]


def record_views(record: dict[str, Any]) -> dict[str, Any]:
    """The four views of one record (plain JSON values)."""
    from veredito.worker.rules import check_texts, index_context, judge
    from veredito.worker.rules.detectors import find_mentions
    from veredito.worker.rules.text import digitise

    context = [str(c) for c in record.get("context") or []]
    answer = str(record.get("answer") or "")
    query = str(record.get("query") or "")
    judged = judge(answer, context, query)
    claims = [
        [
            c.text,
            c.verdict,
            c.category,
            c.chunk_idx,
            c.basis,
            None if c.support is None else repr(c.support),
            c.words,
            [_check(k) for k in c.checks],
            *([c.kind] if c.kind else []),  # advice only (issue 30): other claims hash as before
        ]
        for c in judged.claims
    ]
    texts = [c.text for c in judged.claims]
    crosscheck = [[_check(k) for k in checks] for checks in check_texts(texts, context, query)]
    mentions = [[_mention(m) for m in find_mentions(digitise(t))] for t in [*context, answer]]
    return {
        "judge": [judged.non_claims, claims],
        "crosscheck": crosscheck if texts else [],
        "mentions": mentions,
        "index": sorted(index_context(context).keys),
    }


def _lines(records: Iterable[dict[str, Any]]) -> Iterator[dict[str, str]]:
    for record in records:
        views = record_views(record)
        yield {v: json.dumps(views[v], ensure_ascii=False, sort_keys=True) for v in VIEWS}


def fingerprint(
    only: Iterable[str] | None = None, dump: Path | None = None
) -> dict[str, dict[str, Any]]:
    """``{set: {"records": n, view: sha256, ...}}`` for every set (or those named in ``only``)."""
    wanted = set(only) if only is not None else None
    out: dict[str, dict[str, Any]] = {}
    for name, records in sets().items():
        if wanted is not None and name not in wanted:
            continue
        hashes = {v: hashlib.sha256() for v in VIEWS}
        sink = (dump / f"{name}.jsonl").open("w", encoding="utf-8") if dump else None
        for lines in _lines(records):
            for v in VIEWS:
                hashes[v].update(lines[v].encode("utf-8", "surrogatepass") + b"\n")
            if sink is not None:
                sink.write(json.dumps(lines, ensure_ascii=False) + "\n")
        if sink is not None:
            sink.close()
        out[name] = {"records": len(records), **{v: hashes[v].hexdigest() for v in VIEWS}}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {FINGERPRINT.name}")
    parser.add_argument("--dump", type=Path, help="one JSON line of views per record, per set")
    parser.add_argument("--set", action="append", help="only this set (repeatable)")
    args = parser.parse_args()
    if args.dump:
        args.dump.mkdir(parents=True, exist_ok=True)
    found = fingerprint(args.set, args.dump)
    text = json.dumps(found, indent=1, sort_keys=True) + "\n"
    if args.write:
        FINGERPRINT.write_text(text, "utf-8")
    try:
        from veredito.worker.rules.scan import engine
    except ImportError:  # a checkout from before the compiled scan (issue 21)
        name = "re"
    else:
        name = engine()
    print(json.dumps({"engine": name}))
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
