"""One case per rule of spec §5."""

from __future__ import annotations

import json
from typing import Any

import pytest

from veredito.worker.errors import JudgeOutputInvalid
from veredito.worker.llm.parsing import normalise_verdict, parse_claims, parse_faithfulness
from veredito.worker.scoring import count_categories, is_hallucinated, score_claims


def reply(*claims: dict[str, Any], **extra: Any) -> str:
    return json.dumps(
        {"claims": list(claims), "score": 0.9, "reasoning": "ok", **extra}, ensure_ascii=False
    )


def claim(
    text: str = "O prazo é de 7 dias.", verdict: str = "grounded", **extra: Any
) -> dict[str, Any]:
    return {"text": text, "verdict": verdict, **extra}


GOOD = reply(claim(chunk_idx=0), claim("Lei 8.069", "invented", category="LEI", chunk_idx=None))


def test_plain_reply_needs_no_repair() -> None:
    parsed = parse_claims(GOOD, n_chunks=2)
    assert parsed.repairs == []
    assert [(c.verdict, c.category, c.chunk_idx) for c in parsed.claims] == [
        ("grounded", None, 0),
        ("invented", "LEI", None),
    ]
    assert parsed.reported_score == 0.9 and parsed.reasoning == "ok"


# rule 1: first complete top-level object; fences, prose and what follows are dropped
@pytest.mark.parametrize(
    ("text", "repair"),
    [
        (f"```json\n{GOOD}\n```", "fence"),
        (f"Claro! Segue a avaliação:\n{GOOD}\nQualquer dúvida, estou à disposição.", "prose"),
        (f'{GOOD}\n{{"claims": []}}', "prose"),
        (f"Texto com chave }} antes {GOOD}", "prose"),
    ],
)
def test_rule1_extracts_first_object(text: str, repair: str) -> None:
    parsed = parse_claims(text, 2)
    assert len(parsed.claims) == 2
    assert parsed.repairs[0] == repair


def test_rule1_braces_inside_strings_do_not_end_the_object() -> None:
    text = reply(claim('Ele disse "{não}" e saiu }', chunk_idx=0)) + " fim"
    parsed = parse_claims(text, 1)
    assert parsed.claims[0].text == 'Ele disse "{não}" e saiu }'


@pytest.mark.parametrize(
    "broken",
    [
        '{"claims": [{"text": "a", "verdict": "grounded", "chunk_idx": 0},], "score": 1.0,}',
        '{"claims": [{"text": "a", "verdict": "grounded", "chunk_idx": 0}], "score": 1.0',
    ],
    ids=["trailing-comma", "missing-closing-brace"],
)
def test_rule1_repairs_small_syntax_faults(broken: str) -> None:
    parsed = parse_claims(broken, 1)
    assert [c.text for c in parsed.claims] == ["a"]
    assert "syntax" in parsed.repairs


@pytest.mark.parametrize("text", ["", "Não sei avaliar.", "[1, 2, 3]"])
def test_rule1_no_object_is_invalid(text: str) -> None:
    with pytest.raises(JudgeOutputInvalid) as info:
        parse_claims(text, 1)
    assert info.value.raw == text


# rule 2: claims must be a list; each claim needs text and verdict
@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"claims": "nenhuma"}', '"claims" must be a list'),
        ('{"score": 1}', '"claims" must be a list'),
        ('{"claims": ["texto solto"]}', "claims[0] must be an object"),
        ('{"claims": [{"verdict": "grounded"}]}', 'claims[0] needs "text" and "verdict"'),
        ('{"claims": [{"text": "a"}]}', 'claims[0] needs "text" and "verdict"'),
        ('{"claims": [{"text": 3, "verdict": "grounded"}]}', "claims[0].text must be a string"),
    ],
)
def test_rule2_shape(text: str, message: str) -> None:
    with pytest.raises(JudgeOutputInvalid, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_claims(text, 1)


# rule 3: verdict words, any case or accent, English or Portuguese
@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("grounded", "grounded"),
        ("GROUNDED", "grounded"),
        (" Grounded ", "grounded"),
        ("fundamentado", "grounded"),
        ("Fundamentada", "grounded"),
        ("partial", "partial"),
        ("Parcial", "partial"),
        ("invented", "invented"),
        ("inventado", "invented"),
        ("INVENTADA", "invented"),
        ("contradicted", "contradicted"),
        ("contradito", "contradicted"),
        ("contraditado", "contradicted"),
        ("contraditada", "contradicted"),
        ("contraditório", "contradicted"),
        ("Contraditória", "contradicted"),
        ("contraditorio", "contradicted"),
    ],
)
def test_rule3_verdict_words(word: str, expected: str) -> None:
    assert normalise_verdict(word) == expected
    parsed = parse_claims(reply(claim(verdict=word)), 1)
    assert parsed.claims[0].verdict == expected


@pytest.mark.parametrize("word", ["supported", "true", "", "falso", None, 1])
def test_rule3_other_verdicts_make_the_reply_invalid(word: object) -> None:
    with pytest.raises(JudgeOutputInvalid, match="verdict"):
        parse_claims(reply(claim(verdict=word)), 1)  # type: ignore[arg-type]


