"""Did the new release make it worse? The comparison of two sets of verdicts (spec §18), the one
the API's ``/v1/compare``, ``veredito compare``, ``veredito.compare`` and the release gauges use.

Each side is tallied (:func:`tally`): its judged answers (status ``ok``), the hallucinated ones
and, for each of the seven categories, the answers with a non-grounded claim of it. The rows of
the result are the answer level, then the seven categories, each with the rate of both sides,
its 95 % Wilson interval and the difference ``head − base``.

Two designs, chosen by the data (``paired=None``):

- **independent** (two releases seen in production: different answers): the difference of two
  proportions with Newcombe's hybrid score interval (method 10 of Newcombe 1998, built from the
  two Wilson intervals). A row ``regressed`` when the interval lies wholly above 0 and
  ``improved`` when wholly below.
- **paired** (one labelled set judged twice, by two prompts, models or retrievers: the same
  triple ids, keyed with ``metadata.app``): only the answers judged on both sides count, the
  discordant pairs decide. The exact McNemar test gives ``p_value``; the difference
  ``(head_only − base_only) / pairs`` carries Newcombe's paired interval (method 10 of Newcombe
  1998b, with his continuity-corrected φ). A row ``regressed`` when p < α and more answers
  went bad than good, ``improved`` the other way round. Automatic when at least half of the
  smaller side's judged ids are on both sides; the others are counted in ``unpaired``.

Seven categories at once: eight tests at 95 % would mark some row of two equally good releases
regressed or improved in one comparison of three. The answer level is the primary test, at
α = 0.05. Each category is decided at α = 0.05 / 7 (Bonferroni): its ``adjusted_interval`` is
the 1 − 0.05/7 interval (z ≈ 2.69) and decides ``regressed``/``improved``, its ``interval``
stays the 95 % one to read; a paired category's p-value is compared with 0.05 / 7. Each row says
its ``alpha``; the answer row's ``adjusted_interval`` is its 95 % one. The paired decision is the
p-value's: the exact test and the interval can disagree at the edge (the test is the
conservative one).

``confident=True`` counts only the hallucinations the judge is sure of (spec §17): an answer
whose ``hallucination_confidence`` is at or above the threshold, a category whose highest
non-grounded claim ``confidence`` is; a confidence missing (an older worker's verdict or claim)
counts as confident, as the metrics and the store's SQL count it: a category with one claim
without a confidence is confident whatever its other claims say.

Where reviewers' labels exist for both sides, each row carries the judge's precision on each
side (``veredito.labels.agreement``: the share of the judge's hallucination calls the reviewers
confirmed), and a regressed row whose head precision is below 0.5, or 0.2 below the base's,
gets a ``note``: the judge may have invented the regression.

Errors: :class:`ValueError` for a side without judged answers (the message names the side), a
verdict that is not one (naming its position), or ``paired=True`` with no shared ids.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any, TypeGuard

from veredito.proportions import (
    Z95,
    mcnemar_exact,
    newcombe_interval,
    newcombe_paired_interval,
    wilson_interval,
)
from veredito.worker.verdict import CATEGORIES, Verdict

__all__ = [
    "ALPHA",
    "CATEGORY_ALPHA",
    "Tally",
    "check_verdict",
    "compare",
    "compare_tallies",
    "format_table",
    "precision_from_labels",
    "tally",
]

ALPHA = 0.05  # the answer level, the primary test
CATEGORY_ALPHA = ALPHA / len(CATEGORIES)  # each category (Bonferroni over seven)
Z_CATEGORY = NormalDist().inv_cdf(1 - CATEGORY_ALPHA / 2)  # ≈ 2.6901
PAIRED_SHARE = 0.5  # paired=None: shared ids at least this share of the smaller side's
LOW_PRECISION = 0.5  # a regression beside a head precision below this gets a note
PRECISION_DROP = 0.2  # … or beside a head precision this much below the base's
STATUSES = ("ok", "rejected", "failed")

Precision = Mapping[str, Mapping[str, Any]]


# -- tallies ------------------------------------------------------------------------------------
@dataclass
class Tally:
    """One side's counts: judged answers, hallucinated answers, answers per category."""

    answers: int = 0
    hallucinated: int = 0
    categories: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CATEGORIES, 0))


@dataclass(frozen=True, slots=True)
class _Answer:
    """A judged answer as the comparison reads it (confidence already applied)."""

    key: tuple[str, str]  # (metadata.app, id)
    hallucinated: bool
    categories: frozenset[str]


