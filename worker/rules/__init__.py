"""The rules judge: deterministic, offline detectors of Brazilian facts (spec §8).

``detectors`` finds mentions (laws, ID numbers, public bodies, amounts and deadlines,
programmes, places), ``engine`` compares them with the context and judges claims, ``derive``
finds values computed from the context, ``markdown`` turns chatbot markdown into sentences,
``text`` holds the Portuguese text handling and ``gazetteer`` the names it knows.
"""

from veredito.worker.rules.engine import (
    AnswerJudgement,
    Check,
    ClaimJudgement,
    ContextIndex,
    check_text,
    check_texts,
    index_context,
    judge,
    judge_answer,
)

__all__ = [
    "AnswerJudgement",
    "Check",
    "ClaimJudgement",
    "ContextIndex",
    "check_text",
    "check_texts",
    "index_context",
    "judge",
    "judge_answer",
]
