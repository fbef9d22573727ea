from __future__ import annotations

import hashlib
import json
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from veredito.producer.reader import read_lines
from veredito.producer.triple import InvalidTriple, Limits, parse_triple, triple_id


def test_canonical_fields() -> None:
    t = parse_triple({"query": "q", "context": ["a", "b"], "answer": "r", "metadata": {"app": "x"}})
    assert (t.query, t.context, t.answer, t.metadata, t.app) == (
        "q",
        ("a", "b"),
        "r",
        {"app": "x"},
        "x",
    )


@pytest.mark.parametrize("qk", ["query", "question", "user_input", "input"])
@pytest.mark.parametrize("ck", ["context", "contexts", "retrieved_contexts", "chunks", "documents"])
@pytest.mark.parametrize("ak", ["answer", "response", "output"])
def test_aliases(qk: str, ck: str, ak: str) -> None:
    t = parse_triple({qk: "q", ck: ["c"], ak: "a"})
    assert (t.query, t.context, t.answer) == ("q", ("c",), "a")


def test_one_string_is_one_chunk() -> None:
    assert parse_triple({"query": "q", "context": "um chunk", "answer": "a"}).context == (
        "um chunk",
    )


def test_other_fields_are_ignored() -> None:
    t = parse_triple(
        {"query": "q", "context": ["c"], "answer": "a", "latency_ms": 12, "model": "x"}
    )
    assert t.metadata == {}


def test_id_is_deterministic_and_documented() -> None:
    raw = {"query": "Qual o prazo?", "context": ["7 dias"], "answer": "São 7 dias."}
    canonical = json.dumps(
        ["Qual o prazo?", ["7 dias"], "São 7 dias."], ensure_ascii=False, separators=(",", ":")
    )
    expected = hashlib.sha256(canonical.encode()).hexdigest()[:32]
    assert parse_triple(raw).id == expected == triple_id("Qual o prazo?", ["7 dias"], "São 7 dias.")
    assert parse_triple({**raw, "context": "7 dias"}).id == expected  # one string = one chunk
    assert parse_triple({**raw, "id": "mine"}).id == "mine"


@given(
    st.text(min_size=1).filter(str.strip),
    st.lists(st.text(min_size=1).filter(str.strip), min_size=1, max_size=5),
    st.text(),
)
def test_id_is_a_function_of_the_content(query: str, chunks: list[str], answer: str) -> None:
    a = parse_triple({"query": query, "context": chunks, "answer": answer, "metadata": {"x": 1}})
    b = parse_triple({"question": query, "chunks": list(chunks), "response": answer})
    assert a.id == b.id and len(a.id) == 32


@pytest.mark.parametrize(
    ("raw", "field", "fragment"),
    [
        ([1, 2], "triple", "must be a JSON object"),
        ({"context": ["c"], "answer": "a"}, "query", "missing"),
        ({"query": "  ", "context": ["c"], "answer": "a"}, "query", "must not be empty"),
        ({"query": 3, "context": ["c"], "answer": "a"}, "query", "must be a string, got number"),
        ({"query": "q", "answer": "a"}, "context", "missing"),
        ({"query": "q", "context": ["c", ""], "answer": "a"}, "context", "chunk 1 is empty"),
        ({"query": "q", "context": [], "answer": "a"}, "context", "no chunks"),
        ({"query": "q", "context": ["c", 5], "answer": "a"}, "context", "chunk 1 must be a string"),
        ({"query": "q", "context": {"a": 1}, "answer": "a"}, "context", "got object"),
        ({"query": "q", "context": "", "answer": "a"}, "context", "empty string"),
        ({"query": "q", "context": ["c"]}, "answer", "missing"),
        ({"query": "q", "context": ["c"], "answer": None}, "answer", "got null"),
        (
            {"query": "q", "context": ["c"], "answer": "a", "metadata": []},
            "metadata",
            "must be an object",
        ),
        ({"query": "q", "context": ["c"], "answer": "a", "id": ""}, "id", "non-empty"),
        ({"query": "q", "context": ["c"], "answer": "a", "id": "x" * 129}, "id", "limit is 128"),
    ],
)
def test_rejections_name_the_field(raw: object, field: str, fragment: str) -> None:
    with pytest.raises(InvalidTriple) as info:
        parse_triple(raw, line=7)
    assert info.value.field == field
    assert fragment in str(info.value)
    assert str(info.value).startswith(f"line 7: {field}: ")


def test_limits() -> None:
    limits = Limits(max_chunks=2, max_bytes=100)
    with pytest.raises(InvalidTriple, match="3 chunks, limit is 2"):
        parse_triple({"query": "q", "context": ["a", "b", "c"], "answer": "a"}, limits)
    with pytest.raises(InvalidTriple, match="limit is 100"):
        parse_triple({"query": "q", "context": ["a" * 200], "answer": "a"}, limits)
    assert parse_triple({"query": "q", "context": ["a"] * 64, "answer": "a"}).context == ("a",) * 64
    with pytest.raises(InvalidTriple, match="65 chunks, limit is 64"):
        parse_triple({"query": "q", "context": ["a"] * 65, "answer": "a"})


def test_invalid_triple_survives_pickling() -> None:
    exc = InvalidTriple("query", "missing", 3)
    again = pickle.loads(pickle.dumps(exc))
    assert (again.field, again.reason, again.line, str(again)) == ("query", "missing", 3, str(exc))


def test_reader_numbers_lines_and_reports_bad_json() -> None:
    import io

    items = list(read_lines(io.StringIO('{"a": 1}\n\nnot json\n{"b": 2,}\n')))
    assert [i.line for i in items] == [1, 3, 4]
    assert items[0].value == {"a": 1} and items[0].error is None
    assert items[1].error is not None and items[1].error.startswith("not valid JSON")
    assert items[2].error is not None
