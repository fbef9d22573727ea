"""``veredito serve`` (spec §13) as a real process on a real broker: every route with good and bad
input, aferiq-eval's own client posting through ``@aferiq.trace``, and the path to verdicts."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from kombu import Connection

from tests.conftest import ROOT, require_service
from tests.test_broker_e2e import BROKERS, reset_broker, running_worker
from tests.test_broker_e2e import broker_url as broker_url  # the fixture, both brokers
from veredito.producer import topology
from veredito.web.app import ROUTES, openapi

TOKENS = "tok-a-4c1b9e77d2f0,tok-sac-5d2e8a91c3:sac"
RABBITMQ = BROKERS["rabbitmq"][0]
TRIPLE = {"query": "Qual o prazo?", "context": ["O prazo é de 7 dias."], "answer": "São 7 dias."}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(broker: str, *extra: str, ready: bool = True, **env_extra: str) -> Iterator[str]:
    port = free_port()
    env = {**os.environ, "VEREDITO_BROKER_URL": broker, "VEREDITO_INGEST_TOKENS": TOKENS}
    env.update(env_extra)
    process = subprocess.Popen(
        [sys.executable, "-m", "veredito", "serve", "--port", str(port), *extra],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    assert f"listening on http://127.0.0.1:{port}" in line, process.stderr.read()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while ready and call(base, "GET", "/readyz")[0] != 200:  # the first look at the queue
        assert time.monotonic() < deadline, "serve never became ready"
        time.sleep(0.1)
    try:
        yield base
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=40)
        except subprocess.TimeoutExpired:
            process.kill()
        assert process.returncode == 0, process.stderr.read()


def call(
    base: str,
    method: str,
    path: str,
    body: bytes | str | Any = None,
    token: str | None = "tok-a-4c1b9e77d2f0",
    content_type: str = "application/json",
) -> tuple[int, Any, dict[str, str]]:
    if body is not None and not isinstance(body, bytes | str):
        body = json.dumps(body)
    data = body.encode() if isinstance(body, str) else body
    request = urllib.request.Request(base + path, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", content_type)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            raw, status, headers = response.read(), response.status, dict(response.headers)
    except urllib.error.HTTPError as exc:
        raw, status, headers = exc.read(), exc.code, dict(exc.headers)
    try:
        parsed = json.loads(raw) if raw else None
    except ValueError:
        parsed = raw.decode()
    return status, parsed, headers


def queued(url: str) -> list[dict[str, Any]]:
    """The envelopes waiting in veredito.triples (taken off the queue)."""
    envelopes = []
    with Connection(url) as conn:
        queue = topology.triples_queue(url)(conn.channel())
        while (message := queue.get(no_ack=True)) is not None:
            envelopes.append(message.decode()[1])
    return envelopes


@pytest.fixture
def rabbitmq() -> Iterator[str]:
    require_service(5672, "RabbitMQ")
    reset_broker(RABBITMQ)
    yield RABBITMQ
    reset_broker(RABBITMQ)


@pytest.mark.broker
def test_triples_route_good_and_bad_input(rabbitmq: str) -> None:
    with serving(rabbitmq, VEREDITO_INGEST_MAX_BYTES="4096") as base:
        status, body, _ = call(base, "POST", "/v1/triples", TRIPLE)
        assert status == 202 and len(body["accepted"]) == 1 and body["rejected"] == []

        bad = {"query": "q"}
        status, body, _ = call(base, "POST", "/v1/triples", [TRIPLE, bad, {**TRIPLE, "id": "x1"}])
        assert status == 202 and body["accepted"][1] == "x1"
        assert body["rejected"][0]["index"] == 1 and "context" in body["rejected"][0]["error"]

        ndjson = json.dumps({**TRIPLE, "id": "n1"}) + "\n\n" + json.dumps({**TRIPLE, "id": "n2"})
        status, body, _ = call(
            base, "POST", "/v1/triples", ndjson, content_type="application/x-ndjson"
        )
        assert status == 202 and body["accepted"] == ["n1", "n2"]

        broken = json.dumps(TRIPLE) + "\n{broken"
        status, body, _ = call(
            base, "POST", "/v1/triples", broken, content_type="application/x-ndjson"
        )
        assert status == 400 and body["error"]["message"].startswith("line 2: not valid JSON")
        status, body, _ = call(base, "POST", "/v1/triples", "{nope")
        assert status == 400 and body["error"]["code"] == "invalid_body"
        status, body, _ = call(base, "POST", "/v1/triples", "oi", content_type="text/plain")
        assert status == 415 and body["error"]["code"] == "unsupported_media_type"
        status, body, headers = call(base, "POST", "/v1/triples", TRIPLE, token=None)
        assert status == 401 and headers.get("WWW-Authenticate") == "Bearer"
        status, body, _ = call(base, "POST", "/v1/triples", TRIPLE, token="wrong")
        assert status == 401 and body["error"]["code"] == "unauthorized"
        big = {**TRIPLE, "answer": "x" * 5000}
        status, body, _ = call(base, "POST", "/v1/triples", big)
        assert status == 413 and "VEREDITO_INGEST_MAX_BYTES" in body["error"]["message"]

        status, body, _ = call(
            base, "POST", "/v1/triples", {**TRIPLE, "id": "s1"}, token="tok-sac-5d2e8a91c3"
        )
        assert status == 202

        status, text, _ = call(base, "GET", "/metrics", token=None)
        assert 'veredito_ingest_requests_total{code="202",route="/v1/triples"} 4.0' in text
        assert 'veredito_ingest_requests_total{code="401",route="/v1/triples"} 2.0' in text
        assert 'veredito_ingest_triples_total{result="rejected"} 1.0' in text

    envelopes = queued(rabbitmq)
    # every accepted triple and the rejected item are in the queue; nothing from failed requests
    assert len(envelopes) == 1 + 3 + 2 + 1
    by_id = {e["triple"].get("id"): e for e in envelopes if isinstance(e["triple"], dict)}
    assert by_id["s1"]["triple"]["metadata"]["app"] == "sac"  # the token's app is forced
    assert all(e["source"]["input"] == "http" for e in envelopes)


@pytest.mark.broker
def test_aferiq_route_rag_and_agent_traces(rabbitmq: str) -> None:
    with serving(rabbitmq) as base:
        assert call(base, "HEAD", "/api/v1/traces")[0] == 200
        assert call(base, "HEAD", "/api/v1/traces", token="revoked")[0] == 401
        assert call(base, "HEAD", "/api/v1/traces", token=None)[0] == 401
        status, body, _ = call(base, "POST", "/api/v1/traces", TRIPLE)
        assert status == 200 and len(body["accepted"]) == 1
        agent = {
            "trace_id": "4ca5d5d1-0984-4538-8ae8-be3741194a43",
            "goal": "Qual a multa do CDC?",
            "final_answer": "A multa é de 2%.",
            "steps": [
                {
                    "step_index": 0,
                    "step_type": "tool",
                    "tool_name": "busca",
                    "step_input": "{'q': 'cdc'}",
                    "step_output": "Art. 52: multa de 2%.",
                },
                {
                    "step_index": 1,
                    "step_type": "llm",
                    "tool_name": None,
                    "step_input": "",
                    "step_output": "pensando",
                },
                {
                    "step_index": 2,
                    "step_type": "retrieval",
                    "tool_name": None,
                    "step_input": "",
                    "step_output": "CDC, Lei 8.078/1990.",
                },
            ],
            "tool_specs": [{"name": "busca"}],
        }
        status, body, _ = call(base, "POST", "/api/v1/traces", agent)
        assert status == 200 and body["accepted"] == [agent["trace_id"]]
        empty = {"query": "Oi?", "context": [], "answer": "Olá"}  # aferiq's @trace without context
        status, body, _ = call(base, "POST", "/api/v1/traces", empty)
        assert status == 200 and body["accepted"] == []
        assert "no chunks" in body["rejected"][0]["error"]
    envelopes = queued(rabbitmq)
    assert len(envelopes) == 3 and all(e["source"]["input"] == "aferiq" for e in envelopes)
    (mapped,) = [e["triple"] for e in envelopes if e["triple"].get("id") == agent["trace_id"]]
    assert mapped["context"] == ["Art. 52: multa de 2%.", "CDC, Lei 8.078/1990."]
    assert mapped["query"] == agent["goal"] and mapped["answer"] == agent["final_answer"]


@pytest.mark.broker
def test_health_readiness_and_backpressure(rabbitmq: str) -> None:
    with serving(rabbitmq, VEREDITO_INGEST_MAX_BACKLOG="2") as base:
        assert call(base, "GET", "/healthz", token=None)[0] == 200
        assert call(base, "GET", "/readyz", token=None)[0] == 200
        three = [TRIPLE, {**TRIPLE, "id": "2"}, {**TRIPLE, "id": "3"}]
        status, body, _ = call(base, "POST", "/v1/triples", three)
        assert status == 503 and body["error"]["code"] == "backlog_full"  # 0 + 3 > 2
        assert call(base, "POST", "/v1/triples", three[:2])[0] == 202
        # what this server queued counts at once, before its next look at the queue
        status, body, headers = call(base, "POST", "/v1/triples", {**TRIPLE, "id": "x"})
        assert body["error"]["code"] == "backlog_full" and headers["Retry-After"] == "10"
        assert call(base, "GET", "/readyz", token=None)[0] == 503
    assert len(queued(rabbitmq)) == 2  # the refused ones were not queued


def test_refuses_to_start_without_tokens() -> None:
    env = {k: v for k, v in os.environ.items() if k != "VEREDITO_INGEST_TOKENS"}
    result = subprocess.run(
        [sys.executable, "-m", "veredito", "serve", "--port", str(free_port())],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "--insecure-no-auth" in result.stderr


@pytest.mark.broker
def test_unreachable_broker_is_503(tmp_path: Path) -> None:
    with serving("amqp://guest:guest@127.0.0.1:1//", ready=False) as base:
        status, body, headers = call(base, "POST", "/v1/triples", TRIPLE)
        assert status == 503 and body["error"]["code"] == "broker_unavailable"
        assert headers["Retry-After"] == "5"
        assert call(base, "GET", "/readyz", token=None)[0] == 503
        assert call(base, "GET", "/healthz", token=None)[0] == 200


def test_openapi_document_is_valid_and_lists_every_route() -> None:
    from openapi_spec_validator import validate

    document = openapi()
    validate(document)
    assert set(document["paths"]) == set(ROUTES)
    assert set(document["paths"]["/api/v1/traces"]) == {"post", "head"}


@pytest.mark.broker
def test_aferiq_eval_client_posts_through_its_decorator(rabbitmq: str) -> None:
    """aferiq-eval's own client, pointed at us by its DSN, changes nothing else."""
    import aferiq
    from rageval import cloud

    with serving(rabbitmq) as base:
        dsn = base.replace("http://", "http://tok-sac-5d2e8a91c3@") + "/api/v1/traces"
        aferiq.clear_trace_handlers()
        cloud._reset_for_testing()
        assert aferiq.init(dsn=dsn, redact=False, verbose=False, auto_patch=False)

        @aferiq.trace
        def rag(query: str, context: list[str]) -> str:
            return "O prazo de arrependimento é de sete dias."

        rag("Qual o prazo de arrependimento?", ["O art. 49 do CDC dá sete dias."])
        text = call(base, "GET", "/metrics", token=None)[1]
        assert (
            'veredito_ingest_requests_total{code="200",route="/api/v1/traces"} 2.0' in text
        )  # HEAD probe + POST
        aferiq.clear_trace_handlers()
        cloud._reset_for_testing()
    (envelope,) = queued(rabbitmq)
    assert envelope["triple"]["query"] == "Qual o prazo de arrependimento?"
    assert envelope["triple"]["context"] == ["O art. 49 do CDC dá sete dias."]
    assert envelope["triple"]["metadata"]["app"] == "sac"
    assert envelope["source"]["input"] == "aferiq"


