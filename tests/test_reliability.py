"""Spec §15 on real brokers: hostile messages, SIGTERM drains, killed consumers' triples come back,
a redelivery is not judged twice, ``produce`` stops cleanly."""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from kombu import Connection, Producer

from bench.chaos import make_triples
from tests.conftest import ROOT, wait_until
from tests.llm_server import Script, ServerThread
from tests.test_broker_e2e import BROKERS, reset_broker, running_worker
from tests.test_broker_e2e import broker_url as broker_url  # the fixture, both brokers
from veredito.producer import topology
from veredito.producer.publish import TriplePublisher, task_message
from veredito.worker.redis_transport import LANDING_PREFIX

GOOD = {"query": "Qual o prazo?", "context": ["O prazo é de 7 dias."], "answer": "São 7 dias."}
CPF = "529.982.247-25"


def depth(url: str, name: str) -> int:
    return topology.queue_depth(url, name)


def drain(url: str, name: str) -> list[Any]:
    queues = {
        topology.VERDICTS_QUEUE: topology.verdicts_queue,
        topology.DEAD_QUEUE: topology.dead_queue,
    }
    bodies = []
    with Connection(url) as conn:
        queue = queues[name](url)(conn.channel())
        while (message := queue.get(no_ack=True)) is not None:
            body = message.body if isinstance(message.body, bytes) else message.body.encode()
            bodies.append(json.loads(body))
    return bodies


def headers(task: str = topology.TASK_NAME, task_id: str | None = None) -> dict[str, Any]:
    _, found = task_message({}, task_id or str(uuid.uuid4()), "test")
    found["task"] = task
    return found


def task_body(kwargs: dict[str, Any], args: list[Any] | None = None) -> bytes:
    return json.dumps([args or [], kwargs, {}]).encode()


def hostile_messages() -> dict[str, tuple[bytes, str, dict[str, Any]]]:
    """name → (body, content type, headers); the first eight cannot become verdicts."""
    nested = '[[], {"triple": ' + "[" * 100_000 + "]" * 100_000 + "}, {}]"
    return {
        "not_json": (f"{{not json {CPF}".encode(), "application/json", headers()),
        "pickle": (
            pickle.dumps([[], {"triple": GOOD}, {}]),
            "application/x-python-serialize",
            headers(),
        ),
        "unknown_type": (b"hello", "text/x-weird", headers()),
        "unknown_task": (task_body({"triple": GOOD}), "application/json", headers("other.task")),
        "invalid_utf8": (
            b'[[], {"triple": {"query": "\xff\xfe"}}, {}]',
            "application/json",
            headers(),
        ),
        "deep_json": (nested.encode(), "application/json", headers()),
        "no_headers": (task_body({"triple": GOOD}), "application/json", {}),
        "not_protocol_2": (b'{"a": 1}', "application/json", headers()),
        # these four reach the task: three rejected verdicts and one ok
        "args_shape": (task_body({}, [1, 2, 3]), "application/json", headers()),
        "huge": (
            task_body({"triple": {**GOOD, "answer": "x" * 50_000_000}}),
            "application/json",
            headers(),
        ),
        "surrogate": (
            task_body({"triple": {**GOOD, "answer": "\ud800 oi"}}),
            "application/json",
            headers(),
        ),
        "good": (task_body({"triple": GOOD}), "application/json", headers()),
    }


@pytest.mark.broker
def test_hostile_messages_never_stop_a_worker(broker_url: str) -> None:
    messages = hostile_messages()
    with Connection(broker_url) as conn:
        channel = conn.channel()
        for make in (topology.triples_queue, topology.dead_queue, topology.verdicts_queue):
            make(broker_url)(channel).declare()
        producer = Producer(channel, exchange=topology.triples_exchange())
        for name, (body, content_type, head) in messages.items():
            producer.publish(
                body,
                routing_key=topology.TRIPLES_QUEUE,
                headers=head,
                content_type=content_type,
                content_encoding="utf-8" if "json" in content_type else "binary",
                message_id=name,
                delivery_mode=2,
            )
    env = {**os.environ, "VEREDITO_BROKER_URL": broker_url}  # the offline rules judge
    with running_worker(env, 4) as worker:
        wait_until(
            lambda: (
                depth(broker_url, topology.VERDICTS_QUEUE) >= 4
                and depth(broker_url, topology.DEAD_QUEUE) >= 8
            ),
            60,
            "4 verdicts and 8 dead letters",
        )
        assert worker.process.poll() is None, "the worker died"
    assert worker.returncode == 0, worker.stderr[-3000:]
    verdicts = drain(broker_url, topology.VERDICTS_QUEUE)
    dead = drain(broker_url, topology.DEAD_QUEUE)
    assert sorted(v["status"] for v in verdicts) == ["ok", "rejected", "rejected", "rejected"]
    kinds = sorted(v["error"]["kind"] for v in verdicts if v["error"])
    assert kinds == ["invalid_task", "invalid_triple", "invalid_triple"]
    assert sorted(r["reason"] for r in dead) == sorted(
        ["undecodable"] * 3 + ["invalid_task"] * 3 + ["unknown_task", "not_a_task"]
    )
    assert all(r["body_base64"] and r["body_bytes"] > 0 for r in dead)
    assert CPF not in worker.stderr and "not json" not in worker.stderr  # bodies never logged


