"""ENTIDADE_BR: public bodies — the ones the gazetteer knows, and institutions it does not.

- **Known bodies** (``INSS``, ``Procon``, ``Receita Federal``, ``Agência Nacional de Saúde
  Suplementar``): found by acronym or name with the gazetteer's other names (``names``); key
  ``body|<id>``. A state after the name (``Procon-PE``, ``Detran/SP``) adds ``uf|PE`` and
  ``bodyuf|procon:PE`` (:func:`state_suffix`).
- **Institutions the gazetteer lacks** (``Universidade Federal de Pernambuco``, ``Tribunal
  Regional ...``, ``Secretaria de ...``): a capitalised run after one of their words; key
  ``body|<folded name>``.

A body is never "another value" of another body: one the context does not name is invented,
never contradicted (``contradictable=False``). In the judge, the right body of another state
contradicts (:func:`other_state`: ``Procon-SP`` where the context names only the Procon-PR).
"""

from __future__ import annotations

from veredito.worker.rules import gazetteer as gz
from veredito.worker.rules import scan as sc
from veredito.worker.rules.mention import ContextView, Mention
from veredito.worker.rules.text import fold

__all__ = [
    "PATTERNS",
    "body_mention",
    "detect_institutions",
    "other_state",
    "state_suffix",
]

BODY_UF = sc.pattern(
    "BODY_UF", r"[-/]\s?(" + "|".join(gz.UFS) + r")\b", folded=False, scanned=False
)
INSTITUTION_WORD = sc.pattern(
    "INSTITUTION_WORD",
    r"Universidade|Instituto|Hospital|Tribunal|Secretaria|Ministério|Defensoria|Procuradoria"
    r"|Agência|Conselho|Fundação",
    folded=False,
    scanned=False,
)
INSTITUTION = sc.pattern(
    "INSTITUTION",
    r"(?:U(?<!\wU)niversidade|I(?<!\wI)nstituto|H(?<!\wH)ospital|T(?<!\wT)ribunal\s+Regional"
    r"|S(?<!\wS)ecretaria|M(?<!\wM)inistério|D(?<!\wD)efensoria|P(?<!\wP)rocuradoria"
    r"|A(?<!\wA)gência|C(?<!\wC)onselho|F(?<!\wF)undação)(?:\s+(?:d[aeo]s?\s+)?[A-ZÁÉÍÓÚÂÊÔÃÕÇ][\w-]+)+",
    folded=False,
)
PATTERNS = (INSTITUTION,)


def state_suffix(text: str, end: int, ident: str) -> tuple[int, frozenset[str]]:
    """A state right after a name ("Procon-PE", "Detran/SP"): the mention's new end and its
    keys (``uf|PE``, ``bodyuf|procon:PE``); ``(end, ∅)`` when there is none."""
    assert BODY_UF.regex is not None
    suffix = BODY_UF.regex.match(text, end)
    if suffix is None:
        return end, frozenset()
    uf = suffix.group(1)
    return suffix.end(), frozenset({f"uf|{uf}", f"bodyuf|{ident}:{uf}"})


def body_mention(text: str, start: int, end: int, ident: str) -> Mention:
    """A body the gazetteer knows, found at ``text[start:end]``, with its state if one follows."""
    end, extra = state_suffix(text, end, ident)
    key = frozenset({f"body|{ident}"})
    return Mention(
        "ENTIDADE_BR", text[start:end], key, start, end, contradictable=False, extra=extra
    )


def detect_institutions(text: str, folded: str, scan: sc.Scan | None = None) -> list[Mention]:
    """A named public institution the gazetteer lacks ("Universidade Federal de Pernambuco")."""
    scan = scan or sc.scan(text, folded)
    gate = INSTITUTION_WORD.regex
    assert gate is not None
    return [
        Mention(
            "ENTIDADE_BR",
            m.group(0),
            frozenset({f"body|{fold(m.group(0))}"}),
            m.start(),
            m.end(),
            contradictable=False,
        )
        for m in (
            scan.finditer(INSTITUTION) if scan.may_match(INSTITUTION) and gate.search(text) else ()
        )
    ]


def other_state(mention: Mention, ctx: ContextView) -> bool:
    """ "Procon-SP" where the context names only the Procon-PR: the right body, another state's."""
    for key in mention.extra:
        if key.startswith("bodyuf|") and key not in ctx.keys:
            body = key.partition("|")[2].partition(":")[0]
            if any(k.startswith(f"bodyuf|{body}:") for k in ctx.keys):
                return True
    return False
