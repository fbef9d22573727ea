"""Probes: the strings a context must contain to hold a mention with one of an answer's keys.

The rules judge finds the answer's mentions first (they are few), then reads only the clauses of
the context that contain one of their probes, instead of running every detector over every
chunk. A probe is a necessary condition, never a sufficient one: ``30`` for ``30 dias``, also
``trinta`` (the context may write the number in words), ``8.078`` and ``8078`` and ``consumidor``
for the CDC. A clause a probe misses can only make a mention look unsupported, and the judge
then reads the whole context before saying so (``engine``), so a missing probe costs time,
never a verdict.

Probes are whole tokens of the folded context (:func:`tokens`): words, and runs of digits with
the dots between them (``R$ 1.500,00`` gives ``1.500`` and ``00``; ``15/03/2024`` gives ``15``,
``03`` and ``2024``). :func:`probes` gives, for one key, the tokens any of which the clause must
hold (``1500`` and ``1.500``; ``3`` and ``03``); ``None`` when the key's kind has none (the
whole context is then read).
"""

from __future__ import annotations

import re
from functools import lru_cache

from veredito.worker.rules import gazetteer as gz
from veredito.worker.rules.text import fold

__all__ = ["probes", "tokens"]

_WORD = re.compile(r"[a-z]+")
_TOKEN = re.compile(rb"[a-z]+|\d+(?:\.\d+)*")
# bytes.translate: every byte but ASCII letters, digits and dots becomes a space
_SPACES = bytes(
    c if (chr(c).isascii() and (chr(c).isalnum() or c == 46)) else 32 for c in range(256)
)


def tokens(folded: str) -> frozenset[bytes]:
    """The probe tokens of a folded text, as ASCII bytes (``bytes.translate`` and ``split`` do
    the work in C): words, and numbers with the dots between their digits (``R$ 1.500,00.``
    gives ``r``, ``1.500`` and ``00``)."""
    out = set(folded.encode("ascii", "replace").translate(_SPACES).split())
    odd = [t for t in out if not (t.isalpha() or t.isdigit())]  # "1.500", "art.", "24h", "1o"
    if odd:
        out.difference_update(odd)
        for t in odd:
            out.update(_TOKEN.findall(t))
            if t.count(b".") > 1:  # "05.03.2025": a date's day, month and year apart
                out.update(p for p in t.split(b".") if p)
    # "004.812" and "0030" also hold 4812 and 30 (a probe has no leading zeros but "03")
    padded = [t for t in out if t[:1] == b"0" and len(t) > 1]
    for t in padded:
        out.add(t.replace(b".", b"").lstrip(b"0") or b"0")
        if b"." in t:
            out.add(t.lstrip(b"0.") or b"0")
    return frozenset(out)


_UNITS = {
    2: ("dois", "duas"),
    3: ("tres",),
    4: ("quatro",),
    5: ("cinco",),
    6: ("seis",),
    7: ("sete",),
    8: ("oito",),
    9: ("nove",),
    10: ("dez",),
    11: ("onze",),
    12: ("doze",),
    13: ("treze",),
    14: ("quatorze", "catorze"),
    15: ("quinze",),
    16: ("dezesseis",),
    17: ("dezessete",),
    18: ("dezoito",),
    19: ("dezenove",),
}
_TENS = (
    "",
    "",
    "vinte",
    "trinta",
    "quarenta",
    "cinquenta",
    "sessenta",
    "setenta",
    "oitenta",
    "noventa",
)
_HUNDREDS = (
    (),
    ("cem", "cento"),
    ("duzentos", "duzentas"),
    ("trezentos", "trezentas"),
    ("quatrocentos", "quatrocentas"),
    ("quinhentos", "quinhentas"),
    ("seiscentos", "seiscentas"),
    ("setecentos", "setecentas"),
    ("oitocentos", "oitocentas"),
    ("novecentos", "novecentas"),
)


