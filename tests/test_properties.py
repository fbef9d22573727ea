"""Poison and hostile input never stop a worker: property tests over every untrusted entry point.

- ``parse_triple`` (spec §3): any JSON-like value gives a Triple that can be written as UTF-8 JSON,
  or an InvalidTriple naming the field.
- ``read_lines``: any bytes give, line by line, a value or an error; never an exception.
- ``Pipeline.evaluate``: any line ends as a verdict that can be written as UTF-8 JSON.
- ``parse_claims`` / ``parse_faithfulness`` (spec §5): any reply text gives a parsed reply that
  keeps the spec's invariants, or JudgeOutputInvalid.

Each property is a plain ``check_*`` function over one generated case, listed in ``PROPERTIES``
with its strategy, so ``bench/fuzz.py`` runs the same properties with many more cases.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from veredito.producer.reader import MAX_NESTING, nested_deeper_than, read_lines
from veredito.producer.triple import (
    ANSWER_KEYS,
    CONTEXT_KEYS,
    QUERY_KEYS,
    InvalidTriple,
    Limits,
    Triple,
    parse_triple,
)
from veredito.worker.errors import JudgeOutputInvalid
from veredito.worker.judges.base import Judgement
from veredito.worker.llm.parsing import parse_claims, parse_faithfulness
from veredito.worker.pipeline import Pipeline, fallback_id
from veredito.worker.verdict import CATEGORIES, VERDICTS, JudgeInfo, Verdict

LIMITS = Limits(max_chunks=8, max_bytes=4096)
FIELDS = {"triple", "id", "query", "context", "answer", "metadata"}
SETTINGS = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# ---------------------------------------------------------------------------------- strategies

# every code point, lone surrogates and NUL included
any_char = st.characters(codec=None, exclude_categories=())
hostile_text = st.one_of(
    st.text(any_char, max_size=30),
    st.sampled_from(["", " ", "\x00", "\ud800", "ok \udcff", "\udfff\ud800", "\u200b", "ã" * 3]),
    st.sampled_from([8, 4_000, 300_000]).map(lambda n: "x" * n),
)
huge_numbers = st.sampled_from(
    [10**400, -(10**400), 10**4000, 2**63, float("nan"), float("inf"), -float("inf"), 1e308, -0.0]
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    huge_numbers,
    hostile_text,
)
keys = st.one_of(st.text(any_char, max_size=8), st.sampled_from(["id", "app", "metadata"]))
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=4),
    max_leaves=12,
)


def nest(kind: str, depth: int, leaf: object = 1) -> object:
    """``depth`` levels of lists or ``{"a": ...}`` objects, built without recursion."""
    value = leaf
    for _ in range(depth):
        value = [value] if kind == "list" else {"a": value}
    return value


deep_values = st.builds(nest, st.sampled_from(["list", "dict"]), st.integers(30, 12_000))
odd_keys = st.dictionaries(
    st.one_of(st.integers(), st.none(), st.booleans(), st.tuples(st.integers())),
    scalars,
    min_size=1,
)
any_value = st.one_of(json_values, deep_values)


def _field(names: tuple[str, ...], values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Absent, or one of the accepted names (spec §3 aliases) with a value."""
    return st.one_of(st.none(), st.tuples(st.sampled_from(names), values))


good_text = st.text(st.characters(codec="utf-8"), min_size=1, max_size=40).filter(str.strip)
texts = st.one_of(good_text, hostile_text, any_value)
contexts = st.one_of(texts, st.lists(st.one_of(good_text, texts), max_size=10))
metadata_values = st.one_of(
    st.dictionaries(keys, json_values, max_size=4),
    any_value,
    odd_keys,
    st.builds(lambda v: {"app": v}, deep_values),
    st.just({"set": {1, 2}}),
)


@st.composite
def triple_like(draw: st.DrawFn) -> object:
    if draw(st.integers(0, 19)) == 0:  # sometimes not even an object
        return draw(any_value)
    raw: dict[Any, Any] = dict(draw(st.dictionaries(keys, json_values, max_size=3)))
    for names, values in (
        (QUERY_KEYS, texts),
        (CONTEXT_KEYS, contexts),
        (ANSWER_KEYS, texts),
        (("id",), st.one_of(good_text, texts)),
        (("metadata",), metadata_values),
    ):
        picked = draw(_field(names, values))
        if picked is not None:
            raw[picked[0]] = picked[1]
    return raw


