"""The review surface under abuse (issue 27), against a real ``serve`` on real SQLite and
PostgreSQL: label floods refused and reads that stay bounded however many labels an answer has,
a 400 that stores nothing, sessions that end on the server, no state change on a GET, app names
matched as given, what a review token reads, and workers side by side on one host."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.conftest import ROOT
from tests.healthwatch import HealthWatch
from tests.test_follow import URL as BROKER
from tests.test_follow import rabbitmq as rabbitmq  # the fixture
from tests.test_review import reading
from tests.test_review_labels_page import ANSWER, ANSWERS, csrf_of, send
from tests.test_serve import call
from veredito.labels import Label
from veredito.store import open_store

READ = "leitura-abuso-7a4c2e9b0f"
ANA, BIA = "rev-ana-abuso-8Kd3mQ7x", "rev-bia-abuso-2Pw9vL4c"
EVERY = "rev-rui-abuso-5Tg8wQ2e"  # a reviewer of every app
REVIEW = f"{ANA}:ana:sac-bot,{BIA}:bia:sac-bot,{EVERY}:rui"
SECRET = "segredo-de-sessao-de-teste-9f8e7d6c"
INGEST = "ingest-abuso-3Jk8pL2w"


def _store(url: str) -> None:
    store = open_store(url)
    store.write([v.model_dump_json().encode() for v in ANSWERS])
    store.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    url = (
        f"sqlite:///{tmp_path / 'v.db'}"
        if request.param == "sqlite"
        else request.getfixturevalue("pg_url")
    )
    _store(url)
    yield url


ENV = {
    "VEREDITO_READ_TOKENS": READ,
    "VEREDITO_REVIEW_TOKENS": REVIEW,
    "VEREDITO_REVIEW_SAMPLE": "1",
    "VEREDITO_SESSION_SECRET": SECRET,
}


@pytest.fixture
def site(tmp_path: Path) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'v.db'}"
    _store(url)
    with reading(url, **ENV) as base:
        yield base


def sign_in(base: str, token: str, **form: str) -> str:
    status, _, response = send(base, "POST", "/entrar", {"token": token, **form}, Origin=base)
    assert status == 303, status
    (cookie,) = response.msg.get_all("Set-Cookie") or []
    return cookie.split(";")[0]


def stored_labels(url: str, app: str, verdict_id: str) -> list[dict[str, Any]]:
    store = open_store(url)
    try:
        return store.labels_of(app, verdict_id)  # type: ignore[attr-defined,no-any-return]
    finally:
        store.close()


MISSED = [{"text": ANSWER[i % 30 :].strip(), "category": "GENERICA"} for i in range(50)]
BIG = {"note": "x" * 4000, "missed": MISSED, "hallucinated": True}


def post_label(base: str, token: str, body: Any, verdict_id: str = "sac-1",
               app: str = "sac-bot") -> tuple[int, Any, dict[str, str]]:  # fmt: skip
    return call(base, "POST", f"/v1/verdicts/{verdict_id}/labels?app={app}", body, token=token)


# -- bounded writes, bounded reads ------------------------------------------------------------
def test_a_label_flood_gets_429s_and_the_answer_stays_readable(store_url: str) -> None:
    """Found: one token wrote 2,650 submissions in 10 s, and the answer's page grew to 30 MB."""
    assert len(json.dumps(BIG)) > 10_000
    with reading(store_url, **ENV) as base:
        port = int(base.rsplit(":", 1)[1])
        statuses: list[int] = []
        retry_after: set[str] = set()
        bia_times: list[float] = []
        bia_statuses: list[int] = []
        stop = time.monotonic() + 10

        def flood() -> None:
            while time.monotonic() < stop:
                status, _, headers = post_label(base, ANA, BIG)
                statuses.append(status)
                if status == 429:
                    retry_after.add(headers.get("Retry-After", ""))

        def other_reviewer() -> None:
            for _ in range(5):  # within the default burst
                started = time.perf_counter()
                status, _, _ = post_label(base, BIA, {"hallucinated": False}, "sac-2")
                bia_times.append(time.perf_counter() - started)
                bia_statuses.append(status)
                time.sleep(0.5)  # paced like a person, to see the flood's effect on them

        with ThreadPoolExecutor(5) as pool:
            jobs = [pool.submit(flood) for _ in range(4)] + [pool.submit(other_reviewer)]
            for job in jobs:
                job.result()
        assert 429 in statuses, sorted(set(statuses))
        assert all(r.isdigit() and int(r) >= 1 for r in retry_after), retry_after
        assert set(statuses) <= {201, 409, 429}, sorted(set(statuses))
        assert bia_statuses == [201] * 5
        assert max(bia_times) < 1.0, bia_times
        submissions = {r["submission"] for r in stored_labels(store_url, "sac-bot", "sac-1")}
        assert 1 <= len(submissions) <= 20  # the default cap a reviewer has on one answer
        assert statuses.count(201) == len(submissions)
        _status, metrics, _ = call(base, "GET", "/metrics", token=None)
        assert 'veredito_review_refused_total{app="sac-bot",reason="rate"}' in str(metrics)

        cookie = sign_in(base, ANA)
        with HealthWatch(port) as health, ThreadPoolExecutor(4) as pool:
            pages = [pool.submit(timed_page, base, cookie) for _ in range(2)]
            apis = [pool.submit(walk_labels, base) for _ in range(2)]
            for job in pages:
                size, seconds = job.result()
                assert size < 2_000_000 and seconds < 2.0, (size, seconds)
            for job in apis:
                assert job.result() == submissions
        assert health.answers > 0 and health.slowest < 0.25, health.slowest


