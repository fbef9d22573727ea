"""Spans buffered per (tenant, trace id) until their trace is complete; then its triple
(:mod:`veredito.producer.otlp.assemble`). Quotas per tenant, drops counted, one summary WARNING
per interval: see the package's documentation."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, MutableMapping, Sequence
from typing import Any

from veredito.producer.otlp.assemble import (
    NOT_AN_ANSWER,
    Assembled,
    assemble,
    local_root,
)
from veredito.producer.otlp.logs import Event, apply_events, needs_events
from veredito.producer.otlp.spans import (
    _REMOTE,
    CONSUMER,
    ITEM_OVERHEAD,
    MAX_SPANS_PER_TRACE,
    SERVER,
    SPAN_OVERHEAD,
    Span,
    nested_size,
)

__all__ = ["DROP_REASONS", "NOT_JUDGED_REASONS", "OVERSIZE_DETAILS", "TraceAssembler", "span_size"]

log = logging.getLogger(__name__)

DROP_REASONS = ("incomplete", "evicted", "oversize")
# why a trace is not judged (:attr:`Assembled.skipped`): a bounded set, for a metric's label
NOT_JUDGED_REASONS = tuple(f"root_is_{kind.lower()}" for kind in NOT_AN_ANSWER)
# why a span or event was dropped as oversize, for the ``drops`` an add is given: itself over
# ``max_bytes``; its trace at ``max_spans_per_trace``; its trace alone filling a quota
OVERSIZE_DETAILS = ("item_bytes", "trace_items", "trace_quota")


def span_size(span: Span) -> int:
    """A cheap estimate of the memory a buffered span holds, in bytes.

    The lengths of its ids, name and service and of its attribute keys and string (or bytes)
    values, nested lists and maps walked, plus :data:`SPAN_OVERHEAD` per span and
    :data:`ITEM_OVERHEAD` per attribute, list item or map entry (so that a span of many tiny
    attributes is not taken for a small one).
    """
    size = (
        SPAN_OVERHEAD
        + len(span.trace_id)
        + len(span.span_id)
        + len(span.parent_id)
        + len(span.name)
        + (len(span.service) if span.service else 0)
    )
    attributes = span.attributes
    size += len(attributes) * ITEM_OVERHEAD + sum(map(len, attributes))  # the keys are str
    nested: list[Any] | None = None
    for value in attributes.values():
        if isinstance(value, str):
            size += len(value)
        elif isinstance(value, (list, dict)):
            if nested is None:
                nested = [value]
            else:
                nested.append(value)
        elif isinstance(value, bytes):
            size += len(value)
    return size + nested_size(nested) if nested else size


def _oversize(size: int, max_bytes: int, trace_full: bool) -> str:
    """Which of :data:`OVERSIZE_DETAILS` dropped an item."""
    if size > max_bytes:
        return "item_bytes"
    return "trace_items" if trace_full else "trace_quota"


class _Trace:
    """The pending spans of one trace of one tenant."""

    __slots__ = (
        "bytes",
        "checked",
        "events",
        "first_seen",
        "genai",
        "hold_until",
        "last_seen",
        "root",
        "spans",
    )

    def __init__(self, first_seen: float) -> None:
        self.spans: list[Span] = []
        self.events: list[Event] = []  # GenAI events from /v1/logs, joined at assembly
        self.bytes = 0
        self.first_seen = first_seen
        self.last_seen = first_seen
        self.root = False  # its root span is buffered: the trace completes at the end of add
        self.hold_until: float | None = None  # complete, waiting for its LLM calls' events
        self.genai = False  # a span of it names a GenAI operation: its events may come apart
        self.checked = -1.0  # the last_seen at which expire looked for a local root

    def count(self) -> int:
        """Its spans and events: what counts against the tenant's ``max_spans``."""
        return len(self.spans) + len(self.events)

    def waits_for_events(self) -> bool:
        """An LLM call in it has no messages, and no event for it has come yet."""
        if not self.genai:
            return False
        bare = [s.span_id for s in self.spans if needs_events(s)]
        if not bare:
            return False
        described = {e.span_id for e in self.events}
        return any(span_id not in described for span_id in bare)


