"""Hallucination checks in a RAG app's own test suite.

    from veredito.testing import assert_grounded

    def test_the_bot_cites_the_right_law():
        answer = my_rag_app(question, chunks)
        assert_grounded(question, chunks, answer)              # the rules judge: offline, no key

``assert_grounded`` raises an ``AssertionError`` listing each claim not supported by the context,
with its verdict and category, and the rule findings. The pytest plugin (installed with veredito)
adds a session-wide ``veredito_judge`` fixture: one :class:`veredito.Judge` (the rules judge unless
``VEREDITO_TEST_JUDGE`` says ``llm`` or ``auto``), shared by every test.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from veredito.api import Judge, JudgeKind, evaluate
from veredito.worker.verdict import Verdict

__all__ = ["assert_grounded", "unsupported"]


def unsupported(verdict: Verdict, allow: Iterable[str] = ()) -> list[str]:
    """The claims of ``verdict`` that are not grounded, as ``[verdict, CATEGORY] text`` lines,
    leaving out the categories in ``allow`` (``GENERICA`` for a claim with none)."""
    allowed = set(allow)
    lines = []
    for claim in verdict.claims:
        category = claim.category or "GENERICA"
        if claim.verdict != "grounded" and category not in allowed:
            lines.append(f"[{claim.verdict}, {category}] {claim.text}")
    return lines


def assert_grounded(
    query: str,
    context: str | Sequence[str],
    answer: str,
    *,
    judge: JudgeKind | Judge = "rules",
    allow: Iterable[str] = (),
) -> Verdict:
    """Judge one answer; fail with the list of unsupported claims, or return the verdict.

    ``judge``: ``"rules"`` (the default: offline, deterministic, no key), ``"llm"``, ``"auto"``,
    or a :class:`veredito.Judge` to reuse (the ``veredito_judge`` fixture). ``allow``: categories
    to tolerate (``allow={"GENERICA"}`` checks laws, IDs, bodies, values, programmes and places
    only)."""
    report = evaluate([{"query": query, "context": context, "answer": answer}], judge=judge)
    verdict = report.verdicts[0]
    if verdict.status != "ok":
        error = verdict.error.message if verdict.error else verdict.status
        raise AssertionError(f"veredito could not judge this answer: {error}")
    bad = unsupported(verdict, allow)
    if bad:
        findings = [
            f"  {f.category}: {f.text!r} {f.kind}" for f in verdict.rule_findings if f.problem
        ]
        message = [f"{len(bad)} of {len(verdict.claims)} claims not supported by the context:"]
        message += [f"  - {line}" for line in bad]
        if findings:
            message += ["rule findings:", *findings]
        raise AssertionError("\n".join(message))
    return verdict
