"""The verdict (spec §6): one JSON object per triple, whatever happened to it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer

__all__ = [
    "CATEGORIES",
    "VERDICTS",
    "Claim",
    "Faithfulness",
    "JudgeInfo",
    "RuleFinding",
    "TripleInput",
    "Verdict",
    "VerdictError",
    "utc_now",
]

VerdictLabel = Literal["grounded", "partial", "invented", "contradicted"]
VERDICTS: tuple[str, ...] = ("grounded", "partial", "invented", "contradicted")
CATEGORIES: tuple[str, ...] = (
    "LEI",
    "CNPJ_CPF_RG",
    "ENTIDADE_BR",
    "PRAZO_VALOR",
    "POLITICA",
    "GEOGRAFIA_BR",
    "GENERICA",
)


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Claim(_Model):
    text: str
    verdict: VerdictLabel
    category: str | None = None
    chunk_idx: int | None = None
    source: Literal["llm", "rules"] = "llm"
    # spec §17: the calibrated probability that this verdict is right (a hallucination really is
    # one; a grounded claim really is supported); None when no calibration applied
    confidence: float | None = None
    # "advice": a recommendation, courtesy or talk about the answer itself, not a claim of fact
    # (spec §17): not counted in the score; None (omitted) for a claim of fact
    kind: Literal["advice"] | None = None

    @model_serializer(mode="wrap")
    def _without_kind(self, handler: Any) -> dict[str, Any]:
        """``kind`` only on advice (a claim of fact keeps spec §6's shape)."""
        data: dict[str, Any] = handler(self)
        if data.get("kind") is None:
            data.pop("kind", None)
        return data

    @property
    def supported(self) -> bool:
        return self.verdict in ("grounded", "partial")


class Faithfulness(_Model):
    score: float
    reasoning: str = ""
    unsupported_claims: list[str] = Field(default_factory=list)


class RuleFinding(_Model):
    category: str
    text: str
    kind: str  # absent_from_context | conflicts_with_context | invalid_check_digit | derived
    claim_idx: int | None = None
    # kind "derived": how the value follows from the context ("×", ["R$ 310,00", "2"])
    operation: str | None = None
    operands: list[str] | None = None

    @model_serializer(mode="wrap")
    def _without_empty(self, handler: Any) -> dict[str, Any]:
        """``operation`` and ``operands`` only on ``derived`` findings (spec §6 keeps its shape)."""
        data: dict[str, Any] = handler(self)
        for name in ("operation", "operands"):
            if data.get(name) is None:
                data.pop(name, None)
        return data

    @property
    def problem(self) -> bool:
        """A finding against the answer (``derived`` only says how a value was grounded)."""
        return self.kind != "derived"


class JudgeInfo(_Model):
    kind: Literal["llm", "rules"]
    model: str | None = None
    prompts: dict[str, str] = Field(default_factory=dict)
    fallback_reason: str | None = None  # "budget": the app's daily budget was spent
    # which calibration gave the confidences: "default" (shipped, fitted on the project's
    # labelled sets), "prior" (the LLM judge's documented prior) or a fitted file's name
    calibration: str | None = None
    # the store's version of that calibration when serve --store fitted it (issue 30: the judges
    # follow VEREDITO_CALIBRATION=<serve's /v1/calibration URL>); None for the shipped one or a file
    calibration_version: int | None = None

    @model_serializer(mode="wrap")
    def _without_fallback(self, handler: Any) -> dict[str, Any]:
        """``fallback_reason``, ``calibration`` and ``calibration_version`` only when there is
        one (spec §6 keeps its shape)."""
        data: dict[str, Any] = handler(self)
        for name in ("fallback_reason", "calibration", "calibration_version"):
            if data.get(name) is None:
                data.pop(name, None)
        return data


class VerdictError(_Model):
    kind: str
    message: str
    raw_reply: str | None = None  # failed verdicts of kind judge_output_invalid keep the reply


class TripleInput(_Model):
    """What was judged: the review page shows it (off with ``VEREDITO_VERDICT_INPUT=off``). A
    rejected triple's verdict keeps the fields it did carry as text, the others ``None``."""

    query: str | None
    context: list[str]
    answer: str | None


class Verdict(_Model):
    id: str
    status: Literal["ok", "rejected", "failed"]
    error: VerdictError | None = None
    judge: JudgeInfo | None = None
    claims: list[Claim] = Field(default_factory=list)
    score: float | None = None
    reported_score: float | None = None
    hallucinated: bool = False
    # spec §17: the highest confidence among the non-grounded claims (None: there are none)
    hallucination_confidence: float | None = None
    categories: dict[str, int] = Field(default_factory=dict)
    faithfulness: Faithfulness | None = None
    rule_findings: list[RuleFinding] = Field(default_factory=list)
    non_claims: int = 0  # pieces of the answer that state nothing (headings, source lists)
    reasoning: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    usage: dict[str, int] = Field(
        default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0}
    )
    timings: dict[str, float] = Field(default_factory=dict)
    evaluated_at: str = Field(default_factory=utc_now)
    source: dict[str, Any] | None = None  # where the triple came from (file and line), if known
    input: TripleInput | None = None  # the query, context and answer judged (beyond spec §6)
    cached: bool = False  # the judge's result came from the verdict cache (no call now)
    cost_usd: float | None = None  # what the judge's tokens cost; None when the price is unknown

    @property
    def app(self) -> str | None:
        app = self.metadata.get("app")
        return app if isinstance(app, str) and app else None

    @property
    def release(self) -> str:
        """The release of the RAG app that answered (spec §18): ``metadata.release``, checked at
        ingest; ``unknown`` when there is none."""
        release = self.metadata.get("release")
        return release if isinstance(release, str) and release else "unknown"