def timed_page(base: str, cookie: str) -> tuple[int, float]:
    started = time.perf_counter()
    status, text, _ = send(base, "GET", "/verdicts/sac-1?app=sac-bot", cookie=cookie)
    assert status == 200
    return len(text.encode()), time.perf_counter() - started


def walk_labels(base: str, limit: int = 7) -> set[str]:
    """Every submission of sac-1, page by page; no page larger than ``limit``."""
    seen: list[str] = []
    cursor = ""
    while True:
        path = f"/v1/verdicts/sac-1/labels?app=sac-bot&limit={limit}"
        path += f"&cursor={quote(cursor)}" if cursor else ""
        status, page, _ = call(base, "GET", path, token=READ)
        assert status == 200, page
        assert len(page["labels"]) <= limit
        seen += [s["submission"] for s in page["labels"] if s["reviewer"] == "ana"]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert len(seen) == len(set(seen))
    return set(seen)


def test_reads_stay_bounded_over_labels_stored_before_the_limits(tmp_path: Path) -> None:
    """An answer that already holds 2,000 submissions (a store written before the limits): its
    page shows each reviewer's latest, the rest behind a paged link, and stays small."""
    url = f"sqlite:///{tmp_path / 'v.db'}"
    _store(url)
    store = open_store(url)
    labels = [
        Label("claim", 0, True),
        *[Label("missed", None, None, "invented", "GENERICA", m["text"]) for m in MISSED],
        Label("answer", hallucinated=True, note="n" * 4000),
    ]
    for n in range(2000):
        store.add_labels("sac-bot", "sac-1", "ana" if n % 2 else "bia", labels)  # type: ignore[attr-defined]
    store.add_labels("sac-bot", "sac-1", "ana", [Label("answer", note="a última nota da ana")])  # type: ignore[attr-defined]
    store.close()
    with reading(url, **ENV) as base:
        cookie = sign_in(base, ANA)
        size, seconds = timed_page(base, cookie)
        assert size < 2_000_000 and seconds < 2.0, (size, seconds)
        _, page, _ = send(base, "GET", "/verdicts/sac-1?app=sac-bot", cookie=cookie)
        assert "a última nota da ana" in page
        assert page.count('class="review-note"') <= 2  # one per reviewer
        assert "/verdicts/sac-1/envios?app=sac-bot" in page  # the older ones, paged
        status, history, _ = send(base, "GET", "/verdicts/sac-1/envios?app=sac-bot",
                                  cookie=cookie)  # fmt: skip
        assert status == 200 and len(history.encode()) < 2_000_000
        assert "Envios anteriores" in history and "mais antigos" in history
        status, listing, _ = call(base, "GET", "/v1/verdicts/sac-1/labels?app=sac-bot", token=READ)
        assert status == 200 and len(listing["labels"]) == 50 and listing["next_cursor"]
        first = listing["labels"][0]
        assert first["note_truncated"] and len(first["note"]) <= 1000
        assert len(first["missed"]) <= 10 and first["missed_count"] == 50
        whole = call(base, "GET", f"/v1/verdicts/sac-1/labels/{first['submission']}?app=sac-bot",
                     token=READ)[1]  # fmt: skip
        assert len(whole["note"]) == 4000 and len(whole["missed"]) == 50


# -- every 400 stores nothing ---------------------------------------------------------------------
def test_bad_unicode_is_a_400_naming_the_field_and_stores_nothing(site: str) -> None:
    """Found: a lone surrogate in note gave a 500 (UnicodeEncodeError)."""
    for body, field in (
        ('{"note": "a\\ud800b"}', "note"),
        ('{"hallucinated": true, "missed": [{"text": "Procon\\udfff"}]}', "missed[0].text"),
    ):
        status, answer, _ = call(site, "POST", "/v1/verdicts/sac-1/labels?app=sac-bot", body,
                                 token=ANA)  # fmt: skip
        assert status == 400, answer
        assert answer["error"]["message"].startswith(field), answer
    assert call(site, "GET", "/v1/verdicts/sac-1/labels?app=sac-bot", token=READ)[1]["labels"] == []


