"""Judges: the port (:mod:`.base`) and its implementations."""

from __future__ import annotations

import threading
from typing import TypeVar

import aiohttp

from veredito.worker.calibration_feed import CalibrationFeed
from veredito.worker.confidence import (
    Calibration,
    calibration_version,
    default_calibration,
    is_calibration_url,
    load_calibration,
)
from veredito.worker.judges.base import Judge, Judgement
from veredito.worker.judges.crosscheck import ConfidenceJudge, CrossCheckedJudge
from veredito.worker.judges.llm import LLMJudge
from veredito.worker.judges.rules import RulesJudge
from veredito.worker.llm.breaker import CircuitBreaker
from veredito.worker.llm.client import ChatClient
from veredito.worker.llm.ratelimit import build_limiter
from veredito.worker.llm.spend import Budget, Pricing, Spending, VerdictCache, parse_budgets
from veredito.worker.metrics import Metrics
from veredito.worker.settings import Settings

__all__ = [
    "Judge",
    "JudgeNotConfigured",
    "Judgement",
    "build_judge",
    "build_spending",
    "new_session",
]


class JudgeNotConfigured(RuntimeError):
    """The settings ask for a judge that cannot be built; the message says how to fix it."""


NO_LLM_MESSAGE = (
    "--judge llm needs an LLM endpoint. Point veredito at an OpenAI-compatible one:\n"
    "  export VEREDITO_LLM_BASE_URL=https://api.openai.com/v1   # or vLLM, Ollama, Maritaca ...\n"
    "  export VEREDITO_LLM_API_KEY=sk-...\n"
    "  export VEREDITO_LLM_MODEL=gpt-4o-mini\n"
    "(OPENAI_BASE_URL and OPENAI_API_KEY are honoured too.)"
)


def new_session(settings: Settings) -> aiohttp.ClientSession:
    """The one HTTP session of a process: enough connections for every prompt in flight."""
    limit = settings.concurrency * max(1, len(settings.prompts))
    connector = aiohttp.TCPConnector(limit=limit, limit_per_host=0, ttl_dns_cache=300)
    return aiohttp.ClientSession(connector=connector)


def build_spending(settings: Settings) -> Spending:
    """Prices, the daily budgets (shared through the Redis of the done markers, if any) and the
    rules judge a spent budget falls back to."""
    pricing = Pricing(settings.llm_price_prompt, settings.llm_price_completion)
    budgets = parse_budgets(settings.budget_daily)
    if not budgets:
        return Spending(pricing)
    return Spending(
        pricing,
        Budget(budgets, settings.marks_url),
        _following(settings, RulesJudge(calibration_of(settings))),
    )


_LOADED: dict[str, Calibration] = {}
_FEEDS: dict[tuple[str, str | None], CalibrationFeed] = {}
_FEEDS_LOCK = threading.Lock()


def calibration_feed(settings: Settings) -> CalibrationFeed | None:
    """The process's feed of ``VEREDITO_CALIBRATION`` when it names serve's calibration route
    (an http(s) URL): started (fetched once, then polled) on first use; None for a file."""
    if not is_calibration_url(settings.calibration):
        return None
    token = settings.calibration_token.get_secret_value() if settings.calibration_token else None
    key = (str(settings.calibration), token)
    with _FEEDS_LOCK:
        feed = _FEEDS.get(key)
        if feed is None:
            feed = _FEEDS[key] = CalibrationFeed(
                str(settings.calibration), token, settings.calibration_poll
            )
            feed.start()
    return feed


def calibration_of(settings: Settings) -> Calibration:
    """``VEREDITO_CALIBRATION``'s calibration: a file's (loaded once), serve's route's (the
    current one of its feed: :func:`calibration_feed`), or the shipped calibration."""
    if not settings.calibration:
        return default_calibration()
    feed = calibration_feed(settings)
    if feed is not None:
        return feed.current
    if settings.calibration not in _LOADED:
        _LOADED[settings.calibration] = load_calibration(settings.calibration)
    return _LOADED[settings.calibration]


_J = TypeVar("_J")


def _following(settings: Settings, judge: _J, metrics: Metrics | None = None) -> _J:
    """``judge`` (whose ``calibration`` attribute the feed swaps, if there is one), and the
    metrics told which calibration is in use."""
    feed = calibration_feed(settings)
    if feed is not None:
        feed.follow(judge, metrics)
    elif metrics is not None:
        metrics.calibration_used(calibration_version(calibration_of(settings)))
    return judge


def build_judge(
    settings: Settings,
    session: aiohttp.ClientSession,
    metrics: Metrics | None = None,
    *,
    hold_on_refused_key: bool = False,
    worker: bool = False,
) -> Judge:
    """The judge the settings ask for. ``hold_on_refused_key``: a 401/403 opens the circuit and
    holds the triple (the worker: a revoked key must not burn the backlog) instead of failing it
    (``veredito run``: say so at once)."""
    kind = settings.resolved_judge()
    if kind == "rules":
        return _following(settings, RulesJudge(calibration_of(settings)), metrics)
    if not settings.llm_configured:
        raise JudgeNotConfigured(NO_LLM_MESSAGE)
    client = ChatClient(
        session,
        base_url=settings.effective_base_url,
        model=settings.llm_model,
        api_key=settings.llm_api_key.get_secret_value() if settings.llm_api_key else None,
        timeout=settings.llm_timeout,
        max_tokens=settings.llm_max_tokens,
        json_mode=settings.llm_json_mode,
        max_attempts=settings.llm_max_attempts,
        max_backoff=settings.llm_max_backoff,
        metrics=metrics,
        breaker=CircuitBreaker(
            failure_threshold=settings.breaker_failures,
            failure_rate=settings.breaker_failure_rate,
            open_seconds=settings.breaker_open_seconds,
            max_open_seconds=settings.breaker_max_open_seconds,
            metrics=metrics,
        ),
        hold_on_refused_key=hold_on_refused_key,
        limiter=build_limiter(settings, metrics),
    )
    ttl, cache = settings.cache_seconds(worker), None
    if ttl > 0 and settings.marks_url:
        cache = VerdictCache(settings.marks_url, ttl, metrics)
    judge: Judge = LLMJudge(client, settings.prompts, metrics, cache)
    if settings.pseudonymise:  # inside the cross-check: that reads the real claims
        from veredito.worker.llm.privacy import PseudonymisingJudge  # it imports judges.base

        judge = PseudonymisingJudge(judge)
    if settings.cross_check != "off":
        judge = CrossCheckedJudge(judge, settings.cross_check, metrics)
    return _following(settings, ConfidenceJudge(judge, calibration_of(settings)), metrics)
