"""Every tracing stack's spans read into the right triple (issue 28): OTLP exports recorded from
the real instrumentations (``tests/data/otlp/README.md``), assembled offline and posted to a real
``serve`` with a real broker; Langfuse's route and Basic auth; OTLP's ``partial_success``; the
local root whose parent is remote; a rejected verdict that keeps what was mapped."""

from __future__ import annotations

import asyncio
import base64
import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.test_serve import queued, serving
from tests.test_serve import rabbitmq as rabbitmq  # the fixture
from veredito.producer.otlp import PROTOBUF, Span, TraceAssembler, assemble, decode

DATA = ROOT / "tests" / "data" / "otlp"
FIRST = "O prazo de arrependimento é de 7 dias a partir do recebimento do produto."
SECOND = "A multa por atraso é de 2% sobre o valor da parcela."
DOC_PRAZO = (
    "O prazo de arrependimento é de 7 dias a partir do recebimento do produto (art. 49 do CDC). "
    "O consumidor pode desistir da compra feita fora do estabelecimento."
)
DOC_MULTA = "A multa por atraso no pagamento é de 2% sobre o valor da parcela."
TOKEN = "tok-a-4c1b9e77d2f0"  # tests/test_serve.py's TOKENS: an unscoped one
SAC = "tok-sac-5d2e8a91c3"  # and the sac app's

# stack: (app, [(query, context, answer) of each question, in order])
EXPECTED: dict[str, tuple[str | None, list[tuple[str, list[str], str]]]] = {
    "openinference-langchain": ("rag-pt-openinference", [
        ("Qual o prazo para desistir da compra?", [DOC_PRAZO, DOC_MULTA], FIRST),
        ("Qual é a multa por atraso?", [DOC_MULTA], SECOND),
    ]),
    "openinference-remote-parent": ("rag-backend", [
        ("Qual o prazo para desistir da compra?", [DOC_PRAZO, DOC_MULTA], FIRST),
        ("Qual é a multa por atraso?", [DOC_MULTA], SECOND),
    ]),
    "openllmetry-langchain": ("rag-pt-openllmetry", [
        ("Qual o prazo para desistir da compra?", [DOC_PRAZO, DOC_MULTA], FIRST),
        ("Qual é a multa por atraso?", [DOC_MULTA], SECOND),
    ]),
    "openllmetry-decorators": ("rag-pt-openllmetry", [
        ("Qual o prazo para desistir da compra?", [DOC_PRAZO, DOC_MULTA], FIRST),
        ("Qual é a multa por atraso?", [DOC_MULTA], SECOND),
    ]),
    "langfuse-v3": (None, [
        ("Qual é o prazo de arrependimento para compras online?",
         ["O prazo de arrependimento é de 7 dias (art. 49 do CDC).",
          "A garantia legal para produtos duráveis é de 90 dias."], FIRST),
        ("Qual é a multa por atraso no pagamento?",
         ["A multa por atraso no pagamento é de 2% sobre o valor da parcela.",
          "O prazo de arrependimento é de 7 dias (art. 49 do CDC)."], SECOND),
    ]),
    "logfire-pydantic-ai": ("app-logfire-rag", [
        ("Qual o prazo para desistir da compra?",
         ["O prazo de arrependimento é de 7 dias (art. 49 do CDC)."], FIRST),
        ("Qual a multa por atraso?",
         ["A multa por atraso de pagamento é de 2% sobre o valor da parcela."], SECOND),
    ]),
}  # fmt: skip


def bodies(stack: str, kind: str = "traces") -> list[bytes]:
    return [p.read_bytes() for p in sorted((DATA / stack).glob(f"*-{kind}.pb"))]


def assembled(stack: str) -> list[Any]:
    assembler = TraceAssembler(quiet=0.0)
    done = []
    for body in bodies(stack):
        done += assembler.add_traces("t", decode(body, PROTOBUF))
    return done


@pytest.mark.parametrize("stack", sorted(EXPECTED))
def test_each_stack_reads_into_the_questions_context_and_answer(stack: str) -> None:
    app, questions = EXPECTED[stack]
    done = [d for d in assembled(stack) if d.triple is not None]
    got = [(d.triple["query"], d.triple["context"], d.triple["answer"]) for d in done]
    assert got == questions
    for d in done:
        assert d.triple["metadata"].get("app") == app
        assert "otlp" not in d.triple["metadata"]  # nothing missing


