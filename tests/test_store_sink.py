"""``veredito results --to sqlite|postgresql``: through real RabbitMQ into a real database, with
PostgreSQL restarted under it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from kombu import Connection

from bench.chaos import restart_postgresql
from tests.conftest import IN_CI, ROOT, require_service, wait_until
from tests.test_broker_e2e import BROKERS, reset_broker
from tests.test_store import make_verdict
from veredito.producer import topology
from veredito.store import Filters, open_store
from veredito.worker.publish import verdict_message, verdict_publisher

RABBITMQ = BROKERS["rabbitmq"][0]


def publish(first: int, count: int) -> None:
    publisher = verdict_publisher(RABBITMQ).start()
    try:
        for start in range(first, first + count, 200):
            end = min(start + 200, first + count)
            publisher.publish([verdict_message(make_verdict(i)) for i in range(start, end)])
    finally:
        publisher.close()


def stored(url: str) -> int:
    try:
        store = open_store(url)
    except Exception:  # restarting
        return -1
    try:
        return int(store.stats(Filters())["answers"])  # type: ignore[attr-defined]
    except Exception:
        return -1
    finally:
        store.close()


def sink(url: str, limit: int) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VEREDITO_")}
    env["VEREDITO_BROKER_URL"] = RABBITMQ
    return subprocess.Popen(
        [sys.executable, "-m", "veredito", "results", "--to", url, "--limit", str(limit),
         "--idle-timeout", "60"],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def queue_is_empty() -> bool:
    with Connection(RABBITMQ) as conn:
        message = topology.verdicts_queue(RABBITMQ)(conn.channel()).get(no_ack=False)
        if message is not None:
            message.reject(requeue=True)
        return message is None


def require_cluster() -> None:
    """RabbitMQ, and a local PostgreSQL cluster this test may stop and start; queues emptied."""
    require_service(5672, "RabbitMQ")
    if not os.path.isdir("/etc/postgresql"):
        if IN_CI:
            pytest.fail("PostgreSQL's cluster tools are needed to stop and start it")
        pytest.skip("no local PostgreSQL cluster to stop and start")
    reset_broker(RABBITMQ)


def cluster(action: str) -> None:
    for version in sorted(os.listdir("/etc/postgresql")):
        subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", action],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip


@pytest.mark.broker
def test_results_into_sqlite_skips_what_is_stored(tmp_path: Path) -> None:
    require_service(5672, "RabbitMQ")
    reset_broker(RABBITMQ)
    url = f"sqlite:///{tmp_path / 'v.db'}"
    publish(0, 500)
    publish(0, 100)  # redelivered from upstream: stored once
    process = sink(url, 500)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr
    assert "wrote 500 verdicts (100 duplicates skipped)" in stderr
    assert stored(url) == 500
    assert queue_is_empty()


@pytest.mark.broker
def test_the_sink_rides_out_a_postgresql_restart(pg_url: str) -> None:
    require_cluster()
    publish(0, 1000)
    process = sink(pg_url, 3000)
    try:
        wait_until(lambda: stored(pg_url) >= 1000, 60, "the first 1000 verdicts stored")
        restart_postgresql()  # the sink's connection dies under it
        publish(1000, 2000)
        _, stderr = process.communicate(timeout=180)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, stderr
    # it saw the outage, and carried on: an insert failed ("the store is away"), or, the restart
    # over before it wrote again, its idle connection was found dead and replaced
    assert "the store is away" in stderr or "connection was lost while idle" in stderr, stderr
    assert "wrote 3000 verdicts" in stderr
    store = open_store(pg_url)
    try:
        assert store.stats(Filters())["answers"] == 3000  # type: ignore[attr-defined]
        with store._using() as conn:  # type: ignore[attr-defined]
            claims = conn.execute("SELECT COUNT(*) FROM claims").fetchone()[0]
    finally:
        store.close()
    assert claims == sum(len(make_verdict(i).claims) for i in range(3000))
    assert queue_is_empty()


@pytest.mark.broker
def test_a_sink_started_while_postgresql_is_down_waits_for_it(pg_url: str) -> None:
    """At 3 a.m. the database may be down when the sink (re)starts: it waits, then stores."""
    require_cluster()
    publish(0, 300)
    cluster("stop")
    process = sink(pg_url, 300)
    try:
        assert process.stderr is not None
        line = process.stderr.readline()  # the sink says it waits, and does not exit
        assert "does not answer yet" in line, line
        assert process.poll() is None
    finally:
        cluster("start")
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr
    assert stored(pg_url) == 300
    assert queue_is_empty()
