"""Releases (spec §18) from ingest to the API: ``metadata.release`` checked by the contract and
taken from each route (the HTTP body, OTLP's ``service.version``, aferiq-eval's agent traces,
``run --release``), stored in its column (schema 7, back-filled), filterable in the verdicts API,
listed by ``GET /v1/releases`` and compared by ``GET /v1/compare`` on real SQLite and PostgreSQL.
"""

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
from tests.test_review import get, reading
from tests.test_serve import call, queued, serving
from tests.test_serve import rabbitmq as rabbitmq  # the fixture
from veredito.producer.ingest import from_aferiq
from veredito.producer.otlp import TraceAssembler, decode
from veredito.producer.triple import InvalidTriple, parse_triple, rejection
from veredito.store import open_store
from veredito.store.sql import SQLStore, open_sql_store

READ = "leitura-1-7a4c2e9b0f"
SAC_ONLY = "leitura-sac-3c9e1a7f52"
ANA = "rev-ana-token-8Kd3mQ7x"  # a reviewer's token (spec §16)


def triple(**metadata: Any) -> dict[str, Any]:
    return {"query": "Qual o prazo?", "context": ["O prazo é de 7 dias."],
            "answer": "O prazo é de 7 dias.", "metadata": metadata}  # fmt: skip


# -- the contract --------------------------------------------------------------------------


@pytest.mark.parametrize("release", ["v1.2.3", "2026.12.02+rc-1", "a_b", "x" * 64])
def test_a_release_of_plain_characters_is_taken(release: str) -> None:
    assert parse_triple(triple(release=release)).release == release


def test_no_release_is_unknown() -> None:
    assert parse_triple(triple()).release == "unknown"
    assert parse_triple(triple(release=None)).release == "unknown"


@pytest.mark.parametrize(
    ("release", "reason"),
    [
        ("v1 beta", "' ' is not allowed"),
        ("versão-2", "'ã' is not allowed"),
        ("x" * 65, "65 characters, limit is 64"),
        ("", "must not be empty"),
        (3, "must be a string, got number"),
        ("v1/../x", "'/' is not allowed"),
    ],
)
def test_a_bad_release_is_rejected_naming_the_field(release: Any, reason: str) -> None:
    with pytest.raises(InvalidTriple) as caught:
        parse_triple(triple(app="sac-bot", release=release))
    assert caught.value.field == "metadata.release"
    assert reason in str(caught.value)


