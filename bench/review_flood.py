"""A label flood against ``serve``, as issue 27's probe ran it, and what the flooded answer costs
to read afterwards.

    .venv/bin/python bench/review_flood.py [--store sqlite|postgresql] [--seconds 10]
        [--connections 4] [--preload 0]

1. Starts ``veredito serve --store`` (SQLite in a temporary folder, or a new PostgreSQL database
   on 127.0.0.1:5432) holding three answers, with two review tokens of the same app and the
   defaults of the write limits (``VEREDITO_REVIEW_RATE`` 1/s, burst 20,
   ``VEREDITO_REVIEW_MAX_SUBMISSIONS`` 20). ``--preload N`` first writes N submissions of the
   same 11 KB straight into the store, as a store flooded before the limits would hold them.
2. For ``--seconds``, ``--connections`` threads post the probe's body (a 4,000-character note
   and 50 missed spans, 11 KB) to one answer with one token, as fast as they are answered, while
   a second reviewer posts one label every half second to another answer.
3. Then reads the flooded answer's page (signed in) and its labels API, page by page, twice at
   once, while a process of its own polls ``/healthz`` every 20 ms.

Prints one JSON object: the statuses of the flood, the rows stored, the second reviewer's
slowest write, the page's size and time, the API's pages, the slowest ``/healthz``, and serve's
peak RSS.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.healthwatch import HealthWatch
from tests.test_review import reading
from tests.test_review_abuse import (
    ANA,
    BIA,
    BIG,
    ENV,
    MISSED,
    READ,
    _store,
    post_label,
    sign_in,
)
from tests.test_review_labels_page import send
from tests.test_serve import call
from veredito.labels import Label
from veredito.store import open_store

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"


def preload(url: str, n: int) -> None:
    store = open_store(url)
    labels = [
        Label("claim", 0, True),
        *[Label("missed", None, None, "invented", "GENERICA", m["text"]) for m in MISSED],
        Label("answer", hallucinated=True, note="x" * 4000),
    ]
    for i in range(n):
        store.add_labels("sac-bot", "sac-1", "ana" if i % 2 else "bia", labels)  # type: ignore[attr-defined]
    store.close()


def flood(base: str, seconds: float, connections: int) -> dict[str, Any]:
    statuses: Counter[int] = Counter()
    slowest_other = 0.0
    other: Counter[int] = Counter()
    stop = time.monotonic() + seconds

    def hammer() -> None:
        while time.monotonic() < stop:
            statuses[post_label(base, ANA, BIG)[0]] += 1

    def person() -> None:
        nonlocal slowest_other
        while time.monotonic() < stop:
            started = time.perf_counter()
            other[post_label(base, BIA, {"hallucinated": False}, "sac-2")[0]] += 1
            slowest_other = max(slowest_other, time.perf_counter() - started)
            time.sleep(0.5)

    with ThreadPoolExecutor(connections + 1) as pool:
        jobs = [pool.submit(hammer) for _ in range(connections)] + [pool.submit(person)]
        for job in jobs:
            job.result()
    return {
        "flood_statuses": dict(statuses),
        "second_reviewer_statuses": dict(other),
        "second_reviewer_slowest_s": round(slowest_other, 3),
    }


def reads(base: str, port: int) -> dict[str, Any]:
    cookie = sign_in(base, ANA)

    def page() -> tuple[int, float]:
        started = time.perf_counter()
        status, text, _ = send(base, "GET", "/verdicts/sac-1?app=sac-bot", cookie=cookie)
        assert status == 200
        return len(text.encode()), time.perf_counter() - started

    def api() -> tuple[int, int, float]:
        started, pages, submissions, cursor = time.perf_counter(), 0, 0, ""
        while True:
            path = "/v1/verdicts/sac-1/labels?app=sac-bot" + (f"&cursor={cursor}" if cursor else "")
            status, body, _ = call(base, "GET", path, token=READ)
            assert status == 200
            pages, submissions = pages + 1, submissions + len(body["labels"])
            cursor = body["next_cursor"]
            if not cursor:
                return pages, submissions, time.perf_counter() - started

    with HealthWatch(port) as health, ThreadPoolExecutor(4) as pool:
        pages = [pool.submit(page) for _ in range(2)]
        apis = [pool.submit(api) for _ in range(2)]
        page_figures = [job.result() for job in pages]
        api_figures = [job.result() for job in apis]
    return {
        "page_bytes": max(b for b, _ in page_figures),
        "page_s": round(max(s for _, s in page_figures), 3),
        "api_pages": api_figures[0][0],
        "api_submissions": api_figures[0][1],
        "api_all_pages_s": round(max(s for *_, s in api_figures), 3),
        "healthz_slowest_s": round(health.slowest, 3),
    }


def serve_peak_rss(port: int) -> float | None:
    """The peak resident memory (VmHWM) of the ``serve`` listening on ``port``, in MB."""
    for proc in Path("/proc").iterdir():
        try:
            words = (proc / "cmdline").read_bytes().split(b"\0")
            if b"serve" in words and str(port).encode() in words:
                for line in (proc / "status").read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        return round(int(line.split()[1]) / 1024, 1)
        except OSError:
            continue
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--preload", type=int, default=0)
    args = parser.parse_args()
    with TemporaryDirectory() as folder:
        database = None
        if args.store == "sqlite":
            url = f"sqlite:///{Path(folder) / 'v.db'}"
        else:
            import psycopg

            database = f"veredito_bench_flood_{uuid.uuid4().hex[:8]}"
            with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
                admin.execute(f'CREATE DATABASE "{database}"')
            url = f"postgresql://postgres@127.0.0.1:5432/{database}"
        try:
            _store(url)
            if args.preload:
                preload(url, args.preload)
            with reading(url, **ENV) as base:
                port = int(base.rsplit(":", 1)[1])
                result: dict[str, Any] = {"store": args.store, "preloaded": args.preload}
                result.update(flood(base, args.seconds, args.connections))
                store = open_store(url)
                rows = store.labels_of("sac-bot", "sac-1")  # type: ignore[attr-defined]
                store.close()
                result["stored_submissions"] = len({r["submission"] for r in rows})
                result["stored_rows"] = len(rows)
                result.update(reads(base, port))
                result["serve_peak_rss_mb"] = serve_peak_rss(port)
        finally:
            if database is not None:
                import psycopg

                with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
                    admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
