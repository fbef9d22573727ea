"""The rules judge: detectors (positive, negative, normalisation), claims, verdicts, floors."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT
from veredito.worker.calibrate import calibrate
from veredito.worker.rules import check_text, index_context, judge_answer
from veredito.worker.rules.detectors import find_mentions
from veredito.worker.rules.text import digitise, split_sentences
from veredito.worker.settings import Settings


def keys(text: str, category: str | None = None) -> set[str]:
    return {
        k
        for m in find_mentions(digitise(text))
        if category is None or m.category == category
        for k in m.keys
    }


# -- detectors: positives ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "category", "key"),
    [
        ("conforme a Lei nº 8.078/1990", "LEI", "law|lei:8078"),
        ("a Lei 8078/90 diz", "LEI", "law|lei:8078"),
        ("Lei n.º 8.078, de 11 de setembro de 1990", "LEI", "law|lei:8078"),
        ("pelo CDC", "LEI", "law|lei:8078"),
        ("o Código de Defesa do Consumidor", "LEI", "law|lei:8078"),
        ("a CLT prevê", "LEI", "law|dl:5452"),
        ("Decreto-Lei nº 5.452/1943", "LEI", "law|dl:5452"),
        ("a LGPD exige", "LEI", "law|lei:13709"),
        ("Lei Complementar nº 123/2006", "LEI", "law|lc:123"),
        ("a MP 1.172 alterou", "LEI", "law|mp:1172"),
        ("IN RFB 2.178/2024", "LEI", "law|in:2178"),
        ("Resolução Anatel nº 632/2014", "LEI", "law|resolucao:632"),
        ("RN 438/2018 da ANS", "LEI", "law|resolucao:438"),
        ("Art. 49 do CDC", "LEI", "article|49"),
        ("artigo 5º, inciso X", "LEI", "inciso|10"),
        ("art. 12, V, da lei", "LEI", "inciso|5"),
        ("art. 1.350 do Código Civil", "LEI", "article|1350"),
        ("§ 1º do art. 18", "LEI", "paragraph|1"),
        ("a Constituição Federal", "LEI", "law|code:cf"),
        ("a Lei do Inquilinato", "LEI", "law|lei:8245"),
        ("CNPJ 11.222.333/0001-81", "CNPJ_CPF_RG", "cnpj|11222333000181"),
        ("CNPJ 11222333000181", "CNPJ_CPF_RG", "cnpj|11222333000181"),
        ("o CPF 529.982.247-25", "CNPJ_CPF_RG", "cpf|52998224725"),
        ("CPF: 52998224725", "CNPJ_CPF_RG", "cpf|52998224725"),
        ("RG 12.345.678-9", "CNPJ_CPF_RG", "rg|123456789"),
        ("procure o INSS", "ENTIDADE_BR", "body|inss"),
        ("Instituto Nacional do Seguro Social", "ENTIDADE_BR", "body|inss"),
        ("o Bacen regula", "ENTIDADE_BR", "body|bcb"),
        ("o Banco Central regula", "ENTIDADE_BR", "body|bcb"),
        ("reclame no Procon", "ENTIDADE_BR", "body|procon"),
        ("o Ministério Público", "ENTIDADE_BR", "body|mp"),
        ("a Agência Nacional de Saúde Suplementar", "ENTIDADE_BR", "body|ans"),
        ("R$ 1.500,00", "PRAZO_VALOR", "money|150000"),
        ("R$ 1500", "PRAZO_VALOR", "money|150000"),
        ("mil e quinhentos reais", "PRAZO_VALOR", "money|150000"),
        ("R$ 1,5 mil", "PRAZO_VALOR", "money|150000"),
        ("R$ 9,877 por kWh", "PRAZO_VALOR", "money|987.7"),
        ("15%", "PRAZO_VALOR", "percent|15"),
        ("quinze por cento", "PRAZO_VALOR", "percent|15"),
        ("2,9% sobre o preço", "PRAZO_VALOR", "percent|2.9"),
        ("metade das férias", "PRAZO_VALOR", "percent|50"),
        ("01/01/2024", "PRAZO_VALOR", "date|2024-01-01"),
        ("1º de janeiro de 2024", "PRAZO_VALOR", "date|2024-01-01"),
        ("em 01.01.2024", "PRAZO_VALOR", "date|2024-01-01"),
        ("em 2024-01-01", "PRAZO_VALOR", "date|2024-01-01"),
        ("primeiro de janeiro de 2024", "PRAZO_VALOR", "date|2024-01-01"),
        ("em maio de 2024", "PRAZO_VALOR", "monthyear|2024-05"),
        ("30 dias", "PRAZO_VALOR", "duration:day|30"),
        ("trinta dias", "PRAZO_VALOR", "duration:day|30"),
        ("7 (sete) dias", "PRAZO_VALOR", "duration:day|7"),
        ("1 ano", "PRAZO_VALOR", "duration:month|12"),
        ("5 dias úteis", "PRAZO_VALOR", "duration:workday|5"),
        ("24 horas", "PRAZO_VALOR", "duration:hour|24"),
        ("três aluguéis", "PRAZO_VALOR", "count:alugu|3"),
        ("o ano de 2023", "PRAZO_VALOR", "year|2023"),
        ("ligue 0800 701 9656", "PRAZO_VALOR", "number|8007019656"),
        ("o Bolsa Família", "POLITICA", "programme|bolsa_familia"),
        ("pelo Pix", "POLITICA", "programme|pix"),
        ("o seguro-desemprego", "POLITICA", "programme|seguro_desemprego"),
        ("o Benefício de Prestação Continuada", "POLITICA", "programme|bpc"),
        ("Minha Casa, Minha Vida", "POLITICA", "programme|mcmv"),
        ("Campinas/SP", "GEOGRAFIA_BR", "city|campinas"),
        ("em Belo Horizonte", "GEOGRAFIA_BR", "city|belo horizonte"),
        ("no estado de Minas Gerais", "GEOGRAFIA_BR", "uf|MG"),
        ("sede em Natal/RN", "GEOGRAFIA_BR", "city|natal"),
        ("na cidade de Vitória", "GEOGRAFIA_BR", "city|vitoria"),
        ("no Nordeste", "GEOGRAFIA_BR", "region|nordeste"),
        ("empresas de SP", "GEOGRAFIA_BR", "uf|SP"),
    ],
)
def test_detector_finds(text: str, category: str, key: str) -> None:
    assert key in keys(text, category)


# -- detectors: negatives ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "category"),
    [
        ("Para solicitar, acesse o aplicativo.", "GEOGRAFIA_BR"),  # "Para" is not Pará
        ("Feliz Natal a todos os clientes!", "GEOGRAFIA_BR"),  # the holiday, not Natal/RN
        ("A RN 438/2018 trata da portabilidade.", "GEOGRAFIA_BR"),  # Resolução Normativa
        ("Ligue 11987654321 para atendimento.", "CNPJ_CPF_RG"),  # a phone, not a CPF
        ("A receita médica é obrigatória.", "ENTIDADE_BR"),  # receita is not Receita Federal
        ("O cliente pode pedir o cancelamento in loco.", "LEI"),  # "in" is not IN RFB
        ("Você tem direito ao reembolso integral.", "PRAZO_VALOR"),
        ("É um direito do consumidor.", "PRAZO_VALOR"),  # "um" stays a word
        ("A caixa de entrada do e-mail.", "ENTIDADE_BR"),
    ],
)
def test_detector_ignores(text: str, category: str) -> None:
    assert keys(text, category) == set()


# -- normalisation: two surface forms, one key ----------------------------------------------


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Lei nº 8.078/1990", "Lei 8078/90"),
        ("CDC", "Lei nº 8.078, de 11 de setembro de 1990"),
        ("11.222.333/0001-81", "CNPJ 11222333000181"),
        ("R$ 81.000,00", "oitenta e um mil reais"),
        ("R$ 81 mil", "R$ 81000"),
        ("15%", "quinze por cento"),
        ("30 dias", "trinta dias"),
        ("12 meses", "1 ano"),
        ("01/03/2024", "1º de março de 2024"),
        ("Instituto Nacional do Seguro Social", "INSS"),
        ("Agência Nacional de Telecomunicações", "Anatel"),
        ("Fundo de Garantia do Tempo de Serviço", "FGTS"),
    ],
)
def test_same_fact_same_key(a: str, b: str) -> None:
    assert keys(a) & keys(b)


def test_check_digits() -> None:
    (valid,) = find_mentions("CPF 529.982.247-25")
    (invalid,) = find_mentions("CPF 529.982.247-52")
    assert not valid.invalid and invalid.invalid
    (cnpj,) = find_mentions("CNPJ 11.222.333/0001-82")
    assert cnpj.invalid


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        ("O art. 49 do CDC dá 7 dias. Depois disso, não.", 2),
        ("A Lei nº 8.078/1990 vale. A Comercial Ltda. paga R$ 1.500,00. O Dr. João atende.", 3),
        ("São 7 dias! Pode desistir? Sim.", 3),
        ("Conforme o inciso X do art. 5º, a casa é asilo. Ok", 2),
        ("", 0),
    ],
)
def test_sentence_splitter(text: str, sentences: int) -> None:
    assert len(split_sentences(text)) == sentences


# -- comparison with the context -----------------------------------------------------------

CONTEXT = [
    "Art. 49 do Código de Defesa do Consumidor (Lei nº 8.078/1990): o consumidor pode desistir "
    "no prazo de 7 (sete) dias. Reclamações: consumidor.gov.br.",
    "Titular: Maria Souza, CPF 529.982.247-25, residente em Belo Horizonte/MG. Carências: 300 "
    "dias para partos a termo; 180 dias para os demais casos.",
]


@pytest.mark.parametrize(
    ("answer", "verdict", "category"),
    [
        ("Você pode desistir em sete dias, pelo art. 49 do CDC.", "grounded", None),
        ("A Lei 8.078/90 garante o arrependimento.", "grounded", None),
        ("O prazo é de 30 dias.", "contradicted", "PRAZO_VALOR"),
        ("Pela Lei nº 8.069/1990 o prazo é de 7 dias.", "contradicted", "LEI"),
        ("Procure o Procon.", "invented", "ENTIDADE_BR"),
        ("O CPF da titular é 529.982.247-52.", "contradicted", "CNPJ_CPF_RG"),
        ("A titular mora em Contagem/MG.", "contradicted", "GEOGRAFIA_BR"),
        ("Quem recebe Bolsa Família tem prioridade.", "invented", "POLITICA"),
        ("A carência para parto é de 180 dias.", "contradicted", "PRAZO_VALOR"),  # wrong slot
        ("A carência para os demais casos é de 180 dias.", "grounded", None),
        ("O contexto não informa o valor do Auxílio Gás.", "grounded", None),
        (
            "Sugiro confirmar com a central de atendimento antes de enviar o produto.",
            "grounded",
            None,
        ),
    ],
)
def test_claim_verdicts(answer: str, verdict: str, category: str | None) -> None:
    (claim,) = judge_answer(answer, index_context(CONTEXT))
    assert (claim.verdict, claim.category) == (verdict, category)


def test_invalid_check_digit_is_reported() -> None:
    checks = check_text("O CNPJ é 11.222.333/0001-82.", index_context(["CNPJ 11.222.333/0001-81"]))
    assert [(c.status, c.finding) for c in checks] == [("contradicted", "invalid_check_digit")]


def test_grounded_claims_point_at_their_chunk() -> None:
    claims = judge_answer("A titular mora em Belo Horizonte.", index_context(CONTEXT))
    assert claims[0].chunk_idx == 1


# -- floors on labelled sets (spec §12) ------------------------------------------------------

FLOORS = {
    # set: (answer F1, {category: (precision, recall)})
    # issue 10's sets, read and worked on after their first run (docs/rules.md, "Accuracy");
    # holdout5, holdout7 and holdout8 are frozen held-out sets and stay out of the tests
    "holdout3.jsonl": (0.82, {"LEI": (0.9, 0.95), "GEOGRAFIA_BR": (0.9, 0.8)}),
    "holdout4.jsonl": (0.85, {"LEI": (0.9, 0.95), "GEOGRAFIA_BR": (0.95, 0.95)}),
    "holdout6.jsonl": (0.8, {"POLITICA": (0.95, 0.9), "GEOGRAFIA_BR": (0.95, 0.9)}),
    "devset.jsonl": (
        0.95,
        {
            c: (0.95, 0.95)
            for c in (
                "LEI",
                "CNPJ_CPF_RG",
                "ENTIDADE_BR",
                "PRAZO_VALOR",
                "POLITICA",
                "GEOGRAFIA_BR",
            )
        },
    ),
    "holdout.jsonl": (
        0.85,
        {
            "LEI": (0.9, 0.85),
            "CNPJ_CPF_RG": (0.9, 0.85),
            "ENTIDADE_BR": (0.9, 0.85),
            "PRAZO_VALOR": (0.9, 0.85),
            "POLITICA": (0.85, 0.85),
            "GEOGRAFIA_BR": (0.9, 0.85),
        },
    ),
    "holdout2.jsonl": (
        0.85,
        {
            "LEI": (0.9, 0.85),
            "CNPJ_CPF_RG": (0.9, 0.85),
            "ENTIDADE_BR": (0.9, 0.85),
            "PRAZO_VALOR": (0.8, 0.8),
            "POLITICA": (0.9, 0.85),
            "GEOGRAFIA_BR": (0.85, 0.85),
        },
    ),
}


@pytest.mark.parametrize("name", sorted(FLOORS))
def test_floors(name: str) -> None:
    report = calibrate(ROOT / "tests" / "data" / name, Settings(judge="rules"))
    answer_f1, categories = FLOORS[name]
    assert report.failed == 0
    assert (report.answers.f1 or 0) >= answer_f1, report.table()
    for category, (precision, recall) in categories.items():
        counts = report.categories[category]
        assert (counts.precision or 0) >= precision, (category, report.table())
        assert (counts.recall or 0) >= recall, (category, report.table())


def test_devset_is_large_and_covers_every_category() -> None:
    import json

    rows = [json.loads(x) for x in (ROOT / "tests/data/devset.jsonl").read_text().splitlines()]
    assert len(rows) >= 150
    seen = {(s["category"], s["verdict"]) for r in rows for s in r["labels"]["spans"]}
    for category in (
        "LEI",
        "CNPJ_CPF_RG",
        "ENTIDADE_BR",
        "PRAZO_VALOR",
        "POLITICA",
        "GEOGRAFIA_BR",
    ):
        assert (category, "invented") in seen
        # bodies and programmes are never "another value" of each other (see worker.rules.engine)
        assert (category, "contradicted") in seen or category in ("ENTIDADE_BR", "POLITICA")
    assert sum(not r["labels"]["hallucinated"] for r in rows) >= 60


# -- reading only what the answer needs ------------------------------------------------------


def _triples() -> list[dict[str, object]]:
    import json

    from bench.corpus import triples

    rows: list[dict[str, object]] = list(triples(300, seed=11))
    for name in ("devset", "holdout", "holdout2"):
        lines = (ROOT / "tests" / "data" / f"{name}.jsonl").read_text("utf-8").splitlines()
        rows += [json.loads(line) for line in lines]
    return rows


def test_probes_find_every_clause_that_holds_a_key() -> None:
    """The answer-driven index reads only the clauses holding a probe of the answer's keys; a
    clause with a mention of that key must hold one of its probes (else the index misses it)."""
    from veredito.worker.rules.detectors import _fold_same_length
    from veredito.worker.rules.engine import _chunk_text
    from veredito.worker.rules.probes import probes, tokens

    checked = 0
    for row in _triples():
        for chunk in row["context"]:  # type: ignore[attr-defined]
            for clause in _chunk_text(chunk).clauses:
                clause_tokens = tokens(_fold_same_length(clause))
                for mention in find_mentions(digitise(clause)):
                    for key in mention.keys | mention.extra:
                        found = probes(key)
                        if found is not None:
                            checked += 1
                            assert found & clause_tokens, (key, clause)
    assert checked > 5000


def test_answer_driven_judging_equals_reading_the_whole_context() -> None:
    differ = []
    rows = _triples()
    for row in rows:
        chunks, answer = row["context"], str(row["answer"])
        fast = judge_answer(answer, chunks)  # type: ignore[arg-type]
        whole = judge_answer(answer, index_context(chunks))  # type: ignore[arg-type]
        seen = [(c.text, c.verdict, c.category, c.chunk_idx) for c in fast]
        if seen != [(c.text, c.verdict, c.category, c.chunk_idx) for c in whole]:
            differ.append(answer)
        fast_checks = check_text(answer, chunks)  # type: ignore[arg-type]
        whole_checks = check_text(answer, index_context(chunks))  # type: ignore[arg-type]
        if [(c.status, c.finding) for c in fast_checks] != [
            (c.status, c.finding) for c in whole_checks
        ]:
            differ.append(answer)
    assert len(rows) > 600
    assert differ == []


# -- answers as chatbots write them (issue 10) ------------------------------------------------


def test_markdown_and_citation_debris_become_sentences_or_are_dropped() -> None:
    from veredito.worker.rules.markdown import claims_of

    answer = (
        "## Prazo para desistir\n\n"
        "Você tem **7 dias** para desistir [1][3]. Veja o [art. 49](https://planalto.gov.br/x) "
        "do CDC.\ue200cite\ue202turn0search6\ue201\n\n"
        "- Devolução *imediata* dos valores citeturn1search2;\n"
        "1. Vale para compras pela internet.\n\n"
        "| Item | Prazo |\n|---|---|\n| Desistência | 7 dias |\n\n"
        "> Atenção: guarde os comprovantes.\n\n"
        "Citations: [1] https://www.planalto.gov.br/ccivil_03/leis/l8078.htm [2] https://x.y\n"
        "--- Resposta do Perplexity: pplx.ai/share"
    )
    sentences, dropped = claims_of(answer)
    assert sentences == [
        "Você tem 7 dias para desistir.",
        "Veja o art. 49 do CDC.",
        "Devolução imediata dos valores;",
        "Vale para compras pela internet.",
        "Item Desistência; Prazo 7 dias.",
        "Atenção: guarde os comprovantes.",
    ]
    assert dropped >= 4  # the heading, the table's header and rule, the sources, the footer
    flat = (
        '"# Critérios para Declarar o IRPF 2024 No Brasil, **estão obrigadas** as pessoas com '
        'renda acima de R$ 30.639,90 [2]. - **Bens:** acima de R$ 800.000,00."'
    )
    sentences, dropped = claims_of(flat)
    assert sentences[0].startswith("No Brasil, estão obrigadas")
    assert dropped == 1 and not any("#" in s or "[2]" in s for s in sentences)


def test_no_markdown_or_citation_fragment_is_judged_as_a_claim() -> None:
    context = ["Art. 49 do CDC: o consumidor pode desistir no prazo de 7 dias."]
    answer = (
        "# Direito de arrependimento\nVocê pode desistir em 7 dias [1].\nFontes: [1] https://a.b"
    )
    judged = judge_answer(answer, context)
    assert [(c.text, c.verdict) for c in judged] == [("Você pode desistir em 7 dias.", "grounded")]


def _judge(answer: str, context: list[str], query: str = "") -> list[tuple[str, str | None]]:
    from veredito.worker.rules import judge

    out = []
    for claim in judge(answer, context, query).claims:
        out += [(c.mention.text, c.finding) for c in claim.checks]
    return out


@pytest.mark.parametrize(
    ("context", "query", "answer", "value"),
    [
        (
            ["A multa por rescisão é de 2 mensalidades. A mensalidade do plano é de R$ 310,00."],
            "",
            "Se cancelar agora, a multa fica em R$ 620.",
            "R$ 620",
        ),
        (
            ["O DAS-MEI corresponde a 5% do salário mínimo.", "O salário mínimo é R$ 1.518,00."],
            "",
            "Você paga 5% de R$ 1.518, ou seja, R$ 75,90 por mês.",
            "R$ 75,90",
        ),
        (
            ["A licença-maternidade é de 120 dias.", "A empresa cidadã prorroga por 60 dias."],
            "",
            "Somando os 120 dias e a prorrogação, são 180 dias no total.",
            "180 dias",
        ),
        (
            ["O consumidor pode desistir no prazo de 7 dias a contar do recebimento."],
            "Recebi o produto em 10/03/2025.",
            "Como recebeu em 10/03/2025, pode desistir até 17/03/2025.",
            "17/03/2025",
        ),
        (
            ["A cobrança indevida dá direito à devolução em dobro do valor pago em excesso."],
            "Paguei R$ 150 a mais na fatura.",
            "A devolução é em dobro. Você deve receber R$ 300.",
            "R$ 300",
        ),
    ],
)
def test_a_value_derived_from_the_context_is_grounded_and_says_how(
    context: list[str], query: str, answer: str, value: str
) -> None:
    from veredito.worker.rules import judge

    checks = [c for claim in judge(answer, context, query).claims for c in claim.checks]
    (derived,) = [c for c in checks if c.mention.text == value]
    assert (derived.status, derived.finding) == ("grounded", "derived")
    assert derived.derivation is not None and derived.derivation.operands
    assert all(c.status == "grounded" for c in checks), [(c.mention.text, c.status) for c in checks]


def test_a_derivation_that_does_not_hold_is_contradicted() -> None:
    context = ["A multa é de 2 mensalidades; a mensalidade é de R$ 310,00."]
    found = _judge("A multa é de 2 × R$ 310, ou seja, R$ 640.", context)
    assert ("R$ 640", "conflicts_with_context") in found


def test_the_users_own_values_ground_the_answer_unless_the_context_says_otherwise() -> None:
    context = ["O BPC exige renda por pessoa de até 1/4 do salário mínimo (R$ 379,50)."]
    query = "Na minha casa são 4 pessoas e a renda é de R$ 1.400."
    found = _judge("Com renda de R$ 1.400, você está acima do limite.", context, query)
    assert found == [("R$ 1.400", None)]
    telecom = ["O prazo máximo de fidelização nos serviços de telecomunicações é de 12 meses."]
    asked = "Meu contrato tem fidelidade de 24 meses. Isso é permitido?"
    found = _judge(
        "Pode sim: nos serviços de telecom a fidelidade vai até 24 meses.", telecom, asked
    )
    assert ("24 meses", "conflicts_with_context") in found
    # a programme the user asks about grounds nothing the answer says of it
    assert ("Auxílio Gás", "absent_from_context") in _judge(
        "O Auxílio Gás paga R$ 102 a cada dois meses.",
        ["O BPC paga um salário mínimo ao idoso."],
        "O contexto fala do Auxílio Gás?",
    )


def test_a_state_implied_by_a_body_or_court_is_grounded() -> None:
    assert _judge("Em Pernambuco, reclame no Procon.", ["Procon-PE: reclamações pelo site."]) == [
        ("Pernambuco", None),
        ("Procon", None),
    ]
    court = ["TJRJ – 2º Juizado Especial Cível da Comarca da Capital."]
    assert ("Rio de Janeiro", None) in _judge("O processo corre no Rio de Janeiro.", court)
    assert ("Bahia", "absent_from_context") in _judge("Na Bahia, reclame no Procon.", court)


def test_a_value_about_what_the_context_does_not_address_is_invented_not_contradicted() -> None:
    context = ["O prazo de carência para consultas é de 30 dias."]
    found = _judge("A taxa de adesão custa R$ 90.", [*context, "A mensalidade é de R$ 250."])
    assert found == [("R$ 90", "absent_from_context")]
    assert _judge("O prazo de carência para consultas é de 60 dias.", context) == [
        ("60 dias", "conflicts_with_context")
    ]


def test_findings_carry_operands_only_when_derived() -> None:
    from veredito.worker.verdict import RuleFinding

    plain = RuleFinding(category="LEI", text="Lei 1/2000", kind="absent_from_context")
    assert "operands" not in plain.model_dump() and plain.problem
    derived = RuleFinding(
        category="PRAZO_VALOR",
        text="R$ 620",
        kind="derived",
        operation="×",
        operands=["R$ 310,00", "2"],
    )
    assert derived.model_dump()["operands"] == ["R$ 310,00", "2"] and not derived.problem


def test_calibrate_by_verdict_shows_the_claim_confusion(capsys: pytest.CaptureFixture[str]) -> None:
    from veredito.cli import main

    code = main(
        ["calibrate", str(ROOT / "tests/data/holdout.jsonl"), "--judge", "rules", "--by-verdict"]
    )
    out = capsys.readouterr().out
    assert code == 0
    matrix = out.split("\n\n")[1].splitlines()[2:]  # after the title and the column names
    rows = {line.split()[0]: [int(n) for n in line.split()[1:]] for line in matrix}
    assert list(rows) == ["grounded", "partial", "invented", "contradicted"]
    assert sum(rows["grounded"]) > 50 and sum(rows["contradicted"]) > 5
    assert "precision" in out


def test_list_titles_and_flattened_headings_are_not_claims() -> None:
    from veredito.worker.rules.markdown import claims_of

    sentences, dropped = claims_of(
        "Nesses casos, o contribuinte pode:\n- retificar a declaração em até 5 anos.\n\n"
        "Documentação Necessária\n\nGuarde os recibos por 5 anos. ---"
    )
    assert sentences == ["retificar a declaração em até 5 anos.", "Guarde os recibos por 5 anos."]
    assert dropped == 2  # the list's title and the heading


def test_times_of_day_days_of_month_and_days_of_a_month_without_year() -> None:
    assert keys("entre 22h e 6h30") == {"clock|22:00", "clock|06:30"}
    assert "dayofmonth|20" in keys("até o dia 20 do mês seguinte")
    context = ["Art. 49 do CDC: o consumidor pode desistir no prazo de 7 dias do recebimento."]
    query = "Meu pedido chegou no dia 10 de março. Até quando posso desistir?"
    found = _judge(
        "Como chegou em 10 de março, você pode desistir até 17 de março.", context, query
    )
    assert ("17 de março", "derived") in found
    asked = "A operadora pode exigir fidelidade de 2 anos?"  # a question gives no fact
    telecom = ["A fidelização não pode passar de 12 meses."]
    assert ("24 meses", "absent_from_context") in _judge("Pode, até 24 meses.", telecom, asked) or (
        "24 meses",
        "conflicts_with_context",
    ) in _judge("Pode, até 24 meses.", telecom, asked)


def test_the_numbers_a_claim_computes_with_are_grounded_with_its_result() -> None:
    context = ["O empregador deposita 8% da remuneração no FGTS todo mês."]
    query = "Meu salário é R$ 2.500."
    found = _judge(
        "O depósito mensal é de R$ 200. Em 12 meses, isso soma R$ 2.400.", context, query
    )
    assert ("R$ 2.400", "derived") in found and ("12 meses", "derived") in found
    discount = ["Pelo SNE, o infrator que não recorrer paga 60% do valor da multa."]
    assert ("40%", "derived") in _judge("Você paga 60%, ou seja, um desconto de 40%.", discount)


def test_the_right_body_of_another_state_an_id_of_another_party_an_rg_without_check_digit() -> None:
    procon = ["Procon-PR: reclamações pelo site do Procon-PR ou na sede em Curitiba."]
    assert ("Procon-SP", "conflicts_with_context") in _judge("Reclame no Procon-SP.", procon)
    assert ("Procon-PR", None) in _judge("Reclame no Procon-PR.", procon)
    assert ("Procon", None) in _judge("Reclame no Procon.", procon)
    invoice = [
        "Emitente: Eletro Total Comércio Ltda., CNPJ 24.961.282/0001-51. "
        "Transportadora: RápidoSul Logística Ltda., CNPJ 74.719.951/0001-51."
    ]
    found = _judge("A transportadora é a RápidoSul Logística, CNPJ 24.961.282/0001-51.", invoice)
    assert ("24.961.282/0001-51", "conflicts_with_context") in found
    assert ("24.961.282/0001-51", None) in _judge(
        "O emitente é a Eletro Total, CNPJ 24.961.282/0001-51.", invoice
    )
    guarantor = ["Fiador: Roberto Menezes, RG nº 4.567.812 SSP/PE, CPF 445.759.529-23."]
    assert "rg|4567812" in keys("RG nº 4.567.812 SSP/PE")
    found = _judge("O fiador tem RG nº 4.576.812 SSP/PE.", guarantor)
    assert ("4.576.812", "conflicts_with_context") in found


def test_years_in_days_telephones_with_area_codes_a_laws_date_and_labelled_table_cells() -> None:
    assert _judge("A receita vale por até 1 ano.", ["A receita vale por até 365 dias."]) == [
        ("1 ano", None)
    ]
    phone = ["Defensoria: telefone (91) 3201-2700, das 8h às 14h."]
    assert ("91 3201 2700", None) in _judge("Ligue para 91 3201 2700.", phone)
    lgpd = ["A LGPD, Lei nº 13.709, de 14 de agosto de 2018, dispõe sobre dados pessoais."]
    assert ("14/08/2018", None) in _judge("A LGPD é de 14/08/2018.", lgpd)
    table = [
        "Faixas: Faixa 1: até R$ 2.850,00; Faixa 2: de R$ 2.850,01 a R$ 4.700,00. Na Faixa 2 há subsídio."
    ]
    assert ("R$ 2.850", None) in _judge("Faixa 1: até R$ 2.850.", table)


def test_a_derivation_reads_the_same_whatever_the_hash_seed() -> None:
    import os
    import subprocess
    import sys

    code = (
        "from veredito.worker.rules import judge;"
        "r = judge('Somando, são 120 dias mais 60, ou seja, 180 dias no total.',"
        " ['A licença é de 120 dias.', 'A prorrogação é de 60 dias.']);"
        "print([c.derivation for cl in r.claims for c in cl.checks])"
    )
    seen = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2", "3", "4")
    }
    assert len(seen) == 1 and "Derivation" in next(iter(seen))
