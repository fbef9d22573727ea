"""Calibration that refits itself from reviewers' labels (issue 30), against a real ``serve`` on
real SQLite and PostgreSQL stores: labels posted through the API make serve fit, judge and store
a candidate; the one that beats the current calibration on the uniform slice's held-out quarter
is served by ``GET /v1/calibration`` and followed by the judges (``VEREDITO_CALIBRATION=<URL>``),
which stamp its version on every verdict; one that would be worse is stored, not adopted;
``calibrate --rollback`` makes an older one current; the uniform flag recorded with each label
makes ``calibrate --from-store`` agree with the API whatever the caller's share."""

from __future__ import annotations

import asyncio
import http.server
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.test_serve import call, free_port
from veredito.labels import Label, sample_key
from veredito.store.sql import open_sql_store

DEVSET = ROOT / "tests" / "data" / "devset.jsonl"
READ = "read-every-app-4Fg7kT1q"
READ_ONE_APP = "read-one-app-8Hj2mW5e"
REVIEW = "rev-ana-token-8Kd3mQ7x:ana,rev-bia-token-2Pw9vL4c:bia"
ANA, BIA = "rev-ana-token-8Kd3mQ7x", "rev-bia-token-2Pw9vL4c"
SHARE = 0.5  # serve's uniform slice in these tests: about half the answers


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'v.db'}"
    else:
        yield request.getfixturevalue("pg_url")


def judged(url: str, tmp_path: Path) -> list[dict[str, Any]]:
    """The dev set judged by the rules judge into ``url``: the judged answers with claims."""
    out = tmp_path / "verdicts.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "veredito", "run", str(DEVSET), "--judge", "rules", "--to", url,
         "--out", str(out), "--no-progress"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env=_env(),
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    verdicts = [json.loads(line) for line in out.read_text().splitlines()]
    return [v for v in verdicts if v["status"] == "ok" and v["claims"]]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VEREDITO_")}
    return {**env, "VEREDITO_CACHE_TTL": "0", **extra}


@contextmanager
def serving(url: str, log: Path, **env: str) -> Iterator[str]:
    """``veredito serve --store url``, its log in ``log`` (read by the tests, never a full pipe)."""
    port = free_port()
    with log.open("w") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "veredito", "serve", "--port", str(port), "--store", url],
            env=_env(**env), cwd=ROOT, stdout=subprocess.PIPE, stderr=err, text=True,
        )  # fmt: skip
        assert process.stdout is not None
        line = process.stdout.readline()
        assert f"listening on http://127.0.0.1:{port}" in line, log.read_text()
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    assert process.returncode == 0, log.read_text()


def until(what: str, check: Callable[[], Any], seconds: float = 60.0) -> Any:
    """``check()``'s first truthy answer, asked until ``seconds`` pass (then the test fails)."""
    deadline = time.monotonic() + seconds
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.1)


def get(base: str, path: str, token: str | None = READ, **headers: str) -> tuple[int, Any, Any]:
    request = urllib.request.Request(base + path, headers=headers)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            raw, status, got = response.read(), response.status, response.headers
    except urllib.error.HTTPError as exc:
        raw, status, got = exc.read(), exc.code, exc.headers
    return status, json.loads(raw) if raw else None, got


def label_all(base: str, verdicts: list[dict[str, Any]], token: str,
              right: Callable[[dict[str, Any]], bool]) -> None:  # fmt: skip
    """One submission per answer: every claim marked right (or wrong) as ``right`` says."""
    for v in verdicts:
        body = {"claims": [{"claim_idx": i, "correct": right(v)} for i in range(len(v["claims"]))]}
        path = f"/v1/verdicts/{v['id']}/labels?app={v['metadata'].get('app', '')}"
        status, answer, _ = call(base, "POST", path, body, token=token)
        assert status == 201, answer


def uniform(v: dict[str, Any]) -> bool:
    return sample_key(v["metadata"].get("app", ""), v["id"]) < SHARE


def cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "veredito", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env=_env(**env),
    )  # fmt: skip


def judged_with(feed: Any) -> dict[str, Any]:
    """One triple judged by a rules judge that follows ``feed``, through the pipeline: the
    verdict's ``judge`` as it is serialised."""
    from veredito.worker.judges.rules import RulesJudge
    from veredito.worker.pipeline import Pipeline

    judge = RulesJudge()
    feed.follow(judge)
    triple = {"id": "t-1", "query": "Qual o prazo?", "context": ["O prazo é de 7 dias."],
              "answer": "O prazo é de 30 dias."}  # fmt: skip
    outcome = asyncio.run(Pipeline(judge).evaluate({"triple": triple}))
    return dict(json.loads(outcome.verdict.model_dump_json())["judge"])


