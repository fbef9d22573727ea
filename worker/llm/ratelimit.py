"""Rate limits on the judge shared by every worker process, kept to the second.

``VEREDITO_LLM_RPM`` and ``VEREDITO_LLM_TPM`` are the provider's limits for the model. Providers
enforce per-minute limits over short windows (OpenAI documents that 60,000 RPM may be enforced as
1,000 a second), so the limiter keeps every second, not only every minute: each request reserves
a slot before it is sent — one request and an estimate of its tokens (the prompt's characters / 3,
plus the completion it may write); after the reply the estimate is corrected by the usage the
provider reports. Slots are spaced by a generic cell rate algorithm (GCRA) with no burst by
default, at 95 % of the configured limits (``HEADROOM``): one request every ``60 / (0.95 rpm)``
seconds, and a request's tokens take ``tokens × 60 / (0.95 tpm)`` seconds before the next may
start. So no second's slots carry more than the per-second rate of requests (plus one request's
tokens, for TPM). What the provider counts is arrivals, and the way from a slot to its door
bunches some: a request whose process wakes it more than 25 ms after its slot (an event loop
held up) does not go late, bunched with the next slots, but reserves a new one; the spare 5 %
absorbs the rest (the time from the event loop to the wire), so that a sliding second of
arrivals stays within 1.1× the rate (at 1,200 RPM: 19 slots, and room for 3 more, where a
provider counting 22 in any second would refuse the 23rd).
``VEREDITO_LLM_RATE_BURST`` lets that many seconds' worth go at once, for providers that allow
bursts.

With a Redis (``VEREDITO_REDIS_URL``, or the broker's), the state lives in one Redis hash per model
and is changed by Lua scripts, atomically, in Redis's clock, so ten workers on five hosts share
one budget; without Redis, or while it does not answer, each process keeps its own.

**After a 429** the shared rate is cut to 90 % of what it was and climbs back like TCP CUBIC:
fast at first, flattening as it nears the rate at which the 429 came (reached
``VEREDITO_LLM_RATE_RECOVERY`` seconds after the cut, 20 by default), then probing above it,
slowly and then faster, up to the configured rate. A provider stricter than configured is found
and tracked (within a few per cent of its limit) instead of being approached by a slow linear
ramp from half of it. A cut starts a new *generation*: every slot reserved but not yet reached
is void, and its request reserves again at the new rate when it wakes, so the cut takes effect
at once rather than after the queue of reservations made at the old rate has drained; a 429 for
a request reserved before the last cut is the same overload and cuts nothing. The refused request
waits its ``Retry-After`` before trying again; when a second cut comes within a second of the
last (the cut did not suffice), every process pauses for the ``Retry-After``. The judge client
asks the limiter last, after the circuit breaker, so that requests the breaker releases together
are spaced too; with a limiter, 429s are its business and do not count toward opening the
circuit.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from veredito.producer.optional import need_redis

if TYPE_CHECKING:
    from veredito.worker.metrics import Metrics
    from veredito.worker.settings import Settings

__all__ = [
    "BETA",
    "DEBOUNCE_MS",
    "FLOOR",
    "HEADROOM",
    "LATE_MS",
    "LocalLimiter",
    "RateLimiter",
    "RedisLimiter",
    "Slot",
    "build_limiter",
    "estimate_tokens",
]

log = logging.getLogger(__name__)

BETA = 0.9  # a 429 cuts the rate to this share of what it was
FLOOR = 0.1  # never below a tenth of the configured rate
DEBOUNCE_MS = 1000.0  # a second cut within this of the last: the Retry-After pauses everyone
LATE_MS = 25.0  # a request woken this much after its slot reserves a new one
HEADROOM = 0.95  # slots are spaced at this share of the configured RPM and TPM

# The rate factor (1: the configured rate) after a cut at ``decreased`` from ``w_max``:
# w_max · (1 + (1 − BETA) · (t / K − 1)³), K the recovery time — BETA · w_max right after the cut,
# w_max at K (concave up to it, flat near it), convex above it; clamped to [FLOOR, 1].
_PRELUDE = """
local function clock(arg)
  if arg == '' then
    local t = redis.call('TIME')
    return tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
  end
  return tonumber(arg)
end
local function factor_at(now, w_max, decreased, recovery)
  if not decreased then return 1 end
  local x = (now - decreased) / recovery - 1
  local f = w_max * (1 + (1 - BETA) * x * x * x)
  if f > 1 then return 1 end
  if f < FLOOR then return FLOOR end
  return f