def test_genai_documents_without_text_take_the_system_message() -> None:
    """The GenAI conventions' retrieval documents are {id, score}: the text is where the app put
    it, in the system message of its chat call; the triple says so."""
    (first, second) = assembled("genai-openai-v2-span-content")
    assert first.triple["query"] == "Qual é o prazo para desistir de uma compra online?"
    assert first.triple["answer"] == FIRST
    (context,) = first.triple["context"]
    assert "O prazo de arrependimento é de 7 dias (art. 49 do CDC)" in context
    assert first.triple["metadata"]["otlp_context"] == "system_messages"
    assert second.triple["answer"] == SECOND


def test_a_retrievers_own_trace_is_not_judged_as_an_answer() -> None:
    """Found: the retriever's trace (no span around the retriever and the LLM) was judged with
    the retriever's output JSON as the answer: a false PRAZO_VALOR on a document's UUID."""
    done = assembled("openinference-separate")
    assert [d.skipped for d in done] == ["root_is_retriever", None, "root_is_retriever", None]
    for d in done:
        if d.triple is not None:
            assert d.triple["answer"] in (FIRST, SECOND)  # never a retriever's output
            assert not d.triple["answer"].lstrip().startswith("{")


def test_every_span_is_not_an_llm_call_in_openllmetry() -> None:
    """Found: every OpenLLMetry span carries gen_ai.operation.name, and each counted as an LLM."""
    from veredito.producer.otlp.assemble import _read

    spans = [s for body in bodies("openllmetry-langchain") for s in decode(body, PROTOBUF)]
    kinds = [_read(s).kind for s in spans if s.trace_id == spans[0].trace_id]
    assert all("gen_ai.operation.name" in s.attributes for s in spans)
    assert kinds.count("LLM") == 1 and kinds.count("RETRIEVER") == 1


def test_a_local_root_with_a_remote_parent_completes_its_trace_at_once() -> None:
    """Found: behind a traced gateway the root's parent never arrives, and the trace was dropped
    as incomplete after 30 s. The SDK marks the parent remote (flags 0x300)."""
    assembler = TraceAssembler(timeout=30)
    done = []
    for body in bodies("openinference-remote-parent"):
        done += assembler.add_traces("t", decode(body, PROTOBUF))
    assert len(done) == 2 and len(assembler) == 0


def test_a_local_root_without_the_flag_completes_after_a_quiet_spell() -> None:
    """An exporter that does not say the parent is remote (OTLP/JSON, older SDKs): a chain whose
    parent is not in the trace, with nothing new for ``quiet`` seconds, is the local root."""
    now = [0.0]
    assembler = TraceAssembler(timeout=30, quiet=2.0, clock=lambda: now[0])
    spans = [s for body in bodies("openinference-remote-parent") for s in decode(body, PROTOBUF)]
    for span in spans:
        span.flags = 0  # an exporter that says nothing of where the parent is
    assert assembler.add_traces("t", spans) == []
    now[0] = 1.0
    assert assembler.expire_traces() == (0, [])
    now[0] = 2.5
    dropped, done = assembler.expire_traces()
    assert dropped == 0 and len(done) == 2
    assert done[0][1].triple["query"] == "Qual o prazo para desistir da compra?"


def test_a_server_span_without_the_flag_is_a_local_root_after_a_quiet_spell() -> None:
    """Behind a gateway, with an exporter that says nothing of where a parent is, the app's
    entry is often its web framework's SERVER span (no RAG convention on it): it is the local
    root after the quiet spell, as a chain is (it was forgotten as incomplete after 30 s)."""
    now = [0.0]
    assembler = TraceAssembler(timeout=30, quiet=2.0, clock=lambda: now[0])
    spans = [s for body in bodies("genai-openai-v2-span-content") for s in decode(body, PROTOBUF)]
    first = [s for s in spans if s.trace_id == spans[0].trace_id]
    want = assemble(first).triple  # what the trace gives with its root present
    assert want is not None and want["query"].startswith("Qual é o prazo")
    for span in first:
        span.flags = 0
        if not span.parent_id.strip("0"):  # the app's root: a request handler under a gateway
            span.kind, span.parent_id = 2, "ab" * 8
    assert assembler.add_traces("t", first) == []
    now[0] = 2.5
    dropped, done = assembler.expire_traces()
    assert dropped == 0 and len(done) == 1
    got = done[0][1].triple
    assert [got[k] for k in ("query", "context", "answer")] == [
        want[k] for k in ("query", "context", "answer")
    ]


