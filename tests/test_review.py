"""The read side of ``veredito serve``: the verdicts API and the review page, as a real process
over a real SQLite file or PostgreSQL database."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import markupsafe
import pytest

from tests.conftest import ROOT
from tests.test_serve import free_port
from tests.test_store import make_verdict
from veredito.store import open_store
from veredito.worker.verdict import Claim, RuleFinding, TripleInput, Verdict

READ = "leitura-1-7a4c2e9b0f,leitura-sac-3b8d1f6a2c:sac-bot"
INGEST = "ingest-1-9e2c4a7b1d"
HOSTILE = '<script>window.__pwned = 1</script>"><img src=x onerror="window.__pwned=2">'


def hostile_verdict() -> Verdict:
    """An answer that tries to run script through every field the page shows."""
    answer = f"O prazo é de 7 dias. {HOSTILE} Procure o Procon."
    return Verdict(
        id="hostil-1",
        status="ok",
        claims=[
            Claim(text="O prazo é de 7 dias.", verdict="grounded", chunk_idx=0, source="rules"),
            Claim(text=HOSTILE, verdict="invented", category="GENERICA", source="rules"),
            Claim(text="Procure o Procon.", verdict="invented", category="ENTIDADE_BR"),
        ],
        score=1 / 3,
        hallucinated=True,
        categories={"GENERICA": 1, "ENTIDADE_BR": 1},
        rule_findings=[
            RuleFinding(
                category="ENTIDADE_BR", text=HOSTILE, kind="absent_from_context", claim_idx=2
            )
        ],
        reasoning=HOSTILE,
        metadata={"app": "sac-bot<b>"},
        evaluated_at="2026-11-30T14:05:00.000000Z",
        input=TripleInput(
            query=f"Qual o prazo? {HOSTILE}",
            context=[f"O prazo de arrependimento é de 7 dias. {HOSTILE}"],
            answer=answer,
        ),
    )


@contextmanager
def reading(store_url: str, *extra: str, **env_extra: str) -> Iterator[str]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("VEREDITO_")}
    env.update(env_extra)
    process = subprocess.Popen(
        [sys.executable, "-m", "veredito", "serve", "--port", str(port), "--store", store_url,
         *extra],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert process.stdout is not None
    line = process.stdout.readline()
    assert f"listening on http://127.0.0.1:{port}" in line, process.stderr.read()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.returncode != 0:
            try:  # serve's spawned helpers may hold its stderr open: never wait on them
                err = process.communicate(timeout=5)[1]
            except subprocess.TimeoutExpired:
                err = "(stderr still held open by serve's helper processes)"
            raise AssertionError(f"serve exited with {process.returncode}: {err}")


def get(base: str, path: str, token: str | None = "leitura-1-7a4c2e9b0f", basic: bool = False
        ) -> tuple[int, Any, dict[str, str]]:  # fmt: skip
    request = urllib.request.Request(base + path)
    if token is not None:
        if basic:
            encoded = base64.b64encode(f"qualquer:{token}".encode()).decode()
            request.add_header("Authorization", f"Basic {encoded}")
        else:
            request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            status, raw, headers = response.status, response.read(), dict(response.headers)
    except urllib.error.HTTPError as exc:
        status, raw, headers = exc.code, exc.read(), dict(exc.headers)
    text = raw.decode("utf-8")
    if headers.get("Content-Type", "").startswith("application/json"):
        return status, json.loads(text), headers
    return status, text, headers


@pytest.fixture(params=["sqlite", "postgresql"])
def filled(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, list[Verdict]]]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'verdicts.db'}"
    else:
        url = request.getfixturevalue("pg_url")
    verdicts = [make_verdict(i) for i in range(60)]
    verdicts = [v.model_copy(update={"metadata": {"app": ("sac-bot", "rh-bot")[i % 2]}})
                for i, v in enumerate(verdicts)]  # fmt: skip
    store = open_store(url)
    store.write([v.model_dump_json().encode() for v in [*verdicts, hostile_verdict()]])
    store.close()
    yield url, [*verdicts, hostile_verdict()]


def test_the_api_lists_pages_filters_and_counts(filled: tuple[str, list[Verdict]]) -> None:
    url, verdicts = filled
    with reading(url, VEREDITO_READ_TOKENS=READ, VEREDITO_INGEST_TOKENS=INGEST) as base:
        seen: list[str] = []
        path = "/v1/verdicts?limit=9&app=rh-bot&hallucinated=true"
        while True:
            status, page, _ = get(base, path)
            assert status == 200, page
            seen += [item["id"] for item in page["items"]]
            if page["next_cursor"] is None:
                break
            path = f"/v1/verdicts?limit=9&app=rh-bot&hallucinated=true&cursor={page['next_cursor']}"
        expected = sorted(
            (v for v in verdicts if v.app == "rh-bot" and v.hallucinated),
            key=lambda v: (v.evaluated_at, v.id),
            reverse=True,
        )
        assert seen == [v.id for v in expected]

        status, one, _ = get(base, f"/v1/verdicts/{verdicts[3].id}")
        assert status == 200 and one == json.loads(verdicts[3].model_dump_json())
        assert get(base, "/v1/verdicts/nope")[0] == 404

        status, stats, _ = get(base, "/v1/stats?app=sac-bot&since=2026-11-30T13:30:00Z")
        chosen = [
            v for v in verdicts if v.app == "sac-bot" and v.evaluated_at >= "2026-11-30T13:30"
        ]
        assert status == 200
        assert stats["answers"] == len(chosen)
        assert stats["hallucinated"] == sum(v.hallucinated for v in chosen)


def test_read_and_ingest_tokens_open_only_their_own_routes(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'v.db'}"
    store = open_store(url)
    store.write([hostile_verdict().model_dump_json().encode(),
                 make_verdict(1).model_copy(update={"metadata": {"app": "rh-bot"}})
                 .model_dump_json().encode()])  # fmt: skip
    store.close()
    with reading(url, VEREDITO_READ_TOKENS=READ, VEREDITO_INGEST_TOKENS=INGEST) as base:
        assert get(base, "/v1/verdicts", token=None)[0] == 401
        assert get(base, "/v1/verdicts", token=INGEST)[0] == 401  # ingest cannot read
        status, page, headers = get(base, "/", token=None)
        assert status == 401 and headers["WWW-Authenticate"].startswith("Basic")
        assert get(base, "/", token="leitura-1-7a4c2e9b0f", basic=True)[0] == 200
        request = urllib.request.Request(  # a read token cannot ingest
            base + "/v1/triples", data=b"{}", method="POST",
            headers={"Authorization": "Bearer leitura-1-7a4c2e9b0f", "Content-Type": "application/json"},
        )  # fmt: skip
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=20)
        assert refused.value.code == 401
        # a token:app token sees its app only
        status, page, _ = get(base, "/v1/verdicts?app=rh-bot", token="leitura-sac-3b8d1f6a2c")
        assert status == 200 and page["items"] == []
        assert get(base, "/v1/verdicts/v-00001", token="leitura-sac-3b8d1f6a2c")[0] == 404
        assert get(base, "/v1/verdicts/v-00001", token="leitura-1-7a4c2e9b0f")[0] == 200


def test_bad_parameters_are_named(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'v.db'}"
    with reading(url, VEREDITO_READ_TOKENS=READ) as base:
        for query, name in [
            ("category=LEIS", "category"),
            ("hallucinated=talvez", "hallucinated"),
            ("since=ontem", "since"),
            ("limit=0", "limit"),
            ("cursor=abc", "cursor"),
        ]:
            status, body, _ = get(base, f"/v1/verdicts?{query}")
            assert status == 400, query
            assert body["error"]["code"] == "invalid_parameter"
            assert body["error"]["message"].startswith(name), body


def test_without_read_tokens_only_loopback_is_open(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'v.db'}"
    with reading(url) as base:  # 127.0.0.1, no tokens: a laptop
        assert get(base, "/v1/stats", token=None)[0] == 200
    env = {k: v for k, v in os.environ.items() if not k.startswith("VEREDITO_")}
    refused = subprocess.run(
        [sys.executable, "-m", "veredito", "serve", "--host", "0.0.0.0", "--port",
         str(free_port()), "--store", url],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert refused.returncode == 2
    assert "VEREDITO_READ_TOKENS" in refused.stderr


def test_the_page_escapes_everything_from_the_verdict(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'v.db'}"
    store = open_store(url)
    store.write([hostile_verdict().model_dump_json().encode()])
    store.close()
    with reading(url) as base:
        for path in ("/?period=", "/verdicts/hostil-1"):
            status, page, headers = get(base, path, token=None)
            assert status == 200
            assert "script-src" not in headers["Content-Security-Policy"]  # none at all
            assert "default-src 'none'" in headers["Content-Security-Policy"]
            assert "<script" not in page and "<img" not in page and "<b>" not in page
            assert 'onerror="' not in page
        assert str(markupsafe.escape(HOSTILE)) in page  # shown as text
        # the highlighted answer: three claims found in the text, each labelled
        assert page.count('class="claim v-') == 3 + 4  # + the legend
        assert "[3: inventada, Órgão ou entidade]" in page
        # the grounded claim's chunk, with the shared words marked
        assert "<mark>prazo</mark>" in page and "<mark>dias</mark>" in page


def test_a_verdict_without_its_input_says_so(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'v.db'}"
    store = open_store(url)
    store.write([make_verdict(5).model_copy(update={"input": None}).model_dump_json().encode()])
    store.close()
    with reading(url) as base:
        status, page, _ = get(base, "/verdicts/v-00005", token=None)
        assert status == 200 and "VEREDITO_VERDICT_INPUT=off" in page
        assert get(base, "/verdicts/missing", token=None)[0] == 404


def test_the_page_filters_by_dates_and_counts_what_it_shows(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'v.db'}"
    verdicts = [make_verdict(i * 60) for i in range(40)]  # one an hour back from 14:05 on 30/11
    store = open_store(url)
    store.write([v.model_dump_json().encode() for v in verdicts])
    store.close()
    on_the_30th = [v for v in verdicts if v.evaluated_at.startswith("2026-11-30")]
    assert 0 < len(on_the_30th) < len(verdicts)
    with reading(url) as base:
        status, page, _ = get(base, "/?de=2026-11-30&ate=2026-11-30", token=None)
        assert status == 200
        assert page.count('class="open"') == len(on_the_30th)
        assert f'<span class="n" id="n-answers">{len(on_the_30th)}</span>' in page
        status, page, _ = get(base, "/?de=2026-11-29&ate=2026-11-29&only=1", token=None)
        expected = [
            v for v in verdicts if v.evaluated_at.startswith("2026-11-29") and v.hallucinated
        ]
        assert page.count('class="open"') == len(expected)
        status, page, _ = get(base, "/?de=ontem", token=None)
        assert status == 400 and "de: " in page
