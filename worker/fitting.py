"""``veredito calibrate --fit``: a calibration (worker/confidence.py) fitted on labelled answers.

Each claim a judge makes on a labelled answer is one example: its features (``rules_features``,
``llm_features`` of :mod:`veredito.worker.confidence`) and whether its verdict is right — a
flagged claim is right when a labelled span falls in it (as ``calibrate`` matches spans to
claims), a grounded one when none does. Two logistic regressions per judge (flagged, grounded),
fitted by scikit-learn (the ``[calibration]`` extra) with its default L2 penalty. Logistic
regression minimises the log loss, which is what makes its probabilities calibrated on data like
its training data; with a few dozen one-hot and bounded features it cannot overfit a few thousand
claims the way trees would, and it ships as a handful of coefficients.

The answers are split by a hash of their id: a quarter is kept out of the fit and the reliability
(claims by confidence bin, the share right in each) and the expected calibration error are
reported on it; the file's models are then fitted on every answer.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from veredito.worker.confidence import (
    CAPS,
    FORMAT,
    Model,
    llm_features,
    rules_feature_sets,
    rules_verdict_on,
)
from veredito.worker.rules import judge
from veredito.worker.rules.engine import check_texts
from veredito.worker.rules.text import fold

__all__ = [
    "Example",
    "fit_calibration",
    "llm_examples",
    "reliability",
    "rules_examples",
]

PRIOR_LLM: dict[str, Any] = {
    "flagged": {"kind": "table", "default": 0.75, "table": [
        ["kind:advice", 0.3],
        ["llm:flag&rules:flag", 0.92], ["llm:flag&rules:silent", 0.75],
        ["llm:flag&rules:grounded", 0.55], ["llm:flag&rules:unknown", 0.75]]},
    "grounded": {"kind": "table", "default": 0.8, "table": [
        ["kind:advice", 0.5],
        ["llm:grounded&rules:flag", 0.35], ["llm:grounded&rules:grounded", 0.9],
        ["llm:grounded&rules:silent", 0.78], ["llm:grounded&rules:unknown", 0.8]]},
    "calibration": "prior",
}  # fmt: skip


@dataclass(frozen=True)
class Example:
    answer: str  # the labelled answer's id (the split is by answer)
    flagged: bool
    features: dict[str, float]
    right: bool
    category: str | None
    # the other parts' features (confidence.rules_feature_sets): predicted as the weakest part
    parts: tuple[dict[str, float], ...] = ()

    def predict(self, model: Model) -> float:
        """The confidence ``model`` gives this claim as judging does (its weakest part)."""
        return min(model.predict(f) for f in (self.features, *self.parts))


def _gold_needles(record: dict[str, Any]) -> list[str]:
    labels = record.get("labels") if isinstance(record.get("labels"), dict) else {}
    spans = labels.get("spans") if isinstance(labels, dict) else None
    return [
        fold(s["text"])
        for s in spans or []
        if isinstance(s, dict) and isinstance(s.get("text"), str)
    ]


def _answer_key(record: dict[str, Any], n: int) -> str:
    return str(record.get("id") or f"#{n}")


def rules_examples(records: Sequence[dict[str, Any]]) -> list[Example]:
    """The rules judge's claims on labelled records, judged now."""
    from veredito.producer.triple import InvalidTriple, parse_triple

    out = []
    for n, record in enumerate(records):
        try:
            triple = parse_triple({k: v for k, v in record.items() if not k.startswith("_")
                                   and k not in ("labels", "reviewers")})  # fmt: skip
        except InvalidTriple:
            continue  # a rejected answer has no claims to calibrate
        judged = judge(triple.answer, triple.context, triple.query)
        needles = _gold_needles(record)
        for claim in judged.claims:
            if claim.kind == "advice":
                continue  # no claim of fact: neither flagged nor counted (spec §17)
            bad = any(n_ in fold(claim.text) for n_ in needles)
            flagged = claim.verdict != "grounded"
            first, *others = rules_feature_sets(claim)
            out.append(
                Example(_answer_key(record, n), flagged, first,
                        bad if flagged else not bad, claim.category, tuple(others))
            )  # fmt: skip
    return out


