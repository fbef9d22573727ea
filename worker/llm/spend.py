"""What judging costs: prices per model, daily budgets per app, and the verdict cache.

- :class:`Pricing`: US dollars per million prompt and completion tokens, from
  ``VEREDITO_LLM_PRICE_PROMPT``/``_COMPLETION`` or a table of common OpenAI models (approximate:
  list prices when this was written; set your own for your contract, Azure, or other providers).
- :class:`Budget`: ``VEREDITO_BUDGET_DAILY`` (``app:amount`` pairs, ``*`` for every other app), in
  dollars per UTC day, spent in Redis so that every worker sees one total. Past it, that app's
  triples are judged by the rules judge, and the verdict says so; nothing is dropped.
- :class:`VerdictCache`: the judge's parsed result, keyed by (prompt versions, model, rendered
  prompts), in Redis with a TTL: a triple seen again costs no call.

Redis being away never stops judging: the budget counts in the process meanwhile, and the cache
misses.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from veredito.producer.optional import need_redis

if TYPE_CHECKING:
    from veredito.worker.judges.base import Judge

__all__ = ["PRICES", "Budget", "Pricing", "Spending", "VerdictCache", "parse_budgets"]

log = logging.getLogger(__name__)

# US dollars per million tokens (prompt, completion): approximate list prices, for estimates.
PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-5-nano": (0.05, 0.40),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5": (1.25, 10.00),
    "o3-mini": (1.10, 4.40),
    "o4-mini": (1.10, 4.40),
    "gpt-3.5-turbo": (0.50, 1.50),
}


@dataclass(frozen=True)
class Pricing:
    prompt: float | None = None  # overrides for every model, per million tokens
    completion: float | None = None

    def of(self, model: str | None) -> tuple[float, float] | None:
        """(prompt, completion) dollars per million tokens for ``model``; None when unknown."""
        known = None
        if model:
            name = model.lower().rsplit("/", 1)[-1]  # "openai/gpt-4o-mini" as routers write it
            matches = [k for k in PRICES if name == k or name.startswith(k + "-")]
            if matches:
                known = PRICES[max(matches, key=len)]  # gpt-4o-mini-2024-07-18 → gpt-4o-mini
        if self.prompt is not None or self.completion is not None:
            base = known or (0.0, 0.0)
            return (
                self.prompt if self.prompt is not None else base[0],
                self.completion if self.completion is not None else base[1],
            )
        return known

    def cost(self, model: str | None, prompt_tokens: int, completion_tokens: int) -> float | None:
        prices = self.of(model)
        if prices is None:
            return None
        return round((prompt_tokens * prices[0] + completion_tokens * prices[1]) / 1e6, 8)


def parse_budgets(spec: str | None) -> dict[str, float]:
    """``sac-bot:20,rh-bot:5.5,*:10`` → {app: dollars a day}. Raises ValueError naming the pair."""
    budgets: dict[str, float] = {}
    for part in (spec or "").split(","):
        part = part.strip()
        if not part:
            continue
        app, sep, amount = part.rpartition(":")
        try:
            value = float(amount)
        except ValueError:
            value = -1.0
        if not sep or not app.strip() or value < 0:
            raise ValueError(
                f"VEREDITO_BUDGET_DAILY: {part!r} is not app:amount "
                "(dollars a day, e.g. sac-bot:20)"
            )
        budgets[app.strip()] = value
    return budgets


def _day() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d")


class Budget:
    """Dollars spent per app and UTC day, shared through Redis (or counted in this process)."""

    def __init__(self, limits: dict[str, float], redis_url: str | None = None) -> None:
        self.limits = limits
        self._local: dict[tuple[str, str], float] = {}
        self._redis: Any = None
        self._warned = False
        self._errors: tuple[type[BaseException], ...] = (OSError,)
        if redis_url:
            need_redis()  # a clear message without the [redis] extra
            import redis.asyncio

            self._errors = (redis.RedisError, OSError)
            self._redis = redis.asyncio.Redis.from_url(
                redis_url, socket_timeout=2, socket_connect_timeout=2
            )

    def limit(self, app: str | None) -> float | None:
        return self.limits.get(app or "", self.limits.get("*"))

    def _key(self, app: str, day: str) -> str:
        return f"veredito:spend:{day}:{app}"

    def _away(self, exc: BaseException) -> None:
        if not self._warned:
            log.warning("budgets: Redis unreachable (%s); counting in this process",
                        type(exc).__name__)  # fmt: skip
            self._warned = True

    async def spent(self, app: str | None) -> float:
        name, day = app or "", _day()
        if self._redis is not None:
            try:
                value = await self._redis.get(self._key(name, day))
                self._warned = False
                return float(value or 0.0)
            except self._errors as exc:
                self._away(exc)
        return self._local.get((name, day), 0.0)

    async def exhausted(self, app: str | None) -> bool:
        limit = self.limit(app)
        return limit is not None and await self.spent(app) >= limit

    async def spend(self, app: str | None, dollars: float) -> float:
        """Add ``dollars`` to today's spend of ``app``; the new total."""
        name, day = app or "", _day()
        if dollars <= 0:
            return await self.spent(app)
        if self._redis is not None:
            try:
                key = self._key(name, day)
                async with self._redis.pipeline(transaction=True) as pipe:
                    pipe.incrbyfloat(key, dollars)
                    pipe.expire(key, 3 * 86400)
                    total, _ = await pipe.execute()
                return float(total)
            except self._errors as exc:
                self._away(exc)
        self._local[(name, day)] = self._local.get((name, day), 0.0) + dollars
        return self._local[(name, day)]

    async def aclose(self) -> None:
        if self._redis is not None:
            await self._redis.aclose()


