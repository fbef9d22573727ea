"""``veredito otlp explain FILE…``: the triple each trace of OTLP exports would become, and
why, without a broker: the spans as read (convention, kind), the root, what was found where,
what was missing (the attributes looked for), and whether ``serve`` would queue or reject it.

Each FILE is an OTLP/JSON export (one ``{"resourceSpans": …}`` or ``{"resourceLogs": …}``
object, or one per line as the OpenTelemetry Collector's file exporter writes them) or a saved
OTLP/HTTP protobuf request body (traces or logs), either of them gzip-compressed or not (told by
its magic bytes); ``-`` reads stdin. Several files are read as one stream, as ``serve`` would take
them: the GenAI events of logs exports (``/v1/logs``) join their spans by trace and span id, with
:func:`~veredito.producer.otlp.logs.apply_events` as ``serve`` does. Every trace is assembled at
the end, complete or not (its local root taken as its root), and checked with the configured
limits (``VEREDITO_MAX_CHUNKS``, ``VEREDITO_MAX_TRIPLE_BYTES``, ``VEREDITO_OTLP_RETRIEVAL_TOOLS``;
a body over ``VEREDITO_INGEST_MAX_BYTES`` or ``VEREDITO_OTLP_MAX_SPANS_PER_REQUEST`` is noted).

A file that is no OTLP export exits 2 with a message naming it (and the line, for JSON lines).
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from veredito.producer.otlp.spans import OTLPError
from veredito.worker.settings import Settings

if TYPE_CHECKING:
    from veredito.producer.otlp import Span
    from veredito.producer.otlp.logs import Event
    from veredito.producer.triple import Limits

__all__ = ["Export", "InputError", "explain", "explain_exports", "explain_traces", "read_export"]

GZIP_MAGIC = b"\x1f\x8b"


class InputError(OTLPError):
    """A file that is no OTLP export; the message says why (and where, for JSON lines)."""


@dataclass
class Export:
    """What one file holds: its spans, its GenAI events, and notes on serve's limits."""

    spans: list[Span] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _gunzip(data: bytes) -> bytes:
    if not data.startswith(GZIP_MAGIC):
        return data
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(f"not a valid gzip body ({exc})") from None


def _json_bodies(data: bytes) -> list[tuple[int | None, bytes, Any]]:
    """The JSON exports of a file: the whole file, else one a line (line number, text, value)."""
    try:
        return [(None, data, json.loads(data))]
    except UnicodeDecodeError:
        raise InputError("not an OTLP trace export, nor a logs one (not UTF-8 text)") from None
    except ValueError as exc:
        whole = exc
    lines = [(n, line) for n, line in enumerate(data.splitlines(), 1) if line.strip()]
    per_line = len(lines) > 1  # a Collector file: one export a line
    if per_line:
        try:
            json.loads(lines[0][1])
        except ValueError:
            per_line = False
    if not per_line:
        where, why = "", str(whole)
        if isinstance(whole, json.JSONDecodeError):
            where, why = f"line {whole.lineno}: ", f"{whole.msg}, column {whole.colno}"
        raise InputError(
            f"{where}not an OTLP trace export, nor a logs one (not valid JSON: {why})"
        ) from None
    out: list[tuple[int | None, bytes, Any]] = []
    for n, line in lines:
        try:
            out.append((n, line, json.loads(line)))
        except ValueError as exc:
            raise InputError(
                f"line {n}: not an OTLP trace export, nor a logs one (not valid JSON: {exc})"
            ) from None
    return out


def read_export(data: bytes, max_bytes: int | None = None, max_spans: int | None = None) -> Export:
    """The spans and GenAI events of one file (see the module); :class:`InputError` if it holds
    no OTLP export. ``max_bytes`` and ``max_spans``: serve's limits per request, noted when a
    body passes them."""
    from veredito.producer.otlp import PROTOBUF, decode
    from veredito.producer.otlp.logs import decode_logs

    data = _gunzip(data)
    export = Export()
    text = data.lstrip()
    if text.startswith((b"{", b"[")):
        bodies = [(n, body, value, "application/json") for n, body, value in _json_bodies(data)]
    else:
        bodies = [(None, data, None, PROTOBUF)]
    for line, body, value, content_type in bodies:
        where = f"line {line}: " if line is not None else ""
        logs = isinstance(value, dict) and "resourceLogs" in value and "resourceSpans" not in value
        spans: list[Span] = []
        events: list[Event] = []
        if content_type == PROTOBUF:
            spans, events = _protobuf(body)
        else:
            try:
                if logs:
                    events = decode_logs(body, content_type)
                else:
                    spans = decode(body, content_type)
            except OTLPError as exc:
                what = "logs" if logs else "trace"
                raise InputError(f"{where}not an OTLP {what} export ({exc})") from None
        if max_bytes is not None and len(body) > max_bytes:
            export.notes.append(
                f"{where}a body of {len(body)} bytes, over VEREDITO_INGEST_MAX_BYTES "
                f"({max_bytes}): serve would answer 413"
            )
        items = len(spans) + len(events)
        if max_spans is not None and items > max_spans:
            export.notes.append(
                f"{where}{items} {'spans' if spans else 'GenAI events'} in one body, over "
                f"VEREDITO_OTLP_MAX_SPANS_PER_REQUEST ({max_spans}): serve would answer 413"
            )
        export.spans += spans
        export.events += events
    return export


