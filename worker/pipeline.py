"""The evaluation pipeline: envelope → triple → judge → score → verdict.

Plain async Python with no Celery import: the worker and ``veredito run`` both call
:meth:`Pipeline.evaluate`.  Every envelope ends as exactly one verdict — ``ok``, ``rejected``
(the input breaks the contract) or ``failed`` (the judge could not give a usable answer) — and a
failed one also yields a dead-letter record keeping the input and the judge's raw reply.
"""

from __future__ import annotations

import contextlib
import logging
import time
import traceback
from dataclasses import dataclass
from typing import Any

from veredito.producer.triple import (
    InvalidTriple,
    Limits,
    Triple,
    check_metadata,
    fallback_id,
    parse_triple,
    partial_input,
    rejection,
)
from veredito.worker.calibration_feed import stamped
from veredito.worker.confidence import hallucination_confidence
from veredito.worker.errors import JudgeOutputInvalid, PermanentError, RetryableError
from veredito.worker.judges.base import Judge
from veredito.worker.llm.privacy import redact_verdict
from veredito.worker.llm.spend import Spending
from veredito.worker.metrics import Metrics
from veredito.worker.scoring import count_categories, is_hallucinated, score_claims
from veredito.worker.verdict import JudgeInfo, TripleInput, Verdict, VerdictError, utc_now

