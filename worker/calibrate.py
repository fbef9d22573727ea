"""``veredito calibrate``: how well a judge detects hallucinations on a labelled set (spec §12).

Answer level: predicted = the verdict's ``hallucinated``; gold = ``labels.hallucinated``.
Per category: predicted = categories of non-grounded claims and of rule findings; gold =
categories of the labelled spans. Verdicts: each labelled span is looked up in the claim that
contains it (accent- and case-insensitive) and the claim's verdict is compared with the span's.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from veredito.worker.judges import build_judge, new_session
from veredito.worker.pipeline import Pipeline
from veredito.worker.rules.text import fold
from veredito.worker.settings import Settings
from veredito.worker.verdict import CATEGORIES, VERDICTS, Verdict

__all__ = ["LabelledSetError", "Report", "calibrate", "load_labelled", "score"]


class LabelledSetError(ValueError):
    """A labelled record is malformed; the message names the line and field."""


@dataclass
class Counts:
    tp: int = 0
    fp: int = 0
    fn: int = 0

    def add(self, predicted: bool, gold: bool) -> None:
        self.tp += predicted and gold
        self.fp += predicted and not gold
        self.fn += gold and not predicted

    @property
    def precision(self) -> float | None:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    @property
    def recall(self) -> float | None:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None

    @property
    def f1(self) -> float | None:
        p, r = self.precision, self.recall
        if p is None or r is None or p + r == 0:
            return None if p is None or r is None else 0.0
        return 2 * p * r / (p + r)

    def as_dict(self) -> dict[str, Any]:
        return {
            "tp": self.tp,
            "fp": self.fp,
            "fn": self.fn,
            "precision": self.precision,
            "recall": self.recall,
            "f1": self.f1,
            "support": self.tp + self.fn,
        }


@dataclass
class Report:
    records: int = 0
    failed: int = 0
    answers: Counts = field(default_factory=Counts)
    categories: dict[str, Counts] = field(default_factory=lambda: {c: Counts() for c in CATEGORIES})
    confusion: Counter[tuple[str, str]] = field(default_factory=Counter)
    errors: list[dict[str, Any]] = field(default_factory=list)  # misjudged records
    # spec §17: answers and categories counted only where the judge is sure (confidence at or
    # above ``threshold``), and each claim's (confidence, right) for the calibration error
    threshold: float = 0.8
    confident_answers: Counts = field(default_factory=Counts)
    confident_categories: dict[str, Counts] = field(
        default_factory=lambda: {c: Counts() for c in CATEGORIES}
    )
    claim_confidences: list[tuple[float, bool]] = field(default_factory=list)
    claim_flagged: list[bool] = field(default_factory=list)  # parallel: the claim was flagged

    def calibration(self) -> dict[str, Any]:
        from veredito.worker.fitting import reliability

        return reliability(self.claim_confidences)

    def as_dict(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "failed": self.failed,
            "answer_level": self.answers.as_dict(),
            "categories": {c: v.as_dict() for c, v in self.categories.items()},
            "verdict_confusion": [
                {"gold": g, "predicted": p, "count": n}
                for (g, p), n in sorted(self.confusion.items())
            ],
            "misjudged": self.errors,
            "confidence": {
                "threshold": self.threshold,
                "answer_level": self.confident_answers.as_dict(),
                "categories": {c: v.as_dict() for c, v in self.confident_categories.items()},
                "claims": self.calibration(),
            },
        }

    def by_verdict(self) -> str:
        """Claims by gold verdict (rows: the labelled span a claim holds, else grounded) and
        predicted verdict (columns), with each verdict's precision and recall."""
        columns = [*VERDICTS, "missed"]
        lines = [
            f"records {self.records}, failed {self.failed}",
            "",
            "claims: gold verdict (rows) × predicted verdict (columns)",
            f"{'':<14}" + "".join(f"{c:>14}" for c in columns),
        ]
        for gold in VERDICTS:
            row = [self.confusion.get((gold, p), 0) for p in columns]
            lines.append(f"{gold:<14}" + "".join(f"{n:>14}" for n in row))
        lines += ["", f"{'verdict':<14}{'precision':>10}{'recall':>8}{'gold':>6}{'predicted':>10}"]
        for verdict in VERDICTS:
            hit = self.confusion.get((verdict, verdict), 0)
            labelled = sum(self.confusion.get((verdict, p), 0) for p in columns)
            said = sum(self.confusion.get((g, verdict), 0) for g in VERDICTS)
            precision = f"{hit / said:.2f}" if said else "   -"
            recall = f"{hit / labelled:.2f}" if labelled else "   -"
            lines.append(f"{verdict:<14}{precision:>10}{recall:>8}{labelled:>6}{said:>10}")
        return "\n".join(lines) + "\n"

    def table(self) -> str:
        def fmt(x: float | None) -> str:
            return "   -" if x is None else f"{x:.2f}"

        a = self.answers
        lines = [
            f"records {self.records}, failed {self.failed}",
            "",
            f"answer level  precision {fmt(a.precision)}  recall {fmt(a.recall)}  F1 {fmt(a.f1)}"
            f"  (tp {a.tp}, fp {a.fp}, fn {a.fn})",
            "",
            f"{'category':<14}{'precision':>10}{'recall':>8}{'F1':>6}{'support':>9}{'fp':>5}",
        ]
        for category, c in self.categories.items():
            lines.append(
                f"{category:<14}{fmt(c.precision):>10}{fmt(c.recall):>8}{fmt(c.f1):>6}"
                f"{c.tp + c.fn:>9}{c.fp:>5}"
            )
        if self.claim_confidences:
            c = self.confident_answers
            cal = self.calibration()
            lines += [
                "",
                f"confident (hallucination_confidence ≥ {self.threshold:g})  precision "
                f"{fmt(c.precision)}  recall {fmt(c.recall)}  (tp {c.tp}, fp {c.fp}, fn {c.fn})",
                f"{'category':<14}{'precision':>10}{'recall':>8}{'fp':>5}",
            ]
            for category, k in self.confident_categories.items():
                lines.append(f"{category:<14}{fmt(k.precision):>10}{fmt(k.recall):>8}{k.fp:>5}")
            lines.append(
                f"claim confidences: {cal['claims']} claims, expected calibration error "
                f"{cal['ece']}"
            )
        if self.confusion:
            columns = [*VERDICTS, "missed"]
            lines += [
                "",
                "span verdict (rows, gold) × claim verdict (columns, predicted)",
                f"{'':<14}" + "".join(f"{c:>14}" for c in columns),
            ]
            for gold in ("invented", "contradicted", "partial"):
                row = [self.confusion.get((gold, p), 0) for p in columns]
                if any(row):
                    lines.append(f"{gold:<14}" + "".join(f"{n:>14}" for n in row))
        return "\n".join(lines) + "\n"


