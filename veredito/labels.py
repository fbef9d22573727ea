"""Reviewers' labels (spec §16): what one submission may say, how the labels of an answer resolve
into a labelled record (spec §12), and the judge's agreement with them.

One rule turns labels into gold, used everywhere — the API's ``/v1/agreement``, ``veredito
calibrate --from-store``, ``veredito labels export`` and the precision gauges — so their numbers
are the same:

- each reviewer's **latest** label of a claim (or of the answer) is theirs; reviewers who disagree
  are all kept, and the claim's gold is the **majority** of their latest labels, the most recent
  label breaking a tie;
- a claim marked right keeps the judge's verdict and category; marked wrong, it takes the verdict
  and category the reviewer put instead (without one: a non-grounded claim becomes grounded, a
  grounded one invented); a claim nobody marked keeps the judge's verdict (the reviewer read the
  answer and did not object);
- gold spans (spec §12) are the claims whose gold is not grounded, plus every missed span; the
  answer is hallucinated when a reviewer said so (latest answer-level label), else when it has a
  gold span.

The agreement is :func:`veredito.worker.calibrate.score` of those records against the stored
verdicts — the same function ``calibrate`` runs on a labelled file — with a 95 % Wilson interval
on every proportion.
"""

from __future__ import annotations

import gc
import hashlib
import math
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from veredito.worker.verdict import CATEGORIES, VERDICTS

if TYPE_CHECKING:
    from veredito.worker.verdict import Verdict

__all__ = [
    "DEFAULT_SHARE",
    "MAX_LABEL_BYTES",
    "Label",
    "LabelError",
    "Submission",
    "agreement",
    "agreement_from",
    "agreement_table",
    "counts_of",
    "labelled_record",
    "parse_submission",
    "sample_key",
    "wilson",
]

MAX_LABEL_BYTES = 64 * 1024
# VEREDITO_REVIEW_SAMPLE's default: the share of answers in the review queue's uniform slice
# (also the rule schema 8 back-filled labels.uniform with)
DEFAULT_SHARE = 0.05
MAX_NOTE = 4000
MAX_MISSED = 50