def test_run_release_sets_it_on_every_line_and_refuses_a_bad_one(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(
        "\n".join(
            json.dumps({**triple(app="sac-bot", release="old"), "id": f"t{i}"}) for i in range(3)
        )
        + "\n"
    )
    out = tmp_path / "out.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "veredito", "run", str(source), "--release", "v2.0",
         "--out", str(out), "--no-progress"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    verdicts = [json.loads(line) for line in out.read_text().splitlines()]
    assert [v["metadata"]["release"] for v in verdicts] == ["v2.0"] * 3
    assert {v["metadata"]["app"] for v in verdicts} == {"sac-bot"}
    bad = subprocess.run(
        [sys.executable, "-m", "veredito", "run", str(source), "--release", "v 2"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert bad.returncode == 2 and "--release" in bad.stderr and "' ' is not allowed" in bad.stderr


def test_produce_release_maps_metadata_release() -> None:
    from veredito.producer.mapping import Mapper, parse_maps

    mapper = Mapper(parse_maps(['metadata.release=`"v3"`']))
    mapped = mapper.apply(triple(app="sac-bot", release="old"))
    assert mapped["metadata"] == {"app": "sac-bot", "release": "v3"}


def test_otlp_service_version_is_the_release() -> None:
    def attr(key: str, value: str) -> dict[str, Any]:
        return {"key": key, "value": {"stringValue": value}}

    spans = [
        {"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331",
         "name": "rag", "startTimeUnixNano": "1", "endTimeUnixNano": "2",
         "attributes": [attr("openinference.span.kind", "CHAIN"),
                        attr("input.value", "Qual o prazo?"),
                        attr("output.value", "O prazo é de 7 dias.")]},
    ]  # fmt: skip
    for version, expected in (("2.4.1", "2.4.1"), (None, None)):
        resource = [attr("service.name", "sac-bot")]
        if version is not None:
            resource.append(attr("service.version", version))
        body = {"resourceSpans": [{"resource": {"attributes": resource},
                                   "scopeSpans": [{"spans": spans}]}]}  # fmt: skip
        [made] = TraceAssembler().add("t", decode(json.dumps(body).encode(), "application/json"))
        assert made["metadata"].get("release") == expected
    # a version the contract would not take is named at the triple's check
    resource = [attr("service.name", "sac-bot"), attr("service.version", "2.4.1 (build 7)")]
    body = {"resourceSpans": [{"resource": {"attributes": resource},
                               "scopeSpans": [{"spans": spans}]}]}  # fmt: skip
    [made] = TraceAssembler().add("t", decode(json.dumps(body).encode(), "application/json"))
    with pytest.raises(InvalidTriple, match=r"metadata\.release") as caught:
        parse_triple({**made, "context": ["x"]})
    assert caught.value.field == "metadata.release"
    assert rejection(made, caught.value).startswith(
        "metadata.release (from the resource's service.version): ' ' is not allowed"
    )


def test_an_aferiq_agent_trace_names_its_release_by_its_metadata() -> None:
    trace = {"trace_id": "t-1", "goal": "Qual o prazo?", "final_answer": "7 dias.",
             "steps": [{"step_type": "retrieval", "step_output": "O prazo é de 7 dias."}]}  # fmt: skip
    assert "release" not in from_aferiq(trace)["metadata"]
    for metadata, expected in (
        ({"version": "1.4"}, "1.4"),
        ({"app_version": "2.0", "version": "1.4"}, "2.0"),
        ({"release": "3.1", "app_version": "2.0"}, "3.1"),
    ):
        made = from_aferiq({**trace, "metadata": metadata})
        assert made["metadata"]["release"] == expected
        assert parse_triple(made).release == expected
        assert "release_from" not in made["metadata"]  # said only of a release refused
    for metadata, source in (
        ({"app_version": "2.0 beta"}, "the trace's metadata.app_version"),
        ({"version": "1.4 (rc)"}, "the trace's metadata.version"),
        ({"release": "3.1 final", "version": "1.4"}, None),  # its own: named as itself
    ):
        made = from_aferiq({**trace, "metadata": metadata})
        with pytest.raises(InvalidTriple) as caught:
            parse_triple(made)
        said = rejection(made, caught.value)
        where = f" (from {source})" if source else ""
        assert said.startswith(f"metadata.release{where}: ' ' is not allowed"), said


# -- the store -------------------------------------------------------------------------------


def verdict(app: str, release: str | None, n: int, bad: str | None, day: int = 1,
            confidence: float = 0.9, also: str | None = None) -> dict[str, Any]:  # fmt: skip
    """A judged answer of ``app``; ``bad``: the category of its invented claim, ``also`` that of
    a second one."""
    claims = [{"text": "O prazo é de 7 dias.", "verdict": "grounded", "category": None,
               "chunk_idx": 0, "source": "rules", "confidence": 0.95}]  # fmt: skip
    for category in (bad, also):
        if category is not None:
            claims.append({"text": f"Flag {category}.", "verdict": "invented",
                           "category": category, "chunk_idx": None, "source": "rules",
                           "confidence": confidence})  # fmt: skip
    categories = {c: 1 for c in (bad, also) if c is not None}
    metadata: dict[str, Any] = {"app": app}
    if release is not None:
        metadata["release"] = release
    return {
        "id": f"{app}-{release}-{n}", "status": "ok", "error": None, "claims": claims,
        "score": 0.5 if bad else 1.0, "hallucinated": bad is not None,
        "categories": categories,
        "hallucination_confidence": confidence if bad else None, "metadata": metadata,
        "evaluated_at": f"2026-11-{day:02d}T10:{n // 60 % 60:02d}:{n % 60:02d}.000000Z",
    }  # fmt: skip


def release_set(app: str, release: str, answers: int, hallucinated: int, day: int,
                category: str = "PRAZO_VALOR") -> list[dict[str, Any]]:  # fmt: skip
    """``answers`` judged answers, the first ``hallucinated`` of them with a ``category`` flag,
    and the first ten (in every release alike) a LEI flag too, that does not change."""
    return [
        verdict(
            app,
            release,
            n,
            category if n < hallucinated else None,
            day,
            also="LEI" if n < 10 else None,
        )
        for n in range(answers)
    ]


def write(url: str, verdicts: list[dict[str, Any]]) -> None:
    store = open_store(url)
    try:
        store.write([json.dumps(v).encode() for v in verdicts])
    finally:
        store.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'verdicts.db'}"
    else:
        yield request.getfixturevalue("pg_url")


def test_schema_7_back_fills_the_release_from_the_stored_verdicts(store_url: str) -> None:
    old = open_sql_store(store_url, migrate_to=6)
    rows = [verdict("sac-bot", "v1", 1, "LEI"), verdict("sac-bot", None, 2, "LEI"),
            {**verdict("sac-bot", "x", 3, None), "metadata": {"app": "sac-bot",
                                                            "release": "not one"}}]  # fmt: skip
    conn_store: SQLStore = old
    with conn_store._using() as conn:  # schema 6 has no release column: rows as it wrote them
        for row in rows:
            body = json.dumps(row)
            conn.execute(
                conn_store.sql(
                    "INSERT INTO verdicts (id, app, status, hallucinated, evaluated_at, body, "
                    "sample_key) VALUES (%s, %s, 'ok', %s, %s, %s, 0.5)"
                ),
                (row["id"], "sac-bot", row["hallucinated"], row["evaluated_at"], body),
            )
            for position, claim in enumerate(row["claims"]):
                conn.execute(
                    conn_store.sql(
                        "INSERT INTO claims (verdict_id, position, text, verdict, category, app, "
                        "confidence) VALUES (%s, %s, %s, %s, %s, 'sac-bot', %s)"
                    ),
                    (row["id"], position, claim["text"], claim["verdict"], claim["category"],
                     claim["confidence"]),
                )  # fmt: skip
        conn.commit()
    old.close()
    new = open_sql_store(store_url)
    try:
        assert new.schema_version() >= 7  # 8 and later add to it
        found = {r["release"]: r["verdicts"] for r in new.releases("sac-bot")}
        assert found == {"v1": 1, "unknown": 2}
        for release in ("v1", "unknown"):  # the claims follow their verdicts' releases
            figures = new.release_figures("sac-bot", release)["all"]
            assert (figures["hallucinated"], figures["categories"]["LEI"]) == (1, 1)
    finally:
        new.close()


def test_releases_newest_first_and_figures_per_release(store_url: str) -> None:
    write(store_url, [*release_set("sac-bot", "v1", 300, 30, day=1),
                      *release_set("sac-bot", "v2", 300, 90, day=2),
                      *release_set("rh-bot", "v9", 10, 10, day=3),
                      verdict("sac-bot", None, 1, None, day=3)])  # fmt: skip
    store = open_sql_store(store_url)
    try:
        releases = store.releases("sac-bot")
        assert [r["release"] for r in releases] == ["unknown", "v2", "v1"]
        assert releases[1]["answers"] == 300
        assert releases[1]["first_seen"] == "2026-11-02T10:00:00.000000Z"
        figures = store.release_figures("sac-bot", "v2")
        assert figures["all"]["answers"] == 300
        assert figures["all"]["hallucinated"] == 90
        assert figures["all"]["categories"]["PRAZO_VALOR"] == 90
        assert figures["all"]["categories"]["LEI"] == 10
        page = store.list_verdicts(
            __import__("veredito.store", fromlist=["Filters"]).Filters(app="sac-bot",
                                                                       release="v1"),
            limit=500,
        )  # fmt: skip
        assert len(page.items) == 300
        assert {v["metadata"]["release"] for v in page.items} == {"v1"}
    finally:
        store.close()


# -- the API ---------------------------------------------------------------------------------


@pytest.fixture
def compared(store_url: str) -> Iterator[str]:
    write(store_url, [
        *release_set("sac-bot", "v1", 300, 30, day=1),   # 10 %
        *release_set("sac-bot", "v2", 300, 90, day=2),   # 30 %: regressed
        *release_set("rh-bot", "r20", 300, 60, day=1),   # 20 %
        *release_set("rh-bot", "r21", 300, 63, day=2),   # 21 %: not regressed
    ])  # fmt: skip
    tokens = f"{READ},{SAC_ONLY}:sac-bot"
    with reading(store_url, VEREDITO_READ_TOKENS=tokens, VEREDITO_REVIEW_REFRESH="0.5",
                 VEREDITO_REVIEW_TOKENS=f"{ANA}:ana", VEREDITO_REVIEW_SAMPLE="1",
                 VEREDITO_REVIEW_RATE="0", VEREDITO_REFIT="off") as base:  # fmt: skip
        yield base  # every answer in the uniform slice: each label counts for the precision


def test_the_api_lists_releases_and_compares_them(compared: str) -> None:
    status, body, _ = get(compared, "/v1/releases?app=sac-bot")
    assert status == 200
    assert [(r["release"], r["answers"]) for r in body["releases"]] == [("v2", 300), ("v1", 300)]

    status, body, _ = get(compared, "/v1/compare?app=sac-bot&base=v1&head=v2")
    assert status == 200, body
    rows = {row["category"]: row for row in body["rows"]}
    assert rows["answer"]["regressed"] is True
    assert rows["answer"]["base"]["rate"] == pytest.approx(0.1)
    assert rows["answer"]["head"]["rate"] == pytest.approx(0.3)
    assert rows["PRAZO_VALOR"]["regressed"] is True
    assert rows["LEI"]["regressed"] is False and body["regressed"] is True
    # head and base by default: the newest and the one before
    status, default, _ = get(compared, "/v1/compare?app=sac-bot")
    assert status == 200 and (default["base"], default["head"]) == ("v1", "v2")
    assert default["rows"] == body["rows"]

    status, body, _ = get(compared, "/v1/compare?app=rh-bot&base=r20&head=r21")
    assert status == 200
    assert not any(row["regressed"] for row in body["rows"]) and body["regressed"] is False


def test_confident_counts_only_the_confident(compared: str, store_url: str) -> None:
    unsure = [verdict("sac-bot", "v3", n, "PRAZO_VALOR", day=4, confidence=0.5)
              for n in range(300)]  # fmt: skip
    write(store_url, unsure)
    status, body, _ = get(compared, "/v1/compare?app=sac-bot&base=v2&head=v3&confident=true")
    assert status == 200
    rows = {row["category"]: row for row in body["rows"]}
    assert rows["answer"]["head"]["hallucinated"] == 0 and rows["answer"]["improved"] is True
    status, body, _ = get(compared, "/v1/compare?app=sac-bot&base=v2&head=v3")
    assert {row["category"]: row for row in body["rows"]}["answer"]["regressed"] is True


@pytest.mark.parametrize(
    ("query", "parameter"),
    [
        ("app=sac-bot&base=v1&head=v7", "head"),
        ("app=sac-bot&base=v0&head=v2", "base"),
        ("app=sac-bot&base=v2&head=v2", "base"),
        ("app=sac-bot&base=v1&head=v%202", "head"),
        ("app=sac-bot&confident=maybe", "confident"),
        ("base=v1&head=v2", "app"),
        ("app=nobody", "head"),
    ],
)
def test_bad_parameters_are_400_naming_them(compared: str, query: str, parameter: str) -> None:
    status, body, _ = get(compared, f"/v1/compare?{query}")
    assert status == 400, body
    assert body["error"]["message"].startswith(f"{parameter}:")


def test_a_token_of_one_app_reads_its_own_releases_only(compared: str) -> None:
    status, body, _ = get(compared, "/v1/releases?app=rh-bot", token=SAC_ONLY)
    assert status == 200 and body["app"] == "sac-bot"
    status, body, _ = get(compared, "/v1/compare?app=rh-bot&base=r20&head=r21", token=SAC_ONLY)
    assert status == 400 and "not a release of 'sac-bot'" in str(body)
    status, _, _ = get(compared, "/v1/releases?app=sac-bot", token=None)
    assert status == 401
    status, body, _ = get(compared, "/v1/verdicts?app=sac-bot&release=v1&limit=5")
    assert status == 200 and {v["metadata"]["release"] for v in body["items"]} == {"v1"}
    status, body, _ = get(compared, "/v1/verdicts?release=v%201")
    assert status == 400 and "release" in str(body)


def test_since_and_until_narrow_both_sides(compared: str) -> None:
    """A period reads the releases' claims through their verdicts' times (the join of
    store/releases.py), on SQLite and PostgreSQL alike. Each release's answers run from 10:00:00
    on its day, one a second, its flagged ones first."""
    query = "/v1/compare?app=sac-bot&base=v1&head=v2"
    status, whole, _ = get(compared, query)
    assert status == 200
    status, wide, _ = get(compared, f"{query}&since=2026-11-01T00:00:00Z&until=2026-11-03")
    assert status == 200 and wide["rows"] == whole["rows"]
    assert wide["since"] is not None and wide["until"] is not None
    # v1 from 10:01 on: its first 60 answers (every one it flagged) left out; v2 until 10:01:
    # its first 60 only, all flagged, the first ten of them on LEI too
    status, body, _ = get(
        compared, f"{query}&since=2026-11-01T10:01:00Z&until=2026-11-02T10:01:00Z"
    )
    assert status == 200, body
    rows = {row["category"]: row for row in body["rows"]}
    assert rows["answer"]["base"]["answers"] == 240 and rows["answer"]["head"]["answers"] == 60
    assert (rows["answer"]["base"]["hallucinated"], rows["answer"]["head"]["hallucinated"]) == (
        0,
        60,
    )
    assert (rows["PRAZO_VALOR"]["base"]["hallucinated"],
            rows["PRAZO_VALOR"]["head"]["hallucinated"]) == (0, 60)  # fmt: skip
    assert (rows["LEI"]["base"]["hallucinated"], rows["LEI"]["head"]["hallucinated"]) == (0, 10)
    assert body["regressed"] is True
    for period, side in (
        ("since=2026-11-02T00:00:00Z", "base"),  # v1 all on the 1st
        ("until=2026-11-02T00:00:00Z", "head"),
    ):  # v2 all on the 2nd
        status, body, _ = get(compared, f"{query}&{period}")
        assert status == 400, body
        message = body["error"]["message"]
        assert message.startswith(f"{side}:") and "no judged answers in this period" in message
    status, body, _ = get(compared, f"{query}&since=yesterday")
    assert status == 400 and body["error"]["message"].startswith("since:"), body


def exported(base: str, app: str, release: str, path: Path) -> Path:
    """One release's verdicts as the verdicts API gives them, page by page, into a verdict file
    (JSONL, what ``veredito compare`` reads)."""
    items: list[dict[str, Any]] = []
    cursor = ""
    while True:
        status, page, _ = get(base, f"/v1/verdicts?app={app}&release={release}&limit=500{cursor}")
        assert status == 200, page
        items += page["items"]
        if not page["next_cursor"]:
            break
        cursor = f"&cursor={page['next_cursor']}"
    path.write_text("".join(json.dumps(v, ensure_ascii=False) + "\n" for v in items), "utf-8")
    return path


def test_the_api_the_command_and_the_library_agree(
    compared: str, store_url: str, tmp_path: Path
) -> None:
    """The same two releases through GET /v1/compare, veredito compare on the store
    (``store:URL#release``), veredito compare on the two releases' verdict files exported from
    the verdicts API, and veredito.compare on the verdicts written: the same rows."""
    import veredito

    for app, base, head, regressed in (("sac-bot", "v1", "v2", True),
                                       ("rh-bot", "r20", "r21", False)):  # fmt: skip
        status, api, _ = get(compared, f"/v1/compare?app={app}&base={base}&head={head}")
        assert status == 200 and api["regressed"] is regressed
        sides = {
            "store": [f"store:{store_url}#{base}", f"store:{store_url}#{head}", "--app", app],
            "files": [str(exported(compared, app, r, tmp_path / f"{r}.jsonl"))
                      for r in (base, head)],
        }  # fmt: skip
        for kind, arguments in sides.items():
            done = subprocess.run(
                [sys.executable, "-m", "veredito", "compare", *arguments, "--json",
                 "--fail-on-regression"],
                cwd=ROOT, capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            assert done.returncode == (1 if regressed else 0), (kind, done.stderr)
            command = json.loads(done.stdout)
            assert command["paired"] is False, kind  # two releases: no id in common
            assert command["rows"] == api["rows"], kind
        rates = {"v1": 30, "v2": 90, "r20": 60, "r21": 63}
        written = [
            release_set(app, r, 300, rates[r], day=1 + i) for i, r in enumerate((base, head))
        ]
        library = veredito.compare(*written, base_name=base, head_name=head)
        assert library["paired"] is False
        assert library["rows"] == api["rows"]


def label(base: str, app: str, verdict_id: str, body: dict[str, Any]) -> None:
    status, answer, _ = call(base, "POST", f"/v1/verdicts/{verdict_id}/labels?app={app}", body,
                             token=ANA)  # fmt: skip
    assert status == 201, answer


CONFIRMED = {"hallucinated": True}  # every claim as the judge said it
DENIED = {"hallucinated": False,  # the one flagged claim (PRAZO_VALOR) was grounded after all
          "claims": [{"claim_idx": 1, "correct": False, "verdict": "grounded"}]}  # fmt: skip


def test_the_judges_precision_stands_beside_the_rates_from_the_store(
    compared: str, store_url: str
) -> None:
    """Reviewers' labels of the uniform slice on both releases: the API gives the judge's
    precision on each side, from that release's labels only, and a regression beside a low head
    precision gets a note; veredito compare on store:URL#release says the same."""
    status, body, _ = get(compared, "/v1/compare?app=sac-bot&base=v1&head=v2")
    assert status == 200 and "precision" not in body["rows"][0]  # no labels yet
    for n in range(20):  # v1: the judge's first 20 flags, all confirmed
        label(compared, "sac-bot", f"sac-bot-v1-{n}", CONFIRMED)
    status, body, _ = get(compared, "/v1/compare?app=sac-bot&base=v1&head=v2")
    assert status == 200 and "precision" not in body["rows"][0]  # labels on one side only
    for n in range(40):  # v2: 10 confirmed, 30 denied
        label(compared, "sac-bot", f"sac-bot-v2-{n}", CONFIRMED if n < 10 else DENIED)

    status, api, _ = get(compared, "/v1/compare?app=sac-bot&base=v1&head=v2")

    assert status == 200, api
    rows = {row["category"]: row for row in api["rows"]}
    answer, prazo, lei = rows["answer"], rows["PRAZO_VALOR"], rows["LEI"]
    assert answer["regressed"] and prazo["regressed"] and not lei["regressed"]
    assert answer["precision"]["base"]["precision"] == pytest.approx(1.0)
    assert answer["precision"]["head"]["precision"] == pytest.approx(0.25)
    assert prazo["precision"]["base"]["precision"] == pytest.approx(1.0)
    assert prazo["precision"]["head"]["precision"] == pytest.approx(0.25)
    assert lei["precision"]["head"]["precision"] == pytest.approx(1.0)  # its 10, all confirmed
    for side in ("base", "head"):
        assert answer["precision"][side]["precision_interval"] is not None
    assert "may be the judge's" in answer["note"] and "0.25 (base 1.00)" in answer["note"]
    assert "note" in prazo and "note" not in lei
    # the rates are the same as without labels: precision stands beside them
    assert (answer["base"]["hallucinated"], answer["head"]["hallucinated"]) == (30, 90)

    arguments = [sys.executable, "-m", "veredito", "compare", f"store:{store_url}#v1",
                 f"store:{store_url}#v2", "--app", "sac-bot"]  # fmt: skip
    done = subprocess.run([*arguments, "--json"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["rows"] == api["rows"]
    table = subprocess.run(arguments, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert table.returncode == 0, table.stderr
    assert "1.00/0.25" in table.stdout and "note: answer:" in table.stdout


def gauges(base: str, wanted: str, deadline: float = 30.0) -> dict[str, float]:
    """serve's release gauges (``veredito_release_*``) once ``wanted`` is among them."""
    import time
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    until = time.monotonic() + deadline
    while True:
        with urllib.request.urlopen(f"{base}/metrics", timeout=10) as response:
            text = response.read().decode()
        found = {}
        for family in text_string_to_metric_families(text):
            if family.name.startswith("veredito_release"):
                for sample in family.samples:
                    labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
                    found[f"{sample.name}{{{labels}}}"] = sample.value
        if wanted in found:
            return found
        assert time.monotonic() < until, f"{wanted} never came: {sorted(found)}"
        time.sleep(0.2)


def test_the_gauges_agree_and_keep_three_releases(compared: str, store_url: str) -> None:
    regressed = "veredito_release_regressed{app=sac-bot,base=v1,category=answer,head=v2}"
    found = gauges(compared, regressed)
    assert found[regressed] == 1
    assert (
        found["veredito_release_regressed{app=sac-bot,base=v1,category=PRAZO_VALOR,head=v2}"] == 1
    )
    assert found["veredito_release_regressed{app=sac-bot,base=v1,category=LEI,head=v2}"] == 0
    assert found["veredito_release_regressed{app=rh-bot,base=r20,category=answer,head=r21}"] == 0
    rate = "veredito_release_hallucination_rate{app=sac-bot,confident=true,release=v2}"
    assert found[rate] == pytest.approx(0.3)
    assert found["veredito_release_answers{app=sac-bot,release=v1}"] == 300
    # three more releases of sac-bot, with too few answers to compare: five in all, three kept
    write(store_url, [v for day, r in ((3, "v3"), (4, "v4"), (5, "v5"))
                      for v in release_set("sac-bot", r, 50, 5, day=day)])  # fmt: skip
    found = gauges(compared, "veredito_release_answers{app=sac-bot,release=v5}")
    kept = {key.split("release=")[1].rstrip("}") for key in found
            if key.startswith("veredito_release_answers{app=sac-bot")}  # fmt: skip
    assert kept == {"v3", "v4", "v5"}
    assert not any(
        key.startswith("veredito_release_regressed{app=sac-bot") and value == 1
        for key, value in found.items()
    )  # 50 answers a side: under the 200 needed


def test_unknown_and_other_are_never_the_default_base_or_head(
    compared: str, store_url: str
) -> None:
    """Untagged traffic seen after v2 (``unknown``) is the app's newest release by first seen;
    the API's defaults and the gauges' pair still compare v2 with v1. Named, it is compared."""
    write(store_url, [verdict("sac-bot", None, n, None, day=3) for n in range(20)])
    status, body, _ = get(compared, "/v1/releases?app=sac-bot")
    assert [r["release"] for r in body["releases"]] == ["unknown", "v2", "v1"]
    status, body, _ = get(compared, "/v1/compare?app=sac-bot")
    assert status == 200 and (body["base"], body["head"]) == ("v1", "v2"), body
    status, body, _ = get(compared, "/v1/compare?app=sac-bot&head=unknown")
    assert status == 200 and (body["base"], body["head"]) == ("v2", "unknown"), body
    status, body, _ = get(compared, "/v1/compare?app=sac-bot&base=unknown&head=v2")
    assert status == 200 and (body["base"], body["head"]) == ("unknown", "v2"), body
    status, body, _ = get(compared, "/v1/compare?app=sac-bot&head=v1")
    assert status == 400 and body["error"]["message"].startswith("base:"), body
    # the gauges once a refresh has seen unknown (it keeps its rates: one of the three newest)
    found = gauges(compared, "veredito_release_answers{app=sac-bot,release=unknown}")
    assert found["veredito_release_answers{app=sac-bot,release=unknown}"] == 20
    assert found["veredito_release_regressed{app=sac-bot,base=v1,category=answer,head=v2}"] == 1
    assert not any("head=unknown" in key or "base=unknown" in key for key in found)
    # a release a triple named "other" (the metrics' bucket) is passed over the same way
    write(store_url, [verdict("sac-bot", "other", n, None, day=4) for n in range(20)])
    status, body, _ = get(compared, "/v1/compare?app=sac-bot")
    assert status == 200 and (body["base"], body["head"]) == ("v1", "v2"), body
    status, body, _ = get(compared, "/v1/compare?app=rh-bot")  # untouched
    assert status == 200 and (body["base"], body["head"]) == ("r20", "r21")


def test_an_app_with_no_named_release_asks_for_one(store_url: str) -> None:
    write(store_url, [verdict("sac-bot", None, n, None) for n in range(5)])
    with reading(store_url, VEREDITO_READ_TOKENS=READ) as base:
        status, body, _ = get(base, "/v1/compare?app=sac-bot")
        assert status == 400 and body["error"]["message"].startswith("head:"), body
        assert "names no release" in body["error"]["message"]


@pytest.mark.broker
def test_http_ingest_takes_a_release_and_rejects_a_bad_one_naming_it(rabbitmq: str) -> None:

    good = {**triple(app="sac-bot", release="2.4.1"), "id": "r-good"}
    bad = {**triple(app="sac-bot", release="2.4.1 beta"), "id": "r-bad"}
    agent = {"trace_id": "r-agent", "goal": "Qual o prazo?", "final_answer": "7 dias.",
             "metadata": {"app_version": "3.0.0"},
             "steps": [{"step_index": 0, "step_type": "retrieval", "tool_name": None,
                        "step_input": "", "step_output": "O prazo é de 7 dias."}],
             "tool_specs": []}  # fmt: skip
    with serving(rabbitmq) as base:
        status, body, _ = call(base, "POST", "/v1/triples", [good, bad])
        assert status == 202 and body["accepted"] == ["r-good"]
        assert body["rejected"][0]["id"] == "r-bad"
        assert body["rejected"][0]["error"].startswith("metadata.release: ' ' is not allowed")
        status, body, _ = call(base, "POST", "/api/v1/traces", agent)
        assert status == 200 and body["accepted"] == ["r-agent"]
    envelopes = {e["triple"].get("id"): e["triple"] for e in queued(rabbitmq)}
    assert envelopes["r-good"]["metadata"]["release"] == "2.4.1"
    assert envelopes["r-agent"]["metadata"]["release"] == "3.0.0"
    assert "r-bad" in envelopes  # its rejected verdict is made by the worker, naming the field


def otlp_trace(trace_id: str, version: str) -> bytes:
    """An OpenInference trace in OTLP/JSON: a chain and its retriever, the resource's
    service.version ``version``."""

    def attr(key: str, value: str) -> dict[str, Any]:
        return {"key": key, "value": {"stringValue": value}}

    spans = [
        {"traceId": trace_id, "spanId": "b7ad6b7169203331", "name": "rag",
         "startTimeUnixNano": "1", "endTimeUnixNano": "4",
         "attributes": [attr("openinference.span.kind", "CHAIN"),
                        attr("input.value", "Qual o prazo?"),
                        attr("output.value", "O prazo é de 7 dias.")]},
        {"traceId": trace_id, "spanId": "b7ad6b7169203332", "parentSpanId": "b7ad6b7169203331",
         "name": "retrieve", "startTimeUnixNano": "2", "endTimeUnixNano": "3",
         "attributes": [attr("openinference.span.kind", "RETRIEVER"),
                        attr("input.value", "Qual o prazo?"),
                        attr("retrieval.documents.0.document.content", "O prazo é de 7 dias.")]},
    ]  # fmt: skip
    resource = [attr("service.name", "sac-bot"), attr("service.version", version)]
    body = {"resourceSpans": [{"resource": {"attributes": resource},
                               "scopeSpans": [{"spans": spans}]}]}  # fmt: skip
    return json.dumps(body).encode()


@pytest.mark.broker
def test_otlp_rejects_a_trace_whose_service_version_is_not_a_release(rabbitmq: str) -> None:
    """Through a real serve's /v1/traces: the exporter's partial_success and the rejected
    verdict both name the release and where it came from; a good version is taken."""
    import asyncio

    from veredito.worker.judges.rules import RulesJudge
    from veredito.worker.pipeline import Pipeline

    bad_id, good_id = "0af7651916cd43dd8448eb211c80319d", "0af7651916cd43dd8448eb211c80319e"
    with serving(rabbitmq) as base:
        for trace_id, version in ((bad_id, "2.4.1 (build 7)"), (good_id, "2.4.1")):
            status, said, _ = call(base, "POST", "/v1/traces", otlp_trace(trace_id, version))
            assert status == 200, said
            if trace_id == bad_id:
                assert said["partialSuccess"]["rejectedSpans"] == "2"
                message = said["partialSuccess"]["errorMessage"]
                assert message.startswith(
                    f"trace {bad_id}: metadata.release (from the resource's service.version): "
                    "' ' is not allowed"
                ), message
            else:
                assert not said or not said.get("partialSuccess"), said
    envelopes = {e["triple"]["id"]: e for e in queued(rabbitmq)}
    assert {bad_id, good_id} <= set(envelopes), envelopes
    assert envelopes[good_id]["triple"]["metadata"]["release"] == "2.4.1"
    outcome = asyncio.run(Pipeline(RulesJudge()).evaluate(envelopes[bad_id]))
    rejected = outcome.verdict
    assert rejected.status == "rejected" and rejected.error is not None
    assert rejected.error.message.startswith(
        "metadata.release (from the resource's service.version): ' ' is not allowed"
    )
    assert rejected.metadata.get("app") == "sac-bot" and "release" not in rejected.metadata


@pytest.mark.broker
def test_produce_release_tags_every_published_triple(rabbitmq: str, tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    lines = [{**triple(app="sac-bot"), "id": "rel-p0"},
             {**triple(app="sac-bot", release="old"), "id": "rel-p1"},
             {**triple(), "id": "rel-p2"}]  # fmt: skip
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    env = {**os.environ, "VEREDITO_BROKER_URL": rabbitmq}
    done = subprocess.run(
        [sys.executable, "-m", "veredito", "produce", str(source), "--release", "2026.12.02+rc-1"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "3 accepted, 0 rejected" in done.stdout, done.stdout
    published = {e["triple"]["id"]: e["triple"]["metadata"] for e in queued(rabbitmq)
                 if str(e["triple"].get("id")).startswith("rel-p")}  # fmt: skip
    assert set(published) == {"rel-p0", "rel-p1", "rel-p2"}
    assert {m.get("release") for m in published.values()} == {"2026.12.02+rc-1"}
    assert published["rel-p1"]["app"] == "sac-bot"  # the rest of the metadata kept
    bad = subprocess.run(
        [sys.executable, "-m", "veredito", "produce", str(source), "--release", "v 2"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert bad.returncode == 2, bad.stderr
    assert "--release" in bad.stderr and "' ' is not allowed" in bad.stderr
    assert not [e for e in queued(rabbitmq) if str(e["triple"].get("id")).startswith("rel-p")]


def test_the_list_and_the_answer_page_show_the_release(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'v.db'}"
    write(url, [verdict("sac-bot", "2026.12.02+rc-1", 1, "LEI"), verdict("sac-bot", None, 2, None)])
    tagged, untagged = "sac-bot-2026.12.02+rc-1-1", "sac-bot-None-2"
    with reading(url) as base:
        status, page, _ = get(base, "/?period=", token=None)
        assert status == 200
        assert page.count('<small class="release">') == 1  # unknown is not shown in the list
        assert '<small class="release">2026.12.02+rc-1</small>' in page
        status, page, _ = get(base, f"/verdicts/{tagged}", token=None)
        assert status == 200 and "<dt>Versão</dt><dd>2026.12.02+rc-1</dd>" in page
        status, page, _ = get(base, f"/verdicts/{untagged}", token=None)
        assert status == 200 and "<dt>Versão</dt><dd>unknown</dd>" in page