def _line(value: object, ascii_only: bool) -> bytes:
    """One JSONL line; a lone surrogate becomes invalid UTF-8 unless escaped."""
    try:
        text = json.dumps(value, ensure_ascii=ascii_only, default=str)
    except (TypeError, ValueError, RecursionError):  # tuple keys, 4300+ digits, too deep
        return b"[unwritable]"
    return text.encode("utf-8", "surrogatepass")


json_lines = st.one_of(
    st.builds(_line, st.one_of(json_values, triple_like()), st.booleans()),
    st.binary(max_size=60),
    st.integers(1, 3_000).map(lambda n: b"[" * n + b"]" * n),
    st.sampled_from(
        [
            b"NaN",
            b"-Infinity",
            b'{"query": NaN}',
            b"1e999999",
            b"9" * 100_000,
            b"[" * 100_000 + b"]" * 100_000,
            b'{"a":' * 50_000,
            b"\xff\xfe",
            b'{"query": "\xed\xa0\x80"}',
            b"\x00",
            b'"\\ud800"',
        ]
    ),
)

jsonl_files = st.lists(json_lines, max_size=5).flatmap(
    lambda lines: st.sampled_from([b"\n", b"\r\n", b"\r"]).map(lambda sep: sep.join(lines))
)

verdict_words = st.sampled_from(
    [*VERDICTS, "Fundamentada", "CONTRADITÓRIO", "parcial ", "maybe", "", "\ud800"]
)
category_values = st.sampled_from([*CATEGORIES, "lei", " null ", "none", "", "XYZ", "\ud800"])
index_values = st.one_of(
    st.integers(-3, 70),
    st.sampled_from(["0", " 1 ", "1,0", "1_0", "١", "nan", "inf", "9" * 5000, 10**400, 1e300]),
    st.floats(),
    st.booleans(),
)
claims = st.fixed_dictionaries(
    {},
    optional={
        "text": st.one_of(good_text, texts),
        "verdict": st.one_of(verdict_words, any_value),
        "category": st.one_of(category_values, json_values),
        "chunk_idx": st.one_of(index_values, json_values),
        "supported": json_values,
    },
)
score_values = st.one_of(
    st.floats(),
    huge_numbers,
    st.sampled_from(["0,5", "0.5", "1", "NaN", "Infinity", "1_0", "0.2_5", "９", "9" * 5000]),
    json_values,
)
reply_objects = st.fixed_dictionaries(
    {},
    optional={
        "claims": st.one_of(st.lists(st.one_of(claims, json_values), max_size=6), any_value),
        "score": score_values,
        "reasoning": texts,
        "unsupported_claims": st.one_of(st.lists(hostile_text, max_size=3), any_value),
    },
)


@st.composite
def replies(draw: st.DrawFn) -> str:
    """What a model may send: JSON of any shape, fenced, wrapped in prose, cut short, or junk."""
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(st.text(any_char, max_size=200))
    if kind == 1:
        n = draw(st.sampled_from([1_000, 5_000, 100_000]))
        opener = draw(st.sampled_from(["[", '{"a":', '{"claims": [']))
        return '{"claims": ' + opener * n + draw(st.sampled_from(["", "]" * n + "}"]))
    value = draw(reply_objects)
    try:
        text = json.dumps(value, ensure_ascii=draw(st.booleans()), default=str)
    except (TypeError, ValueError, RecursionError):  # tuple keys, 4300+ digits, too deep
        text = '{"claims": []}'
    if draw(st.booleans()):
        text = text[: draw(st.integers(0, len(text)))]  # cut short: the repair path
    if draw(st.booleans()):
        text = draw(st.sampled_from(["```json\n{}\n```", "Aqui está: {}", "{} e mais {}"])).replace(
            "{}", text, 1
        )
    return text


# --------------------------------------------------------------------------- property checks


