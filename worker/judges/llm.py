"""The LLM judge: render the prompts, ask the model, read its reply (spec §4–5).

Both prompts of a triple are asked concurrently.  An invalid reply is asked for again once, with
the validation error appended to the conversation; a second invalid reply raises
:class:`~veredito.worker.errors.JudgeOutputInvalid` carrying the raw reply.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pydantic import ValidationError

from veredito.producer.triple import Triple
from veredito.prompts import load_template, render_context
from veredito.worker.errors import JudgeOutputInvalid
from veredito.worker.judges.base import Judgement
from veredito.worker.llm.client import ChatClient, Completion, Message
from veredito.worker.llm.parsing import ParsedClaims, parse_claims, parse_faithfulness
from veredito.worker.llm.spend import VerdictCache
from veredito.worker.metrics import Metrics
from veredito.worker.verdict import Claim, Faithfulness, JudgeInfo

__all__ = ["REASK", "LLMJudge"]

T = TypeVar("T")

REASK = (
    "Sua resposta anterior não pôde ser usada: {error}. Responda novamente APENAS com o JSON "
    "válido no formato pedido, sem markdown e sem texto fora do JSON."
)


class LLMJudge:
    def __init__(
        self,
        client: ChatClient,
        prompts: tuple[str, ...],
        metrics: Metrics | None = None,
        cache: VerdictCache | None = None,
    ) -> None:
        self._client = client
        self._metrics = metrics
        self._cache = cache
        self._templates = {name: load_template(name) for name in prompts}
        self._info = JudgeInfo(
            kind="llm",
            model=client.model,
            prompts={name: t.version for name, t in self._templates.items()},
        )

    @property
    def info(self) -> JudgeInfo:
        return self._info

    async def aclose(self) -> None:
        if self._cache is not None:
            await self._cache.aclose()
        if self._client.limiter is not None:
            await self._client.limiter.aclose()

    async def judge(self, triple: Triple) -> Judgement:
        result = Judgement()
        jobs: list[Awaitable[object]] = []
        claims_t = self._templates.get("claims")
        faith_t = self._templates.get("faithfulness")
        n = len(triple.context)
        block = render_context(triple.context)
        rendered: list[str] = []
        if claims_t is not None:
            prompt = claims_t.fill(triple.query, block, triple.answer)
            rendered.append(prompt)
            jobs.append(self._ask(prompt, lambda text: parse_claims(text, n), result))
        if faith_t is not None:
            prompt = faith_t.fill(triple.query, block, triple.answer)
            rendered.append(prompt)
            jobs.append(self._ask(prompt, parse_faithfulness_only(self._metrics), result))
        key = None
        if self._cache is not None:
            app = triple.metadata.get("app") if isinstance(triple.metadata, dict) else None
            key = VerdictCache.key(
                self._info.model,
                self._info.prompts,
                rendered,
                app if isinstance(app, str) else None,
            )
            hit = _from_cache(await self._cache.get(key))
            if hit is not None:
                for job in jobs:  # never started: close them
                    job.close()  # type: ignore[attr-defined]
                return hit
        outcomes = await asyncio.gather(*jobs, return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                # the tokens were spent all the same; the pipeline reports them on the verdict
                outcome.usage = (result.prompt_tokens, result.completion_tokens)  # type: ignore[attr-defined]
                raise outcome
        for outcome in outcomes:
            if isinstance(outcome, ParsedClaims):
                result.claims = outcome.claims
                result.reported_score = outcome.reported_score
                result.reasoning = outcome.reasoning
            elif isinstance(outcome, Faithfulness):
                result.faithfulness = outcome
        if self._cache is not None and key is not None:
            await self._cache.put(key, _to_cache(result))
        return result

    async def _ask(self, prompt: str, parse: Callable[[str], T], result: Judgement) -> T:
        messages: list[Message] = [{"role": "user", "content": prompt}]
        completion = await self._complete(messages, result)
        try:
            return self._read(completion, parse)
        except JudgeOutputInvalid as first:
            if self._metrics is not None:
                self._metrics.retries.labels("invalid_output").inc()
            messages.append({"role": "assistant", "content": completion.content})
            messages.append({"role": "user", "content": REASK.format(error=first)})
        completion = await self._complete(messages, result)
        return self._read(completion, parse)

    async def _complete(self, messages: list[Message], result: Judgement) -> Completion:
        completion = await self._client.complete(messages)
        result.prompt_tokens += completion.prompt_tokens
        result.completion_tokens += completion.completion_tokens
        return completion

    def _read(self, completion: Completion, parse: Callable[[str], T]) -> T:
        if completion.finish_reason == "length":
            raise JudgeOutputInvalid(
                "the reply was cut off (finish_reason length); answer more briefly",
                completion.content,
            )
        parsed = parse(completion.content)
        if isinstance(parsed, ParsedClaims) and self._metrics is not None:
            self._metrics.record_repairs(parsed.repairs)
        return parsed


def parse_faithfulness_only(metrics: Metrics | None) -> Callable[[str], Faithfulness]:
    def parse(text: str) -> Faithfulness:
        faithfulness, repairs = parse_faithfulness(text)
        if metrics is not None:
            metrics.record_repairs(repairs)
        return faithfulness

    return parse


def _to_cache(result: Judgement) -> dict[str, Any]:
    """What the LLM said, parsed (the cross-check runs again on a hit: it is deterministic)."""
    return {
        "claims": None if result.claims is None else [c.model_dump() for c in result.claims],
        "reported_score": result.reported_score,
        "reasoning": result.reasoning,
        "faithfulness": None if result.faithfulness is None else result.faithfulness.model_dump(),
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
    }


def _from_cache(value: dict[str, Any] | None) -> Judgement | None:
    if value is None:
        return None
    try:
        claims = value.get("claims")
        faithfulness = value.get("faithfulness")
        return Judgement(
            claims=None if claims is None else [Claim.model_validate(c) for c in claims],
            reported_score=value.get("reported_score"),
            reasoning=value.get("reasoning"),
            faithfulness=None
            if faithfulness is None
            else Faithfulness.model_validate(faithfulness),
            prompt_tokens=int(value.get("prompt_tokens") or 0),
            completion_tokens=int(value.get("completion_tokens") or 0),
            cached=True,
        )
    except (ValidationError, TypeError, ValueError):
        return None  # an entry of another version: judge afresh