# rule 4: categories
@pytest.mark.parametrize(
    ("verdict", "category", "expected", "repaired"),
    [
        ("invented", "lei", "LEI", False),
        ("contradicted", "Cnpj_Cpf_Rg", "CNPJ_CPF_RG", False),
        ("partial", "PRAZO_VALOR", "PRAZO_VALOR", False),
        ("grounded", "LEI", None, True),  # a grounded claim has none, whatever the model said
        ("grounded", None, None, False),
        ("grounded", "null", None, False),
        ("invented", None, "GENERICA", True),
        ("invented", "null", "GENERICA", True),
        ("invented", "none", "GENERICA", True),
        ("invented", "", "GENERICA", True),
        ("invented", "ALUCINACAO", "GENERICA", True),  # unknown code
    ],
)
def test_rule4_category(
    verdict: str, category: object, expected: str | None, repaired: bool
) -> None:
    parsed = parse_claims(reply(claim(verdict=verdict, category=category)), 1)
    assert parsed.claims[0].category == expected
    assert ("category" in parsed.repairs) is repaired


# rule 5: chunk_idx
@pytest.mark.parametrize(
    ("verdict", "idx", "expected", "repaired"),
    [
        ("grounded", 1, 1, False),
        ("grounded", "1", 1, True),  # numeric string
        ("partial", 0, 0, False),
        ("grounded", 2, None, True),  # out of range (2 chunks)
        ("grounded", -1, None, True),
        ("grounded", "segundo", None, True),
        ("grounded", 0.5, None, True),
        ("grounded", None, None, False),
        ("invented", 0, None, True),  # invented and contradicted claims have null
        ("contradicted", 1, None, True),
    ],
)
def test_rule5_chunk_idx(verdict: str, idx: object, expected: int | None, repaired: bool) -> None:
    parsed = parse_claims(reply(claim(verdict=verdict, category="LEI", chunk_idx=idx)), 2)
    assert parsed.claims[0].chunk_idx == expected
    assert ("chunk_idx" in parsed.repairs) is repaired


# rule 6: supported is derived, the model's value ignored
def test_rule6_supported_is_derived() -> None:
    parsed = parse_claims(
        reply(claim(verdict="invented", supported=True), claim(verdict="partial", supported=False)),
        1,
    )
    assert [c.supported for c in parsed.claims] == [False, True]


# rule 7: score recomputed, the model's kept as reported_score; no claims: null, not hallucinated
def test_rule7_score_is_recomputed() -> None:
    parsed = parse_claims(
        reply(
            claim(),
            claim(verdict="partial"),
            claim(verdict="invented"),
            claim(verdict="invented"),
            score="0.99",
        ),
        1,
    )
    assert score_claims(parsed.claims) == pytest.approx((1 + 0.5) / 4)
    assert parsed.reported_score == pytest.approx(0.99)
    assert is_hallucinated(parsed.claims)
    assert count_categories(parsed.claims) == {"GENERICA": 3}  # partial counts too


def test_rule7_wrong_score_type_is_not_reported() -> None:
    parsed = parse_claims(reply(claim(), score="alto"), 1)
    assert parsed.reported_score is None and score_claims(parsed.claims) == 1.0


def test_rule7_no_claims() -> None:
    parsed = parse_claims('{"claims": [], "score": 1.0, "reasoning": "nada"}', 1)
    assert parsed.claims == []
    assert score_claims(parsed.claims) is None
    assert not is_hallucinated(parsed.claims)


# rule 8: dropped empty claims are counted like every other repair
def test_rule8_empty_claim_is_dropped_and_counted() -> None:
    parsed = parse_claims(reply(claim("  "), claim()), 1)
    assert len(parsed.claims) == 1
    assert parsed.repairs == ["empty_claim"]


# faithfulness
@pytest.mark.parametrize(
    ("text", "score", "unsupported"),
    [
        ('{"score": 0.4, "reasoning": "r", "unsupported_claims": ["x"]}', 0.4, ["x"]),
        ('{"score": "0.7", "reasoning": "r"}', 0.7, []),
        ('{"score": 1, "unsupported_claims": null}', 1.0, []),
        ('```json\n{"score": 0, "reasoning": "r", "unsupported_claims": []}\n```', 0.0, []),
    ],
)
def test_faithfulness_valid(text: str, score: float, unsupported: list[str]) -> None:
    faithfulness, _ = parse_faithfulness(text)
    assert faithfulness.score == score and faithfulness.unsupported_claims == unsupported


@pytest.mark.parametrize(
    "text",
    [
        '{"score": 1.5}',
        '{"score": -0.1}',
        '{"score": "alto"}',
        '{"reasoning": "sem score"}',
        '{"score": 0.5, "unsupported_claims": "x"}',
        '{"score": 0.5, "unsupported_claims": [1]}',
        '{"score": 0.5, "reasoning": 3}',
        "sem json",
    ],
)
def test_faithfulness_invalid(text: str) -> None:
    with pytest.raises(JudgeOutputInvalid):
        parse_faithfulness(text)
