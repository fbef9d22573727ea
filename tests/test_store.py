"""The verdict stores (spec §14) against real SQLite files and a real PostgreSQL server."""

from __future__ import annotations

import json
import random
import threading
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from veredito.store import Filters, SQLStore, StoreError, open_store
from veredito.store.sql import SCHEMA_VERSION, AmbiguousId, decode_cursor, open_sql_store
from veredito.worker.verdict import CATEGORIES, Claim, TripleInput, Verdict

NOW = datetime(2026, 11, 30, 14, 5, tzinfo=UTC)
APPS = ("sac-bot", "rh-bot", "fiscal-bot")


def make_verdict(i: int, rng: random.Random | None = None) -> Verdict:
    """A distinct verdict: its app, time, claims and categories vary with ``i``."""
    rng = rng or random.Random(i)
    claims = []
    for k in range(rng.randint(0, 4)):
        label = rng.choice(("grounded", "grounded", "partial", "invented", "contradicted"))
        category = None if label == "grounded" else rng.choice((*CATEGORIES, None))
        claims.append(
            Claim(
                text=f"afirmação {k} da resposta {i}",
                verdict=label,
                category=category,
                chunk_idx=0 if label == "grounded" else None,
                source="rules",
            )
        )
    categories = Counter(c.category or "GENERICA" for c in claims if c.verdict != "grounded")
    return Verdict(
        id=f"v-{i:05d}",
        status=rng.choice(("ok",) * 8 + ("rejected", "failed")),
        claims=claims,
        score=round(rng.random(), 3),
        hallucinated=any(c.verdict != "grounded" for c in claims),
        categories=dict(categories),
        metadata={"app": APPS[i % 3]},
        evaluated_at=(NOW - timedelta(minutes=i, seconds=rng.random())).strftime(
            "%Y-%m-%dT%H:%M:%S.%fZ"
        ),
        input=TripleInput(query=f"pergunta {i}", context=["trecho"], answer="resposta"),
    )


def body(verdict: Verdict) -> bytes:
    return verdict.model_dump_json().encode()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'verdicts.db'}"
    else:
        yield request.getfixturevalue("pg_url")


@pytest.fixture
def store(store_url: str) -> Iterator[SQLStore]:
    opened = open_sql_store(store_url)
    yield opened
    opened.close()


def count(store: SQLStore, table: str) -> int:
    with store._using() as conn:
        return int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])


def test_an_id_already_stored_changes_nothing(store: SQLStore) -> None:
    verdicts = [make_verdict(i) for i in range(50)]
    claims = sum(len(v.claims) for v in verdicts)
    assert store.write([body(v) for v in verdicts]) == (50, 0)
    # redelivered, and one id judged again with another result: the first stays
    again = [body(v) for v in verdicts[:20]]
    changed = verdicts[0].model_copy(update={"score": 0.123, "claims": []})
    assert store.write([*again, body(changed)]) == (0, 21)
    assert count(store, "verdicts") == 50
    assert count(store, "claims") == claims
    stored = store.get(verdicts[0].id)
    assert stored is not None and stored["score"] == verdicts[0].score


def test_repeats_inside_one_batch_are_stored_once(store: SQLStore) -> None:
    v = make_verdict(1)
    assert store.write([body(v), body(v), body(make_verdict(2))]) == (2, 1)
    assert count(store, "verdicts") == 2


def test_a_body_that_is_not_a_verdict_is_counted_not_stored(store: SQLStore) -> None:
    assert store.write([b"not json", b'{"no": "id"}', body(make_verdict(3))]) == (1, 0)
    assert store.invalid == 2
    assert count(store, "verdicts") == 1