def llm_examples(
    records: Sequence[dict[str, Any]], verdicts: Sequence[dict[str, Any]]
) -> list[Example]:
    """An LLM judge's stored claims on reviewed answers (records from ``labels export``)."""
    from veredito.worker.judges.crosscheck import claim_is_advice
    from veredito.worker.verdict import Claim

    out = []
    for n, (record, verdict) in enumerate(zip(records, verdicts, strict=True)):
        judge_info = verdict.get("judge") if isinstance(verdict.get("judge"), dict) else {}
        if not isinstance(judge_info, dict) or judge_info.get("kind") != "llm":
            continue
        claims = [
            Claim.model_validate(c) for c in verdict.get("claims") or [] if isinstance(c, dict)
        ]
        if not claims:
            continue
        context = record.get("context")
        chunks = [context] if isinstance(context, str) else list(context or [])
        states = [
            rules_verdict_on(checks)
            for checks in check_texts(
                [c.text for c in claims], chunks, str(record.get("query") or "")
            )
        ]
        needles = _gold_needles(record)
        for claim, state in zip(claims, states, strict=True):
            if claim_is_advice(claim.text, state):
                claim.kind = "advice"
            bad = any(n_ in fold(claim.text) for n_ in needles)
            flagged = claim.verdict != "grounded"
            out.append(
                Example(_answer_key(record, n), flagged, llm_features(claim, state),
                        bad if flagged else not bad, claim.category)
            )  # fmt: skip
    return out


def _fit(examples: Sequence[Example], part: str) -> Model:
    model = _fit_model(examples)
    return replace(model, caps=CAPS) if part == "grounded" else model


def _fit_model(examples: Sequence[Example]) -> Model:
    try:
        from sklearn.linear_model import LogisticRegression
    except ImportError:  # pragma: no cover - depends on the install
        raise RuntimeError(
            "fitting a calibration needs scikit-learn: pip install 'veredito[calibration]'"
        ) from None
    names = sorted({name for e in examples for name in e.features})
    rows = [[e.features.get(name, 0.0) for name in names] for e in examples]
    ys = [int(e.right) for e in examples]
    if len(set(ys)) < 2:  # every example right (or wrong): a constant
        p = min(max(sum(ys) / max(len(ys), 1), 0.02), 0.98)
        return Model("table", default=round(p, 4))
    model = LogisticRegression(C=1.0, max_iter=2000)
    model.fit(rows, ys)
    coef = [round(float(c), 6) for c in model.coef_[0]]
    return Model("logistic", tuple(names), tuple(coef), round(float(model.intercept_[0]), 6))


def reliability(pairs: Sequence[tuple[float, bool]], bins: int = 10) -> dict[str, Any]:
    """Claims by confidence bin: how many, the mean confidence, the share right; and the
    expected calibration error (the bins' |share right − mean confidence|, weighted)."""
    table = []
    ece = 0.0
    for b in range(bins):
        low, high = b / bins, (b + 1) / bins
        inside = [(p, y) for p, y in pairs if low <= p < high or (b == bins - 1 and p == 1.0)]
        if not inside:
            continue
        mean = sum(p for p, _ in inside) / len(inside)
        right = sum(y for _, y in inside) / len(inside)
        ece += len(inside) / len(pairs) * abs(right - mean)
        table.append({"from": low, "to": high, "claims": len(inside), "confidence": round(mean, 4),
                      "right": round(right, 4)})  # fmt: skip
    return {"claims": len(pairs), "ece": round(ece, 4) if pairs else None, "bins": table}


