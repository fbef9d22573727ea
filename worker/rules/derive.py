"""Values an answer computes from the context: a bounded search for a simple derivation.

Answers compute: a fine of "2 mensalidades" on a fee of R$ 310 is R$ 620; 120 days of leave plus
60 are 180; 5 % of R$ 1.518 is R$ 75,90; a contract signed on 10/03/2025 with 7 days to cancel
ends on 17/03/2025; "em dobro" doubles a refund. :func:`derive` looks for the value among a few
operations over the numbers of the same unit found in the context, the query and the rest of the
answer, and says how (the operands and the operation), or ``None``.

The search is bounded: at most :data:`POOL` values per unit and :data:`FACTORS` small factors,
sums of two values (three when the pool is small), differences, products and quotients by a
factor or a fraction of two factors, a percentage of an amount (also with the amount: a discount,
an increase), percentage points added, a date plus a duration, and the months or days between two
dates. A few hundred to a few thousand arithmetic steps for a value the context lacks, and none
for the values it has.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, timedelta

__all__ = ["Derivation", "derive"]

POOL = 24  # values per unit, at most
FACTORS = 16  # small numbers used as factors, at most
_THREE_TERMS = 10  # sums of three values only when the pool is this small
SUBSET = 8  # a "total" adds up to this many of the answer's own values (255 sums at most)

# Arithmetic only where the claim shows it computes (a value that merely equals 15 + 15 is not
# derived): words and signs of sums, products, shares and results, in the folded claim. Dates
# plus durations and spans between dates need no cue (an exact day rarely matches by chance).
CUES = re.compile(
    r"[×*=+]|\d\s*x\s*\d|\b(?:vezes|soma\w*|tota\w*|ou seja|result\w*|dobro|metade|triplo"
    r"|restam|restantes?|faltam|equivale\w*|corresponde\w*|parcelas? de|subtra\w*|diferenca"
    r"|sobra\w*|divid\w*|no total|ao todo|calcul\w*|o que da|por pessoa|indo para|passa a ser"
    r"|passa para|vai para|chega a|fica em|ficaria|ficam em|sera de|seria de|entao|daria|aumento"
    r"|sobe para|ir ate|em vez de)\b|\bda r\$|→|=>"
)
# words that make an amount plus or minus a percentage worth trying ("com desconto de 3%")
WEAK_CUES = re.compile(r"\b(?:desconto|acresc\w*|reajuste\w*|rende\w*|proporcional\w*|juros)\b")
_FRACTION = re.compile(r"(?<![\d/])(\d{1,2})/(\d{1,3})(?![\d/])")
CUES_TOTAL = re.compile(r"\b(?:tota\w*|soma\w*|ao todo|no total)\b")
_INTEGER = re.compile(r"(?<![\d.,])\d{1,4}(?![\d.,]\d)")
_MONTHS = "janeiro fevereiro marco abril maio junho julho agosto setembro outubro novembro dezembro"
_MONTH_NUMBERS = {m: i for i, m in enumerate(_MONTHS.split(), start=1)}
_MONTH_SPAN = re.compile(
    r"\b(?:de\s+)?("
    + "|".join(_MONTH_NUMBERS)
    + r")\s+(?:a|ate)\s+("
    + "|".join(_MONTH_NUMBERS)
    + r")\b"
)


@dataclass(frozen=True, slots=True)
class Derivation:
    operation: str  # "+", "-", "×", "÷", "% de", "+ dias"…
    operands: tuple[str, ...]  # as a reader writes them: "R$ 310,00", "2", "5%"


def _unit(key: str) -> tuple[str, float] | None:
    """(unit, value) of a mention key, or ``None`` for keys that are not quantities."""
    kind, _, value = key.partition("|")
    base = kind.partition(":")[0]
    try:
        if base == "money":
            return "money", float(value)
        if base == "percent":
            return "percent", float(value)
        if base == "duration":
            return kind, float(value)  # duration:day, duration:month, duration:workday ...
        if base in ("count", "number"):
            return "number", float(value)
        if base == "date":
            y, m, d = (int(p) for p in value.split("-"))
            return "date", float(date(y, m, d).toordinal())
        if base in ("daymonth", "daymonth_free"):  # "10 de março": a day of a leap year
            m, d = (int(p) for p in value.split("-"))
            return "daymonth", float(date(2000, m, d).toordinal())
    except ValueError:
        return None
    return None


def _show(unit: str, value: float) -> str:
    if unit == "money":
        reais = f"{value / 100:,.2f}".replace(",", "_").replace(".", ",").replace("_", ".")
        return f"R$ {reais}"
    if unit == "percent":
        return f"{value:g}%"
    if unit == "date":
        return date.fromordinal(int(value)).isoformat()
    if unit == "daymonth":
        return date.fromordinal(int(value)).strftime("%d/%m")
    if unit.startswith("duration:"):
        return f"{value:g} {unit.partition(':')[2]}"
    return f"{value:g}"


def _close(a: float, b: float, unit: str) -> bool:
    if unit == "money":  # cents; a rounding of the last cent, or 0.05 % of the amount
        return abs(a - b) <= max(1.0, abs(b) * 0.0005)
    return abs(a - b) <= max(0.011, abs(b) * 0.0005)


def _add_months(day: date, months: int) -> date | None:
    month = day.month - 1 + months
    year = day.year + month // 12
    try:
        return day.replace(year=year, month=month % 12 + 1)
    except ValueError:
        return None


def derive(
    key: str,
    sources: Iterable[str],
    cues: str = "",
    own: Iterable[str] = (),
    answer_cues: str = "",
    answer: Iterable[str] = (),
    given: Iterable[str] = (),
) -> Derivation | None:
    """How the value of ``key`` follows from the quantities in ``sources`` (mention keys of the
    context, the query and the rest of the answer), or ``None``. Arithmetic is tried only when
    ``cues`` (the folded claim) shows a computation (:data:`CUES`). Factors come from ``own``
    (the claim's other mentions: "6 × R$ 6.750", "8/12 de R$ 2.400"), from counts the context
    or query states ("2 mensalidades"), and from "dobro", "metade", "triplo" anywhere in the
    answer (``answer_cues``, folded). A "total" may add up any of the answer's own values of
    the unit (``answer``: its mention keys; at most :data:`SUBSET` of them). A claim that writes
    three or more values of the unit shows its operands: they must add up, with signs, to the
    result, or nothing else is tried. "Em dobro" said elsewhere doubles only a value the claim
    or the user (``given``: the query's keys) writes. A percentage of an
    amount needs no cue (cents rarely match by chance), nor do dates and the months a span of
    month names covers ("de julho a dezembro são 6 meses")."""
    target = _unit(key)
    if target is None:
        return None
    # sets of keys iterate in a per-process order: sort, so a verdict never depends on the run
    sources, own, answer, given = sorted(sources), sorted(own), sorted(answer), sorted(given)
    unit, value = target
    pools: dict[str, list[float]] = {}
    for source in sources:
        found = _unit(source)
        if found is not None and found[1] not in pools.setdefault(found[0], []):
            pools[found[0]].append(found[1])
    same = [v for v in pools.get(unit, []) if not _close(v, value, unit)][:POOL]
    own_numbers = sorted(
        {
            v
            for k in own
            if (found := _unit(k)) is not None
            and (found[0] == "number" or found[0].startswith("duration:"))
            and 0 < (v := found[1]) <= 1000
        }
    )
    computes = CUES.search(cues) is not None
    if computes:  # "4 × R$ 142": a bare number the claim computes with
        own_numbers = sorted(
            {*own_numbers, *(float(n) for n in _INTEGER.findall(cues) if 0 < int(n) <= 1000)}
        )
    fractions = [
        (int(k), int(m))
        for k, m in _FRACTION.findall(cues + " " + answer_cues)
        if 0 < int(k) < int(m)
    ]
    stated = {
        float(count)
        for k in sources
        if k.startswith("count:") and (count := k.partition("|")[2]).replace(".", "").isdigit()
    }
    # never the value itself: "10%" must not be 1% × the 10 it is written with
    factors = sorted({v for v in (*own_numbers, *stated) if v > 1 and v != value})[:FACTORS]
    words = cues + " " + answer_cues
    scaled = [
        f
        for word, f in (("dobro", 2.0), ("duas vezes", 2.0), ("triplo", 3.0), ("metade", 0.5))
        if word in words
    ]
    factors += scaled
    show = _show
    weak = WEAK_CUES.search(cues) is not None
    own_same = {v for k in own if (f := _unit(k)) is not None and f[0] == unit for v in (f[1],)}
    if unit not in ("date", "daymonth") and not computes and scaled:
        # "em dobro" said once, the result later: only of a value the claim or the user writes
        mine = own_same | {v for k in given if (f := _unit(k)) and f[0] == unit for v in (f[1],)}
        for a in same:
            if a not in mine:
                continue
            for k in scaled:
                if _close(a * k, value, unit):
                    return Derivation("×", (show(unit, a), f"{k:g}"))
    written = sorted(v for v in own_same if not _close(v, value, unit))[:SUBSET]
    if unit not in ("date", "daymonth") and len(written) >= 3:
        # "689 + 54,50 + 38 - 50 = 731,50": the operands are on the page; nothing else is tried
        for signs in itertools.product((1, -1, 0), repeat=len(written)):
            if sum(1 for x in signs if x) < 2:
                continue
            total = sum(x * v for x, v in zip(signs, written, strict=True))
            if _close(total, value, unit):
                shown = [
                    f"{'-' if x < 0 else ''}{show(unit, v)}"
                    for x, v in zip(signs, written, strict=True)
                    if x
                ]
                return Derivation("±", tuple(shown))
        return None
    if unit in ("duration:month", "number"):
        for first, last in _MONTH_SPAN.findall(cues):
            span = _MONTH_NUMBERS[last] - _MONTH_NUMBERS[first]
            if span > 0 and value in (span, span + 1):
                return Derivation("meses entre", (first, last))
    if unit not in ("date", "daymonth") and computes:
        for a, b in itertools.combinations(same, 2):
            if a not in own_same and b not in own_same:
                continue  # "30 + 90 = 120" only where the claim writes 30 or 90
            if _close(a + b, value, unit):
                return Derivation("+", (show(unit, a), show(unit, b)))
            if _close(abs(a - b), value, unit):
                hi, lo = max(a, b), min(a, b)
                return Derivation("-", (show(unit, hi), show(unit, lo)))
        if len(same) <= _THREE_TERMS:
            for a, b, c in itertools.combinations(same, 3):
                if not own_same & {a, b, c}:
                    continue
                if _close(a + b + c, value, unit):
                    return Derivation("+", (show(unit, a), show(unit, b), show(unit, c)))
        for a in same:
            for k in factors:
                if _close(a * k, value, unit):
                    return Derivation("×", (show(unit, a), f"{k:g}"))
                if _close(a / k, value, unit):
                    return Derivation("÷", (show(unit, a), f"{k:g}"))
            for part, whole in fractions:  # "8/12 de R$ 2.400"
                if _close(a * part / whole, value, unit):
                    return Derivation("×", (show(unit, a), f"{part:g}/{whole:g}"))
    if unit not in ("date", "daymonth") and computes and CUES_TOTAL.search(cues):
        listed = [
            v
            for k in answer
            if (f := _unit(k)) and f[0] == unit and not _close(f[1], value, unit)
            for v in (f[1],)
        ][:SUBSET]
        for n in range(2, len(listed) + 1):
            for terms in itertools.combinations(listed, n):
                if _close(sum(terms), value, unit):
                    return Derivation("+", tuple(show(unit, t) for t in terms))
    if unit == "money":
        for a in pools.get("money", [])[:POOL]:
            for p in pools.get("percent", [])[:POOL]:
                for result, op in (
                    (a * p / 100, "% de"),
                    (a * (1 - p / 100), "- %"),
                    (a * (1 + p / 100), "+ %"),
                ):
                    if (op == "% de" or computes or weak) and _close(result, value, unit):
                        return Derivation(op, (show("money", a), f"{p:g}%"))
    if unit == "percent" and (computes or weak):  # "paga 60% (desconto de 40%)"
        for p in same:
            if 0 < p < 100 and _close(100 - p, value, unit):
                return Derivation("100% -", (f"{p:g}%",))
    if unit == "percent" and computes:  # "1% ao mês; em 3 meses, 3%"
        for p in same:
            for k in own_numbers:
                if k > 1 and _close(p * k, value, unit):
                    return Derivation("×", (f"{p:g}%", f"{k:g}"))
    if unit == "percent" and computes and ("ponto" in cues or "p.p" in cues):
        for p in same:
            for q in same:
                for k in factors:
                    if p != q and _close(p + k * q, value, unit):
                        return Derivation("+ p.p.", (f"{p:g}%", f"{k:g} × {q:g}%"))
    if unit in ("date", "daymonth"):
        target_day = date.fromordinal(int(value))
        for start in pools.get(unit, [])[:POOL]:
            day = date.fromordinal(int(start))
            for d in pools.get("duration:day", []) + pools.get("duration:workday", []):
                if day + timedelta(days=int(d)) == target_day:
                    return Derivation("+ dias", (show(unit, start), f"{d:g} dias"))
            for months in pools.get("duration:month", []):
                if _add_months(day, int(months)) == target_day:
                    return Derivation("+ meses", (show(unit, start), f"{months:g} meses"))
    if unit.startswith("duration:") or unit == "number":
        days = [date.fromordinal(int(d)) for d in pools.get("date", [])[:POOL]]
        for first, second in itertools.combinations(days, 2):
            early, late = min(first, second), max(first, second)
            between = (late.year - early.year) * 12 + late.month - early.month
            if unit in ("duration:month", "number") and _close(between, value, unit):
                return Derivation("meses entre", (early.isoformat(), late.isoformat()))
            if unit in ("duration:day", "number") and _close((late - early).days, value, unit):
                return Derivation("dias entre", (early.isoformat(), late.isoformat()))
    return None
