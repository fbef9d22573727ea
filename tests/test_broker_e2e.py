"""The whole path through real brokers: produce → worker → results, on RabbitMQ and on Redis."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kombu import Connection

from tests.conftest import ROOT, require_service
from tests.llm_server import ServerThread
from veredito.producer import topology
from veredito.producer.reader import InputLine
from veredito.producer.triple import parse_triple

# VEREDITO_TEST_RABBITMQ_URL / VEREDITO_TEST_REDIS_URL point a run at its own vhost or db (the
# services are shared); CI uses the defaults.
BROKERS = {
    "rabbitmq": (
        os.environ.get("VEREDITO_TEST_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672//"),
        5672,
    ),
    "redis": (os.environ.get("VEREDITO_TEST_REDIS_URL", "redis://127.0.0.1:6379/15"), 6379),
}
N = 200
MALFORMED_LINE = 57
BAD_TWICE_LINE = 123


def reset_broker(url: str) -> None:
    """Start from empty queues."""
    topology.delete_queues(url)


def write_input(path: Path) -> list[str]:
    """N lines: valid triples, one malformed line, one the model answers badly twice."""
    rows: list[str] = []
    for line in range(1, N + 1):
        if line == MALFORMED_LINE:
            rows.append('{"query": "quebrado", "context": [')
            continue
        marker = " #llm:bad_twice" if line == BAD_TWICE_LINE else ""
        triple: dict[str, Any] = {
            "query": f"Qual o prazo de arrependimento? ({line})",
            "context": ["Art. 49 do CDC: 7 dias.", "Vale para compras fora da loja."],
            "answer": f"São 7 dias.{marker}"
            + (" Lei 1/2000 #invent:LEI." if line % 10 == 0 else ""),
            "metadata": {"app": f"app{line % 3}"},
        }
        if line % 2:
            triple["id"] = f"e2e-{line:03d}"
        rows.append(json.dumps(triple, ensure_ascii=False))
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    ids = []
    for number, text in enumerate(rows, 1):
        if number == MALFORMED_LINE:
            ids.append(InputLine(number, text).fallback_id)
        else:
            ids.append(parse_triple(json.loads(text)).id)
    return ids


def veredito(
    *args: str, env: dict[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "veredito", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd=ROOT,
    )


@dataclass
class Worker:
    """A ``veredito worker`` process; ``returncode`` and ``stderr`` are set once it has stopped."""

    process: subprocess.Popen[str]
    returncode: int | None = None
    stderr: str = ""


@contextmanager
def running_worker(
    env: dict[str, str], concurrency: int, metrics_port: int = 0
) -> Iterator[Worker]:
    """Start a worker; on exit stop it with SIGTERM (a warm shutdown) and collect its stderr."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "veredito",
            "worker",
            "--concurrency",
            str(concurrency),
            "--metrics-port",
            str(metrics_port),
        ],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    worker = Worker(process)
    try:
        yield worker
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            _, worker.stderr = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            _, worker.stderr = process.communicate()
        worker.returncode = process.returncode


@pytest.fixture(params=sorted(BROKERS))
def broker_url(request: pytest.FixtureRequest) -> Iterator[str]:
    url, port = BROKERS[request.param]
    require_service(port, request.param)
    reset_broker(url)
    yield url
    reset_broker(url)


@pytest.mark.broker
def test_produce_worker_results(broker_url: str, tmp_path: Path) -> None:
    source = tmp_path / "triples.jsonl"
    expected_ids = write_input(source)
    out = tmp_path / "verdicts.jsonl"
    with ServerThread() as llm:
        env = {
            **os.environ,
            "VEREDITO_BROKER_URL": broker_url,
            "VEREDITO_LLM_BASE_URL": llm.base_url,
            "VEREDITO_LLM_MAX_BACKOFF": "0.05",
        }

        produced = veredito("produce", str(source), env=env)
        assert produced.returncode == 0, produced.stderr
        assert f"published {N}: {N - 1} accepted, 1 rejected" in produced.stdout
        assert f"line {MALFORMED_LINE}: not valid JSON" in produced.stderr

        with running_worker(env, 50) as worker:
            results = veredito(
                "results",
                "--out",
                str(out),
                "--limit",
                str(N),
                "--idle-timeout",
                "60",
                env=env,
                timeout=180,
            )
            assert results.returncode == 0, results.stderr
        assert worker.returncode == 0, worker.stderr[-3000:]

    verdicts = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(verdicts) == N
    assert sorted(v["id"] for v in verdicts) == sorted(expected_ids)
    by_id = {v["id"]: v for v in verdicts}

    rejected = by_id[expected_ids[MALFORMED_LINE - 1]]
    assert rejected["status"] == "rejected"
    assert rejected["error"]["kind"] == "invalid_json"
    assert rejected["error"]["message"].startswith(f"line {MALFORMED_LINE}: not valid JSON")

    failed = by_id[expected_ids[BAD_TWICE_LINE - 1]]
    assert failed["status"] == "failed"
    assert failed["error"]["kind"] == "judge_output_invalid"
    assert failed["error"]["raw_reply"] == "Desculpe, não consigo avaliar esta resposta agora."

    ok = [v for v in verdicts if v["status"] == "ok"]
    assert len(ok) == N - 2
    assert sum(v["hallucinated"] for v in ok) == len([i for i in range(10, N + 1, 10)])
    assert all(v["judge"]["kind"] == "llm" and v["faithfulness"] is not None for v in ok)

    # the failed triple left a dead-letter record with the raw reply
    with Connection(broker_url) as conn:
        queue = topology.dead_queue(broker_url)(conn.channel())
        message = queue.get(no_ack=True)
        assert message is not None
        record = json.loads(message.body)
        assert record["id"] == failed["id"] and record["raw_reply"] == failed["error"]["raw_reply"]
        assert record["envelope"]["source"]["line"] == BAD_TWICE_LINE
        assert queue.get(no_ack=True) is None