end
local s = redis.call('HMGET', KEYS[1], 'r_tat', 't_tat', 'w_max', 'decreased', 'pause', 'gen')
local r_tat = tonumber(s[1]) or 0
local t_tat = tonumber(s[2]) or 0
local w_max = tonumber(s[3]) or 1
local decreased = tonumber(s[4])
local pause = tonumber(s[5]) or 0
local gen = tonumber(s[6]) or 0
"""

# KEYS[1] the model's hash. ARGV: now_ms ('' for Redis's clock), rpm, tpm, cost, recovery_ms,
# burst_ms, claim ('' for a new reservation, else the generation it was made in).
# Returns {wait_ms, factor, generation}: a claim whose generation still holds waits 0 (go);
# otherwise a slot is reserved and its wait returned.
_RESERVE = (
    _PRELUDE
    + """
local now = clock(ARGV[1])
local rpm, tpm, cost = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local recovery, burst = tonumber(ARGV[5]), tonumber(ARGV[6])
local f = factor_at(now, w_max, decreased, recovery)
if ARGV[7] ~= '' and tonumber(ARGV[7]) == gen then
  return {'0', tostring(f), tostring(gen)}
end
local slot = math.max(now, pause)
if rpm > 0 then slot = math.max(slot, r_tat - burst) end
if tpm > 0 then slot = math.max(slot, t_tat - burst) end
if rpm > 0 then r_tat = math.max(r_tat, slot) + 60000 / (rpm * f) end
if tpm > 0 then t_tat = math.max(t_tat, slot) + cost * 60000 / (tpm * f) end
redis.call('HSET', KEYS[1], 'r_tat', r_tat, 't_tat', t_tat)
redis.call('PEXPIRE', KEYS[1], 3600000)
return {tostring(slot - now), tostring(f), tostring(gen)}
"""
)

# KEYS[1] the model's hash. ARGV: now_ms ('' for Redis's clock), retry_after_ms (-1: none),
# recovery_ms, the generation the refused request's slot was reserved in ('' unknown).
# A 429 for a request reserved before the last cut is that overload again: nothing changes.
# Otherwise the rate is cut (a new generation: every slot not yet reached is void) and, when the
# last cut was less than a second ago and did not suffice, every process pauses for the
# Retry-After. Returns the factor after the 429.
_DECREASE = (
    _PRELUDE
    + """
local now = clock(ARGV[1])
local retry, recovery = tonumber(ARGV[2]), tonumber(ARGV[3])
if ARGV[4] ~= '' and tonumber(ARGV[4]) < gen then
  return tostring(factor_at(now, w_max, decreased, recovery))
end
local wall = decreased and now - decreased < DEBOUNCE_MS
w_max = factor_at(now, w_max, decreased, recovery)
decreased = now
gen = gen + 1
if wall and retry >= 0 then pause = math.max(pause, now + retry) end
r_tat = math.max(now, pause)
t_tat = r_tat
redis.call('HSET', KEYS[1], 'r_tat', r_tat, 't_tat', t_tat, 'w_max', w_max, 'decreased', decreased,
           'pause', pause, 'gen', gen)
redis.call('PEXPIRE', KEYS[1], 3600000)
return tostring(factor_at(now, w_max, decreased, recovery))
"""
)

# KEYS[1]; ARGV: now_ms ('' for Redis's clock), tokens to add (negative: give back), tpm,
# recovery_ms. Corrects t_tat after the reply.
_CORRECT = (
    _PRELUDE
    + """