def test_a_slow_root_said_local_is_waited_for() -> None:
    """The root of a trace with a slow LLM call comes seconds after its first children: a chain
    among them whose parent the SDK says is local (flags 0x100) is not taken for the root."""
    now = [0.0]
    assembler = TraceAssembler(timeout=30, quiet=2.0, clock=lambda: now[0])
    spans = [s for body in bodies("openinference-langchain") for s in decode(body, PROTOBUF)]
    first = [s for s in spans if s.trace_id == spans[0].trace_id]
    *children, root = first  # the root is exported last
    assert all(s.flags == 0x100 for s in children)  # as the Python SDK sends them
    assert assembler.add_traces("t", children) == []
    now[0] = 10.0  # quiet for long: a chain among the children has no parent here
    assert assembler.expire_traces() == (0, [])
    (done,) = assembler.add_traces("t", [root])
    assert done.triple["answer"] == FIRST and len(done.triple["context"]) == 2


def test_chat_messages_in_input_values_give_the_question_not_the_json() -> None:
    root = Span("t1", "r", "", "agent", 1, {
        "openinference.span.kind": "AGENT",
        "input.value": json.dumps({"messages": [
            {"role": "system", "content": "Responda em português."},
            {"role": "user", "content": "Qual o prazo?"}]}),
        "input.mime_type": "application/json",
        "output.value": json.dumps({"role": "assistant", "content": "Sete dias."}),
        "output.mime_type": "application/json",
    })  # fmt: skip
    retriever = Span("t1", "c", "r", "busca", 0, {
        "openinference.span.kind": "RETRIEVER",
        "retrieval.documents.0.document.content": "O prazo é de sete dias.",
    })  # fmt: skip
    triple = assemble([retriever, root]).triple
    assert triple is not None
    assert (triple["query"], triple["answer"]) == ("Qual o prazo?", "Sete dias.")


def test_tools_that_retrieve_are_named_by_configuration() -> None:
    spans = [s for body in bodies("logfire-pydantic-ai") for s in decode(body, PROTOBUF)]
    first = [s for s in spans if s.trace_id == spans[0].trace_id]
    assert assemble(first).triple["context"]
    assert assemble(first, retrieval_tools=["buscar_*"]).triple["context"]
    other = assemble(first, retrieval_tools=["calculadora"]).triple
    assert other["context"] != assemble(first).triple["context"]  # not the tool's results


# -- through serve ------------------------------------------------------------------------------
def post(base: str, path: str, body: bytes, authorization: str) -> tuple[int, bytes, str]:
    request = urllib.request.Request(base + path, data=body, method="POST")
    request.add_header("Content-Type", PROTOBUF)
    request.add_header("Authorization", authorization)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read(), response.headers.get("Content-Type", "")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), exc.headers.get("Content-Type", "")


@pytest.mark.broker
def test_langfuse_posts_to_its_route_with_its_keys(rabbitmq: str) -> None:
    """A Langfuse user changes only the host: its OTLP route, its Basic public:secret."""
    keys = f"pk-lf-1234567890:sk-lf-abcdef-0123456789:{SAC}"
    basic = "Basic " + base64.b64encode(b"pk-lf-1234567890:sk-lf-abcdef-0123456789").decode()
    wrong = "Basic " + base64.b64encode(b"pk-lf-1234567890:sk-lf-nope-00000000000").decode()
    (body,) = bodies("langfuse-v3")
    with serving(rabbitmq, VEREDITO_LANGFUSE_KEYS=keys) as base:
        assert post(base, "/api/public/otel/v1/traces", body, wrong)[0] == 401
        status, answer, content_type = post(base, "/api/public/otel/v1/traces", body, basic)
        assert status == 200 and content_type == PROTOBUF and answer == b""
    envelopes = queued(rabbitmq)
    got = [(e["triple"]["query"], e["triple"]["answer"]) for e in envelopes]
    assert sorted(got) == sorted((q, a) for q, _, a in EXPECTED["langfuse-v3"][1])
    assert {e["triple"]["metadata"]["app"] for e in envelopes} == {"sac"}  # the token's app