def test_labels_refit_the_calibration_and_the_judges_follow(
    store_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from veredito.worker.calibration_feed import CalibrationFeed

    verdicts = judged(store_url, tmp_path)
    env = {"VEREDITO_READ_TOKENS": f"{READ},{READ_ONE_APP}:aereo", "VEREDITO_REVIEW_TOKENS": REVIEW,
           "VEREDITO_REVIEW_SAMPLE": str(SHARE), "VEREDITO_REVIEW_RATE": "0",
           "VEREDITO_REFIT_MIN_LABELS": str(len(verdicts)), "VEREDITO_REFIT_INTERVAL": "0.3",
           "VEREDITO_REVIEW_REFRESH": "0.5"}  # fmt: skip
    log = tmp_path / "serve.log"
    with serving(store_url, log, **env) as base:
        route = f"{base}/v1/calibration"
        # nothing fitted yet: 404, and a worker starts on the shipped calibration, warned once
        assert get(base, "/v1/calibration")[0] == 404
        assert get(base, "/v1/calibrations")[1] == {"current": None, "calibrations": []}
        feed = CalibrationFeed(route, READ, poll=3600)
        with caplog.at_level(logging.WARNING):
            feed.start()
        feed.stop()
        warned = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warned) == 1 and "the store has none yet" in warned[0].getMessage()
        assert feed.version is None and judged_with(feed)["calibration"] == "default"
        assert "calibration_version" not in judged_with(feed)  # omitted when there is none

        # 1. a reviewer confirms every claim: the refit beats the shipped calibration
        label_all(base, verdicts, ANA, lambda v: True)
        listed = until("a first calibration", lambda: get(base, "/v1/calibrations")[1]
                       if get(base, "/v1/calibrations")[1]["calibrations"] else None)  # fmt: skip
        assert listed["current"] == 1
        first = listed["calibrations"][0]
        assert first["version"] == 1 and first["adopted"] and first["current"]
        figures = first["figures"]
        assert figures["compared_with"]["name"] == "default"
        assert figures["candidate"]["log_loss"] < figures["compared_with"]["log_loss"]
        assert figures["candidate"]["ece"] <= figures["compared_with"]["ece"]
        assert figures["labels"]["answers"] == len(verdicts) and figures["held_out"]["claims"]
        assert figures["labels"]["uniform"] == sum(map(uniform, verdicts))
        status, body, headers = get(base, "/v1/calibration")
        assert status == 200 and body["version"] == 1 and body["name"] == "store-v1"
        assert body["format"] == "veredito.calibration/1" and headers["ETag"] == '"1"'
        assert get(base, "/v1/calibration", **{"If-None-Match": '"1"'})[0] == 304
        assert get(base, "/v1/calibration", **{"If-None-Match": 'W/"1"'})[0] == 304
        assert get(base, "/v1/calibration", **{"If-None-Match": '"0"'})[0] == 200
        assert get(base, "/v1/calibration?version=1")[1]["version"] == 1
        assert get(base, "/v1/calibration?version=7")[0] == 404
        assert get(base, "/v1/calibration?version=x")[0] == 400
        # who may read it: a read token of every app; none or a wrong one 401, one app's 403
        assert get(base, "/v1/calibration", token=None)[0] == 401
        assert get(base, "/v1/calibration", token="not-a-token-7Hs2kQ9w")[0] == 401
        assert get(base, "/v1/calibration", token=READ_ONE_APP)[0] == 403
        assert get(base, "/v1/calibrations", token=READ_ONE_APP)[0] == 403
        assert get(base, "/v1/calibrations", token=None)[0] == 401
        metrics = call(base, "GET", "/metrics", token=None)[1]
        assert "veredito_calibration_version 1.0" in metrics
        assert 'veredito_calibration_refits_total{outcome="adopted"} 1.0' in metrics
        assert f"veredito_calibration_held_out_ece {figures['candidate']['ece']}" in metrics
        line = next(x for x in log.read_text().splitlines() if "calibration refit:" in x)
        assert " INFO " in line and "version 1 adopted" in line and "log loss" in line

        # the worker's loader picks it up at its next poll and stamps the version
        assert feed.fetch() and feed.version == 1
        stamped = judged_with(feed)
        assert stamped["calibration"] == "store-v1" and stamped["calibration_version"] == 1
        assert not feed.fetch()  # 304: unchanged
        # veredito run with the URL: every verdict carries the version
        run = cli("run", str(DEVSET), "--judge", "rules", "--no-progress", VEREDITO_CALIBRATION=route,
                  VEREDITO_CALIBRATION_TOKEN=READ)  # fmt: skip
        assert run.returncode in (0, 1), run.stderr
        judges = [json.loads(x)["judge"] for x in run.stdout.splitlines()]
        assert judges and all(j["calibration_version"] == 1 for j in judges)

        # the uniform flag is recorded: the agreement is the same whatever the caller's share
        store = open_sql_store(store_url)
        try:
            for v in verdicts[:20]:
                rows = store.labels_of(v["metadata"].get("app", ""), v["id"])
                assert {r["uniform"] for r in rows} == {uniform(v)}
        finally:
            store.close()
        api = get(base, "/v1/agreement")[1]
        assert api["uniform"]["answers"] == sum(map(uniform, verdicts))
        for share in ("0.01", "1"):
            mine = cli("calibrate", "--from-store", store_url, "--json",
                       VEREDITO_REVIEW_SAMPLE=share)  # fmt: skip
            assert mine.returncode == 0, mine.stderr
            got = json.loads(mine.stdout)
            assert got["uniform"] == api["uniform"]
            assert got["chosen_to_teach"] == api["chosen_to_teach"]
        exported = tmp_path / "uniform.jsonl"
        done = cli("labels", "export", "--from", store_url, "--to", str(exported), "--slice",
                   "uniform", VEREDITO_REVIEW_SAMPLE="1")  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert len(exported.read_text().splitlines()) == api["uniform"]["answers"]

        # 2. another reviewer, later, calls every claim of the answers chosen to teach wrong
        # (the newest label breaks the tie): a candidate fitted on them is worse on the
        # held-out quarter of the uniform slice, which still says right: stored, not adopted
        label_all(base, verdicts, BIA, uniform)
        listed = until("a second calibration", lambda: (
            found if len((found := get(base, "/v1/calibrations")[1])["calibrations"]) == 2
            else None))  # fmt: skip
        second = listed["calibrations"][0]
        assert second["version"] == 2 and not second["adopted"] and not second["current"]
        assert listed["current"] == 1
        worse = second["figures"]
        assert worse["compared_with"]["version"] == 1
        assert worse["candidate"]["log_loss"] >= worse["compared_with"]["log_loss"]
        assert get(base, "/v1/calibration")[1]["version"] == 1
        until("the rejection counted", lambda: 'veredito_calibration_refits_total{outcome='
              '"rejected"} 1.0' in call(base, "GET", "/metrics", token=None)[1])  # fmt: skip
        assert "version 2 rejected" in log.read_text()

        # 3. rollback: any stored version can be made current; an unknown one is named
        listing = cli("calibrate", "--list", "--store", store_url)
        assert listing.returncode == 0, listing.stderr
        rows = [x.split() for x in listing.stdout.splitlines()[1:]]
        assert [(r[0], r[2], r[-1] == "*") for r in rows] == [
            ("2", "no", False),
            ("1", "yes", True),
        ]
        assert cli("calibrate", "--rollback", "2", "--store", store_url).returncode == 0
        assert get(base, "/v1/calibration", **{"If-None-Match": '"1"'})[0] == 200
        assert feed.fetch() and judged_with(feed)["calibration_version"] == 2
        unknown = cli("calibrate", "--rollback", "9", "--store", store_url)
        assert unknown.returncode == 2 and "version 9" in unknown.stderr
        assert cli("calibrate", "--rollback", "1", "--store", store_url).returncode == 0
        status, body, headers = get(base, "/v1/calibration")
        assert body["version"] == 1 and headers["ETag"] == '"1"'
        assert get(base, "/v1/calibrations")[1]["current"] == 1
        until("the gauge after the rollbacks", lambda: "veredito_calibration_version 1.0"
              in call(base, "GET", "/metrics", token=None)[1])  # fmt: skip
        assert feed.fetch() and judged_with(feed)["calibration_version"] == 1
    assert "Bearer" not in log.read_text() and READ not in log.read_text()


