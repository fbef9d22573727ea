"""OTLP in: spans and triples a second, per encoding, and the assembly beside the one before
issue 28.

    .venv/bin/python bench/otlp_ingest.py [--traces 3000] [--batch 50] [--clients 8]
        [--skip assembly,http-protobuf,http-json,grpc]

Distinct traces (``bench/corpus.py``'s triples, each its own context): an OpenInference chain
(root, a retriever with the three chunks, an LLM call with its messages, a parser: four spans,
about 4 KB), exported as OTLP protobuf and OTLP/JSON.

1. ``assembly``: the spans of every trace through ``TraceAssembler.add`` in one thread, batches
   of ``--batch`` traces, children before their root as SDKs send them; the same spans through
   the assembler of before issue 28 (the single module, loaded from git at 97b4927's parent),
   side by side, nine rounds taking turns (best and median); the decoded spans frozen out of
   the cyclic collector's sight (in ``serve`` each request's spans go with it; here all are
   alive at once). Then the same with the decoding of each request's body timed too, as
   ``serve`` does both (decoding sizes each span as it reads it: that cost moved there), for
   protobuf and for OTLP/JSON bodies.
2. ``http-protobuf``, ``http-json``, ``grpc``: ``veredito serve`` (one process, RabbitMQ) and
   ``--clients`` concurrent exporters posting ``--batch`` traces a request until all are sent;
   spans/s and triples/s from the first request to the queue holding every triple. With
   ``--before PYTHON TREE``, the two HTTP encodings through another checkout's ``serve`` too.

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.util
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.corpus import triples  # noqa: E402
from veredito.producer import topology  # noqa: E402
from veredito.producer.otlp import PROTOBUF, TraceAssembler, decode  # noqa: E402

TOKEN = "bench-token-2a7c9e4f1b"
BROKER = "amqp://guest:guest@127.0.0.1:5672//"
BEFORE = "97b4927"  # the package split, behaviour unchanged: the assembler before issue 28


def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def trace_json(n: int, t: dict[str, Any]) -> list[dict[str, Any]]:
    """The four spans of one trace, as OTLP/JSON spans, children first."""
    trace_id = f"{random.Random(n).getrandbits(128):032x}"
    root, retriever, llm, parser = (f"{n * 4 + k + 1:016x}" for k in range(4))
    base = 1_700_000_000_000_000_000 + n * 1_000_000

    def span(span_id: str, parent: str, name: str, start: int, attrs: list[Any]) -> dict[str, Any]:
        return {"traceId": trace_id, "spanId": span_id, "parentSpanId": parent, "name": name,
                "startTimeUnixNano": str(base + start), "endTimeUnixNano": str(base + start + 9),
                "attributes": attrs}  # fmt: skip

    docs = [
        _attr(f"retrieval.documents.{i}.document.content", c) for i, c in enumerate(t["context"])
    ]
    return [
        span(retriever, root, "KeywordRetriever", 1,
             [_attr("openinference.span.kind", "RETRIEVER"), _attr("input.value", t["query"]),
              *docs]),
        span(llm, root, "ChatOpenAI", 2, [
            _attr("openinference.span.kind", "LLM"),
            _attr("llm.input_messages.0.message.role", "system"),
            _attr("llm.input_messages.0.message.content", "\n".join(t["context"])),
            _attr("llm.input_messages.1.message.role", "user"),
            _attr("llm.input_messages.1.message.content", t["query"]),
            _attr("llm.output_messages.0.message.role", "assistant"),
            _attr("llm.output_messages.0.message.content", t["answer"]),
            _attr("llm.token_count.prompt", 512)]),
        span(parser, root, "StrOutputParser", 3,
             [_attr("openinference.span.kind", "CHAIN"), _attr("output.value", t["answer"])]),
        span(root, "", "RunnableSequence", 0, [
            _attr("openinference.span.kind", "CHAIN"), _attr("input.value", t["query"]),
            _attr("output.value", t["answer"])]),
    ]  # fmt: skip


def export_json(spans: list[dict[str, Any]]) -> bytes:
    resource = {"attributes": [_attr("service.name", "sac-bot")]}
    body = {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": spans}]}]}
    return json.dumps(body, ensure_ascii=False).encode()


def to_protobuf(json_body: bytes) -> bytes:
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    body = json.loads(json_body)
    for rs in body["resourceSpans"]:  # OTLP/JSON's hex ids are protobuf JSON's base64
        for ss in rs["scopeSpans"]:
            for sp in ss["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if sp.get(key):
                        import base64

                        sp[key] = base64.b64encode(bytes.fromhex(sp[key])).decode()
    return json_format.ParseDict(body, ExportTraceServiceRequest()).SerializeToString()


def batches(n: int, per: int) -> tuple[list[bytes], list[bytes], int]:
    """(JSON bodies, protobuf bodies, spans), ``per`` traces a body."""
    corpus = list(triples(n, seed=7))
    json_bodies, proto_bodies, spans = [], [], 0
    for start in range(0, n, per):
        part = [s for i in range(start, min(n, start + per)) for s in trace_json(i, corpus[i])]
        spans += len(part)
        body = export_json(part)
        json_bodies.append(body)
        proto_bodies.append(to_protobuf(body))
    return json_bodies, proto_bodies, spans


def old_assembler() -> Any:
    """``TraceAssembler`` of before issue 28, from git (for the side-by-side only)."""
    source = subprocess.run(["git", "show", f"{BEFORE}~1:producer/otlp.py"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout  # fmt: skip
    path = Path(tempfile.mkdtemp()) / "otlp_before.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("otlp_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["otlp_before"] = module
    spec.loader.exec_module(module)
    return module


def assembly(
    proto_bodies: list[bytes], json_bodies: list[bytes], spans: int, rounds: int = 9
) -> dict[str, Any]:
    old = old_assembler()
    decoded = {"now": [decode(b, PROTOBUF) for b in proto_bodies],
               "before": [old.decode(b, PROTOBUF) for b in proto_bodies]}  # fmt: skip
    makers = {"now": TraceAssembler, "before": old.TraceAssembler}
    decoders = {"now": decode, "before": old.decode}
    runs: dict[str, list[float]] = {}
    # the two take turns, round after round, so that what else the machine does falls on both
    for _ in range(rounds):
        for name in ("now", "before"):
            assembler = makers[name](max_traces=100_000, max_spans=1_000_000, max_bytes=1 << 34)
            # the decoded spans of every request, alive at once here, are out of the cyclic
            # collector's sight (as in serve, where each request's spans go with it)
            gc.collect()
            gc.freeze()
            started = time.perf_counter()
            made = 0
            for batch in decoded[name]:
                made += len(assembler.add("t", batch))
            runs.setdefault(name, []).append(time.perf_counter() - started)
            gc.unfreeze()
            assert made == spans // 4, f"{name}: {made} triples of {spans // 4} traces"
            # and with the decoding of the requests' bodies, as serve does both
            assembler = makers[name](max_traces=100_000, max_spans=1_000_000, max_bytes=1 << 34)
            decode_ = decoders[name]
            started = time.perf_counter()
            for body in proto_bodies:
                assembler.add("t", decode_(body, PROTOBUF))
            runs.setdefault(f"{name}, decoding too", []).append(time.perf_counter() - started)
            assembler = makers[name](max_traces=100_000, max_spans=1_000_000, max_bytes=1 << 34)
            started = time.perf_counter()
            for body in json_bodies:
                assembler.add("t", decode_(body, "application/json"))
            runs.setdefault(f"{name}, decoding JSON too", []).append(time.perf_counter() - started)
    out: dict[str, Any] = {"rounds": rounds}
    for name, seconds in runs.items():
        out[name] = {"spans_per_s best": round(spans / min(seconds)),
                     "spans_per_s median": round(spans / statistics.median(seconds))}  # fmt: skip
    for part in ("", ", decoding too", ", decoding JSON too"):
        now, before = out[f"now{part}"], out[f"before{part}"]
        out[f"now_over_before{part}"] = {
            kind: round(now[f"spans_per_s {kind}"] / before[f"spans_per_s {kind}"], 2)
            for kind in ("best", "median")
        }
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def purge() -> None:
    from kombu import Connection

    with Connection(BROKER) as conn:
        channel = conn.channel()
        with contextlib.suppress(*conn.channel_errors):
            channel.queue_purge(topology.TRIPLES_QUEUE)


def through_serve(kind: str, bodies: list[bytes], spans: int, traces: int, clients: int,
                  python: str = sys.executable, cwd: Path = ROOT) -> dict[str, Any]:  # fmt: skip
    import urllib.request

    purge()
    port, grpc_port = free_port(), free_port()
    env = {
        **os.environ,
        "VEREDITO_BROKER_URL": BROKER,
        "VEREDITO_INGEST_TOKENS": TOKEN,
        "VEREDITO_INGEST_MAX_BACKLOG": str(traces * 2),
        "VEREDITO_LOG_LEVEL": "WARNING",
    }
    grpc_args = ["--otlp-grpc-port", str(grpc_port)] if kind == "grpc" else []
    process = subprocess.Popen(
        [python, "-m", "veredito", "serve", "--port", str(port), *grpc_args],
        env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert process.stdout is not None and "listening" in process.stdout.readline()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:  # ready once it has looked at the queue; then the clock starts
        try:
            with urllib.request.urlopen(f"{base}/readyz", timeout=5) as ready:
                if ready.status == 200:
                    break
        except OSError:
            pass
        assert time.monotonic() < deadline, "serve never became ready"
        time.sleep(0.1)
    content_type = "application/json" if kind == "http-json" else PROTOBUF

    def post(body: bytes) -> None:
        if kind == "grpc":
            import grpc

            with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
                call = channel.unary_unary(
                    "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                    request_serializer=None, response_deserializer=None,
                )  # fmt: skip
                call(body, metadata=[("authorization", f"Bearer {TOKEN}")], timeout=60)
            return
        request = urllib.request.Request(f"{base}/v1/traces", data=body, method="POST")
        request.add_header("Content-Type", content_type)
        request.add_header("Authorization", f"Bearer {TOKEN}")
        with urllib.request.urlopen(request, timeout=60) as response:
            assert response.status == 200

    try:
        started = time.perf_counter()
        with ThreadPoolExecutor(clients) as pool:
            list(pool.map(post, bodies))
        while topology.queue_depth(BROKER) < traces:
            assert time.perf_counter() - started < 600, "the triples never all arrived"
            time.sleep(0.05)
        seconds = time.perf_counter() - started
    finally:
        process.terminate()
        process.wait(timeout=60)
        purge()
    return {"spans_per_s": round(spans / seconds), "triples_per_s": round(traces / seconds),
            "seconds": round(seconds, 2)}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=3000)
    parser.add_argument("--batch", type=int, default=50, help="traces an export request")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--skip", default="", help="comma-separated parts to leave out")
    parser.add_argument(
        "--before",
        nargs=2,
        metavar=("PYTHON", "TREE"),
        help="also run http-protobuf and http-json through the serve of another checkout (its "
        "Python and its folder: the tree before issue 28), side by side",
    )
    args = parser.parse_args()
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    json_bodies, proto_bodies, spans = batches(args.traces, args.batch)
    result: dict[str, Any] = {
        "traces": args.traces, "spans": spans, "batch": args.batch, "clients": args.clients,
        "protobuf_bytes_a_trace": round(sum(map(len, proto_bodies)) / args.traces),
    }  # fmt: skip
    if "assembly" not in skip:
        result["assembly"] = assembly(proto_bodies, json_bodies, spans)
    for kind, bodies in (("http-protobuf", proto_bodies), ("http-json", json_bodies),
                         ("grpc", proto_bodies)):  # fmt: skip
        if kind not in skip:
            result[kind] = through_serve(kind, bodies, spans, args.traces, args.clients)
        if args.before and kind != "grpc" and kind not in skip:
            python, tree = args.before
            result[f"{kind} before"] = through_serve(
                kind, bodies, spans, args.traces, args.clients, python, Path(tree)
            )
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
