"""The rules judge: deterministic, offline detectors of Brazilian facts (spec §8).

One module a family of facts, each with its patterns, its detector and what the judge compares
for it: ``ids`` (CNPJ, CPF, RG), ``laws``, ``bodies``, ``programmes`` (``names`` finds codes of
law, bodies and programmes by name in one pass), ``amounts`` (values and dates) and ``places``.
``scan`` is the one place that knows every pattern and reads a text once for all of them
(Hyperscan when installed, else Python's ``re``: ``VEREDITO_RULES_ENGINE``); ``superset`` turns
a pattern into what Hyperscan reads. ``detectors`` runs the families in order of precedence,
``context`` reads the context the answer needs, ``slots`` tells apart what a value is about,
``engine`` judges claims; ``derive`` finds values computed from the context, ``probes`` the
tokens a context must hold for a key, ``markdown`` turns chatbot markdown into sentences,
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
