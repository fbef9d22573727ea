"""The pytest plugin (entry point ``pytest11``): a session-wide ``veredito_judge`` fixture.

    def test_answer(veredito_judge):
        assert_grounded(question, chunks, answer, judge=veredito_judge)

The judge is the rules judge (offline, no key, deterministic) unless ``VEREDITO_TEST_JUDGE`` is
``llm`` or ``auto``; the LLM's settings come from the usual ``VEREDITO_LLM_*`` variables.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

__all__ = ["veredito_judge"]


@pytest.fixture(scope="session")
def veredito_judge() -> Iterator[Any]:
    from veredito.api import Judge

    kind = os.environ.get("VEREDITO_TEST_JUDGE", "rules")
    if kind not in ("rules", "llm", "auto"):
        raise pytest.UsageError(f"VEREDITO_TEST_JUDGE={kind!r}: use rules, llm or auto")
    judge = Judge(kind)  # type: ignore[arg-type]
    try:
        yield judge
    finally:
        judge.close()
