"""Detectors of the Brazilian facts the claims prompt names (spec §8): which run, in what order.

One module a family of facts, each with its patterns, its detector and what the judge needs to
compare its keys:

- ``ids``: CNPJ, CPF, RG (``CNPJ_CPF_RG``);
- ``laws``: laws, articles, paragraphs, incisos, codes of law (``LEI``);
- ``bodies``: public bodies (``ENTIDADE_BR``);
- ``programmes``: programmes and benefits (``POLITICA``);
- ``names``: codes of law, bodies and programmes by name or acronym, in one pass;
- ``amounts``: money, percentages, dates, deadlines, counts, numbers (``PRAZO_VALOR``);
- ``places``: states, cities, regions (``GEOGRAFIA_BR``).

Their patterns are all registered with :mod:`~veredito.worker.rules.scan`, which reads a text
once for all of them. Detectors run on ``digitise``-d text (numbers in words already turned into
digits); :func:`find_mentions` runs them in order of precedence (IDs, then laws, ...) and keeps
the mentions that do not overlap one found before.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from typing import Protocol

from veredito.worker.rules import scan as sc
from veredito.worker.rules.amounts import detect_amounts
from veredito.worker.rules.bodies import detect_institutions
from veredito.worker.rules.ids import detect_ids
from veredito.worker.rules.laws import detect_laws
from veredito.worker.rules.mention import Mention
from veredito.worker.rules.mention import fold_same_length as _fold_same_length
from veredito.worker.rules.names import detect_named
from veredito.worker.rules.places import detect_places

__all__ = [
    "DETECTORS",
    "Detector",
    "Mention",
    "detect_amounts",
    "detect_ids",
    "detect_institutions",
    "detect_laws",
    "detect_named",
    "detect_places",
    "detectors_for",
    "find_mentions",
]


class Detector(Protocol):
    """Finds the mentions of one family in a text and its folded form (``scan``: both, read by
    the active engine; made when not given)."""

    def __call__(self, text: str, folded: str, scan: sc.Scan | None = None) -> list[Mention]: ...


DETECTORS: tuple[Detector, ...] = (
    detect_ids,
    detect_laws,
    detect_named,
    detect_institutions,
    detect_places,
    detect_amounts,
)

# Which detectors can find, in a context, a mention that bears on an answer's mention of each
# kind: the ones that give keys of that kind, and the earlier ones whose mentions would otherwise
# be taken for it (a CNPJ's digits for amounts, a law's date for a date, "Universidade Federal de
# Pernambuco" for a state).
_FOR_KIND: dict[str, frozenset[Detector]] = {}
_LAWS = frozenset({detect_laws, detect_named})
_BODIES = frozenset({detect_laws, detect_named, detect_institutions})
_AMOUNTS = frozenset({detect_ids, detect_laws, detect_amounts})
_PLACES = frozenset({detect_ids, detect_laws, detect_named, detect_institutions, detect_places})
for _kinds, _detectors in (
    (("cnpj", "cpf", "rg"), frozenset({detect_ids})),
    (("law", "lawyear", "article", "paragraph", "inciso"), _LAWS),
    (("body", "programme"), _BODIES),
    (("city", "uf", "region"), _PLACES),
    (
        ("money", "percent", "date", "daymonth", "daymonth_free", "monthyear", "number", "clock"),
        _AMOUNTS,
    ),
    (("dayofmonth",), _AMOUNTS),
    (("year",), _AMOUNTS),
):
    for _kind in _kinds:
        _FOR_KIND[_kind] = _detectors


def detectors_for(mentions: Iterable[Mention]) -> tuple[Detector, ...]:
    """The detectors a context needs to judge ``mentions`` (in their order of precedence)."""
    wanted: set[Detector] = set()
    for mention in mentions:
        for kind in mention.kinds:
            wanted.update(_FOR_KIND.get(kind) or _FOR_KIND.get(kind.partition(":")[0]) or DETECTORS)
            if len(wanted) == len(DETECTORS):
                return DETECTORS
    return tuple(d for d in DETECTORS if d in wanted)


_FOR_KIND["duration"] = _FOR_KIND["count"] = _AMOUNTS


def find_mentions(text: str, detectors: Iterable[Detector] = DETECTORS) -> list[Mention]:
    """Every mention in ``text`` (already digitised), without overlaps: IDs and laws first.
    ``detectors`` (in the order of :data:`DETECTORS`) restricts the search to some kinds."""
    folded = _fold_same_length(text)
    scan = sc.scan(text, folded)
    starts: list[int] = []  # the spans taken so far, disjoint and in order
    ends: list[int] = []
    result: list[Mention] = []
    for detect in detectors:
        for mention in sorted(detect(text, folded, scan), key=_span_order):
            i = bisect.bisect_left(starts, mention.end)
            if i and ends[i - 1] > mention.start:
                continue  # overlaps the taken span that starts last before this one ends
            starts.insert(i, mention.start)
            ends.insert(i, mention.end)
            result.append(mention)
    result.sort(key=_start)
    return result


def _span_order(mention: Mention) -> tuple[int, int]:
    return mention.start, -mention.end


def _start(mention: Mention) -> int:
    return mention.start