def publish_triples(url: str, triples: list[dict[str, Any]]) -> None:
    with TriplePublisher(url) as publisher:
        for i, triple in enumerate(triples, 1):
            publisher.publish({"triple": triple, "source": {"line": i}}, label=str(i))


@pytest.mark.broker
def test_sigterm_finishes_what_is_in_flight_and_exits_0(broker_url: str) -> None:
    lines, _ = make_triples(40, 0)
    publish_triples(broker_url, [json.loads(line) for line in lines])
    with ServerThread(Script(latency=1.5)) as judge:
        env = {
            **os.environ,
            "VEREDITO_BROKER_URL": broker_url,
            "VEREDITO_LLM_BASE_URL": judge.base_url,
            "VEREDITO_PROMPTS": "claims",
            "VEREDITO_SHUTDOWN_GRACE": "30",
        }
        with running_worker(env, 4) as worker:
            wait_until(lambda: judge.script.served >= 4, 30, "4 evaluations in flight")
            started = time.monotonic()
        assert worker.returncode == 0, worker.stderr[-3000:]
        assert time.monotonic() - started < 15
    verdicts = drain(broker_url, topology.VERDICTS_QUEUE)
    # what was in flight was finished and published; everything else is still queued
    assert len(verdicts) >= 4
    assert len(verdicts) + depth(broker_url, topology.TRIPLES_QUEUE) == 40


@pytest.mark.broker
def test_sigterm_returns_what_cannot_finish_within_the_grace(broker_url: str) -> None:
    lines, _ = make_triples(10, 0)
    publish_triples(broker_url, [json.loads(line) for line in lines])
    with ServerThread(Script(latency=60)) as judge:
        env = {
            **os.environ,
            "VEREDITO_BROKER_URL": broker_url,
            "VEREDITO_LLM_BASE_URL": judge.base_url,
            "VEREDITO_LLM_TIMEOUT": "120",
            "VEREDITO_PROMPTS": "claims",
            "VEREDITO_SHUTDOWN_GRACE": "2",
        }
        with running_worker(env, 4) as worker:
            wait_until(lambda: judge.script.served >= 4, 30, "4 evaluations in flight")
            started = time.monotonic()
        assert worker.returncode == 0, worker.stderr[-3000:]
        assert time.monotonic() - started < 20
    assert depth(broker_url, topology.VERDICTS_QUEUE) == 0
    wait_until(
        lambda: depth(broker_url, topology.TRIPLES_QUEUE) == 10, 10, "all 10 back in the queue"
    )


REDIS_URL = BROKERS["redis"][0]


@pytest.fixture
def redis_broker() -> Iterator[str]:
    from tests.conftest import require_service

    require_service(6379, "Redis")
    reset_broker(REDIS_URL)
    client = redis.Redis.from_url(REDIS_URL)
    stale = [*client.scan_iter("veredito:*"), b"unacked", b"unacked_index"]
    client.delete(*stale)
    yield REDIS_URL
    reset_broker(REDIS_URL)


