"""An OpenAI-compatible chat-completions client over aiohttp.

Works with any server speaking ``POST {base_url}/chat/completions`` (OpenAI, Azure OpenAI's
v1-compatible endpoint, vLLM, Ollama, llama.cpp server, Maritaca ...).  One
``aiohttp.ClientSession`` is shared by every request of a process; the caller owns it.

Retryable errors (timeouts, lost connections, 429 honouring ``Retry-After``, 5xx) are retried
with exponential backoff and jitter by tenacity; permanent ones (400, 401, 403, 404 ...) raise at
once.  See :mod:`veredito.worker.errors`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

import aiohttp
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type

from veredito.worker.errors import (
    JudgeConnectionError,
    JudgeKeyRefused,
    JudgeRateLimited,
    JudgeRequestRejected,
    JudgeServerError,
    JudgeTimeout,
    RetryableError,
)
from veredito.worker.llm.breaker import CircuitBreaker
from veredito.worker.llm.ratelimit import RateLimiter, estimate_tokens
from veredito.worker.metrics import Metrics

__all__ = ["ChatClient", "Completion", "Message"]

log = logging.getLogger(__name__)

Message = dict[str, str]


@dataclass(frozen=True, slots=True)
class Completion:
    content: str
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _retry_reason(exc: BaseException | None) -> str:
    if isinstance(exc, JudgeTimeout):
        return "timeout"
    if isinstance(exc, JudgeConnectionError):
        return "connection"
    if isinstance(exc, JudgeRateLimited):
        return "rate_limited"
    if isinstance(exc, JudgeServerError):
        return "server_error"
    if isinstance(exc, JudgeKeyRefused):
        return "refused_key"
    return "other"


def _exception(state: RetryCallState) -> BaseException | None:
    return state.outcome.exception() if state.outcome else None


class _Tries:
    """Failed tries of one request that count towards its limit (outages do not)."""

    def __init__(self) -> None:
        self.counted = 0

    def note(self, exc: BaseException | None) -> None:
        if not getattr(exc, "outage", False):
            self.counted += 1


class ChatClient:
    def __init__(
        self,
        session: aiohttp.ClientSession,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_tokens: int = 2048,
        json_mode: bool = True,
        max_attempts: int = 6,
        max_backoff: float = 30.0,
        metrics: Metrics | None = None,
        breaker: CircuitBreaker | None = None,
        hold_on_refused_key: bool = False,
        limiter: RateLimiter | None = None,
    ) -> None:
        self._session = session
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self._headers = {"Content-Type": "application/json; charset=utf-8"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
            if ".openai.azure.com" in self.url or ".cognitiveservices.azure.com" in self.url:
                self._headers["api-key"] = api_key  # Azure OpenAI takes its keys in this header
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self.max_tokens = max_tokens
        self.json_mode = json_mode
        self.max_attempts = max_attempts
        self.max_backoff = max_backoff
        self._metrics = metrics
        self.breaker = breaker or CircuitBreaker(metrics=metrics)
        self.hold_on_refused_key = hold_on_refused_key
        self.limiter = limiter

    def request_body(self, messages: list[Message]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": 0,
            "max_tokens": self.max_tokens,
        }
        if self.json_mode:
            body["response_format"] = {"type": "json_object"}
        return body

    def _delay(self, exc: BaseException | None, counted: int) -> float:
        """Seconds to wait after a failed try: a ``Retry-After`` with a rate limiter (this request
        waits it; the limiter has cut the shared rate), none without one (the breaker pauses the
        process) or for an outage (the breaker holds the request); else backoff with jitter."""
        if isinstance(exc, JudgeRateLimited) and exc.retry_after is not None:
            return min(exc.retry_after, self.max_backoff) if self.limiter is not None else 0.0
        if getattr(exc, "outage", False):
            return 0.0
        backoff: float = 0.5 * 2 ** (max(counted, 1) - 1) + random.uniform(0, 0.5)
        return min(self.max_backoff, backoff)

    def _note_retry(self, exc: BaseException | None, counted: int) -> None:
        reason = _retry_reason(exc)
        if self._metrics is not None:
            self._metrics.child(self._metrics.retries, reason).inc()
        log.warning(
            "judge request failed (%s), %d of %d tries used",
            reason,
            counted,
            self.max_attempts,
            extra={"reason": reason, "error": type(exc).__name__},
        )

    async def complete(self, messages: list[Message]) -> Completion:
        """Ask until a reply comes: retryable failures are tried again. Only those seen while the
        judge is otherwise healthy count towards ``max_attempts``; during an outage (the breaker
        open) and under rate limiting the request waits instead, however long that takes."""
        tries = _Tries()
        began = self.breaker.now()

        def before_last_try(exc: BaseException | None) -> None:
            self._note_retry(exc, tries.counted)
            if (
                self.hold_on_refused_key  # a worker, which holds triples through outages
                and tries.counted == self.max_attempts - 1
                and self.breaker.last_success < began
            ):
                self.breaker.trip()  # no answer anywhere since this began: an outage, held

        try:  # the first try costs no retry machinery
            return await self._attempt(messages)
        except RetryableError as exc:
            tries.note(exc)
            if tries.counted >= self.max_attempts:
                raise
            before_last_try(exc)
            await asyncio.sleep(self._delay(exc, tries.counted))
        retrying = AsyncRetrying(
            stop=lambda _: tries.counted >= self.max_attempts,
            wait=lambda state: self._delay(_exception(state), tries.counted),
            retry=retry_if_exception_type(RetryableError),
            after=lambda state: tries.note(_exception(state)),
            before_sleep=lambda state: before_last_try(_exception(state)),
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                return await self._attempt(messages)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _attempt(self, messages: list[Message]) -> Completion:
        """One request, through the breaker; a failure is marked ``outage`` when it should not
        count against the request's own tries."""
        breaker, limiter = self.breaker, self.limiter
        cost = 0
        slot = None
        probe = await breaker.acquire()
        opened = breaker.opened
        if limiter is not None:  # then our turn under the shared rate, last before sending: the
            # requests a closing circuit or an ending pause releases together are spaced here
            cost = estimate_tokens(sum(len(m["content"]) for m in messages), self.max_tokens)
            try:
                slot = await limiter.acquire(cost)
            except BaseException:
                breaker.release(probe)
                raise
        try:
            completion = await self._request(messages)
        except RetryableError as exc:
            if isinstance(exc, JudgeRateLimited) and limiter is not None:
                # the limiter's business, not an outage: it cuts the shared rate, and a
                # Retry-After pauses every process there (a pause here would release this
                # process's waiting requests together when it ends)
                breaker.release(probe)
                await limiter.limited(exc.retry_after, slot)
            else:
                breaker.failure(probe)
            if (
                isinstance(exc, JudgeRateLimited)
                and exc.retry_after is not None
                and limiter is None
            ):
                breaker.pause(min(exc.retry_after, self.max_backoff))
            exc.outage = (  # type: ignore[attr-defined]
                isinstance(exc, JudgeRateLimited) or breaker.opened != opened
            )
            raise
        except JudgeRequestRejected as exc:
            if exc.status not in (401, 403) or not self.hold_on_refused_key:
                breaker.success(probe)  # the judge answers; this request is at fault
                raise
            breaker.failure(probe, refused_key=True)
            refused = JudgeKeyRefused(str(exc), exc.status)
            refused.outage = True  # type: ignore[attr-defined]
            raise refused from exc
        except BaseException:
            breaker.release(probe)
            raise
        breaker.success(probe)
        if limiter is not None:
            await limiter.settle(cost, completion.prompt_tokens + completion.completion_tokens)
        return completion

    async def _request(self, messages: list[Message]) -> Completion:
        started = time.perf_counter()
        outcome = "error"
        try:
            completion = await self._post(messages)
            outcome = "ok"
            if self._metrics is not None:
                m = self._metrics
                m.child(m.tokens, self.model, "prompt").inc(completion.prompt_tokens)
                m.child(m.tokens, self.model, "completion").inc(completion.completion_tokens)
            return completion
        except JudgeTimeout:
            outcome = "timeout"
            raise
        except JudgeServerError as exc:
            outcome = "rate_limited" if isinstance(exc, JudgeRateLimited) else "server_error"
            raise
        except JudgeRequestRejected:
            outcome = "rejected"
            raise
        finally:
            if self._metrics is not None:
                self._metrics.child(self._metrics.request_duration, self.model, outcome).observe(
                    time.perf_counter() - started
                )

    async def _post(self, messages: list[Message]) -> Completion:
        body = json.dumps(self.request_body(messages), ensure_ascii=False).encode("utf-8")
        try:
            async with self._session.post(
                self.url, data=body, headers=self._headers, timeout=self._timeout
            ) as response:
                status = response.status
                raw = await response.read()
                retry_after = _retry_after(response.headers.get("Retry-After"))
            text = raw.decode("utf-8", errors="replace")
        except TimeoutError as exc:
            raise JudgeTimeout(f"no answer from {self.url} in {self._timeout.total}s") from exc
        except aiohttp.ClientError as exc:
            raise JudgeConnectionError(f"{type(exc).__name__} talking to {self.url}") from exc
        if status == 429:
            raise JudgeRateLimited(f"HTTP 429 from {self.url}", 429, retry_after)
        if status >= 500 or status in (408, 409):
            raise JudgeServerError(f"HTTP {status} from {self.url}", status)
        if status >= 400:
            detail = _error_detail(text)
            raise JudgeRequestRejected(f"HTTP {status} from {self.url}: {detail}", status)
        return _completion(text, self.url)


def _error_detail(text: str) -> str:
    """The provider's error message, short; never echoes our request."""
    try:
        data = json.loads(text)
        message = data.get("error", {}).get("message") if isinstance(data, dict) else None
    except (ValueError, AttributeError):
        message = None
    return (message or text or "no body")[:300]


def _completion(text: str, url: str) -> Completion:
    try:
        data = json.loads(text)
        choice = data["choices"][0]
        message = choice.get("message") or {}
        content = message.get("content") or ""
        usage = data.get("usage") or {}
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        raise JudgeServerError(f"malformed chat completion from {url}", 200) from exc
    if not isinstance(content, str):
        raise JudgeServerError(f"malformed chat completion from {url}", 200)
    return Completion(
        content=content,
        finish_reason=choice.get("finish_reason"),
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
    )
