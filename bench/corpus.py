"""Distinct, realistic triples for the benchmarks: every triple has its own context.

    .venv/bin/python bench/corpus.py --n 2000 --seed 1 > /tmp/triples.jsonl

Production traffic has a new context on nearly every triple, so a benchmark that repeats one
triple measures warm caches. Here each chunk is assembled from facts of one domain (consumer law,
labour, social security, tax, health plans, telecom, banking, data protection, rent, traffic),
each fact drawn from its own template with its own values (law numbers, articles, deadlines,
amounts, percentages, dates, CNPJs, cities, public bodies, programmes), in random order, padded
with plain prose to about 610 characters. Three chunks make a context. The answer (about 580
characters) restates facts of the context in other words, numbers sometimes in words, and in
about a third of the triples gets one fact wrong the way RAG bots do: another law, another
deadline, another amount, a body or programme the context never named, a CNPJ with a digit
changed.

The generator is seeded: the same ``--seed`` gives the same triples.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from validate_docbr import CNPJ

__all__ = ["triples"]

CHUNK_CHARS = 610
ANSWER_CHARS = 600  # the loop stops past 500: answers average about 580

LAWS = [
    ("Lei nº 8.078/1990", "Lei 8.078/90", "Código de Defesa do Consumidor"),
    ("Lei nº 8.213/1991", "Lei 8.213/91", "Lei de Benefícios da Previdência Social"),
    ("Lei nº 9.656/1998", "Lei 9.656/98", "Lei dos Planos de Saúde"),
    ("Lei nº 13.709/2018", "Lei 13.709/18", "Lei Geral de Proteção de Dados"),
    ("Lei nº 8.245/1991", "Lei 8.245/91", "Lei do Inquilinato"),
    ("Lei nº 10.741/2003", "Lei 10.741/03", "Estatuto da Pessoa Idosa"),
    ("Lei nº 12.965/2014", "Lei 12.965/14", "Marco Civil da Internet"),
    ("Lei nº 14.181/2021", "Lei 14.181/21", "Lei do Superendividamento"),
    ("Lei nº 9.503/1997", "Lei 9.503/97", "Código de Trânsito Brasileiro"),
    ("Lei nº 8.036/1990", "Lei 8.036/90", "lei do FGTS"),
    ("Lei nº 7.998/1990", "Lei 7.998/90", "lei do seguro-desemprego"),
    ("Lei nº 13.467/2017", "Lei 13.467/17", "Reforma Trabalhista"),
    ("Lei Complementar nº 123/2006", "LC 123/06", "Estatuto Nacional da Microempresa"),
    ("Decreto nº 7.962/2013", "Decreto 7.962/13", "decreto do comércio eletrônico"),
    ("Lei nº 14.133/2021", "Lei 14.133/21", "Lei de Licitações"),
    ("Lei nº 9.472/1997", "Lei 9.472/97", "Lei Geral de Telecomunicações"),
    ("Lei nº 12.527/2011", "Lei 12.527/11", "Lei de Acesso à Informação"),
    ("Resolução Normativa ANS nº 465/2021", "RN 465/21", "rol de procedimentos da ANS"),
    ("Instrução Normativa RFB nº 2.178/2024", "IN RFB 2.178/24", "instrução da Receita"),
    ("Resolução Anatel nº 765/2023", "Resolução 765/23", "regulamento de direitos do consumidor"),
]
BODIES = [
    ("Procon", "Procon"),
    ("Instituto Nacional do Seguro Social (INSS)", "INSS"),
    ("Receita Federal", "Receita"),
    ("Agência Nacional de Saúde Suplementar (ANS)", "ANS"),
    ("Agência Nacional de Telecomunicações (Anatel)", "Anatel"),
    ("Banco Central", "Bacen"),
    ("Autoridade Nacional de Proteção de Dados (ANPD)", "ANPD"),
    ("Departamento Estadual de Trânsito (Detran)", "Detran"),
    ("Caixa Econômica Federal", "Caixa"),
    ("Defensoria Pública", "Defensoria"),
    ("Ministério do Trabalho", "MTE"),
    ("Secretaria Nacional do Consumidor", "Senacon"),
    ("Juizado Especial Cível", "juizado especial"),
    ("Superior Tribunal de Justiça", "STJ"),
    ("Agência Nacional de Energia Elétrica (Aneel)", "Aneel"),
    ("Serasa", "Serasa"),
]
PROGRAMMES = [
    "Bolsa Família",
    "Benefício de Prestação Continuada (BPC)",
    "Minha Casa, Minha Vida",
    "Desenrola Brasil",
    "Farmácia Popular",
    "Pé-de-Meia",
    "Tarifa Social de Energia Elétrica",
    "Auxílio Gás",
    "Programa Universidade para Todos (Prouni)",
    "Seguro-Defeso",
]
CITIES = [
    ("Campinas", "SP"),
    ("Belo Horizonte", "MG"),
    ("Curitiba", "PR"),
    ("Recife", "PE"),
    ("Porto Alegre", "RS"),
    ("Salvador", "BA"),
    ("Fortaleza", "CE"),
    ("Goiânia", "GO"),
    ("Manaus", "AM"),
    ("Belém", "PA"),
    ("Florianópolis", "SC"),
    ("Niterói", "RJ"),
    ("Ribeirão Preto", "SP"),
    ("Juiz de Fora", "MG"),
    ("Londrina", "PR"),
    ("Natal", "RN"),
    ("São Luís", "MA"),
    ("Cuiabá", "MT"),
    ("Uberlândia", "MG"),
    ("Joinville", "SC"),
    ("Maceió", "AL"),
    ("Teresina", "PI"),
    ("Aracaju", "SE"),
    ("Campo Grande", "MS"),
]
COMPANIES = [
    "Comercial Ipê Amarelo Ltda.",
    "Saúde Vida Operadora de Planos S.A.",
    "TeleSul Comunicações Ltda.",
    "Banco Cerrado S.A.",
    "Móveis Serra Azul Ltda.",
    "Energia do Vale Distribuidora S.A.",
    "Imobiliária Casa Nova Ltda.",
    "Farmácias Boa Saúde Ltda.",
    "Construtora Horizonte S.A.",
    "Loja Virtual Mandacaru Ltda.",
]
WORDS = {
    2: "dois",
    3: "três",
    5: "cinco",
    7: "sete",
    10: "dez",
    15: "quinze",
    20: "vinte",
    30: "trinta",
    45: "quarenta e cinco",
    60: "sessenta",
    90: "noventa",
}
FILLER = [
    "O atendimento pode ser feito pelo aplicativo, pelo site ou pela central telefônica.",
    "Guarde o número de protocolo de todas as solicitações e os comprovantes de pagamento.",
    "As informações desta página têm caráter orientativo e não substituem o contrato assinado.",
    "Em caso de divergência, prevalece a versão mais recente do regulamento publicado.",
    "A solicitação deve ser acompanhada de documento de identificação com foto.",
    "O cliente recebe por e-mail a confirmação de cada etapa do processo.",
    "Documentos digitalizados devem estar legíveis, sem rasuras e dentro da validade.",
    "Pedidos incompletos são devolvidos ao solicitante com a indicação do que falta.",
    "A empresa mantém canais acessíveis para pessoas com deficiência auditiva ou visual.",
    "As condições valem para contratos firmados a partir da data de publicação desta norma.",
]
OPENINGS = ["Sim.", "Não exatamente.", "Boa pergunta!", "Entendi sua dúvida.", "Olá!", ""]
CLOSINGS = [
    "Se tiver outra dúvida, estou à disposição.",
    "Sugiro guardar todos os comprovantes.",
    "Recomendo confirmar os detalhes no seu contrato.",
    "Espero ter ajudado.",
    "",
]
QUERIES = [
    "Qual é o prazo para {topic}?",
    "Como funciona {topic}?",
    "Tenho direito a {topic}?",
    "O que diz a regra sobre {topic}?",
    "Quanto tempo demora {topic}?",
]


@dataclass
class Draw:
    """Random values for one fact, and the wrong values a hallucinating bot would use."""

    rng: random.Random

    def days(self) -> int:
        return self.rng.choice([2, 3, 5, 7, 10, 15, 20, 30, 45, 60, 90, 120, 180])

    def other(self, value: int, pool: list[int]) -> int:
        return self.rng.choice([v for v in pool if v != value])

    def money(self) -> str:
        value = self.rng.choice([49, 89, 120, 350, 780, 1_500, 2_380, 4_250, 12_900, 45_000])
        cents = self.rng.choice([0, 0, 0, 50, 90, 99])
        return f"R$ {value:,}".replace(",", ".") + f",{cents:02d}"

    def pct(self) -> str:
        return str(self.rng.choice([1, 2, 3, 5, 8, 10, 12, 15, 20, 25, 30, 40, 50]))

    def cnpj(self) -> str:
        random.seed(self.rng.random())  # validate_docbr draws from the module's generator
        return str(CNPJ().generate(mask=True))


@dataclass(frozen=True)
class Fact:
    """One context sentence and its restatement in an answer, with slot makers."""

    topic: str
    context: str
    answer: str
    slots: Callable[[Draw], dict[str, Any]]
    wrong: Callable[[Draw, dict[str, Any]], dict[str, Any]]


def _days_slots(d: Draw) -> dict[str, Any]:
    n = d.days()
    return {"n": n, "nw": WORDS.get(n, str(n))}


def _days_wrong(d: Draw, s: dict[str, Any]) -> dict[str, Any]:
    n = d.other(s["n"], [5, 7, 10, 15, 30, 60, 90])
    return {**s, "nw": str(n)}


def _law_slots(d: Draw) -> dict[str, Any]:
    full, short, name = d.rng.choice(LAWS)
    return {"law": full, "lawshort": short, "lawname": name, "art": d.rng.randint(2, 240)}


def _law_wrong(d: Draw, s: dict[str, Any]) -> dict[str, Any]:
    if d.rng.random() < 0.5:
        return {**s, "art": s["art"] + d.rng.randint(1, 40)}
    _full, short, _name = d.rng.choice([law for law in LAWS if law[1] != s["lawshort"]])
    return {**s, "lawshort": short}


def _body_slots(d: Draw) -> dict[str, Any]:
    full, short = d.rng.choice(BODIES)
    return {"body": full, "bodyshort": short}


def _body_wrong(d: Draw, s: dict[str, Any]) -> dict[str, Any]:
    return {**s, "bodyshort": d.rng.choice([b[1] for b in BODIES if b[1] != s["bodyshort"]])}


def _money_slots(d: Draw) -> dict[str, Any]:
    return {"money": d.money(), "pct": d.pct()}


def _money_wrong(d: Draw, s: dict[str, Any]) -> dict[str, Any]:
    return {
        **s,
        "money": d.rng.choice(
            [m for m in (d.money(), d.money()) if m != s["money"]] or ["R$ 999,00"]
        ),
    }


def _company_slots(d: Draw) -> dict[str, Any]:
    city, uf = d.rng.choice(CITIES)
    return {"company": d.rng.choice(COMPANIES), "cnpj": d.cnpj(), "city": city, "uf": uf}


def _company_wrong(d: Draw, s: dict[str, Any]) -> dict[str, Any]:
    if d.rng.random() < 0.5:
        digits = list(s["cnpj"])
        i = d.rng.choice([k for k, c in enumerate(digits) if c.isdigit()][:12])
        digits[i] = str((int(digits[i]) + d.rng.randint(1, 9)) % 10)
        return {**s, "cnpj": "".join(digits)}
    city, uf = d.rng.choice([c for c in CITIES if c[0] != s["city"]])
    return {**s, "city": city, "uf": uf}


def _programme_slots(d: Draw) -> dict[str, Any]:
    return {"prog": d.rng.choice(PROGRAMMES), **_money_slots(d)}


def _programme_wrong(d: Draw, s: dict[str, Any]) -> dict[str, Any]:
    return {**s, "prog": d.rng.choice([p for p in PROGRAMMES if p != s["prog"]])}


def _date_slots(d: Draw) -> dict[str, Any]:
    day, month, year = d.rng.randint(1, 28), d.rng.randint(1, 12), d.rng.choice([2024, 2025, 2026])
    return {"date": f"{day:02d}/{month:02d}/{year}", "day": day, "month": month, "year": year}


def _date_wrong(d: Draw, s: dict[str, Any]) -> dict[str, Any]:
    return {**s, "date": f"{(s['day'] % 28) + 1:02d}/{s['month']:02d}/{s['year']}"}


DOMAINS: dict[str, list[Fact]] = {
    "consumo": [
        Fact(
            "desistir da compra",
            "Nos termos do art. {art} da {law} ({lawname}), o consumidor pode desistir da compra "
            "feita fora do estabelecimento no prazo de {n} dias contados do recebimento.",
            "Pelo art. {art} da {lawshort}, você pode desistir da compra em até {nw} dias depois "
            "de receber o produto.",
            lambda d: {**_law_slots(d), **_days_slots(d)},
            lambda d, s: _law_wrong(d, s) if d.rng.random() < 0.5 else _days_wrong(d, s),
        ),
        Fact(
            "o reembolso",
            "A {company}, CNPJ {cnpj}, com sede em {city}/{uf}, devolve o valor pago em até {n} "
            "dias úteis após a chegada do produto ao centro de distribuição.",
            "O reembolso da {company} sai em até {nw} dias úteis depois que o produto chega ao "
            "centro de distribuição.",
            lambda d: {**_company_slots(d), **_days_slots(d)},
            _days_wrong,
        ),
        Fact(
            "reclamar",
            "Reclamações não resolvidas podem ser registradas no {body} ou na plataforma "
            "consumidor.gov.br, que encaminha o caso à empresa em até {n} dias.",
            "Se a empresa não resolver, registre reclamação no {bodyshort} ou no "
            "consumidor.gov.br.",
            lambda d: {**_body_slots(d), **_days_slots(d)},
            _body_wrong,
        ),
        Fact(
            "o frete de devolução",
            "Para compras acima de {money}, o frete de devolução é gratuito e o estorno no cartão "
            "pode levar até duas faturas, com cashback de {pct}% estornado junto.",
            "Em compras acima de {money} a devolução não tem frete, e o cashback de {pct}% é "
            "estornado junto com o valor.",
            _money_slots,
            _money_wrong,
        ),
    ],
    "trabalho": [
        Fact(
            "as férias",
            "Conforme o art. {art} da CLT, alterado pela {law}, as férias podem ser fracionadas em "
            "até três períodos, um deles com pelo menos {n} dias corridos.",
            "A CLT, no art. {art}, permite dividir as férias em até três períodos, um deles de no "
            "mínimo {nw} dias corridos.",
            lambda d: {**_law_slots(d), **_days_slots(d)},
            _law_wrong,
        ),
        Fact(
            "o FGTS",
            "O empregador deposita mensalmente {pct}% da remuneração no FGTS, na Caixa Econômica "
            "Federal, até o dia {n} do mês seguinte ao da competência.",
            "O patrão deposita {pct}% do salário no FGTS todo mês, até o dia {nw} do mês seguinte.",
            lambda d: {"pct": d.pct(), "n": d.rng.randint(5, 20), "nw": ""},
            lambda d, s: {**s, "pct": str(int(s["pct"]) + 1)},
        ),
        Fact(
            "a rescisão",
            "As verbas rescisórias devem ser pagas em até {n} dias contados do término do "
            "contrato, sob pena de multa de {money} prevista no art. {art} da {law}.",
            "As verbas da rescisão têm de ser pagas em até {nw} dias do fim do contrato, senão a "
            "empresa paga multa de {money}.",
            lambda d: {**_law_slots(d), **_days_slots(d), **_money_slots(d)},
            lambda d, s: _money_wrong(d, s) if d.rng.random() < 0.5 else _days_wrong(d, s),
        ),
        Fact(
            "o seguro-desemprego",
            "O pedido de seguro-desemprego é feito no {body} ou pelo portal gov.br, entre o 7º e "
            "o 120º dia após a dispensa, com parcelas de até {money}.",
            "O seguro-desemprego se pede no {bodyshort} ou no gov.br, e cada parcela chega a "
            "{money}.",
            lambda d: {**_body_slots(d), **_money_slots(d)},
            _body_wrong,
        ),
    ],
    "previdencia": [
        Fact(
            "o auxílio por incapacidade",
            "O {body} paga o auxílio por incapacidade temporária a partir do {n}º dia de "
            "afastamento, conforme o art. {art} da {law}.",
            "O benefício por incapacidade é pago pelo {bodyshort} a partir do {n}º dia de "
            "afastamento.",
            lambda d: {**_body_slots(d), **_law_slots(d), "n": d.rng.choice([15, 16, 30])},
            _body_wrong,
        ),
        Fact(
            "a revisão do benefício",
            "O segurado tem {n} anos para pedir a revisão do benefício, contados do primeiro "
            "pagamento, sem prejuízo do recurso administrativo em {d} dias.",
            "Você tem {n} anos para pedir revisão a partir do primeiro pagamento e {d} dias para "
            "recorrer administrativamente.",
            lambda d: {"n": d.rng.choice([5, 10]), "d": d.rng.choice([15, 30])},
            lambda d, s: {**s, "n": 15 - s["n"]},
        ),
        Fact(
            "o BPC",
            "Quem recebe o {prog} não pode acumular o benefício com aposentadoria, e o valor de "
            "{money} é reajustado em janeiro pelo índice oficial.",
            "O {prog} não se acumula com aposentadoria e o valor de {money} é corrigido todo "
            "janeiro.",
            _programme_slots,
            _programme_wrong,
        ),
    ],
    "tributos": [
        Fact(
            "a declaração do imposto de renda",
            "A declaração deve ser entregue à Receita Federal até {date}; o atraso gera multa de "
            "{pct}% ao mês sobre o imposto devido, limitada a 20%, com mínimo de {money}.",
            "A declaração vai para a Receita até {date}, e o atraso custa {pct}% ao mês, com "
            "multa mínima de {money}.",
            lambda d: {**_date_slots(d), **_money_slots(d)},
            lambda d, s: _date_wrong(d, s) if d.rng.random() < 0.5 else _money_wrong(d, s),
        ),
        Fact(
            "o Simples Nacional",
            "Empresas do Simples Nacional, regidas pela {law}, recolhem os tributos em guia única "
            "até o dia {n} do mês seguinte, com faturamento de até {money} por ano.",
            "No Simples Nacional, pela {lawshort}, os tributos vão numa guia única até o dia {n} "
            "do mês seguinte.",
            lambda d: {**_law_slots(d), **_money_slots(d), "n": d.rng.choice([20, 25])},
            _law_wrong,
        ),
        Fact(
            "a nota fiscal",
            "A nota fiscal eletrônica emitida pela {company} (CNPJ {cnpj}) pode ser cancelada em "
            "até {n} horas após a autorização, na Secretaria da Fazenda de {city}.",
            "A nota da {company}, CNPJ {cnpj}, pode ser cancelada em até {n} horas depois de "
            "autorizada.",
            lambda d: {**_company_slots(d), "n": d.rng.choice([24, 48, 168])},
            _company_wrong,
        ),
    ],
    "saude": [
        Fact(
            "a carência",
            "Pela {law}, a carência máxima é de {n} horas para urgência e emergência e de 300 "
            "dias para partos a termo; consultas têm prazo de atendimento de {d} dias úteis.",
            "A {lawshort} limita a carência a {n} horas nas urgências, e as consultas devem ser "
            "marcadas em até {d} dias úteis.",
            lambda d: {**_law_slots(d), "n": 24, "d": d.rng.choice([7, 14, 21])},
            lambda d, s: {**s, "d": s["d"] + 7},
        ),
        Fact(
            "o reajuste do plano",
            "O reajuste anual dos planos individuais, autorizado pela {body}, foi de {pct}% para "
            "o ciclo iniciado em {date}, aplicado no mês de aniversário do contrato.",
            "O reajuste dos planos individuais, autorizado pela {bodyshort}, foi de {pct}% e vale "
            "no aniversário do contrato.",
            lambda d: {**_body_slots(d), **_money_slots(d), **_date_slots(d)},
            lambda d, s: {**s, "pct": str(int(s["pct"]) + 3)},
        ),
        Fact(
            "a cobertura",
            "A {company}, CNPJ {cnpj}, mantém rede credenciada em {city}/{uf} e reembolsa até "
            "{money} por consulta fora da rede, em até {n} dias.",
            "Fora da rede, a {company} reembolsa até {money} por consulta, e tem rede em {city}.",
            lambda d: {**_company_slots(d), **_money_slots(d), **_days_slots(d)},
            lambda d, s: _company_wrong(d, s) if d.rng.random() < 0.5 else _money_wrong(d, s),
        ),
    ],
    "telecom": [
        Fact(
            "o cancelamento da linha",
            "O cancelamento pedido pelo telefone ou pelo aplicativo tem efeito imediato, e a "
            "operadora deve confirmar por escrito em até {n} dias, conforme a {law}.",
            "O cancelamento vale na hora e a operadora tem {nw} dias para confirmar por escrito.",
            lambda d: {**_law_slots(d), **_days_slots(d)},
            _days_wrong,
        ),
        Fact(
            "a multa de fidelidade",
            "A multa por quebra da fidelidade de {m} meses é proporcional ao tempo restante e não "
            "passa de {money}; a {body} fiscaliza o cumprimento.",
            "A multa da fidelidade de {m} meses é proporcional e tem teto de {money}, com "
            "fiscalização da {bodyshort}.",
            lambda d: {**_money_slots(d), **_body_slots(d), "m": d.rng.choice([12, 24])},
            lambda d, s: {**s, "m": 36 - s["m"]},
        ),
    ],
    "banco": [
        Fact(
            "o Pix devolvido",
            "O Mecanismo Especial de Devolução do Pix, regulado pelo {body}, permite contestar "
            "a transação em até {n} dias, e o valor volta em até {h} horas se confirmada a fraude.",
            "Pelo mecanismo de devolução do Pix, você contesta em até {nw} dias e o dinheiro "
            "volta em até {h} horas.",
            lambda d: {**_body_slots(d), **_days_slots(d), "h": d.rng.choice([24, 48, 72])},
            lambda d, s: {**s, "h": s["h"] * 2},
        ),
        Fact(
            "a renegociação",
            "Dívidas de até {money} podem ser renegociadas no {prog}, com desconto de até {pct}% "
            "e parcelamento em {m} meses, conforme a {law}.",
            "No {prog} dá para renegociar dívidas de até {money}, com até {pct}% de desconto e "
            "{m} parcelas.",
            lambda d: {**_programme_slots(d), **_law_slots(d), "m": d.rng.choice([12, 36, 60])},
            _programme_wrong,
        ),
    ],
    "dados": [
        Fact(
            "a exclusão de dados",
            "O encarregado responde aos pedidos do titular em até {n} dias, nos termos do art. "
            "{art} da {law}; reclamações seguem para a {body}.",
            "O encarregado tem {nw} dias para responder, conforme o art. {art} da {lawshort}, e "
            "a reclamação vai para a {bodyshort}.",
            lambda d: {**_law_slots(d), **_days_slots(d), **_body_slots(d)},
            lambda d, s: _body_wrong(d, s) if d.rng.random() < 0.5 else _law_wrong(d, s),
        ),
    ],
    "aluguel": [
        Fact(
            "a devolução do imóvel",
            "O locatário que devolve o imóvel antes do prazo paga multa proporcional, limitada a "
            "{m} aluguéis de {money}, dispensada após {n} meses, conforme a {law}.",
            "Quem sai antes paga multa proporcional de até {m} aluguéis, e a {lawshort} dispensa "
            "a multa depois de {n} meses.",
            lambda d: {**_law_slots(d), **_money_slots(d), "m": 3, "n": d.rng.choice([12, 24])},
            lambda d, s: {**s, "m": 6},
        ),
        Fact(
            "o reajuste do aluguel",
            "O contrato registrado em {city}/{uf} prevê reajuste anual pelo IPCA, a partir de "
            "{date}, e caução de até três aluguéis.",
            "O reajuste do aluguel em {city} é anual, pelo IPCA, desde {date}.",
            lambda d: {**_company_slots(d), **_date_slots(d)},
            lambda d, s: _date_wrong(d, s) if d.rng.random() < 0.5 else _company_wrong(d, s),
        ),
    ],
    "transito": [
        Fact(
            "o recurso da multa",
            "O condutor tem {n} dias para apresentar defesa prévia ao {body}, e a infração "
            "gravíssima custa {money} e soma 7 pontos, pelo art. {art} do CTB.",
            "São {nw} dias para a defesa prévia no {bodyshort}, e a infração gravíssima custa "
            "{money}.",
            lambda d: {**_body_slots(d), **_days_slots(d), **_money_slots(d), **_law_slots(d)},
            lambda d, s: _money_wrong(d, s) if d.rng.random() < 0.5 else _body_wrong(d, s),
        ),
    ],
}

INVENTIONS = [
    "Você também pode pedir ajuda ao {body}.",
    "Esse direito também está garantido pela {law}.",
    "Quem recebe o {prog} tem prioridade no atendimento.",
    "O prazo total não passa de {n} dias.",
    "Há ainda uma taxa administrativa de {money}.",
]


def _chunk(
    rng: random.Random, draw: Draw, facts: list[Fact]
) -> tuple[str, list[tuple[Fact, dict[str, Any]]]]:
    parts: list[str] = []
    used: list[tuple[Fact, dict[str, Any]]] = []
    pool = facts[:]
    rng.shuffle(pool)
    for fact in pool:
        if sum(map(len, parts)) > CHUNK_CHARS - 200:
            break
        slots = fact.slots(draw)
        parts.append(fact.context.format(**slots))
        used.append((fact, slots))
    filler = FILLER[:]
    rng.shuffle(filler)
    while sum(len(p) + 1 for p in parts) < CHUNK_CHARS - 40 and filler:
        parts.insert(rng.randint(0, len(parts)), filler.pop())
    return " ".join(parts), used


def triple(rng: random.Random, i: int) -> dict[str, Any]:
    """One triple: three chunks of one or two domains, and an answer restating some facts."""
    draw = Draw(rng)
    domains = rng.sample(sorted(DOMAINS), 2)
    chunks: list[str] = []
    stated: list[tuple[Fact, dict[str, Any]]] = []
    for k in range(3):
        facts = DOMAINS[domains[0] if k < 2 else domains[1]]
        facts = facts + [f for f in DOMAINS[domains[1 if k < 2 else 0]] if rng.random() < 0.5]
        text, used = _chunk(rng, draw, facts)
        chunks.append(text)
        stated.extend(used)
    rng.shuffle(chunks)
    rng.shuffle(stated)
    seen: set[str] = set()  # distinct kinds of fact first, repeats only to fill the answer
    first = [(f, v) for f, v in stated if not (f.answer in seen or seen.add(f.answer))]
    stated = first + [pair for pair in stated if not any(pair is p for p in first)]
    hallucinate = rng.random() < 0.35
    sentences = [rng.choice(OPENINGS)]
    wrong_at = rng.randrange(3) if hallucinate else -1
    for j, (fact, slots) in enumerate(stated):
        if sum(map(len, sentences)) > ANSWER_CHARS - 100:
            break
        values = fact.wrong(draw, slots) if j == wrong_at else slots
        sentences.append(fact.answer.format(**values))
    if hallucinate and rng.random() < 0.4:
        invention = rng.choice(INVENTIONS)
        values = {
            "body": rng.choice(BODIES)[1],
            "law": rng.choice(LAWS)[1],
            "prog": rng.choice(PROGRAMMES),
            "n": rng.choice([8, 11, 40]),
            "money": draw.money(),
        }
        sentences.insert(rng.randint(1, len(sentences)), invention.format(**values))
    closing = rng.choice(CLOSINGS)
    if sum(map(len, sentences)) < ANSWER_CHARS - 40:
        sentences.append(closing)
    topic = stated[0][0].topic if stated else "isso"
    return {
        "id": f"bench-{i:07d}",
        "query": rng.choice(QUERIES).format(topic=topic),
        "context": chunks,
        "answer": " ".join(s for s in sentences if s),
        "metadata": {"app": f"bench-{domains[0]}"},
    }


def triples(n: int, seed: int = 1) -> Iterator[dict[str, Any]]:
    rng = random.Random(seed)
    for i in range(n):
        yield triple(rng, i)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    for t in triples(args.n, args.seed):
        sys.stdout.write(json.dumps(t, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
