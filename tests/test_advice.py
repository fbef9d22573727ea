"""Issue 30: advice is not a claim of fact, and confidence is earned per category.

- the claim splitter's :func:`~veredito.worker.rules.markdown.is_advice` marks recommendations,
  generic evaluations, courtesy and talk about the answer itself, never a claim holding a value,
  law, ID, body or place (a referral to a body the context never names stays a flag);
- the rules judge neither flags nor counts advice; an LLM judge's flag on it gets the prior's low
  confidence;
- no labelled hallucination of any labelled set sits in a claim taken as advice;
- a flagged claim is as sure as its weakest part; a group of flags rarely right on answers never
  fitted on never reaches the alert line.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from veredito.producer.triple import parse_triple
from veredito.worker.confidence import default_calibration, rules_feature_sets
from veredito.worker.fitting import BELOW_THE_LINE, Example, earned_caps
from veredito.worker.judges.base import Judgement
from veredito.worker.judges.crosscheck import ConfidenceJudge
from veredito.worker.judges.rules import judge_triple
from veredito.worker.rules import judge
from veredito.worker.rules.markdown import is_advice
from veredito.worker.rules.text import fold
from veredito.worker.scoring import score_claims
from veredito.worker.verdict import Claim, JudgeInfo

ROOT = Path(__file__).resolve().parent.parent

ADVICE = [
    "É recomendável retificar a declaração o quanto antes.",
    "Contribuintes devem priorizar a manutenção contábil rigorosa.",
    "A assessoria contábil especializada é crucial para evitar erros no preenchimento.",
    "Espero ter ajudado!",
    "Se tiver outras dúvidas, estou à disposição.",
    "Este relatório examina as opções disponíveis e as implicações práticas para contribuintes.",
    "Monitorar Prazos: atrasos na entrega impossibilitam ajustes futuros.",
    "Não encontrei essa informação nos documentos disponíveis.",
    "Recomendamos conferir o termo de rescisão com calma antes de assinar.",
]
FACTS = [
    "É importante lembrar que a troca não vale para produtos usados.",
    "Lembre-se de que a conta indicada deve ser do próprio contribuinte.",
    "Se a mala não aparecer nesse prazo, a companhia deve indenizar o passageiro.",
    "A garantia cobre defeitos de fabricação.",
    "O cliente pode cancelar a assinatura pelo aplicativo.",
]


@pytest.mark.parametrize("claim", ADVICE)
def test_advice_is_told_from_facts(claim: str) -> None:
    assert is_advice(claim, 0)
    assert not is_advice(claim, 1)  # a value, law, ID, body or place makes it a claim of fact


@pytest.mark.parametrize("claim", FACTS)
def test_facts_are_not_advice(claim: str) -> None:
    assert not is_advice(claim, 0)


def test_a_referral_to_a_body_the_context_never_names_stays_a_flag() -> None:
    context = ["A troca pode ser pedida em até 7 dias pelo aplicativo da loja."]
    judged = judge("Você tem 7 dias para trocar. Se não resolver, procure o Procon.", context)
    procon = judged.claims[-1]
    assert procon.kind is None and procon.verdict != "grounded"
    assert procon.category == "ENTIDADE_BR"


def test_the_rules_judge_neither_flags_nor_counts_advice() -> None:
    triple = parse_triple({
        "id": "a1", "query": "Qual o prazo para trocar?",
        "context": ["A troca pode ser pedida em até 7 dias corridos após o recebimento."],
        "answer": "A troca pode ser pedida em até 7 dias após o recebimento. "
        "Contribuintes devem priorizar a organização rigorosa de todos os comprovantes fiscais.",
    })  # fmt: skip
    judgement = judge_triple(triple)
    fact, advice = judgement.claims
    assert advice.kind == "advice" and advice.verdict == "grounded"
    assert fact.kind is None
    assert score_claims(judgement.claims) == 1.0 == score_claims([fact])
    assert "kind" not in fact.model_dump() and advice.model_dump()["kind"] == "advice"
    assert "1 recomendação" in judgement.reasoning


def test_no_labelled_hallucination_is_taken_for_advice() -> None:
    """Every labelled set here: no claim taken as advice holds a labelled span."""
    lost, advice = [], 0
    for path in sorted((ROOT / "tests/data").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            spans = [fold(s["text"]) for s in record["labels"]["spans"]]
            context = (
                record["context"] if isinstance(record["context"], list) else [record["context"]]
            )
            for claim in judge(record["answer"], context, record.get("query", "")).claims:
                if claim.kind == "advice":
                    advice += 1
                    if any(s in fold(claim.text) for s in spans):
                        lost.append((path.name, record["id"], claim.text))
    assert advice > 20  # the sets do hold advice
    assert lost == []


class _Flags:
    """An LLM judge stand-in that flags every claim it is given (the judge port, not HTTP)."""

    info = JudgeInfo(kind="llm", model="fake", prompts={})

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts

    async def aclose(self) -> None:
        return None

    async def judge(self, triple: object) -> Judgement:
        claims = [Claim(text=t, verdict="invented", category="GENERICA") for t in self.texts]
        return Judgement(claims=claims, reasoning="", rules_states=["silent"] * len(claims))


def test_an_llm_flag_on_advice_gets_a_low_confidence() -> None:
    texts = ["Sugiro guardar todos os comprovantes por precaução.", "A loja aceita devolução."]
    triple = parse_triple({"id": "a2", "query": "?", "context": ["x"], "answer": "y"})
    judgement = asyncio.run(ConfidenceJudge(_Flags(texts), default_calibration()).judge(triple))
    advice, fact = judgement.claims
    assert advice.kind == "advice" and fact.kind is None
    assert advice.confidence is not None and fact.confidence is not None
    assert advice.confidence < 0.5 <= fact.confidence


def test_a_claim_is_as_sure_as_its_weakest_part() -> None:
    context = ["Pelo art. 49 do CDC, o consumidor pode desistir em até 7 dias."]
    answer = "Pelo art. 51 do CDC, o consumidor pode desistir em até 30 dias."
    claim = judge(answer, context).claims[0]
    sets = rules_feature_sets(claim)
    assert len(sets) == 2  # two failed mentions, two parts
    calibration = default_calibration()
    each = [calibration.confidence("rules", True, f) for f in sets]
    assert calibration.confidence("rules", True, sets) == min(each)


def _example(key: str, right: bool) -> Example:
    return Example("a", True, {key: 1.0, "v:invented": 1.0}, right, None)


def test_a_group_rarely_right_is_capped_below_the_line() -> None:
    pairs = [(0.95, _example("c:GENERICA", i == 0)) for i in range(6)]  # right 1 of 6
    pairs += [(0.97, _example("c:LEI", i < 16)) for i in range(19)]  # right 16 of 19
    pairs += [(0.9, _example("c:POLITICA", False)) for _ in range(3)]  # too few to say
    caps = {row["feature"]: row for row in earned_caps(pairs)}
    assert caps["c:GENERICA"]["cap"] is not None and caps["c:GENERICA"]["cap"] <= BELOW_THE_LINE
    assert (caps["c:GENERICA"]["flags"], caps["c:GENERICA"]["right"]) == (6, 1)
    assert caps["c:LEI"]["cap"] is None
    assert caps["c:POLITICA"]["cap"] is None


def test_the_shipped_calibration_keeps_lexical_generica_under_the_line() -> None:
    """Evidence never fitted on (holdout9): GENERICA's confident flags were rarely right."""
    model = default_calibration().models["rules"]["flagged"]
    assert dict(model.caps).get("c:GENERICA", 1.0) < 0.8
    strongest = {"v:invented": 1.0, "c:GENERICA": 1.0, "f:lexical": 1.0, "words": 1.0}
    assert model.predict(strongest) < 0.8


