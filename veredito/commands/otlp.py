"""``veredito otlp explain FILE``: the triple each trace of an OTLP export would become, and
why, without a broker: the spans as read (convention, kind), the root, what was found where,
what was missing (the attributes looked for), and whether ``serve`` would queue or reject it.

FILE is an OTLP/JSON export (one ``{"resourceSpans": …}`` object, or one per line as the
OpenTelemetry Collector's file exporter writes them) or a saved OTLP/HTTP protobuf body; ``-``
reads stdin. Every trace is assembled at the end of the file, complete or not (its local root
taken as its root).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from veredito.worker.settings import Settings

__all__ = ["explain", "explain_traces"]


def _exports(data: bytes) -> list[tuple[bytes, str]]:
    """The export bodies a file holds, with their content type."""
    from veredito.producer.otlp import PROTOBUF

    text = data.lstrip()
    if not text.startswith((b"{", b"[")):
        return [(data, PROTOBUF)]
    try:
        json.loads(data)
        return [(data, "application/json")]
    except ValueError:  # one export per line
        return [(line, "application/json") for line in data.splitlines() if line.strip()]


def explain_traces(data: bytes, retrieval_tools: list[str] | None = None) -> list[dict[str, Any]]:
    """What each trace of ``data`` becomes (see the module)."""
    from veredito.producer.otlp import assemble, decode
    from veredito.producer.otlp.assemble import _read, local_root
    from veredito.producer.triple import InvalidTriple, parse_triple, rejection

    traces: dict[str, list[Any]] = {}
    for body, content_type in _exports(data):
        for span in decode(body, content_type):
            traces.setdefault(span.trace_id, []).append(span)
    out = []
    for trace_id, spans in traces.items():
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
        if done.skipped:
            item["outcome"] = f"not judged: {done.skipped.replace('_', ' ')}"
        else:
            assert done.triple is not None
            item["triple"] = done.triple
            try:
                parse_triple(done.triple)
                item["outcome"] = "queued"
            except InvalidTriple as exc:
                item["outcome"] = f"rejected: {rejection(done.triple, exc)}"
        out.append(item)
    return out


def explain(args: argparse.Namespace, settings: Settings) -> int:
    from veredito.producer.otlp import OTLPError

    try:
        data = sys.stdin.buffer.read() if args.file == "-" else Path(args.file).read_bytes()
    except OSError as exc:
        print(f"veredito: {args.file}: {exc.strerror}", file=sys.stderr)
        return 2
    tools = [t.strip() for t in (settings.otlp_retrieval_tools or "").split(",") if t.strip()]
    try:
        traces = explain_traces(data, tools or None)
    except OTLPError as exc:
        print(f"veredito: {args.file}: not an OTLP trace export ({exc})", file=sys.stderr)
        return 2
    if args.json:
        for item in traces:
            print(json.dumps(item, ensure_ascii=False))
        return 0
    if not traces:
        print("no spans in this export")
    for item in traces:
        print(f"trace {item['trace_id']}: {item['outcome']}")
        for span in item["spans"]:
            mark = "*" if span["root"] else " "
            print(f"  {mark} {span['name']}  [{span['kind']}, {span['convention']}]")
        triple = item.get("triple")
        if triple is not None:
            print(f"    query:   {triple['query']!r}")
            for n, chunk in enumerate(triple["context"]):
                print(f"    context[{n}]: {chunk[:200]!r}")
            if not triple["context"]:
                print("    context: (none)")
            print(f"    answer:  {triple['answer']!r}")
            print(f"    app:     {triple['metadata'].get('app')!r}")
            for field, where in (
                (triple["metadata"].get("otlp") or {}).get("looked_for", {}).items()
            ):
                print(f"    {field} not found; looked for {where}")
        print()
    return 0
