"""The judge port.  A judge turns a valid triple into a :class:`Judgement`.

Two implementations: :mod:`veredito.worker.judges.llm` (an OpenAI-compatible model) and, offline,
the rules judge.  The pipeline takes a judge as a parameter and never knows which one it has.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from veredito.producer.triple import Triple
from veredito.worker.verdict import Claim, Faithfulness, JudgeInfo, RuleFinding

if TYPE_CHECKING:
    from veredito.worker.confidence import Calibration

__all__ = ["Judge", "Judgement"]


@dataclass
class Judgement:
    claims: list[Claim] | None = None  # None: the claims prompt was not run
    reported_score: float | None = None
    reasoning: str | None = None
    faithfulness: Faithfulness | None = None
    rule_findings: list[RuleFinding] = field(default_factory=list)
    non_claims: int = 0  # pieces of the answer dropped as stating nothing (rules judge)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: bool = False  # from the verdict cache: no call was made for it now
    info: JudgeInfo | None = None  # who judged, when not the judge's own info (a fallback)
    # what the rules' cross-check said of each claim: flag | grounded | silent (None: no
    # cross-check ran); the LLM judge's confidence rests on it (worker/confidence.py)
    rules_states: list[str] | None = None
    # the calibration that gave the confidences (read once per judgement: a new one may be
    # swapped in meanwhile); the pipeline stamps its name and version on the verdict
    calibration: Calibration | None = None


class Judge(Protocol):
    @property
    def info(self) -> JudgeInfo: ...

    async def judge(self, triple: Triple) -> Judgement: ...

    async def aclose(self) -> None: ...
