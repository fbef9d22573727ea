"""The ``rules`` judge: the detectors of :mod:`veredito.worker.rules` behind the judge port."""

from __future__ import annotations

from collections import Counter

from veredito.producer.triple import Triple
from veredito.worker.judges.base import Judgement
from veredito.worker.rules import judge_answer
from veredito.worker.verdict import Claim, JudgeInfo, RuleFinding

__all__ = ["RULES_VERSION", "RulesJudge"]

RULES_VERSION = "rules-1"


class RulesJudge:
    def __init__(self) -> None:
        self._info = JudgeInfo(kind="rules", model=RULES_VERSION, prompts={})

    @property
    def info(self) -> JudgeInfo:
        return self._info

    async def aclose(self) -> None:
        return None

    async def judge(self, triple: Triple) -> Judgement:
        return judge_triple(triple)


def judge_triple(triple: Triple) -> Judgement:
    claims: list[Claim] = []
    findings: list[RuleFinding] = []
    for i, judged in enumerate(judge_answer(triple.answer, triple.context)):
        claims.append(
            Claim(
                text=judged.text,
                verdict=judged.verdict,  # type: ignore[arg-type]
                category=judged.category,
                chunk_idx=judged.chunk_idx,
                source="rules",
            )
        )
        for check in judged.checks:
            if check.finding is not None:
                findings.append(
                    RuleFinding(
                        category=check.mention.category,
                        text=check.mention.text,
                        kind=check.finding,
                        claim_idx=i,
                    )
                )
    return Judgement(claims=claims, reasoning=_reasoning(claims), rule_findings=findings)


def _reasoning(claims: list[Claim]) -> str:
    bad = Counter(c.category or "GENERICA" for c in claims if c.verdict != "grounded")
    if not claims:
        return "Resposta sem afirmações verificáveis."
    if not bad:
        return f"As {len(claims)} afirmações encontram apoio no contexto."
    found = ", ".join(f"{category} ({n})" for category, n in sorted(bad.items()))
    return f"{sum(bad.values())} de {len(claims)} afirmações sem apoio no contexto: {found}."
