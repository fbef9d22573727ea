"""What every stack's app shares: the documents, the keyword retrieval, the questions, and the
line each app prints per question. Standard library only (each app runs in its own venv)."""

from __future__ import annotations

import json
import os
import sys

MODEL_URL = os.environ.get("MODEL_URL", "http://127.0.0.1:8199/v1")
MODEL = "modelo-rag-local"
DOCS = [
    "O prazo de arrependimento é de 7 dias a partir do recebimento do produto (art. 49 do CDC).",
    "A multa por atraso no pagamento é de 2% sobre o valor da parcela.",
    "A garantia legal para produtos duráveis é de 90 dias.",
]
KEYWORDS = (("arrepend", "desist"), ("multa", "atraso"), ("garantia", "defeito"))
QUESTIONS = ["Qual o prazo para desistir da compra?", "Qual é a multa por atraso?"]


def retrieve(query: str) -> list[str]:
    q = query.lower()
    return [doc for doc, words in zip(DOCS, KEYWORDS, strict=True) if any(w in q for w in words)]


def system_prompt(docs: list[str]) -> str:
    return "Responda em português usando apenas os documentos:\n" + "\n".join(docs)


def report(question: str, context: list[str], answer: str) -> None:
    print(json.dumps({"question": question, "context": context, "answer": answer},
                     ensure_ascii=False), flush=True)  # fmt: skip
    sys.stdout.flush()