def test_a_candidate_made_worse_is_stored_but_not_adopted(tmp_path: Path) -> None:
    """The refit serve runs, in-process: a candidate whose every probability is pushed the wrong
    way is judged on the held-out quarter, stored with its figures, and not adopted."""
    from veredito.serving.refit import refit

    url = f"sqlite:///{tmp_path / 'v.db'}"
    verdicts = judged(url, tmp_path)
    store = open_sql_store(url)
    try:
        for v in verdicts:
            labels = [Label("claim", i, True) for i in range(len(v["claims"]))]
            store.add_labels(v["metadata"].get("app", ""), v["id"], "ana", labels, share=SHARE)
        assert refit(store, min_labels=len(verdicts) + 1) == {
            "skipped": f"{len(verdicts)} answers labelled since the last fit (fewer than "
            f"{len(verdicts) + 1})"
        }

        def worse(body: dict[str, Any]) -> dict[str, Any]:
            for judge in body["judges"].values():
                for part in ("flagged", "grounded"):
                    judge[part] = {"kind": "table", "table": [], "default": 0.03}
            return body

        result = refit(store, min_labels=1, tamper=worse)
        assert result["version"] == 1 and not result["adopted"]
        assert result["figures"]["compared_with"]["name"] == "default"
        assert "log loss" in result["figures"]["reason"]
        assert store.current_calibration_version() is None  # the shipped one stays
        assert store.calibrations()[0]["figures"] == result["figures"]
        assert refit(store, min_labels=1)["skipped"]  # no new labels since that fit
    finally:
        store.close()


