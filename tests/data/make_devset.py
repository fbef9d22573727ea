"""Writes tests/data/devset.jsonl: the labelled development set of the rules judge.

Each scenario is a (query, context) with faithful answers (many of them hard negatives: the same
fact written differently) and hallucinated answers whose wrong facts are labelled as spans.
Run: .venv/bin/python tests/data/make_devset.py
"""

from __future__ import annotations

import json
from pathlib import Path

INV, C = "invented", "contradicted"
S = list[tuple[str, str, str]]

SCENARIOS: list[dict[str, object]] = [
    {
        "app": "sac-varejo",
        "q": "Posso desistir de uma compra feita pela internet?",
        "ctx": [
            "Art. 49 do Código de Defesa do Consumidor (Lei nº 8.078, de 11 de setembro de 1990): "
            "o consumidor pode desistir do contrato, no prazo de 7 (sete) dias a contar de sua "
            "assinatura ou do ato de recebimento do produto ou serviço, sempre que a contratação "
            "ocorrer fora do estabelecimento comercial.",
            "Os valores eventualmente pagos durante o prazo de reflexão serão devolvidos de "
            "imediato, monetariamente atualizados.",
        ],
        "good": [
            "Sim. Pelo art. 49 do CDC você pode desistir em até sete dias do recebimento.",
            "Pode, sim: a Lei 8.078/90 garante 7 dias de arrependimento para compras fora da loja, "
            "e o dinheiro volta de imediato com correção.",
            "Sim, o Código de Defesa do Consumidor permite desistir no prazo de sete dias.",
        ],
        "bad": [
            (
                "Você tem 30 dias para desistir, conforme o art. 49 do CDC.",
                [("30 dias", "PRAZO_VALOR", C)],
            ),
            ("Pode desistir em 7 dias, como prevê o art. 94 do CDC.", [("art. 94", "LEI", C)]),
            (
                "Sim, a Lei nº 8.069/1990 garante 7 dias para desistir.",
                [("Lei nº 8.069/1990", "LEI", C)],
            ),
            (
                "Sim, são 7 dias. Se a loja recusar, procure o Procon da sua cidade.",
                [("Procon", "ENTIDADE_BR", INV)],
            ),
            (
                "Sim, em 7 dias, e o reembolso sai em até 10 dias úteis.",
                [("10 dias úteis", "PRAZO_VALOR", INV)],
            ),
        ],
    },
    {
        "app": "sac-varejo",
        "q": "A garantia legal de produto durável é de quanto tempo?",
        "ctx": [
            "Art. 26 do CDC: o direito de reclamar pelos vícios aparentes ou de fácil constatação "
            "caduca em trinta dias, tratando-se de produtos não duráveis, e em noventa dias, "
            "tratando-se de produtos duráveis."
        ],
        "good": [
            "Para produtos duráveis o prazo para reclamar de vícios aparentes é de 90 dias (art. 26 do CDC).",
            "Noventa dias para bens duráveis e trinta para os não duráveis.",
        ],
        "bad": [
            (
                "Para produtos duráveis são 180 dias, segundo o artigo 26 do CDC.",
                [("180 dias", "PRAZO_VALOR", C)],
            ),
            ("São 90 dias, conforme o art. 18 do CDC.", [("art. 18", "LEI", C)]),
            (
                "São 90 dias pelo CDC, e a Anatel fiscaliza o cumprimento.",
                [("Anatel", "ENTIDADE_BR", INV)],
            ),
        ],
    },
    {
        "app": "rh-bot",
        "q": "Quantos dias de férias tenho direito?",
        "ctx": [
            "Art. 130 da CLT: após cada período de 12 meses de vigência do contrato de trabalho, o "
            "empregado terá direito a férias de 30 dias corridos, quando não houver faltado ao "
            "serviço mais de 5 vezes."
        ],
        "good": [
            "Depois de doze meses de contrato, você tem direito a trinta dias corridos de férias, se não faltou mais de cinco vezes.",
            "São 30 dias de férias a cada 12 meses trabalhados, conforme o art. 130 da Consolidação das Leis do Trabalho.",
            "A cada ano de contrato, 30 dias de férias, desde que não tenha faltado mais de 5 vezes.",
        ],
        "bad": [
            (
                "Você tem direito a 20 dias de férias após 12 meses.",
                [("20 dias", "PRAZO_VALOR", C)],
            ),
            (
                "São 30 dias após 12 meses, desde que não tenha mais de 10 faltas.",
                [("10 faltas", "PRAZO_VALOR", C)],
            ),
            (
                "São 30 dias, conforme o art. 130 da CLT e a Lei nº 13.467/2017.",
                [("Lei nº 13.467/2017", "LEI", INV)],
            ),
            (
                "São 30 dias; dúvidas podem ser levadas ao Ministério do Trabalho.",
                [("Ministério do Trabalho", "ENTIDADE_BR", INV)],
            ),
        ],
    },
    {
        "app": "rh-bot",
        "q": "Posso vender minhas férias?",
        "ctx": [
            "Art. 143 da CLT: é facultado ao empregado converter 1/3 do período de férias a que tiver direito em abono pecuniário."
        ],
        "good": [
            "Sim, você pode converter um terço das férias em abono pecuniário (art. 143 da CLT).",
            "Pode vender 1/3 das férias, como permite a CLT.",
        ],
        "bad": [
            ("Sim, você pode vender metade das férias.", [("metade", "PRAZO_VALOR", C)]),
            (
                "Pode converter 1/3 das férias, mas o valor é depositado no FGTS.",
                [("FGTS", "POLITICA", INV)],
            ),
            ("Sim, 1/3 das férias, conforme o art. 134 da CLT.", [("art. 134", "LEI", C)]),
        ],
    },
    {
        "app": "rh-bot",
        "q": "Como funciona a multa do FGTS?",
        "ctx": [
            "Na despedida sem justa causa, o empregador deposita na conta vinculada do trabalhador "
            "no FGTS importância igual a 40% do montante de todos os depósitos realizados durante "
            "o contrato (Lei nº 8.036/1990, art. 18, § 1º)."
        ],
        "good": [
            "Na demissão sem justa causa a empresa paga 40% sobre os depósitos do FGTS (art. 18, § 1º, da Lei 8.036/90).",
            "A multa é de quarenta por cento do saldo depositado no Fundo de Garantia.",
        ],
        "bad": [
            ("A multa é de 50% sobre os depósitos do FGTS.", [("50%", "PRAZO_VALOR", C)]),
            (
                "São 40% sobre o FGTS, e o trabalhador também recebe o seguro-desemprego.",
                [("seguro-desemprego", "POLITICA", INV)],
            ),
            ("A multa é de 40%, prevista na Lei nº 8.213/1991.", [("Lei nº 8.213/1991", "LEI", C)]),
            (
                "A empresa paga 40% e a Caixa libera o saque em 5 dias.",
                [("Caixa", "ENTIDADE_BR", INV), ("5 dias", "PRAZO_VALOR", INV)],
            ),
        ],
    },
    {
        "app": "rh-bot",
        "q": "Qual o prazo para pagar as verbas rescisórias?",
        "ctx": [
            "Art. 477, § 6º, da CLT: o pagamento dos valores constantes do instrumento de rescisão "
            "deverá ser efetuado até dez dias contados a partir do término do contrato."
        ],
        "good": [
            "As verbas rescisórias devem ser pagas em até 10 dias após o fim do contrato (art. 477 da CLT).",
            "Até dez dias contados do término do contrato.",
        ],
        "bad": [
            ("O prazo é de 30 dias após o término do contrato.", [("30 dias", "PRAZO_VALOR", C)]),
            ("São 10 dias, conforme o art. 477, § 8º, da CLT.", [("§ 8º", "LEI", C)]),
            (
                "Até 10 dias; em caso de atraso, procure a Justiça do Trabalho em Porto Alegre.",
                [
                    ("Justiça do Trabalho", "ENTIDADE_BR", INV),
                    ("Porto Alegre", "GEOGRAFIA_BR", INV),
                ],
            ),
        ],
    },
    {
        "app": "fisco-faq",
        "q": "Qual o limite de faturamento do MEI?",
        "ctx": [
            "O Microempreendedor Individual (MEI) pode faturar até R$ 81.000,00 por ano, o que "
            "equivale a uma média de R$ 6.750,00 por mês (Lei Complementar nº 123/2006, art. 18-A)."
        ],
        "good": [
            "O MEI pode faturar até R$ 81 mil por ano, em média R$ 6.750,00 por mês.",
            "O limite é de oitenta e um mil reais anuais para o microempreendedor individual.",
            "Até R$ 81.000 por ano, conforme a LC 123/2006.",
        ],
        "bad": [
            ("O MEI pode faturar até R$ 130 mil por ano.", [("R$ 130 mil", "PRAZO_VALOR", C)]),
            (
                "O limite é R$ 81.000,00 por ano, média de R$ 7.500,00 por mês.",
                [("R$ 7.500,00", "PRAZO_VALOR", C)],
            ),
            (
                "O MEI pode faturar R$ 81 mil por ano e paga o imposto pelo Simples Nacional.",
                [("Simples Nacional", "POLITICA", INV)],
            ),
            (
                "Até R$ 81 mil, conforme a Lei Complementar nº 128/2008.",
                [("Lei Complementar nº 128/2008", "LEI", C)],
            ),
        ],
    },
    {
        "app": "fisco-faq",
        "q": "Quem é obrigado a declarar o Imposto de Renda?",
        "ctx": [
            "Está obrigado a apresentar a Declaração de Ajuste Anual do IRPF 2024 quem recebeu "
            "rendimentos tributáveis cuja soma foi superior a R$ 30.639,90 no ano-calendário de "
            "2023. O prazo de entrega vai até 31 de maio de 2024.",
            "A declaração é entregue à Receita Federal pelo programa ou pelo aplicativo.",
        ],
        "good": [
            "Deve declarar quem recebeu mais de R$ 30.639,90 em rendimentos tributáveis em 2023; o prazo vai até 31/05/2024.",
            "Quem teve rendimentos tributáveis acima de R$ 30.639,90 em 2023 precisa declarar à Receita Federal até 31 de maio de 2024.",
        ],
        "bad": [
            (
                "Deve declarar quem recebeu mais de R$ 30.639,90 em 2023. O prazo termina em 30 de abril de 2024.",
                [("30 de abril de 2024", "PRAZO_VALOR", C)],
            ),
            (
                "Quem recebeu mais de R$ 28.559,70 em 2023 deve declarar.",
                [("R$ 28.559,70", "PRAZO_VALOR", C)],
            ),
            (
                "Quem recebeu mais de R$ 30.639,90 em 2022 deve declarar.",
                [("2022", "PRAZO_VALOR", C)],
            ),
            (
                "Deve declarar quem passou de R$ 30.639,90; a declaração vai para o INSS.",
                [("INSS", "ENTIDADE_BR", INV)],
            ),
        ],
    },
    {
        "app": "fisco-faq",
        "q": "Qual é o CNPJ da empresa para emissão da nota?",
        "ctx": [
            "Dados para faturamento: Comercial Ipê Amarelo Ltda., CNPJ 11.222.333/0001-81, "
            "Inscrição Estadual 123.456.789.110, com sede em Campinas/SP."
        ],
        "good": [
            "O CNPJ para a nota é 11.222.333/0001-81, da Comercial Ipê Amarelo Ltda., em Campinas/SP.",
            "Use o CNPJ 11222333000181 (Comercial Ipê Amarelo Ltda.).",
            "A empresa fica em Campinas, São Paulo, e o CNPJ é 11.222.333/0001-81.",
        ],
        "bad": [
            ("O CNPJ é 11.222.333/0001-82.", [("11.222.333/0001-82", "CNPJ_CPF_RG", C)]),
            (
                "O CNPJ é 11.222.333/0001-81, com sede em Sorocaba/SP.",
                [("Sorocaba/SP", "GEOGRAFIA_BR", C)],
            ),
            (
                "O CNPJ é 11.222.333/0001-81, com sede em Campinas/MG.",
                [("Campinas/MG", "GEOGRAFIA_BR", C)],
            ),
            (
                "O CNPJ é 52.601.815/9083-69 e a sede fica em Campinas.",
                [("52.601.815/9083-69", "CNPJ_CPF_RG", C)],
            ),
        ],
    },
    {
        "app": "fisco-faq",
        "q": "Qual a alíquota do ISS para serviços de informática?",
        "ctx": [
            "No município de São Paulo, a alíquota do ISS para serviços de informática e congêneres é de 2,9% sobre o preço do serviço."
        ],
        "good": [
            "Em São Paulo, o ISS sobre serviços de informática é de 2,9%.",
            "A alíquota é 2,9% sobre o preço do serviço, no município de São Paulo.",
        ],
        "bad": [
            ("Em São Paulo, o ISS é de 5% para informática.", [("5%", "PRAZO_VALOR", C)]),
            (
                "O ISS é de 2,9% em São Paulo e de 2% em Campinas.",
                [("Campinas", "GEOGRAFIA_BR", C), ("2%", "PRAZO_VALOR", C)],
            ),
            (
                "É 2,9% em São Paulo; empresas do Simples Nacional recolhem pelo DAS.",
                [("Simples Nacional", "POLITICA", INV)],
            ),
            (
                "É de 2,9%, conforme a Lei Complementar nº 116/2003.",
                [("Lei Complementar nº 116/2003", "LEI", INV)],
            ),
        ],
    },
    {
        "app": "saude-plano",
        "q": "Qual a carência para parto no plano de saúde?",
        "ctx": [
            "Conforme a Lei nº 9.656/1998, art. 12, inciso V, os prazos máximos de carência são: "
            "300 dias para partos a termo; 180 dias para os demais casos; 24 horas para urgência e emergência."
        ],
        "good": [
            "A carência para parto a termo é de no máximo 300 dias; urgência e emergência, 24 horas (Lei 9.656/98).",
            "Trezentos dias para parto, cento e oitenta para os demais casos e vinte e quatro horas para urgências.",
        ],
        "bad": [
            ("A carência para parto é de 180 dias.", [("180 dias", "PRAZO_VALOR", C)]),
            ("Parto: 300 dias; urgência e emergência: 48 horas.", [("48 horas", "PRAZO_VALOR", C)]),
            (
                "São 300 dias para parto, segundo o art. 12, inciso VI, da Lei 9.656/98.",
                [("inciso VI", "LEI", C)],
            ),
            ("São 300 dias, e a ANVISA fiscaliza os planos.", [("ANVISA", "ENTIDADE_BR", INV)]),
        ],
    },
    {
        "app": "saude-plano",
        "q": "O plano pode negar cobertura de exame pedido pelo médico?",
        "ctx": [
            "A operadora deve garantir a cobertura dos procedimentos listados no Rol de Procedimentos e Eventos em Saúde da ANS, quando solicitados pelo médico assistente."
        ],
        "good": [
            "Não pode negar exames do Rol da ANS pedidos pelo seu médico.",
            "Se o exame está no Rol de Procedimentos da Agência Nacional de Saúde Suplementar e foi pedido pelo médico, a cobertura é obrigatória.",
        ],
        "bad": [
            (
                "Não pode negar; reclame na ANS pelo telefone 0800 701 9656.",
                [("0800 701 9656", "PRAZO_VALOR", INV)],
            ),
            (
                "Não pode negar, e a operadora tem 5 dias úteis para autorizar.",
                [("5 dias úteis", "PRAZO_VALOR", INV)],
            ),
            (
                "Não pode negar exames do Rol; se negar, o SUS cobre e cobra da operadora.",
                [("SUS", "ENTIDADE_BR", INV)],
            ),
            (
                "Não pode, conforme a Resolução Normativa nº 465/2021 da ANS.",
                [("Resolução Normativa nº 465/2021", "LEI", INV)],
            ),
        ],
    },
    {
        "app": "saude-plano",
        "q": "Onde consigo remédio de graça?",
        "ctx": [
            "O programa Farmácia Popular oferece medicamentos gratuitos para hipertensão, diabetes e asma em farmácias credenciadas, mediante receita médica, documento com foto e CPF."
        ],
        "good": [
            "Pelo Farmácia Popular, remédios para hipertensão, diabetes e asma são gratuitos em farmácias credenciadas, com receita, documento com foto e CPF.",
            "O Farmácia Popular dá de graça medicamentos de hipertensão, diabetes e asma; leve a receita e o CPF.",
        ],
        "bad": [
            (
                "Pelo Farmácia Popular. Quem recebe Bolsa Família também ganha remédio para colesterol.",
                [("Bolsa Família", "POLITICA", INV)],
            ),
            (
                "No Farmácia Popular, com receita e CPF; são 40 medicamentos gratuitos.",
                [("40 medicamentos", "PRAZO_VALOR", INV)],
            ),
            ("Retire nos postos do SUS com receita e CPF.", [("SUS", "ENTIDADE_BR", INV)]),
        ],
    },
    {
        "app": "sac-telecom",
        "q": "Como cancelo minha linha?",
        "ctx": [
            "O cancelamento pode ser solicitado pelo aplicativo, pelo site ou pelo telefone 10315, e é processado imediatamente, independentemente de débitos, conforme a Resolução Anatel nº 632/2014."
        ],
        "good": [
            "Pelo aplicativo, pelo site ou pelo 10315; o cancelamento é imediato mesmo com débitos (Resolução nº 632/2014 da Anatel).",
            "Ligue 10315 ou use o app: a Anatel garante o cancelamento na hora.",
        ],
        "bad": [
            ("Ligue para 10314 e o cancelamento é imediato.", [("10314", "PRAZO_VALOR", C)]),
            (
                "O cancelamento é processado em até 2 dias úteis.",
                [("2 dias úteis", "PRAZO_VALOR", INV)],
            ),
            (
                "É imediato, conforme a Resolução Anatel nº 765/2023.",
                [("Resolução Anatel nº 765/2023", "LEI", C)],
            ),
            (
                "Pelo app ou pelo 10315; se houver problema, acione o Procon-SP.",
                [("Procon", "ENTIDADE_BR", INV)],
            ),
        ],
    },
    {
        "app": "sac-telecom",
        "q": "Em quanto tempo a operadora religa o serviço?",
        "ctx": [
            "Após a quitação do débito, a prestadora deve restabelecer o serviço em até 24 horas."
        ],
        "good": [
            "Depois do pagamento, a religação acontece em até vinte e quatro horas.",
            "Em até 24 horas após quitar a dívida.",
        ],
        "bad": [
            (
                "A operadora deve religar em até 48 horas após o pagamento.",
                [("48 horas", "PRAZO_VALOR", C)],
            ),
            (
                "Em até 24 horas; pagamentos por Pix são religados na hora.",
                [("Pix", "POLITICA", INV)],
            ),
            ("Em 24 horas, conforme o art. 90 da Resolução 632.", [("art. 90", "LEI", INV)]),
        ],
    },
    {
        "app": "sac-banco",
        "q": "Qual o limite do Pix à noite?",
        "ctx": [
            "Por regra do Banco Central, as transações Pix entre pessoas físicas no período noturno, das 20h às 6h, têm limite de R$ 1.000,00, que pode ser alterado pelo cliente no aplicativo."
        ],
        "good": [
            "À noite, entre 20h e 6h, o limite do Pix entre pessoas físicas é de mil reais, e você pode mudar no app.",
            "O Bacen fixa R$ 1.000 no Pix noturno; dá para ajustar no aplicativo.",
        ],
        "bad": [
            ("À noite o limite do Pix é de R$ 500,00.", [("R$ 500,00", "PRAZO_VALOR", C)]),
            (
                "O limite é de R$ 1.000,00 e a mudança leva 48 horas para valer.",
                [("48 horas", "PRAZO_VALOR", INV)],
            ),
            ("É R$ 1.000,00, regra da CVM.", [("CVM", "ENTIDADE_BR", INV)]),
            (
                "O limite de R$ 1.000 vale das 22h às 6h, conforme a Resolução BCB nº 142/2021.",
                [("Resolução BCB nº 142/2021", "LEI", INV)],
            ),
        ],
    },
    {
        "app": "sac-banco",
        "q": "Caí num golpe do Pix, o que faço?",
        "ctx": [
            "Em caso de fraude, o cliente deve contestar a transação pelo aplicativo em até 80 dias para acionar o Mecanismo Especial de Devolução (MED) e registrar boletim de ocorrência."
        ],
        "good": [
            "Conteste no aplicativo em até oitenta dias para acionar o MED e registre um boletim de ocorrência.",
            "Abra a contestação pelo app dentro de 80 dias (MED) e faça o B.O.",
        ],
        "bad": [
            ("Conteste em até 90 dias para acionar o MED.", [("90 dias", "PRAZO_VALOR", C)]),
            (
                "Conteste em 80 dias e procure a Polícia Federal em Brasília.",
                [("Polícia Federal", "ENTIDADE_BR", INV), ("Brasília", "GEOGRAFIA_BR", INV)],
            ),
            (
                "Conteste em 80 dias; o valor volta em 7 dias úteis.",
                [("7 dias úteis", "PRAZO_VALOR", INV)],
            ),
        ],
    },
    {
        "app": "sac-banco",
        "q": "Quem é a titular da conta?",
        "ctx": [
            "Titular: Maria Aparecida Souza, CPF 529.982.247-25, residente em Belo Horizonte/MG."
        ],
        "good": [
            "A titular é Maria Aparecida Souza, CPF 529.982.247-25, de Belo Horizonte/MG.",
            "Maria Aparecida Souza (CPF 52998224725), que mora em Belo Horizonte, Minas Gerais.",
        ],
        "bad": [
            ("O CPF da titular é 529.982.247-52.", [("529.982.247-52", "CNPJ_CPF_RG", C)]),
            ("A titular mora em Contagem/MG.", [("Contagem/MG", "GEOGRAFIA_BR", C)]),
            (
                "É Maria Aparecida Souza, CPF 529.982.247-25, RG 12.345.678-9.",
                [("12.345.678-9", "CNPJ_CPF_RG", INV)],
            ),
            (
                "A titular, de Belo Horizonte/MG, tem CPF 016.613.186-57.",
                [("016.613.186-57", "CNPJ_CPF_RG", C)],
            ),
            (
                "Maria Aparecida Souza mora em Belo Horizonte, no Rio de Janeiro.",
                [("Rio de Janeiro", "GEOGRAFIA_BR", C)],
            ),
        ],
    },
    {
        "app": "gov-beneficios",
        "q": "Quem tem direito ao BPC?",
        "ctx": [
            "O Benefício de Prestação Continuada (BPC), previsto na Lei nº 8.742/1993 (LOAS), garante um salário mínimo mensal à pessoa com deficiência e ao idoso com 65 anos ou mais que comprovem não possuir meios de se manter. O requerimento é feito no INSS."
        ],
        "good": [
            "O BPC paga um salário mínimo por mês ao idoso de 65 anos ou mais e à pessoa com deficiência sem meios de se manter; peça no INSS.",
            "Idosos a partir de sessenta e cinco anos e pessoas com deficiência de baixa renda, conforme a LOAS. O pedido é no Instituto Nacional do Seguro Social.",
        ],
        "bad": [
            ("O idoso recebe o BPC a partir dos 60 anos.", [("60 anos", "PRAZO_VALOR", C)]),
            (
                "O BPC é pedido no CRAS da prefeitura.",
                [("CRAS", "ENTIDADE_BR", INV), ("prefeitura", "ENTIDADE_BR", INV)],
            ),
            (
                "O BPC, da Lei nº 8.213/1991, paga um salário mínimo.",
                [("Lei nº 8.213/1991", "LEI", C)],
            ),
            (
                "O BPC paga um salário mínimo; quem recebe Bolsa Família perde o direito.",
                [("Bolsa Família", "POLITICA", INV)],
            ),
        ],
    },
    {
        "app": "gov-beneficios",
        "q": "O contexto fala do valor do Auxílio Gás?",
        "ctx": [
            "O Benefício de Prestação Continuada (BPC) garante um salário mínimo mensal ao idoso com 65 anos ou mais."
        ],
        "good": [
            "O contexto não informa o valor do Auxílio Gás; ele trata apenas do BPC.",
            "Não encontrei informação sobre o Auxílio Gás nos documentos.",
        ],
        "bad": [
            (
                "O Auxílio Gás paga R$ 102,00 a cada dois meses.",
                [("Auxílio Gás", "POLITICA", INV), ("R$ 102,00", "PRAZO_VALOR", INV)],
            ),
        ],
    },
    {
        "app": "gov-beneficios",
        "q": "Como funciona o Bolsa Família?",
        "ctx": [
            "O Bolsa Família paga no mínimo R$ 600,00 por família, com adicional de R$ 150,00 por "
            "criança de até 6 anos. Para receber, a família deve estar inscrita no CadÚnico e ter "
            "renda mensal de até R$ 218,00 por pessoa."
        ],
        "good": [
            "Paga pelo menos R$ 600 por família, mais R$ 150 por criança de até seis anos; é preciso estar no Cadastro Único e ter renda de até R$ 218,00 por pessoa.",
            "O benefício mínimo é de seiscentos reais, com cento e cinquenta reais a mais por criança pequena.",
        ],
        "bad": [
            ("O valor mínimo é de R$ 400,00 por família.", [("R$ 400,00", "PRAZO_VALOR", C)]),
            ("O adicional é pago por criança de até 7 anos.", [("7 anos", "PRAZO_VALOR", C)]),
            (
                "Paga R$ 600,00; o saque é feito no Banco do Brasil.",
                [("Banco do Brasil", "ENTIDADE_BR", INV)],
            ),
            (
                "Paga R$ 600,00 e substituiu o Auxílio Emergencial.",
                [("Auxílio Emergencial", "POLITICA", INV)],
            ),
            (
                "A renda máxima é de R$ 218,00 por pessoa, conforme a Lei nº 14.601/2023.",
                [("Lei nº 14.601/2023", "LEI", INV)],
            ),
        ],
    },
    {
        "app": "imobiliaria",
        "q": "Qual a multa se eu sair do imóvel antes do fim do contrato?",
        "ctx": [
            "Cláusula 12: em caso de devolução antecipada do imóvel, o locatário pagará multa de "
            "três aluguéis, proporcional ao tempo restante do contrato, nos termos do art. 4º da "
            "Lei nº 8.245/1991.",
            "O locatário deve avisar a imobiliária com antecedência mínima de 30 dias.",
        ],
        "good": [
            "A multa é de três aluguéis, proporcional ao tempo que falta, conforme o art. 4º da Lei do Inquilinato; avise com 30 dias de antecedência.",
            "Você paga 3 aluguéis de multa, proporcionalmente, e precisa avisar com trinta dias.",
        ],
        "bad": [
            (
                "A multa é de dois aluguéis, proporcional ao tempo restante.",
                [("dois aluguéis", "PRAZO_VALOR", C)],
            ),
            ("Avise com 60 dias de antecedência.", [("60 dias", "PRAZO_VALOR", C)]),
            ("A multa segue o art. 9º da Lei do Inquilinato.", [("art. 9º", "LEI", C)]),
            (
                "A multa é de 3 aluguéis, e o Procon pode reduzir esse valor.",
                [("Procon", "ENTIDADE_BR", INV)],
            ),
        ],
    },
    {
        "app": "transito",
        "q": "Quantos pontos tem uma multa gravíssima?",
        "ctx": [
            "Conforme o art. 259 do Código de Trânsito Brasileiro, a infração gravíssima soma 7 "
            "pontos na CNH. O valor da multa gravíssima é de R$ 293,47.",
            "O recurso deve ser apresentado ao Detran em até 30 dias da notificação.",
        ],
        "good": [
            "A infração gravíssima soma sete pontos na CNH e a multa é de R$ 293,47 (art. 259 do CTB).",
            "São 7 pontos e R$ 293,47; para recorrer, procure o Detran em até trinta dias.",
        ],
        "bad": [
            ("A gravíssima soma 5 pontos na carteira.", [("5 pontos", "PRAZO_VALOR", C)]),
            ("A multa gravíssima custa R$ 195,23.", [("R$ 195,23", "PRAZO_VALOR", C)]),
            ("São 7 pontos, conforme o art. 258 do CTB.", [("art. 258", "LEI", C)]),
            (
                "O recurso vai à Polícia Rodoviária Federal em até 30 dias.",
                [("Polícia Rodoviária Federal", "ENTIDADE_BR", INV)],
            ),
            (
                "São 7 pontos; em São Paulo o Detran cobra taxa extra de R$ 50,00.",
                [("São Paulo", "GEOGRAFIA_BR", INV), ("R$ 50,00", "PRAZO_VALOR", INV)],
            ),
        ],
    },
    {
        "app": "privacidade",
        "q": "Em quanto tempo a empresa responde a um pedido de acesso aos meus dados?",
        "ctx": [
            "Nos termos do art. 19, inciso II, da Lei nº 13.709/2018 (LGPD), a confirmação de "
            "existência ou o acesso a dados pessoais serão providenciados por meio de declaração "
            "completa no prazo de até 15 dias, contado da data do requerimento do titular."
        ],
        "good": [
            "A empresa tem até quinze dias para responder com a declaração completa (art. 19 da LGPD).",
            "Até 15 dias a partir do pedido, segundo a Lei Geral de Proteção de Dados.",
        ],
        "bad": [
            ("A resposta completa deve vir em até 30 dias.", [("30 dias", "PRAZO_VALOR", C)]),
            ("Até 15 dias, conforme o art. 18 da LGPD.", [("art. 18", "LEI", C)]),
            ("Até 15 dias; se não responder, denuncie à ANPD.", [("ANPD", "ENTIDADE_BR", INV)]),
            ("Até 15 dias, conforme a Lei nº 13.079/2018.", [("Lei nº 13.079/2018", "LEI", C)]),
        ],
    },
    {
        "app": "energia",
        "q": "Quem tem direito à Tarifa Social de energia?",
        "ctx": [
            "A Tarifa Social de Energia Elétrica concede desconto de até 65% na conta de luz para "
            "famílias inscritas no CadÚnico com renda de até meio salário mínimo por pessoa.",
            "A distribuidora aplica o desconto automaticamente, conforme regras da ANEEL.",
        ],
        "good": [
            "Famílias no Cadastro Único com renda de até meio salário mínimo por pessoa têm até 65% de desconto, aplicado automaticamente.",
            "A ANEEL prevê desconto de até sessenta e cinco por cento para inscritos no CadÚnico de baixa renda.",
        ],
        "bad": [
            ("O desconto chega a 50% na conta de luz.", [("50%", "PRAZO_VALOR", C)]),
            (
                "O desconto é de até 65% e precisa ser pedido no CRAS.",
                [("CRAS", "ENTIDADE_BR", INV)],
            ),
            ("Até 65%, para quem recebe o Auxílio Brasil.", [("Auxílio Brasil", "POLITICA", INV)]),
            ("O desconto de 65% vale só no Nordeste.", [("Nordeste", "GEOGRAFIA_BR", INV)]),
        ],
    },
    {
        "app": "aereo",
        "q": "O que acontece se meu voo atrasar?",
        "ctx": [
            "Pela Resolução ANAC nº 400/2016, a partir de 1 hora de atraso a companhia deve "
            "oferecer comunicação; a partir de 2 horas, alimentação; e a partir de 4 horas, "
            "hospedagem quando houver pernoite."
        ],
        "good": [
            "Com uma hora de atraso você tem direito a comunicação, com duas horas a alimentação e com quatro horas a hospedagem se houver pernoite.",
            "A Resolução 400/2016 da ANAC garante assistência escalonada: 1h comunicação, 2h alimentação, 4h hospedagem.",
        ],
        "bad": [
            (
                "A partir de 3 horas de atraso a companhia oferece alimentação.",
                [("3 horas", "PRAZO_VALOR", C)],
            ),
            (
                "A hospedagem vale a partir de 4 horas, conforme a Resolução ANAC nº 141/2010.",
                [("Resolução ANAC nº 141/2010", "LEI", C)],
            ),
            (
                "Com 4 horas de atraso você também recebe indenização de R$ 1.000,00.",
                [("R$ 1.000,00", "PRAZO_VALOR", INV)],
            ),
            (
                "Em caso de atraso, reclame no Procon do aeroporto de Guarulhos.",
                [("Procon", "ENTIDADE_BR", INV), ("Guarulhos", "GEOGRAFIA_BR", INV)],
            ),
        ],
    },
    {
        "app": "educacao",
        "q": "Qual a renda para ter bolsa integral no ProUni?",
        "ctx": [
            "A bolsa integral do ProUni é destinada a estudantes com renda familiar bruta mensal de até 1,5 salário mínimo por pessoa. A bolsa parcial, de 50%, exige renda de até 3 salários mínimos por pessoa."
        ],
        "good": [
            "Para a bolsa integral, a renda familiar deve ser de até 1,5 salário mínimo por pessoa; a parcial, de 50%, aceita até 3 salários mínimos.",
            "Integral: até um salário mínimo e meio por pessoa. Parcial (metade da mensalidade): até três salários mínimos.",
        ],
        "bad": [
            ("A bolsa parcial cobre 25% da mensalidade.", [("25%", "PRAZO_VALOR", C)]),
            (
                "A bolsa parcial exige renda de até 4 salários mínimos por pessoa.",
                [("4 salários mínimos", "PRAZO_VALOR", C)],
            ),
            (
                "A bolsa integral exige renda de até 1,5 salário mínimo e nota mínima no Enem de 600 pontos.",
                [("Enem", "POLITICA", INV), ("600 pontos", "PRAZO_VALOR", INV)],
            ),
            (
                "Quem não consegue o ProUni pode usar o FIES sem fiador.",
                [("FIES", "POLITICA", INV)],
            ),
        ],
    },
    {
        "app": "condominio",
        "q": "Qual a multa por atraso da taxa de condomínio?",
        "ctx": [
            "Art. 1.336, § 1º, do Código Civil: o condômino que não pagar a sua contribuição ficará sujeito aos juros moratórios convencionados ou, não sendo previstos, os de 1% ao mês e multa de até 2% sobre o débito."
        ],
        "good": [
            "A multa é de até 2% sobre o débito, com juros de 1% ao mês se a convenção não previr outros (art. 1.336 do Código Civil).",
            "Até dois por cento de multa e juros de um por cento ao mês.",
        ],
        "bad": [
            ("A multa por atraso é de até 10% sobre o débito.", [("10%", "PRAZO_VALOR", C)]),
            (
                "A multa é de até 2%, conforme o art. 1.336 da Lei nº 4.591/1964.",
                [("Lei nº 4.591/1964", "LEI", INV)],
            ),
            (
                "Multa de 2% e juros de 1% ao mês; após 3 meses o nome vai para o Serasa.",
                [("3 meses", "PRAZO_VALOR", INV), ("Serasa", "ENTIDADE_BR", INV)],
            ),
        ],
    },
    {
        "app": "sac-varejo",
        "q": "Qual o prazo de entrega para Recife?",
        "ctx": [
            "Pedidos para capitais do Nordeste, como Recife e Salvador, são entregues em até 8 dias úteis após a confirmação do pagamento. Para o interior, o prazo é de até 12 dias úteis."
        ],
        "good": [
            "Para Recife, a entrega é em até oito dias úteis depois da confirmação do pagamento.",
            "Capitais nordestinas como Recife recebem em até 8 dias úteis; o interior, em até 12.",
        ],
        "bad": [
            ("Para Recife, a entrega leva até 5 dias úteis.", [("5 dias úteis", "PRAZO_VALOR", C)]),
            (
                "Recife e Fortaleza recebem em até 8 dias úteis.",
                [("Fortaleza", "GEOGRAFIA_BR", INV)],
            ),
            (
                "Até 8 dias úteis para Recife, mas pagamentos via Pix encurtam o prazo para 3 dias.",
                [("Pix", "POLITICA", INV), ("3 dias", "PRAZO_VALOR", INV)],
            ),
            ("Para Recife, em Alagoas, são até 8 dias úteis.", [("Alagoas", "GEOGRAFIA_BR", INV)]),
        ],
    },
    {
        "app": "seguros",
        "q": "Qual a franquia do seguro do carro?",
        "ctx": [
            "Apólice nº 7788: franquia de R$ 3.500,00 para colisão. Para vidros, a franquia é de R$ 350,00. A seguradora é regulada pela SUSEP."
        ],
        "good": [
            "A franquia para colisão é de três mil e quinhentos reais e, para vidros, R$ 350,00.",
            "Colisão: R$ 3.500; vidros: R$ 350. A seguradora é fiscalizada pela Superintendência de Seguros Privados.",
        ],
        "bad": [
            ("A franquia de colisão é de R$ 2.500,00.", [("R$ 2.500,00", "PRAZO_VALOR", C)]),
            ("Para vidros a franquia é de R$ 530,00.", [("R$ 530,00", "PRAZO_VALOR", C)]),
            (
                "A franquia é de R$ 3.500,00, e a seguradora é regulada pelo Banco Central.",
                [("Banco Central", "ENTIDADE_BR", INV)],
            ),
            (
                "A franquia é de R$ 3.500,00 conforme o art. 757 do Código Civil.",
                [("art. 757", "LEI", INV)],
            ),
        ],
    },
    {
        "app": "rh-bot",
        "q": "Tenho direito a salário-família?",
        "ctx": [
            "O salário-família é pago ao empregado de baixa renda com filhos de até 14 anos, no "
            "valor de R$ 62,04 por filho em 2024. O pagamento é feito pela empresa junto com o "
            "salário e compensado com o INSS."
        ],
        "good": [
            "Se você é de baixa renda e tem filhos de até quatorze anos, recebe R$ 62,04 por filho em 2024, pago pela empresa com o salário.",
            "Sim, se for de baixa renda: R$ 62,04 por filho de até 14 anos, em 2024.",
        ],
        "bad": [
            ("O salário-família é pago por filho de até 18 anos.", [("18 anos", "PRAZO_VALOR", C)]),
            ("O valor é de R$ 62,04 por filho em 2023.", [("2023", "PRAZO_VALOR", C)]),
            (
                "São R$ 62,04 por filho, pagos pelo Bolsa Família.",
                [("Bolsa Família", "POLITICA", INV)],
            ),
            ("São R$ 65,00 por filho.", [("R$ 65,00", "PRAZO_VALOR", C)]),
        ],
    },
    {
        "app": "fisco-faq",
        "q": "Quando vence o IPTU?",
        "ctx": [
            "Em Curitiba, a cota única do IPTU 2025 vence em 10/02/2025, com desconto de 10%. O parcelamento pode ser feito em até 10 vezes."
        ],
        "good": [
            "A cota única vence em 10 de fevereiro de 2025 e tem 10% de desconto; dá para parcelar em até dez vezes.",
            "Em Curitiba, pague até 10/02/2025 para ter desconto de dez por cento.",
        ],
        "bad": [
            ("A cota única vence em 10/03/2025.", [("10/03/2025", "PRAZO_VALOR", C)]),
            ("A cota única tem desconto de 5%.", [("5%", "PRAZO_VALOR", C)]),
            ("Dá para parcelar em até 12 vezes.", [("12 vezes", "PRAZO_VALOR", C)]),
            ("Em Londrina, a cota única vence em 10/02/2025.", [("Londrina", "GEOGRAFIA_BR", C)]),
        ],
    },
]


def records() -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for n, sc in enumerate(SCENARIOS, 1):
        base = {"query": sc["q"], "context": sc["ctx"], "metadata": {"app": sc["app"]}}
        for k, answer in enumerate(sc["good"], 1):  # type: ignore[arg-type]
            out.append(
                {
                    "id": f"dev-{n:02d}-g{k}",
                    **base,
                    "answer": answer,
                    "labels": {"hallucinated": False, "spans": []},
                }
            )
        for k, (answer, spans) in enumerate(sc["bad"], 1):  # type: ignore[misc]
            for text, _cat, _verdict in spans:
                assert text in answer, (sc["q"], answer, text)
            out.append(
                {
                    "id": f"dev-{n:02d}-b{k}",
                    **base,
                    "answer": answer,
                    "labels": {
                        "hallucinated": True,
                        "spans": [{"text": t, "category": c, "verdict": v} for t, c, v in spans],
                    },
                }
            )
    return out


if __name__ == "__main__":
    rows = records()
    path = Path(__file__).with_name("devset.jsonl")
    path.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
    )
    print(f"{len(rows)} records -> {path}")