def _number(value: float) -> list[str]:
    """Ways the context may write ``value`` (before numbers in words become digits): its integer
    part in digits, with thousands dots, and the word that begins it in Portuguese."""
    whole = int(value)
    out = [str(whole)]
    if whole < 10:
        out.append(f"0{whole}")  # "03/10/2024"
    if whole >= 1000:
        out.append(f"{whole:,}".replace(",", "."))
        out.extend(("mil",) if whole < 1_000_000 else ("mi", "milhao", "milhoes", "bi"))
    elif whole >= 100:
        out.extend(_HUNDREDS[whole // 100])
    elif whole >= 20:
        out.append(_TENS[whole // 10])
    elif whole in _UNITS:
        out.extend(_UNITS[whole])
    elif whole == 1:
        out.append("primeiro")  # "primeiro de março"; "um" and "uma" stay words
    return out


def _year(value: str) -> list[str]:
    """A year as the context may write it: ``2021``, or ``21`` (``Lei 14.181/21``)."""
    return [*_number(int(value)), value[-2:], str(int(value[-2:]))]


_DENOMINATORS: dict[float, list[str]] = {}
for _a in range(1, 10):  # the fractions the detectors read: one digit over one or two
    for _b in range(1, 100):
        _DENOMINATORS.setdefault(round(100 * _a / _b, 2), []).append(str(_b))

_FRACTION_WORDS = {50.0: "metade", 33.33: "terco", 66.67: "tercos", 25.0: "quarto", 75.0: "quarto"}


def _first_words(names: tuple[str, ...]) -> list[str]:
    """The first word of each name, folded (``CF/88`` gives ``cf``)."""
    return [m.group(0) for n in names if (m := _WORD.search(fold(n))) is not None]


def _code_surfaces(law: str) -> list[str]:
    out: list[str] = []
    for code, (code_law, acronyms, names) in gz.CODES.items():
        if code_law == law or law == f"code:{code}":
            out += _first_words(acronyms + names)
    return out


@lru_cache(maxsize=32)
def _cities_of(uf: str) -> frozenset[str]:
    return frozenset(
        name.split()[0] for name, ufs in gz.municipalities().items() if uf in ufs and name
    )


@lru_cache(maxsize=4096)
def probes(key: str) -> frozenset[bytes] | None:
    """The probe tokens for one mention key, or ``None``: read everything."""
    kind, _, value = key.partition("|")
    base = kind.partition(":")[0]
    folded: list[str] = []
    if base == "year":
        folded += _year(value)
    elif base in ("duration", "count", "number", "percent", "article"):
        number = float(value)
        if base == "number" and number >= 1_000_000:
            return None  # an identifier-like run ("NIT 123.45678.90-1"): punctuated any way
        folded += _number(number)
        if kind == "duration:month" and number % 12 == 0:
            folded += _number(number / 12)  # "2 anos" is 24 months
            folded += _number(number / 12 * 365)  # ... and "730 dias"
        if kind == "duration:day" and number % 7 == 0:
            folded += _number(number / 7)  # "2 semanas"
        if kind == "duration:day" and number % 365 == 0:
            folded += _number(number / 365) + _number(number / 365 * 12)  # "1 ano", "12 meses"
        elif kind == "number":  # a bare number is also grounded by a duration's value
            folded += _number(number / 12) if number % 12 == 0 else []
            folded += _number(number / 7) if number % 7 == 0 else []
        if base in ("percent", "number"):  # "1/3" and "um terço" are 33.33 (%)
            if round(number, 2) in _FRACTION_WORDS:
                folded.append(_FRACTION_WORDS[round(number, 2)])
            folded += _DENOMINATORS.get(round(number, 2), [])
    elif base == "money":
        cents = float(value)
        folded += _number(cents // 100) if cents >= 100 else [str(int(cents))]
    elif base in ("date", "daymonth", "daymonth_free"):
        folded += _number(int(value.rpartition("-")[2]))
        if base == "date":  # "15 de março", and the year apart: "de 15 de março a ... de 2024"
            folded += _year(value.partition("-")[0])
    elif base == "dayofmonth":
        folded += _number(int(value))
    elif base == "clock":  # "22h", "22 horas", "22h30"
        folded += _number(int(value.partition(":")[0]))
        folded += [f"{int(value.partition(':')[0])}h", f"{value.partition(':')[0]}h"]
    elif base == "monthyear":
        folded += _year(value.partition("-")[0])
    elif base == "law":
        law_kind, _, law_number = value.partition(":")
        if law_kind != "code":
            folded += _number(int(law_number)) if law_number.isdigit() else [law_number]
        folded += _code_surfaces(value)
    elif base == "paragraph":
        folded += ["unico"] if value == "unico" else _number(int(value))
    elif base in ("cnpj", "cpf") and value.isdigit():
        if base == "cnpj":
            root = value[:8]
            dotted = f"{root[:2]}.{root[2:5]}.{root[5:8]}"
        else:
            root = value[:9]
            dotted = f"{root[:3]}.{root[3:6]}.{root[6:9]}"
        folded += [value, root, dotted]  # written plain, without the check digits, or dotted
    elif base == "body":
        entry = gz.BODIES.get(value)
        # an institution the gazetteer lacks has its folded name for id
        folded += _first_words(entry[0] + entry[1] if entry else (value,))
    elif base == "programme":
        folded += _first_words(gz.PROGRAMMES[value][0] + gz.PROGRAMMES[value][1])
    elif base == "city":
        folded += _first_words((value,))
    elif base == "uf":  # the state, or one of its municipalities (a city names its state)
        folded += _first_words((value, gz.UFS[value])) + list(_cities_of(value))
    elif base == "region":
        folded += _first_words(gz.REGIONS[value])
    else:
        return None  # an inciso, an RG, an alphanumeric CNPJ: no token says where they are
    return frozenset(p.encode("ascii", "replace") for p in folded if p)
