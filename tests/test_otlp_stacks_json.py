"""Both OTLP/HTTP encodings for every tracing stack (issue 28): Python's OTLP exporters send only
protobuf, so each export recorded from the real instrumentations (``tests/data/otlp``) is also
posted as OTLP/JSON — the same request, hex trace and span ids, enums as integers, as that encoding
says — to a real ``serve`` (Langfuse's to its own route with its Basic auth; the GenAI events to
``/v1/logs``), and a real worker judges what each encoding queued. Each expected question gets
exactly one verdict per encoding, the JSON one identical to the protobuf one, and both are what
the recorded app asked, retrieved and received."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, require_service
from tests.test_broker_e2e import BROKERS, reset_broker, running_worker
from tests.test_otlp_conventions import EXPECTED as RECORDED
from tests.test_otlp_conventions import FIRST, SAC, SECOND, TOKEN
from tests.test_serve import call, serving
from veredito.producer import topology
from veredito.producer.otlp import PROTOBUF

DATA = ROOT / "tests" / "data" / "otlp"
FOLDERS = sorted(p.name for p in DATA.iterdir() if p.is_dir())
RABBITMQ = BROKERS["rabbitmq"][0]
PUBLIC, SECRET = "pk-lf-1234567890", "sk-lf-abcdef-0123456789"
LANGFUSE = "/api/public/otel/v1/traces"

# The GenAI conventions' documents are {id, score}: the context is the chat call's system message.
GENAI_SYSTEM = "Responda em português usando apenas os documentos:\n"
GENAI = ("rag-genai-demo", [
    ("Qual é o prazo para desistir de uma compra online?",
     [GENAI_SYSTEM + "[cdc-art49] O prazo de arrependimento é de 7 dias (art. 49 do CDC), "
      "contados do recebimento do produto."], FIRST),
    ("Qual a multa por atraso no pagamento?",
     [GENAI_SYSTEM + "[contrato-multa] Em caso de atraso no pagamento, incide multa de 2% sobre "
      "o valor da parcela."], SECOND),
])  # fmt: skip
# No span around the retriever and the LLM: the retrievers' own traces are not judged, the LLM's
# are, with its system message as the context (docs/ingestion.md).
SEPARATE_SYSTEM = "Você é um assistente jurídico. Responda usando apenas o contexto.\n\nContexto:\n"
SEPARATE = ("rag-pt-openinference", [
    ("Qual o prazo para desistir da compra?",
     [SEPARATE_SYSTEM + "[0] " + RECORDED["openinference-langchain"][1][0][1][0] + "\n\n[1] "
      + RECORDED["openinference-langchain"][1][0][1][1]], FIRST),
    ("Qual é a multa por atraso?",
     [SEPARATE_SYSTEM + "[0] " + RECORDED["openinference-langchain"][1][1][1][0]], SECOND),
])  # fmt: skip
EXPECTED: dict[str, tuple[str | None, list[tuple[str, list[str], str]]]] = {
    **RECORDED,
    "langfuse-v3": ("sac", RECORDED["langfuse-v3"][1]),  # no service.name: the token's app
    "genai-openai-v2-span-content": GENAI,
    "genai-openai-v2-event-content": GENAI,
    "openinference-separate": SEPARATE,
}
NOT_JUDGED = {"openinference-separate": 2}  # the retrievers' own traces


def test_every_recorded_folder_has_its_expectations() -> None:
    assert sorted(EXPECTED) == FOLDERS  # a folder recorded later is not silently left out


def exports(folder: str) -> list[tuple[str, bytes]]:
    """The folder's recorded request bodies in the order they were sent: (traces|logs, body)."""
    found = sorted((DATA / folder).glob("*.pb"))
    return [(re.sub(r"^\d+-|\.pb$", "", p.name), p.read_bytes()) for p in found]


def _hex_ids(value: Any) -> Any:
    """Protobuf JSON's base64 ids as OTLP/JSON's hex, everywhere (spans, links, log records)."""
    if isinstance(value, list):
        return [_hex_ids(v) for v in value]
    if not isinstance(value, dict):
        return value
    return {
        key: base64.b64decode(item).hex()
        if key in ("traceId", "spanId", "parentSpanId") and isinstance(item, str)
        else _hex_ids(item)
        for key, item in value.items()
    }


def otlp_json(kind: str, body: bytes) -> bytes:
    """A recorded protobuf export as the same request in OTLP/JSON."""
    from google.protobuf import json_format
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest() if kind == "traces" else ExportLogsServiceRequest()
    request.ParseFromString(body)
    converted = _hex_ids(json_format.MessageToDict(request, use_integers_for_enums=True))
    return json.dumps(converted, ensure_ascii=False).encode()


def test_the_json_bodies_are_otlp_json() -> None:
    """What the test posts is the encoding's own: hex ids, lowerCamelCase, integer enums."""
    spans = [
        json.loads(otlp_json(kind, body))["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
        for kind, body in exports("openinference-remote-parent")
    ]
    for span in spans:
        assert re.fullmatch(r"[0-9a-f]{32}", span["traceId"])
        assert re.fullmatch(r"[0-9a-f]{16}", span["spanId"])
        assert isinstance(span["kind"], int) and "startTimeUnixNano" in span
    roots = [s for s in spans if s["flags"] & 0x300 == 0x300]  # their parent remote, said so
    assert len(roots) == 2 and all(re.fullmatch(r"[0-9a-f]{16}", s["parentSpanId"]) for s in roots)
    (_, logs) = exports("genai-openai-v2-event-content")[1]
    record = json.loads(otlp_json("logs", logs))["resourceLogs"][0]["scopeLogs"][0]["logRecords"]
    assert re.fullmatch(r"[0-9a-f]{32}", record[0]["traceId"])
    assert record[0]["eventName"] == "gen_ai.client.inference.operation.details"


def post(base: str, path: str, body: bytes, content_type: str, auth: str) -> tuple[int, bytes, str]:
    request = urllib.request.Request(base + path, data=body, method="POST")
    request.add_header("Content-Type", content_type)
    request.add_header("Authorization", auth)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read(), response.headers.get("Content-Type", "")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), exc.headers.get("Content-Type", "")


