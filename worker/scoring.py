"""Scores derived from claims (spec §5.7, §6): never taken from the model's own arithmetic."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from veredito.worker.verdict import Claim

__all__ = ["count_categories", "is_hallucinated", "score_claims"]


def score_claims(claims: Sequence[Claim]) -> float | None:
    """``(grounded + 0.5 * partial) / number of claims``; ``None`` when there are no claims.
    Advice (``kind: "advice"``, spec §17) is not a claim of fact and is not counted; an answer
    of advice only scores as one with no claims."""
    claims = [c for c in claims if c.kind != "advice"]
    if not claims:
        return None
    grounded = sum(1 for c in claims if c.verdict == "grounded")
    partial = sum(1 for c in claims if c.verdict == "partial")
    return (grounded + 0.5 * partial) / len(claims)


def is_hallucinated(claims: Sequence[Claim]) -> bool:
    return any(c.verdict != "grounded" for c in claims)


def count_categories(claims: Sequence[Claim]) -> dict[str, int]:
    """Non-grounded claims counted by category."""
    counts = Counter(c.category or "GENERICA" for c in claims if c.verdict != "grounded")
    return dict(sorted(counts.items()))
