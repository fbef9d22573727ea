"""A span as veredito reads it, whatever encoding or convention it came in."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ITEM_OVERHEAD", "PROTOBUF", "SPAN_OVERHEAD", "OTLPError", "Span", "nested_size"]

PROTOBUF = "application/x-protobuf"


class OTLPError(ValueError):
    """The body is not an OTLP trace export; the message says why."""


SPAN_OVERHEAD = 200  # estimated bytes of a Span, its attribute dict and its id strings
ITEM_OVERHEAD = 64  # estimated bytes of an attribute, list item or map entry besides its strings

# OTLP's span flags: whether the parent's context says if it is remote, and that it is
MAX_SPANS_PER_TRACE = 2_000  # the spans one trace may hold in the buffer (and name in replies)
HAS_IS_REMOTE = 0x100
SERVER, CONSUMER = 2, 5  # OTLP's SpanKind of spans that begin a service's work
IS_REMOTE = 0x200
_REMOTE = HAS_IS_REMOTE | IS_REMOTE


@dataclass(slots=True)
class Span:
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    start: int
    attributes: dict[str, Any]
    service: str | None = None
    resource: dict[str, Any] | None = None  # shared by the spans of one resource
    flags: int = 0
    size: int = 0  # the estimate of its memory decoding made (buffer.span_size); 0: not made
    kind: int = 0  # OTLP's SpanKind: 2 SERVER and 5 CONSUMER are a service's entry points

    @property
    def local_parent(self) -> bool:
        """The SDK said its parent is in the same process (flags 0x100 without 0x200): when that
        parent is missing, it is late or lost, never elsewhere."""
        return self.flags & _REMOTE == HAS_IS_REMOTE

    @property
    def remote_parent(self) -> bool:
        """Its parent is in another process (the SDK said so): this is the local root."""
        return self.flags & _REMOTE == _REMOTE and bool(self.parent_id.strip("0"))


def nested_size(containers: list[Any]) -> int:
    """What :func:`~veredito.producer.otlp.buffer.span_size` counts for attribute values that
    are lists or maps: :data:`ITEM_OVERHEAD` per item or entry, the lengths of map keys and of
    string (or bytes) items, nested containers walked (a stack, not recursion: any depth
    decoding took is walked). ``containers`` is emptied."""
    size = 0
    while containers:
        container = containers.pop()
        size += len(container) * ITEM_OVERHEAD
        if isinstance(container, dict):
            size += sum(len(key) for key in container if isinstance(key, str))
            container = container.values()
        for item in container:
            if isinstance(item, (str, bytes)):
                size += len(item)
            elif isinstance(item, (list, dict)):
                containers.append(item)
    return size
