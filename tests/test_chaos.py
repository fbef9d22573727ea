"""The chaos suite, small (bench/chaos.py runs the big one): through real RabbitMQ and Redis, two
workers killed with SIGKILL, the results sink killed, RabbitMQ's app restarted, a judge failing
12 % of requests and then fully down for 10 s. Every id exactly once, no failed verdict for a
transient fault, one dead-letter record per failed triple, every process exits 0 on SIGTERM."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench.chaos import ChaosConfig, run_chaos
from tests.conftest import IN_CI, require_service


@pytest.mark.broker
def test_chaos_rabbitmq(tmp_path: Path) -> None:
    require_service(5672, "RabbitMQ")
    require_service(6379, "Redis")  # the done markers
    if shutil.which("rabbitmqctl") is None:
        if IN_CI:
            pytest.fail("rabbitmqctl is needed to restart RabbitMQ's app")
        pytest.skip("no rabbitmqctl here")
    report = run_chaos(
        ChaosConfig(
            broker="rabbitmq",
            n=1000,
            max_kills=2,
            kill_every=4.0,
            outage=10.0,
            deadline=400.0,
            workdir=tmp_path,
        )
    )
    assert report.passed, report.problems
    # the run ends when every id is in: with the faster sink it may end before the second kill
    assert 1 <= report.worker_kills <= 2
    assert report.sink_kills == 1 and report.broker_restarts == 1
    assert report.outage_seconds == 10.0 and report.judge_faults.get("down", 0) > 0
    assert report.distinct_ids == 1000 and report.failed == report.expected_failed > 0


@pytest.mark.broker
def test_chaos_redis(tmp_path: Path) -> None:
    """The same on Redis (no broker restart); a short visibility timeout so that the killed
    workers' triples come back within the test."""
    require_service(6379, "Redis")
    report = run_chaos(
        ChaosConfig(
            broker="redis",
            n=1000,
            max_kills=2,
            kill_every=4.0,
            outage=10.0,
            visibility_timeout=20.0,
            deadline=400.0,
            workdir=tmp_path,
        )
    )
    assert report.passed, report.problems
    assert 1 <= report.worker_kills <= 2 and report.sink_kills == 1
    assert report.distinct_ids == 1000 and report.failed == report.expected_failed > 0


@pytest.mark.broker
def test_chaos_rabbitmq_into_postgresql(tmp_path: Path, pg_url: str) -> None:
    """The sink writes to PostgreSQL, and PostgreSQL is restarted mid-run (as well as the sink
    killed and RabbitMQ restarted): every id stored once, each with its claims once."""
    require_service(5672, "RabbitMQ")
    require_service(6379, "Redis")
    if shutil.which("pg_ctlcluster") is None or shutil.which("rabbitmqctl") is None:
        if IN_CI:
            pytest.fail("pg_ctlcluster and rabbitmqctl are needed to restart the services")
        pytest.skip("no pg_ctlcluster or rabbitmqctl here")
    report = run_chaos(
        ChaosConfig(
            broker="rabbitmq",
            n=1000,
            max_kills=1,
            kill_every=4.0,
            outage=5.0,
            deadline=400.0,
            workdir=tmp_path,
            store=pg_url,
        )
    )
    assert report.passed, report.problems
    assert report.store_restarts == 1 and report.sink_kills == 1 and report.broker_restarts == 1
    assert report.distinct_ids == 1000 and report.claims_mismatched == 0
