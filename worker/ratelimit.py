"""Rate limits on the judge shared by every worker process: requests and tokens per minute.

``VEREDITO_LLM_RPM`` and ``VEREDITO_LLM_TPM`` are the provider's limits for the model. Each
request reserves a slot before it is sent: one request and an estimate of its tokens (the prompt's
characters / 3, plus the completion it may write); after the reply the estimate is corrected by
the usage the provider reports. Reservations are spaced by a generic cell rate algorithm (GCRA):
half a second of burst, then one request every ``60 / rpm`` seconds and one token every
``60 / tpm``.

With a Redis (``VEREDITO_REDIS_URL``, or the broker's), the state lives in one Redis hash per model
and is changed by a Lua script, atomically, so ten workers on five hosts share one budget; without
Redis, or while it does not answer, each process keeps its own.

On a 429 the shared limit comes down by half (at most once a second, to a floor of a tenth) and
recovers linearly, back to the configured rate over ``recovery`` seconds (AIMD). A ``Retry-After``
pauses every process until then, not only the one that got it.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from veredito.producer.optional import need_redis

if TYPE_CHECKING:
    from veredito.worker.metrics import Metrics
    from veredito.worker.settings import Settings

__all__ = ["LocalLimiter", "RateLimiter", "RedisLimiter", "build_limiter", "estimate_tokens"]

log = logging.getLogger(__name__)

BURST_MS = 500.0  # half a second's worth may go at once: headroom under a provider's own burst
DECREASE = 0.5
FLOOR = 0.1
DEBOUNCE_MS = 1000.0  # 429s within a second of a decrease are the same overload

# KEYS[1] the model's hash. ARGV: now_ms, rpm, tpm, cost, recovery_ms.
# Returns {wait_ms, factor}.
_RESERVE = """
local now = tonumber(ARGV[1])
local rpm = tonumber(ARGV[2])
local tpm = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])
local recovery = tonumber(ARGV[5])
local s = redis.call('HMGET', KEYS[1], 'r_tat', 't_tat', 'factor', 'changed', 'pause')
local r_tat = tonumber(s[1]) or now
local t_tat = tonumber(s[2]) or now
local factor = tonumber(s[3]) or 1
local changed = tonumber(s[4]) or now
local pause = tonumber(s[5]) or 0
if factor < 1 then factor = math.min(1, factor + (now - changed) / recovery) end
local wait = math.max(0, pause - now)
if rpm > 0 then
  local tat = math.max(r_tat, now)
  wait = math.max(wait, tat - now - BURST_MS)
  r_tat = tat + 60000 / (rpm * factor)
end
if tpm > 0 then
  local tat = math.max(t_tat, now)
  wait = math.max(wait, tat - now - BURST_MS)
  t_tat = tat + cost * 60000 / (tpm * factor)
end
redis.call('HSET', KEYS[1], 'r_tat', r_tat, 't_tat', t_tat, 'factor', factor, 'changed', now)
redis.call('PEXPIRE', KEYS[1], 3600000)
return {tostring(wait), tostring(factor)}
""".replace("BURST_MS", str(BURST_MS))

# KEYS[1] the model's hash. ARGV: now_ms, retry_after_ms (-1: none), recovery_ms.
_DECREASE = """
local now = tonumber(ARGV[1])
local retry = tonumber(ARGV[2])
local recovery = tonumber(ARGV[3])
local s = redis.call('HMGET', KEYS[1], 'factor', 'changed', 'decreased', 'pause')
local factor = tonumber(s[1]) or 1
local changed = tonumber(s[2]) or now
local decreased = tonumber(s[3]) or -1e18
local pause = tonumber(s[4]) or 0
if factor < 1 then factor = math.min(1, factor + (now - changed) / recovery) end
if now - decreased >= DEBOUNCE_MS then
  factor = math.max(FLOOR, factor * DECREASE)
  decreased = now
end
if retry >= 0 then pause = math.max(pause, now + retry) end
redis.call('HSET', KEYS[1], 'factor', factor, 'changed', now, 'decreased', decreased,
           'pause', pause)
