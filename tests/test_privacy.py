"""Privacy before the judge (worker/llm/privacy.py): placeholders in every prompt, the real values
checked here, and nothing real in what is stored with VEREDITO_REDACT_STORED=on."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.llm_server import ServerThread
from veredito.cli import main
from veredito.producer.triple import Triple
from veredito.worker.llm.privacy import find_personal, mask_triple

CPF_A = "529.982.247-25"  # valid check digits
CPF_CHANGED = "529.982.247-52"  # two digits swapped: invalid
CPF_OTHER = "111.444.777-35"  # valid, but not in the context
CNPJ = "11.222.333/0001-81"
EMAIL = "Maria.Silva@exemplo.com.br"
PHONE = "(11) 98765-4321"
CEP = "01310-100"
RG = "12.345.678-9"
REAL = [CPF_A, CPF_CHANGED, CPF_OTHER, CNPJ, EMAIL, PHONE, CEP, RG]


def digits(value: str) -> str:
    return re.sub(r"\D", "", value)


def test_every_kind_is_found_once() -> None:
    text = (
        f"CPF {CPF_A}, CNPJ {CNPJ}, e-mail {EMAIL}, telefone {PHONE}, CEP {CEP}, RG {RG}, "
        f"CPF sem pontos 52998224725, e um valor de R$ 1.234,56 em 12/03/2025, de 2020-2024."
    )
    kinds = [(f.kind, f.value) for f in find_personal(text)]
    assert kinds == [
        ("CPF", CPF_A), ("CNPJ", CNPJ), ("EMAIL", EMAIL), ("TELEFONE", PHONE), ("CEP", CEP),
        ("RG", RG), ("CPF", "52998224725"),
    ]  # fmt: skip


def test_one_value_one_placeholder_and_one_digit_more_another() -> None:
    triple = Triple(
        "t",
        query=f"Meu e-mail é {EMAIL.lower()}",
        context=(f"Titular: CPF {CPF_A}, e-mail {EMAIL}.", f"Contato: {PHONE}."),
        answer=f"O CPF é {digits(CPF_A)} (ou {CPF_CHANGED}); escreva para {EMAIL}.",
    )
    masked = mask_triple(triple)
    t = masked.triple
    assert t.context == ("Titular: CPF [CPF_1], e-mail [EMAIL_1].", "Contato: [TELEFONE_1].")
    assert t.query == "Meu e-mail é [EMAIL_1]"  # the same address, whatever its case
    assert t.answer == "O CPF é [CPF_1] (ou [CPF_2]); escreva para [EMAIL_1]."
    assert masked.unmask(t.answer) == f"O CPF é {CPF_A} (ou {CPF_CHANGED}); escreva para {EMAIL}."


def triple_line() -> str:
    return json.dumps(
        {
            "id": "pessoal-1",
            "query": f"Qual o CPF da titular? Meu telefone é {PHONE}.",
            "context": [
                f"Titular: Maria Silva, CPF {CPF_A}, RG {RG}, e-mail {EMAIL}, CEP {CEP}.",
                f"Empresa: ACME Ltda, CNPJ {CNPJ}.",
            ],
            "answer": (
                f"O CPF da titular é {CPF_CHANGED}. Outro CPF cadastrado é {CPF_OTHER}. "
                f"A empresa tem CNPJ {CNPJ}. O e-mail é {EMAIL}."
            ),
            "metadata": {"app": "sac-banco"},
        },
        ensure_ascii=False,
    )


def run(tmp_path: Path) -> dict[str, object]:
    source = tmp_path / "in.jsonl"
    source.write_text(triple_line() + "\n", encoding="utf-8")
    out = tmp_path / "v.jsonl"
    assert main(["run", str(source), "--out", str(out), "--no-progress"]) == 0
    [verdict] = [json.loads(line) for line in out.read_text().splitlines()]
    return verdict  # type: ignore[no-any-return]


def test_no_prompt_carries_a_real_value(
    llm_server: ServerThread, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VEREDITO_LLM_BASE_URL", llm_server.base_url)
    monkeypatch.setenv("VEREDITO_PSEUDONYMISE", "on")
    verdict = run(tmp_path)
    prompts = [m["content"] for body in llm_server.script.requests for m in body["messages"]]
    assert len(prompts) == 2
    for prompt in prompts:
        for value in REAL:
            assert value not in prompt, value
            if digits(value):
                assert digits(value) not in digits(prompt), value
        for placeholder in ("[CPF_1]", "[CPF_2]", "[CPF_3]", "[CNPJ_1]", "[EMAIL_1]",
                            "[TELEFONE_1]", "[CEP_1]", "[RG_1]"):  # fmt: skip
            assert placeholder in prompt
    # the verdict speaks of the real values again
    texts = " ".join(c["text"] for c in verdict["claims"])  # type: ignore[attr-defined]
    assert CPF_CHANGED in texts and CNPJ in texts and "[CPF_" not in texts
    # and the rules checked the real IDs: the changed one and the absent one are reported
    findings = {(f["text"], f["kind"]) for f in verdict["rule_findings"]}  # type: ignore[attr-defined]
    assert (CPF_CHANGED, "invalid_check_digit") in findings
    assert (CPF_OTHER, "absent_from_context") in findings
    assert not any(text == CNPJ for text, _ in findings)  # copied from the context: fine


def test_redact_stored_keeps_the_placeholders_everywhere(
    llm_server: ServerThread, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VEREDITO_LLM_BASE_URL", llm_server.base_url)
    monkeypatch.setenv("VEREDITO_PSEUDONYMISE", "on")
    monkeypatch.setenv("VEREDITO_REDACT_STORED", "on")
    verdict = run(tmp_path)
    stored = json.dumps(verdict, ensure_ascii=False)
    for value in REAL:
        assert value not in stored, value
    assert "[CPF_2]" in stored and "[EMAIL_1]" in stored
    assert verdict["input"]["context"][0].startswith("Titular: Maria Silva, CPF [CPF_1]")  # type: ignore[index]
    assert {"[CPF_2]", "[CPF_3]"} <= {f["text"] for f in verdict["rule_findings"]}  # type: ignore[attr-defined]


def test_the_rules_judge_redacts_what_it_stores_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VEREDITO_JUDGE", "rules")
    monkeypatch.setenv("VEREDITO_REDACT_STORED", "on")
    stored = json.dumps(run(tmp_path), ensure_ascii=False)
    for value in REAL:
        assert value not in stored, value


def test_without_it_the_prompt_has_the_real_text(
    llm_server: ServerThread, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VEREDITO_LLM_BASE_URL", llm_server.base_url)
    run(tmp_path)
    assert CPF_CHANGED in llm_server.script.requests[0]["messages"][0]["content"]
