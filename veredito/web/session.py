"""A reviewer's session on the review page: the cookie ``veredito_sessao`` =
``<session key>.<expiry>.<HMAC-SHA256>`` under ``Review.session_secret`` (the reviewer's opaque
session key, never the token), read once a request, and what the page shows of it. Signing in
and out are routes of :mod:`veredito.web.page_labels`."""

from __future__ import annotations

import hashlib
import hmac
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from veredito.web.reading import REVIEW
from veredito.web.reviewing import Reviewer

__all__ = ["SESSION_COOKIE", "Session", "session_cookie", "session_of", "viewer"]

SESSION_COOKIE = "veredito_sessao"
SESSION_SECONDS = 12 * 3600


@dataclass(frozen=True)
class Session:
    reviewer: Reviewer
    payload: str  # "<session key>.<expiry>", what the cookie's MAC signs
    csrf: str


def _mac(secret: bytes, message: str) -> str:
    return hmac.new(secret, message.encode(), hashlib.sha256).hexdigest()


def _equal(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode("utf-8", "replace"), expected.encode())


def session_cookie(secret: bytes, key: str, now: float) -> str:
    payload = f"{key}.{int(now) + SESSION_SECONDS}"
    return f"{payload}.{_mac(secret, 'session:' + payload)}"


def read_session(value: str, secret: bytes, reviewers: Any, now: float) -> Session | None:
    """The session a cookie value holds: signed by this server, not expired, of a reviewer the
    server still knows; None otherwise."""
    parts = value.split(".")
    if len(parts) != 3 or not (parts[1].isascii() and parts[1].isdigit()):
        return None
    key, expiry, mac = parts
    payload = f"{key}.{expiry}"
    if not _equal(mac, _mac(secret, "session:" + payload)) or int(expiry) <= now:
        return None
    reviewer: Reviewer | None = reviewers.by_session_key(key)
    if reviewer is None:
        return None
    return Session(reviewer, payload, _mac(secret, "csrf:" + payload))


_SESSION: web.RequestKey[Session | None] = web.RequestKey("veredito_session")


def session_of(request: web.Request) -> Session | None:
    """The signed-in reviewer of a page request (read once per request), or None."""
    if _SESSION in request:
        return request[_SESSION]
    review = request.app[REVIEW]
    value = request.cookies.get(SESSION_COOKIE)
    session = None
    if value and review.reviewers:
        session = read_session(value, review.session_secret, review.reviewers, time.time())
    request[_SESSION] = session
    return session


def viewer(session: Session | None) -> dict[str, str] | None:
    """What the page header shows of a session (the sign-out form needs its CSRF token)."""
    return None if session is None else {"name": session.reviewer.name, "csrf": session.csrf}


def may_label(session: Session | None, app: str) -> bool:
    return session is not None and session.reviewer.app in (None, app)


def queue_link(app: str, **extra: str) -> str:
    query = urlencode({k: v for k, v in {"app": app, **extra}.items() if v})
    return "/revisar/proxima" + (f"?{query}" if query else "")