def test_a_form_with_a_bad_field_stores_nothing(site: str) -> None:
    """Found: the form stored the labels, then answered 400 for a bad ``fila`` (and a 60 KB
    one came back as a 60 KB Location)."""
    cookie = sign_in(site, ANA)
    _, page, _ = send(site, "GET", "/verdicts/sac-1?app=sac-bot", cookie=cookie)
    csrf = csrf_of(page)
    for fila in ("f" * 60_000, "sac\x07bot"):
        status, text, response = send(
            site, "POST", "/verdicts/sac-1/rotulos?app=sac-bot",
            {"csrf": csrf, "claim-0": "certa", "fila": fila, "acao": "proxima"}, cookie=cookie,
        )  # fmt: skip
        assert status == 400, status
        assert len(response.getheader("Location") or "") < 1000
        assert "fila" in text
    assert call(site, "GET", "/v1/verdicts/sac-1/labels?app=sac-bot", token=READ)[1]["labels"] == []


# -- sessions -----------------------------------------------------------------------------------
def test_signing_out_ends_the_session_on_the_server(tmp_path: Path) -> None:
    """Found: after "Sair", the old cookie still read and labelled for 12 hours; a foreign Origin
    could sign a reviewer out."""
    url = f"sqlite:///{tmp_path / 'v.db'}"
    _store(url)
    with reading(url, **ENV) as base:
        old = sign_in(base, ANA)
        status, page, _ = send(base, "GET", "/verdicts/sac-1?app=sac-bot", cookie=old)
        assert status == 200
        csrf = csrf_of(page)
        status, _, _ = send(base, "POST", "/sair", {"csrf": csrf}, cookie=old,
                            Origin="http://evil.example")  # fmt: skip
        assert status == 403
        assert send(base, "GET", "/verdicts/sac-1?app=sac-bot", cookie=old)[0] == 200
        status, _, _response = send(base, "POST", "/sair", {"csrf": csrf}, cookie=old, Origin=base)
        assert status == 303
        assert send(base, "GET", "/verdicts/sac-1?app=sac-bot", cookie=old)[0] == 401
        status, _, _ = send(base, "POST", "/verdicts/sac-1/rotulos?app=sac-bot",
                            {"csrf": csrf, "claim-0": "certa"}, cookie=old)  # fmt: skip
        assert status == 403
        kept = sign_in(base, ANA, encerrar="")  # keeps the other sessions
        ended = sign_in(base, ANA)  # the default: a new sign-in ends the older sessions
        assert send(base, "GET", "/verdicts/sac-1?app=sac-bot", cookie=kept)[0] == 401
        assert send(base, "GET", "/verdicts/sac-1?app=sac-bot", cookie=ended)[0] == 200
    with reading(url, **ENV) as base:  # a restart (or another replica) with the same secret
        assert send(base, "GET", "/verdicts/sac-1?app=sac-bot", cookie=old)[0] == 401
        assert send(base, "GET", "/verdicts/sac-1?app=sac-bot", cookie=ended)[0] == 200
    assert stored_labels(url, "sac-bot", "sac-1") == []


def test_the_session_key_is_keyed_by_the_secret(tmp_path: Path) -> None:
    """Found: the session key was sha256("session:" + token)[:32], the same on every server:
    one cookie let anyone test token guesses offline."""
    url = f"sqlite:///{tmp_path / 'v.db'}"
    _store(url)
    keys = []
    for secret in (SECRET, SECRET + "-outro"):
        with reading(url, **{**ENV, "VEREDITO_SESSION_SECRET": secret}) as base:
            keys.append(sign_in(base, ANA).split("=", 1)[1].split(".")[0])
    bare = hashlib.sha256(b"session:" + ANA.encode()).hexdigest()[:32]
    assert bare not in keys and keys[0] != keys[1]


