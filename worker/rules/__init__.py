"""The rules judge: deterministic, offline detectors of Brazilian facts (spec §8).

``detectors`` finds mentions (laws, ID numbers, public bodies, amounts and deadlines,
programmes, places), ``engine`` compares them with the context and judges claims, ``text``
holds the Portuguese text handling and ``gazetteer`` the names it knows.
"""

from veredito.worker.rules.engine import (
    Check,
    ClaimJudgement,
    ContextIndex,
    check_text,
    check_texts,
    index_context,
    judge_answer,
)

__all__ = [
    "Check",
    "ClaimJudgement",
    "ContextIndex",
    "check_text",
    "check_texts",
    "index_context",
    "judge_answer",
]