local now = clock(ARGV[1])
local tpm, recovery = tonumber(ARGV[3]), tonumber(ARGV[4])
if tpm <= 0 or not s[2] then return 0 end
local f = factor_at(now, w_max, decreased, recovery)
redis.call('HSET', KEYS[1], 't_tat', t_tat + tonumber(ARGV[2]) * 60000 / (tpm * f))
return 1
"""
)


def _constants(script: str) -> str:
    return (
        script.replace("DEBOUNCE_MS", repr(DEBOUNCE_MS))
        .replace("FLOOR", repr(FLOOR))
        .replace("BETA", repr(BETA))
    )


_RESERVE, _DECREASE, _CORRECT = (_constants(s) for s in (_RESERVE, _DECREASE, _CORRECT))


def estimate_tokens(prompt_chars: int, max_tokens: int) -> int:
    """What a request may count against a tokens-per-minute limit before its reply is known:
    the prompt at three characters a token (Portuguese runs about 3.5 to 4) and a completion of
    up to 512 tokens (or ``max_tokens`` if less)."""
    return math.ceil(prompt_chars / 3) + min(max_tokens, 512)


def factor_at(now: float, w_max: float, decreased: float | None, recovery_ms: float) -> float:
    """The rate factor ``now`` after a cut at ``decreased`` from ``w_max`` (see the module)."""
    if decreased is None:
        return 1.0
    x = (now - decreased) / recovery_ms - 1
    f = w_max * (1 + (1 - BETA) * x * x * x)
    return 1.0 if f > 1 else FLOOR if f < FLOOR else f


class Slot(NamedTuple):
    """A request's turn: seconds waited for it, and the generation it was reserved in."""

    waited: float
    generation: int


@dataclass
class _State:
    r_tat: float = 0.0
    t_tat: float = 0.0
    w_max: float = 1.0
    decreased: float | None = None
    pause: float = 0.0
    gen: int = 0


class LocalLimiter:
    """The same algorithm, in this process only (no Redis, or Redis away)."""

    def __init__(self, rpm: float, tpm: float, recovery: float = 20.0, burst: float = 0.0) -> None:
        self.rpm, self.tpm = rpm, tpm
        self.recovery_ms, self.burst_ms = recovery * 1000, burst * 1000
        self._s = _State()

    def factor(self, now: float) -> float:
        s = self._s
        return factor_at(now, s.w_max, s.decreased, self.recovery_ms)

    def reserve(self, now: float, cost: int, claim: int | None = None) -> tuple[float, float, int]:
        """(wait in ms, factor, generation); a ``claim`` whose generation holds waits 0."""
        s = self._s
        f = self.factor(now)
        if claim is not None and claim == s.gen:
            return 0.0, f, s.gen
        slot = max(now, s.pause)
        if self.rpm > 0:
            slot = max(slot, s.r_tat - self.burst_ms)
        if self.tpm > 0:
            slot = max(slot, s.t_tat - self.burst_ms)
        if self.rpm > 0:
            s.r_tat = max(s.r_tat, slot) + 60000 / (self.rpm * f)
        if self.tpm > 0:
            s.t_tat = max(s.t_tat, slot) + cost * 60000 / (self.tpm * f)
        return slot - now, f, s.gen

    def decrease(
        self, now: float, retry_after_ms: float | None, generation: int | None = None
    ) -> float:
        s = self._s
        if generation is not None and generation < s.gen:
            return self.factor(now)  # reserved before the last cut: the same overload
        wall = s.decreased is not None and now - s.decreased < DEBOUNCE_MS
        s.w_max = self.factor(now)
        s.decreased = now
        s.gen += 1
        if wall and retry_after_ms is not None:
            s.pause = max(s.pause, now + retry_after_ms)
        s.r_tat = s.t_tat = max(now, s.pause)
        return self.factor(now)

    def correct(self, now: float, tokens: int) -> None:
        if self.tpm > 0 and self._s.t_tat:
            self._s.t_tat += tokens * 60000 / (self.tpm * self.factor(now))