def root_like(span: Span) -> bool:
    """A span that may be its service's entry (a chain, an agent, a workflow; with no convention
    saying what it is, a SERVER or CONSUMER span: the handler of the request or message that
    began the work): when its parent is not in the trace and no span has come for a while, it
    is the local root."""
    attributes = span.attributes
    kind = attributes.get("openinference.span.kind")
    if kind is not None:
        return str(kind).upper() in ("CHAIN", "AGENT")
    if attributes.get("traceloop.span.kind") in ("workflow", "agent"):
        return True
    if attributes.get("langfuse.observation.type") in ("span", "agent", "chain"):
        return True
    if attributes.get("gen_ai.operation.name") in ("invoke_agent", "create_agent"):
        return True
    return span.kind == SERVER or span.kind == CONSUMER  # a request or message handler


class _Tenant:
    """One tenant's pending traces, oldest first, and what they hold."""

    __slots__ = ("bytes", "held", "spans", "traces")

    def __init__(self) -> None:
        self.traces: OrderedDict[str, _Trace] = OrderedDict()  # by trace id, in first-seen order
        self.spans = 0
        self.bytes = 0
        self.held: dict[str, _Trace] = {}  # complete traces waiting for their GenAI events


class TraceAssembler:
    """Spans buffered per (tenant, trace id) until the trace's root comes; then its triple.

    Thread-safe: one lock guards the buffers and the counters (``add`` may run in a worker thread
    while ``expire`` runs on the event loop). ``dropped`` counts per reason (``incomplete`` and
    ``evicted`` traces, ``oversize`` spans), ``dropped_by_tenant`` the same per tenant; a caller
    reads their deltas around ``add``/``expire``.
    """

    def __init__(
        self,
        timeout: float = 30.0,
        *,
        max_traces: int = 10_000,
        max_spans: int = 50_000,
        max_bytes: int = 32 * 1024 * 1024,
        max_spans_per_trace: int = MAX_SPANS_PER_TRACE,
        log_interval: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        quiet: float = 2.0,
        retrieval_tools: Sequence[str] | None = None,
        event_wait: float = 5.0,
    ) -> None:
        for name, bound in (
            ("max_traces", max_traces),
            ("max_spans", max_spans),
            ("max_bytes", max_bytes),
            ("max_spans_per_trace", max_spans_per_trace),
        ):
            if bound < 1:
                raise ValueError(f"{name} must be at least 1, not {bound}")
        self.timeout = timeout
        self.quiet = quiet  # an orphan root-like span with nothing new for this long: done
        self.event_wait = event_wait  # a complete trace's wait for its LLM calls' events
        self.retrieval_tools = retrieval_tools
        self.skipped: Counter[str] = Counter()  # traces not judged, by reason
        self.max_traces = max_traces
        self.max_spans = max_spans
        self.max_bytes = max_bytes
        self.max_spans_per_trace = max_spans_per_trace
        self.log_interval = log_interval
        self._clock = clock
        self._lock = threading.Lock()
        self._tenants: dict[str, _Tenant] = {}
        self.dropped: Counter[str] = Counter(dict.fromkeys(DROP_REASONS, 0))
        self.dropped_by_tenant: dict[str, Counter[str]] = {}
        self._unlogged: Counter[str] = Counter()  # drops since the last WARNING
        self._unlogged_tenants: set[str] = set()
        self._last_log: float | None = None

    # -- the picture, for gauges -----------------------------------------------------------

    def __len__(self) -> int:
        """Pending traces, all tenants together."""
        with self._lock:
            return sum(len(tenant.traces) for tenant in self._tenants.values())

    def pending(self, tenant: str) -> int:
        """The tenant's pending traces."""
        with self._lock:
            found = self._tenants.get(tenant)
            return len(found.traces) if found else 0

    def pending_spans(self, tenant: str | None = None) -> int:
        """Pending spans of the tenant, or of all tenants together."""
        with self._lock:
            return sum(t.spans for t in self._some(tenant))

    def pending_bytes(self, tenant: str | None = None) -> int:
        """Estimated bytes (:func:`span_size`) of the pending spans of the tenant, or of all."""
        with self._lock:
            return sum(t.bytes for t in self._some(tenant))

    def drop_counts(self) -> dict[tuple[str, str], int]:
        """Every (tenant, reason) total of :attr:`dropped_by_tenant`, read under the lock."""
        with self._lock:
            return {
                (tenant, reason): count
                for tenant, counts in self.dropped_by_tenant.items()
                for reason, count in counts.items()
            }

    def _some(self, tenant: str | None) -> list[_Tenant]:
        if tenant is None:
            return list(self._tenants.values())
        found = self._tenants.get(tenant)
        return [found] if found else []

    # -- spans in, triples out ---------------------------------------------------------------

    def add(self, tenant: str, spans: Iterable[Span]) -> list[dict[str, Any]]:
        """File the tenant's spans; return the triples of the traces their roots completed (the
        traces that are not judged, such as a retriever's own, are left out: see
        :meth:`add_traces`)."""
        return [done.triple for done in self.add_traces(tenant, spans) if done.triple]

    def add_traces(
        self, tenant: str, spans: Iterable[Span], drops: MutableMapping[str, int] | None = None
    ) -> list[Assembled]:
        """File the tenant's spans; return what the traces their roots completed became.

        A root is a span without a parent, or one whose parent the SDK marked remote (a service
        behind a traced gateway). A trace completes at the end of the call, so a root's children
        that come after it in the same call are in its triple. O(spans): each span is sized
        once, and each eviction pops a whole trace that was filed before.

        ``drops``, when given, gets this call's drops: the spans dropped as oversize, by
        :data:`OVERSIZE_DETAILS`, and the traces ``evicted`` (for the reply to the request).
        """
        debug = log.isEnabledFor(logging.DEBUG)
        max_traces, max_spans = self.max_traces, self.max_spans
        max_bytes, per_trace = self.max_bytes, self.max_spans_per_trace
        ready: list[_Trace] = []
        warning: tuple[Any, ...] | None = None
        with self._lock:
            now = self._clock()
            buffer = self._tenants.get(tenant)
            if buffer is None:
                buffer = self._tenants[tenant] = _Tenant()
            traces = buffer.traces
            roots: dict[str, _Trace] = {}
            evicted = oversize = 0
            try:
                for span in spans:
                    size = span.size or span_size(span)
                    trace_id = span.trace_id
                    first_root = not span.parent_id.strip("0") or span.flags & _REMOTE == _REMOTE
                    trace = traces.get(trace_id)
                    if trace is not None:
                        first_root = first_root and not trace.root
                    if size > max_bytes or (
                        trace is not None
                        and (
                            (len(trace.spans) >= per_trace and not first_root)
                            or len(trace.spans) + len(trace.events) >= max_spans
                            or trace.bytes + size > max_bytes
                        )
                    ):
                        oversize += 1
                        if drops is not None:
                            full = trace is not None and len(trace.spans) >= per_trace
                            why = _oversize(size, max_bytes, full and not first_root)
                            drops[why] = drops.get(why, 0) + 1
                        if debug:
                            log.debug(
                                "OTLP span %s of trace %s dropped: %d bytes, %d spans before it",
                                span.span_id,
                                trace_id,
                                size,
                                len(trace.spans) if trace else 0,
                            )
                        continue
                    if (
                        len(traces) + (trace is None) > max_traces
                        or buffer.spans >= max_spans
                        or buffer.bytes + size > max_bytes
                    ):
                        evicted += self._make_room(buffer, trace, size, debug)
                    if trace is None:
                        trace = traces[trace_id] = _Trace(now)
                    trace.last_seen = now
                    if "gen_ai.operation.name" in span.attributes:
                        trace.genai = True
                    trace.spans.append(span)
                    trace.bytes += size
                    buffer.spans += 1
                    buffer.bytes += size
                    if first_root:
                        trace.root = True
                        roots[trace_id] = trace
                for trace_id, trace in roots.items():
                    if traces.get(trace_id) is not trace:  # evicted since its root came
                        continue
                    if (
                        trace.genai
                        and self.event_wait > 0
                        and trace.hold_until is None
                        and trace.waits_for_events()  # its messages come by /v1/logs
                    ):
                        trace.hold_until = now + self.event_wait
                        buffer.held[trace_id] = trace
                        continue
                    self._take(buffer, trace_id)
                    ready.append(trace)
            finally:
                warning = self._settle(tenant, evicted, oversize, now)
                if drops is not None and evicted:
                    drops["evicted"] = drops.get("evicted", 0) + evicted
        if warning:
            log.warning(*warning)
        return self._assembled(ready)

    def add_events(
        self, tenant: str, events: Iterable[Event], drops: MutableMapping[str, int] | None = None
    ) -> list[Assembled]:
        """File the tenant's GenAI events (``/v1/logs``) beside their traces' spans; return what
        the traces that were complete and waiting only for these events became. Events count
        against the tenant's quotas as spans do; an event bigger than ``max_bytes`` by itself
        is dropped (``oversize``). ``drops``: as for :meth:`add_traces`."""
        debug = log.isEnabledFor(logging.DEBUG)
        ready: list[_Trace] = []
        warning: tuple[Any, ...] | None = None
        with self._lock:
            now = self._clock()
            buffer = self._tenants.get(tenant)
            if buffer is None:
                buffer = self._tenants[tenant] = _Tenant()
            traces = buffer.traces
            touched: dict[str, None] = {}  # in the events' order
            evicted = oversize = 0
            try:
                for event in events:
                    size = event.size()
                    trace = traces.get(event.trace_id)
                    if size > self.max_bytes or (
                        trace is not None
                        and (
                            len(trace.events) >= self.max_spans_per_trace
                            or trace.bytes + size > self.max_bytes
                        )
                    ):
                        oversize += 1
                        if drops is not None:
                            full = (
                                trace is not None and len(trace.events) >= self.max_spans_per_trace
                            )
                            why = _oversize(size, self.max_bytes, full)
                            drops[why] = drops.get(why, 0) + 1
                        continue
                    if (
                        len(traces) + (trace is None) > self.max_traces
                        or buffer.spans >= self.max_spans
                        or buffer.bytes + size > self.max_bytes
                    ):
                        evicted += self._make_room(buffer, trace, size, debug)
                    if trace is None:
                        trace = traces[event.trace_id] = _Trace(now)
                    trace.events.append(event)
                    trace.bytes += size
                    trace.last_seen = now
                    buffer.spans += 1
                    buffer.bytes += size
                    if event.trace_id in buffer.held:
                        touched[event.trace_id] = None
                for trace_id in touched:
                    trace = buffer.held[trace_id]
                    if traces.get(trace_id) is trace and not trace.waits_for_events():
                        self._take(buffer, trace_id)
                        ready.append(trace)
            finally:
                warning = self._settle(tenant, evicted, oversize, now)
                if drops is not None and evicted:
                    drops["evicted"] = drops.get("evicted", 0) + evicted
        if warning:
            log.warning(*warning)
        return self._assembled(ready)

    def _settle(self, tenant: str, evicted: int, oversize: int, now: float) -> Any:
        """The end of an add, under the lock: an emptied tenant forgotten, the drops counted;
        the WARNING to log once out of the lock, if one is due."""
        buffer = self._tenants.get(tenant)
        if buffer is not None and not buffer.traces:
            del self._tenants[tenant]
        self._count(tenant, "evicted", evicted)
        self._count(tenant, "oversize", oversize)
        return self._report(now)

    def _assembled(self, ready: list[_Trace]) -> list[Assembled]:
        for trace in ready:
            if trace.events:
                apply_events(trace.spans, trace.events)
        done = [
            assemble(trace.spans, self.retrieval_tools) for trace in ready if trace.spans
        ]  # a trace of events alone (its spans never came) is no trace: expire drops it
        skipped = [d.skipped for d in done if d.skipped]
        if skipped:
            with self._lock:
                self.skipped.update(skipped)
        return done

    def _take(self, buffer: _Tenant, trace_id: str) -> _Trace:
        """Take a trace out of its tenant's buffer."""
        trace = buffer.traces.pop(trace_id)
        buffer.spans -= trace.count()
        buffer.bytes -= trace.bytes
        buffer.held.pop(trace_id, None)
        return trace

    def _make_room(self, buffer: _Tenant, keep: _Trace | None, size: int, debug: bool) -> int:
        """Evict the tenant's oldest traces, but ``keep``, until one more span of ``size`` fits
        (``keep`` alone with it fits: ``add`` checked); how many were evicted."""
        traces = buffer.traces
        new_trace = keep is None
        kept: tuple[str, _Trace] | None = None
        evicted = 0
        while traces and (
            len(traces) + new_trace > self.max_traces
            or buffer.spans >= self.max_spans
            or buffer.bytes + size > self.max_bytes
        ):
            trace_id, trace = traces.popitem(last=False)
            if trace is keep:
                kept = (trace_id, trace)
                continue
            buffer.spans -= trace.count()
            buffer.bytes -= trace.bytes
            buffer.held.pop(trace_id, None)
            evicted += 1
            if debug:
                log.debug(
                    "OTLP trace %s evicted from a full tenant buffer: %d spans",
                    trace_id,
                    len(trace.spans),
                )
        if kept is not None:  # back in its place, the oldest
            traces[kept[0]] = kept[1]
            traces.move_to_end(kept[0], last=False)
        return evicted

    def expire(self) -> int:
        """:meth:`expire_traces`, for callers that want only how many traces were forgotten."""
        return self.expire_traces()[0]

    def expire_traces(self) -> tuple[int, list[tuple[str, Assembled]]]:
        """The traces that will get no root span, of every tenant:

        - a trace holding a root-like span (a chain, an agent) whose parent is not in it, and
          that got nothing new for ``quiet`` seconds: that span is its local root (its parent
          is in another service), and the trace is assembled now — unless the SDK said that
          parent is in the same process (span flags 0x100 without 0x200): then the root is only
          late (a slow LLM call), and the trace waits for it;
        - a trace whose root has not come within ``timeout`` seconds of its first span is
          assembled from its local root when that is root-like (a chain, an agent: a service's
          entry whose parent is elsewhere, or not said to be local), else forgotten
          (``incomplete``: its root was lost).

        Returns (traces forgotten, [(tenant, what each assembled trace became)]).
        O(tenants + candidates + expired traces)."""
        debug = log.isEnabledFor(logging.DEBUG)
        ready: list[tuple[str, _Trace]] = []
        with self._lock:
            now = self._clock()
            horizon = now - self.timeout
            still = now - self.quiet
            total = 0
            for tenant, buffer in list(self._tenants.items()):
                traces = buffer.traces
                for trace_id, waiting in list(buffer.held.items()):
                    if waiting.hold_until is not None and waiting.hold_until <= now:
                        self._take(buffer, trace_id)  # its events did not all come: as it is
                        ready.append((tenant, waiting))
                for trace_id, candidate in list(traces.items()):
                    # quiet for `quiet` s, not looked at since its last span: is its local root
                    # a chain or agent whose parent is elsewhere? (O(pending) a second, off the
                    # request path; a trace is looked at again only after a new span)
                    if candidate.last_seen > still or candidate.checked == candidate.last_seen:
                        continue
                    candidate.checked = candidate.last_seen
                    if not candidate.spans or candidate.hold_until is not None:
                        continue
                    root = local_root(candidate.spans)
                    if root.parent_id.strip("0") and not root.local_parent and root_like(root):
                        self._take(buffer, trace_id)
                        ready.append((tenant, candidate))
                expired = 0
                while traces:
                    trace_id = next(iter(traces))
                    trace = traces[trace_id]
                    if trace.first_seen > horizon:
                        break
                    self._take(buffer, trace_id)
                    entry = local_root(trace.spans) if trace.spans else None
                    if entry is not None and not entry.local_parent and root_like(entry):
                        ready.append((tenant, trace))
                        continue
                    expired += 1
                    if debug:
                        log.debug(
                            "OTLP trace %s had no root span after %.0f s: %d spans forgotten",
                            trace_id,
                            self.timeout,
                            len(trace.spans),
                        )
                if not traces:
                    del self._tenants[tenant]
                self._count(tenant, "incomplete", expired)
                total += expired
            warning = self._report(now)
        if warning:
            log.warning(*warning)
        ready = [(tenant, trace) for tenant, trace in ready if trace.spans]
        assembled = self._assembled([trace for _, trace in ready])
        return total, [(tenant, done) for (tenant, _), done in zip(ready, assembled, strict=True)]

    # -- counting and the summary line -------------------------------------------------------

    def _count(self, tenant: str, reason: str, n: int) -> None:
        if n <= 0:
            return
        self.dropped[reason] += n
        counts = self.dropped_by_tenant.get(tenant)
        if counts is None:
            counts = self.dropped_by_tenant[tenant] = Counter(dict.fromkeys(DROP_REASONS, 0))
        counts[reason] += n
        self._unlogged[reason] += n
        self._unlogged_tenants.add(tenant)

    def _report(self, now: float) -> tuple[Any, ...] | None:
        """The WARNING to log (outside the lock) if there were drops and the interval is over."""
        if not self._unlogged:
            return None
        if self._last_log is not None and now - self._last_log < self.log_interval:
            return None
        since = "since start"
        if self._last_log is not None:
            since = f"in the last {now - self._last_log:.0f} s"
        unlogged, tenants = self._unlogged, len(self._unlogged_tenants)
        self._unlogged, self._unlogged_tenants = Counter(), set()
        self._last_log = now
        return (
            "OTLP spans not judged %s: %d traces evicted from full tenant buffers, "
            "%d traces incomplete (no root span within %.0f s), %d oversize spans dropped, "
            "in %d tenant(s); pending now: %d traces, %d spans, ~%.1f MiB",
            since,
            unlogged["evicted"],
            unlogged["incomplete"],
            self.timeout,
            unlogged["oversize"],
            tenants,
            sum(len(t.traces) for t in self._tenants.values()),
            sum(t.spans for t in self._tenants.values()),
            sum(t.bytes for t in self._tenants.values()) / (1024 * 1024),
        )
