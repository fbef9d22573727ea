"""Reviewers' labels (spec §16) against a real ``serve`` on real SQLite and PostgreSQL stores:
who may write, what a label body may say, the queue, the agreement, and the export that
``calibrate`` reads back to the same numbers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.test_serve import call
from tests.test_serve_security import Server, server
from veredito.labels import LabelError, labelled_record, parse_submission, wilson
from veredito.store import open_store

DEVSET = ROOT / "tests" / "data" / "devset.jsonl"
REVIEW = (
    "rev-ana-token-8Kd3mQ7x:ana,rev-bia-token-2Pw9vL4c:bia,rev-sac-token-6Hn1zR5t:caio:sac-varejo"
)
ANA, BIA, CAIO = "rev-ana-token-8Kd3mQ7x", "rev-bia-token-2Pw9vL4c", "rev-sac-token-6Hn1zR5t"
READ = "read-token-4Fg7kT1q"
INGEST = "ingest-token-9Vb2nM6s"


def judged_store(url: str, tmp_path: Path) -> list[dict[str, Any]]:
    """The dev set judged by the rules judge into ``url``; the verdicts, as stored."""
    done = subprocess.run(
        [sys.executable, "-m", "veredito", "run", str(DEVSET), "--judge", "rules", "--to", url,
         "--out", str(tmp_path / "verdicts.jsonl")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "VEREDITO_CACHE_TTL": "0"},
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    return [json.loads(line) for line in (tmp_path / "verdicts.jsonl").read_text().splitlines()]


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'v.db'}"
    else:
        yield request.getfixturevalue("pg_url")


@pytest.fixture
def reviewing(store_url: str, tmp_path: Path) -> Iterator[tuple[Server, list[dict[str, Any]], str]]:
    verdicts = judged_store(store_url, tmp_path)
    env = {"VEREDITO_INGEST_TOKENS": f"{INGEST}", "VEREDITO_READ_TOKENS": READ,
           "VEREDITO_REVIEW_TOKENS": REVIEW, "VEREDITO_REVIEW_SAMPLE": "1",
           "VEREDITO_REVIEW_RATE": "0"}  # the write limit: tests/test_review_abuse.py  # fmt: skip
    with server(tmp_path, "--store", store_url, **env) as s:  # ingest tokens: to be refused
        yield s, verdicts, store_url


def post(s: Server, verdict: dict[str, Any], body: Any, token: str) -> tuple[int, Any]:
    app = verdict["metadata"].get("app", "")
    path = f"/v1/verdicts/{verdict['id']}/labels?app={app}"
    status, answer, _ = call(s.base, "POST", path, body, token=token)
    return status, answer


def with_claims(verdicts: list[dict[str, Any]], n: int = 2) -> list[dict[str, Any]]:
    return [v for v in verdicts if v["status"] == "ok" and len(v["claims"]) >= n]


def test_who_may_write_and_what_a_label_may_say(
    reviewing: tuple[Server, list[dict[str, Any]], str],
) -> None:
    s, verdicts, _ = reviewing
    v = with_claims(verdicts)[0]
    good = {"claims": [{"claim_idx": 0, "correct": True}]}
    assert post(s, v, good, READ)[0] == 403
    assert post(s, v, good, INGEST)[0] == 403
    assert post(s, v, good, "no-such-token-1234567")[0] == 401
    other = next(x for x in verdicts if x["metadata"].get("app") != "sac-varejo")
    assert post(s, other, good, CAIO)[0] == 403  # caio labels sac-varejo only
    bad = [
        ({"claims": [{"claim_idx": 99, "correct": True}]}, "claims[0].claim_idx"),
        (
            {"claims": [{"claim_idx": 0, "correct": False, "category": "NOPE"}]},
            "claims[0].category",
        ),
        ({"claims": [{"claim_idx": 0, "correct": False, "verdict": "maybe"}]}, "claims[0].verdict"),
        ({"missed": [{"text": "isto não está na resposta", "category": "LEI"}]}, "missed[0].text"),
        ({"hallucinated": "sim"}, "hallucinated"),
        ({}, "body"),
        ({"claims": [], "extra": 1}, "extra"),
    ]
    for body, field in bad:
        status, answer = post(s, v, body, ANA)
        assert status == 400 and answer["error"]["message"].startswith(field), (body, answer)
    status, answer = post(s, v, {"note": "x" * (70 * 1024)}, ANA)
    assert status == 413
    assert (
        call(
            s.base, "GET", f"/v1/verdicts/{v['id']}/labels?app={v['metadata']['app']}", token=READ
        )[1]["labels"]
        == []
    )
    status, stored = post(s, v, {"claims": [{"claim_idx": 1, "correct": False, "verdict": "invented", "category": "PRAZO_VALOR"}],
                                 "note": "<script>alert(1)</script><img src=x onerror=alert(2)>"}, ANA)  # fmt: skip
    assert status == 201 and stored["reviewer"] == "ana"
    assert stored["note"] == "<script>alert(1)</script><img src=x onerror=alert(2)>"
    status, _ = post(s, v, {"claims": [{"claim_idx": 1, "correct": True}]}, BIA)
    assert status == 201
    status, seen, _ = call(
        s.base, "GET", f"/v1/verdicts/{v['id']}/labels?app={v['metadata']['app']}", token=READ
    )
    assert status == 200 and [x["reviewer"] for x in seen["labels"]] == ["ana", "bia"]
    (disagreement,) = seen["disagreements"]
    assert disagreement["claim_idx"] == 1 and set(disagreement["reviewers"]) == {"ana", "bia"}
    metrics = call(s.base, "GET", "/metrics", token=None)[1]
    assert f'veredito_review_labels_total{{app="{v["metadata"]["app"]}"}} 3.0' in metrics


def test_the_queue_serves_each_answer_once_and_the_whole_slice(
    reviewing: tuple[Server, list[dict[str, Any]], str],
) -> None:
    s, verdicts, _ = reviewing
    ok = [v for v in verdicts if v["status"] == "ok"]
    served: list[tuple[str, str]] = []
    reasons = []
    while True:
        status, body, _ = call(s.base, "GET", "/v1/review/next", token=ANA)
        if status == 204:
            break
        assert status == 200
        served.append((body["app"], body["id"]))
        reasons.append(body["reason"])
        assert len(served) <= len(ok)
    assert len(served) == len(set(served))  # never twice to one reviewer
    assert set(served) == {(v["metadata"].get("app", ""), v["id"]) for v in ok}  # the whole slice
    assert set(reasons) == {"uniform"}  # share 1: every answer is in the slice
    # another reviewer is not handed what ana holds (a lease), a scoped one only its app
    assert call(s.base, "GET", "/v1/review/next", token=BIA)[0] == 204
    assert call(s.base, "GET", "/v1/review/next?app=other", token=CAIO)[0] == 403
    assert call(s.base, "GET", "/v1/review/next", token=READ)[0] == 403


def test_the_agreement_equals_calibrate_on_the_export(
    reviewing: tuple[Server, list[dict[str, Any]], str], tmp_path: Path
) -> None:
    s, verdicts, url = reviewing
    labelled = with_claims(verdicts, 1)[:40]
    for n, v in enumerate(labelled):
        claims = []
        for idx, claim in enumerate(v["claims"]):
            if (n + idx) % 3 == 0:  # a third of the claims corrected
                flipped = "grounded" if claim["verdict"] != "grounded" else "invented"
                claims.append({"claim_idx": idx, "correct": False, "verdict": flipped,
                               "category": None if flipped == "grounded" else "PRAZO_VALOR"})  # fmt: skip
            else:
                claims.append({"claim_idx": idx, "correct": True})
        body: dict[str, Any] = {"claims": claims}
        if n % 5 == 0:
            answer = v["input"]["answer"]
            body["missed"] = [{"text": answer.split()[0], "category": "LEI", "verdict": "invented"}]
        assert post(s, v, body, ANA if n % 2 else BIA)[0] == 201
    status, api, _ = call(s.base, "GET", "/v1/agreement?judge=rules", token=READ)
    assert status == 200 and api["uniform"]["answers"] == len(labelled)
    export = tmp_path / "reviewed.jsonl"
    done = subprocess.run([sys.executable, "-m", "veredito", "labels", "export", "--from", url, "--to", str(export)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert len(export.read_text().splitlines()) == len(labelled)
    calibrated = subprocess.run([sys.executable, "-m", "veredito", "calibrate", str(export), "--judge", "rules", "--json"],
                                cwd=ROOT, capture_output=True, text=True, timeout=300,
                                env={**os.environ, "VEREDITO_CACHE_TTL": "0"})  # fmt: skip
    assert calibrated.returncode == 0, calibrated.stderr
    report = json.loads(calibrated.stdout)
    answer_level = api["uniform"]["answer_level"]
    assert (answer_level["tp"], answer_level["fp"], answer_level["fn"]) == (
        report["answer_level"]["tp"], report["answer_level"]["fp"], report["answer_level"]["fn"])  # fmt: skip
    for name, figures in report["categories"].items():
        mine = api["uniform"]["categories"].get(name, {"tp": 0, "fp": 0, "fn": 0})
        assert (mine["tp"], mine["fp"], mine["fn"]) == (
            figures["tp"],
            figures["fp"],
            figures["fn"],
        ), name
    table = subprocess.run([sys.executable, "-m", "veredito", "calibrate", "--from-store", url, "--judge", "rules", "--json"],
                           cwd=ROOT, capture_output=True, text=True, timeout=120,
                           env={**os.environ, "VEREDITO_REVIEW_SAMPLE": "1"})  # fmt: skip
    assert table.returncode == 0, table.stderr
    assert json.loads(table.stdout)["uniform"] == api["uniform"]


def test_labels_resolve_by_latest_then_majority() -> None:
    verdict = {"id": "a", "claims": [{"text": "São 30 dias.", "verdict": "invented", "category": "PRAZO_VALOR"},
                                     {"text": "Procure o Procon.", "verdict": "grounded"}],
               "input": {"query": "q", "context": ["c"], "answer": "São 30 dias. Procure o Procon."}}  # fmt: skip

    def row(i: int, who: str, idx: int, correct: bool, **kw: Any) -> dict[str, Any]:
        return {"id": i, "kind": "claim", "claim_idx": idx, "reviewer": who, "correct": correct,
                "verdict": kw.get("verdict"), "category": kw.get("category"), "text": None,
                "hallucinated": None}  # fmt: skip

    # ana first says claim 0 is wrong, then right: her latest wins; bia and caio disagree 1-1
    rows = [row(1, "ana", 0, False), row(2, "ana", 0, True), row(3, "bia", 1, False),
            row(4, "caio", 1, True)]  # fmt: skip
    record = labelled_record(verdict, rows)
    assert record["labels"]["spans"][0] == {
        "text": "São 30 dias.",
        "category": "PRAZO_VALOR",
        "verdict": "invented",
    }
    assert len(record["labels"]["spans"]) == 1  # the tie on claim 1 goes to caio's, the newest
    assert record["labels"]["hallucinated"] is True and record["reviewers"] == [
        "ana",
        "bia",
        "caio",
    ]
    rows.append(row(5, "dani", 1, False))  # now two of three say claim 1 is wrong
    assert len(labelled_record(verdict, rows)["labels"]["spans"]) == 2
    with pytest.raises(LabelError, match=r"^claims\[0\].claim_idx"):
        parse_submission({"claims": [{"claim_idx": True, "correct": True}]}, verdict)
    assert wilson(0, 0) is None
    low, high = wilson(8, 10)  # type: ignore[misc]
    assert 0.49 < low < 0.50 and 0.94 < high < 0.95


def test_a_schema_3_store_gets_sample_keys(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'v.db'}"
    from veredito.labels import sample_key
    from veredito.store.sql import open_sql_store

    old = open_sql_store(url, migrate_to=3)
    with old._using() as conn:
        conn.execute("INSERT INTO verdicts (app, id, status, hallucinated, evaluated_at, body) "
                     "VALUES ('a', 'x', 'ok', 0, '2026-11-30T00:00:00.000000Z', '{}')")  # fmt: skip
    old.close()
    new = open_store(url)
    with new._using() as conn:  # type: ignore[attr-defined]
        (key,) = conn.execute("SELECT sample_key FROM verdicts").fetchone()
    new.close()
    assert key == sample_key("a", "x")


def test_precision_gauges_follow_the_window(tmp_path: Path) -> None:
    """A precision whose labels left the window is no longer exported (a stale figure must not
    keep an alert firing)."""
    from prometheus_client import CollectorRegistry

    from veredito.labels import Label
    from veredito.store.sql import open_sql_store
    from veredito.web.reviewing import ReviewMetrics, refresh_precision

    url = f"sqlite:///{tmp_path / 'v.db'}"
    verdicts = judged_store(url, tmp_path)
    store = open_sql_store(url)
    try:
        for v in with_claims(verdicts, 1)[:5]:
            store.add_labels(
                v["metadata"].get("app", ""), v["id"], "ana", [Label("claim", 0, True)], share=1.0
            )
        metrics = ReviewMetrics(CollectorRegistry())
        refresh_precision(store, metrics, "2000-01-01T00:00:00.000000Z", 1.0)
        assert metrics.series and all(k[2] in ("llm", "rules") for k in metrics.series)
        assert metrics.precision_labels.collect()[0].samples
        refresh_precision(store, metrics, "2999-01-01T00:00:00.000000Z", 1.0)  # window empty
        assert not metrics.series
        assert not metrics.precision.collect()[0].samples
        assert not metrics.precision_labels.collect()[0].samples
    finally:
        store.close()


def test_the_cached_agreement_follows_new_labels(tmp_path: Path) -> None:
    """serve keeps each answer's share of the agreement until a new label of it comes: the
    cached figures equal a fresh computation after every label."""
    from veredito.labels import Label
    from veredito.store import Filters
    from veredito.store.sql import open_sql_store
    from veredito.web.reviewing import AgreementCache, agreement_of

    url = f"sqlite:///{tmp_path / 'v.db'}"
    verdicts = with_claims(judged_store(url, tmp_path), 1)[:12]
    store = open_sql_store(url)
    cache = AgreementCache()
    try:
        for n, v in enumerate(verdicts):
            app = v["metadata"].get("app", "")
            store.add_labels(app, v["id"], "ana", [Label("claim", 0, n % 2 == 0)], share=1.0)
            cached = agreement_of(store, Filters(), None, 1.0, cache)
            assert cached == agreement_of(store, Filters(), None, 1.0)
            assert cached["uniform"]["answers"] == n + 1
        v = verdicts[0]  # ana changes her mind on the first answer
        store.add_labels(
            v["metadata"].get("app", ""), v["id"], "ana", [Label("claim", 0, False)], share=1.0
        )
        assert agreement_of(store, Filters(), None, 1.0, cache) == agreement_of(
            store, Filters(), None, 1.0
        )
    finally:
        store.close()


def test_the_label_routes_answer_503_while_the_store_is_away(pg_url: str, tmp_path: Path) -> None:
    """A database that stops answering: each label route says so (503, ``store_unavailable``),
    ``/healthz`` still answers, and the routes work again once the database is back."""
    import psycopg

    from tests.conftest import PG_ADMIN

    verdicts = with_claims(judged_store(pg_url, tmp_path))
    name = pg_url.rsplit("/", 1)[1]
    env = {"VEREDITO_READ_TOKENS": READ, "VEREDITO_REVIEW_TOKENS": REVIEW}
    verdict = verdicts[0]
    app = verdict["metadata"].get("app", "")
    labels = f"/v1/verdicts/{verdict['id']}/labels?app={app}"
    body = {"claims": [{"claim_idx": 0, "correct": True}]}
    asks = [
        ("POST", labels, body, ANA),
        ("GET", labels, None, READ),
        ("GET", "/v1/review/next", None, ANA),
        ("GET", "/v1/agreement", None, READ),
    ]
    with server(tmp_path, "--store", pg_url, **env) as s:
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false')
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (name,),
            )
        try:
            for method, path, payload, token in asks:
                status, answer, _ = call(s.base, method, path, payload, token=token)
                assert status == 503, (path, status, answer)
                assert answer["error"]["code"] == "store_unavailable"
            assert call(s.base, "GET", "/healthz", token=None)[0] == 200
        finally:
            with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
                admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS true')
        for method, path, payload, token in asks:
            status, answer, _ = call(s.base, method, path, payload, token=token)
            assert status in (200, 201, 204), (path, status, answer)