def load_labelled(path: str | Path) -> list[dict[str, Any]]:
    records = []
    with Path(path).open(encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as exc:
                raise LabelledSetError(f"line {number}: not valid JSON ({exc})") from None
            labels = record.get("labels") if isinstance(record, dict) else None
            if not isinstance(labels, dict) or not isinstance(labels.get("hallucinated"), bool):
                raise LabelledSetError(f"line {number}: labels.hallucinated must be true or false")
            spans = labels.get("spans", [])
            if not isinstance(spans, list) or not all(
                isinstance(s, dict)
                and isinstance(s.get("text"), str)
                and s.get("category") in CATEGORIES
                for s in spans
            ):
                raise LabelledSetError(
                    f"line {number}: labels.spans must be a list of "
                    '{"text", "category", "verdict"} with a known category'
                )
            record["_line"] = number
            records.append(record)
    return records


def score(records: Sequence[dict[str, Any]], verdicts: Sequence[Verdict]) -> Report:
    report = Report(records=len(records))
    for record, verdict in zip(records, verdicts, strict=True):
        labels = record["labels"]
        if verdict.status != "ok":
            report.failed += 1
        predicted = verdict.hallucinated
        report.answers.add(predicted, labels["hallucinated"])
        gold_categories = {s["category"] for s in labels.get("spans", [])}
        predicted_categories = {
            c.category or "GENERICA" for c in verdict.claims if c.verdict != "grounded"
        }
        predicted_categories |= {f.category for f in verdict.rule_findings if f.problem}
        for category, counts in report.categories.items():
            counts.add(category in predicted_categories, category in gold_categories)
        folded = [fold(c.text) for c in verdict.claims]
        needles_all = [fold(span["text"]) for span in labels.get("spans", [])]
        sure = verdict.hallucination_confidence
        report.confident_answers.add(
            predicted and sure is not None and sure >= report.threshold, labels["hallucinated"]
        )
        sure_categories = {
            c.category or "GENERICA"
            for c in verdict.claims
            if c.verdict != "grounded" and c.confidence is not None
            and c.confidence >= report.threshold
        }  # fmt: skip
        for category, counts in report.confident_categories.items():
            counts.add(category in sure_categories, category in gold_categories)
        for judged, text in zip(verdict.claims, folded, strict=True):
            if judged.confidence is None:
                continue
            if judged.verdict == "grounded" and getattr(judged, "kind", None) == "advice":
                continue  # advice not flagged is no claim of fact (spec §17): no calibration
            bad = any(n in text for n in needles_all)
            report.claim_confidences.append(
                (judged.confidence, bad if judged.verdict != "grounded" else not bad)
            )
            report.claim_flagged.append(judged.verdict != "grounded")
        for span in labels.get("spans", []):
            gold = span.get("verdict")
            if gold not in VERDICTS:
                continue
            needle = fold(span["text"])
            pairs = zip(verdict.claims, folded, strict=True)
            claim = next((c for c, f in pairs if needle in f), None)
            report.confusion[(gold, claim.verdict if claim else "missed")] += 1
        # the claims no labelled span falls in: a faithful reader calls them grounded
        needles = [fold(span["text"]) for span in labels.get("spans", [])]
        for claim, text in zip(verdict.claims, folded, strict=True):
            if not any(n in text for n in needles):
                report.confusion[("grounded", claim.verdict)] += 1
        if predicted != labels["hallucinated"] or predicted_categories != gold_categories:
            report.errors.append(
                {
                    "id": record.get("id"),
                    "line": record.get("_line"),
                    "gold": sorted(gold_categories),
                    "predicted": sorted(predicted_categories),
                }
            )
    return report


async def _judge_all(records: Sequence[dict[str, Any]], settings: Settings) -> list[Verdict]:
    async with new_session(settings) as session:
        pipeline = Pipeline(build_judge(settings, session), settings.limits, keep_input=False)
        limit = asyncio.Semaphore(settings.concurrency)

        async def one(record: dict[str, Any]) -> Verdict:
            triple = {k: v for k, v in record.items() if k not in ("labels", "_line")}
            async with limit:
                outcome = await pipeline.evaluate(
                    {"triple": triple, "source": {"line": record["_line"]}}
                )
            return outcome.verdict

        return list(await asyncio.gather(*(one(r) for r in records)))


def calibrate(path: str | Path, settings: Settings) -> Report:
    records = load_labelled(path)
    verdicts = asyncio.run(_judge_all(records, settings))
    return score(records, verdicts)