def _fold(key: str) -> int:
    """The answer's fold, 0–3, by a hash of its id; fold 0 is the held-out quarter."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()[0] // 64


def _held_out(key: str) -> bool:
    return _fold(key) == 0  # a quarter


# What a flag's confidence may be capped by: its category, a partial verdict, a lexical finding
# (GENERICA by the share of words), advice the LLM judge flagged. (A "partly right" feature, some
# of the claim's mentions found, was tried: on holdout9 it raised PRAZO_VALOR's confident false
# flags from 3 to 10, the dev sets' partly right claims being mostly real slips; the weakest
# part's confidence, confidence.rules_feature_sets, is what partly right claims get instead.)
EARNED_GROUPS = ("c:", "v:partial", "f:lexical", "kind:advice")
EARNED_MIN_FLAGS = 4  # fewer confident flags of a group than this: no evidence either way
RARELY_RIGHT = 0.5  # a group whose confident flags are right less often than this is capped
BELOW_THE_LINE = 0.79  # the highest a capped group may reach: under the default alert line 0.8


def earned_caps(
    pairs: Sequence[tuple[float, Example]], threshold: float = 0.8
) -> list[dict[str, Any]]:
    """Confidence earned per group of flags (spec §17, issue 30): for each category or finding
    kind, the flags given at least ``threshold`` on answers the model was not fitted on, and how
    many of them were right. A group whose confident flags are rarely right (under
    :data:`RARELY_RIGHT`, on at least :data:`EARNED_MIN_FLAGS`) is capped at the upper end of
    the 95 % Wilson interval of their precision — the most the evidence allows — and never
    above :data:`BELOW_THE_LINE`: it stays on the review page and never pages anyone by default.
    A group right more often keeps what the model gives it (the model, not a cap, is what tells
    its good flags from its bad ones). Every group's count is reported."""
    from veredito.proportions import wilson_interval

    keys = sorted({k for _, e in pairs if e.flagged for k in e.features
                   if k.startswith(EARNED_GROUPS)})  # fmt: skip
    out = []
    for key in keys:
        sure = [e for p, e in pairs if e.flagged and e.features.get(key) and p >= threshold]
        right = sum(e.right for e in sure)
        interval = wilson_interval(right, len(sure))
        row: dict[str, Any] = {"feature": key, "flags": len(sure), "right": right, "cap": None}
        if (
            interval is not None
            and len(sure) >= EARNED_MIN_FLAGS
            and right < RARELY_RIGHT * len(sure)
        ):
            row["cap"] = round(min(interval[1], BELOW_THE_LINE), 4)
        out.append(row)
    return out


def _with_caps(model: Model, caps: Sequence[dict[str, Any]]) -> Model:
    earned = tuple((c["feature"], c["cap"]) for c in caps if c["cap"] is not None)
    return replace(model, caps=(*model.caps, *earned))


