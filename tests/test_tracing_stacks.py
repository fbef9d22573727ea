"""Every tracing stack a RAG team runs, unchanged (issue 28): each stack's real instrumentation,
installed from PyPI in a virtual environment of its own (``tests/stacks/requirements``), traces a
small Portuguese RAG app (``tests/stacks``) whose model is ``tests/app_model.py`` on loopback, and
exports to a real ``serve``; a real worker judges what it queued, and every question gets one
verdict whose query, context (the retrieved texts, in order) and answer are what the app asked,
retrieved and received.

The environments are made once per requirements file under ``build/stacks`` (a few minutes the
first time, from the package index).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.app_model import AppModel
from tests.conftest import ROOT, require_service
from tests.stacks.common import DOCS, system_prompt
from tests.test_broker_e2e import BROKERS, reset_broker, running_worker
from tests.test_otlp_stacks_json import traces_counted
from tests.test_serve import call, free_port, serving
from veredito.producer import topology

STACKS = ROOT / "tests" / "stacks"
BUILD = ROOT / "build" / "stacks"
RABBITMQ = BROKERS["rabbitmq"][0]
TOKEN = "tok-a-4c1b9e77d2f0"  # tests/test_serve.py's TOKENS: unscoped
SAC = "tok-sac-5d2e8a91c3"  # the sac app's
PUBLIC, SECRET = "pk-lf-veredito-0001", "sk-lf-veredito-0123456789abcdef"


def stack_python(stack: str) -> Path:
    """The Python of the stack's own environment, made (once) from its pinned requirements."""
    requirements = STACKS / "requirements" / f"{stack}.txt"
    digest = hashlib.sha256(requirements.read_bytes()).hexdigest()[:12]
    venv = BUILD / f"{stack}-{digest}"
    python = venv / "bin" / "python"
    if not (venv / ".installed").exists():
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
        done = subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
             "-r", str(requirements)],
            capture_output=True, text=True, timeout=1200,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        (venv / ".installed").touch()
    return python


@pytest.fixture
def broker() -> Any:
    require_service(5672, "RabbitMQ")
    reset_broker(RABBITMQ)
    yield RABBITMQ
    reset_broker(RABBITMQ)


