from __future__ import annotations

import hashlib

import pytest

from tests.conftest import ROOT, SHARED, require_shared
from veredito.prompts import NAMES, load_template, render_context, render_prompt


@pytest.mark.parametrize("name", NAMES)
def test_templates_are_the_seeds_byte_for_byte(name: str) -> None:
    shipped = (ROOT / "prompts" / f"{name}.pt-BR.txt").read_bytes()
    seed = SHARED / "seeds" / f"{name}.pt-BR.txt"
    require_shared(seed)
    assert shipped == seed.read_bytes()
    template = load_template(name)
    assert template.text.encode("utf-8") == shipped
    assert template.version == hashlib.sha256(shipped).hexdigest()[:12]


def test_context_block_numbers_chunks_from_one_joined_by_blank_line() -> None:
    assert render_context(["a", "b", "c"]) == "[1] a\n\n[2] b\n\n[3] c"
    assert render_context(["só um"]) == "[1] só um"


def test_claims_prompt_renders_exactly() -> None:
    template = load_template("claims")
    text = render_prompt(template, "Qual o prazo?", ["7 dias.", "Art. 49."], "São 7 dias.")
    assert (
        "PERGUNTA:\nQual o prazo?\n\nCONTEXTO:\n[1] 7 dias.\n\n[2] Art. 49.\n\nRESPOSTA:\nSão 7 dias.\n"
        in text
    )
    assert text.startswith("Você é um avaliador especialista em detecção de alucinação em RAG")
    # literal braces of the template come out single
    assert '{\n  "claims": [\n    {\n      "text": "<afirmação atômica>"' in text
    assert "{{" not in text and "}}" not in text
    assert "verdict ∈ {invented, contradicted, partial}" in text


def test_faithfulness_prompt_renders_exactly() -> None:
    template = load_template("faithfulness")
    text = template.render("q?", ["c1"], "a.")
    assert text.endswith(
        "PERGUNTA:\nq?\n\nCONTEXTO:\n[1] c1\n\nRESPOSTA:\na.\n\n"
        "Responda APENAS com JSON válido (sem markdown, sem texto fora do JSON), neste formato exato:\n"
        '{\n  "score": <float entre 0.0 e 1.0>,\n'
        '  "reasoning": "<1 a 2 frases em português explicando o score>",\n'
        '  "unsupported_claims": ["<lista de afirmações da resposta que não estão no contexto, '
        'vazia se não houver>"]\n}\n'
    )


@pytest.mark.parametrize(
    "hostile",
    ["{context}", "{{", "}}", "{query} e {answer}", "{0}", "{}", "chaves {{context}} duplas", "{"],
)
def test_user_text_with_braces_stays_as_written(hostile: str) -> None:
    template = load_template("claims")
    text = render_prompt(template, f"Q {hostile}", [f"C {hostile}"], f"A {hostile}")
    assert f"PERGUNTA:\nQ {hostile}\n" in text
    assert f"CONTEXTO:\n[1] C {hostile}\n" in text
    assert f"RESPOSTA:\nA {hostile}\n" in text


def test_unknown_prompt_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown prompt 'nope'"):
        load_template("nope")