def _protobuf(body: bytes) -> tuple[list[Span], list[Event]]:
    """A protobuf body's spans, else its GenAI events (a logs body may read as an empty trace
    export); :class:`InputError` naming the traces' error, the likelier one, if it is neither."""
    from veredito.producer.otlp import PROTOBUF, decode
    from veredito.producer.otlp.logs import decode_logs

    traces_error: OTLPError | None = None
    try:
        spans = decode(body, PROTOBUF)
    except OTLPError as exc:
        spans, traces_error = [], exc
    if spans:
        return spans, []
    try:
        return [], decode_logs(body, PROTOBUF)
    except OTLPError:
        if traces_error is None:
            return [], []  # an empty trace export
        raise InputError(f"not an OTLP trace export, nor a logs one ({traces_error})") from None


def explain_exports(
    exports: Sequence[Export],
    retrieval_tools: Sequence[str] | None = None,
    limits: Limits | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """What each trace of ``exports`` becomes (see the module), and how many GenAI events have
    no span in them."""
    from veredito.producer.otlp import assemble
    from veredito.producer.otlp.assemble import _read, local_root
    from veredito.producer.otlp.logs import apply_events, needs_events
    from veredito.producer.triple import InvalidTriple, Limits, parse_triple, rejection

    traces: dict[str, list[Span]] = {}
    events: dict[str, list[Event]] = {}
    for export in exports:
        for span in export.spans:
            traces.setdefault(span.trace_id, []).append(span)
        for event in export.events:
            events.setdefault(event.trace_id, []).append(event)
    orphans = sum(len(e) for trace_id, e in events.items() if trace_id not in traces)
    out = []
    for trace_id, spans in traces.items():
        joined = events.get(trace_id, [])
        apply_events(spans, joined)  # as serve's buffer does when it assembles the trace
        done = assemble(spans, retrieval_tools)
        root = local_root(spans)
        item: dict[str, Any] = {
            "trace_id": trace_id,
            "spans": [
                {"name": s.name, "kind": r.kind or "unknown", "convention": r.convention or "none",
                 "root": s is root}
                for s, r in ((s, _read(s)) for s in sorted(spans, key=lambda s: s.start))
            ],
        }  # fmt: skip
        if joined:
            item["events"] = len(joined)
        bare = [s.name for s in spans if needs_events(s)]
        if bare:  # an LLM call without its messages: with EVENT_ONLY they come as logs
            item["without_messages"] = bare
        if done.skipped:
            item["outcome"] = f"not judged: {done.skipped.replace('_', ' ')}"
        else:
            assert done.triple is not None
            item["triple"] = done.triple
            try:
                parse_triple(done.triple, limits or Limits())
                item["outcome"] = "queued"
            except InvalidTriple as exc:
                item["outcome"] = f"rejected: {rejection(done.triple, exc)}"
        out.append(item)
    return out, orphans


def explain_traces(
    data: bytes | Sequence[bytes],
    retrieval_tools: Sequence[str] | None = None,
    limits: Limits | None = None,
) -> list[dict[str, Any]]:
    """What each trace of ``data`` (one file's bytes, or several) becomes (see the module)."""
    files = [data] if isinstance(data, bytes) else list(data)
    return explain_exports([read_export(d) for d in files], retrieval_tools, limits)[0]


def _print_trace(item: dict[str, Any]) -> None:
    n = item.get("events", 0)
    events = f" ({n} GenAI event{'' if n == 1 else 's'} joined)" if n else ""
    print(f"trace {item['trace_id']}: {item['outcome']}{events}")
    for span in item["spans"]:
        mark = "*" if span["root"] else " "
        print(f"  {mark} {span['name']}  [{span['kind']}, {span['convention']}]")
    triple = item.get("triple")
    if triple is not None:
        metadata = triple["metadata"]
        print(f"    query:   {triple['query']!r}")
        for n, chunk in enumerate(triple["context"]):
            print(f"    context[{n}]: {chunk[:200]!r}")
        if not triple["context"]:
            print("    context: (none)")
        if "otlp_context" in metadata:
            print(f"    otlp_context: {metadata['otlp_context']!r}")
        print(f"    answer:  {triple['answer']!r}")
        app = metadata.get("app")
        unset = "  (serve sets the token's app, if it is bound to one)" if app is None else ""
        print(f"    app:     {app!r}{unset}")
        if "release" in metadata:
            print(f"    release: {metadata['release']!r}")
        for name, where in (metadata.get("otlp") or {}).get("looked_for", {}).items():
            print(f"    {name} not found; looked for {where}")
    for name in item.get("without_messages", []):
        print(f"    {name}: no messages on the span; with EVENT_ONLY they are GenAI events: "
              "pass the logs export too")  # fmt: skip
    print()


def explain(args: argparse.Namespace, settings: Settings) -> int:
    names: list[str] = args.files
    if names.count("-") > 1:
        print("veredito: - (stdin) can be read once", file=sys.stderr)
        return 2
    exports = []
    for name in names:
        try:
            data = sys.stdin.buffer.read() if name == "-" else Path(name).read_bytes()
        except OSError as exc:
            print(f"veredito: {name}: {exc.strerror}", file=sys.stderr)
            return 2
        try:
            export = read_export(
                data, settings.ingest_max_bytes, settings.otlp_max_spans_per_request
            )
        except OTLPError as exc:
            print(f"veredito: {name}: {exc}", file=sys.stderr)
            return 2
        for note in export.notes:
            print(f"veredito: {name}: note: {note}", file=sys.stderr)
        exports.append(export)
    tools = [t.strip() for t in (settings.otlp_retrieval_tools or "").split(",") if t.strip()]
    traces, orphans = explain_exports(exports, tools or None, settings.limits)
    if orphans:
        print(
            f"veredito: note: {orphans} GenAI events name spans that are not in "
            f"{'these files' if len(names) > 1 else 'this file'}: pass the traces export too",
            file=sys.stderr,
        )
    if args.json:
        for item in traces:
            print(json.dumps(item, ensure_ascii=False))
        return 0
    if not traces:
        print("no spans in this export")
    for item in traces:
        _print_trace(item)
    return 0