def run_app(stack: str, app: str, env: dict[str, str], *args: str) -> list[dict[str, Any]]:
    """Run a stack's app; what it asked, retrieved and received, a line per question."""
    python = stack_python(stack)
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("VEREDITO_", "OTEL_"))}
    done = subprocess.run(
        [str(python), str(STACKS / app), *args],
        env={**clean, **env}, cwd=STACKS, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 2, done.stdout + done.stderr[-2000:]
    return lines


def wait_queued(count: int, seconds: float) -> float:
    """Wait for ``count`` triples in the queue; the seconds it took."""
    started = time.monotonic()
    while topology.queue_depth(RABBITMQ) < count:
        assert time.monotonic() - started < seconds, (
            f"{topology.queue_depth(RABBITMQ)} of {count} triples queued after {seconds:.0f} s"
        )
        time.sleep(0.1)
    return time.monotonic() - started


def verdicts_of(count: int, tmp_path: Path) -> list[dict[str, Any]]:
    """Judge what is queued with a real worker (the rules judge); the verdicts."""
    out = tmp_path / "verdicts.jsonl"
    env = {**os.environ, "VEREDITO_BROKER_URL": RABBITMQ, "VEREDITO_JUDGE": "rules"}
    with running_worker(env, 2):
        done = subprocess.run(
            [sys.executable, "-m", "veredito", "results", "--out", str(out), "--limit",
             str(count), "--idle-timeout", "60"],
            env=env, cwd=ROOT, capture_output=True, text=True, timeout=180,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in out.read_text().splitlines()]


def check(asked: list[dict[str, Any]], verdicts: list[dict[str, Any]], app: str) -> None:
    assert len(verdicts) == len(asked)
    by_question = {v["input"]["query"]: v for v in verdicts}
    for line in asked:
        verdict = by_question[line["question"]]
        assert verdict["status"] == "ok", verdict.get("error")
        assert verdict["input"]["context"] == line["context"]
        assert verdict["input"]["answer"] == line["answer"]
        assert verdict["metadata"]["app"] == app


CASES = {
    # stack: (app, its arguments, the app's environment, serve's, the verdicts' app)
    "openinference": ("openinference_app.py", (), {}, {}, "sac-bot"),
    "openllmetry": (
        "openllmetry_app.py", (),
        {"TRACELOOP_METRICS_ENABLED": "false", "TRACELOOP_TELEMETRY": "false"}, {}, "sac-bot",
    ),
    "genai": (
        "genai_app.py", (),
        {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY"}, {}, "sac-bot",
    ),
    "genai-events": (
        "genai_app.py", (),
        {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "EVENT_ONLY"}, {}, "sac-bot",
    ),
    "langfuse": (
        "langfuse_app.py", (),
        {"LANGFUSE_PUBLIC_KEY": PUBLIC, "LANGFUSE_SECRET_KEY": SECRET},
        {"VEREDITO_LANGFUSE_KEYS": f"{PUBLIC}:{SECRET}:{SAC}"}, "sac",
    ),
    "logfire": ("logfire_app.py", (), {}, {}, "sac-bot"),
}  # fmt: skip


@pytest.mark.broker
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_stack_traced_app_gets_one_verdict_per_question(
    case: str, broker: str, tmp_path: Path
) -> None:
    app, args, app_env, serve_env, expected_app = CASES[case]
    stack = case.split("-")[0]
    with AppModel() as model, serving(broker, **serve_env) as base:
        env = {
            "MODEL_URL": model.base_url,
            "VEREDITO_URL": base,
            "VEREDITO_TOKEN": TOKEN,
            "OTEL_EXPORTER_OTLP_ENDPOINT": base,
            "OTEL_EXPORTER_OTLP_HEADERS": f"Authorization=Bearer%20{TOKEN}",
            "OTEL_METRICS_EXPORTER": "none",
            "LANGFUSE_HOST": base,
            **app_env,
        }
        asked = run_app(stack, app, env, *args)
        wait_queued(len(asked), 20)
    check(asked, verdicts_of(len(asked), tmp_path), expected_app)


@pytest.mark.broker
def test_a_service_behind_a_traced_gateway_is_judged_within_seconds(
    broker: str, tmp_path: Path
) -> None:
    """Found: under an incoming traceparent the root's parent never arrives, and no verdict came
    at all (the trace dropped as incomplete after 30 s)."""
    with AppModel() as model, serving(broker) as base:
        env = {"MODEL_URL": model.base_url, "VEREDITO_URL": base, "VEREDITO_TOKEN": TOKEN}
        asked = run_app("openinference", "openinference_app.py", env, "remote")
        assert wait_queued(len(asked), 5) < 5  # from the app's last span, not after 30 s
    verdicts = verdicts_of(len(asked), tmp_path)
    check(asked, verdicts, "sac-bot")
    assert sorted(v["id"] for v in verdicts) == [f"{1:032x}", f"{2:032x}"]  # the gateway's ids


@pytest.mark.broker
def test_phoenix_over_grpc(broker: str, tmp_path: Path) -> None:
    """``phoenix.otel.register()`` speaks OTLP/gRPC by default: serve --otlp-grpc-port."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with AppModel() as model, serving(broker, "--otlp-grpc-port", str(port)) as base:
        env = {"MODEL_URL": model.base_url, "VEREDITO_URL": base, "VEREDITO_TOKEN": TOKEN,
               "VEREDITO_GRPC": f"http://127.0.0.1:{port}"}  # fmt: skip
        asked = run_app("openinference", "openinference_app.py", env)
        wait_queued(len(asked), 20)
    check(asked, verdicts_of(len(asked), tmp_path), "sac-bot")


@pytest.mark.broker
def test_a_retriever_and_a_model_called_with_no_span_around_them(
    broker: str, tmp_path: Path
) -> None:
    """Found: the retriever's own trace was judged with the retriever's output JSON as the
    answer. Now it is not judged (counted), and the model's trace is judged with its system
    message, where the app put what it retrieved, as the one chunk of context (docs/ingestion.md:
    "the LLM's is judged with its system message as context")."""
    with AppModel() as model, serving(broker) as base:
        env = {"MODEL_URL": model.base_url, "VEREDITO_URL": base, "VEREDITO_TOKEN": TOKEN}
        asked = run_app("openinference", "openinference_app.py", env, "separate")
        wait_queued(len(asked), 20)
        counted = traces_counted(base)  # each call exported as it ended: all are in
        assert counted.get("not_judged") == 2 and counted.get("complete") == 2, counted
        assert counted["pending"] == 0 and not counted.get("incomplete"), counted
    verdicts = verdicts_of(len(asked), tmp_path)
    assert len(verdicts) == len(asked)
    assert [line["context"] for line in asked] == [DOCS[:1], DOCS[1:2]]  # what was retrieved
    by_question = {v["input"]["query"]: v for v in verdicts}
    for line in asked:
        verdict = by_question[line["question"]]
        assert verdict["status"] == "ok", verdict.get("error")
        answer = verdict["input"]["answer"]
        assert answer == line["answer"] and answer not in DOCS  # the model's, no retriever's
        assert not answer.lstrip().startswith(("{", "["))
        assert verdict["input"]["context"] == [system_prompt(line["context"])]
        assert verdict["metadata"]["app"] == "sac-bot"
        assert verdict["metadata"]["otlp_context"] == "system_messages"


@pytest.mark.broker
@pytest.mark.parametrize("capture", ["SPAN_ONLY", "EVENT_ONLY"])
def test_opentelemetry_genai_over_grpc(capture: str, broker: str, tmp_path: Path) -> None:
    """The SDK's own gRPC exporters (OTEL_EXPORTER_OTLP_PROTOCOL=grpc) to serve
    --otlp-grpc-port: the spans, and with EVENT_ONLY the GenAI events through LogsService."""
    port = free_port()
    with AppModel() as model, serving(broker, "--otlp-grpc-port", str(port)) as base:
        env = {
            "MODEL_URL": model.base_url,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
            "OTEL_EXPORTER_OTLP_HEADERS": f"Authorization=Bearer%20{TOKEN}",
            "OTEL_METRICS_EXPORTER": "none",
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": capture,
        }
        asked = run_app("genai", "genai_app.py", env)
        wait_queued(len(asked), 20)
        metrics = call(base, "GET", "/metrics", token=None)[1]
        assert 'route="/v1/traces"' not in metrics and 'route="/v1/logs"' not in metrics
    check(asked, verdicts_of(len(asked), tmp_path), "sac-bot")


@contextmanager
def forwarding(base: str) -> Iterator[tuple[str, list[tuple[str, str, bytes]]]]:
    """A loopback proxy that forwards each POST to ``base`` as it came (body and headers) and
    notes its path, Content-Encoding and first bytes: what the exporter really sent."""
    seen: list[tuple[str, str, bytes]] = []

    class Forward(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            encoding = self.headers.get("Content-Encoding", "")
            seen.append((self.path, encoding, body[:2]))
            request = urllib.request.Request(base + self.path, data=body, method="POST")
            for key in ("Content-Type", "Content-Encoding", "Authorization"):
                if self.headers.get(key):
                    request.add_header(key, self.headers[key])
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    status, reply = response.status, response.read()
                    reply_type = response.headers.get("Content-Type", "")
            except urllib.error.HTTPError as exc:
                status, reply = exc.code, exc.read()
                reply_type = exc.headers.get("Content-Type", "")
            self.send_response(status)
            self.send_header("Content-Type", reply_type)
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Forward)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.mark.broker
def test_opentelemetry_genai_gzip_compressed(broker: str, tmp_path: Path) -> None:
    """OTEL_EXPORTER_OTLP_COMPRESSION=gzip: the spans and the GenAI events (EVENT_ONLY: both
    routes) arrive gzip-compressed, as a proxy in between sees, and read as uncompressed."""
    with AppModel() as model, serving(broker) as base, forwarding(base) as (proxy, seen):
        env = {
            "MODEL_URL": model.base_url,
            "OTEL_EXPORTER_OTLP_ENDPOINT": proxy,
            "OTEL_EXPORTER_OTLP_HEADERS": f"Authorization=Bearer%20{TOKEN}",
            "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
            "OTEL_METRICS_EXPORTER": "none",
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "EVENT_ONLY",
        }
        asked = run_app("genai", "genai_app.py", env)
        wait_queued(len(asked), 20)
    assert {path for path, _, _ in seen} == {"/v1/traces", "/v1/logs"}
    assert all((encoding, magic) == ("gzip", b"\x1f\x8b") for _, encoding, magic in seen), seen
    check(asked, verdicts_of(len(asked), tmp_path), "sac-bot")