redis.call('PEXPIRE', KEYS[1], 3600000)
return tostring(factor)
""".replace("DEBOUNCE_MS", str(DEBOUNCE_MS)).replace("FLOOR", str(FLOOR))
_DECREASE = _DECREASE.replace("DECREASE", str(DECREASE))

# KEYS[1]; ARGV: tokens to add (negative: give back), tpm. Corrects t_tat after the reply.
_CORRECT = """
local tpm = tonumber(ARGV[2])
if tpm <= 0 then return 0 end
local s = redis.call('HMGET', KEYS[1], 't_tat', 'factor')
if not s[1] then return 0 end
local factor = tonumber(s[2]) or 1
redis.call('HSET', KEYS[1], 't_tat', tonumber(s[1]) + tonumber(ARGV[1]) * 60000 / (tpm * factor))
return 1
"""


def estimate_tokens(prompt_chars: int, max_tokens: int) -> int:
    """What a request may count against a tokens-per-minute limit before its reply is known:
    the prompt at three characters a token (Portuguese runs about 3.5 to 4) and a completion of
    up to 512 tokens (or ``max_tokens`` if less)."""
    return math.ceil(prompt_chars / 3) + min(max_tokens, 512)


@dataclass
class _State:
    r_tat: float = 0.0
    t_tat: float = 0.0
    factor: float = 1.0
    changed: float = 0.0
    decreased: float = -1e18
    pause: float = 0.0


class LocalLimiter:
    """The same algorithm, in this process only (no Redis, or Redis away)."""

    def __init__(self, rpm: int, tpm: int, recovery: float = 60.0) -> None:
        self.rpm, self.tpm, self.recovery_ms = rpm, tpm, recovery * 1000
        self._s = _State()

    def _recover(self, now: float) -> None:
        s = self._s
        if s.factor < 1:
            s.factor = min(1.0, s.factor + (now - s.changed) / self.recovery_ms)
        s.changed = now

    def reserve(self, now: float, cost: int) -> tuple[float, float]:
        s = self._s
        self._recover(now)
        wait = max(0.0, s.pause - now)
        if self.rpm > 0:
            tat = max(s.r_tat, now)
            wait = max(wait, tat - now - BURST_MS)
            s.r_tat = tat + 60000 / (self.rpm * s.factor)
        if self.tpm > 0:
            tat = max(s.t_tat, now)
            wait = max(wait, tat - now - BURST_MS)
            s.t_tat = tat + cost * 60000 / (self.tpm * s.factor)
        return wait, s.factor

    def decrease(self, now: float, retry_after_ms: float | None) -> float:
        s = self._s
        self._recover(now)
        if now - s.decreased >= DEBOUNCE_MS:
            s.factor = max(FLOOR, s.factor * DECREASE)
            s.decreased = now
        if retry_after_ms is not None:
            s.pause = max(s.pause, now + retry_after_ms)
        return s.factor

    def correct(self, tokens: int) -> None:
        if self.tpm > 0 and self._s.t_tat:
            self._s.t_tat += tokens * 60000 / (self.tpm * self._s.factor)


class RedisLimiter:
    """The shared state: one hash per model in Redis, changed by Lua scripts."""

    def __init__(self, url: str, model: str, rpm: int, tpm: int, recovery: float = 60.0) -> None:
        need_redis()  # a clear message without the [redis] extra
        import redis.asyncio

        self.errors = (redis.RedisError, OSError)
        self.rpm, self.tpm, self.recovery_ms = rpm, tpm, recovery * 1000
        self.key = f"veredito:ratelimit:{model}"
        self._redis: Any = redis.asyncio.Redis.from_url(
            url, socket_timeout=2, socket_connect_timeout=2
        )
        self._reserve = self._redis.register_script(_RESERVE)
        self._decrease = self._redis.register_script(_DECREASE)
        self._correct = self._redis.register_script(_CORRECT)

    async def reserve(self, now: float, cost: int) -> tuple[float, float]:
        wait, factor = await self._reserve(
            keys=[self.key], args=[now, self.rpm, self.tpm, cost, self.recovery_ms]
        )
        return float(wait), float(factor)

    async def decrease(self, now: float, retry_after_ms: float | None) -> float:
        retry = -1 if retry_after_ms is None else retry_after_ms
        return float(await self._decrease(keys=[self.key], args=[now, retry, self.recovery_ms]))

    async def correct(self, tokens: int) -> None:
        await self._correct(keys=[self.key], args=[tokens, self.tpm])

    async def aclose(self) -> None:
        await self._redis.aclose()


class RateLimiter:
    """What the judge client calls: ``acquire`` before a request, ``settle`` after its reply,
    ``limited`` on a 429. Shared through Redis when it has one; its own state when Redis fails
    (and back to Redis when it answers again)."""

    def __init__(
        self,
        rpm: int,
        tpm: int,
        *,
        model: str,
        redis_url: str | None = None,
        recovery: float = 60.0,
        metrics: Any = None,
        clock: Any = time.time,
    ) -> None:
        self.rpm, self.tpm, self.model = rpm, tpm, model
        self.local = LocalLimiter(rpm, tpm, recovery)
        self.shared = RedisLimiter(redis_url, model, rpm, tpm, recovery) if redis_url else None
        self._metrics = metrics
        self._clock = clock
        self._warned = False
        self.factor = 1.0

    def _now(self) -> float:
        return float(self._clock()) * 1000.0

    def _fallback(self, exc: BaseException) -> None:
        if not self._warned:
            log.warning("rate limits: Redis unreachable (%s); this process limits itself",
                        type(exc).__name__)  # fmt: skip
            self._warned = True

    def _report(self, factor: float) -> None:
        self.factor = factor
        m = self._metrics
        if m is not None:
            if self.rpm:
                m.rate_limit.labels(self.model, "requests_per_minute").set(self.rpm * factor)
            if self.tpm:
                m.rate_limit.labels(self.model, "tokens_per_minute").set(self.tpm * factor)

    async def acquire(self, cost: int) -> float:
        """Reserve one request of ``cost`` tokens and wait for its turn; returns seconds waited."""
        now = self._now()
        if self.shared is not None:
            try:
                wait_ms, factor = await self.shared.reserve(now, cost)
                self._warned = False
            except self.shared.errors as exc:
                self._fallback(exc)
                wait_ms, factor = self.local.reserve(now, cost)
        else:
            wait_ms, factor = self.local.reserve(now, cost)
        self._report(factor)
        seconds = wait_ms / 1000.0
        if seconds > 0:
            if self._metrics is not None:
                self._metrics.rate_wait.labels(self.model).inc(seconds)
            await asyncio.sleep(seconds)
        return seconds

    async def settle(self, estimated: int, used: int) -> None:
        """The reply's usage is known: give back (or take) the difference from the estimate."""
        if not self.tpm or used <= 0 or used == estimated:
            return
        if self.shared is not None:
            try:
                await self.shared.correct(used - estimated)
                return
            except self.shared.errors as exc:
                self._fallback(exc)
        self.local.correct(used - estimated)

    async def limited(self, retry_after: float | None) -> None:
        """A 429: the shared rate comes down; a ``Retry-After`` pauses every process."""
        if self._metrics is not None:
            self._metrics.rate_limited.labels(self.model).inc()
        now = self._now()
        retry_ms = None if retry_after is None else retry_after * 1000.0
        if self.shared is not None:
            try:
                self._report(await self.shared.decrease(now, retry_ms))
                return
            except self.shared.errors as exc:
                self._fallback(exc)
        self._report(self.local.decrease(now, retry_ms))

    async def aclose(self) -> None:
        if self.shared is not None:
            await self.shared.aclose()


def build_limiter(settings: Settings, metrics: Metrics | None = None) -> RateLimiter | None:
    """The limiter the settings ask for; None when neither RPM nor TPM is set."""
    if not settings.llm_rpm and not settings.llm_tpm:
        return None
    return RateLimiter(
        settings.llm_rpm or 0,
        settings.llm_tpm or 0,
        model=settings.llm_model,
        redis_url=settings.marks_url,
        recovery=settings.llm_rate_recovery,
        metrics=metrics,
    )
