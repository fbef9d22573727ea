"""A span as veredito reads it, whatever encoding or convention it came in."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["PROTOBUF", "OTLPError", "Span"]

PROTOBUF = "application/x-protobuf"


class OTLPError(ValueError):
    """The body is not an OTLP trace export; the message says why."""


@dataclass
class Span:
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    start: int
    attributes: dict[str, Any]
    service: str | None = None
