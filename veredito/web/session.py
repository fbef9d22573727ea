"""A reviewer's session on the review page: the cookie ``veredito_sessao`` =
``<session key>.<generation>.<expiry>.<HMAC-SHA256>`` under ``Review.session_secret``, read once a
request, and what the page shows of it. The session key is an HMAC of the review token under the
same secret (never the token, and nothing a cookie lets anyone test token guesses against
offline); the generation is the store's (``review_sessions``): signing out, or signing in again,
moves it on, so every older cookie of that key stops working on every replica, across restarts.
Signing in and out are routes of :mod:`veredito.web.page_labels`."""

from __future__ import annotations

import hashlib
import hmac
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from veredito.web.reading import REVIEW, _call
from veredito.web.reviewing import Reviewer

__all__ = [
    "SESSION_COOKIE",
    "Session",
    "queue_form",
    "read_session",
    "session_cookie",
    "session_of",
    "viewer",
]

SESSION_COOKIE = "veredito_sessao"
SESSION_SECONDS = 12 * 3600


@dataclass(frozen=True)
class Session:
    reviewer: Reviewer
    payload: str  # "<session key>.<generation>.<expiry>", what the cookie's MAC signs
    csrf: str
    key: str  # the session key (its generation is kept in the store)


def _mac(secret: bytes, message: str) -> str:
    return hmac.new(secret, message.encode(), hashlib.sha256).hexdigest()


def _equal(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode("utf-8", "replace"), expected.encode())


def session_cookie(secret: bytes, key: str, generation: int, now: float) -> str:
    payload = f"{key}.{generation}.{int(now) + SESSION_SECONDS}"
    return f"{payload}.{_mac(secret, 'session:' + payload)}"


def _digits(value: str) -> bool:
    return value.isascii() and value.isdigit() and len(value) <= 18


def read_session(
    value: str, secret: bytes, reviewers: Any, now: float
) -> tuple[Session, int] | None:
    """The session a cookie value holds and the generation it was signed for: signed by this
    server's secret, not expired, of a reviewer the server still knows; None otherwise. Whether
    the generation is still the store's is the caller's to ask (:func:`session_of`)."""
    parts = value.split(".")
    if len(parts) != 4 or not (_digits(parts[1]) and _digits(parts[2])):
        return None
    key, generation, expiry, mac = parts
    payload = f"{key}.{generation}.{expiry}"
    if not _equal(mac, _mac(secret, "session:" + payload)) or int(expiry) <= now:
        return None
    reviewer: Reviewer | None = reviewers.by_session_key(key, secret)
    if reviewer is None:
        return None
    return Session(reviewer, payload, _mac(secret, "csrf:" + payload), key), int(generation)


_SESSION: web.RequestKey[Session | None] = web.RequestKey("veredito_session")


async def session_of(request: web.Request) -> Session | None:
    """The signed-in reviewer of a page request (read once per request), or None: a cookie
    this server signed, whose generation the store still holds (one indexed read).
    :class:`~veredito.store.StoreUnavailable` when the store cannot say."""
    if _SESSION in request:
        return request[_SESSION]
    review = request.app[REVIEW]
    value = request.cookies.get(SESSION_COOKIE)
    session = None
    if value and review.reviewers:
        found = read_session(value, review.session_secret, review.reviewers, time.time())
        if found is not None:
            current = await _call(request, review.store.session_generation, found[0].key)
            session = found[0] if current == found[1] else None
    request[_SESSION] = session
    return session


def viewer(session: Session | None) -> dict[str, str] | None:
    """What the page header shows of a session (the sign-out form needs its CSRF token)."""
    return None if session is None else {"name": session.reviewer.name, "csrf": session.csrf}


def may_label(session: Session | None, app: str) -> bool:
    return session is not None and session.reviewer.app in (None, app)


def queue_form(session: Session | None, app: str) -> dict[str, str] | None:
    """The "Próxima para revisar" form of a signed-in reviewer (a POST: taking an answer from
    the queue changes what it hands out next, so no link, no GET)."""
    if session is None:
        return None
    return {"action": "/revisar/proxima", "csrf": session.csrf, "app": app}
