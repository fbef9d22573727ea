"""CNPJ_CPF_RG: CNPJs, CPFs and RGs, with their check digits.

- **CNPJ**: 14 characters, punctuated (``11.222.333/0001-81``) or plain; since 2026 the first
  12 may be letters too, and such an alphanumeric CNPJ is only taken punctuated. Key
  ``cnpj|<14 characters>``; wrong check digits (``validate-docbr``) make it ``invalid``.
- **CPF**: punctuated anywhere (``529.982.247-25``), or plain after the word "CPF". Key
  ``cpf|<11 digits>``; a CNPJ's digits are never also taken as a CPF.
- **RG**: after "RG", "identidade", "cédula/carteira de identidade". Key ``rg|<digits, X>``.

In the judge (``engine``), an ID the context lacks is invented, one with a digit changed is
contradicted, and one with wrong check digits is reported as ``invalid_check_digit``; an ID in
the context but in a clause about something else is misplaced (``slots``).
"""

from __future__ import annotations

import re

from validate_docbr import CNPJ, CPF

from veredito.worker.rules import scan as sc
from veredito.worker.rules.mention import Mention, ci

__all__ = ["PATTERNS", "detect_ids"]

CNPJ_ANY = sc.pattern(
    "CNPJ",
    r"([0-9A-Z](?<![\w./-][0-9A-Z])[0-9A-Z]\.?[0-9A-Z]{3}\.?[0-9A-Z]{3}/?[0-9A-Z]{4}-?\d{2})(?![\w/-])",
    folded=False,
)
CPF_FORMATTED = sc.pattern(
    "CPF_FORMATTED", r"(\d(?<![\w./-]\d)\d\d\.\d{3}\.\d{3}-\d{2})(?![\w/-])", folded=False
)
CPF_CUED = sc.pattern(
    "CPF_CUED", ci(r"\bCPF\b[^\d\n]{0,20}?(\d{3}\.?\d{3}\.?\d{3}-?\d{2})(?![\w/-])"), folded=True
)
RG = sc.pattern(
    "RG",
    ci(
        r"\b(?:RG|R\.G\.|carteira de identidade|c[ée]dula de identidade|identidade)\b"
        r"[^\d\n]{0,20}?(\d{1,2}\.?\d{3}\.?\d{3}(?:-?[\dxX])?|\d{5,10}-?[\dxX]?)(?![\w/-])"
    ),
    folded=True,
)
PATTERNS = (CNPJ_ANY, CPF_FORMATTED, CPF_CUED, RG)
_cnpj, _cpf = CNPJ(), CPF()


def detect_ids(text: str, folded: str, scan: sc.Scan | None = None) -> list[Mention]:
    scan = scan or sc.scan(text, folded)
    found: list[Mention] = []
    spans: list[tuple[int, int]] = []
    for m in scan.finditer(CNPJ_ANY):
        raw = m.group(1)
        plain = re.sub(r"[./-]", "", raw).upper()
        if len(plain) != 14 or not any(c.isdigit() for c in plain[:12]):
            continue
        if not plain.isdigit() and ("." not in raw or "/" not in raw):
            continue  # an alphanumeric CNPJ is only taken in its punctuated form
        valid = bool(_cnpj.validate(raw))
        found.append(
            Mention(
                "CNPJ_CPF_RG",
                raw,
                frozenset({f"cnpj|{plain}"}),
                m.start(1),
                m.end(1),
                invalid=not valid,
            )
        )
        spans.append((m.start(1), m.end(1)))
    seen: set[int] = set()
    cpfs = [CPF_FORMATTED] + ([CPF_CUED] if "cpf" in folded else [])
    for cpf_pattern in cpfs:
        for m in scan.finditer(cpf_pattern):
            if m.start(1) in seen or any(a <= m.start(1) < b for a, b in spans):
                continue
            seen.add(m.start(1))
            raw = m.group(1)
            plain = re.sub(r"\D", "", raw)
            valid = bool(_cpf.validate(plain))
            found.append(
                Mention(
                    "CNPJ_CPF_RG",
                    raw,
                    frozenset({f"cpf|{plain}"}),
                    m.start(1),
                    m.end(1),
                    invalid=not valid,
                )
            )
    for m in scan.finditer(RG) if ("rg" in folded or "identidade" in folded) else ():
        plain = re.sub(r"[^\dX]", "", m.group(1).upper())
        found.append(
            Mention("CNPJ_CPF_RG", m.group(1), frozenset({f"rg|{plain}"}), m.start(1), m.end(1))
        )
    return found
