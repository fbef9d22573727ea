"""The rules judge on real LLM answers: BR-TaxQA-R (unicamp-dl/rag-receita, files/data.json).

    .venv/bin/python bench/brtaxqa.py sample DATA.json OUT_DIR [--flagged 100] [--grounded 50]
        [--min-confidence 0.8]
    .venv/bin/python bench/brtaxqa.py score OUT_DIR

The data set holds the Receita Federal's official answers to 200 IRPF questions and the answers
of ChatGPT with search, Perplexity and o1/o3 "deep search" to the same questions. Each model
answer is judged with the official answer as its only context chunk. ``sample`` draws (seeded)
``--flagged`` claims the judge did not call grounded and ``--grounded`` it did, and writes:

- ``OUT_DIR/to_label.jsonl``: question, context and claim only, shuffled, for a labeller who
  must not see the verdicts (``label``: ``supported``, ``partial``, ``unsupported`` when the
  context says nothing of it, ``contradicted`` when it says otherwise, ``not_a_claim`` for a
  heading, a citation or other debris);
- ``OUT_DIR/verdicts.jsonl``: the judge's verdict of each sampled claim, kept apart;
- the number of pieces dropped as non-claims and of claims judged, on stderr.

``score`` joins the labels (``OUT_DIR/labels.jsonl``: ``{"sample_id", "label"}``) with the
verdicts and prints the precision of the flags, the share of "grounded" that is supported, and
the confusion of verdicts. The data set is not ours: fetch it, never commit it.
"""

from __future__ import annotations

import argparse
import ast
import collections
import contextlib
import json
import random
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MODELS = (
    "chatgpt(4o/4mini)+search",
    "Perplexity AI + Deepsearch",
    "GPT 4o + Deepsearch",
    "GPT o3-mini-high + DeepSearch",
    "GPT o3-mini + DeepSearch",
    "GPT o1 + DeepSearch",
)


def _official(record: dict[str, Any]) -> str:
    answer = record.get("answer_cleaned") or record.get("answer") or ""
    if isinstance(answer, str) and answer.startswith("["):
        with contextlib.suppress(ValueError, SyntaxError):
            answer = ast.literal_eval(answer)
    lines = answer if isinstance(answer, list) else [str(answer)]
    return " ".join(str(line).strip() for line in lines)


def sample(
    data: Path, out: Path, flagged_n: int, grounded_n: int, seed: int, min_confidence: float = 0.0
) -> None:
    from veredito.worker.confidence import default_calibration, rules_features
    from veredito.worker.rules import judge

    calibration = default_calibration()

    records = json.loads(data.read_text(encoding="utf-8"))
    flagged: list[dict[str, Any]] = []
    grounded: list[dict[str, Any]] = []
    dropped = judged = 0
    for record in records:
        context = _official(record)
        for model in MODELS:
            answer = record.get(model)
            if not isinstance(answer, str) or not answer.strip():
                continue
            result = judge(answer, [context], record["question_text"])
            dropped += result.non_claims
            for claim in result.claims:
                judged += 1
                confidence = calibration.confidence(
                    "rules", claim.verdict != "grounded", rules_features(claim)
                )
                if confidence < min_confidence:
                    continue
                row = {
                    "question_number": record["question_number"],
                    "model": model,
                    "question": record["question_text"],
                    "context": context,
                    "claim": claim.text,
                    "verdict": claim.verdict,
                    "category": claim.category,
                    "confidence": confidence,
                }
                (grounded if claim.verdict == "grounded" else flagged).append(row)
    rng = random.Random(seed)
    chosen = rng.sample(flagged, min(flagged_n, len(flagged)))
    chosen += rng.sample(grounded, min(grounded_n, len(grounded)))
    rng.shuffle(chosen)
    out.mkdir(parents=True, exist_ok=True)
    with (
        (out / "to_label.jsonl").open("w", encoding="utf-8") as blind,
        (out / "verdicts.jsonl").open("w", encoding="utf-8") as verdicts,
    ):
        for i, row in enumerate(chosen, 1):
            sample_id = f"s{i:03d}"
            blind.write(
                json.dumps(
                    {k: row[k] for k in ("question", "context", "claim")}
                    | {"sample_id": sample_id},
                    ensure_ascii=False,
                )
                + "\n"
            )
            verdicts.write(
                json.dumps(
                    {"sample_id": sample_id}
                    | {
                        k: row[k]
                        for k in ("question_number", "model", "verdict", "category", "confidence")
                    },
                    ensure_ascii=False,
                )
                + "\n"
            )
    print(
        json.dumps(
            {
                "answers_judged": sum(
                    1 for r in records for m in MODELS if isinstance(r.get(m), str) and r[m]
                ),
                "claims_judged": judged,
                "non_claims_dropped": dropped,
                "flagged": len(flagged),
                "grounded": len(grounded),
                "sampled": len(chosen),
            }
        ),
        file=sys.stderr,
    )


def score(out: Path) -> None:
    verdicts = {
        r["sample_id"]: r
        for r in map(json.loads, (out / "verdicts.jsonl").read_text("utf-8").splitlines())
    }
    labels = {
        r["sample_id"]: r["label"]
        for r in map(json.loads, (out / "labels.jsonl").read_text("utf-8").splitlines())
    }
    confusion: collections.Counter[tuple[str, str]] = collections.Counter()
    for sample_id, verdict in verdicts.items():
        confusion[(verdict["verdict"], labels[sample_id])] += 1
    flagged = {k: v for k, v in confusion.items() if k[0] != "grounded"}
    flags = sum(flagged.values())
    really = sum(n for (_, label), n in flagged.items() if label in ("unsupported", "contradicted"))
    partly = sum(n for (_, label), n in flagged.items() if label == "partial")
    debris = sum(n for (_, label), n in confusion.items() if label == "not_a_claim")
    grounded = {k: v for k, v in confusion.items() if k[0] == "grounded"}
    said = sum(grounded.values())
    supported = sum(n for (_, label), n in grounded.items() if label == "supported")
    print(
        json.dumps(
            {
                "flagged": flags,
                "flags_really_unsupported": round(really / flags, 3) if flags else None,
                "flags_unsupported_or_partial": round((really + partly) / flags, 3)
                if flags
                else None,
                "grounded": said,
                "grounded_really_supported": round(supported / said, 3) if said else None,
                "not_a_claim_judged": debris,
                "confusion": {f"{v} -> {label}": n for (v, label), n in sorted(confusion.items())},
            },
            indent=2,
            ensure_ascii=False,
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sample")
    s.add_argument("data", type=Path)
    s.add_argument("out", type=Path)
    s.add_argument("--flagged", type=int, default=100)
    s.add_argument("--grounded", type=int, default=50)
    s.add_argument("--seed", type=int, default=10)
    s.add_argument(
        "--min-confidence",
        type=float,
        default=0.0,
        help="sample only claims whose confidence (spec §17, the shipped calibration) is at "
        "least this: 0.8 measures what the alerts fire on",
    )
    c = sub.add_parser("score")
    c.add_argument("out", type=Path)
    args = parser.parse_args()
    if args.command == "sample":
        sample(args.data, args.out, args.flagged, args.grounded, args.seed, args.min_confidence)
    else:
        score(args.out)


if __name__ == "__main__":
    main()