def _utf8_json(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8")


def _check_fallback_id(value: object) -> None:
    fid = fallback_id(value)
    assert isinstance(fid, str) and 0 < len(fid) <= 128
    fid.encode("utf-8")
    assert fallback_id(value) == fid  # deterministic


def check_parse_triple(value: object) -> None:
    _check_fallback_id(value)
    try:
        triple = parse_triple(value, LIMITS, line=7)
    except InvalidTriple as exc:
        assert exc.field in FIELDS, exc.field
        assert str(exc).startswith(f"line 7: {exc.field}: ")
        str(exc).encode("utf-8")
        return
    assert isinstance(triple, Triple)
    data = _utf8_json(triple.to_dict())
    assert json.loads(data) == triple.to_dict()
    assert triple.query.strip() and all(c.strip() for c in triple.context)
    assert len(triple.context) <= LIMITS.max_chunks and 0 < len(triple.id) <= 128
    Verdict(id=triple.id, status="ok", metadata=triple.metadata).model_dump_json().encode("utf-8")


def check_read_lines(data: bytes) -> None:
    stream = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="surrogateescape")
    last = 0
    for item in read_lines(stream):
        assert item.line > last
        last = item.line
        assert len(item.fallback_id) == 32
        if item.error is not None:
            assert item.error.startswith("not valid JSON (")
            _check_fallback_id(item.text)
        else:
            assert not nested_deeper_than(item.value, MAX_NESTING)
            check_parse_triple(item.value)


class _Judge:
    """A judge that always answers: enough to drive the pipeline around it."""

    info = JudgeInfo(kind="rules")

    async def judge(self, triple: Triple) -> Judgement:
        return Judgement(claims=[], reasoning=triple.answer[:10])

    async def aclose(self) -> None:
        return None


PIPELINE = Pipeline(_Judge(), LIMITS)


def _run(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine that never waits on anything (no event loop needed)."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise AssertionError("the coroutine waited")


def check_pipeline(data: bytes) -> None:
    stream = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="surrogateescape")
    for item in read_lines(stream):
        source = {"input": "fuzz.jsonl", "line": item.line}
        envelope: dict[str, Any] = {"triple": item.value, "source": source}
        if item.error is not None:
            envelope = {"triple": None, "source": source, "error": item.error, "raw": item.text}
        check_envelope(envelope)


def check_envelope(envelope: dict[str, Any]) -> None:
    verdict = _run(PIPELINE.evaluate(envelope)).verdict
    assert verdict.status in ("ok", "rejected")
    verdict.model_dump_json().encode("utf-8")
    _utf8_json(verdict.model_dump(mode="json"))


def check_parse_claims(case: tuple[str, int]) -> None:
    text, n_chunks = case
    try:
        parsed = parse_claims(text, n_chunks)
    except JudgeOutputInvalid as exc:
        str(exc).encode("utf-8")  # the message is sent back to the model
        return
    for claim in parsed.claims:
        assert claim.verdict in VERDICTS and claim.text and claim.text == claim.text.strip()
        if claim.verdict == "grounded":
            assert claim.category is None
        else:
            assert claim.category in CATEGORIES
        if claim.chunk_idx is not None:
            assert type(claim.chunk_idx) is int and 0 <= claim.chunk_idx < n_chunks
            assert claim.verdict in ("grounded", "partial")
    if parsed.reported_score is not None:
        assert math.isfinite(parsed.reported_score)
    assert all(isinstance(r, str) for r in parsed.repairs)
    Verdict(
        id="x", status="ok", claims=parsed.claims, reasoning=parsed.reasoning
    ).model_dump_json().encode("utf-8")


def check_parse_faithfulness(text: str) -> None:
    try:
        faithfulness, _repairs = parse_faithfulness(text)
    except JudgeOutputInvalid as exc:
        str(exc).encode("utf-8")
        return
    assert math.isfinite(faithfulness.score) and 0.0 <= faithfulness.score <= 1.0
    assert all(isinstance(u, str) for u in faithfulness.unsupported_claims)
    Verdict(id="x", status="ok", faithfulness=faithfulness).model_dump_json().encode("utf-8")


PROPERTIES: dict[str, tuple[st.SearchStrategy[Any], Callable[[Any], None]]] = {
    "parse_triple": (triple_like(), check_parse_triple),
    "read_lines": (jsonl_files, check_read_lines),
    "pipeline.evaluate": (jsonl_files, check_pipeline),
    "parse_claims": (st.tuples(replies(), st.integers(0, 70)), check_parse_claims),
    "parse_faithfulness": (replies(), check_parse_faithfulness),
}

