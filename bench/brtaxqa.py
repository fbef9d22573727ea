"""The rules judge on real LLM answers: BR-TaxQA-R (unicamp-dl/rag-receita, files/data.json).

    .venv/bin/python bench/brtaxqa.py sample DATA.json OUT_DIR [--flagged 100] [--grounded 50]
        [--min-confidence 0.8]
    .venv/bin/python bench/brtaxqa.py score OUT_DIR
    .venv/bin/python bench/brtaxqa.py answers DATA.json OUT_DIR [--answers 60] [--seed 30]
    .venv/bin/python bench/brtaxqa.py score-answers OUT_DIR [--min-confidence 0.8] [--json FILE]

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
the confusion of verdicts.

``answers`` draws (seeded) ``--answers`` whole model answers instead of claims, so that the
judge's flags are measured on answers as a chatbot gives them. It writes:

- ``OUT_DIR/answers.jsonl``: ``{"answer_id", "question", "official", "model", "answer"}`` for
  each drawn answer;
- ``OUT_DIR/to_label.jsonl``: each answer's claims (as the judge splits them), in answer order,
  with question and context only: no verdict, no confidence. The labeller adds ``"advice":
  true`` to a label line when the claim is a recommendation, an evaluative generic statement or
  talk about the answer itself rather than a statement of fact.

``score-answers`` judges each answer of ``OUT_DIR/answers.jsonl`` again with the code as it is
when it runs (so it can be rerun after the judge changes), matches each claim to its label by
(answer, claim text) and prints the precision of the confident flags (confidence at least
``--min-confidence``, the alert line) and the share of confident "grounded" claims that is
supported, per category too. Claims the judge marks as advice (``kind == "advice"``) are
reported apart and left out of both. The data set is not ours: fetch it, never commit it.
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


FLAGGING = ("unsupported", "contradicted")


def _model_answers(records: list[dict[str, Any]]) -> list[tuple[dict[str, Any], str]]:
    """Every (record, model) with a non-empty answer, in the data set's order: what ``sample``
    judges as a model answer."""
    return [
        (record, model)
        for record in records
        for model in MODELS
        if isinstance(record.get(model), str) and record[model].strip()
    ]


def _answer_id(sample_id: str) -> str:
    return sample_id.split(".", 1)[0]


def draw_answers(data: Path, out: Path, n: int, seed: int) -> None:
    """Draw ``n`` model answers and write them and their claims (for blind labelling)."""
    from veredito.worker.rules import judge

    records = json.loads(data.read_text(encoding="utf-8"))
    every = _model_answers(records)
    rng = random.Random(seed)
    chosen = rng.sample(every, min(n, len(every)))
    out.mkdir(parents=True, exist_ok=True)
    claims = dropped = 0
    with (
        (out / "answers.jsonl").open("w", encoding="utf-8") as answers,
        (out / "to_label.jsonl").open("w", encoding="utf-8") as blind,
    ):
        for i, (record, model) in enumerate(chosen, 1):
            answer_id = f"a{i:03d}"
            official = _official(record)
            answer = record[model]
            answers.write(
                json.dumps(
                    {
                        "answer_id": answer_id,
                        "question": record["question_text"],
                        "official": official,
                        "model": model,
                        "answer": answer,
                    },
                    ensure_ascii=False,
                )
                + "\n"
            )
            result = judge(answer, [official], record["question_text"])
            dropped += result.non_claims
            for j, claim in enumerate(result.claims, 1):
                claims += 1
                blind.write(
                    json.dumps(
                        {
                            "sample_id": f"{answer_id}.c{j:03d}",
                            "question": record["question_text"],
                            "context": official,
                            "claim": claim.text,
                        },
                        ensure_ascii=False,
                    )
                    + "\n"
                )
    print(
        json.dumps(
            {
                "answers_available": len(every),
                "answers_drawn": len(chosen),
                "claims": claims,
                "non_claims_dropped": dropped,
            }
        ),
        file=sys.stderr,
    )


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 3) if whole else None


def _figures(rows: list[dict[str, Any]], good: tuple[str, ...]) -> dict[str, Any]:
    """Counts of ``rows`` (judged claims with their ``label``), the labelled ones' distribution
    and the share labelled one of ``good``, partial counted apart."""
    labelled = [r for r in rows if r["label"] is not None]
    labels = collections.Counter(r["label"] for r in labelled)
    hits = sum(labels[g] for g in good)
    return {
        "claims": len(rows),
        "labelled": len(labelled),
        "labelled_" + "_or_".join(good): hits,
        "share": _share(hits, len(labelled)),
        "partial": labels["partial"],
        "share_with_partial": _share(hits + labels["partial"], len(labelled)),
        "not_a_claim": labels["not_a_claim"],
        "labelled_advice": sum(1 for r in labelled if r["advice"]),
        "labels": dict(sorted(labels.items())),
    }


def score_answers(out: Path, min_confidence: float = 0.8, json_out: Path | None = None) -> None:
    """Judge the drawn answers again and score the confident verdicts against the labels."""
    from veredito.worker.confidence import default_calibration, rules_features
    from veredito.worker.rules import judge

    calibration = default_calibration()
    blind = {r["sample_id"]: r for r in _jsonl(out / "to_label.jsonl")}
    labels = {r["sample_id"]: r for r in _jsonl(out / "labels.jsonl")}
    # (answer, claim text) -> the labels of the claims with that text, in answer order
    by_text: dict[tuple[str, str], list[dict[str, Any]]] = collections.defaultdict(list)
    for sample_id, row in blind.items():
        if sample_id in labels:
            by_text[(_answer_id(sample_id), row["claim"])].append(labels[sample_id])

    rows: list[dict[str, Any]] = []
    for answer in _jsonl(out / "answers.jsonl"):
        result = judge(answer["answer"], [answer["official"]], answer["question"])
        for claim in result.claims:
            matches = by_text.get((answer["answer_id"], claim.text))
            label = matches.pop(0) if matches else None
            rows.append(
                {
                    "answer_id": answer["answer_id"],
                    "verdict": claim.verdict,
                    "category": claim.category,
                    "kind": getattr(claim, "kind", None),
                    "confidence": calibration.confidence(
                        "rules", claim.verdict != "grounded", rules_features(claim)
                    ),
                    "label": label["label"] if label else None,
                    "advice": bool(label and label.get("advice")),
                }
            )

    advice = [r for r in rows if r["kind"] == "advice"]
    rest = [r for r in rows if r["kind"] != "advice"]
    confident = [r for r in rest if r["confidence"] >= min_confidence]
    flags = [r for r in confident if r["verdict"] != "grounded"]
    grounded = [r for r in confident if r["verdict"] == "grounded"]
    categories = sorted({r["category"] or "-" for r in flags})
    figures = {
        "answers": len({r["answer_id"] for r in rows}),
        "claims_judged": len(rows),
        "claims_labelled": sum(1 for r in rows if r["label"] is not None),
        "labels_unmatched": sum(len(v) for v in by_text.values()),
        "labels_all": dict(sorted(collections.Counter(r["label"] for r in rows).items(), key=str)),
        "min_confidence": min_confidence,
        "flagged_all": sum(1 for r in rest if r["verdict"] != "grounded"),
        "confident_flags": _figures(flags, FLAGGING),
        "confident_flags_per_category": {
            c: _figures([r for r in flags if (r["category"] or "-") == c], FLAGGING)
            for c in categories
        },
        "confident_grounded": _figures(grounded, ("supported",)),
        "advice_kind": {
            "claims": len(advice),
            "flagged": sum(1 for r in advice if r["verdict"] != "grounded"),
            "confident": sum(1 for r in advice if r["confidence"] >= min_confidence),
            "labels": dict(
                sorted(collections.Counter(r["label"] for r in advice).items(), key=str)
            ),
            "labelled_advice": sum(1 for r in advice if r["advice"]),
        },
        "labelled_advice_all": sum(1 for r in rows if r["advice"]),
        "confusion": {
            f"{v} -> {label}": n
            for (v, label), n in sorted(
                collections.Counter((r["verdict"], r["label"]) for r in rows).items(), key=str
            )
        },
    }
    text = json.dumps(figures, indent=2, ensure_ascii=False)
    print(text)
    if json_out is not None:
        json_out.write_text(text + "\n", encoding="utf-8")


def advice_share(data: Path) -> None:
    """How many of every model answer's claims the claim splitter takes as advice (issue 30)."""
    from veredito.worker.rules import judge

    records = json.loads(data.read_text(encoding="utf-8"))
    claims = advice = 0
    for record, model in _model_answers(records):
        judged = judge(record[model], [_official(record)], record["question_text"])
        claims += len(judged.claims)
        advice += sum(1 for c in judged.claims if getattr(c, "kind", None) == "advice")
    share = advice / claims if claims else 0.0
    print(json.dumps({"answers": len(_model_answers(records)), "claims": claims,
                      "advice": advice, "share": round(share, 4)}))  # fmt: skip


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
    a = sub.add_parser("answers", help="draw whole model answers and their claims, to label")
    a.add_argument("data", type=Path)
    a.add_argument("out", type=Path)
    a.add_argument("--answers", type=int, default=60)
    a.add_argument("--seed", type=int, default=30)
    r = sub.add_parser("score-answers", help="judge the drawn answers again; score the labels")
    r.add_argument("out", type=Path)
    r.add_argument(
        "--min-confidence",
        type=float,
        default=0.8,
        help="the confidence line of the figures (VEREDITO_ALERT_CONFIDENCE's default)",
    )
    r.add_argument("--json", type=Path, default=None, help="also write the figures here")
    v = sub.add_parser("advice", help="the share of every answer's claims taken as advice")
    v.add_argument("data", type=Path)
    args = parser.parse_args()
    if args.command == "advice":
        advice_share(args.data)
    elif args.command == "sample":
        sample(args.data, args.out, args.flagged, args.grounded, args.seed, args.min_confidence)
    elif args.command == "answers":
        draw_answers(args.data, args.out, args.answers, args.seed)
    elif args.command == "score-answers":
        score_answers(args.out, args.min_confidence, args.json)
    else:
        score(args.out)


if __name__ == "__main__":
    main()
