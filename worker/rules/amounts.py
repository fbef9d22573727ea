"""PRAZO_VALOR: values and dates — amounts of money, percentages, dates, times, deadlines,
counts and numbers.

Keys (all values normalised, so that every way of writing one agrees):

- money ``money|<centavos>`` (``R$ 1.500,00``, ``1.500 reais``, ``mil e quinhentos reais``);
- percentages ``percent|<value>`` (``15%``, ``15 por cento``, and fractions: ``1/3``, ``um
  terço`` → ``percent|33.33``);
- dates ``date|YYYY-MM-DD`` (``15/03/2024``, ``15.03.2024``, ``2024-03-15``, ``15 de março de
  2024``), with the coarser ``daymonth|``, ``monthyear|`` and ``year|``; ``março de 2024``
  ``monthyear|2024-03``; a day without its year ``daymonth|``; ``até o dia 20``
  ``dayofmonth|20``; times of day ``clock|22:00`` (``22h``, ``22 horas``);
- deadlines ``duration:<unit>|<value>`` (``30 dias``, ``5 dias úteis``, ``2 anos`` =
  ``duration:month|24``, ``365 dias`` also one year);
- counts ``count:<stem>|<value>`` (``5 faltas``, ``2 salários mínimos``), years ``year|2024``,
  and any other number of three digits or more ``number|<digits>`` (not contradictable: a
  telephone, a protocol).

Every amount also grounds a bare number of its value (:func:`with_number`). Detection runs in
one pass of precedence (money first, bare numbers last): a span taken by one kind is not read
again by a later one.

In the judge, a date the context gives in parts is grounded (:func:`grounded_by_parts`), a long
number with or without its prefix is the same number (:func:`same_number`), and how near the
nearest context value of the kind is feeds the confidence (:func:`nearest`); whether a value sits
in the clause about the same thing is ``slots``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from decimal import Decimal

from veredito.worker.rules import scan as sc
from veredito.worker.rules.mention import ContextView, Mention, ci
from veredito.worker.rules.mention import year as _year
from veredito.worker.rules.text import fold
from veredito.worker.rules.text import stem as _stem

__all__ = [
    "DATE_WORDS",
    "MONTHS",
    "PATTERNS",
    "QUANTITIES",
    "detect_amounts",
    "grounded_by_parts",
    "nearest",
    "same_number",
    "with_number",
]

# Every pattern that scans a whole text starts with a literal or a character class: Python's
# matcher then skips to the next candidate position in C, instead of trying the whole pattern at
# every position (a leading lookbehind, ``\b``, group or ``\d+`` defeats that; they are written
# after the first character instead: ``\d(?<![\w.]\d)`` is ``(?<![\w.])\d``).
MONEY_SIGN = sc.pattern(
    "MONEY_SIGN",
    r"(?:\$(?<=r\$)|\$(?<=us\$)|€)\s*(?P<a>\d(?:\d{0,2}(?:\.\d{3})+|\d*))(?:,(?P<ac>\d{1,4}))?",
    folded=True,
)
MONEY_WORDS = sc.pattern(
    "MONEY_WORDS",
    r"(?P<b>\d(?:\d{0,2}(?:\.\d{3})+|\d*))(?:,(?P<bc>\d{1,2}))?\s+(?:de\s+)?reais\b"
    r"(?:\s+e\s+(?P<cents>\d{1,2})\s+centavos?\b)?",
    folded=True,
)
PERCENT = sc.pattern(
    "PERCENT", ci(r"(?P<n>\d\d*(?:[.,]\d+)?)\s*(?:%|por\s*cento\b|por\s+100\b)"), folded=True
)
MONTHS = {
    "janeiro": 1,
    "fevereiro": 2,
    "marco": 3,
    "abril": 4,
    "maio": 5,
    "junho": 6,
    "julho": 7,
    "agosto": 8,
    "setembro": 9,
    "outubro": 10,
    "novembro": 11,
    "dezembro": 12,
}
_MONTH_STEMS = (
    "janeiro",
    "fevereiro",
    "marco",
    "abril",
    "maio",
    "junho",
    "julho",
    "agosto",
    "setembro",
    "outubro",
    "novembro",
    "dezembro",
)
DATE_NUMERIC = sc.pattern(
    "DATE_NUMERIC",
    r"(?P<d>\d(?<![\d/]\d)\d?)/(?P<m>\d{1,2})/(?P<y>\d{4}|\d{2})(?![\d/])",
    folded=False,
)
# "05.03.2025" and ISO "2025-03-05" (a 4-digit year, so that 1.500.000 stays a number)
DATE_DOTTED = sc.pattern(
    "DATE_DOTTED",
    r"(?P<d>\d(?<![\w.-]\d)\d?)\.(?P<m>\d{1,2})\.(?P<y>(?:19|20)\d{2})(?![\d.-]?\d)",
    folded=False,
)
DATE_ISO = sc.pattern(
    "DATE_ISO",
    r"(?P<y>(?:19|20)(?<![\w.-]..)\d{2})-(?P<m>\d{2})-(?P<d>\d{2})(?![\d.-]?\d)",
    folded=False,
)
DATE_WORDS = sc.pattern(
    "DATE_WORDS",
    ci(
        r"(?:(?P<d>\d{1,2})\s*[º°o]?|(?P<first>primeiro))\s+de\s+(?P<month>janeiro|fevereiro|"
        r"mar[cç]o|abril|maio|junho|julho|agosto|setembro|outubro|novembro|dezembro)"
        r"(?:\s+de\s+(?P<y>\d{4}))?"
    ),
    folded=True,
)
MONTH_YEAR = sc.pattern(
    "MONTH_YEAR",
    ci(
        r"\b(?P<month>janeiro|fevereiro|mar[cç]o|abril|maio|junho|julho|agosto|setembro|outubro|"
        r"novembro|dezembro)\s+de\s+(?P<y>\d{4})"
    ),
    folded=True,
)
_UNITS = {
    "dia": ("day", 1),
    "dias": ("day", 1),
    "dia util": ("workday", 1),
    "dias uteis": ("workday", 1),
    "dias corridos": ("day", 1),
    "hora": ("hour", 1),
    "horas": ("hour", 1),
    "mes": ("month", 1),
    "meses": ("month", 1),
    "ano": ("month", 12),
    "anos": ("month", 12),
    "semana": ("day", 7),
    "semanas": ("day", 7),
    "minuto": ("minute", 1),
    "minutos": ("minute", 1),
}
# a gate that starts with a literal: re skips to each "h"
CLOCK_GATE = sc.pattern("CLOCK_GATE", r"h(?<=\dh)", folded=True, scanned=False)
CLOCK = sc.pattern("CLOCK", r"(?<![\w,.])(?P<h>\d{1,2})h(?P<min>\d{2})?(?!\w)", folded=True)
DAY_OF_MONTH = sc.pattern(
    "DAY_OF_MONTH",
    r"dia(?<!\wdia)\s+(?P<d>\d{1,2})(?![\d/.,]|\s*(?:de\s+)?(?:" + "|".join(MONTHS) + "))",
    folded=True,
)
DURATION = sc.pattern(
    "DURATION",
    ci(
        r"(?P<n>\d\d*(?:,\d+)?)\s*(?:\(\s*[\w\s]+\s*\)\s*)?"
        r"(?P<unit>dias?\s+[uú]teis|dia\s+[uú]til|dias\s+corridos|dias?|horas?|m[eê]s|meses|"
        r"anos?|semanas?|minutos?)\b"
    ),
    folded=True,
)
FRACTION = sc.pattern("FRACTION", r"(?P<a>\d(?<![\d/]\d))/(?P<b>\d{1,2})(?![\d/])", folded=True)
FRACTION_WORD = sc.pattern(
    "FRACTION_WORD",
    ci(
        r"\b(?P<w>metade|um\s+ter[cç]o|(?:dois|2)\s+ter[cç]os|um\s+quarto|"
        r"(?:tr[eê]s|3)\s+quartos)\b"
    ),
    folded=True,
)
_FRACTION_WORDS = {
    "metade": (1, 2),
    "um terco": (1, 3),
    "dois tercos": (2, 3),
    "2 tercos": (2, 3),
    "um quarto": (1, 4),
    "tres quartos": (3, 4),
    "3 quartos": (3, 4),
}
COUNT = sc.pattern(
    "COUNT",
    r"(?P<n>\d(?<![\w.,/]\d)\d*(?:,\d+)?)\s+(?P<noun>[a-záéíóúâêôãõç]{3,}(?:\s+m[ií]nimos?)?)\b",
    folded=False,
)
_NOT_COUNT_NOUNS = frozenset(
    "de do da dos das por para com sem que ate e ou ao aos mil".split()
    # pronouns, verbs and discourse words after a number are not what it counts
    # ("na Faixa 2 você", "placas com final 7 têm", "por dois motivos")
    + "voce voces ele ela eles elas tem sao e foi foram vai pode podem deve devem esta estao"
    " informando motivos razoes coisas formas maneiras dicas".split()
    + list(MONTHS)
)
YEAR = sc.pattern("YEAR", r"(?P<y>(?:19|20)(?<![\d.,/]\d\d)\d{2})(?![\d/]|[.,]\d)", folded=False)
BIG_NUMBER = sc.pattern(
    "BIG_NUMBER",
    r"(?P<n>\d(?<![\w.,/$]\d)(?:[\d .-]{2,}\d|\d{2,}))(?![\w/%]|[.,]\d)",
    folded=False,
)


def _cents(integer: str, fraction: str | None) -> str:
    """The amount in centavos, as text: ``150000`` for 1.500,00; ``987.7`` for a tariff of 9,877."""
    value = Decimal(integer.replace(".", "")) * 100
    if fraction:
        value += Decimal(f"0.{fraction}") * 100
    return format(value.normalize(), "f")


def detect_amounts(text: str, folded: str, scan: sc.Scan | None = None) -> list[Mention]:
    scan = scan or sc.scan(text, folded)
    fraction, clock_gate = FRACTION.regex, CLOCK_GATE.regex
    assert clock_gate is not None
    found: list[Mention] = []
    taken = bytearray(len(text))  # 1 where an amount was found

    def add(m: re.Match[str], keys: set[str], extra: Iterable[str] = ()) -> None:
        start, end = m.span()
        numbers = _numbers_of(keys)
        found.append(
            Mention(
                "PRAZO_VALOR",
                text[start:end].strip(),
                frozenset(keys),
                start,
                end,
                extra=frozenset({*extra, *numbers}) if numbers else frozenset(extra),
            )
        )
        taken[start:end] = b"\x01" * (end - start)

    def free(m: re.Match[str]) -> bool:
        return taken.find(1, m.start(), m.end()) < 0

    has_month = (scan.may_match(DATE_WORDS) or scan.may_match(MONTH_YEAR)) and any(
        month in folded for month in _MONTH_STEMS
    )  # (gates are skipped where the compiled scan already knows there is nothing)
    for m in scan.finditer(MONEY_SIGN) if ("$" in text or "€" in text) else ():
        start = m.start() - (2 if folded.startswith("us$", m.start() - 2) else 1)
        if folded[m.start()] == "€":
            start = m.start()
        money = frozenset({f"money|{_cents(m.group('a'), m.group('ac'))}"})
        found.append(
            Mention(
                "PRAZO_VALOR",
                text[start : m.end()].strip(),
                money,
                start,
                m.end(),
                extra=frozenset(_numbers_of(money)),
            )
        )
        taken[start : m.end()] = b"\x01" * (m.end() - start)
    for m in scan.finditer(MONEY_WORDS) if "reais" in folded else ():
        add(m, {f"money|{_cents(m.group('b'), m.group('bc') or m.group('cents'))}"})
    for m in scan.finditer(PERCENT) if ("%" in text or "por 100" in folded) else ():
        if free(m):
            value = float(m.group("n").replace(",", "."))
            add(m, {f"percent|{value:g}"})
    for m in scan.finditer(DATE_NUMERIC) if "/" in text else ():
        year, month, day = _year(m.group("y")), int(m.group("m")), int(m.group("d"))
        add(
            m,
            {f"date|{year}-{month:02d}-{day:02d}"},
            {f"daymonth|{month:02d}-{day:02d}", f"monthyear|{year}-{month:02d}", f"year|{year}"},
        )
    other_dates: list[re.Match[str]] = []
    if ".19" in text or ".20" in text:
        other_dates += scan.finditer(DATE_DOTTED)
    if "-0" in text or "-1" in text:
        other_dates += scan.finditer(DATE_ISO)
    for m in other_dates:
        year, month, day = int(m.group("y")), int(m.group("m")), int(m.group("d"))
        if 1 <= month <= 12 and 1 <= day <= 31 and free(m):
            add(
                m,
                {f"date|{year}-{month:02d}-{day:02d}"},
                {
                    f"daymonth|{month:02d}-{day:02d}",
                    f"monthyear|{year}-{month:02d}",
                    f"year|{year}",
                },
            )
    for m in scan.finditer(DATE_WORDS) if has_month else ():
        if not free(m):
            continue
        day = 1 if m.group("first") else int(m.group("d"))
        month = MONTHS[fold(m.group("month"))]
        given_year = m.group("y")
        if given_year:
            add(
                m,
                {f"date|{given_year}-{month:02d}-{day:02d}"},
                {
                    f"daymonth|{month:02d}-{day:02d}",
                    f"monthyear|{given_year}-{month:02d}",
                    f"year|{given_year}",
                },
            )
        else:
            add(m, {f"daymonth|{month:02d}-{day:02d}"}, {f"daymonth_free|{month:02d}-{day:02d}"})
    for m in scan.finditer(MONTH_YEAR) if has_month else ():
        if free(m):
            month = MONTHS[fold(m.group("month"))]
            add(m, {f"monthyear|{m.group('y')}-{month:02d}"}, {f"year|{m.group('y')}"})
    clocks = scan.may_match(CLOCK) and clock_gate.search(folded)
    for m in scan.finditer(CLOCK) if clocks else ():  # "22h", "6h30"
        hour, minute = int(m.group("h")), int(m.group("min") or 0)
        if hour <= 24 and minute < 60 and free(m):
            add(m, {f"clock|{hour:02d}:{minute:02d}"})
    for m in scan.finditer(DAY_OF_MONTH) if "dia " in folded else ():  # "até o dia 20"
        if free(m) and 1 <= int(m.group("d")) <= 31:
            add(m, {f"dayofmonth|{int(m.group('d'))}"})
    for m in scan.finditer(DURATION):
        if not free(m):
            continue
        unit, factor = _UNITS[re.sub(r"\s+", " ", fold(m.group("unit")))]
        value = float(m.group("n").replace(",", ".")) * factor
        # "das 22 horas às 5 horas" names the time of day a "22h" elsewhere gives
        extra = [f"clock|{int(value):02d}:00"] if unit == "hour" and value <= 24 else []
        if unit == "day" and value % 365 == 0:  # "365 dias" is "1 ano"
            extra.append(f"duration:month|{value / 365 * 12:g}")
        elif unit == "month" and value % 12 == 0:
            extra.append(f"duration:day|{value / 12 * 365:g}")
        add(m, {f"duration:{unit}|{value:g}"}, extra)
    fractions: Iterable[re.Match[str]] = scan.finditer(FRACTION) if "/" in text else ()
    if "metade" in folded or "terc" in folded or "quart" in folded:
        fractions = sorted([*fractions, *scan.finditer(FRACTION_WORD)], key=lambda m: m.start())
    for m in fractions:
        if free(m):
            a, b = (
                (int(m.group("a")), int(m.group("b")))
                if m.re is fraction
                else _FRACTION_WORDS[re.sub(r"\s+", " ", fold(m.group("w")))]
            )
            if b:
                add(m, {f"percent|{round(100 * a / b, 2):g}"})
    for m in scan.finditer(YEAR):
        if free(m):
            add(m, {f"year|{m.group('y')}"})
    for m in scan.finditer(COUNT):
        noun = fold(m.group("noun")).split()[0]
        value = float(m.group("n").replace(",", "."))
        if free(m) and noun not in _NOT_COUNT_NOUNS and value >= 2:
            # the same number anywhere in the context grounds it ("5 vezes" / "5 faltas")
            keys = {f"count:{_stem(noun)}|{value:g}"}
            if value.is_integer():
                keys.add(f"number|{int(value)}")
            add(m, keys)
    for m in scan.finditer(BIG_NUMBER):
        if free(m):
            digits = re.sub(r"\D", "", m.group("n"))
            if len(digits) >= 3:
                key = frozenset({f"number|{int(digits)}"})
                found.append(
                    Mention(
                        "PRAZO_VALOR",
                        m.group(0).strip(),
                        key,
                        m.start(),
                        m.end(),
                        contradictable=False,
                    )
                )
                taken[m.start() : m.end()] = b"\x01" * (m.end() - m.start())
    return found  # each with its number keys (:func:`with_number`), added as it was made


def _numbers_of(keys: Iterable[str]) -> set[str]:
    """The bare numbers amounts of these keys ground (``180`` by ``180 dias``)."""
    out: set[str] = set()
    for key in keys:
        kind, _, value = key.partition("|")
        if kind == "money":
            out.add(f"number|{int(Decimal(value)) // 100}")
        elif kind.startswith(("duration", "count", "percent")):
            number = float(value)
            if number.is_integer():
                out.add(f"number|{int(number)}")
    return out


def with_number(mention: Mention) -> Mention:
    """Every amount also grounds a bare number of the same value (``180`` by ``180 dias``):
    ``mention`` with those keys among its ``extra`` (:func:`detect_amounts` adds them already)."""
    extra = mention.extra | _numbers_of(mention.keys)
    if not extra - mention.extra:
        return mention
    return Mention(
        mention.category,
        mention.text,
        mention.keys,
        mention.start,
        mention.end,
        mention.contradictable,
        mention.invalid,
        frozenset(extra),
    )


PATTERNS = (
    MONEY_SIGN,
    MONEY_WORDS,
    PERCENT,
    DATE_NUMERIC,
    DATE_DOTTED,
    DATE_ISO,
    DATE_WORDS,
    MONTH_YEAR,
    CLOCK,
    DAY_OF_MONTH,
    DURATION,
    FRACTION,
    FRACTION_WORD,
    YEAR,
    COUNT,
    BIG_NUMBER,
)

# ---------------------------------------------------------------------------- in the judge

QUANTITIES = ("money", "percent", "duration:", "count:", "number", "date", "daymonth")


def grounded_by_parts(mention: Mention, ctx: ContextView) -> bool:
    """``15/03/2024`` where the context says "de 15 de março a 31 de maio de 2024"."""
    for key in mention.keys:
        kind, _, value = key.partition("|")
        if kind == "date":
            year, month, day = value.split("-")
            if f"daymonth_free|{month}-{day}" in ctx.keys and f"year|{year}" in ctx.keys:
                return True
    return False


def same_number(mention: Mention, ctx: ContextView) -> bool:
    """A long number (a telephone, a protocol) written with or without its area code or
    prefix: the last eight digits of one end the other."""
    for key in mention.keys:
        kind, _, digits = key.partition("|")
        if kind != "number" or len(digits) < 8:
            continue
        for other in ctx.keys:
            theirs = other.partition("|")[2] if other.startswith("number|") else ""
            if len(theirs) >= 8 and (digits.endswith(theirs) or theirs.endswith(digits)):
                return True
    return False


def nearest(mention: Mention, ctx: ContextView) -> float | None:
    """How near the nearest context value of the mention's kind is: ``exp(-|ln(a/b)|)``, 1 for
    equal values, towards 0 for far ones (a computed total is usually far from its operands, a
    mistyped value near the right one). None when the context has no number of its kind."""
    best: float | None = None
    for key in mention.keys:
        kind, _, raw = key.partition("|")
        mine = _number(raw)
        if mine is None or mine <= 0:
            continue
        for other in ctx.keys:
            if not other.startswith(kind + "|") or other == key:
                continue
            theirs = _number(other.partition("|")[2])
            if theirs is None or theirs <= 0:
                continue
            near = min(mine, theirs) / max(mine, theirs)
            if best is None or near > best:
                best = near
    return best


def _number(raw: str) -> float | None:
    try:
        return float(raw)
    except ValueError:
        return None
