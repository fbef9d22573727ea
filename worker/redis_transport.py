"""Kombu's Redis transport without the window in which a killed consumer loses a message.

Kombu takes a message off a Redis list with ``BRPOP`` and only then records it as unacked (a hash
that the visibility sweep restores from). A consumer killed between the two — the reply still in
its socket, or the record's round trip not yet made — loses that message for good: measured here
as one triple in 600 with two worker kills.

This transport takes the message with ``BLMOVE`` instead, which moves it atomically onto a
landing list (``veredito:landing:<queue>``); once kombu has recorded it as unacked it is removed
from there. Every consumer's periodic sweep (the one that restores unacked messages past their
visibility timeout, every 10 s, and once when it starts consuming) also looks at the landing
lists: a message there for 10 s or more — the time it was first seen is kept in Redis, so the
sweeps of short-lived processes add up — belongs to a consumer that died in the window, and goes
back to the head of its queue (one Lua script, so two sweepers cannot both return it). The cost
of a consumer dying just after the record is a second delivery, which the done markers and the
sinks absorb.

It applies where a channel consumes one queue with no priority levels, which is how the worker
(``veredito.triples``) and the results sink (``veredito.verdicts``) consume; anything else falls
back to kombu's own ``BRPOP``.
"""

from __future__ import annotations

import logging
from time import monotonic
from typing import Any

from kombu.transport import redis as kombu_redis
from kombu.utils.encoding import bytes_to_str
from kombu.utils.json import loads

__all__ = ["LANDING_PREFIX", "TRANSPORT", "Channel", "Transport"]

log = logging.getLogger(__name__)

TRANSPORT = "veredito.worker.redis_transport:Transport"
LANDING_PREFIX = "veredito:landing:"

# KEYS: landing list, queue, first-seen hash. ARGV: minimum age in seconds.
# Every message on the landing list gets the time it was first seen by a sweep (in Redis, so any
# process's sweep counts); one seen at least ARGV[1] seconds ago goes back to the head of its
# queue. Entries for messages no longer on the list are forgotten.
_SWEEP = """
local now = tonumber(redis.call('TIME')[1])
local items = redis.call('LRANGE', KEYS[1], 0, -1)
local present = {}
local returned = 0
for _, item in ipairs(items) do
  local h = redis.sha1hex(item)
  present[h] = true
  local first = redis.call('HGET', KEYS[3], h)
  if not first then
    redis.call('HSET', KEYS[3], h, now)
  elseif now - tonumber(first) >= tonumber(ARGV[1]) then
    if redis.call('LREM', KEYS[1], 1, item) == 1 then
      redis.call('RPUSH', KEYS[2], item)
      returned = returned + 1
    end
    redis.call('HDEL', KEYS[3], h)
    present[h] = nil
  end
end
for _, h in ipairs(redis.call('HKEYS', KEYS[3])) do
  if not present[h] then redis.call('HDEL', KEYS[3], h) end
end
return returned
"""
ORPHAN_AGE = 10  # seconds on the landing list before a message counts as orphaned


class QoS(kombu_redis.QoS):  # type: ignore[misc]
    def restore_visible(self, *args: Any, **kwargs: Any) -> None:
        super().restore_visible(*args, **kwargs)
        self.channel.return_orphans()


class Channel(kombu_redis.Channel):  # type: ignore[misc]
    QoS = QoS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._moving_from: str | None = None
        self._landed: set[str] = set()

    def _single_queue(self) -> str | None:
        if self.global_keyprefix or len(self.active_queues) != 1:
            return None
        if any(
            self._q_for_pri(q, pri) != q for q in self.active_queues for pri in self.priority_steps
        ):
            return None
        return next(iter(self.active_queues))  # type: ignore[no-any-return]

    def _brpop_start(self, timeout: float | None = None) -> None:
        queue = self._single_queue()
        if queue is None:
            self._moving_from = None
            super()._brpop_start(timeout)
            return
        if timeout is None:
            timeout = self.brpop_timeout
        self._queue_cycle.consume(1)
        if queue not in self._landed:  # first take: sweep now, a consumer may not live 10 s
            self._landed.add(queue)
            self.qos.restore_visible(num=self.unacked_restore_limit)
        self._moving_from = queue
        self._in_poll = self.client.connection
        self._brpop_sent_at = monotonic()
        landing = LANDING_PREFIX + queue
        self.client.connection.send_command("BLMOVE", queue, landing, "RIGHT", "LEFT", timeout or 0)

    def _brpop_read(self, **options: Any) -> bool:
        queue = self._moving_from
        if queue is None:
            return bool(super()._brpop_read(**options))
        try:
            try:
                item = self.client.parse_response(self.client.connection, "BLMOVE", **options)
            except self.connection_errors:
                self.client.connection.disconnect()
                raise
            if not item:
                raise kombu_redis.Empty()
            self._queue_cycle.rotate(queue)
            # _deliver records the message as unacked (kombu's QoS.append) before anything else
            self.connection._deliver(loads(bytes_to_str(item)), queue)
            with self.conn_or_acquire() as client:
                client.lrem(LANDING_PREFIX + queue, 1, item)
            return True
        finally:
            self._in_poll = None
            self._moving_from = None
            flush = getattr(self, "_flush_brpop_reauth", None)
            if flush is not None:
                flush()

    def return_orphans(self) -> int:
        """Send back messages left on a landing list by a consumer that died (there for
        ``ORPHAN_AGE`` seconds or more, as first seen by any process's sweep)."""
        returned = 0
        for queue in list(self._landed):
            landing = LANDING_PREFIX + queue
            with self.conn_or_acquire() as client:
                returned += int(
                    client.eval(_SWEEP, 3, landing, queue, landing + ":seen", ORPHAN_AGE)
                )
        if returned:
            log.warning("returned %d messages left by a consumer that died", returned)
        return returned


class Transport(kombu_redis.Transport):  # type: ignore[misc]
    Channel = Channel
