"""--map expressions and presets: other log shapes onto the triple contract."""

from __future__ import annotations

from typing import Any

import pytest

from veredito.producer.ingest import Tokens
from veredito.producer.mapping import Mapper, MappingError, parse_maps
from veredito.producer.triple import InvalidTriple, parse_triple


def mapped(specs: list[str], value: Any) -> Any:
    return Mapper(parse_maps(specs)).apply(value)


def test_the_issue_s_nested_log_line() -> None:
    line = {
        "request": {"question": "Qual o prazo?", "user": "u1"},
        "retrieval": {"docs": [{"text": "Art. 49: 7 dias."}, {"text": "CDC."}]},
        "response": {"text": "São 7 dias."},
        "service": "sac",
    }
    triple = parse_triple(
        mapped(
            [
                "query=request.question",
                "context=retrieval.docs[].text",
                "answer=response.text",
                "metadata.app=service",
            ],
            line,
        )
    )
    assert triple.query == "Qual o prazo?"
    assert triple.context == ("Art. 49: 7 dias.", "CDC.")
    assert triple.answer == "São 7 dias."
    assert triple.metadata["app"] == "sac"


@pytest.mark.parametrize(
    ("preset", "value", "expected"),
    [
        (
            "ragas",
            {
                "user_input": "Q?",
                "retrieved_contexts": ["c1", "c2"],
                "response": "A.",
                "reference": "R",
            },
            ("Q?", ("c1", "c2"), "A."),
        ),
        (
            "aferiq",
            {
                "trace_id": "t-1",
                "goal": "Q?",
                "final_answer": "A.",
                "steps": [
                    {"step_type": "tool", "step_output": "c1"},
                    {"step_type": "llm", "step_output": "x"},
                    {"step_type": "retrieval", "step_output": "c2"},
                ],
            },
            ("Q?", ("c1", "c2"), "A."),
        ),
        ("aferiq", {"query": "Q?", "context": ["c1"], "answer": "A."}, ("Q?", ("c1",), "A.")),
        (
            "langchain",
            {
                "run_id": "r-9",
                "inputs": {"question": "Q?"},
                "outputs": {
                    "answer": "A.",
                    "source_documents": [{"page_content": "c1", "metadata": {}}],
                },
            },
            ("Q?", ("c1",), "A."),
        ),
    ],
)
def test_presets(preset: str, value: dict[str, Any], expected: tuple[Any, ...]) -> None:
    triple = parse_triple(mapped([preset], value))
    assert (triple.query, triple.context, triple.answer) == expected


def test_unmapped_fields_keep_their_own_values_and_missing_ones_are_named() -> None:
    value = {"query": "Q?", "context": ["c"], "reply": {"text": "A."}, "metadata": {"x": 1}}
    triple = parse_triple(mapped(["answer=reply.text"], value))
    assert triple.answer == "A." and triple.metadata == {"x": 1}
    with pytest.raises(InvalidTriple, match="answer"):
        parse_triple(mapped(["answer=nowhere.text"], {"query": "Q?", "context": ["c"]}))


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nonsense", "not FIELD=EXPRESSION nor a preset"),
        ("colour=a", "the field must be"),
        ("query=a[", "query=a["),
    ],
)
def test_bad_maps_are_named(spec: str, message: str) -> None:
    with pytest.raises(MappingError, match=message.replace("[", r"\[")):
        Mapper(parse_maps([spec]))


def test_a_token_can_carry_a_preset() -> None:
    tokens = Tokens("plain-token-0123456,sac-token-0123456:sac,lc-token-0123456::langchain")
    grant = tokens.check("Bearer lc-token-0123456")
    assert grant is not None and grant.app is None and grant.mapper is not None
    assert tokens.check("Bearer sac-token-0123456").app == "sac"  # type: ignore[union-attr]
    assert tokens.check("Bearer nope") is None and tokens.check(None) is None