__all__ = ["Outcome", "Pipeline", "Spending", "fallback_id"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Outcome:
    verdict: Verdict
    dead_letter: dict[str, Any] | None = None


class Pipeline:
    def __init__(
        self,
        judge: Judge,
        limits: Limits = Limits(),
        metrics: Metrics | None = None,
        *,
        keep_input: bool = True,
        spending: Spending | None = None,
        redact_stored: bool = False,
    ):
        self.judge = judge
        self.limits = limits
        self.metrics = metrics
        self.keep_input = keep_input  # the verdict carries the query, context and answer
        self.spending = spending or Spending()
        self.redact_stored = redact_stored  # the verdict's texts masked (worker/llm/privacy.py)

    async def evaluate(self, envelope: dict[str, Any]) -> Outcome:
        started = time.perf_counter()
        source = envelope.get("source") if isinstance(envelope.get("source"), dict) else None
        line = source.get("line") if source else None
        if envelope.get("error") is not None:
            raw = str(envelope.get("raw", ""))
            where = f"line {line}: " if line is not None else ""
            return Outcome(
                self._rejected(
                    fallback_id(raw),
                    str(envelope.get("error_kind") or "invalid_json"),
                    f"{where}{envelope['error']}",
                    source,
                )
            )
        raw_triple = envelope.get("triple")
        try:
            triple = parse_triple(raw_triple, self.limits, line if isinstance(line, int) else None)
        except InvalidTriple as exc:
            verdict = self._rejected(
                fallback_id(raw_triple), "invalid_triple", rejection(raw_triple, exc), source
            )
            if isinstance(raw_triple, dict) and isinstance(raw_triple.get("metadata"), dict):
                metadata = raw_triple["metadata"]
                if exc.field == "metadata.release":  # the rest of it (the app) still holds
                    metadata = {
                        k: v for k, v in metadata.items() if k not in ("release", "release_from")
                    }
                with contextlib.suppress(InvalidTriple):  # only metadata a verdict can carry
                    verdict.metadata = check_metadata(metadata)
            found = partial_input(raw_triple) if self.keep_input else None
            if found is not None:  # what was mapped, so that one can see what was missing
                verdict.input = TripleInput(
                    query=found.get("query"),
                    context=found.get("context", []),
                    answer=found.get("answer"),
                )
            return Outcome(verdict)

        judge, info = await self._judge_for(triple)
        if self.metrics is not None:
            self.metrics.inflight.inc()
        try:
            judgement = await judge.judge(triple)
        except Exception as exc:  # every triple ends as a verdict; nothing here is retried
            outcome = self._failed(triple.id, triple.metadata, exc, envelope, source, started)
            outcome.verdict.input = self._input(triple)
            usage = outcome.verdict.usage
            outcome.verdict.cost_usd = await self._spent(
                triple,
                info,
                usage.get("prompt_tokens", 0),
                usage.get("completion_tokens", 0),
                cached=False,
            )
            if self.redact_stored:
                redact_verdict(outcome.verdict, triple)
            return outcome
        finally:
            if self.metrics is not None:
                self.metrics.inflight.dec()
        info = judgement.info or info
        if judgement.calibration is not None:  # the name and version that gave the confidences
            info = stamped(info, judgement.calibration)

        judge_seconds = time.perf_counter() - started
        claims = judgement.claims or []
        verdict = Verdict(
            id=triple.id,
            status="ok",
            judge=info,
            claims=claims,
            score=score_claims(claims),
            reported_score=judgement.reported_score,
            hallucinated=is_hallucinated(claims),
            hallucination_confidence=hallucination_confidence(claims),
            categories=count_categories(claims),
            faithfulness=judgement.faithfulness,
            rule_findings=judgement.rule_findings,
            non_claims=judgement.non_claims,
            reasoning=judgement.reasoning,
            metadata=triple.metadata,
            usage={
                "prompt_tokens": judgement.prompt_tokens,
                "completion_tokens": judgement.completion_tokens,
            },
            timings={
                "judge_seconds": round(judge_seconds, 6),
                "total_seconds": round(time.perf_counter() - started, 6),
            },
            source=source,
            input=self._input(triple),
            cached=judgement.cached,
            cost_usd=await self._spent(
                triple,
                info,
                judgement.prompt_tokens,
                judgement.completion_tokens,
                cached=judgement.cached,
            ),
        )
        if self.redact_stored:
            redact_verdict(verdict, triple)
        return Outcome(verdict)

    async def _judge_for(self, triple: Triple) -> tuple[Judge, JudgeInfo]:
        """The judge for this triple: the rules judge when its app's daily budget is spent."""
        spending, info = self.spending, self.judge.info
        if (
            info.kind == "llm"
            and spending.budget is not None
            and spending.fallback is not None
            and await spending.budget.exhausted(triple.app)
        ):
            if self.metrics is not None:
                app = self.metrics.app_label(triple.app)
                self.metrics.child(self.metrics.budget_fallbacks, app).inc()
            fallback = spending.fallback.info
            return spending.fallback, fallback.model_copy(update={"fallback_reason": "budget"})
        return self.judge, info

    async def _spent(
        self, triple: Triple, info: JudgeInfo, prompt: int, completion: int, *, cached: bool
    ) -> float | None:
        """The judgement's cost (0 for the rules judge); a fresh one counts against the budget."""
        if info.kind == "rules":
            return 0.0
        cost = self.spending.pricing.cost(info.model, prompt, completion)
        budget = self.spending.budget
        if cost and not cached and budget is not None and budget.limit(triple.app) is not None:
            total = await budget.spend(triple.app, cost)
            if self.metrics is not None:
                app = self.metrics.app_label(triple.app)
                self.metrics.child(self.metrics.budget_spent, app).set(total)
        return cost

    def _input(self, triple: Triple) -> TripleInput | None:
        if not self.keep_input:
            return None
        return TripleInput(query=triple.query, context=list(triple.context), answer=triple.answer)

    def _rejected(
        self, verdict_id: str, kind: str, message: str, source: dict[str, Any] | None
    ) -> Verdict:
        return Verdict(
            id=verdict_id,
            status="rejected",
            error=VerdictError(kind=kind, message=message),
            judge=self.judge.info,
            source=source,
        )

    def _failed(
        self,
        triple_id: str,
        metadata: dict[str, Any],
        exc: BaseException,
        envelope: dict[str, Any],
        source: dict[str, Any] | None,
        started: float,
    ) -> Outcome:
        raw_reply = exc.raw if isinstance(exc, JudgeOutputInvalid) else None
        if isinstance(exc, RetryableError):
            kind = "judge_unavailable"
        elif isinstance(exc, PermanentError):
            kind = exc.kind
        else:
            kind = "internal_error"
            # The frames, never the message: a message may quote the answer or an ID number.
            log.error(
                "evaluation crashed: %s\n%s",
                type(exc).__name__,
                "".join(traceback.format_tb(exc.__traceback__)),
                extra={"id": triple_id},
            )
        log.warning("evaluation failed: %s", kind, extra={"id": triple_id, "kind": kind})
        message = str(exc) or type(exc).__name__
        elapsed = round(time.perf_counter() - started, 6)
        spent = getattr(exc, "usage", (0, 0))
        verdict = Verdict(
            id=triple_id,
            status="failed",
            usage={"prompt_tokens": spent[0], "completion_tokens": spent[1]},
            error=VerdictError(kind=kind, message=message, raw_reply=raw_reply),
            judge=self.judge.info,
            metadata=metadata,
            timings={"judge_seconds": elapsed, "total_seconds": elapsed},
            source=source,
        )
        dead_letter = {
            "id": triple_id,
            "reason": kind,
            "error": message,
            "raw_reply": raw_reply,
            "envelope": envelope,
            "failed_at": utc_now(),
        }
        return Outcome(verdict, dead_letter)
