"""What the read routes share (the verdicts API, the label routes and the page): the read side's
state (:class:`Review`, under the app key :data:`REVIEW`), who a request may read as, its
parameters checked (:class:`BadParameter` names the one at fault) and the store called from a
thread of its own."""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import logging
import re
import secrets
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry

from veredito.producer.ingest import Grant, Tokens
from veredito.producer.triple import check_release
from veredito.store import Filters, SQLStore, StoreUnavailable, parse_when
from veredito.web.reviewing import AgreementCache, ReviewMetrics, ReviewTokens, WriteLimits
from veredito.worker.verdict import CATEGORIES, VERDICTS

__all__ = ["MAX_LIMIT", "PAGE_SIZE", "REVIEW", "STATUSES", "BadParameter", "Review"]

log = logging.getLogger(__name__)

STATUSES = ("ok", "rejected", "failed")
MAX_LIMIT = 500
PAGE_SIZE = 50


@dataclass
class Review:
    store: SQLStore
    tokens: Tokens = field(default_factory=lambda: Tokens(None))
    open_reads: bool = False  # no token needed (loopback, or --insecure-no-auth)
    executor: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(4, thread_name_prefix="store")
    )
    reviewers: ReviewTokens = field(default_factory=lambda: ReviewTokens(None))
    sample_share: float = 0.05  # the uniform slice: answers whose sample key is below this
    teach_every: int = 4  # every n-th answer of the queue is one chosen to teach
    window: str = "30d"  # the precision gauges' period
    refresh_seconds: float = 60.0
    precision_floor: float = 0.7  # exported for the alert rule
    min_labels: int = 30
    alert_confidence: float = 0.8  # spec §17: what "confident" means in /v1/compare
    releases_kept: int = 3  # spec §18: the releases per app with gauges of their own
    release_min_answers: int = 200  # answers each side needs for veredito_release_regressed
    release_gauges: Any = None  # veredito.serving.release_gauges.ReleaseGauges, with /metrics
    session_secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    limits: WriteLimits = field(default_factory=WriteLimits)  # label writes per reviewer
    max_submissions: int | None = 20  # a reviewer's submissions of one answer
    metrics: ReviewMetrics = field(default_factory=lambda: ReviewMetrics(CollectorRegistry()))
    agreements: AgreementCache = field(default_factory=lambda: AgreementCache())
    # issue 30: the calibration refit from the labels (VEREDITO_REFIT, _MIN_LABELS, _INTERVAL)
    refit: bool = False
    refit_min_labels: int = 200
    refit_interval: float = 300.0
    calibration_metrics: Any = None  # veredito.web.calibrations.CalibrationMetrics


REVIEW: web.AppKey[Review] = web.AppKey("review")


class BadParameter(ValueError):
    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}")
        self.name = name


def _json_error(status: int, code: str, message: str, **headers: str) -> web.Response:
    return web.json_response(
        {"error": {"code": code, "message": message}}, status=status, headers=headers or None
    )


def _grant(request: web.Request, *, page: bool = False) -> Grant | None:
    """What a read token grants; None when the request may not read. The JSON API takes only
    ``Authorization: Bearer``; the page also takes HTTP Basic (the token as the password), which
    a browser remembers and sends by itself, so the API must not accept it."""
    review = request.app[REVIEW]
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    if page and scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
        except (binascii.Error, ValueError):  # not base64, not ASCII, not UTF-8
            decoded = ""
        header = f"Bearer {decoded.partition(':')[2]}"
    if review.tokens:
        found: Grant | None = review.tokens.check(header)
        return found
    return Grant() if review.open_reads else None


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _clean(name: str, value: str) -> str:
    """A parameter's value, or :class:`BadParameter` for one with a control character (NUL
    cannot even be sent to PostgreSQL) or a lone surrogate (no UTF-8 for it)."""
    if _CONTROL.search(value):
        raise BadParameter(name, "contains a control character")
    if _SURROGATE.search(value):
        raise BadParameter(name, "is not valid Unicode (a lone surrogate)")
    return value


def app_parameter(query: Any) -> str | None:
    """``?app=`` as given (app names are matched exactly: no stripping), None when absent."""
    return _clean("app", str(query["app"])) if "app" in query else None


