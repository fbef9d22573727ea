"""Done markers: a redelivered triple whose verdict is already published is not judged again.

After a verdict (and a failed triple's dead-letter record) is confirmed by the broker, the worker
sets ``veredito:done:<task id>`` in Redis with a TTL. A message that comes back after that — the
worker was killed between publishing and acking, a connection dropped before the ack, Redis's
visibility timeout handed a slow message to a second worker — finds its marker and is acked
without a second judge call (and without a second verdict; the sinks drop repeats anyway).

The key is the task message's id, not the triple's: ``veredito replay`` and a producer sending
the same triple again publish new messages, and those are judged. Redis being away never stops
the worker: a marker that cannot be read counts as absent (the cost is one more judge call).
"""

from __future__ import annotations

import logging

from veredito.producer.optional import need_redis

__all__ = ["DoneMarks"]

log = logging.getLogger(__name__)

PREFIX = "veredito:done:"


class DoneMarks:
    def __init__(self, url: str, ttl: int) -> None:
        self.ttl = ttl
        redis = need_redis()
        self._errors = (redis.RedisError, OSError)
        self._redis = redis.Redis.from_url(
            url, socket_timeout=2, socket_connect_timeout=2, health_check_interval=30
        )

    def is_done(self, key: str) -> bool:
        try:
            return bool(self._redis.exists(PREFIX + key))
        except self._errors as exc:
            log.warning("done markers unreadable (%s): judging anyway", type(exc).__name__)
            return False

    def mark(self, key: str, status: str) -> None:
        try:
            self._redis.set(PREFIX + key, status, ex=self.ttl)
        except self._errors as exc:
            log.warning("done marker not written (%s)", type(exc).__name__)

    def close(self) -> None:
        self._redis.close()