class RedisLimiter:
    """The shared state: one hash per model in Redis, changed by Lua scripts. A ``now`` of None
    is Redis's own clock (what the worker uses); tests pass their own."""

    def __init__(
        self,
        url: str,
        model: str,
        rpm: float,
        tpm: float,
        recovery: float = 20.0,
        burst: float = 0.0,
    ) -> None:
        need_redis()  # a clear message without the [redis] extra
        import redis.asyncio

        self.errors = (redis.RedisError, OSError)
        self.rpm, self.tpm = rpm, tpm
        self.recovery_ms, self.burst_ms = recovery * 1000, burst * 1000
        self.key = f"veredito:ratelimit:{model}"
        self._redis: Any = redis.asyncio.Redis.from_url(
            url, socket_timeout=2, socket_connect_timeout=2
        )
        self._reserve = self._redis.register_script(_RESERVE)
        self._decrease = self._redis.register_script(_DECREASE)
        self._correct = self._redis.register_script(_CORRECT)

    async def reserve(
        self, now: float | None, cost: int, claim: int | None = None
    ) -> tuple[float, float, int]:
        wait, factor, gen = await self._reserve(
            keys=[self.key],
            args=[
                "" if now is None else now, self.rpm, self.tpm, cost, self.recovery_ms,
                self.burst_ms, "" if claim is None else claim,
            ],
        )  # fmt: skip
        return float(wait), float(factor), int(gen)

    async def decrease(
        self, now: float | None, retry_after_ms: float | None, generation: int | None = None
    ) -> float:
        retry = -1 if retry_after_ms is None else retry_after_ms
        args = [
            "" if now is None else now, retry, self.recovery_ms,
            "" if generation is None else generation,
        ]  # fmt: skip
        return float(await self._decrease(keys=[self.key], args=args))

    async def correct(self, now: float | None, tokens: int) -> None:
        args = ["" if now is None else now, tokens, self.tpm, self.recovery_ms]
        await self._correct(keys=[self.key], args=args)

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
        recovery: float = 20.0,
        burst: float = 0.0,
        metrics: Any = None,
        clock: Any = time.time,
    ) -> None:
        self.rpm, self.tpm, self.model = rpm, tpm, model
        # slots at HEADROOM of the configured limits: the way from a slot to the provider's
        # door (a busy event loop, the network) bunches some arrivals, and the spare 5 % keeps
        # a sliding second of them under the limit
        pace_rpm, pace_tpm = rpm * HEADROOM, tpm * HEADROOM
        self.local = LocalLimiter(pace_rpm, pace_tpm, recovery, burst)
        self.shared = (
            RedisLimiter(redis_url, model, pace_rpm, pace_tpm, recovery, burst)
            if redis_url
            else None
        )
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
                m.rate_limit.labels(self.model, "requests_per_minute").set(self.local.rpm * factor)
            if self.tpm:
                m.rate_limit.labels(self.model, "tokens_per_minute").set(self.local.tpm * factor)

    async def _reserve(self, cost: int, claim: int | None) -> tuple[float, float, int]:
        if self.shared is not None:
            try:
                found = await self.shared.reserve(None, cost, claim)
                self._warned = False
                return found
            except self.shared.errors as exc:
                self._fallback(exc)
        return self.local.reserve(self._now(), cost, claim)

    async def acquire(self, cost: int) -> Slot:
        """Reserve one request of ``cost`` tokens and wait for its slot. A slot voided while
        waiting (a cut, a pause) is reserved again at the new rate."""
        started = time.monotonic()
        slept = False
        wait_ms, factor, gen = await self._reserve(cost, None)
        while wait_ms > 0:
            slept = True
            due = time.monotonic() + wait_ms / 1000.0
            await asyncio.sleep(wait_ms / 1000.0)
            # woken too late (this process's event loop was held up): going now would bunch
            # with the slots after it, so this one is given up and a new one reserved
            late = time.monotonic() - due > LATE_MS / 1000.0
            wait_ms, factor, gen = await self._reserve(cost, None if late else gen)
        waited = time.monotonic() - started if slept else 0.0
        self._report(factor)
        if waited > 0 and self._metrics is not None:
            self._metrics.rate_wait.labels(self.model).inc(waited)
        return Slot(waited, gen)

    async def settle(self, estimated: int, used: int) -> None:
        """The reply's usage is known: give back (or take) the difference from the estimate."""
        if not self.tpm or used <= 0 or used == estimated:
            return
        if self.shared is not None:
            try:
                await self.shared.correct(None, used - estimated)
                return
            except self.shared.errors as exc:
                self._fallback(exc)
        self.local.correct(self._now(), used - estimated)

    async def limited(self, retry_after: float | None, slot: Slot | None = None) -> None:
        """A 429 for the request sent in ``slot``: the shared rate is cut, unless the request
        was reserved before the last cut; a second cut within a second also pauses every
        process for the ``Retry-After``."""
        if self._metrics is not None:
            self._metrics.rate_limited.labels(self.model).inc()
        retry_ms = None if retry_after is None else retry_after * 1000.0
        generation = None if slot is None else slot.generation
        if self.shared is not None:
            try:
                self._report(await self.shared.decrease(None, retry_ms, generation))
                return
            except self.shared.errors as exc:
                self._fallback(exc)
        self._report(self.local.decrease(self._now(), retry_ms, generation))

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
        burst=settings.llm_rate_burst,
        metrics=metrics,
    )