def _fit_judge(
    examples: Sequence[Example], evidence: Sequence[Example] = ()
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The judge's two models fitted on every example, and the held-out quarter's report.

    The flagged model's earned caps (:func:`earned_caps`) come from ``evidence`` (answers never
    fitted on) when given, else from the answers of folds 1–3 each predicted by a model fitted
    without its fold; the held-out quarter (fold 0) is reported with them applied, so it never
    informs the caps it is measured with."""
    flagged_all = [e for e in examples if e.flagged]
    caps: list[dict[str, Any]] = []
    evidence_pairs: list[tuple[float, Example]]
    if flagged_all:
        if evidence:
            final = _fit(flagged_all, "flagged")
            evidence_pairs = [(e.predict(final), e) for e in evidence if e.flagged]
        else:
            evidence_pairs = []
            for fold in (1, 2, 3):
                train = [e for e in flagged_all if _fold(e.answer) not in (0, fold)]
                if train:
                    model = _fit(train, "flagged")
                    evidence_pairs += [
                        (e.predict(model), e) for e in flagged_all if _fold(e.answer) == fold
                    ]
        caps = earned_caps(evidence_pairs)
    report: dict[str, Any] = {}
    pairs_all: list[tuple[float, bool]] = []
    for part, flagged in (("flagged", True), ("grounded", False)):
        mine = [e for e in examples if e.flagged is flagged]
        fit_on = [e for e in mine if not _held_out(e.answer)]
        kept = [e for e in mine if _held_out(e.answer)]
        if fit_on:
            model = _fit(fit_on, part)
            if flagged:
                model = _with_caps(model, caps)
            pairs = [(e.predict(model), e.right) for e in kept]
            report[part] = reliability(pairs)
            pairs_all += pairs
    report["all"] = reliability(pairs_all)
    report["earned"] = caps
    models: dict[str, Any] = {}
    for part, flagged in (("flagged", True), ("grounded", False)):
        if any(e.flagged is flagged for e in examples):
            model = _fit([e for e in examples if e.flagged is flagged], part)
            models[part] = (_with_caps(model, caps) if flagged else model).as_dict()
    return models, report


def fit_calibration(
    rules: Sequence[Example],
    llm: Sequence[Example] | None,
    name: str,
    sources: list[str],
    evidence: Sequence[Example] = (),
) -> dict[str, Any]:
    """A calibration file's body: the rules judge fitted on ``rules``; the LLM judge fitted on
    ``llm`` when there are LLM verdicts to fit, else the documented prior. ``evidence``: the
    rules judge's claims on answers never fitted on, where each group of flags earns its highest
    confidence (:func:`earned_caps`)."""
    rules_models, rules_report = _fit_judge(rules, evidence)
    body: dict[str, Any] = {
        "format": FORMAT,
        "name": name,
        "fitted_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "sources": sources,
        "judges": {"rules": {**rules_models, "calibration": name}, "llm": dict(PRIOR_LLM)},
        "held_out": {"rules": rules_report},
        "examples": {"rules": len(rules), "llm": len(llm or [])},
    }
    if llm and {e.flagged for e in llm} == {True, False}:
        llm_models, llm_report = _fit_judge(llm)
        body["judges"]["llm"] = {**llm_models, "calibration": name}
        body["held_out"]["llm"] = llm_report
    return body


def reliability_table(report: dict[str, Any]) -> str:
    lines = [f"{'confidence':<12}{'claims':>8}{'mean':>8}{'right':>8}"]
    for row in report["bins"]:
        lines.append(
            f"{row['from']:.1f}–{row['to']:.1f}{'':<4}{row['claims']:>8}{row['confidence']:>8.2f}"
            f"{row['right']:>8.2f}"
        )
    lines.append(f"expected calibration error {report['ece']}")
    return "\n".join(lines)


def in_held_out_quarter(key: str) -> bool:
    """Whether the answer ``key`` (a verdict id) is in the quarter a fit keeps out, by a hash of
    it: fixed, so a refit judges every candidate on the same answers (``serve --store``'s
    refit, :mod:`veredito.serving.refit`)."""
    return _held_out(key)


def log_loss(pairs: Sequence[tuple[float, bool]]) -> float | None:
    """The mean negative log-likelihood of ``(confidence, right)`` pairs (confidences clipped to
    [1e-6, 1 − 1e-6]); None with no pairs. Lower is better: what a logistic fit minimises."""
    import math

    if not pairs:
        return None
    total = 0.0
    for p, right in pairs:
        q = min(max(p, 1e-6), 1 - 1e-6)
        total -= math.log(q if right else 1 - q)
    return total / len(pairs)


def held_out_pairs(
    calibration: Any, rules: Sequence[Example], llm: Sequence[Example]
) -> list[tuple[float, bool]]:
    """``(confidence, right)`` of held-out examples under ``calibration`` (a
    :class:`~veredito.worker.confidence.Calibration`): the rules judge's claims with its rules
    models, the LLM judge's with its LLM models."""

    def features(e: Example) -> Any:  # as judging reads them: the weakest part's
        parts = getattr(e, "parts", ())
        return [e.features, *parts] if parts else e.features

    pairs = [(calibration.confidence("rules", e.flagged, features(e)), e.right) for e in rules]
    pairs += [(calibration.confidence("llm", e.flagged, features(e)), e.right) for e in llm]
    return pairs