# ------------------------------------------------------------------------------------ tests

BASE = {"query": "Qual o prazo?", "context": ["O prazo é de 7 dias."], "answer": "7 dias."}


@settings(SETTINGS, max_examples=1200)
@given(triple_like())
@example({**BASE, "answer": "\ud800"})
@example({**BASE, "question": "\udcff"})
@example({**BASE, "context": ["ok", "a\udfffb"]})
@example({**BASE, "documents": "\ud800"})
@example({**BASE, "id": "\ud800"})
@example({**BASE, "metadata": {"app": "\ud800"}})
@example({**BASE, "metadata": {"\ud800": 1}})
@example({**BASE, "metadata": {"x": {1, 2}}})
@example({**BASE, "metadata": {1: "a", "b": 2}})
@example({**BASE, "metadata": {"x": float("nan")}})
@example({**BASE, "metadata": {"x": 10**5000}})
@example({"id": "\ud800", "metadata": {"\ud800": 1}})
def test_parse_triple_returns_a_writable_triple_or_names_the_field(value: object) -> None:
    check_parse_triple(value)


@settings(SETTINGS, max_examples=300)
@given(jsonl_files)
@example(b"[" * 100_000 + b"]" * 100_000)
@example(b'{"a":' * 100_000)
@example(b"1" * 100_000)
@example(b"1e999999\nNaN\n-Infinity")
@example(b'{"query": "\xff", "context": "c", "answer": "a"}\n\xfe')
@example(b'{"query": "q", "context": "c", "answer": "a", "id": "\\ud800"}')
def test_reader_reports_every_line_and_never_raises(data: bytes) -> None:
    check_read_lines(data)


# Hypothesis cannot print values thousands of levels deep, so these are plain tests.
@pytest.mark.parametrize("kind", ["dict", "list"])
@pytest.mark.parametrize("depth", [33, 1_000, 10_000])
def test_deep_metadata_is_rejected_not_a_recursion_error(kind: str, depth: int) -> None:
    for value in (
        {**BASE, "metadata": {"a": nest(kind, depth - 1)}},
        {"query": "q", "metadata": {"a": nest(kind, depth - 1)}},
        nest(kind, depth),
    ):
        check_parse_triple(value)
        check_envelope({"triple": value, "source": {"input": "-", "line": 1}})
    with pytest.raises(InvalidTriple, match=r"^metadata: nested deeper than 32 levels$"):
        parse_triple({**BASE, "metadata": {"a": nest(kind, depth - 1)}})
    assert parse_triple({**BASE, "metadata": {"a": nest(kind, 31)}}).metadata


def test_reader_messages() -> None:
    lines = [b"[" * 100_000, b"9" * 100_000, b"[" * 960 + b"]" * 960, b"[" * 65 + b"]" * 65]
    lines.append(b'{"a": ' + b"[" * 63 + b"]" * 63 + b"}")
    stream = io.TextIOWrapper(
        io.BytesIO(b"\n".join(lines)), encoding="utf-8", errors="surrogateescape"
    )
    deep, digits, deep_but_decodable, just_too_deep, deep_enough = read_lines(stream)
    assert (deep.line, deep.error) == (1, "not valid JSON (nested deeper than 64 levels)")
    assert digits.line == 2 and digits.error is not None
    assert digits.error.startswith("not valid JSON (Exceeds the limit (4300 digits)")
    # decodable here, but kombu's encoder, deeper in the stack, would raise RecursionError
    assert deep_but_decodable.error == "not valid JSON (nested deeper than 64 levels)"
    assert just_too_deep.error == "not valid JSON (nested deeper than 64 levels)"
    assert deep_enough.error is None and nested_deeper_than(deep_enough.value, 63)


@settings(SETTINGS, max_examples=200)
@given(jsonl_files)
@example(b'{"query": "q", "context": "c", "answer": "a", "metadata": {"k": "\\ud800"}}')
@example(b'{"query": 1, "metadata": {"k": "\\ud800"}, "id": "\\udcff"}')
@example(b'{"id": 5, "metadata": ' + b'{"a":' * 900 + b"1" + b"}" * 901)
@example(b'{"answer": 1, "metadata": {"k": NaN}}')
@example(b'{"a": "\xff"}\n\xff')
def test_every_line_ends_as_a_writable_verdict(data: bytes) -> None:
    check_pipeline(data)


