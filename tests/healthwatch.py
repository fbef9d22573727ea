"""``/healthz`` polled from a process of its own while a test floods the server.

In the test's process, the poller's thread would share the GIL with the thread that builds and
sends the flood (megabytes of JSON), and its timings would be the test's own pauses. Standard
library only: the spawned process starts in a few tens of milliseconds.
"""

from __future__ import annotations

import multiprocessing
import socket
import time
from typing import Any

__all__ = ["HealthWatch"]


def _watch(port: int, conn: Any) -> None:
    """Every 20 ms, ``GET /healthz`` on one keep-alive connection, until told to stop; then
    send back (answers, slowest seconds)."""
    slowest, answers = 0.0, 0
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    request = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    try:
        while True:
            started = time.perf_counter()
            sock.sendall(request)
            data = b""
            while b'"alive"' not in data:
                chunk = sock.recv(4096)
                if not chunk:
                    raise ConnectionError("healthz closed the connection")
                data += chunk
            slowest = max(slowest, time.perf_counter() - started)
            answers += 1
            if answers == 1:
                conn.send("ready")
            if conn.poll(0.02):  # "stop"
                break
    finally:
        sock.close()
    conn.send((answers, slowest))


class HealthWatch:
    """``with HealthWatch(port) as health:`` polls from the first answer on; after the block,
    ``health.answers`` and ``health.slowest`` (seconds)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.slowest = 0.0
        self.answers = 0
        self._process: Any = None
        self._conn: Any = None

    def __enter__(self) -> HealthWatch:
        context = multiprocessing.get_context("spawn")
        self._conn, theirs = context.Pipe()
        self._process = context.Process(target=_watch, args=(self.port, theirs), daemon=True)
        self._process.start()
        if not self._conn.poll(30) or self._conn.recv() != "ready":
            self._process.kill()
            raise AssertionError("the health watcher got no first answer from /healthz in 30 s")
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._conn.send("stop")
            if not self._conn.poll(15):
                raise AssertionError("the health watcher did not report (healthz stuck?)")
            self.answers, self.slowest = self._conn.recv()
        finally:
            self._process.join(timeout=15)
            if self._process.is_alive():
                self._process.kill()