class VerdictCache:
    """The judge's parsed results in Redis, for ``ttl`` seconds."""

    def __init__(self, redis_url: str, ttl: int, metrics: Any = None) -> None:
        need_redis()  # a clear message without the [redis] extra
        import redis.asyncio

        self._errors = (redis.RedisError, OSError)
        self.ttl = ttl
        self._metrics = metrics
        self._redis: Any = redis.asyncio.Redis.from_url(
            redis_url, socket_timeout=2, socket_connect_timeout=2
        )
        self._warned = False

    @staticmethod
    def key(
        model: str | None, versions: dict[str, str], prompts: list[str], app: str | None = None
    ) -> str:
        """sha256 over the app, the model, the prompt versions and every rendered prompt: one
        app never reads another's cached judgement (nor learns, by a hit, what it sent)."""
        material = json.dumps(
            [model, sorted(versions.items()), prompts, app or ""], ensure_ascii=False
        )
        return "veredito:cache:" + hashlib.sha256(material.encode("utf-8")).hexdigest()

    def _count(self, result: str) -> None:
        if self._metrics is not None:
            self._metrics.cache.labels(result).inc()

    async def get(self, key: str) -> dict[str, Any] | None:
        try:
            raw = await self._redis.get(key)
        except self._errors as exc:
            if not self._warned:
                log.warning("verdict cache unreachable (%s): judging", type(exc).__name__)
                self._warned = True
            self._count("error")
            return None
        self._warned = False
        if raw is None:
            self._count("miss")
            return None
        try:
            value = json.loads(raw)
        except ValueError:
            self._count("miss")
            return None
        self._count("hit")
        return value if isinstance(value, dict) else None

    async def put(self, key: str, value: dict[str, Any]) -> None:
        try:
            await self._redis.set(key, json.dumps(value, ensure_ascii=False), ex=self.ttl)
        except self._errors as exc:
            log.debug("verdict cache not written (%s)", type(exc).__name__)

    async def aclose(self) -> None:
        await self._redis.aclose()


@dataclass
class Spending:
    """Prices, budgets and the judge a spent budget falls back to (see worker/llm/spend.py)."""

    pricing: Pricing = field(default_factory=Pricing)
    budget: Budget | None = None
    fallback: Judge | None = None  # the rules judge

    async def aclose(self) -> None:
        if self.budget is not None:
            await self.budget.aclose()
