"""The OTLP trace assembler on its own (no server): buffers per (tenant, trace id), per-tenant
quotas that evict only that tenant's oldest traces, drops counted per reason and per tenant, one
summary WARNING per log interval, expiry per tenant, and a 200 000-span body."""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

import pytest

from veredito.producer.otlp import OTLPError, Span, TraceAssembler, decode, decode_iter, span_size

A, B = "tenant-a-opaque", "tenant-b-opaque"
TRACE = "0af7651916cd43dd8448eb211c80319c"
ROOT_ID = "b7ad6b7169203331"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def root(trace_id: str = TRACE, **attributes: Any) -> Span:
    return Span(trace_id, ROOT_ID, "", "rag", 1, {"openinference.span.kind": "CHAIN", **attributes})


def retriever(doc: str, trace_id: str = TRACE, service: str = "app", n: int = 0) -> Span:
    return Span(
        trace_id,
        f"r{n:015d}",
        ROOT_ID,
        "retrieve",
        2 + n,
        {
            "openinference.span.kind": "RETRIEVER",
            "retrieval.documents.0.document.content": doc,
        },
        service=service,
    )


def child(trace_id: str, n: int = 0, **attributes: Any) -> Span:
    return Span(trace_id, f"c{n:015d}", ROOT_ID, "step", 2 + n, dict(attributes))


def rooted(service: str, answer: str, trace_id: str = TRACE) -> Span:
    span = root(trace_id, **{"input.value": "Q?", "output.value": answer})
    span.service = service
    return span


# -- tenants never meet ----------------------------------------------------------------------


def test_a_trace_id_shared_by_two_tenants_makes_two_separate_triples() -> None:
    assembler = TraceAssembler()
    assert assembler.add(A, [retriever("A's secret document", service="app-a")]) == []
    # B posts a root with A's trace id: B's triple has only B's spans
    [b_triple] = assembler.add(B, [rooted("app-b", "B's answer")])
    assert b_triple["context"] == []
    assert b_triple["answer"] == "B's answer" and b_triple["metadata"]["app"] == "app-b"
    assert "A's secret document" not in json.dumps(b_triple)
    assert assembler.pending(A) == 1 and assembler.pending(B) == 0 and len(assembler) == 1
    # A's own root completes A's trace with A's document
    [a_triple] = assembler.add(A, [rooted("app-a", "A's answer")])
    assert a_triple["id"] == TRACE and a_triple["context"] == ["A's secret document"]
    assert a_triple["answer"] == "A's answer" and a_triple["metadata"]["app"] == "app-a"
    assert len(assembler) == 0 and assembler.pending_spans() == 0 and assembler.pending_bytes() == 0


def test_b_cannot_inject_spans_into_a_trace_of_a() -> None:
    assembler = TraceAssembler()
    assembler.add(B, [retriever("B's injected document")])
    [a_triple] = assembler.add(A, [retriever("A's document"), rooted("app-a", "A.")])
    assert a_triple["context"] == ["A's document"]
    assert assembler.pending(B) == 1


def test_an_eviction_flood_by_one_tenant_leaves_the_others_traces_alone() -> None:
    assembler = TraceAssembler(max_traces=1000)
    assembler.add(A, [retriever("doc 1", n=0), retriever("doc 2", n=1)])
    flood = [child(f"{i:032x}") for i in range(50_000)]
    assert assembler.add(B, flood) == []
    assert assembler.pending(A) == 1 and assembler.pending(B) == 1000
    assert assembler.dropped["evicted"] == 49_000
    assert assembler.dropped_by_tenant[B]["evicted"] == 49_000
    assert A not in assembler.dropped_by_tenant
    [a_triple] = assembler.add(A, [rooted("app-a", "A.")])
    assert a_triple["context"] == ["doc 1", "doc 2"] and a_triple["answer"] == "A."


# -- quotas ------------------------------------------------------------------------------------


def test_the_trace_quota_evicts_the_tenants_oldest_trace() -> None:
    assembler = TraceAssembler(max_traces=2)
    for trace_id in ("t1", "t2", "t3"):
        assembler.add(A, [retriever(f"doc of {trace_id}", trace_id)])
    assert assembler.pending(A) == 2 and assembler.dropped_by_tenant[A]["evicted"] == 1
    [t2] = assembler.add(A, [root("t2")])
    assert t2["context"] == ["doc of t2"]
    # t1 went whole: a late root finds nothing of it (it makes a triple of itself alone)
    [t1] = assembler.add(A, [root("t1")])
    assert t1["context"] == [] and assembler.pending(A) == 1


