"""Cross-check: the rules detectors read the claims an LLM judge called grounded.

A mention the detectors prove absent from the context, conflicting with it, or with wrong check
digits, inside a claim the LLM called ``grounded``, becomes a ``rule_findings`` entry and counts in
``veredito_rule_disagreements_total{category}``. In ``override`` mode the claim also becomes
``invented``/``contradicted`` with the mention's category (``source: "rules"``); in ``flag`` mode
(the default) the LLM's verdict stands.
"""

from __future__ import annotations

from typing import Literal

from veredito.producer.triple import Triple
from veredito.worker.calibration_feed import stamped
from veredito.worker.confidence import Calibration, llm_features, rules_verdict_on
from veredito.worker.judges.base import Judge, Judgement
from veredito.worker.metrics import Metrics
from veredito.worker.rules import check_texts
from veredito.worker.rules.detectors import find_mentions
from veredito.worker.rules.markdown import is_advice
from veredito.worker.rules.text import digitise
from veredito.worker.verdict import JudgeInfo, RuleFinding

__all__ = ["ConfidenceJudge", "CrossCheckedJudge"]


class CrossCheckedJudge:
    def __init__(
        self, inner: Judge, mode: Literal["flag", "override"], metrics: Metrics | None = None
    ) -> None:
        self._inner = inner
        self.mode = mode
        self._metrics = metrics

    @property
    def info(self) -> JudgeInfo:
        return self._inner.info

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def judge(self, triple: Triple) -> Judgement:
        judgement = await self._inner.judge(triple)
        if not judgement.claims:
            return judgement
        # every claim is checked (one pass of the detectors): the grounded ones for findings,
        # all of them for what the rules say of each, which the confidence rests on
        texts = [claim.text for claim in judgement.claims]
        checked_all = check_texts(texts, triple.context, triple.query)
        judgement.rules_states = [rules_verdict_on(checks) for checks in checked_all]
        grounded = [i for i, claim in enumerate(judgement.claims) if claim.verdict == "grounded"]
        checked = [checked_all[i] for i in grounded]
        for i, checks in zip(grounded, checked, strict=True):
            claim = judgement.claims[i]
            bad = [c for c in checks if c.status != "grounded"]
            for check in bad:
                category = check.mention.category
                judgement.rule_findings.append(
                    RuleFinding(
                        category=category,
                        text=check.mention.text,
                        kind=check.finding or "absent_from_context",
                        claim_idx=i,
                    )
                )
                if self._metrics is not None:
                    self._metrics.child(self._metrics.disagreements, category).inc()
            if bad and self.mode == "override":
                judgement.claims[i] = claim.model_copy(
                    update={
                        "verdict": bad[0].status,
                        "category": bad[0].mention.category,
                        "chunk_idx": None,
                        "source": "rules",
                    }
                )
        return judgement


def claim_is_advice(text: str, state: str) -> bool:
    """An LLM judge's claim that is advice (:func:`~veredito.worker.rules.markdown.is_advice`):
    the cross-check found nothing checkable in it (``silent``), or, without a cross-check,
    the detectors find nothing in it."""
    if state not in ("silent", "unknown"):
        return False
    mentions = 0 if state == "silent" else len(find_mentions(digitise(text)))
    return is_advice(text, mentions)


class ConfidenceJudge:
    """The LLM judge's confidences (spec §17): each claim's from its verdict, category and what
    the rules said of it (the cross-check's ``rules_states``; ``unknown`` without one). Claims
    that already carry one (the rules judge, past a budget) keep it."""

    def __init__(self, inner: Judge, calibration: Calibration) -> None:
        self._inner = inner
        self.calibration = calibration
        self._info = inner.info.model_copy(update={"calibration": calibration.label("llm")})

    @property
    def info(self) -> JudgeInfo:
        return stamped(self._info, self.calibration)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def judge(self, triple: Triple) -> Judgement:
        calibration = self.calibration  # once: a new one may be swapped in meanwhile
        judgement = await self._inner.judge(triple)
        judgement.calibration = calibration
        states = judgement.rules_states
        for i, claim in enumerate(judgement.claims or []):
            if claim.confidence is not None:
                continue
            state = states[i] if states is not None and i < len(states) else "unknown"
            if claim_is_advice(claim.text, state):
                claim.kind = "advice"
            claim.confidence = calibration.confidence(
                "llm", claim.verdict != "grounded", llm_features(claim, state)
            )
        return judgement
