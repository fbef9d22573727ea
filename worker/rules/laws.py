"""LEI: laws and their parts, as cited and as named.

- **A law cited by kind and number** (``Lei nº 8.078/1990``, ``LC 123/06``, ``Decreto-Lei
  5.452``, ``IN RFB 2.178/24``, ``Resolução Normativa ANS nº 465/2021``, ``Súmula 297``): key
  ``law|<kind>:<number>``; with a year, also ``lawyear|<kind>:<number>/<year>`` and
  ``year|<year>``, and with its signing date ("Lei nº 13.709, de 14 de agosto de 2018") the
  ``date|`` key. A bare ``lei 10`` without a year is too weak to be a citation.
- **Its parts**: articles (``art. 49``, ``arts. 1.350``) ``article|49``; paragraphs (``§ 2º``,
  ``parágrafo único``) ``paragraph|2``; incisos (``inciso IV``, and ``art. 12, V``) ``inciso|4``.
- **A code of law by name or acronym** (``CDC``, ``Código de Defesa do Consumidor``, ``CLT``,
  ``LGPD``): found with the gazetteer's other names (``names``), it takes the key of the law it
  is (:func:`code_mention`: ``CDC`` → ``law|lei:8078``).

In the judge, the same law number with another year contradicts (:func:`year_conflict`).
"""

from __future__ import annotations

import re

from veredito.worker.rules import gazetteer as gz
from veredito.worker.rules import scan as sc
from veredito.worker.rules.amounts import DATE_WORDS, MONTHS
from veredito.worker.rules.mention import ContextView, Mention, ci, year
from veredito.worker.rules.text import fold

__all__ = ["PATTERNS", "code_mention", "detect_laws", "year_conflict"]

LAW_KIND = sc.pattern(
    "LAW_KIND",
    ci(
        r"(?P<kind>lei\s+complementar|lei\s+ordin[aá]ria|lei|decreto[\s-]+lei|decreto|"
        r"medida\s+provis[oó]ria|MP|portaria|instru[cç][aã]o\s+normativa|IN|resolu[cç][aã]o|"
        r"emenda\s+constitucional|EC|circular|LC|RN|RDC|resolu[cç][aã]o\s+normativa|s[uú]mula)"
        r"(?P<issuer>(?:\s+(?:conjunta|normativa|RFB|SRF|ANS|ANEEL|ANATEL|Anatel|BCB|Bacen|CMN|"
        r"CVM|ANPD|ANVISA|Anvisa|ANAC|Contran|CONTRAN|MTE|MTP|SRT|SEPRT|CGSN|Confaz|CONFAZ|PGFN|"
        r"INSS|Susep|SUSEP|do\s+\w+|da\s+\w+))*)"
        r"\s*(?:n[º°o]\s*\.?|n\.\s*[º°o]\.?|n\.|núm\.|número)?\s*"
        r"(?P<number>\d{1,3}(?:\.\d{3})+|\d+)(?!\s*(?:%|dias|horas|anos|meses|por\s+100))"
        r"(?:\s*[/-]\s*(?P<year>\d{4}|\d{2})\b"
        r"|,?\s+de\s+\d{1,2}º?\s+de\s+[a-zç]+\s+de\s+(?P<year2>\d{4}))?"
    ),
    folded=True,
)
_LAW_KIND_CANON = {
    "lei": "lei",
    "lei ordinaria": "lei",
    "lei complementar": "lc",
    "lc": "lc",
    "decreto": "decreto",
    "decreto-lei": "dl",
    "decreto lei": "dl",
    "medida provisoria": "mp",
    "mp": "mp",
    "portaria": "portaria",
    "instrucao normativa": "in",
    "in": "in",
    "resolucao": "resolucao",
    "emenda constitucional": "ec",
    "ec": "ec",
    "circular": "circular",
}
_LAW_KIND_CANON.update(
    {"rn": "resolucao", "resolucao normativa": "resolucao", "rdc": "resolucao", "sumula": "sumula"}
)
ARTICLE = sc.pattern(
    "ARTICLE",
    ci(
        r"art(?<!\wart)(?:s?\.|igos?)\s*(?P<number>\d{1,3}(?:\.\d{3})+(?!\d)|\d+)(?:\s*[º°o])?"
        r"(?:-[A-Z]\b)?"
    ),
    folded=True,
)
PARAGRAPH = sc.pattern(
    "PARAGRAPH",
    ci(r"(?:§\s*(?P<number>\d+)\s*[º°o]?|par[aá]grafo\s+(?P<unico>[uú]nico))"),
    folded=True,
)
INCISO = sc.pattern("INCISO", r"inciso(?<!\winciso)s?\s+(?P<number>[IVXLC]+)\b", folded=False)
INCISO_AFTER = sc.pattern(
    "INCISO_AFTER", r"\d(?:\s*[º°o])?,\s+(?:inc\.\s*)?(?P<after>[IVXLC]+)\b", folded=False
)
PATTERNS = (LAW_KIND, ARTICLE, PARAGRAPH, INCISO, INCISO_AFTER)
_ROMAN = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100}


