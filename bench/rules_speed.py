"""Speed of the rules judge on typical triples, on one core.

    .venv/bin/python bench/rules_speed.py [--n 2000]

A typical triple here: 3 context chunks of about 600 characters each (consumer law, labour,
tax text with laws, amounts, deadlines, bodies and places) and a 4-sentence answer. Triples are
made distinct (the numbers vary) so no cache sees the same text twice. Runs the judge
sequentially in one thread and prints triples per second and microseconds per triple as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from veredito.producer.triple import parse_triple
from veredito.worker.judges.rules import judge_triple

CHUNKS = [
    "Art. 49 do Código de Defesa do Consumidor (Lei nº 8.078, de 11 de setembro de 1990): o "
    "consumidor pode desistir do contrato, no prazo de 7 (sete) dias a contar de sua assinatura "
    "ou do ato de recebimento do produto ou serviço, sempre que a contratação ocorrer fora do "
    "estabelecimento comercial, especialmente por telefone ou a domicílio. Parágrafo único: se o "
    "consumidor exercitar o direito de arrependimento, os valores eventualmente pagos, a qualquer "
    "título, durante o prazo de reflexão, serão devolvidos, de imediato, monetariamente "
    "atualizados. O fornecedor responde solidariamente pelos vícios do produto. Pedido nº {n}.",
    "A Comercial Ipê Amarelo Ltda. (loja {n}), CNPJ 11.222.333/0001-81, sede em Campinas/SP, "
    "processa o "
    "reembolso em até {d} dias úteis após a devolução do produto. Para compras acima de R$ "
    "1.500,00, o estorno no cartão pode aparecer em até duas faturas. Reclamações podem ser "
    "registradas na plataforma consumidor.gov.br, mantida pela Secretaria Nacional do "
    "Consumidor, ou no Procon do seu município. O frete de devolução é gratuito em todo o "
    "território nacional, inclusive nas regiões Norte e Nordeste, sem custo adicional ao cliente "
    "e sem necessidade de embalagem original, desde que o produto esteja completo.",
    "Pagamentos via Pix (protocolo {n}) voltam à mesma conta de origem em até 24 horas. Para "
    "clientes "
    "do programa de fidelidade, o cashback de {p}% é estornado junto com o valor da compra. O "
    "atendimento funciona de segunda a sexta, das 8h às 20h, e aos sábados das 9h às 14h, pelo "
    "telefone 0800 123 4567 ou pelo chat do aplicativo. Dados pessoais são tratados conforme a "
    "LGPD (Lei nº 13.709/2018) e podem ser excluídos mediante solicitação ao encarregado, que "
    "responde em até 15 dias. Cartões de crédito têm estorno conforme a data de fechamento.",
]
ANSWER = (
    "Sim, pelo art. 49 do CDC você pode desistir em até sete dias do recebimento. "
    "O reembolso sai em até {d} dias úteis depois que o produto volta. "
    "Se pagou com Pix, o dinheiro volta em até 48 horas na conta de origem. "
    "Se houver problema, procure o Procon ou o consumidor.gov.br."
)


def triples(n: int) -> list[object]:
    out = []
    for i in range(n):
        values = {"n": 10000 + i, "d": 5 + i % 10, "p": 2 + i % 7}
        raw = {
            "query": f"Posso devolver a compra {i}?",
            "context": [c.format(**values) for c in CHUNKS],
            "answer": ANSWER.format(**values),
        }
        out.append(parse_triple(raw))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    args = parser.parse_args()
    batch = triples(args.n)
    for t in batch[:50]:  # warm the caches of compiled patterns and the gazetteers
        judge_triple(t)  # type: ignore[arg-type]
    started = time.perf_counter()
    cpu = time.process_time()
    for t in batch:
        judge_triple(t)  # type: ignore[arg-type]
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu
    sizes = [sum(len(c) for c in t.context) / 3 for t in batch[:1]]  # type: ignore[attr-defined]
    # the same triples again: every chunk is now in the judge's chunk cache, as in production
    # where a RAG app retrieves the same chunks many times
    again = time.perf_counter()
    for t in batch:
        judge_triple(t)  # type: ignore[arg-type]
    cached = time.perf_counter() - again
    print(
        json.dumps(
            {
                "triples": args.n,
                "chunk_chars": round(sizes[0]),
                "triples_per_s": round(args.n / wall, 1),
                "us_per_triple": round(wall / args.n * 1e6),
                "cpu_s": round(cpu, 2),
                "triples_per_s_chunks_cached": round(args.n / cached, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