@pytest.mark.broker
def test_every_accepted_triple_becomes_one_verdict(broker_url: str, tmp_path: Path) -> None:
    triples = [{**TRIPLE, "id": f"v{i}", "answer": f"São {i} dias."} for i in range(60)]
    triples.append({"query": "sem contexto", "answer": "x"})  # rejected, and a verdict says why
    with serving(broker_url) as base:
        accepted: list[str] = []
        for start in range(0, len(triples), 20):
            status, body, _ = call(base, "POST", "/v1/triples", triples[start : start + 20])
            assert status == 202
            accepted += body["accepted"]
            rejected_ids = [r["id"] for r in body["rejected"]]
    out = tmp_path / "verdicts.jsonl"
    env = {**os.environ, "VEREDITO_BROKER_URL": broker_url}
    with running_worker(env, 8) as worker:
        results = subprocess.run(
            [
                sys.executable,
                "-m",
                "veredito",
                "results",
                "--out",
                str(out),
                "--limit",
                "61",
                "--idle-timeout",
                "60",
            ],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert results.returncode == 0, results.stderr
    assert worker.returncode == 0, worker.stderr[-2000:]
    verdicts = {v["id"]: v for v in map(json.loads, out.read_text().splitlines())}
    assert len(verdicts) == 61 and set(accepted) <= set(verdicts)
    assert verdicts[rejected_ids[0]]["status"] == "rejected"
    assert "context" in verdicts[rejected_ids[0]]["error"]["message"]


@pytest.mark.broker
def test_sampling_and_dedup_are_reported_never_silent(rabbitmq: str) -> None:
    from veredito.producer.sampling import sampled_in

    redis_url = "redis://127.0.0.1:6379/15"
    require_service(6379, "Redis")
    import redis

    client = redis.Redis.from_url(redis_url)
    triples = [{**TRIPLE, "id": f"amostra-{i}"} for i in range(40)]
    client.delete(*[f"veredito:seen:{t['id']}" for t in triples])
    expected_in = [t["id"] for t in triples if sampled_in(t["id"], 0.5)]
    assert 5 < len(expected_in) < 35
    env = {
        "VEREDITO_SAMPLE_RATE": "0.5",
        "VEREDITO_DEDUP_WINDOW": "60",
        "VEREDITO_REDIS_URL": redis_url,
    }
    with serving(rabbitmq, **env) as first, serving(rabbitmq, **env) as second:
        status, body, _ = call(first, "POST", "/v1/triples", triples)
        assert status == 202 and body["accepted"] == expected_in  # the same decision everywhere
        assert sorted(body["sampled_out"]) == sorted(
            set(t["id"] for t in triples) - set(expected_in)
        )
        # a second replica sees the same ids as recent: shared through Redis
        status, body, _ = call(second, "POST", "/v1/triples", triples)
        assert status == 202 and body["accepted"] == [] and body["duplicates"] == expected_in
        text = call(second, "GET", "/metrics", token=None)[1]
        assert (
            f'veredito_ingest_triples_total{{result="duplicate"}} {float(len(expected_in))}' in text
        )
    assert len(queued(rabbitmq)) == len(expected_in)
    client.delete(*[f"veredito:seen:{t['id']}" for t in triples])


@pytest.mark.broker
def test_produce_sample_and_dedup_window(rabbitmq: str, tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(json.dumps({**TRIPLE, "id": f"p{i}"}) for i in range(30)) + "\n")
    env = {**os.environ, "VEREDITO_BROKER_URL": rabbitmq}
    run = [sys.executable, "-m", "veredito", "produce", str(source), "--dedup-window", "60"]
    first = subprocess.run(run, env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert first.returncode == 0, first.stderr
    assert "30 accepted, 0 rejected; 0 sampled out, 0 duplicates dropped" in first.stdout
    sampled = subprocess.run(
        [*run[:-2], "--sample", "0"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert "0 accepted, 0 rejected; 30 sampled out" in sampled.stdout
    assert len(queued(rabbitmq)) == 30


@pytest.mark.broker
def test_produce_map_and_a_token_with_a_preset(rabbitmq: str, tmp_path: Path) -> None:
    line = {
        "request": {"question": "Q?"},
        "retrieval": {"docs": [{"text": "c1"}]},
        "response": {"text": "A."},
    }
    source = tmp_path / "app.log"
    source.write_text(json.dumps(line) + "\n")
    env = {**os.environ, "VEREDITO_BROKER_URL": rabbitmq}
    maps = [
        "--map",
        "query=request.question",
        "--map",
        "context=retrieval.docs[].text",
        "--map",
        "answer=response.text",
    ]
    done = subprocess.run(
        [sys.executable, "-m", "veredito", "produce", str(source), *maps],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and "1 accepted, 0 rejected" in done.stdout, done.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "veredito", "produce", str(source), "--map", "colour=x"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "the field must be" in bad.stderr
    langchain = {
        "inputs": {"question": "Q?"},
        "outputs": {"answer": "A.", "source_documents": [{"page_content": "c1"}]},
    }
    with serving(rabbitmq, VEREDITO_INGEST_TOKENS="lc-token-6f1a3c8e2b::langchain") as base:
        status, body, _ = call(base, "POST", "/v1/triples", langchain, token="lc-token-6f1a3c8e2b")
        assert status == 202 and len(body["accepted"]) == 1
    triples = [e["triple"] for e in queued(rabbitmq)]
    assert [(t["query"], t["context"], t["answer"]) for t in triples] == [("Q?", ["c1"], "A.")] * 2