@pytest.mark.broker
def test_redis_a_killed_workers_triples_come_back(redis_broker: str) -> None:
    """The doomed worker holds its triples under a 4 s lease; killed, they are back within the
    lease and a sweep (not the visibility timeout, here far longer)."""
    lines, _ = make_triples(30, 0)
    publish_triples(redis_broker, [json.loads(line) for line in lines])
    with ServerThread(Script(latency=60)) as slow, ServerThread(Script()) as fast:
        base = {**os.environ, "VEREDITO_BROKER_URL": redis_broker, "VEREDITO_PROMPTS": "claims"}
        doomed = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "veredito",
                "worker",
                "--concurrency",
                "8",
                "--metrics-port",
                "0",
            ],
            env={
                **base,
                "VEREDITO_LLM_BASE_URL": slow.base_url,
                "VEREDITO_LLM_TIMEOUT": "120",
                "VEREDITO_REDIS_LEASE": "4",
            },
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(lambda: slow.script.served >= 8, 30, "the doomed worker to hold triples")
        doomed.kill()
        doomed.wait()
        killed_at = time.monotonic()
        env = {**base, "VEREDITO_LLM_BASE_URL": fast.base_url}
        with running_worker(env, 8) as worker:
            wait_until(
                lambda: depth(redis_broker, topology.VERDICTS_QUEUE) >= 30, 90, "30 verdicts"
            )
        assert worker.returncode == 0, worker.stderr[-3000:]
        assert time.monotonic() - killed_at < 30
        assert "held by consumers whose lease expired" in worker.stderr
    ids = {v["id"] for v in drain(redis_broker, topology.VERDICTS_QUEUE)}
    assert ids == {json.loads(line)["id"] for line in lines}


@pytest.mark.broker
def test_redis_a_message_taken_by_a_consumer_that_died_in_the_window_comes_back(
    redis_broker: str, tmp_path: Path
) -> None:
    """The consumer moved the message to its landing list and died before recording it unacked."""
    lines, _ = make_triples(1, 0)
    publish_triples(redis_broker, [json.loads(lines[0])])
    client = redis.Redis.from_url(redis_broker)
    landing = LANDING_PREFIX + topology.TRIPLES_QUEUE
    assert client.lmove(topology.TRIPLES_QUEUE, landing, "RIGHT", "LEFT") is not None
    assert client.llen(topology.TRIPLES_QUEUE) == 0
    env = {**os.environ, "VEREDITO_BROKER_URL": redis_broker}
    with running_worker(env, 2) as worker:
        wait_until(lambda: depth(redis_broker, topology.VERDICTS_QUEUE) == 1, 60, "its verdict")
    assert worker.returncode == 0, worker.stderr[-3000:]
    assert client.llen(landing) == 0
    assert "returned 1 messages left by a consumer that died" in worker.stderr


@pytest.mark.broker
def test_redis_a_dead_consumers_messages_go_back_once_however_many_sweep(
    redis_broker: str,
) -> None:
    """A consumer takes two messages under its lease and stops renewing; three other channels
    sweep, again and again: each message is back on its queue exactly once, and a live
    consumer's messages are left alone."""
    from veredito.worker.redis_transport import CONSUMERS_KEY, HOLDERS_KEY, TRANSPORT

    lines, _ = make_triples(3, 0)
    publish_triples(redis_broker, [json.loads(line) for line in lines])
    options = {"priority_steps": [0], "veredito_lease": 3}
    queue = topology.triples_queue(redis_broker)
    client = redis.Redis.from_url(redis_broker)
    with (
        Connection(redis_broker, transport=TRANSPORT, transport_options=options) as dying,
        Connection(redis_broker, transport=TRANSPORT, transport_options=options) as alive,
    ):
        taken: list[Any] = []
        with dying.Consumer(queue, callbacks=[lambda _b, m: taken.append(m)], prefetch_count=2):
            wait_until(lambda: _drain(dying) or len(taken) >= 2, 10, "two messages taken")
            channel = dying.default_channel
            assert client.hlen(HOLDERS_KEY) == 2
            channel._heartbeat.stopped.set()  # it stops renewing, as a killed process would
            held_alive: list[Any] = []
            with alive.Consumer(queue, callbacks=[lambda _b, m: held_alive.append(m)]):
                wait_until(lambda: _drain(alive) or len(held_alive) >= 1, 10, "the third")
                assert client.llen(topology.TRIPLES_QUEUE) == 0

                def expired() -> bool:
                    expiry = client.zscore(CONSUMERS_KEY, channel.consumer_id)
                    seconds, micros = client.time()
                    return expiry is None or expiry < seconds * 1000 + micros / 1000

                wait_until(expired, 10, "the dying consumer's lease to expire")
                sweepers = [
                    Connection(redis_broker, transport=TRANSPORT, transport_options=options)
                    for _ in range(3)
                ]
                returned = 0
                for _ in range(3):
                    for sweeper in sweepers:
                        returned += sweeper.default_channel.sweep(force=True)
                for sweeper in sweepers:
                    sweeper.release()
                # (the live consumer's own sweeps may have returned them first)
                assert returned <= 2 and client.llen(topology.TRIPLES_QUEUE) == 2
                assert client.hlen(HOLDERS_KEY) == 1  # the live consumer's
                held_alive[0].ack()
    assert client.hlen(HOLDERS_KEY) == 0


