"""Sampling and dedup at the way in (``produce --sample/--dedup-window``, ``serve``).

- :func:`sampled_in` decides by a hash of the triple id, so every producer — several ``serve``
  replicas, a ``produce`` re-run — makes the same decision for the same triple.
- :class:`Dedup` remembers the ids accepted in the last ``window`` seconds: in Redis when a URL
  is given (shared by every process), else in this process. An id is remembered only after the
  broker confirmed it (:meth:`Dedup.remember`), so a triple whose publishing failed is not taken
  for a repeat when it is sent again. Two processes accepting the same id at the same instant may
  both queue it; the sinks keep one.

Neither is silent: what they leave out is counted and reported (the summary line of ``produce``,
the answer and the metrics of ``serve``).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Iterable

from veredito.producer.optional import need_redis

__all__ = ["Dedup", "sampled_in"]

log = logging.getLogger(__name__)

PREFIX = "veredito:seen:"


def sampled_in(triple_id: str, rate: float) -> bool:
    if rate >= 1:
        return True
    if rate <= 0:
        return False
    digest = hashlib.sha256(triple_id.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < rate


class Dedup:
    def __init__(self, window: float, redis_url: str | None = None, max_local: int = 1_000_000):
        self.window = window
        self._redis = None
        self._errors: tuple[type[BaseException], ...] = (OSError,)
        if redis_url:
            redis = need_redis()
            self._redis = redis.Redis.from_url(redis_url, socket_timeout=2)
            self._errors = (redis.RedisError, OSError)
        self._local: OrderedDict[str, float] = OrderedDict()
        self._max_local = max_local

    def seen(self, ids: list[str]) -> list[bool]:
        """For each id, whether it was accepted within the window (one round trip for all)."""
        if self._redis is not None:
            try:
                pipe = self._redis.pipeline(transaction=False)
                for triple_id in ids:
                    pipe.exists(PREFIX + triple_id)
                return [bool(found) for found in pipe.execute()]
            except self._errors as exc:  # never block intake: treat as unseen
                log.warning("dedup store unreadable (%s): nothing dropped", type(exc).__name__)
                return [False] * len(ids)
        now = time.monotonic()
        self._expire(now)
        return [self._local.get(triple_id, 0.0) > now for triple_id in ids]

    def remember(self, ids: Iterable[str]) -> None:
        """Call once the broker confirmed these ids."""
        ids = list(ids)
        if not ids:
            return
        if self._redis is not None:
            try:
                pipe = self._redis.pipeline(transaction=False)
                for triple_id in ids:
                    pipe.set(PREFIX + triple_id, 1, ex=max(1, int(self.window)))
                pipe.execute()
            except self._errors as exc:
                log.warning("dedup store not written (%s)", type(exc).__name__)
            return
        until = time.monotonic() + self.window
        for triple_id in ids:
            self._local[triple_id] = until
            self._local.move_to_end(triple_id)
        while len(self._local) > self._max_local:
            self._local.popitem(last=False)

    def _expire(self, now: float) -> None:
        while self._local:
            oldest, until = next(iter(self._local.items()))
            if until > now:
                break
            del self._local[oldest]