@pytest.mark.parametrize("secret", ["a", "CHANGE-ME", "quinze-letras-1"])
def test_a_short_session_secret_stops_serve(tmp_path: Path, secret: str) -> None:
    """Found: ``a``, ``CHANGE-ME`` and the empty string were taken as keys."""
    done = subprocess.run(
        [sys.executable, "-m", "veredito", "serve", "--port", "0", "--store",
         f"sqlite:///{tmp_path / 'v.db'}"],
        env={**os.environ, **ENV, "VEREDITO_SESSION_SECRET": secret}, cwd=ROOT,
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "VEREDITO_SESSION_SECRET" in done.stderr and "16" in done.stderr
    if len(secret) > 3:  # the value itself is never printed
        assert secret not in done.stderr


def test_an_empty_session_secret_is_unset_with_a_warning(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'v.db'}"
    _store(url)
    process = subprocess.Popen(
        [sys.executable, "-m", "veredito", "serve", "--port", "0", "--store", url],
        env={**os.environ, **ENV, "VEREDITO_SESSION_SECRET": ""}, cwd=ROOT,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None and "listening on" in process.stdout.readline()
    finally:
        process.terminate()
        _, err = process.communicate(timeout=30)
    assert "VEREDITO_SESSION_SECRET" in err and "restart" in err


# -- no state change on a GET ----------------------------------------------------------------------
def test_taking_the_next_answer_is_a_post_with_csrf(site: str) -> None:
    """Found: six <img> tags pointing at GET /revisar/proxima emptied a reviewer's queue."""
    cookie = sign_in(site, ANA)
    for _ in range(6):
        status, page, response = send(site, "GET", "/revisar/proxima?app=sac-bot", cookie=cookie)
        assert status == 200 and response.getheader("Location") is None
        assert 'method="post" action="/revisar/proxima"' in page
    csrf = csrf_of(page)
    status, _, _ = send(site, "POST", "/revisar/proxima", {"app": "sac-bot"}, cookie=cookie)
    assert status == 403  # no csrf
    served = []
    for _ in range(2):
        status, _, response = send(site, "POST", "/revisar/proxima",
                                   {"app": "sac-bot", "csrf": csrf}, cookie=cookie)  # fmt: skip
        assert status == 303
        served.append(response.getheader("Location").split("?")[0])
    # the GETs took nothing: the two POSTs got both of sac-bot's answers
    assert sorted(served) == ["/verdicts/sac-1", "/verdicts/sac-2"]
    _, listing, _ = send(site, "GET", "/?app=sac-bot", cookie=cookie)
    assert 'action="/revisar/proxima"' in listing and 'href="/revisar/proxima' not in listing


# -- app names as given -----------------------------------------------------------------------------
def test_app_names_are_matched_exactly_and_checked_at_ingest(
    tmp_path: Path, rabbitmq: None
) -> None:
    """Found: ``?app=`` was stripped, so a label meant for "sac-bot " was stored under "sac-bot"."""
    from tests.test_serve_security import server

    url = f"sqlite:///{tmp_path / 'v.db'}"
    _store(url)
    with reading(url, **ENV) as base:
        status, answer, _ = post_label(base, EVERY, {"hallucinated": True}, app="sac-bot%20")
        assert status == 404, answer
        status, page, _ = call(base, "GET", "/v1/verdicts?app=sac-bot%20", token=READ)
        assert status == 200 and page["items"] == []
        status, answer, _ = call(base, "GET", "/v1/verdicts/sac-1?app=%20sac-bot", token=READ)
        assert status == 404
    assert stored_labels(url, "sac-bot", "sac-1") == []
    with server(tmp_path, broker=BROKER, VEREDITO_INGEST_TOKENS=INGEST) as s:
        body = [
            {"id": f"t{n}", "query": "Qual o prazo?", "context": ["O prazo é de 7 dias."],
             "answer": "O prazo é de 7 dias.", "metadata": {"app": app}}
            for n, app in enumerate(["rh-bot ", " rh-bot", "rh\x07bot", "rh\nbot", "rh-bot"])
        ]  # fmt: skip
        status, answer, _ = call(s.base, "POST", "/v1/triples", body, token=INGEST)
        assert status in (200, 202), answer
        refused = {r["index"]: r["error"] for r in answer["rejected"]}
        assert sorted(refused) == [0, 1, 2, 3], answer
        assert all(e.startswith("metadata.app") for e in refused.values()), refused


# -- what a review token reads ------------------------------------------------------------------------
def test_a_review_token_reads_the_answers_of_its_app(site: str) -> None:
    """Found: docs/security.md said reviewers read like readers of their app; the verdicts API
    refused review tokens. Now both say: the answers of its app, on the page and the API."""
    status, page, _ = call(site, "GET", "/v1/verdicts", token=ANA)
    assert status == 200 and {v["metadata"]["app"] for v in page["items"]} == {"sac-bot"}
    assert call(site, "GET", "/v1/verdicts/sac-1?app=sac-bot", token=ANA)[0] == 200
    assert call(site, "GET", "/v1/verdicts/rh-1?app=rh-bot", token=ANA)[0] == 404
    assert call(site, "GET", "/v1/verdicts/rh-1", token=ANA)[0] == 404
    status, stats, _ = call(site, "GET", "/v1/stats", token=ANA)
    assert status == 200 and stats["answers"] == 2
    status, page, _ = call(site, "GET", "/v1/verdicts", token=EVERY)
    assert status == 200 and len(page["items"]) == 3
    docs = (ROOT / "docs" / "security.md").read_text()
    assert "the verdicts API" in docs.split("**reviewer**", 1)[1].split("\n", 1)[0]