def _drain(connection: Any) -> bool:
    with contextlib.suppress(TimeoutError):
        connection.drain_events(timeout=0.2)
    return False


@pytest.mark.broker
def test_redis_a_triple_held_through_a_judge_outage_is_judged_once(redis_broker: str) -> None:
    """The judge is down for 25 s, several times the 3 s lease and the 5 s visibility timeout,
    while two workers hold every triple: the request log shows each triple answered once."""
    from tests.judge_log import LoggedServer, PerSecondScript

    lines, _ = make_triples(24, 0)
    publish_triples(redis_broker, [json.loads(line) for line in lines])
    script = PerSecondScript(record=False, latency=0.05)
    script.down = True
    with LoggedServer(script) as judge:
        env = {
            **os.environ,
            "VEREDITO_BROKER_URL": redis_broker,
            "VEREDITO_LLM_BASE_URL": judge.base_url,
            "VEREDITO_PROMPTS": "claims",
            "VEREDITO_REDIS_LEASE": "3",
            "VEREDITO_REDIS_VISIBILITY_TIMEOUT": "5",
        }
        with running_worker(env, 16) as first, running_worker(env, 16) as second:
            wait_until(lambda: script.faults["down"] >= 2, 60, "the breaker to hold triples")
            down_since = time.monotonic()
            wait_until(lambda: time.monotonic() - down_since > 25, 30, "25 s of outage")
            assert depth(redis_broker, topology.TRIPLES_QUEUE) == 0  # all held, none returned
            script.down = False
            wait_until(
                lambda: depth(redis_broker, topology.VERDICTS_QUEUE) >= 24, 90, "24 verdicts"
            )
        for worker in (first, second):
            assert worker.returncode == 0, worker.stderr[-3000:]
            assert "held by consumers whose lease expired" not in worker.stderr
    answers = script.answers()
    verdicts = drain(redis_broker, topology.VERDICTS_QUEUE)
    not_ok = [
        (v["id"], v.get("status"), v.get("error")) for v in verdicts if v.get("status") != "ok"
    ]
    said = [
        line[-200:]
        for worker in (first, second)
        for line in worker.stderr.splitlines()
        if "tries used" in line or "circuit" in line or "evaluation failed" in line
    ]
    seen = (
        f"{script.served} requests, {len(script.log)} logged, {len(answers)} prompts answered, "
        f"verdicts not ok: {not_ok}; the workers said: {said}"
    )
    assert set(answers.values()) == {1}, answers  # no triple judged twice
    assert len(answers) == 24, seen
    assert {v["id"] for v in verdicts} == {json.loads(line)["id"] for line in lines}


RABBITMQ_URL = BROKERS["rabbitmq"][0]


@pytest.fixture
def rabbitmq_broker() -> Iterator[str]:
    from tests.conftest import require_service

    require_service(BROKERS["rabbitmq"][1], "RabbitMQ")
    reset_broker(RABBITMQ_URL)
    yield RABBITMQ_URL
    reset_broker(RABBITMQ_URL)


def return_unacked(url: str, times: int) -> None:
    """Take every message of the triples queue without acking and close the channel, ``times``
    times over: what workers killed while holding them do to the broker's delivery count."""
    for _ in range(times):
        _take_and_drop(url)


def _take_and_drop(url: str) -> None:
    got: list[Any] = []
    with Connection(url) as conn:
        channel = conn.channel()
        channel.basic_qos(0, 100, False)
        consumer = conn.Consumer(
            topology.triples_queue(url), channel=channel, callbacks=[lambda _b, m: got.append(m)]
        )
        consumer.consume()
        with contextlib.suppress(TimeoutError):
            while True:
                conn.drain_events(timeout=0.5)
    assert got, "nothing to take"


def test_the_triples_queue_is_declared_as_every_earlier_version_declared_it() -> None:
    """Changing a declared queue's arguments fails with PRECONDITION_FAILED against a queue that
    an earlier version declared (and a policy can only lower a delivery limit): the declaration
    stays as it always was; the worker's renewals keep returns from reaching the limit."""
    queue = topology.triples_queue("amqp://guest:guest@localhost:5672//")
    assert queue.queue_arguments == {
        "x-queue-type": "quorum",
        "x-dead-letter-exchange": "",
        "x-dead-letter-routing-key": topology.DEAD_QUEUE,
        "x-delivery-limit": 5,
    }
    assert topology.RENEW_AT + 3 <= topology.DELIVERY_LIMIT