@pytest.mark.broker
def test_verdict_messages_are_persistent_and_routed(broker_url: str, tmp_path: Path) -> None:
    source = tmp_path / "one.jsonl"
    source.write_text(
        json.dumps(
            {
                "id": "rota-1",
                "query": "q",
                "context": ["c"],
                "answer": "a.",
                "metadata": {"app": "sac bot/1"},
            }
        )
        + "\n"
    )
    with ServerThread() as llm:
        env = {
            **os.environ,
            "VEREDITO_BROKER_URL": broker_url,
            "VEREDITO_LLM_BASE_URL": llm.base_url,
        }
        assert veredito("produce", str(source), env=env).returncode == 0
        with running_worker(env, 2), Connection(broker_url) as conn:
            queue = topology.verdicts_queue(broker_url)(conn.channel())
            queue.declare()
            deadline = time.monotonic() + 60
            message = None
            while message is None and time.monotonic() < deadline:
                message = queue.get(no_ack=False)
                if message is None:
                    time.sleep(0.1)
            assert message is not None, "no verdict within 60 s"
            assert message.properties.get("message_id") == "rota-1"
            assert message.delivery_info["routing_key"] == "verdict.ok.sac_bot_1"
            if topology.is_amqp(broker_url):
                assert message.properties.get("delivery_mode") == 2
            assert json.loads(message.body)["id"] == "rota-1"
            message.ack()


@pytest.mark.broker
def test_results_skips_ids_already_written_and_cuts_a_torn_line(
    broker_url: str, tmp_path: Path
) -> None:
    from veredito.worker.publish import verdict_message, verdict_publisher
    from veredito.worker.results import collect
    from veredito.worker.verdict import Verdict

    out = tmp_path / "verdicts.jsonl"
    out.write_bytes(b'{"id": "v0", "status": "ok"}\n{"id": "v1", "sta')  # crash mid-write
    publisher = verdict_publisher(broker_url).start()
    try:
        publisher.publish(
            [verdict_message(Verdict(id=v, status="ok")) for v in ("v0", "v1", "v1", "v2")]
        )
    finally:
        publisher.close()
    sink = collect(broker_url, str(out), limit=2, idle_timeout=10)
    ids = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    assert ids == ["v0", "v1", "v2"]
    assert sink.written == 2 and sink.duplicates == 2
    with Connection(broker_url) as conn:  # everything was acked
        assert topology.verdicts_queue(broker_url)(conn.channel()).get(no_ack=True) is None


@pytest.mark.broker
def test_offline_worker_uses_the_rules_judge(broker_url: str, tmp_path: Path) -> None:
    """No LLM configured: the worker judges with the rules, end to end through the broker."""
    examples = ROOT / "examples" / "triples.jsonl"
    expected = {json.loads(line)["id"] for line in examples.read_text().splitlines()}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VEREDITO_LLM", "OPENAI_"))}
    env["VEREDITO_BROKER_URL"] = broker_url
    assert veredito("produce", str(examples), env=env).returncode == 0
    out = tmp_path / "v.jsonl"
    with running_worker(env, 8):
        results = veredito(
            "results",
            "--out",
            str(out),
            "--limit",
            str(len(expected)),
            "--idle-timeout",
            "60",
            env=env,
            timeout=120,
        )
        assert results.returncode == 0, results.stderr
    verdicts = [json.loads(line) for line in out.read_text().splitlines()]
    assert {v["id"] for v in verdicts} == expected
    assert {v["judge"]["kind"] for v in verdicts} == {"rules"}


@pytest.mark.broker
def test_replay_sends_dead_letters_back(broker_url: str) -> None:
    from veredito.worker.publish import dead_letter_message, verdict_publisher
    from veredito.worker.replay import replay

    envelope = {
        "triple": {"id": "volta-1", "query": "q", "context": ["c"], "answer": "a"},
        "source": {"input": "f.jsonl", "line": 3},
        "produced_at": 1.0,
    }
    publisher = verdict_publisher(broker_url).start()
    try:
        publisher.publish(
            [
                dead_letter_message(
                    {"id": "volta-1", "reason": "judge_unavailable", "envelope": envelope}
                ),
                dead_letter_message({"id": "lixo", "reason": "x"}),  # no envelope: stays
            ]
        )
    finally:
        publisher.close()
    report = replay(broker_url)
    assert (report.replayed, report.left) == (1, 1)
    with Connection(broker_url) as conn:
        channel = conn.channel()
        task = topology.triples_queue(broker_url)(channel).get(no_ack=True)
        assert task is not None
        _args, kwargs, _embed = json.loads(task.body)
        assert kwargs["triple"] == envelope["triple"] and kwargs["source"] == envelope["source"]
        assert task.headers["task"] == "veredito.evaluate"
        left = topology.dead_queue(broker_url)(channel).get(no_ack=True)
        assert left is not None and json.loads(left.body)["id"] == "lixo"