def traces_counted(base: str) -> dict[str, float]:
    """serve's ``veredito_ingest_traces_total`` by result, and the traces still pending."""
    text = call(base, "GET", "/metrics", token=None)[1]
    found = {
        m[1]: float(m[2])
        for m in re.finditer(r'^veredito_ingest_traces_total\{result="(\w+)"\} (\S+)$', text, re.M)
    }
    pending = re.search(r'^veredito_ingest_otlp_pending\{unit="traces"\} (\S+)$', text, re.M)
    assert pending is not None, text[-2000:]
    found["pending"] = float(pending[1])
    return found


def send(base: str, folder: str, content_type: str) -> list[bytes]:
    """Post the folder's exports in one encoding, as its stack would; the traces' replies."""
    langfuse = folder.startswith("langfuse")
    traces_path = LANGFUSE if langfuse else "/v1/traces"
    auth = (
        "Basic " + base64.b64encode(f"{PUBLIC}:{SECRET}".encode()).decode()
        if langfuse
        else f"Bearer {TOKEN}"
    )
    replies = []
    for kind, body in exports(folder):
        data = body if content_type == PROTOBUF else otlp_json(kind, body)
        path = traces_path if kind == "traces" else "/v1/logs"
        status, reply, reply_type = post(base, path, data, content_type, auth)
        assert status == 200, (path, status, reply[:500])
        assert reply_type == content_type  # the reply in the request's encoding
        if kind == "traces":
            replies.append(reply)
    return replies


def judged(count: int, out: Path, env: dict[str, str]) -> list[dict[str, Any]]:
    """The next ``count`` verdicts off the results queue (a worker is running)."""
    done = subprocess.run(
        [sys.executable, "-m", "veredito", "results", "--out", str(out), "--limit", str(count),
         "--idle-timeout", "60"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in out.read_text().splitlines()]


def triples(verdicts: list[dict[str, Any]]) -> dict[str, tuple[str, list[str], str, Any]]:
    """Each verdict's trace id: (query, context, answer, app); an id twice is an error."""
    found = {}
    for verdict in verdicts:
        assert verdict["status"] == "ok", verdict.get("error")
        assert verdict["id"] not in found, f"two verdicts for trace {verdict['id']}"
        given = verdict["input"]
        found[verdict["id"]] = (given["query"], given["context"], given["answer"],
                                verdict["metadata"].get("app"))  # fmt: skip
    return found


@pytest.fixture
def broker() -> Any:
    require_service(5672, "RabbitMQ")
    reset_broker(RABBITMQ)
    yield RABBITMQ
    reset_broker(RABBITMQ)


@pytest.mark.broker
@pytest.mark.parametrize("folder", FOLDERS)
def test_a_stacks_export_in_otlp_json_gives_the_verdicts_protobuf_gives(
    folder: str, broker: str, tmp_path: Path
) -> None:
    app, questions = EXPECTED[folder]
    count, not_judged = len(questions), NOT_JUDGED.get(folder, 0)
    worker_env = {**os.environ, "VEREDITO_BROKER_URL": broker, "VEREDITO_JUDGE": "rules"}
    keys = f"{PUBLIC}:{SECRET}:{SAC}"
    with serving(broker, VEREDITO_LANGFUSE_KEYS=keys) as base, running_worker(worker_env, 2):
        by_encoding = {}
        for n, content_type in enumerate((PROTOBUF, "application/json"), 1):
            replies = send(base, folder, content_type)
            # every trace was assembled as its root (or its events) came: none is left waiting,
            # so no verdict is still to come beyond those counted
            counted = traces_counted(base)
            assert counted.get("complete") == n * count, counted
            assert counted.get("not_judged", 0.0) == n * not_judged, counted
            assert counted["pending"] == 0 and not counted.get("incomplete"), counted
            if content_type != PROTOBUF and not_judged:  # the exporter hears of them, in JSON
                said = [json.loads(r)["partialSuccess"] for r in replies if r != b"{}"]
                assert [s["rejectedSpans"] for s in said] == ["1"] * not_judged
                assert all("not judged (root is retriever)" in s["errorMessage"] for s in said)
            verdicts = judged(count, tmp_path / f"{n}.jsonl", worker_env)
            by_encoding[content_type] = triples(verdicts)
        assert topology.queue_depth(broker) == 0
    protobuf, otlp_json_ = by_encoding[PROTOBUF], by_encoding["application/json"]
    assert otlp_json_ == protobuf  # the same traces, the same triples
    got = sorted(otlp_json_.values())
    assert got == sorted((q, c, a, app) for q, c, a in questions)
    for query, context, answer, _ in got:  # never a retriever's output as the answer
        assert answer in (FIRST, SECOND) and not answer.lstrip().startswith(("{", "["))
        assert query and context
