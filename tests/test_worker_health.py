"""The worker's health route: ``/healthz`` answers 200 while the worker works, 503 when its event
loop stalls or it has had no broker connection for ``VEREDITO_HEALTH_BROKER_GRACE`` seconds.

The broker test never stops the shared broker: a real worker reaches RabbitMQ (or Redis) through a
small TCP proxy that the test cuts (listener and connections closed) and restores. On RabbitMQ the
worker lives in a vhost of its own, so it never takes anyone else's triples; on Redis in a
database no other test uses.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import IN_CI, ROOT, require_service
from veredito.worker.metrics import Metrics
from veredito.worker.runtime import Health, Runtime
from veredito.worker.settings import Settings

VHOST = "veredito_health"
GRACE = 5.0  # VEREDITO_HEALTH_BROKER_GRACE of the worker under test


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("steps", "problem", "unready"),
    [
        ([], None, "not connected"),  # starting: within the grace, not yet consuming
        ([("wait", 61), ("beat", 0)], "no broker connection for 61 s", "no broker connection"),
        ([("up", 0), ("wait", 500), ("beat", 0)], None, None),
        ([("up", 0), ("beat", 0), ("wait", 31)], "the event loop has not run for 31 s", "loop"),
        ([("up", 0), ("lost", 0), ("wait", 59), ("beat", 0)], None, "not connected"),
        ([("up", 0), ("lost", 0), ("wait", 61), ("beat", 0)], "no broker connection", "broker"),
        ([("up", 0), ("lost", 0), ("wait", 61), ("up", 0), ("beat", 0)], None, None),
        # a second "lost" (Celery stops the steps again at shutdown) keeps the first time
        (
            [("up", 0), ("lost", 0), ("wait", 40), ("lost", 0), ("wait", 21), ("beat", 0)],
            "no broker connection for 61 s",
            "broker",
        ),
    ],
)
def test_health_answers_from_the_loop_and_the_broker(
    steps: list[tuple[str, float]], problem: str | None, unready: str | None
) -> None:
    clock = Clock()
    health = Health(loop_stall=30, broker_grace=60, clock=clock)
    for step, seconds in steps:
        if step == "wait":
            clock.now += seconds
        elif step == "beat":
            health.beat()
        elif step == "up":
            health.broker_connected()
        else:
            health.broker_lost()
    found = health.problem()
    assert (found is None) == (problem is None), found
    if problem is not None:
        assert found is not None and problem in found
    not_ready = health.unready()
    assert (not_ready is None) == (unready is None), not_ready
    if unready is not None:
        assert not_ready is not None and unready in not_ready


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError as exc:
        return 0, str(exc)


def wait_for_status(url: str, status: int, seconds: float) -> tuple[float, str]:
    """Seconds until ``url`` answered ``status``, and its body."""
    start = time.monotonic()
    last: tuple[int, str] = (0, "")
    while time.monotonic() - start < seconds:
        last = get(url)
        if last[0] == status:
            return time.monotonic() - start, last[1]
        time.sleep(0.2)
    raise AssertionError(f"{url} did not answer {status} in {seconds:.0f} s (last: {last})")


def test_the_metrics_port_answers_checks_and_metrics() -> None:
    state: dict[str, str | None] = {"problem": None}
    metrics = Metrics()
    metrics.inflight.set(3)
    port = free_port()
    metrics.serve(port, addr="127.0.0.1", checks={"/healthz": lambda: state["problem"]})
    base = f"http://127.0.0.1:{port}"
    wait_for_status(base + "/healthz", 200, 10)
    assert get(base + "/healthz") == (200, "ok\n")
    state["problem"] = "no broker connection for 61 s"
    assert get(base + "/healthz") == (503, "no broker connection for 61 s\n")
    status, body = get(base + "/metrics")
    assert status == 200 and "veredito_inflight_evaluations 3.0" in body
    assert get(base + "/")[0] == 200  # every other path is the metrics, as before


def test_a_stalled_event_loop_fails_the_health_check() -> None:
    health = Health(loop_stall=1.0, broker_grace=60)
    runtime = Runtime(Settings(judge="rules"), Metrics(), health).start()
    try:
        health.broker_connected()
        assert health.problem() is None
        # blocking code on the loop (a bug: a sync call in a coroutine) stops its heartbeat
        runtime._loop.call_soon_threadsafe(time.sleep, 3.0)
        deadline = time.monotonic() + 3
        while health.problem() is None:
            assert time.monotonic() < deadline, "the stall was not seen"
            time.sleep(0.05)
        assert "event loop has not run" in (health.problem() or "")
        deadline = time.monotonic() + 6
        while health.problem() is not None:  # the loop runs again: healthy again
            assert time.monotonic() < deadline, health.problem()
            time.sleep(0.05)
    finally:
        runtime.close()


class Proxy:
    """Forwards 127.0.0.1:``port`` to 127.0.0.1:``target`` until cut; restorable on the same
    port. One thread accepts, two per connection copy bytes."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.port = free_port()
        self._listener: socket.socket | None = None
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        with self._lock:
            self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target), timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._listener is not listener:  # cut while this one was being accepted
                    client.close()
                    upstream.close()
                    return
                self._sockets.update((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        """The broker is gone: no listener, every connection closed."""
        with self._lock:
            listener, self._listener = self._listener, None
            sockets, self._sockets = self._sockets, set()
        if listener is not None:
            # shutdown, not only close: close leaves a thread blocked in accept() listening
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


def rabbitmq_vhost() -> str:
    """A vhost of the test's own (created once): its worker takes nobody else's triples."""
    require_service(5672, "RabbitMQ")
    ctl = shutil.which("rabbitmqctl")
    problem = "rabbitmqctl is not installed: it creates the test's own vhost"
    if ctl is not None:
        listed = subprocess.run(
            [ctl, "-q", "list_vhosts"], capture_output=True, text=True, timeout=120
        )
        if listed.returncode == 0:
            if VHOST not in listed.stdout.split():
                for command in (
                    ["add_vhost", VHOST],
                    ["set_permissions", "-p", VHOST, "guest", ".*", ".*", ".*"],
                ):
                    subprocess.run([ctl, "-q", *command], check=True, timeout=120)
            return VHOST
        problem = f"rabbitmqctl cannot reach the broker here: {listed.stderr.strip()[:300]}"
    if IN_CI:
        pytest.fail(problem)
    pytest.skip(problem)


@contextlib.contextmanager
def worker_through(proxy: Proxy, broker_url: str, log: Path) -> Iterator[str]:
    """A real ``veredito worker`` on ``broker_url``; yields its metrics port's base URL. On exit,
    SIGTERM: it must drain and exit 0."""
    metrics_port = free_port()
    env = {
        **os.environ,
        "VEREDITO_BROKER_URL": broker_url,
        "VEREDITO_JUDGE": "rules",
        "VEREDITO_HEALTH_BROKER_GRACE": str(GRACE),
        "VEREDITO_CACHE_TTL": "0",
    }
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "veredito",
                "worker",
                "--concurrency",
                "4",
                "--metrics-port",
                str(metrics_port),
            ],
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            text=True,
        )
        try:
            yield f"http://127.0.0.1:{metrics_port}"
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                code = process.wait(timeout=90)
            except subprocess.TimeoutExpired:
                process.kill()
                raise
            assert code == 0, log.read_text()[-3000:]