def _number(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def check_verdict(value: Any) -> str | None:
    """What makes ``value`` not a verdict (spec §6) the comparison can read, or None."""
    if not isinstance(value, Mapping):
        return "not a JSON object"
    if not isinstance(value.get("id"), str) or not value["id"]:
        return "id: a verdict needs a non-empty string id"
    if value.get("status") not in STATUSES:
        return "status: must be ok, rejected or failed"
    if "hallucinated" in value and not isinstance(value["hallucinated"], bool):
        return "hallucinated: must be true or false"
    for name in ("hallucination_confidence",):
        if value.get(name) is not None and not _number(value[name]):
            return f"{name}: must be a number or null"
    for name in ("categories", "metadata"):
        if value.get(name) is not None and not isinstance(value[name], Mapping):
            return f"{name}: must be an object"
    claims = value.get("claims")
    if claims is not None:
        if not isinstance(claims, list):
            return "claims: must be a list"
        for i, claim in enumerate(claims):
            if not isinstance(claim, Mapping) or not isinstance(claim.get("verdict"), str):
                return f"claims[{i}]: must be an object with a verdict"
            if claim.get("confidence") is not None and not _number(claim["confidence"]):
                return f"claims[{i}].confidence: must be a number or null"
    return None


def _read(verdict: Any, confident: bool, threshold: float, where: int) -> _Answer | None:
    """One verdict (dict or :class:`Verdict`) as an answer; None unless its status is ok."""
    if isinstance(verdict, Verdict):
        if verdict.status != "ok":
            return None
        key = (verdict.app or "", verdict.id)
        said = verdict.hallucinated
        sure = verdict.hallucination_confidence
        claims = [(c.verdict, c.category, c.confidence) for c in verdict.claims]
        counted = verdict.categories
    else:
        problem = check_verdict(verdict)
        if problem is not None:
            raise ValueError(f"verdict {where}: {problem}")
        if verdict["status"] != "ok":
            return None
        app = (verdict.get("metadata") or {}).get("app")
        key = (app if isinstance(app, str) else "", verdict["id"])
        said = verdict.get("hallucinated") is True
        sure = verdict.get("hallucination_confidence")
        claims = [
            (c["verdict"], c.get("category"), c.get("confidence"))
            for c in verdict.get("claims") or []
        ]
        counted = verdict.get("categories") or {}
    # each flagged category's highest claim confidence, a claim without one (an older worker's)
    # highest of all: the category counts as confident when any of its claims does, as the
    # store's SQL counts it (a claim's confidence missing or at or above the threshold)
    highest: dict[str, float] = {}
    for label, category, confidence in claims:
        if label == "grounded":
            continue
        name = category if isinstance(category, str) and category else "GENERICA"
        mine = math.inf if confidence is None else confidence
        highest[name] = max(highest.get(name, -math.inf), mine)
    for name, count in counted.items():
        if _number(count) and count > 0:
            highest.setdefault(name, math.inf)

    def sure_enough(confidence: float | None) -> bool:
        return not confident or confidence is None or confidence >= threshold

    return _Answer(
        key,
        said and sure_enough(sure),
        frozenset(c for c, s in highest.items() if c in CATEGORIES and sure_enough(s)),
    )


def _verdicts(side: Any) -> Iterable[Any]:
    """A side's verdicts: an iterable of them, or a :class:`veredito.api.Report`."""
    verdicts = getattr(side, "verdicts", None)
    return verdicts if isinstance(verdicts, list) else side


def _answers(side: Any, confident: bool, threshold: float) -> list[_Answer]:
    read = (_read(v, confident, threshold, i) for i, v in enumerate(_verdicts(side), 1))
    return [a for a in read if a is not None]


def _tally_of(answers: Iterable[_Answer]) -> Tally:
    out = Tally()
    for answer in answers:
        out.answers += 1
        out.hallucinated += answer.hallucinated
        for category in answer.categories:
            out.categories[category] += 1
    return out


def tally(verdicts: Any, *, confident: bool = False, threshold: float = 0.8) -> Tally:
    """The counts of one side: ``verdicts`` as dicts, :class:`Verdict` objects or a Report."""
    return _tally_of(_answers(verdicts, confident, threshold))


# -- rows ---------------------------------------------------------------------------------------
def _side(hits: int, total: int) -> dict[str, Any]:
    interval = wilson_interval(hits, total)
    return {
        "answers": total,
        "hallucinated": hits,
        "rate": hits / total if total else None,
        "interval": list(interval) if interval else None,
    }


def _level(name: str) -> tuple[float, float]:
    return (ALPHA, Z95) if name == "answer" else (CATEGORY_ALPHA, Z_CATEGORY)


def _independent_row(name: str, base: tuple[int, int], head: tuple[int, int]) -> dict[str, Any]:
    alpha, z = _level(name)
    (k1, n1), (k2, n2) = base, head
    interval = newcombe_interval(k1, n1, k2, n2)
    adjusted = newcombe_interval(k1, n1, k2, n2, z)
    return {
        "category": name,
        "base": _side(k1, n1),
        "head": _side(k2, n2),
        "difference": (k2 * n1 - k1 * n2) / (n1 * n2) if n1 and n2 else None,
        "interval": list(interval) if interval else None,
        "adjusted_interval": list(adjusted) if adjusted else None,
        "alpha": alpha,
        "regressed": adjusted is not None and adjusted[0] > 0,
        "improved": adjusted is not None and adjusted[1] < 0,
    }


def _paired_row(name: str, pairs: Sequence[tuple[bool, bool]]) -> dict[str, Any]:
    alpha, z = _level(name)
    n = len(pairs)
    both = sum(1 for b, h in pairs if b and h)
    base_only = sum(1 for b, h in pairs if b and not h)
    head_only = sum(1 for b, h in pairs if h and not b)
    neither = n - both - base_only - head_only
    interval = newcombe_paired_interval(both, base_only, head_only, neither)
    adjusted = newcombe_paired_interval(both, base_only, head_only, neither, z)
    p = mcnemar_exact(base_only, head_only)
    return {
        "category": name,
        "base": _side(both + base_only, n),
        "head": _side(both + head_only, n),
        "difference": (head_only - base_only) / n if n else None,
        "interval": list(interval) if interval else None,
        "adjusted_interval": list(adjusted) if adjusted else None,
        "alpha": alpha,
        "discordant": {"base_only": base_only, "head_only": head_only},
        "p_value": p,
        "regressed": p < alpha and head_only > base_only,
        "improved": p < alpha and head_only < base_only,
    }


def _add_precision(
    rows: list[dict[str, Any]], base: Precision | None, head: Precision | None
) -> None:
    if base is None or head is None:
        return
    for row in rows:
        mine = [
            dict(side.get(row["category"]) or {"precision": None, "labelled": 0})
            for side in (base, head)
        ]
        row["precision"] = {"base": mine[0], "head": mine[1]}
        was, now = mine[0].get("precision"), mine[1].get("precision")
        if not row["regressed"] or not _number(now):
            continue
        dropped = _number(was) and was - now >= PRECISION_DROP
        if now < LOW_PRECISION or dropped:
            before = f"{was:.2f}" if _number(was) else "unknown"
            row["note"] = (
                f"the judge's precision on the head side is {now:.2f} (base {before}) on "
                f"{mine[1].get('labelled', 0)} labelled answers it flagged: the regression may "
                "be the judge's, not the app's"
            )


def _result(
    base_name: str,
    head_name: str,
    confident: bool,
    threshold: float | None,
    rows: list[dict[str, Any]],
    **extra: Any,
) -> dict[str, Any]:
    return {
        "base": base_name,
        "head": head_name,
        "confident": confident,
        "threshold": threshold if confident else None,
        "paired": False,
        **extra,
        "alpha": {"answer": ALPHA, "category": CATEGORY_ALPHA},
        "rows": rows,
        "regressed": any(r["regressed"] for r in rows),
        "improved": any(r["improved"] for r in rows),
    }


def _require(tallied: Tally, name: str) -> None:
    if tallied.answers <= 0:
        raise ValueError(f"{name}: no judged answers (no verdict with status ok)")


def compare_tallies(
    base: Tally,
    head: Tally,
    *,
    base_name: str = "base",
    head_name: str = "head",
    confident: bool = False,
    threshold: float | None = None,
    base_precision: Precision | None = None,
    head_precision: Precision | None = None,
) -> dict[str, Any]:
    """Two independent sides compared row by row (see the module); JSON-ready."""
    _require(base, base_name)
    _require(head, head_name)
    rows = [
        _independent_row(
            "answer", (base.hallucinated, base.answers), (head.hallucinated, head.answers)
        )
    ]
    for name in CATEGORIES:
        rows.append(
            _independent_row(
                name,
                (base.categories.get(name, 0), base.answers),
                (head.categories.get(name, 0), head.answers),
            )
        )
    _add_precision(rows, base_precision, head_precision)
    return _result(base_name, head_name, confident, threshold, rows)


def _pairs(base: list[_Answer], head: list[_Answer]) -> list[tuple[_Answer, _Answer]]:
    """The answers judged on both sides, in the base side's order (an id twice on one side:
    its first verdict, as the store keeps it)."""
    theirs: dict[tuple[str, str], _Answer] = {}
    for answer in head:
        theirs.setdefault(answer.key, answer)
    seen: set[tuple[str, str]] = set()
    out = []
    for answer in base:
        if answer.key in theirs and answer.key not in seen:
            seen.add(answer.key)
            out.append((answer, theirs[answer.key]))
    return out


def compare(
    a: Any,
    b: Any,
    *,
    confident: bool = False,
    threshold: float = 0.8,
    paired: bool | None = None,
    base_name: str = "base",
    head_name: str = "head",
    base_precision: Precision | None = None,
    head_precision: Precision | None = None,
    labels: Iterable[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Base ``a`` against head ``b`` (verdict dicts, :class:`Verdict` objects or Reports),
    paired when they share ids (``paired=None``) or as told. Precision beside the rates: as
    given, else from reviewers' labels (spec §12 records in ``labels``, matched by app and id,
    or a ``labels`` field on the verdicts themselves) when both sides have some."""
    base_list, head_list = list(_verdicts(a)), list(_verdicts(b))
    base = _answers(base_list, confident, threshold)
    head = _answers(head_list, confident, threshold)
    _require(_tally_of(base), base_name)
    _require(_tally_of(head), head_name)
    if base_precision is None and head_precision is None:
        gold = list(labels or [])
        base_precision = precision_from_labels(base_list, gold)
        head_precision = precision_from_labels(head_list, gold)
    matched = _pairs(base, head) if paired is not False else []
    smaller = min(len({x.key for x in base}), len({x.key for x in head}))
    if paired is True and not matched:
        raise ValueError(f"{base_name} and {head_name} share no judged ids: nothing to pair")
    if paired is None and (not matched or len(matched) < PAIRED_SHARE * smaller):
        matched = []
    if not matched:
        return compare_tallies(
            _tally_of(base),
            _tally_of(head),
            base_name=base_name,
            head_name=head_name,
            confident=confident,
            threshold=threshold,
            base_precision=base_precision,
            head_precision=head_precision,
        )
    rows = [_paired_row("answer", [(x.hallucinated, y.hallucinated) for x, y in matched])]
    for name in CATEGORIES:
        rows.append(
            _paired_row(name, [(name in x.categories, name in y.categories) for x, y in matched])
        )
    _add_precision(rows, base_precision, head_precision)
    unpaired = {"base": len(base) - len(matched), "head": len(head) - len(matched)}
    return _result(
        base_name,
        head_name,
        confident,
        threshold,
        rows,
        paired=True,
        pairs=len(matched),
        unpaired=unpaired,
    )


# -- the judge's precision ----------------------------------------------------------------------
def _labels_ok(labels: Any) -> bool:
    spans = labels.get("spans", []) if isinstance(labels, Mapping) else None
    return (
        isinstance(labels, Mapping)
        and isinstance(labels.get("hallucinated"), bool)
        and isinstance(spans, list)
        and all(
            isinstance(s, Mapping)
            and isinstance(s.get("text"), str)
            and s.get("category") in CATEGORIES
            for s in spans
        )
    )


def _same_answer(record: Mapping[str, Any], verdict: Mapping[str, Any]) -> bool:
    given = verdict.get("input")
    judged = given.get("answer") if isinstance(given, Mapping) else None
    labelled = record.get("answer")
    return not (isinstance(judged, str) and isinstance(labelled, str)) or judged == labelled


def precision_from_labels(
    verdicts: Iterable[Any], labelled: Iterable[Mapping[str, Any]] = ()
) -> dict[str, dict[str, Any]] | None:
    """The judge's precision per row (``answer`` and each category that has some) on the judged
    answers of ``verdicts`` that reviewers labelled: a ``labels`` field on the verdict, or a
    labelled record (spec §12, what ``veredito labels export`` writes) of the same app and id in
    ``labelled`` — of the same answer: when both say what the answer was (the record's ``answer``,
    the verdict's ``input.answer``), a record of another answer text (the release answered
    anew) is not this answer's label. None when no answer is labelled. The figures are
    :func:`veredito.labels.agreement`'s (``labelled``, ``precision``, ``precision_interval``…)."""
    from veredito.labels import agreement

    gold: dict[tuple[str, str], Mapping[str, Any]] = {}
    for given in labelled:
        metadata = given.get("metadata")
        app = metadata.get("app") if isinstance(metadata, Mapping) else None
        gold.setdefault((app if isinstance(app, str) else "", str(given.get("id"))), given)
    records, judged = [], []
    record: Mapping[str, Any] | None
    for i, verdict in enumerate(verdicts, 1):
        if isinstance(verdict, Verdict):  # no labels field: only a labelled record of its id
            record = gold.get((verdict.app or "", verdict.id))
            if verdict.status != "ok" or record is None:
                continue
            plain: Mapping[str, Any] = verdict.model_dump(mode="json")
        else:
            plain = verdict
            if not isinstance(plain, Mapping) or plain.get("status") != "ok":
                continue
            app = (plain.get("metadata") or {}).get("app")
            key = (app if isinstance(app, str) else "", str(plain.get("id")))
            inline = plain.get("labels")
            record = {"id": plain.get("id"), "labels": inline} if inline is not None else None
            record = record or gold.get(key)
            if record is None:
                continue
        if not _same_answer(record, plain):
            continue
        if not _labels_ok(record.get("labels")):
            raise ValueError(
                f"verdict {i} ({plain.get('id')}): labels must be "
                '{"hallucinated": bool, "spans": [{"text", "category", "verdict"}]} (spec §12)'
            )
        records.append(dict(record))
        judged.append(dict(plain))
    if not records:
        return None
    figures = agreement(records, judged)
    out = {"answer": figures["answer_level"]}
    out.update(figures["categories"])
    return out


# -- the table ----------------------------------------------------------------------------------
def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _span(interval: Sequence[float] | None, signed: bool = False) -> str:
    if interval is None:
        return ""
    form = "{:+.1f}" if signed else "{:.1f}"
    return "[" + ", ".join(form.format(100 * x) for x in interval) + "]"


def _word(row: Mapping[str, Any]) -> str:
    return "REGRESSED" if row["regressed"] else "improved" if row["improved"] else "—"


def format_table(result: Mapping[str, Any]) -> str:
    """The comparison as fixed-width text: one row per category, rates in percent and the
    difference in percentage points, each with its interval."""
    rows = result["rows"]
    paired = result["paired"]
    has_precision = any("precision" in r for r in rows)
    first = rows[0]
    if paired:
        design = (
            f"paired: {result['pairs']} answers judged on both sides (left unpaired: "
            f"{result['unpaired']['base']} base, {result['unpaired']['head']} head)"
        )
    else:
        design = "independent: two samples of answers"
    lines = [
        f"base  {result['base']}  ({first['base']['answers']} judged answers)",
        f"head  {result['head']}  ({first['head']['answers']} judged answers)",
        design,
    ]
    if result["confident"]:
        lines.append(f"confident hallucinations only (confidence >= {result['threshold']:g})")
    header = f"{'':<13} {'base':>21} {'head':>21} {'head - base (pp)':>25}"
    if paired:
        header += f" {'b':>5} {'c':>5} {'p':>9}"
    if has_precision:
        header += f" {'precision':>11}"
    lines += ["", header]
    for row in rows:
        interval = row["interval"] if row["category"] == "answer" else row["adjusted_interval"]
        difference = row["difference"]
        line = (
            f"{row['category']:<13} "
            f"{_percent(row['base']['rate']):>6} {_span(row['base']['interval']):>14} "
            f"{_percent(row['head']['rate']):>6} {_span(row['head']['interval']):>14} "
            f"{'-' if difference is None else f'{100 * difference:+.1f}':>6} "
            f"{_span(interval, signed=True):>18}"
        )
        if paired:
            discordant = row["discordant"]
            line += (
                f" {discordant['base_only']:>5} {discordant['head_only']:>5} {row['p_value']:>9.2g}"
            )
        if has_precision:
            sides = row.get("precision") or {}
            line += " " + f"{_short(sides.get('base'))}/{_short(sides.get('head'))}".rjust(11)
        lines.append(f"{line}  {_word(row)}")
    lines += [
        "",
        "rates: 95 % Wilson intervals; difference: Newcombe's interval, 95 % for the answer,",
        f"{100 * (1 - CATEGORY_ALPHA):.2f} % for each category (Bonferroni over "
        f"{len(CATEGORIES)} categories)",
    ]
    if paired:
        lines.append(
            "b: hallucinated on base only, c: on head only; p: exact McNemar test, decides at "
            f"{ALPHA:g} (answer), {CATEGORY_ALPHA:.4f} (category)"
        )
    lines += [f"note: {r['category']}: {r['note']}" for r in rows if "note" in r]
    return "\n".join(lines) + "\n"


def _short(figures: Mapping[str, Any] | None) -> str:
    value = (figures or {}).get("precision")
    return f"{value:.2f}" if _number(value) else "-"
