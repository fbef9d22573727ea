"""The gazetteer's names, found in one pass: codes of law, public bodies and programmes.

One prefix tree of every acronym (matched as written: ``INSS``, ``Procon``, ``CDC``) and one of
every name (matched folded: ``instituto nacional do seguro social``, ``codigo de defesa do
consumidor``, ``bolsa familia``), both from :mod:`~veredito.worker.rules.gazetteer`. A match
becomes the mention of its family: a code of law takes its law's key
(:func:`laws.code_mention <veredito.worker.rules.laws.code_mention>`), a body
(:func:`bodies.body_mention <veredito.worker.rules.bodies.body_mention>`) or a programme
(:func:`programmes.programme_mention
<veredito.worker.rules.programmes.programme_mention>`) its id. The three share one detector
because one name may begin inside another: read together, the longest wins.
"""

from __future__ import annotations

import re

from veredito.worker.rules import gazetteer as gz
from veredito.worker.rules import scan as sc
from veredito.worker.rules.bodies import body_mention
from veredito.worker.rules.laws import code_mention
from veredito.worker.rules.mention import Alternatives, Mention, alternatives_source
from veredito.worker.rules.programmes import programme_mention

__all__ = ["PATTERNS", "detect_named"]


def _pairs() -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(acronym, id) and (name, id) pairs of every code of law, body and programme."""
    acronyms: list[tuple[str, str]] = []
    names: list[tuple[str, str]] = []
    for code, (_law, code_acronyms, code_names) in gz.CODES.items():
        acronyms += [(a, f"LEI|{code}") for a in code_acronyms]
        names += [(n, f"LEI|{code}") for n in code_names]
    for category, entries in (("ENTIDADE_BR", gz.BODIES), ("POLITICA", gz.PROGRAMMES)):
        for ident, (entry_acronyms, entry_names) in entries.items():
            acronyms += [(a, f"{category}|{ident}") for a in entry_acronyms]
            names += [(n, f"{category}|{ident}") for n in entry_names]
    return acronyms, names


def _built(
    pairs: list[tuple[str, str]], boundary: str, idents: dict[str, str]
) -> re.Pattern[str] | None:
    if not pairs:
        return None
    source, found = alternatives_source(pairs, boundary)
    idents.update(found)
    return re.compile(source)


# built on first use (two prefix trees of a few hundred names); a match's text gives its id
_ACRONYM_IDS: dict[str, str] = {}
_NAME_IDS: dict[str, str] = {}
ACRONYMS = sc.pattern("ACRONYMS", lambda: _built(_pairs()[0], r"[\w/]", _ACRONYM_IDS), folded=False)
NAMES = sc.pattern("NAMES", lambda: _built(_pairs()[1], r"[\w-]", _NAME_IDS), folded=True)
PATTERNS = (ACRONYMS, NAMES)
_SEARCHES = (Alternatives(ACRONYMS, _ACRONYM_IDS), Alternatives(NAMES, _NAME_IDS))
_BUILDERS = {"ENTIDADE_BR": body_mention, "POLITICA": programme_mention}


def detect_named(text: str, folded: str, scan: sc.Scan | None = None) -> list[Mention]:
    """Codes of law (CDC, CLT, LGPD ...), public bodies and programmes, by acronym or name."""
    scan = scan or sc.scan(text, folded)
    found: list[Mention] = []
    for alternatives in _SEARCHES:
        for start, end, value in alternatives.matches(scan):
            category, _, ident = value.partition("|")
            if category == "LEI":
                found.append(code_mention(text, start, end, ident))
            else:
                found.append(_BUILDERS[category](text, start, end, ident))
    return found