def _roman(numeral: str) -> int:
    total, last = 0, 0
    for ch in reversed(numeral.upper()):
        value = _ROMAN[ch]
        total = total - value if value < last else total + value
        last = max(last, value)
    return total


def detect_laws(text: str, folded: str, scan: sc.Scan | None = None) -> list[Mention]:
    scan = scan or sc.scan(text, folded)
    found: list[Mention] = []
    date_words = DATE_WORDS.regex
    assert date_words is not None
    for m in scan.finditer(LAW_KIND):
        kind_word = text[m.start("kind") : m.end("kind")]
        if kind_word in ("MP", "IN", "EC", "LC") or kind_word.isupper():
            pass
        elif kind_word[0].isupper() is False and fold(kind_word) in ("in", "mp", "ec", "lc"):
            continue  # "in", "mp" in lower case are not law kinds
        kind = _LAW_KIND_CANON.get(re.sub(r"[\s-]+", " ", fold(kind_word)).replace(" lei", "-lei"))
        kind = kind or _LAW_KIND_CANON.get(re.sub(r"\s+", " ", fold(kind_word)), "lei")
        number = m.group("number").replace(".", "")
        if kind == "lei" and len(number) <= 2 and not m.group("year"):
            continue  # "lei 10" without a year is too weak to be a citation
        law_year = year(m.group("year") or m.group("year2"))
        extra = frozenset(
            {f"lawyear|{kind}:{number}/{law_year}", f"year|{law_year}"} if law_year else ()
        )
        signed = date_words.search(folded, m.start(), m.end()) if law_year else None
        if signed is not None and signed.group("y"):  # "Lei nº 13.709, de 14 de agosto de 2018"
            day = 1 if signed.group("first") else int(signed.group("d"))
            month = MONTHS[fold(signed.group("month"))]
            extra |= {f"date|{signed.group('y')}-{month:02d}-{day:02d}"}
        found.append(
            Mention(
                "LEI",
                text[m.start() : m.end()].strip(),
                frozenset({f"law|{kind}:{number}"}),
                m.start(),
                m.end(),
                extra=extra,
            )
        )
    articles: list[int] = []
    for m in scan.finditer(ARTICLE) if "art" in folded else ():
        key = frozenset({f"article|{m.group('number').replace('.', '')}"})  # art. 1.350
        found.append(Mention("LEI", text[m.start() : m.end()], key, m.start(), m.end()))
        articles.append(m.end())
    for m in scan.finditer(PARAGRAPH) if ("§" in text or "paragrafo" in folded) else ():
        value = "unico" if m.group("unico") else m.group("number")
        key = frozenset({f"paragraph|{value}"})
        found.append(Mention("LEI", text[m.start() : m.end()], key, m.start(), m.end()))
    inciso, inciso_after = INCISO.regex, INCISO_AFTER.regex
    incisos = list(scan.finditer(INCISO)) if "inciso" in text else []
    if articles:
        incisos = sorted([*incisos, *scan.finditer(INCISO_AFTER)], key=lambda m: m.start())
    for m in incisos:
        start = m.start() + 1 if m.re is inciso_after else m.start()  # after the digit
        if m.re is inciso_after and not any(end <= start <= end + 3 for end in articles):
            continue  # "art. 12, V" names inciso V; "12, V" elsewhere does not
        numeral = m.group("number") if m.re is inciso else m.group("after")
        key = frozenset({f"inciso|{_roman(numeral)}"})
        found.append(Mention("LEI", text[start : m.end()].lstrip(", "), key, start, m.end()))
    return found


def code_mention(text: str, start: int, end: int, code: str) -> Mention:
    """A code of law the gazetteer names (``CDC``): the key of the law it is."""
    law = gz.CODES[code][0]
    keys = frozenset({f"law|{law}" if law else f"law|code:{code}"})
    return Mention("LEI", text[start:end], keys, start, end)


def year_conflict(mention: Mention, ctx: ContextView) -> bool:
    """Same law number, another year (``Lei 8.078/1991`` where the context has ``/1990``)."""
    years = {k for k in mention.extra if k.startswith("lawyear|")}
    if not years or years & ctx.keys:
        return False
    laws = {k.partition("|")[2].partition("/")[0] for k in years}
    return any(
        k.startswith("lawyear|") and k.partition("|")[2].partition("/")[0] in laws for k in ctx.keys
    )