def _filters(query: Any, grant: Grant) -> Filters:
    def one(name: str, allowed: tuple[str, ...] | None = None) -> str | None:
        value = _clean(name, str(query.get(name, ""))).strip()
        if not value:
            return None
        if allowed is not None and value not in allowed:
            raise BadParameter(name, f"{value!r} is not one of {', '.join(allowed)}")
        return value

    hallucinated = one("hallucinated")
    if hallucinated is not None and hallucinated.lower() not in ("true", "false", "1", "0"):
        raise BadParameter("hallucinated", "use true or false")
    times: dict[str, str | None] = {}
    for name in ("since", "until"):
        value = one(name)
        try:
            times[name] = parse_when(value) if value else None
        except (ValueError, OverflowError) as exc:
            message = str(exc) if isinstance(exc, ValueError) else "out of range"
            raise BadParameter(name, message) from None
    confidence = one("confidence")
    min_confidence = None
    if confidence is not None:
        try:
            min_confidence = float(confidence)
        except ValueError:
            min_confidence = -1.0
        if not 0.0 <= min_confidence <= 1.0:
            raise BadParameter(
                "confidence", "a number from 0 to 1 (the least hallucination_confidence)"
            )
    release = one("release")
    if release is not None and (problem := check_release(release)) is not None:
        raise BadParameter("release", problem)
    app = app_parameter(query) or None  # exactly as given; empty: every app
    if grant.app is not None:
        app = grant.app  # a token for one app sees that app only
    return Filters(
        app=app,
        status=one("status", STATUSES),
        hallucinated=None if hallucinated is None else hallucinated.lower() in ("true", "1"),
        category=one("category", CATEGORIES),
        verdict=one("verdict", VERDICTS),
        since=times["since"],
        until=times["until"],
        min_confidence=min_confidence,
        release=release,
    )


def _limit(query: Any) -> int:
    raw = _clean("limit", query.get("limit", "")).strip()
    if not raw:
        return PAGE_SIZE
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= MAX_LIMIT:
        raise BadParameter("limit", f"a whole number from 1 to {MAX_LIMIT}")
    return int(raw)


async def _call(request: web.Request, fn: Any, *args: Any, **kwargs: Any) -> Any:
    review = request.app[REVIEW]
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(review.executor, lambda: fn(*args, **kwargs))


def _visible(verdict: dict[str, Any] | None, grant: Grant) -> dict[str, Any] | None:
    if verdict is None or grant.app is None:
        return verdict
    metadata = verdict.get("metadata")
    app = metadata.get("app") if isinstance(metadata, dict) else None
    return verdict if app == grant.app else None


def _api_grant(request: web.Request) -> Grant | web.Response:
    """What a JSON read may see: a read token's grant, a review token's (the answers of its
    app, or every app for a reviewer of all: a reviewer reads what it labels), open reads; else
    a 401."""
    reviewer = request.app[REVIEW].reviewers.check(request.headers.get("Authorization"))
    if reviewer is not None:
        return Grant(app=reviewer.app)
    grant = _grant(request)
    if grant is None:
        return _json_error(
            401,
            "unauthorized",
            "a valid 'Authorization: Bearer <token>' is needed (VEREDITO_READ_TOKENS or "
            "VEREDITO_REVIEW_TOKENS)",
            **{"WWW-Authenticate": "Bearer"},
        )
    return grant


def _unavailable(exc: StoreUnavailable) -> web.Response:
    log.warning("the store cannot be read (%s)", type(exc.__cause__ or exc).__name__)
    return _json_error(
        503, "store_unavailable", "the verdict store cannot be reached", **{"Retry-After": "5"}
    )


def add_refresh(
    app: web.Application,
    what: str,
    refresh: Callable[[Review], Callable[[], Any]],
    enabled: Callable[[Review], bool] = lambda review: True,
    every: Callable[[Review], float] = lambda review: review.refresh_seconds,
) -> None:
    """Run ``refresh(review)()`` in the store's threads every ``every(review)`` seconds
    (``refresh_seconds`` unless told), from serve's
    start to its shutdown (gauges computed from the store: ``what`` names them in the log). A
    store away is a WARNING, any other failure an ERROR naming only its type: a gauge never
    takes the server down. Shutdown waits for a refresh in flight before the store closes (a
    query on a closed SQLite connection can crash the process)."""
    task: dict[str, asyncio.Task[None]] = {}
    running: dict[str, Future[Any]] = {}

    async def loop(review: Review) -> None:
        while True:
            try:
                running["refresh"] = review.executor.submit(refresh(review))
                await asyncio.wrap_future(running["refresh"])
            except StoreUnavailable:
                log.warning("the %s could not be refreshed: the store is away", what)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the gauges must never take the server down
                log.error("refreshing the %s failed (%s)", what, type(exc).__name__)
                log.debug("the failure", exc_info=True)
            await asyncio.sleep(every(review))

    async def start(app: web.Application) -> None:
        if enabled(app[REVIEW]):
            task["loop"] = asyncio.ensure_future(loop(app[REVIEW]))

    async def stop(_: web.Application) -> None:
        if "loop" in task:
            task["loop"].cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task["loop"]
        refreshing = running.get("refresh")
        if refreshing is not None and not refreshing.done():  # still reading the store
            await asyncio.get_running_loop().run_in_executor(None, wait, [refreshing])

    app.on_startup.append(start)
    app.on_cleanup.insert(0, stop)
