from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.llm_server import Script, ServerThread

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def service_answers(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


def wait_until(condition: Callable[[], bool], seconds: float, what: str) -> None:
    """Wait for a condition with a deadline (never a bare sleep)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {seconds:.0f} s waiting for {what}")
        time.sleep(0.1)


def require_service(port: int, name: str) -> None:
    """Skip locally when a service is missing; in CI a missing service is a failure."""
    if service_answers(port):
        return
    message = f"{name} does not answer on 127.0.0.1:{port} (run scripts/ensure-services.sh)"
    if IN_CI:
        pytest.fail(message)
    pytest.skip(message)


def require_shared(path: Path) -> None:
    """../shared/ is beside the checkout on developers' machines and in CI; only a bare clone
    elsewhere lacks it. Skip there; in CI a missing file is a failure."""
    if path.exists():
        return
    if IN_CI:
        pytest.fail(f"{path} is missing")
    pytest.skip(f"{path} is not here")


@pytest.fixture
def llm_server() -> Iterator[ServerThread]:
    with ServerThread(Script()) as server:
        yield server


@pytest.fixture(autouse=True)
def _clean_llm_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never pick up a developer's real LLM configuration."""
    for name in list(os.environ):
        if name.startswith("VEREDITO_") or name in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
            monkeypatch.delenv(name, raising=False)
    # The worker caches judge results in Redis by default; tests judge the same triples again
    # and again (and count the judge's calls), so the cache is off unless a test turns it on.
    monkeypatch.setenv("VEREDITO_CACHE_TTL", "0")


PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A new, empty PostgreSQL database for one test, dropped after it."""
    import uuid

    psycopg = pytest.importorskip("psycopg")
    require_service(5432, "PostgreSQL")
    name = f"veredito_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        deadline = time.monotonic() + 30
        while True:  # the server may be restarting (a chaos test): retry until it answers
            try:
                with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
                    admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                break
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