def test_fallback_id_survives_hostile_values() -> None:
    for value in (
        nest("list", 10_000),
        {"metadata": nest("dict", 10_000)},
        {1: "a", "b": 2},
        {"id": "\ud800"},
        "\ud800",
        float("nan"),
        [10**5000],
    ):
        _check_fallback_id(value)
    cycle: list[object] = []
    cycle.append(cycle)
    _check_fallback_id(cycle)
    assert fallback_id({"id": "abc", "query": 1}) == "abc"


def _claim_reply(**fields: Any) -> tuple[str, int]:
    item = {"text": "O prazo é de 7 dias.", "verdict": "partial", **fields}
    return json.dumps({"claims": [item]}, ensure_ascii=False), 3


@settings(SETTINGS, max_examples=1200)
@given(st.tuples(replies(), st.integers(0, 70)))
@example(('{"claims": ' + "[" * 100_000 + "]" * 100_000 + "}", 3))
@example(('{"claims": ' + "[" * 100_000, 3))
@example(('{"claims": [' + '{"a":' * 50_000 + "}", 3))
@example(('{"claims": [], "score": ' + "9" * 400 + "}", 3))
@example(_claim_reply(chunk_idx=10**400))
@example(('{"claims": [{"text": "a", "verdict": "partial", "chunk_idx": NaN}]}', 3))
@example(('{"claims": [{"text": "a", "verdict": "partial", "chunk_idx": -Infinity}]}', 3))
@example(_claim_reply(chunk_idx=True))
@example(_claim_reply(chunk_idx="9" * 5000))
@example(_claim_reply(category=5))
@example(_claim_reply(category=["LEI"]))
@example(_claim_reply(text="\ud800"))
@example(_claim_reply(text=["a"]))
@example(_claim_reply(verdict=nest("list", 500)))
@example(_claim_reply(verdict="x" * 100_000))
@example(('{"claims": [], "reasoning": "\\ud800"}', 3))
def test_parse_claims_returns_a_valid_reply_or_rejects_it(case: tuple[str, int]) -> None:
    check_parse_claims(case)


@settings(SETTINGS, max_examples=600)
@given(replies())
@example('{"score": NaN}')
@example('{"score": Infinity}')
@example('{"score": "nan"}')
@example('{"score": 1e999}')
@example('{"score": ' + "9" * 400 + "}")
@example('{"score": 0.5, "unsupported_claims": ' + "[" * 100_000 + "}")
@example('{"score": 0.5, "unsupported_claims": ["\\ud800"], "reasoning": "\\udcff"}')
@example('{"score": "0.2_5"}')
def test_parse_faithfulness_returns_a_valid_score_or_rejects_it(text: str) -> None:
    check_parse_faithfulness(text)


def test_numeric_strings_are_plain_decimals() -> None:
    assert parse_claims(*_claim_reply(chunk_idx=" 1 ")).claims[0].chunk_idx == 1
    assert parse_claims(*_claim_reply(chunk_idx="1,0")).claims[0].chunk_idx == 1
    for odd in ("1_0", "١", "nan", "inf", "0x1"):
        assert (
            parse_claims(
                *_claim_reply(chunk_idx=odd),
            )
            .claims[0]
            .chunk_idx
            is None
        ), odd
    assert parse_faithfulness('{"score": "0,25"}')[0].score == 0.25
    assert parse_claims('{"claims": [], "score": "1_0"}', 3).reported_score is None


def test_lone_surrogates_in_a_reply_are_replaced_and_counted() -> None:
    parsed = parse_claims(*_claim_reply(text="a\ud800b"))
    assert parsed.claims[0].text == "a\ufffdb" and "unicode" in parsed.repairs
    faithfulness, repairs = parse_faithfulness(
        '{"score": 1, "unsupported_claims": ["\\udcff"], "reasoning": "ok"}'
    )
    assert faithfulness.unsupported_claims == ["\ufffd"] and repairs == ["unicode"]