@pytest.mark.broker
def test_rabbitmq_a_triple_returned_past_the_delivery_limit_is_judged_not_dead_lettered(
    rabbitmq_broker: str,
) -> None:
    """Three triples go back to the queue four times each (workers dying while holding them),
    then a worker takes them: each is renewed and judged; nothing reaches veredito.dead. Then
    one more, returned three times, with VEREDITO_MAX_RETURNS=3: dead-lettered as
    returned_too_often, with a record."""
    lines, _ = make_triples(3, 0)
    publish_triples(rabbitmq_broker, [json.loads(line) for line in lines])
    return_unacked(rabbitmq_broker, 4)
    env = {**os.environ, "VEREDITO_BROKER_URL": rabbitmq_broker}  # the offline rules judge
    with running_worker(env, 4) as worker:
        wait_until(lambda: depth(rabbitmq_broker, topology.VERDICTS_QUEUE) >= 3, 60, "3 verdicts")
    assert worker.returncode == 0, worker.stderr[-3000:]
    assert worker.stderr.count("was renewed") == 3
    assert depth(rabbitmq_broker, topology.DEAD_QUEUE) == 0
    verdicts = drain(rabbitmq_broker, topology.VERDICTS_QUEUE)
    assert sorted(v["id"] for v in verdicts) == sorted(json.loads(line)["id"] for line in lines)

    publish_triples(rabbitmq_broker, [json.loads(make_triples(4, 0)[0][3])])
    return_unacked(rabbitmq_broker, 3)
    with running_worker({**env, "VEREDITO_MAX_RETURNS": "3"}, 4) as worker:
        wait_until(lambda: depth(rabbitmq_broker, topology.DEAD_QUEUE) >= 1, 60, "a dead letter")
    assert worker.returncode == 0, worker.stderr[-3000:]
    [record] = drain(rabbitmq_broker, topology.DEAD_QUEUE)
    assert record["reason"] == "returned_too_often" and record["body_base64"]
    assert depth(rabbitmq_broker, topology.VERDICTS_QUEUE) == 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def metric(port: int, name: str) -> float:
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read()
    except OSError:
        return 0.0
    for line in text.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


@pytest.mark.broker
def test_a_redelivered_triple_whose_verdict_was_published_is_not_judged_again(
    broker_url: str,
) -> None:
    task_id = str(uuid.uuid4())
    port = free_port()
    with ServerThread(Script()) as judge:
        env = {
            **os.environ,
            "VEREDITO_BROKER_URL": broker_url,
            "VEREDITO_LLM_BASE_URL": judge.base_url,
            "VEREDITO_REDIS_URL": REDIS_URL,
            "VEREDITO_PROMPTS": "claims",
        }
        with TriplePublisher(broker_url) as publisher, running_worker(env, 2, port) as worker:
            publisher.publish({"triple": GOOD}, "dup", task_id)
            publisher.flush()
            wait_until(lambda: depth(broker_url, topology.VERDICTS_QUEUE) == 1, 30, "a verdict")
            # the same message again, as a redelivery after a crash between publish and ack
            publisher.publish({"triple": GOOD}, "dup", task_id)
            publisher.flush()
            wait_until(
                lambda: metric(port, "veredito_redeliveries_skipped_total") == 1,
                30,
                "the repeat to be skipped",
            )
        assert worker.returncode == 0, worker.stderr[-3000:]
        assert judge.script.served == 1
    assert depth(broker_url, topology.VERDICTS_QUEUE) == 1


@pytest.mark.broker
def test_produce_stops_on_sigterm_and_says_where(broker_url: str) -> None:
    lines, _ = make_triples(100, 0)
    env = {**os.environ, "VEREDITO_BROKER_URL": broker_url}
    produce = subprocess.Popen(
        [sys.executable, "-m", "veredito", "produce", "-"],
        env=env,
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert produce.stdin is not None
    for line in lines[:10]:
        produce.stdin.write(line + "\n")
    produce.stdin.flush()
    wait_until(lambda: depth(broker_url, topology.TRIPLES_QUEUE) == 10, 30, "10 published")
    produce.send_signal(signal.SIGTERM)
    # the next line wakes the reader, which stops before publishing it
    out, err = produce.communicate(lines[10] + "\n", timeout=30)
    assert produce.returncode == 128 + signal.SIGTERM, err
    assert "published 10: 10 accepted, 0 rejected" in out
    assert "stopped by signal 15 after line 10" in err
    assert depth(broker_url, topology.TRIPLES_QUEUE) == 10