def test_the_per_trace_span_cap_drops_and_counts_but_takes_the_root() -> None:
    assembler = TraceAssembler(max_spans_per_trace=5)
    spans = [retriever(f"doc {n}", n=n) for n in range(8)]
    assert assembler.add(A, spans) == []
    assert assembler.pending_spans(A) == 5 and assembler.dropped["oversize"] == 3
    [triple] = assembler.add(A, [rooted("app", "A.")])  # beyond the cap, yet the root comes in
    assert triple["context"] == [f"doc {n}" for n in range(5)]
    assert assembler.dropped_by_tenant[A] == {"oversize": 3, "evicted": 0, "incomplete": 0}
    assert assembler.dropped["evicted"] == 0


def test_the_span_quota_evicts_whole_old_traces() -> None:
    assembler = TraceAssembler(max_spans=10)
    for t in range(3):
        assembler.add(A, [child(f"t{t}", n) for n in range(4)])
    # 12 spans > 10: t0 (4 spans) went whole, t1 and t2 stay whole
    assert assembler.pending(A) == 2 and assembler.pending_spans(A) == 8
    assert assembler.dropped["evicted"] == 1 and assembler.dropped["oversize"] == 0


def test_the_byte_quota_evicts_old_traces_and_a_span_too_big_alone_is_dropped() -> None:
    span = child("t0", text="x" * 1000)
    size = span_size(span)
    assert 1200 <= size < 1400  # 200 per span, 64 per attribute, the lengths
    assembler = TraceAssembler(max_bytes=3 * size)
    for t in range(4):
        assembler.add(A, [child(f"t{t}", text="x" * 1000)])
    assert assembler.pending(A) == 3 and assembler.pending_bytes(A) == 3 * size
    assert assembler.dropped["evicted"] == 1
    assembler.add(A, [child("huge", text="x" * (3 * size))])
    assert assembler.dropped["oversize"] == 1 and assembler.pending(A) == 3
    assert assembler.pending_bytes() == 3 * size


def test_a_trace_bigger_than_the_quota_keeps_its_first_spans() -> None:
    assembler = TraceAssembler(max_spans=10, max_spans_per_trace=100)
    assembler.add(A, [child("small")])
    assembler.add(A, [child("big", n) for n in range(20)])
    # "big" pushed out the older "small", then kept 10 spans and dropped the other 10
    assert assembler.pending(A) == 1 and assembler.pending_spans(A) == 10
    assert assembler.dropped["evicted"] == 1 and assembler.dropped["oversize"] == 10
    # a new trace then pushes out "big" whole
    assembler.add(A, [child("next")])
    assert assembler.pending(A) == 1 and assembler.dropped["evicted"] == 2
    [triple] = assembler.add(A, [root("next")])
    assert triple["id"] == "next"


def test_span_size_walks_nested_values() -> None:
    flat = Span("t", "s", "", "n", 0, {"k": "v"})
    nested = Span("t", "s", "", "n", 0, {"k": ["abc", {"key": "value", "deep": [["xy"]]}]})
    assert span_size(flat) == 200 + 1 + 1 + 1 + 64 + 1 + 1
    # the list's 2 items, the map's 2 entries, the 2 nested lists' 1 item each: 6 items
    assert span_size(nested) == 200 + 3 + 64 + 1 + 6 * 64 + 3 + 3 + 5 + 4 + 2