@pytest.mark.broker
def test_spans_that_make_no_triple_are_told_in_partial_success(rabbitmq: str) -> None:
    """Found: the exporter was told 200 with an empty body while its traces were rejected."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceResponse,
    )

    retriever_only = bodies("openinference-separate")[0]  # a retriever's own trace
    with serving(rabbitmq) as base:
        status, answer, _ = post(base, "/v1/traces", retriever_only, f"Bearer {TOKEN}")
        response = ExportTraceServiceResponse()
        response.ParseFromString(answer)
        assert status == 200 and response.partial_success.rejected_spans == 1
        assert "not judged (root is retriever)" in response.partial_success.error_message
        # the same in OTLP/JSON; and a trace with no context, rejected, names what was missing
        orphan_llm = {"resourceSpans": [{"scopeSpans": [{"spans": [{
            "traceId": "5" * 32, "spanId": "6" * 16, "name": "chat",
            "attributes": [
                {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
                {"key": "gen_ai.input.messages", "value": {"stringValue": json.dumps(
                    [{"role": "user", "parts": [{"type": "text", "content": "Qual o prazo?"}]}])}},
                {"key": "gen_ai.output.messages", "value": {"stringValue": json.dumps(
                    [{"role": "assistant", "parts": [{"type": "text", "content": "7 dias."}]}])}},
            ]}]}]}]}  # fmt: skip
        request = urllib.request.Request(
            base + "/v1/traces", data=json.dumps(orphan_llm).encode(), method="POST"
        )
        request.add_header("Content-Type", "application/json")
        request.add_header("Authorization", f"Bearer {TOKEN}")
        with urllib.request.urlopen(request, timeout=30) as reply:
            said = json.loads(reply.read())
    assert said["partialSuccess"]["rejectedSpans"] == "1"
    message = said["partialSuccess"]["errorMessage"]
    assert "context" in message and "looked for" in message
    (envelope,) = queued(rabbitmq)  # the rejected trace still becomes a (rejected) verdict
    assert envelope["triple"]["query"] == "Qual o prazo?"
    assert (
        "gen_ai.retrieval.documents"
        in envelope["triple"]["metadata"]["otlp"]["looked_for"]["context"]
    )


@pytest.mark.broker
def test_a_service_behind_a_traced_gateway_gets_its_verdicts_at_once(rabbitmq: str) -> None:
    bodies_ = bodies("openinference-remote-parent")
    with serving(rabbitmq) as base:
        started = time.monotonic()
        for body in bodies_:
            assert post(base, "/v1/traces", body, f"Bearer {TOKEN}")[0] == 200
        deadline = started + 5
        envelopes: list[dict[str, Any]] = []
        while len(envelopes) < 2:
            assert time.monotonic() < deadline, "no triples within 5 s of the last span"
            envelopes += queued(rabbitmq)
            time.sleep(0.1)
    assert sorted(e["triple"]["answer"] for e in envelopes) == sorted([FIRST, SECOND])


def test_a_rejected_triple_keeps_what_was_mapped() -> None:
    """Found: the rejected verdict's input was null, so nobody could see what was mapped."""
    from veredito.worker.judges.rules import RulesJudge
    from veredito.worker.pipeline import Pipeline

    raw = {
        "id": "abc",
        "query": "Qual o prazo?",
        "context": [],
        "answer": "Sete dias.",
        "metadata": {"app": "sac", "otlp": {"looked_for": {"context": "retriever spans' docs"}}},
    }
    outcome = asyncio.run(Pipeline(RulesJudge()).evaluate({"triple": raw, "source": None}))
    verdict = outcome.verdict
    assert verdict.status == "rejected" and verdict.input is not None
    assert (verdict.input.query, verdict.input.answer) == ("Qual o prazo?", "Sete dias.")
    assert verdict.error is not None and "looked for retriever spans' docs" in verdict.error.message


# -- GenAI events on /v1/logs ---------------------------------------------------------------------
def test_genai_events_join_their_spans_and_a_trace_waits_for_them() -> None:
    """Found: with the content captured as events, the instrumentation exports to /v1/logs:
    404, and the spans alone made a trace rejected for a null query."""
    from veredito.producer.otlp.logs import decode_logs

    now = [0.0]
    assembler = TraceAssembler(event_wait=5.0, clock=lambda: now[0])
    (traces,) = bodies("genai-openai-v2-event-content")
    (logs,) = bodies("genai-openai-v2-event-content", "logs")
    assert assembler.add_traces("t", decode(traces, PROTOBUF)) == []  # held for the events
    events = decode_logs(logs, PROTOBUF)
    assert assembler.add_events("other-tenant", events) == []  # never another token's trace
    done = assembler.add_events("t", events)
    assert [d.triple["answer"] for d in done] == [FIRST, SECOND]
    assert done[0].triple["query"] == "Qual é o prazo para desistir de uma compra online?"
    assert "O prazo de arrependimento é de 7 dias" in done[0].triple["context"][0]
    # without its events, a held trace goes as it is once the wait is over
    assembler.add_traces("t2", decode(traces, PROTOBUF))
    now[0] = 4.0
    assert assembler.expire_traces()[1] == []
    now[0] = 5.5
    late = assembler.expire_traces()[1]
    assert [t for t, _ in late] == ["t2", "t2"] and all(d.missing for _, d in late)


