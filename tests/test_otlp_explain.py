"""``veredito otlp explain FILE…`` (issue 28): gzip-compressed bodies, OTLP logs exports joined to
their traces as ``/v1/logs`` joins them, ``metadata.otlp_context`` printed, the limits ``serve``
has taken from the settings, and bad input named by file (and line) with exit code 2. Read from
the exports recorded from the real instrumentations (``tests/data/otlp``)."""

from __future__ import annotations

import base64
import gzip
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from veredito.cli import main

DATA = ROOT / "tests" / "data" / "otlp"
EVENTS = DATA / "genai-openai-v2-event-content"
FIRST = "O prazo de arrependimento é de 7 dias a partir do recebimento do produto."
SECOND = "A multa por atraso é de 2% sobre o valor da parcela."
GENAI_FIRST = (
    "Qual é o prazo para desistir de uma compra online?",
    [
        "Responda em português usando apenas os documentos:\n[cdc-art49] O prazo de "
        "arrependimento é de 7 dias (art. 49 do CDC), contados do recebimento do produto."
    ],
    FIRST,
)


def explain(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    code = main(["otlp", "explain", *(str(a) for a in argv)])
    out, err = capsys.readouterr()
    return code, out, err


def traces_of(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines()]


def as_otlp_json(body: bytes, logs: bool = False) -> dict[str, Any]:
    """A recorded protobuf body as OTLP/JSON: protobuf JSON's base64 ids in hex."""
    from google.protobuf import json_format
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request: Any = ExportLogsServiceRequest() if logs else ExportTraceServiceRequest()
    request.ParseFromString(body)
    exported: dict[str, Any] = json_format.MessageToDict(request)
    resources, scopes, items = (
        ("resourceLogs", "scopeLogs", "logRecords") if logs else
        ("resourceSpans", "scopeSpans", "spans")
    )  # fmt: skip
    for resource in exported[resources]:
        for scope in resource[scopes]:
            for item in scope[items]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if item.get(key):
                        item[key] = base64.b64decode(item[key]).hex()
    return exported


def test_genai_events_in_a_logs_export_join_their_traces(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = explain(capsys, "--json", EVENTS / "01-traces.pb", EVENTS / "02-logs.pb")
    assert code == 0, err
    traces = traces_of(out)
    assert [t["outcome"] for t in traces] == ["queued", "queued"]
    assert [t["events"] for t in traces] == [1, 1]
    first = traces[0]["triple"]
    assert (first["query"], first["context"], first["answer"]) == GENAI_FIRST
    assert first["metadata"]["otlp_context"] == "system_messages"
    assert traces[1]["triple"]["answer"] == SECOND
    assert "without_messages" not in traces[0]

    # the order of the files does not matter: the events wait for their spans
    code, out, _ = explain(capsys, "--json", EVENTS / "02-logs.pb", EVENTS / "01-traces.pb")
    assert code == 0 and traces_of(out) == traces

    # the traces alone: rejected, and the text says where the messages are
    code, out, _ = explain(capsys, EVENTS / "01-traces.pb")
    assert code == 0
    assert out.count("rejected: query: must be a string, got null") == 2
    assert "chat modelo-rag-local: no messages on the span" in out
    assert "pass the logs export too" in out

    # the logs alone: no trace, and a note that their spans are elsewhere
    code, out, err = explain(capsys, EVENTS / "02-logs.pb")
    assert code == 0
    assert "no spans in this export" in out
    assert "2 GenAI events name spans that are not in this file" in err


def test_gzip_bodies_and_otlp_json_logs(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    traces = tmp_path / "traces.pb.gz"
    traces.write_bytes(gzip.compress((EVENTS / "01-traces.pb").read_bytes()))
    logs = tmp_path / "logs.json.gz"  # OTLP/JSON logs, gzipped, under a name that says nothing
    logs.write_bytes(
        gzip.compress(json.dumps(as_otlp_json((EVENTS / "02-logs.pb").read_bytes(), True)).encode())
    )
    code, out, err = explain(capsys, "--json", traces, logs)
    assert code == 0, err
    found = traces_of(out)
    assert [t["outcome"] for t in found] == ["queued", "queued"]
    first = found[0]["triple"]
    assert (first["query"], first["context"], first["answer"]) == GENAI_FIRST

    # the Collector's file exporter: one export a line, traces and logs mixed, gzipped
    lines = tmp_path / "collector.jsonl"
    lines.write_text(
        json.dumps(as_otlp_json((EVENTS / "01-traces.pb").read_bytes()))
        + "\n\n"
        + json.dumps(as_otlp_json((EVENTS / "02-logs.pb").read_bytes(), True))
        + "\n"
    )
    code, out, err = explain(capsys, "--json", lines)
    assert code == 0, err
    assert [t["triple"] for t in traces_of(out)] == [t["triple"] for t in found]


def test_the_text_shows_otlp_context_and_release(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = explain(capsys, DATA / "logfire-pydantic-ai" / "01-traces.pb")
    assert code == 0, err
    assert out.count("otlp_context: 'tools'") == 2
    assert "release: '0.1.0'" in out and "app:     'app-logfire-rag'" in out
    code, out, _ = explain(capsys, DATA / "genai-openai-v2-span-content" / "01-traces.pb")
    assert out.count("otlp_context: 'system_messages'") == 2
    code, out, _ = explain(capsys, DATA / "langfuse-v3" / "01-traces.pb")
    assert "otlp_context" not in out  # the context came from the retrievals
    assert "app:     None  (serve sets the token's app" in out


def test_stdin(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    body = gzip.compress((DATA / "langfuse-v3" / "01-traces.pb").read_bytes())
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(body)))
    code, out, err = explain(capsys, "--json", "-")
    assert code == 0, err
    assert [t["outcome"] for t in traces_of(out)] == ["queued", "queued"]
    code, _, err = explain(capsys, "-", "-")
    assert code == 2 and "stdin" in err


def test_the_limits_come_from_the_settings(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    langfuse = DATA / "langfuse-v3" / "01-traces.pb"  # two chunks a triple
    monkeypatch.setenv("VEREDITO_MAX_CHUNKS", "1")
    code, out, _ = explain(capsys, "--json", langfuse)
    assert code == 0
    assert all(t["outcome"].startswith("rejected: context:") for t in traces_of(out))
    monkeypatch.delenv("VEREDITO_MAX_CHUNKS")

    monkeypatch.setenv("VEREDITO_OTLP_RETRIEVAL_TOOLS", "search_*")  # not buscar_documentos
    code, out, _ = explain(capsys, "--json", DATA / "logfire-pydantic-ai" / "01-traces.pb")
    assert code == 0
    for trace in traces_of(out):  # the tool's results left out: the instructions remain
        assert trace["triple"]["metadata"]["otlp_context"] == "system_messages"
        assert trace["triple"]["context"] == [
            "Responda em português usando apenas os documentos retornados pela ferramenta."
        ]
    monkeypatch.delenv("VEREDITO_OTLP_RETRIEVAL_TOOLS")

    monkeypatch.setenv("VEREDITO_OTLP_MAX_SPANS_PER_REQUEST", "2")
    monkeypatch.setenv("VEREDITO_INGEST_MAX_BYTES", "1024")
    code, out, err = explain(capsys, "--json", langfuse)
    assert code == 0 and len(traces_of(out)) == 2
    assert "over VEREDITO_OTLP_MAX_SPANS_PER_REQUEST (2): serve would answer 413" in err
    assert "over VEREDITO_INGEST_MAX_BYTES (1024): serve would answer 413" in err
    assert str(langfuse) in err


def test_bad_input_names_the_file_and_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    good = DATA / "langfuse-v3" / "01-traces.pb"
    lines = tmp_path / "collector.jsonl"
    export = json.dumps(as_otlp_json(good.read_bytes()))
    lines.write_text(f"{export}\n\n{{not json\n{export}\n")
    code, out, err = explain(capsys, good, lines)
    assert code == 2 and out == ""
    assert f"{lines}: line 3: not an OTLP trace export" in err and "not valid JSON" in err

    broken = tmp_path / "broken.json"  # one export over several lines
    broken.write_text('{\n  "resourceSpans": [\n    {"resource": }\n  ]\n}\n')
    code, _, err = explain(capsys, broken)
    assert code == 2 and f"{broken}: line 3: not an OTLP trace export" in err

    no_ids = tmp_path / "no-ids.jsonl"  # valid JSON, a span without its ids
    span = {"name": "x"}
    no_id = {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}
    no_ids.write_text(f"{export}\n{json.dumps(no_id)}\n")
    code, _, err = explain(capsys, no_ids)
    assert code == 2 and f"{no_ids}: line 2: not an OTLP trace export" in err

    garbage = tmp_path / "garbage.pb"
    garbage.write_bytes(b"\x0a\xff\xff\xff\xff\x0f" + bytes(range(256)))
    code, _, err = explain(capsys, garbage)
    assert code == 2 and f"{garbage}: not an OTLP trace export, nor a logs one" in err

    truncated = tmp_path / "truncated.gz"
    truncated.write_bytes(gzip.compress(good.read_bytes())[:40])
    code, _, err = explain(capsys, truncated)
    assert code == 2 and f"{truncated}: not a valid gzip body" in err

    code, _, err = explain(capsys, good, tmp_path / "missing.pb")
    assert code == 2 and f"{tmp_path / 'missing.pb'}: No such file or directory" in err