BROKERS = {
    "rabbitmq": (5672, "amqp://guest:guest@127.0.0.1:{port}/" + VHOST),
    "redis": (6379, "redis://127.0.0.1:{port}/9"),  # db 9: no other test consumes there
}


@pytest.mark.broker
@pytest.mark.parametrize("broker", sorted(BROKERS))
def test_healthz_fails_when_the_broker_is_gone_and_recovers(broker: str, tmp_path: Path) -> None:
    target, template = BROKERS[broker]
    if broker == "rabbitmq":
        rabbitmq_vhost()
    else:
        require_service(6379, "Redis")
    proxy = Proxy(target)
    proxy.start()
    log = tmp_path / "worker.log"
    try:
        with worker_through(proxy, template.format(port=proxy.port), log) as base:
            waited, _ = wait_for_status(base + "/readyz", 200, 90)  # connected and consuming
            assert get(base + "/healthz") == (200, "ok\n")

            cut = time.monotonic()
            proxy.cut()
            # the consumer sees the connection go (at once, mostly: Celery may first wait out a
            # drain timeout): not ready; unhealthy only once the grace is over
            _, reason = wait_for_status(base + "/healthz", 503, GRACE + 15)
            failed_after = time.monotonic() - cut
            assert "no broker connection" in reason
            assert GRACE - 0.5 <= failed_after <= GRACE + 15, failed_after
            assert get(base + "/readyz")[0] == 503

            proxy.start()  # the broker is back: the worker reconnects by itself
            recovered, _ = wait_for_status(base + "/healthz", 200, 60)
            wait_for_status(base + "/readyz", 200, 30)
            print(
                f"{broker}: ready after {waited:.1f} s; /healthz 503 {failed_after:.1f} s after "
                f"the cut (grace {GRACE:.0f} s); 200 again {recovered:.1f} s after the restore"
            )
    finally:
        proxy.cut()