@pytest.mark.broker
def test_logs_route_takes_genai_events_per_tenant(rabbitmq: str) -> None:
    (traces,) = bodies("genai-openai-v2-event-content")
    (logs,) = bodies("genai-openai-v2-event-content", "logs")
    with serving(rabbitmq) as base:
        assert post(base, "/v1/traces", traces, f"Bearer {TOKEN}")[0] == 200
        assert post(base, "/v1/logs", logs, f"Bearer {SAC}")[0] == 200  # another tenant's
        assert post(base, "/v1/logs", b"\x00garbage", f"Bearer {TOKEN}")[0] == 400
        assert post(base, "/v1/logs", logs, "Bearer nope-nope-nope-nope")[0] == 401
        assert queued(rabbitmq) == []  # still waiting for its own tenant's events
        status, answer, content_type = post(base, "/v1/logs", logs, f"Bearer {TOKEN}")
        assert status == 200 and content_type == PROTOBUF and answer == b""
        envelopes = queued(rabbitmq)
    assert sorted(e["triple"]["answer"] for e in envelopes) == sorted([FIRST, SECOND])
    assert all(e["triple"]["context"] for e in envelopes)


def test_genai_events_in_otlp_json_and_within_their_tenants_quota() -> None:
    from veredito.producer.otlp.logs import Event, decode_logs

    body = {"resourceLogs": [{"scopeLogs": [{"logRecords": [
        {"traceId": "a" * 32, "spanId": "b" * 16, "eventName": "gen_ai.user.message",
         "body": {"kvlistValue": {"values": [
             {"key": "content", "value": {"stringValue": "Qual o prazo?"}}]}}},
        {"traceId": "a" * 32, "spanId": "b" * 16, "eventName": "gen_ai.choice",
         "body": {"kvlistValue": {"values": [{"key": "message", "value": {"kvlistValue": {
             "values": [{"key": "content", "value": {"stringValue": "Sete dias."}}]}}}]}}},
        {"traceId": "a" * 32, "spanId": "b" * 16, "body": {"stringValue": "an app's log line"}},
    ]}]}]}  # fmt: skip
    events = decode_logs(json.dumps(body).encode(), "application/json")
    assert [e.name for e in events] == ["gen_ai.user.message", "gen_ai.choice"]  # no app logs
    chat = Span("a" * 32, "b" * 16, "", "chat", 0, {"gen_ai.operation.name": "chat"})
    from veredito.producer.otlp.logs import apply_events

    apply_events([chat], events)
    from veredito.producer.otlp import genai

    assert (genai.prompt(chat), genai.completion(chat)) == ("Qual o prazo?", "Sete dias.")
    # a tenant's events count against its own quota: they evict its traces, never another's
    assembler = TraceAssembler(max_spans=10)
    waiting = Span("c" * 32, "d" * 16, "e" * 16, "retrieve", 0, {})
    assembler.add_traces("a", [waiting])
    flood = [Event(f"{n:032x}", "f" * 16, "gen_ai.user.message", {}, {"content": "x"})
             for n in range(50)]  # fmt: skip
    assembler.add_events("b", flood)
    assert assembler.pending("a") == 1 and assembler.pending_spans("b") <= 10
    assert (
        assembler.dropped_by_tenant["b"]["evicted"] > 0 and "a" not in assembler.dropped_by_tenant
    )


def test_otlp_explain_says_what_each_trace_becomes(tmp_path: Path) -> None:
    import subprocess
    import sys

    separate = tmp_path / "separate.pb"
    separate.write_bytes(bodies("openinference-separate")[0] + b"")
    done = subprocess.run(
        [sys.executable, "-m", "veredito", "otlp", "explain", str(separate)],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "not judged: root is retriever" in done.stdout and "KeywordRetriever" in done.stdout
    chain = tmp_path / "chain.jsonl"  # OTLP/JSON, one export a line (the Collector's file)
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    lines = []
    for body in bodies("genai-openai-v2-span-content"):
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        exported = json_format.MessageToDict(request)
        for rs in exported["resourceSpans"]:  # protobuf JSON's base64 ids as OTLP/JSON's hex
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if span.get(key):
                            span[key] = base64.b64decode(span[key]).hex()
        lines.append(json.dumps(exported))
    chain.write_text("\n".join(lines))
    done = subprocess.run(
        [sys.executable, "-m", "veredito", "otlp", "explain", "--json", str(chain)],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    traces = [json.loads(line) for line in done.stdout.splitlines()]
    assert [t["outcome"] for t in traces] == ["queued", "queued"]
    assert traces[0]["triple"]["answer"] == FIRST
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    done = subprocess.run([sys.executable, "-m", "veredito", "otlp", "explain", str(bad)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2 and "not an OTLP trace export" in done.stderr