def test_the_page_shows_advice_apart() -> None:
    from veredito.web.render import _claims_view, _environment

    verdict = {
        "input": {"query": "Prazo?", "context": ["O prazo é de 7 dias."],
                  "answer": "O prazo é de 7 dias. Recomendamos guardar a nota fiscal."},
        "claims": [
            {"text": "O prazo é de 7 dias.", "verdict": "grounded", "source": "rules"},
            {"text": "Recomendamos guardar a nota fiscal.", "verdict": "grounded",
             "source": "rules", "kind": "advice"},
        ],
    }  # fmt: skip
    answer, claims, has_input = _claims_view(verdict)
    assert [c["advice"] for c in claims] == [False, True]
    page = _environment().get_template("verdict.html").render(
        row={"id": "a", "app": "app", "status": "ok", "hallucinated": False, "score": 1.0,
             "categories": [], "query": "Prazo?", "evaluated_at": "2026-12-02T10:00:00Z"},
        query="Prazo?", answer=answer, claims=claims, has_input=has_input,
        context=["O prazo é de 7 dias."],
        findings=[], error=None, judge={"kind": "rules", "model": "rules-1"}, reasoning="",
    )  # fmt: skip
    facts, _, advice = page.partition('id="h-advice"')
    assert (
        "O prazo é de 7 dias.</span>" in facts
        and "guardar a nota" not in facts.split("h-claims")[1]
    )
    assert '<li id="c2" value="2" class="v-grounded advice">' in advice
    assert "[2: recomendação]" in page
