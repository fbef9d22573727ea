"""The chaos suite, small (bench/chaos.py runs the big one): through real RabbitMQ and Redis, two
workers killed with SIGKILL, the results sink killed, RabbitMQ's app restarted, a judge failing
12 % of requests and then fully down for 10 s. Every id exactly once, no failed verdict for a
transient fault, one dead-letter record per failed triple, every process exits 0 on SIGTERM.
On Redis, the triples a killed worker held are judged within 60 s of the kill (leases); on
RabbitMQ, workers killed again and again while the judge is down dead-letter nothing (renewals).
The rate limits' small versions are in tests/test_ratelimit.py."""

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
    """The same on Redis (no broker restart): the killed workers' triples come back by their
    leases (default 10 s), well within 60 s of each kill; the visibility timeout (20 s) no longer
    re-sends anything a live worker holds."""
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
    assert report.held_at_kills > 0 and report.back_over_60s == 0


@pytest.mark.broker
def test_chaos_rabbitmq_workers_killed_through_an_outage_dead_letter_nothing(
    tmp_path: Path,
) -> None:
    """A worker killed every 2 s, 16 times, a 30 s judge outage among them: the triples held
    through it are returned to the queue far more than its delivery limit of 5, and yet the
    dead letters are the bad-twice triples' records only (the workers renew returned triples)."""
    require_service(5672, "RabbitMQ")
    require_service(6379, "Redis")
    report = run_chaos(
        ChaosConfig(
            broker="rabbitmq",
            n=300,
            kill_every=2.0,
            max_kills=16,
            outage=30.0,
            outage_at=0.3,
            sink_kill_at=None,
            broker_restart_at=None,
            deadline=400.0,
            workdir=tmp_path,
        )
    )
    assert report.passed, report.problems
    assert report.worker_kills >= 10 and report.renewed > 0
    assert report.broker_dead_lettered == 0 and report.dead_letters_not_bad == 0
    assert report.dead_letter_ids == report.expected_failed


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
