"""Proportions and their uncertainty: the statistics of the release comparison
(:mod:`veredito.comparison`, spec §18), in the standard library alone.

- :func:`wilson_interval`: Wilson's score interval of one proportion;
- :func:`newcombe_interval`: Newcombe's hybrid score interval (1998, method 10) for the
  difference of two independent proportions, from their Wilson intervals;
- :func:`newcombe_paired_interval`: Newcombe's interval (1998b, method 10) for the difference of
  paired proportions, the Wilson intervals of the margins with the pairs' correlation;
- :func:`mcnemar_exact`: the exact McNemar test, a binomial test on the discordant pairs.

Checked against published values in ``tests/test_compare.py`` (Newcombe's tables, Fagerland,
Lydersen & Laake's worked examples).
"""

from __future__ import annotations

import math

__all__ = [
    "Z95",
    "Interval",
    "mcnemar_exact",
    "newcombe_interval",
    "newcombe_paired_interval",
    "wilson_interval",
]

Z95 = 1.959963984540054  # the normal quantile of a two-sided 95 % interval
_EXACT_MCNEMAR_MAX = 5000  # discordant pairs summed as integers; above, in log space

Interval = tuple[float, float]


def wilson_interval(hits: int, total: int, z: float = Z95) -> Interval | None:
    """Wilson's score interval of ``hits`` out of ``total`` (None when ``total`` is 0)."""
    if total <= 0:
        return None
    p = hits / total
    denominator = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denominator
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def newcombe_interval(
    base_hits: int, base_total: int, head_hits: int, head_total: int, z: float = Z95
) -> Interval | None:
    """Newcombe's hybrid score interval (1998, method 10) for ``head − base`` of two independent
    proportions, from the two Wilson intervals."""
    base = wilson_interval(base_hits, base_total, z)
    head = wilson_interval(head_hits, head_total, z)
    if base is None or head is None:
        return None
    p1, p2 = base_hits / base_total, head_hits / head_total
    (l1, u1), (l2, u2) = base, head
    d = p2 - p1
    lower = d - math.sqrt((p2 - l2) ** 2 + (u1 - p1) ** 2)
    upper = d + math.sqrt((u2 - p2) ** 2 + (p1 - l1) ** 2)
    return max(-1.0, lower), min(1.0, upper)


def newcombe_paired_interval(
    both: int, base_only: int, head_only: int, neither: int, z: float = Z95
) -> Interval | None:
    """Newcombe's interval (1998b, method 10) for ``head − base`` of paired proportions:
    ``both`` pairs hallucinated on both sides, ``base_only`` on the base side only, and so on.
    The two marginal Wilson intervals are squared and added with the correlation φ of the
    pairs, continuity-corrected as Newcombe does (0 for 0 ≤ ad − bc ≤ n/2)."""
    n = both + base_only + head_only + neither
    if n <= 0:
        return None
    head_hits, base_hits = both + head_only, both + base_only
    p1, p2 = head_hits / n, base_hits / n
    head, base = wilson_interval(head_hits, n, z), wilson_interval(base_hits, n, z)
    assert head is not None and base is not None
    (l1, u1), (l2, u2) = head, base
    margins = head_hits * (n - head_hits) * base_hits * (n - base_hits)
    phi = 0.0
    if margins:
        a = both * neither - head_only * base_only
        if a > n / 2:
            phi = (a - n / 2) / math.sqrt(margins)
        elif a < 0:
            phi = a / math.sqrt(margins)
    d = p1 - p2
    dl, du = p1 - l1, u2 - p2
    lower = d - math.sqrt(max(0.0, dl * dl + du * du - 2 * phi * dl * du))
    el, eu = p2 - l2, u1 - p1
    upper = d + math.sqrt(max(0.0, el * el + eu * eu - 2 * phi * el * eu))
    return max(-1.0, lower), min(1.0, upper)


def mcnemar_exact(base_only: int, head_only: int) -> float:
    """The exact McNemar test's two-sided p-value: the binomial test with p = ½ on the
    discordant pairs, ``min(1, 2 P(X ≤ min(b, c)))`` with X ~ Bin(b + c, ½)."""
    n, m = base_only + head_only, min(base_only, head_only)
    if n == 0 or 2 * m >= n:
        return 1.0
    if n <= _EXACT_MCNEMAR_MAX:  # exact: integers, one correctly rounded division
        total, term = 0, 1
        for k in range(m + 1):
            total += term
            term = term * (n - k) // (k + 1)
        return min(1.0, 2 * total / (1 << n))
    return min(1.0, math.exp(math.log(2) + _log_lower_tail(n, m)))


def _log_lower_tail(n: int, m: int) -> float:
    """``log P(X ≤ m)`` for X ~ Bin(n, ½), m < n/2: from the largest term down, until the terms
    no longer change the sum."""
    log_top = math.lgamma(n + 1) - math.lgamma(m + 1) - math.lgamma(n - m + 1) - n * math.log(2)
    total, term = 1.0, 1.0
    for k in range(m, 0, -1):
        term *= k / (n - k + 1)
        total += term
        if term < total * 1e-17:
            break
    return log_top + math.log(total)