class LabelError(ValueError):
    """A label body that breaks spec §16; ``field`` names what is wrong."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}")
        self.field = name


@dataclass(frozen=True, slots=True)
class Label:
    """One row of the ``labels`` table: what one reviewer said of one claim, missed span or
    answer."""

    kind: str  # claim | missed | answer
    claim_idx: int | None = None
    correct: bool | None = None
    verdict: str | None = None
    category: str | None = None
    text: str | None = None  # a missed span
    hallucinated: bool | None = None
    note: str | None = None


@dataclass
class Submission:
    labels: list[Label] = field(default_factory=list)


def sample_key(app: str, verdict_id: str) -> float:
    """A verdict's place in the uniform slice: a number in [0, 1) from a hash of (app, id), so
    whether an answer is in the slice says nothing about what the judge said of it."""
    digest = hashlib.sha256(f"{app}\x1f{verdict_id}".encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:6], "big") / 2**48


def _bool(body: dict[str, Any], name: str, where: str) -> bool | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, bool):
        raise LabelError(where, "must be true or false")
    return value


def _choice(value: Any, allowed: tuple[str, ...], where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or value not in allowed:
        raise LabelError(where, f"must be one of {', '.join(allowed)}")
    return value


def _unicode(text: str, where: str) -> None:
    """A text a store can write: no lone surrogate (JSON's ``\\ud800`` has no UTF-8)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise LabelError(where, "is not valid Unicode (a lone surrogate)") from None


def parse_submission(body: Any, verdict: dict[str, Any]) -> Submission:
    """The labels of one ``POST /v1/verdicts/{id}/labels`` body, checked against the verdict it
    labels; :class:`LabelError` naming the field otherwise (nothing is stored then)."""
    if not isinstance(body, dict):
        raise LabelError("body", "must be a JSON object")
    unknown = sorted(set(body) - {"claims", "missed", "hallucinated", "note"})
    if unknown:
        name = unknown[0].encode("utf-8", "backslashreplace").decode("utf-8")
        raise LabelError(name, "is not a field of a label")
    claims = [c for c in verdict.get("claims") or [] if isinstance(c, dict)]
    given = _dict(verdict.get("input"))
    answer = given.get("answer") if isinstance(given.get("answer"), str) else None
    out = Submission()
    raw_claims = body.get("claims", [])
    if not isinstance(raw_claims, list):
        raise LabelError("claims", "must be a list")
    seen: set[int] = set()
    for n, item in enumerate(raw_claims):
        where = f"claims[{n}]"
        if not isinstance(item, dict):
            raise LabelError(where, "must be an object")
        extra = sorted(set(item) - {"claim_idx", "correct", "verdict", "category"})
        if extra:
            raise LabelError(f"{where}.{extra[0]}", "is not a field of a claim label")
        idx = item.get("claim_idx")
        if not isinstance(idx, int) or isinstance(idx, bool) or not 0 <= idx < len(claims):
            raise LabelError(
                f"{where}.claim_idx", f"must be a claim position from 0 to {len(claims) - 1}"
            )
        if idx in seen:
            raise LabelError(f"{where}.claim_idx", f"claim {idx} is labelled twice")
        seen.add(idx)
        correct = _bool(item, "correct", f"{where}.correct")
        if correct is None:
            raise LabelError(f"{where}.correct", "must be true or false")
        verdict_label = _choice(item.get("verdict"), VERDICTS, f"{where}.verdict")
        category = _choice(item.get("category"), CATEGORIES, f"{where}.category")
        if correct and (verdict_label is not None or category is not None):
            judged = claims[idx]
            if verdict_label not in (None, judged.get("verdict")) or category not in (
                None,
                judged.get("category"),
            ):
                raise LabelError(
                    f"{where}.verdict", "a claim marked correct keeps the judge's verdict"
                )
        out.labels.append(Label("claim", idx, correct, verdict_label, category))
    raw_missed = body.get("missed", [])
    if not isinstance(raw_missed, list):
        raise LabelError("missed", "must be a list")
    if len(raw_missed) > MAX_MISSED:
        raise LabelError("missed", f"at most {MAX_MISSED} spans at a time")
    for n, item in enumerate(raw_missed):
        where = f"missed[{n}]"
        if not isinstance(item, dict):
            raise LabelError(where, "must be an object")
        extra = sorted(set(item) - {"text", "category", "verdict"})
        if extra:
            raise LabelError(f"{where}.{extra[0]}", "is not a field of a missed span")
        text = item.get("text")
        if not isinstance(text, str) or not text.strip():
            raise LabelError(f"{where}.text", "must be the span's text")
        _unicode(text, f"{where}.text")
        if answer is None:
            raise LabelError(f"{where}.text", "this verdict does not carry its answer")
        if text.strip() not in answer:
            raise LabelError(f"{where}.text", "is not a substring of the answer")
        category = _choice(item.get("category"), CATEGORIES, f"{where}.category")
        verdict_label = _choice(item.get("verdict", "invented"), VERDICTS, f"{where}.verdict")
        if verdict_label == "grounded":
            raise LabelError(f"{where}.verdict", "a missed hallucination is not grounded")
        out.labels.append(
            Label("missed", None, None, verdict_label, category or "GENERICA", text.strip())
        )
    hallucinated = _bool(body, "hallucinated", "hallucinated")
    note = body.get("note")
    if note is not None:
        if not isinstance(note, str):
            raise LabelError("note", "must be text")
        _unicode(note, "note")
        if len(note) > MAX_NOTE:
            raise LabelError("note", f"at most {MAX_NOTE} characters")
        if "\x00" in note:
            raise LabelError("note", "contains a NUL character")
        note = note.strip() or None
    if hallucinated is not None or note is not None:
        out.labels.append(Label("answer", hallucinated=hallucinated, note=note))
    if not out.labels:
        raise LabelError("body", "says nothing: give claims, missed, hallucinated or note")
    return out


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside: for loading and scoring thousands of verdicts at
    once, whose objects are not garbage. Passes of the collector over them, again and again as
    they accumulate, were a quarter of the agreement's time at 10,000 answers. Reference
    counting still frees everything meanwhile; the collector runs again afterwards (unless it
    was off before, or another thread turned it back on first: it is the process's)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


# -- resolution ---------------------------------------------------------------------------------
def _gold_of_claim(claim: dict[str, Any], label: dict[str, Any]) -> tuple[str, str | None]:
    """The (verdict, category) a reviewer's label gives a claim."""
    judged = str(claim.get("verdict") or "invented")
    category = claim.get("category") if isinstance(claim.get("category"), str) else None
    if label.get("correct"):
        return judged, category
    verdict = label.get("verdict")
    if not isinstance(verdict, str):
        verdict = "grounded" if judged != "grounded" else "invented"
    if verdict == "grounded":
        return verdict, None
    put = label.get("category")
    return verdict, put if isinstance(put, str) else (category or "GENERICA")


def _latest_by_reviewer(rows: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each reviewer's latest row (rows come in id order)."""
    latest: dict[str, dict[str, Any]] = {}
    for row in rows:
        latest[str(row["reviewer"])] = row
    return latest


def _majority(values: list[tuple[Any, int]]) -> Any:
    """The most common value; among equals, the one whose latest row is newest."""
    counts = Counter(v for v, _ in values)
    newest = {v: max(i for w, i in values if w == v) for v in counts}
    return max(counts, key=lambda v: (counts[v], newest[v]))


def labelled_record(verdict: dict[str, Any], rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The labelled record (spec §12) an answer's label rows make: its triple, the corrected
    verdicts as ``labels``, and ``reviewers`` (who labelled it)."""
    claims = [c for c in verdict.get("claims") or [] if isinstance(c, dict)]
    by_claim: dict[Any, list[dict[str, Any]]] = {}  # the claim rows of each position, in order
    for row in rows:
        if row["kind"] == "claim":
            by_claim.setdefault(row["claim_idx"], []).append(row)
    spans: list[dict[str, Any]] = []
    for idx, claim in enumerate(claims):
        mine = by_claim.get(idx)
        if mine:
            latest = _latest_by_reviewer(mine)
            if len(latest) == 1:  # one reviewer (most claims): their label is the majority
                gold = _gold_of_claim(claim, next(iter(latest.values())))
            else:
                gold = _majority(
                    [(_gold_of_claim(claim, r), int(r["id"])) for r in latest.values()]
                )
        else:
            gold = _gold_of_claim(claim, {"correct": True})
        verdict_label, category = gold
        if verdict_label != "grounded":
            spans.append(
                {"text": str(claim.get("text") or ""), "category": category or "GENERICA",
                 "verdict": verdict_label}
            )  # fmt: skip
    seen_missed: set[tuple[str, str]] = set()
    for row in rows:
        if row["kind"] == "missed":
            key = (str(row["text"]), str(row["category"]))
            if key not in seen_missed:
                seen_missed.add(key)
                spans.append(
                    {"text": row["text"], "category": row["category"] or "GENERICA",
                     "verdict": row["verdict"] or "invented"}
                )  # fmt: skip
    said = [r for r in rows if r["kind"] == "answer" and r["hallucinated"] is not None]
    if said:
        latest = _latest_by_reviewer(said)
        hallucinated = bool(
            _majority([(bool(r["hallucinated"]), int(r["id"])) for r in latest.values()])
        )
    else:
        hallucinated = bool(spans)
    given = _dict(verdict.get("input"))
    metadata = _dict(verdict.get("metadata"))
    return {
        "id": verdict.get("id"),
        "query": given.get("query"),
        "context": given.get("context"),
        "answer": given.get("answer"),
        "metadata": metadata,
        "labels": {"hallucinated": hallucinated, "spans": spans},
        "reviewers": sorted({str(r["reviewer"]) for r in rows}),
    }


# -- agreement ----------------------------------------------------------------------------------
def wilson(hits: int, total: int, z: float = 1.959963984540054) -> list[float] | None:
    """The 95 % Wilson score interval of ``hits`` out of ``total`` (None when total is 0)."""
    if total <= 0:
        return None
    p = hits / total
    denominator = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denominator
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denominator
    return [round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)]


def _figures(tp: int, fp: int, fn: int) -> dict[str, Any]:
    said, gold = tp + fp, tp + fn
    return {
        "labelled": said,
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "precision": tp / said if said else None,
        "precision_interval": wilson(tp, said),
        "recall": tp / gold if gold else None,
        "recall_interval": wilson(tp, gold),
    }


def _probability(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


class _ScoredClaim:
    """A stored claim as :func:`~veredito.worker.calibrate.score` reads it (a :class:`Claim`'s
    attributes)."""

    __slots__ = ("category", "confidence", "kind", "text", "verdict")

    def __init__(self, claim: dict[str, Any]) -> None:
        category = claim.get("category")
        self.text = str(claim.get("text") or "")
        self.verdict = str(claim.get("verdict") or "invented")
        self.category = category if isinstance(category, str) else None
        self.confidence = _probability(claim.get("confidence"))
        self.kind = "advice" if claim.get("kind") == "advice" else None


class _ScoredFinding:
    __slots__ = ("category", "problem")

    def __init__(self, finding: dict[str, Any]) -> None:
        self.category = str(finding.get("category") or "GENERICA")
        self.problem = finding.get("kind") != "derived"  # RuleFinding.problem


class _Scored:
    """A stored verdict as :func:`~veredito.worker.calibrate.score` reads it: the attributes of a
    :class:`Verdict` it uses, read straight from the JSON the store gave back (the worker wrote
    it from a Verdict, so it is one already). Same counts as ``Verdict.model_validate``; a
    verdict pydantic would refuse (a field this version does not know) is scored all the same.
    ``score`` reading another attribute fails loudly here (tests/test_labels.py compares the
    agreement with ``calibrate``): add it."""

    __slots__ = ("claims", "hallucinated", "hallucination_confidence", "rule_findings", "status")

    def __init__(self, verdict: dict[str, Any]) -> None:
        self.status = str(verdict.get("status") or "ok")
        self.hallucinated = verdict.get("hallucinated") is True
        self.hallucination_confidence = _probability(verdict.get("hallucination_confidence"))
        self.claims = [_ScoredClaim(c) for c in verdict.get("claims") or [] if isinstance(c, dict)]
        self.rule_findings = [
            _ScoredFinding(f) for f in verdict.get("rule_findings") or [] if isinstance(f, dict)
        ]


def counts_of(record: dict[str, Any], verdict: dict[str, Any]) -> Counter[tuple[str, ...]]:
    """One answer's share of the agreement's counts: answer-level and per-category tp/fp/fn,
    and its claims' (gold, predicted) verdict pairs. The agreement is their sum, so an answer's
    share can be kept until its labels change (serve keeps them between refreshes)."""
    from veredito.worker.calibrate import score

    return _counts(score([record], cast("list[Verdict]", [_Scored(verdict)])))


def agreement_from(total: Counter[tuple[str, ...]], answers: int) -> dict[str, Any]:
    """The agreement's figures from summed :func:`counts_of`."""
    categories = {}
    for name in CATEGORIES:
        tp, fp, fn = (total[("category", name, f)] for f in ("tp", "fp", "fn"))
        if tp + fp + fn:
            categories[name] = _figures(tp, fp, fn)
    by_verdict = {}
    columns = [*VERDICTS, "missed"]
    for verdict in VERDICTS:
        hit = total[("confusion", verdict, verdict)]
        gold = sum(total[("confusion", verdict, p)] for p in columns)
        said = sum(total[("confusion", g, verdict)] for g in VERDICTS)
        if gold or said:
            by_verdict[verdict] = _figures(hit, said - hit, gold - hit)
    return {
        "answers": answers,
        "answer_level": _figures(*(total[("answer", f)] for f in ("tp", "fp", "fn"))),
        "categories": categories,
        "claim_verdicts": by_verdict,
    }


def agreement(
    records: Sequence[dict[str, Any]], verdicts: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """The judge (``verdicts``, as stored) against the labelled ``records`` of the same answers:
    answer level, per category, per claim verdict; each precision and recall with its Wilson
    interval. Exactly :func:`veredito.worker.calibrate.score`'s counts (it is additive: each
    answer's share is :func:`counts_of`). The stored verdicts are read for what score reads, not
    validated again (a pydantic Verdict per answer was 0.7 s of 3.3 s at 9,000 answers)."""
    from veredito.worker.calibrate import score

    with collector_paused():  # one score over all: a Report per answer costs twice the time
        report = score(list(records), cast("list[Verdict]", [_Scored(v) for v in verdicts]))
    return agreement_from(_counts(report), len(records))


def _counts(report: Any) -> Counter[tuple[str, ...]]:
    out: Counter[tuple[str, ...]] = Counter()
    for field_ in ("tp", "fp", "fn"):
        out[("answer", field_)] = getattr(report.answers, field_)
        for name, c in report.categories.items():
            if getattr(c, field_):
                out[("category", name, field_)] = getattr(c, field_)
    for (gold, predicted), n in report.confusion.items():
        out[("confusion", gold, predicted)] = n
    return +out


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def agreement_table(result: dict[str, Any]) -> str:
    """The agreement (of :func:`veredito.web.reviewing.agreement_of`) as ``calibrate`` prints it."""

    def fmt(value: float | None) -> str:
        return "   -" if value is None else f"{value:.2f}"

    def interval(value: list[float] | None) -> str:
        return "" if value is None else f"[{value[0]:.2f}, {value[1]:.2f}]"

    uniform = result["uniform"]
    lines = [
        f"labelled answers: {uniform['answers']} in the uniform slice "
        f"(share {result['sample_share']:g}), {result['chosen_to_teach']['answers']} chosen to "
        f"teach (not counted below); {result['labels']} labels",
        "",
        f"{'':<14}{'labelled':>9}{'precision':>11}{'95 % interval':>16}{'recall':>8}"
        f"{'95 % interval':>16}",
    ]
    rows = [("answer level", uniform["answer_level"])]
    rows += [(name, figures) for name, figures in uniform["categories"].items()]
    rows += [(f"claim {name}", figures) for name, figures in uniform["claim_verdicts"].items()]
    for name, f in rows:
        lines.append(
            f"{name:<14}{f['labelled']:>9}{fmt(f['precision']):>11}"
            f"{interval(f['precision_interval']):>16}{fmt(f['recall']):>8}"
            f"{interval(f['recall_interval']):>16}"
        )
    return "\n".join(lines) + "\n"
