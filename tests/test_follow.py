"""``veredito produce --follow``: growing files, partial lines, rotation by rename and by
copytruncate, and a SIGKILL restart, through real RabbitMQ."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from kombu import Connection

from tests.conftest import ROOT, require_service, wait_until
from tests.test_broker_e2e import BROKERS, reset_broker
from veredito.producer import topology

URL = BROKERS["rabbitmq"][0]


def line(i: int) -> str:
    triple = {
        "id": f"f{i}",
        "query": f"Pergunta {i}?",
        "context": [f"Contexto {i}."],
        "answer": "Sim.",
    }
    return json.dumps(triple, ensure_ascii=False) + "\n"


def append(path: Path, text: str) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write(text)
        f.flush()


def depth() -> int:
    return topology.queue_depth(URL)


def taken() -> list[tuple[str, dict[str, Any]]]:
    """(message id, envelope) of every message in veredito.triples."""
    out = []
    with Connection(URL) as conn:
        queue = topology.triples_queue(URL)(conn.channel())
        while (message := queue.get(no_ack=True)) is not None:
            out.append((message.headers["id"], message.decode()[1]))
    return out


@pytest.fixture
def rabbitmq() -> Iterator[None]:
    require_service(5672, "RabbitMQ")
    reset_broker(URL)
    yield
    reset_broker(URL)


@contextmanager
def following(pattern: str, checkpoint: Path) -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "veredito",
            "produce",
            "--follow",
            pattern,
            "--checkpoint",
            str(checkpoint),
        ],
        env={**os.environ, "VEREDITO_BROKER_URL": URL},
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    assert "following" in process.stderr.readline()  # printed once SIGTERM is handled
    try:
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            out, err = process.communicate(timeout=30)
            assert process.returncode == 0, err
            assert "stopped following" in out


def saved_offset(checkpoint: Path, path: Path) -> int:
    if not checkpoint.exists():
        return -1
    files = json.loads(checkpoint.read_text())["files"].values()
    return max((f["offset"] for f in files if f["path"] == str(path)), default=-1)


@pytest.mark.broker
def test_growing_file_and_a_partial_last_line(rabbitmq: None, tmp_path: Path) -> None:
    log, checkpoint = tmp_path / "app.log", tmp_path / "cp.json"
    append(log, "".join(line(i) for i in range(5)))
    with following(str(log), checkpoint):
        wait_until(lambda: depth() == 5, 30, "5 lines published")
        complete = log.stat().st_size
        half = line(5)
        append(log, half[:20])  # the writer has not finished this line
        append(log, "")
        wait_until(lambda: saved_offset(checkpoint, log) == complete, 10, "the checkpoint")
        time.sleep(0.5)  # several polls see the partial line: it must stay unpublished
        assert depth() == 5
        append(log, half[20:])
        wait_until(lambda: depth() == 6, 30, "the completed line")
    ids = sorted(envelope["triple"]["id"] for _, envelope in taken())
    assert ids == sorted(f"f{i}" for i in range(6))


@pytest.mark.broker
def test_rotation_by_rename_with_a_glob_that_matches_both_names(
    rabbitmq: None, tmp_path: Path
) -> None:
    log, checkpoint = tmp_path / "app.log", tmp_path / "cp.json"
    append(log, "".join(line(i) for i in range(5)))
    with following(str(tmp_path / "app.log*"), checkpoint):
        wait_until(lambda: depth() == 5, 30, "5 lines")
        log.rename(tmp_path / "app.log.1")
        append(tmp_path / "app.log.1", line(5) + line(6))  # the app still writes to the old file
        append(log, "".join(line(i) for i in range(7, 10)))  # the new app.log
        wait_until(lambda: depth() == 10, 30, "10 lines")
        time.sleep(0.5)
        assert depth() == 10  # nothing read twice through the second name
    ids = sorted(envelope["triple"]["id"] for _, envelope in taken())
    assert ids == sorted(f"f{i}" for i in range(10))


@pytest.mark.broker
def test_rotation_by_copytruncate(rabbitmq: None, tmp_path: Path) -> None:
    log, checkpoint = tmp_path / "app.log", tmp_path / "cp.json"
    append(log, "".join(line(i) for i in range(5)))
    with following(str(log), checkpoint):
        wait_until(lambda: depth() == 5, 30, "5 lines")
        shutil.copy(log, tmp_path / "app.log.1")
        with log.open("r+") as f:
            f.truncate(0)
        append(log, "".join(line(i) for i in range(5, 8)))
        wait_until(lambda: depth() == 8, 30, "8 lines")
    ids = sorted(envelope["triple"]["id"] for _, envelope in taken())
    assert ids == sorted(f"f{i}" for i in range(8))


@pytest.mark.broker
def test_sigkill_and_restart_lose_nothing(rabbitmq: None, tmp_path: Path) -> None:
    log, checkpoint = tmp_path / "app.log", tmp_path / "cp.json"
    append(log, "".join(line(i) for i in range(4000)))
    with following(str(log), checkpoint) as first:
        wait_until(lambda: depth() >= 200, 60, "200 lines")
        first.kill()  # mid-stream: 4,000 lines take a few seconds
        first.wait()
    with following(str(log), checkpoint):
        wait_until(lambda: saved_offset(checkpoint, log) == log.stat().st_size, 60, "the end")
    messages = taken()
    by_line: dict[str, set[str]] = {}
    for message_id, envelope in messages:
        by_line.setdefault(envelope["triple"]["id"], set()).add(message_id)
    assert sorted(by_line) == sorted(f"f{i}" for i in range(4000))  # nothing lost
    # a line sent again after the kill carries the same message id: done markers drop it
    assert all(len(ids) == 1 for ids in by_line.values())