def test_text_a_database_cannot_hold_is_stored_all_the_same(store: SQLStore) -> None:
    """NUL in an answer (PostgreSQL's text refuses it) and a chunk index past any integer."""
    v = make_verdict(8)
    v.input = TripleInput(query="q\x00", context=["c\x00"], answer="a\x00b")
    v.metadata = {"app": "sac\x00bot"}
    v.claims = [Claim(text="a\x00b", verdict="invented", chunk_idx=10**20)]
    assert store.write([body(v)]) == (1, 0)
    assert store.get(v.id) == json.loads(body(v))  # the verdict itself, exactly
    assert store.list_verdicts(Filters(app="sac\ufffdbot")).items[0]["id"] == v.id


def test_a_verdict_the_database_refuses_does_not_hold_back_the_batch(
    store: SQLStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = store._insert
    refusal = store.data_errors()[0]

    def insert(conn: object, batch: list) -> int:  # type: ignore[type-arg]
        if any(row[0] == "v-00003" for row, _ in batch):
            raise refusal("refused")
        return real(conn, batch)

    monkeypatch.setattr(store, "_insert", insert)
    assert store.write([body(make_verdict(i)) for i in range(6)]) == (5, 0)
    assert store.refused == 1
    assert store.get("v-00003") is None and store.get("v-00004") is not None


def test_the_whole_verdict_comes_back(store: SQLStore) -> None:
    v = make_verdict(7)
    store.write([body(v)])
    assert store.get(v.id) == json.loads(body(v))
    assert store.get("missing") is None


def test_empty_database_is_migrated_to_the_current_schema(store: SQLStore) -> None:
    assert store.schema_version() == SCHEMA_VERSION
    # a second open (a second sink) applies nothing again
    again = open_sql_store(store.url)
    try:
        assert again.schema_version() == SCHEMA_VERSION
        with again._using() as conn:
            versions = conn.execute("SELECT version FROM schema_version ORDER BY 1").fetchall()
        assert [v[0] for v in versions] == list(range(1, SCHEMA_VERSION + 1))
    finally:
        again.close()


def test_a_database_of_the_previous_version_is_migrated_with_its_rows(store_url: str) -> None:
    old = open_sql_store(store_url, migrate_to=1)
    verdicts = [make_verdict(i) for i in range(30)]
    ph = old.sql("%s")
    with old._using() as conn:  # rows written by the version-1 code: no categories column
        for v in verdicts:
            conn.execute(
                "INSERT INTO verdicts (id, app, status, hallucinated, score, faithfulness_score, "
                f"judge_kind, judge_model, evaluated_at, body) VALUES ({', '.join([ph] * 10)})",
                (v.id, v.app, v.status, v.hallucinated, v.score, None, "rules", "rules-1",
                 v.evaluated_at, v.model_dump_json()),
            )  # fmt: skip
            for k, c in enumerate(v.claims):
                conn.execute(
                    "INSERT INTO claims (verdict_id, position, text, verdict, category, "
                    f"chunk_idx, source) VALUES ({', '.join([ph] * 7)})",
                    (v.id, k, c.text, c.verdict, c.category, c.chunk_idx, c.source),
                )
    assert old.schema_version() == 1
    old.close()

    new = open_sql_store(store_url)
    try:
        assert new.schema_version() == SCHEMA_VERSION
        with new._using() as conn:
            rows = dict(conn.execute("SELECT id, categories FROM verdicts").fetchall())
        for v in verdicts:  # back-filled from the claims
            assert rows[v.id] == (" ".join(sorted(v.categories)) or None)
        page = new.list_verdicts(Filters(category="LEI"), limit=100)
        expected = [v.id for v in verdicts if "LEI" in v.categories]
        assert sorted(i["id"] for i in page.items) == sorted(expected)
    finally:
        new.close()


def test_a_schema_newer_than_the_code_is_refused(store: SQLStore) -> None:
    with store._using() as conn:
        conn.execute(store.sql("INSERT INTO schema_version (version, name) VALUES (%s, %s)"),
                     (SCHEMA_VERSION + 1, "future"))  # fmt: skip
    with pytest.raises(StoreError, match="newer than this veredito"):
        open_sql_store(store.url)


def test_concurrent_sinks_writing_the_same_ids_store_each_once(store_url: str) -> None:
    verdicts = [make_verdict(i) for i in range(400)]
    open_sql_store(store_url).close()  # migrated once; the writers race on the rows
    totals: list[tuple[int, int]] = []
    errors: list[BaseException] = []
    careful: list[int] = []

    def sink(seed: int) -> None:
        own = open_sql_store(store_url)  # its own connection, as a separate process has
        try:
            order = verdicts[:]
            random.Random(seed).shuffle(order)
            for start in range(0, len(order), 50):
                totals.append(own.write([body(v) for v in order[start : start + 50]]))
        except BaseException as exc:
            errors.append(exc)
        finally:
            careful.append(own.careful_batches)
            own.close()

    threads = [threading.Thread(target=sink, args=(seed,)) for seed in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors
    print(f"batches that met another writer's rows: {sum(careful)}")
    assert sum(w for w, _ in totals) == 400
    assert sum(d for _, d in totals) == 3 * 400
    check = open_sql_store(store_url)
    try:
        assert count(check, "verdicts") == 400
        assert count(check, "claims") == sum(len(v.claims) for v in verdicts)
    finally:
        check.close()


def test_pages_are_newest_first_and_cover_every_match_once(store: SQLStore) -> None:
    verdicts = [make_verdict(i) for i in range(120)]
    store.write([body(v) for v in verdicts])
    cases = [
        Filters(),
        Filters(app="rh-bot"),
        Filters(hallucinated=True),
        Filters(category="PRAZO_VALOR"),
        Filters(verdict="contradicted", app="sac-bot"),
        Filters(status="failed"),
        Filters(since="2026-11-30T13:00:00.000000Z", until="2026-11-30T13:30:00.000000Z"),
    ]
    for filters in cases:
        expected = [v for v in verdicts if matches(v, filters)]
        expected.sort(key=lambda v: (v.evaluated_at, v.id), reverse=True)
        seen: list[str] = []
        cursor = None
        while True:
            page = store.list_verdicts(filters, cursor=cursor, limit=7)
            seen += [item["id"] for item in page.items]
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert seen == [v.id for v in expected], filters


def matches(v: Verdict, f: Filters) -> bool:
    return (
        (f.app is None or v.app == f.app)
        and (f.status is None or v.status == f.status)
        and (f.hallucinated is None or v.hallucinated == f.hallucinated)
        and (f.category is None or f.category in v.categories)
        and (f.verdict is None or any(c.verdict == f.verdict for c in v.claims))
        and (f.since is None or v.evaluated_at >= f.since)
        and (f.until is None or v.evaluated_at < f.until)
    )


def test_stats_count_answers_categories_and_verdicts(store: SQLStore) -> None:
    verdicts = [make_verdict(i) for i in range(90)]
    store.write([body(v) for v in verdicts])
    for filters in (Filters(), Filters(app="fiscal-bot", since="2026-11-30T13:30:00Z")):
        chosen = [v for v in verdicts if matches(v, filters)]
        stats = store.stats(filters)
        assert stats["answers"] == len(chosen)
        assert stats["hallucinated"] == sum(v.hallucinated for v in chosen)
        assert stats["by_status"] == dict(Counter(v.status for v in chosen))
        by_category: Counter[str] = Counter()
        answers: Counter[str] = Counter()
        for v in chosen:
            by_category.update(v.categories)
            answers.update(set(v.categories))
        assert stats["by_category"] == {
            k: {"claims": by_category[k], "answers": answers[k]} for k in by_category
        }
        assert stats["by_verdict"] == dict(Counter(c.verdict for v in chosen for c in v.claims))


def test_a_cursor_from_elsewhere_is_refused() -> None:
    with pytest.raises(ValueError, match="cursor"):
        decode_cursor("bm90IGEgY3Vyc29y")


def test_store_urls_are_checked(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="unknown store"):
        open_store("mysql://x/y")
    with pytest.raises(StoreError, match="sqlite:///"):
        open_store("sqlite://relative.db")
    file_store = open_store(f"file:{tmp_path / 'v.jsonl'}")
    assert file_store.write([body(make_verdict(1)), body(make_verdict(1))]) == (1, 1)
    file_store.close()


def test_one_apps_id_is_not_anothers(store: SQLStore) -> None:
    """Verdicts are keyed by (app, id): app B storing ``ticket-1001`` first does not keep app
    A's ``ticket-1001`` out, and each is read back by its own app (docs/security.md)."""
    first, second, unnamed = make_verdict(1), make_verdict(2), make_verdict(3)
    first.id = second.id = unnamed.id = "ticket-1001"
    first.metadata, second.metadata, unnamed.metadata = {"app": "b"}, {"app": "a"}, {}
    assert store.write([body(first)]) == (1, 0)
    assert store.write([body(second), body(unnamed), body(second)]) == (2, 1)
    assert store.get("ticket-1001", app="a") == json.loads(body(second))
    assert store.get("ticket-1001", app="b") == json.loads(body(first))
    assert store.get("ticket-1001", app="") == json.loads(body(unnamed))
    assert store.get("ticket-1001", app="c") is None
    with pytest.raises(AmbiguousId) as raised:
        store.get("ticket-1001")
    assert raised.value.apps == ["", "a", "b"]
    assert count(store, "claims") == sum(len(v.claims) for v in (first, second, unnamed))
    only_a = store.list_verdicts(Filters(app="a"))
    assert [(v["id"], v["metadata"]) for v in only_a.items] == [("ticket-1001", {"app": "a"})]
    # pages over several apps sharing an id and a moment cover each once
    many = [make_verdict(7) for _ in APPS]
    for verdict, app in zip(many, APPS, strict=True):
        verdict.id, verdict.metadata = "same", {"app": app}
    store.write([body(v) for v in many])
    seen, cursor = [], None
    while True:
        page = store.list_verdicts(Filters(), cursor=cursor, limit=1)
        seen += [(v["metadata"].get("app", ""), v["id"]) for v in page.items]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert len(seen) == len(set(seen)) == 6


def test_a_schema_2_database_is_keyed_by_app_after_migration(store_url: str) -> None:
    old = open_sql_store(store_url, migrate_to=2)
    kept = [make_verdict(i) for i in range(6)]
    kept[0].metadata = {}  # no app: schema 2 stored NULL, schema 3 stores ''
    ph = old.sql("%s")
    with old._using() as conn:  # rows as the schema-2 code wrote them
        for v in kept:
            conn.execute(
                "INSERT INTO verdicts (id, app, status, hallucinated, score, faithfulness_score, "
                f"judge_kind, judge_model, evaluated_at, body, categories) "
                f"VALUES ({', '.join([ph] * 11)})",
                (v.id, v.metadata.get("app"), v.status, v.hallucinated, v.score, None, "rules",
                 "rules-1", v.evaluated_at, body(v).decode(), None),
            )  # fmt: skip
            for k, c in enumerate(v.claims):
                conn.execute(
                    "INSERT INTO claims (verdict_id, position, text, verdict, category, "
                    f"chunk_idx, source) VALUES ({', '.join([ph] * 7)})",
                    (v.id, k, c.text, c.verdict, c.category, c.chunk_idx, c.source),
                )
    old.close()
    new = open_sql_store(store_url)
    try:
        assert new.schema_version() == SCHEMA_VERSION
        for v in kept:
            assert new.get(v.id, app=v.metadata.get("app", "")) == json.loads(body(v))
        assert count(new, "claims") == sum(len(v.claims) for v in kept)
        clash = make_verdict(99)
        clash.id, clash.metadata = kept[1].id, {"app": "another"}
        assert new.write([body(clash)]) == (1, 0)
        assert new.get(kept[1].id, app="another") == json.loads(body(clash))
    finally:
        new.close()
