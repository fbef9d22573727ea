"""The ``rules`` judge: the detectors of :mod:`veredito.worker.rules` behind the judge port."""

from __future__ import annotations

from collections import Counter

from veredito.producer.triple import Triple
from veredito.worker.calibration_feed import stamped
from veredito.worker.confidence import Calibration, default_calibration, rules_feature_sets
from veredito.worker.judges.base import Judgement
from veredito.worker.rules import judge
from veredito.worker.verdict import Claim, JudgeInfo, RuleFinding

__all__ = ["RULES_VERSION", "RulesJudge"]

RULES_VERSION = "rules-1"


class RulesJudge:
    def __init__(self, calibration: Calibration | None = None) -> None:
        self.calibration = calibration or default_calibration()
        self._info = JudgeInfo(
            kind="rules",
            model=RULES_VERSION,
            prompts={},
            calibration=self.calibration.label("rules"),
        )

    @property
    def info(self) -> JudgeInfo:
        return stamped(self._info, self.calibration)

    async def aclose(self) -> None:
        return None

    async def judge(self, triple: Triple) -> Judgement:
        calibration = self.calibration  # once: a new one may be swapped in meanwhile
        judgement = judge_triple(triple, calibration)
        judgement.calibration = calibration
        return judgement


def judge_triple(triple: Triple, calibration: Calibration | None = None) -> Judgement:
    calibration = calibration or default_calibration()
    claims: list[Claim] = []
    findings: list[RuleFinding] = []
    judged_answer = judge(triple.answer, triple.context, triple.query)
    for i, judged in enumerate(judged_answer.claims):
        claims.append(
            Claim(
                text=judged.text,
                verdict=judged.verdict,  # type: ignore[arg-type]
                category=judged.category,
                chunk_idx=judged.chunk_idx,
                source="rules",
                confidence=calibration.confidence(
                    "rules", judged.verdict != "grounded", rules_feature_sets(judged)
                ),
                kind=judged.kind,  # type: ignore[arg-type]
            )
        )
        for check in judged.checks:
            if check.finding is not None:
                derivation = check.derivation
                findings.append(
                    RuleFinding(
                        category=check.mention.category,
                        text=check.mention.text,
                        kind=check.finding,
                        claim_idx=i,
                        operation=derivation.operation if derivation else None,
                        operands=list(derivation.operands) if derivation else None,
                    )
                )
    return Judgement(
        claims=claims,
        reasoning=_reasoning(claims, judged_answer.non_claims),
        rule_findings=findings,
        non_claims=judged_answer.non_claims,
    )


def _reasoning(claims: list[Claim], non_claims: int = 0) -> str:
    advice = sum(1 for c in claims if c.kind == "advice")
    claims = [c for c in claims if c.kind != "advice"]
    bad = Counter(c.category or "GENERICA" for c in claims if c.verdict != "grounded")
    skipped = (
        f" {non_claims} trecho(s) sem afirmação (títulos, fontes) não avaliado(s)."
        if non_claims
        else ""
    )
    if advice:
        skipped += (
            f" {advice} recomendação(ões) ou cortesia(s), sem fato a verificar, não contada(s)."
        )
    if not claims:
        return "Resposta sem afirmações verificáveis." + skipped
    if not bad:
        return f"As {len(claims)} afirmações encontram apoio no contexto." + skipped
    found = ", ".join(f"{category} ({n})" for category, n in sorted(bad.items()))
    return (
        f"{sum(bad.values())} de {len(claims)} afirmações sem apoio no contexto: {found}." + skipped
    )
