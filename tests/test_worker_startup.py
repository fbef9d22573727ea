"""Workers side by side on one host (issue 27): a metrics port already in use stops the worker at
start, naming the settings that choose it, and a failing start-up step skips none of the others
(Celery swallows an exception from a ``worker_init`` handler: the worker went on half-started)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT


def test_a_metrics_port_in_use_stops_the_worker_at_start(tmp_path: Path) -> None:
    """Found: a second worker on the host raised OSError inside worker_init, and the rest of its
    start-up (runtime, publisher, lease liveness) was skipped silently."""
    holder = socket.socket()
    holder.bind(("0.0.0.0", 0))
    holder.listen()
    port = holder.getsockname()[1]
    try:
        env = {**os.environ, "VEREDITO_JUDGE": "rules",
               "VEREDITO_BROKER_URL": "amqp://guest:guest@127.0.0.1:5672//"}  # fmt: skip
        done = subprocess.run(
            [sys.executable, "-m", "veredito", "worker", "--metrics-port", str(port)],
            env=env, cwd=ROOT, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert "--metrics-port" in done.stderr and "VEREDITO_METRICS_PORT" in done.stderr
        assert "in use" in done.stderr
        # started by Celery's own command, the start-up hook stops the worker the same way
        done = subprocess.run(
            [sys.executable, "-m", "celery", "-A", "veredito.worker.celery_app", "worker",
             "--pool=threads", "--without-gossip", "--without-mingle", "--without-heartbeat"],
            env={**env, "VEREDITO_METRICS_PORT": str(port)}, cwd=ROOT, capture_output=True,
            text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode != 0, done.stderr[-2000:]
        assert "VEREDITO_METRICS_PORT" in done.stderr and "in use" in done.stderr
        assert "ready." not in done.stderr
    finally:
        holder.close()


def test_a_failing_start_up_step_skips_none_of_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    from veredito.worker import celery_app

    ran: list[str] = []

    def step(name: str, fails: bool = False) -> Any:
        def run() -> None:
            ran.append(name)
            if fails:
                raise RuntimeError(f"{name} failed")

        return run

    steps = [("metrics", step("metrics", True)), ("runtime", step("runtime")),
             ("publisher", step("publisher", True)), ("liveness", step("liveness"))]  # fmt: skip
    with pytest.raises(celery_app.StartupFailed) as caught:
        celery_app.run_startup(steps)
    assert ran == ["metrics", "runtime", "publisher", "liveness"]
    assert "metrics" in str(caught.value) and "publisher" in str(caught.value)