def test_labels_of_an_older_schema_are_given_the_default_shares_flag(tmp_path: Path) -> None:
    """Schema 8 back-fills labels.uniform with the default share's rule (sample key < 0.05)."""
    url = f"sqlite:///{tmp_path / 'v.db'}"
    verdicts = judged(url, tmp_path)
    store = open_sql_store(url)
    with store._using() as conn:  # labels as schema 7 wrote them: no uniform column
        conn.execute("DROP TABLE calibration_current")
        conn.execute("DROP TABLE calibrations")
        conn.execute("ALTER TABLE labels DROP COLUMN uniform")
        conn.execute("DELETE FROM schema_version WHERE version = 8")
        for v in verdicts:
            conn.execute(
                "INSERT INTO labels (submission, app, verdict_id, kind, claim_idx, reviewer, "
                "created_at, correct) VALUES ('s', ?, ?, 'claim', 0, 'ana', '2026-01-01', 1)",
                (v["metadata"].get("app", ""), v["id"]),
            )
    store.close()
    store = open_sql_store(url)
    try:
        keys = {v["id"]: sample_key(v["metadata"].get("app", ""), v["id"]) for v in verdicts}
        flags = {v["id"]: store.labels_of(v["metadata"].get("app", ""), v["id"])[0]["uniform"]
                 for v in verdicts}  # fmt: skip
        assert flags == {k: key < 0.05 for k, key in keys.items()}
        assert any(flags.values())
    finally:
        store.close()


BODIES: list[bytes] = []  # what the little server below answers, in order


class _Calibrations(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = BODIES.pop(0)
        self.send_response(200)
        self.send_header("ETag", f'"{len(BODIES)}"')
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return None


def test_a_bad_calibration_is_refused_and_the_last_good_one_kept(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from veredito.worker.calibration_feed import CalibrationFeed
    from veredito.worker.confidence import default_calibration

    good = {**default_calibration().body, "name": "store-v4", "version": 4}
    BODIES[:] = [
        json.dumps(good).encode(),
        json.dumps({**good, "version": 5, "format": "other/1"}).encode(),
        b"{not json",
        json.dumps({**good, "version": 6, "judges": {"rules": good["judges"]["rules"]}}).encode(),
    ]
    server = http.server.HTTPServer(("127.0.0.1", 0), _Calibrations)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        feed = CalibrationFeed(f"http://127.0.0.1:{server.server_port}/v1/calibration", poll=3600)
        assert feed.fetch() and feed.version == 4
        with caplog.at_level(logging.WARNING):
            for _ in range(3):
                assert not feed.fetch()
        said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(said) == 3 and all("keeping version 4" in m for m in said)
        assert "not a veredito calibration" in said[0] and "not JSON" in said[1]
        assert "judges must hold rules and llm" in said[2]
        assert feed.version == 4 and judged_with(feed)["calibration_version"] == 4
    finally:
        server.shutdown()
        server.server_close()


def test_an_unreachable_calibration_url_is_a_warning_not_a_stop(tmp_path: Path) -> None:
    route = f"http://127.0.0.1:{free_port()}/v1/calibration"
    triples = tmp_path / "t.jsonl"
    triples.write_text(DEVSET.read_text().splitlines()[0] + "\n")
    run = cli("run", str(triples), "--judge", "rules", "--no-progress", VEREDITO_CALIBRATION=route)
    assert run.returncode in (0, 1), run.stderr
    assert run.stderr.count("WARNING") == 1 and "shipped calibration" in run.stderr
    judge = json.loads(run.stdout)["judge"]
    assert judge["calibration"] == "default" and "calibration_version" not in judge