def test_protobuf_decoding_sizes_each_span_as_span_size_does() -> None:
    """Decoding sizes a protobuf span as it reads it (no second walk at buffering): the same
    figure span_size gives, for text, numbers, bytes, nested lists and maps, empty text, and a
    key said twice (kept once, then sized at buffering)."""
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    def kv(key: str, value: dict[str, Any]) -> dict[str, Any]:
        return {"key": key, "value": value}

    attributes = [
        kv("input.value", {"stringValue": "Qual o prazo? ção"}),
        kv("empty", {"stringValue": ""}),
        kv("llm.token_count.prompt", {"intValue": "512"}),
        kv("ratio", {"doubleValue": 0.5}),
        kv("ok", {"boolValue": True}),
        kv("raw", {"bytesValue": "AAEC"}),
        kv("none", {}),
        kv("list", {"arrayValue": {"values": [{"stringValue": "abc"}, {"arrayValue": {
            "values": [{"stringValue": "xy"}]}}]}}),
        kv("map", {"kvlistValue": {"values": [kv("key", {"stringValue": "value"})]}}),
    ]  # fmt: skip
    span = {"traceId": "AAECAwQFBgcICQoLDA0ODw==", "spanId": "AAECAwQFBgc=", "name": "n",
            "parentSpanId": "BwYFBAMCAQA="}  # fmt: skip
    spans = [
        {**span, "attributes": attributes},
        {**span, "attributes": [*attributes, kv("ok", {"boolValue": False})]},
    ]
    resource = {"attributes": [kv("service.name", {"stringValue": "sac-bot"})]}
    body = {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": spans}]}]}
    data = json_format.ParseDict(body, ExportTraceServiceRequest()).SerializeToString()
    once, twice = decode(data, "application/x-protobuf")
    assert once.attributes["raw"] == "000102" and once.attributes["list"] == ["abc", ["xy"]]
    assert once.size == span_size(once) > 200
    assert twice.size == 0 and span_size(twice) == span_size(once)
    assembler = TraceAssembler()
    assembler.add(A, [once])  # a child: buffered, counted at the size decoding made
    assert assembler.pending_bytes(A) == span_size(once)
    # OTLP/JSON: the same (its ids in hex), a key said twice sized at buffering too
    for sp in spans:
        sp.update(traceId="000102030405060708090a0b0c0d0e0f", spanId="0001020304050607",
                  parentSpanId="0706050403020100")  # fmt: skip
    once, twice = decode(json.dumps(body).encode(), "application/json")
    assert once.attributes["list"] == ["abc", ["xy"]] and once.attributes["ratio"] == 0.5
    assert once.attributes["raw"] == "000102"  # base64 in JSON, hex as from protobuf
    assert once.size == span_size(once) > 200
    assert twice.size == 0 and span_size(twice) == span_size(once)


# -- a trace's life ----------------------------------------------------------------------------


def test_a_root_completes_at_the_end_of_the_call_with_the_children_after_it() -> None:
    assembler = TraceAssembler()
    [triple] = assembler.add(A, [rooted("app", "A."), retriever("later doc")])
    assert triple["context"] == ["later doc"] and len(assembler) == 0


def test_expiry_is_per_tenant_and_counted() -> None:
    clock = FakeClock()
    assembler = TraceAssembler(timeout=30, clock=clock, log_interval=0)
    assembler.add(A, [child("ta")])
    clock.now += 20
    assembler.add(B, [child("tb")])
    clock.now += 5
    assembler.add(A, [child("ta", 1)])  # more spans do not postpone the first span's deadline
    clock.now += 5  # ta: 30 s since its first span
    assert assembler.expire() == 1
    assert assembler.pending(A) == 0 and assembler.pending(B) == 1
    assert (
        assembler.dropped_by_tenant[A]["incomplete"] == 1 and B not in assembler.dropped_by_tenant
    )
    assert assembler.expire() == 0
    clock.now += 20
    assert assembler.expire() == 1 and len(assembler) == 0
    assert assembler.dropped["incomplete"] == 2 and assembler.pending_spans() == 0


# -- logging -----------------------------------------------------------------------------------


def test_drops_are_logged_once_per_interval_without_tenant_or_trace(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    assembler = TraceAssembler(max_traces=10, timeout=30, log_interval=10, clock=clock)
    caplog.set_level(logging.INFO, logger="veredito.producer.otlp")
    assembler.add(B, [child(f"flood{i:027d}") for i in range(1000)])
    assembler.add(B, [child(f"more{i:028d}") for i in range(500)])
    clock.now += 5
    assembler.expire()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1  # 1490 evictions, one line
    assert "990 traces evicted" in warnings[0].getMessage()
    clock.now += 5  # the interval is over: what came since is summed up in one more line
    assembler.expire()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    message = warnings[1].getMessage()
    assert "500 traces evicted" in message and "0 traces incomplete" in message
    assert "in 1 tenant(s)" in message and "pending now: 10 traces, 10 spans" in message
    clock.now += 60
    assert assembler.expire() == 10
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 3
    assert "10 traces incomplete" in caplog.records[-1].getMessage()
    for record in caplog.records:
        text = record.getMessage()
        assert B not in text and "flood" not in text and "more0" not in text
    clock.now += 60
    assembler.expire()  # nothing dropped since: no line
    assert len(caplog.records) == 3


def test_a_line_per_trace_only_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    assembler = TraceAssembler(max_traces=1, log_interval=3600)
    caplog.set_level(logging.DEBUG, logger="veredito.producer.otlp")
    assembler.add(A, [child("t1"), child("t2"), child("t3")])
    debug = [r for r in caplog.records if r.levelno == logging.DEBUG]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(debug) == 2 and "t1" in debug[0].getMessage()
    assert len(warnings) == 1 and A not in warnings[0].getMessage()


# -- size and threads ---------------------------------------------------------------------------


def test_a_200_000_span_body_is_bounded_by_the_tenants_quotas() -> None:
    assembler = TraceAssembler()
    spans = [child(f"{i // 10:032x}", i % 10) for i in range(200_000)]  # 20 000 traces
    assert assembler.add(A, spans) == []
    assert assembler.pending_spans(A) <= 50_000 and assembler.pending(A) <= 10_000
    assert assembler.pending_spans(A) + 10 * assembler.dropped["evicted"] == 200_000
    distinct = TraceAssembler(max_spans=20_000)
    assert distinct.add(B, [child(f"{i:032x}") for i in range(200_000)]) == []
    assert distinct.pending(B) == 10_000 and distinct.dropped["evicted"] == 190_000


def test_adds_from_several_threads_keep_the_books_straight() -> None:
    assembler = TraceAssembler(max_traces=1000)
    triples: list[dict[str, Any]] = []

    def post(tenant: str) -> None:
        for t in range(300):
            trace_id = f"{tenant}-{t}"
            assembler.add(tenant, [child(trace_id)])
            if t % 2:
                triples.extend(assembler.add(tenant, [root(trace_id)]))

    threads = [threading.Thread(target=post, args=(f"tenant{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(triples) == 4 * 150
    assert all(triple["id"].endswith(("1", "3", "5", "7", "9")) for triple in triples)
    assert len(assembler) == 4 * 150 and assembler.pending_spans() == 4 * 150
    assert all(assembler.pending(f"tenant{n}") == 150 for n in range(4))
    assert sum(assembler.dropped.values()) == 0


def test_decode_iter_yields_what_decode_returns() -> None:
    body = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": "app"}}]
                },
                "scopeSpans": [
                    {
                        "spans": [
                            {"traceId": "AB", "spanId": "01", "name": "root"},
                            {"traceId": "AB", "spanId": "02", "parentSpanId": "01"},
                        ]
                    }
                ],
            }
        ]
    }
    data = json.dumps(body).encode()
    assert list(decode_iter(data, "application/json")) == decode(data, "application/json")
    [triple] = TraceAssembler().add(A, decode_iter(data, "application/json"))
    assert triple["id"] == "ab" and triple["metadata"]["app"] == "app"


def test_a_json_bytes_value_that_is_not_base64_is_named() -> None:
    span = {"traceId": "000102030405060708090a0b0c0d0e0f", "spanId": "0001020304050607",
            "name": "n", "attributes": [{"key": "raw", "value": {"bytesValue": "not base64!"}}]}  # fmt: skip
    body = {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}
    with pytest.raises(OTLPError, match="bytesValue is not base64"):
        decode(json.dumps(body).encode(), "application/json")


@pytest.mark.parametrize(("kind", "want"), [(2, 2), ("SPAN_KIND_SERVER", 2), (5, 5),
                                            ("SPAN_KIND_CONSUMER", 5), (None, 0), ("odd", 0)])  # fmt: skip
def test_the_span_kind_is_read_from_otlp_json(kind: Any, want: int) -> None:
    span = {"traceId": "000102030405060708090a0b0c0d0e0f", "spanId": "0001020304050607",
            "name": "POST /ask", **({"kind": kind} if kind is not None else {})}  # fmt: skip
    body = {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}
    (decoded,) = decode(json.dumps(body).encode(), "application/json")
    assert decoded.kind == want
