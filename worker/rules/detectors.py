"""Detectors of the Brazilian facts the claims prompt names (spec §8).

Each detector finds :class:`Mention` s in a text. A mention has one or more *keys*
(``"<kind>|<normalised value>"``): two surface forms of the same fact get the same key
(``Lei 8078/90`` and ``Lei nº 8.078, de 11 de setembro de 1990`` → ``law|lei:8078``; ``CDC``
also carries ``law|lei:8078``; ``R$ 1.500,00`` and ``mil e quinhentos reais`` →
``money|150000``). Comparison with the context (``worker.rules.compare``) works on keys only.

Detectors run on ``digitise``-d text (numbers in words already turned into digits).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal
from functools import cache

from validate_docbr import CNPJ, CPF

from veredito.worker.rules import gazetteer as gz
from veredito.worker.rules.text import fold
from veredito.worker.rules.text import stem as _stem

__all__ = ["DETECTORS", "Detector", "Mention", "detectors_for", "find_mentions"]


@dataclass(frozen=True, slots=True)
class Mention:
    category: str
    text: str
    keys: frozenset[str]
    start: int
    end: int
    contradictable: bool = True  # a different value of the same kind in the context contradicts
    invalid: bool = False  # e.g. a CPF/CNPJ whose check digits are wrong
    extra: frozenset[str] = frozenset()  # coarser keys a context mention also grounds

    @property
    def kinds(self) -> frozenset[str]:
        return frozenset(k.partition("|")[0] for k in self.keys)


def _fold_same_length(text: str) -> str:
    """``fold`` that keeps every character's position (for mapping matches back)."""
    folded = fold(text)
    if len(folded) == len(text):
        return folded
    out = []
    for c in text:
        f = fold(c)
        out.append(f[0] if len(f) == 1 else (f[:1] or c))
    return "".join(out)


def _ci(source: str) -> re.Pattern[str]:
    """A case- and accent-insensitive pattern, to run on ``fold``-ed text.

    ``re.IGNORECASE`` makes Python's matcher about nine times slower on these patterns; folding
    the text once and the pattern's literal letters at import is much cheaper.
    """
    out: list[str] = []
    i = 0
    while i < len(source):
        c = source[i]
        if c == "\\":
            out.append(source[i : i + 2])
            i += 2
        elif source.startswith("(?P<", i):
            j = source.index(">", i)
            out.append(source[i : j + 1])
            i = j + 1
        else:
            out.append(fold(c) if (c.isalpha() or c in "§°") else c)
            i += 1
    return re.compile("".join(out))


# ---------------------------------------------------------------------------- LEI

_LAW_KIND = _ci(
    r"(?P<kind>lei\s+complementar|lei\s+ordin[aá]ria|lei|decreto[\s-]+lei|decreto|"
    r"medida\s+provis[oó]ria|MP|portaria|instru[cç][aã]o\s+normativa|IN|resolu[cç][aã]o|"
    r"emenda\s+constitucional|EC|circular|LC|RN|RDC|resolu[cç][aã]o\s+normativa|s[uú]mula)"
    r"(?P<issuer>(?:\s+(?:conjunta|normativa|RFB|SRF|ANS|ANEEL|ANATEL|Anatel|BCB|Bacen|CMN|CVM|"
    r"ANPD|ANVISA|Anvisa|ANAC|Contran|CONTRAN|MTE|MTP|SRT|SEPRT|CGSN|Confaz|CONFAZ|PGFN|INSS|"
    r"Susep|SUSEP|do\s+\w+|da\s+\w+))*)"
    r"\s*(?:n[º°o]\s*\.?|n\.\s*[º°o]\.?|n\.|núm\.|número)?\s*"
    r"(?P<number>\d{1,3}(?:\.\d{3})+|\d+)(?!\s*(?:%|dias|horas|anos|meses|por\s+100))"
    r"(?:\s*[/-]\s*(?P<year>\d{4}|\d{2})\b"
    r"|,?\s+de\s+\d{1,2}º?\s+de\s+[a-zç]+\s+de\s+(?P<year2>\d{4}))?"
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
_ARTICLE = _ci(
    r"art(?<!\wart)(?:s?\.|igos?)\s*(?P<number>\d{1,3}(?:\.\d{3})+(?!\d)|\d+)(?:\s*[º°o])?(?:-[A-Z]\b)?"
)
_PARAGRAPH = _ci(r"(?:§\s*(?P<number>\d+)\s*[º°o]?|par[aá]grafo\s+(?P<unico>[uú]nico))")
_INCISO = re.compile(r"inciso(?<!\winciso)s?\s+(?P<number>[IVXLC]+)\b")
_INCISO_AFTER = re.compile(r"\d(?:\s*[º°o])?,\s+(?:inc\.\s*)?(?P<after>[IVXLC]+)\b")
_ROMAN = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100}


def _roman(numeral: str) -> int:
    total, last = 0, 0
    for ch in reversed(numeral.upper()):
        value = _ROMAN[ch]
        total = total - value if value < last else total + value
        last = max(last, value)
    return total


def _year(two_or_four: str | None) -> int | None:
    if not two_or_four:
        return None
    year = int(two_or_four)
    if len(two_or_four) == 2:
        year += 1900 if year >= 30 else 2000
    return year


def _trie_pattern(words: Iterable[str], guard: str = "") -> str:
    """One regex for many literal words, factored by common prefixes (Python's ``re`` tries the
    branches of a plain alternation one by one at every position). ``guard`` goes after the
    first character of every word (a lookbehind there keeps the fast scan for first letters)."""
    trie: dict[str, dict] = {}  # type: ignore[type-arg]
    for word in words:
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def build(node: dict[str, dict], top: bool = False) -> str:  # type: ignore[type-arg]
        branches = []
        optional = False
        for ch, child in sorted(node.items()):
            if ch == "":
                optional = True
                continue
            piece = r"[\s-]+" if ch == " " else re.escape(ch)
            branches.append(piece + (guard if top else "") + build(child))
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        if optional:
            return "(?:" + body + ")?"
        return body

    return build(trie, top=True)


@dataclass(frozen=True, slots=True)
class _Alternatives:
    """Many names in one prefix-factored pattern; a match's normalised text gives its id."""

    pattern: re.Pattern[str]
    idents: dict[str, str]

    def matches(self, text: str) -> Iterable[tuple[int, int, str]]:
        for m in self.pattern.finditer(text):
            ident = self.idents.get(re.sub(r"[\s-]+", " ", m.group(0)))
            if ident is not None:
                yield m.start(), m.end(), ident


def _alternatives(pairs: Iterable[tuple[str, str]], boundary: str) -> _Alternatives | None:
    idents = {re.sub(r"[\s-]+", " ", name): ident for name, ident in pairs}
    if not idents:
        return None
    pattern = re.compile(rf"(?:{_trie_pattern(idents, guard=f'(?<!{boundary}.)')})(?!\w)")
    return _Alternatives(pattern, idents)


def _names_pattern(entries: dict[str, tuple[str, ...]]) -> _Alternatives | None:
    return _alternatives(((n, ident) for ident, names in entries.items() for n in names), r"[\w-]")


def _code_keys(code: str) -> frozenset[str]:
    law = gz.CODES[code][0]
    return frozenset({f"law|{law}" if law else f"law|code:{code}"})


def _matches_names(names: _Alternatives | None, folded: str) -> Iterable[tuple[int, int, str]]:
    return names.matches(folded) if names is not None else ()


def detect_laws(text: str, folded: str) -> list[Mention]:
    found: list[Mention] = []
    for m in _LAW_KIND.finditer(folded):
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
        year = _year(m.group("year") or m.group("year2"))
        extra = frozenset({f"lawyear|{kind}:{number}/{year}", f"year|{year}"} if year else ())
        signed = _DATE_WORDS.search(folded, m.start(), m.end()) if year else None
        if signed is not None and signed.group("y"):  # "Lei nº 13.709, de 14 de agosto de 2018"
            day = 1 if signed.group("first") else int(signed.group("d"))
            month = _MONTHS[fold(signed.group("month"))]
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
    for m in _ARTICLE.finditer(folded) if "art" in folded else ():
        key = frozenset({f"article|{m.group('number').replace('.', '')}"})  # art. 1.350
        found.append(Mention("LEI", text[m.start() : m.end()], key, m.start(), m.end()))
        articles.append(m.end())
    for m in _PARAGRAPH.finditer(folded) if ("§" in text or "paragrafo" in folded) else ():
        value = "unico" if m.group("unico") else m.group("number")
        key = frozenset({f"paragraph|{value}"})
        found.append(Mention("LEI", text[m.start() : m.end()], key, m.start(), m.end()))
    incisos = list(_INCISO.finditer(text)) if "inciso" in text else []
    if articles:
        incisos = sorted([*incisos, *_INCISO_AFTER.finditer(text)], key=lambda m: m.start())
    for m in incisos:
        start = m.start() + 1 if m.re is _INCISO_AFTER else m.start()  # after the digit
        if m.re is _INCISO_AFTER and not any(end <= start <= end + 3 for end in articles):
            continue  # "art. 12, V" names inciso V; "12, V" elsewhere does not
        numeral = m.group("number") if m.re is _INCISO else m.group("after")
        key = frozenset({f"inciso|{_roman(numeral)}"})
        found.append(Mention("LEI", text[start : m.end()].lstrip(", "), key, start, m.end()))
    return found


# ---------------------------------------------------------------------------- CNPJ_CPF_RG

_CNPJ = re.compile(
    r"([0-9A-Z](?<![\w./-][0-9A-Z])[0-9A-Z]\.?[0-9A-Z]{3}\.?[0-9A-Z]{3}/?[0-9A-Z]{4}-?\d{2})(?![\w/-])"
)
_CPF_FORMATTED = re.compile(r"(\d(?<![\w./-]\d)\d\d\.\d{3}\.\d{3}-\d{2})(?![\w/-])")
_CPF_CUED = _ci(r"\bCPF\b[^\d\n]{0,20}?(\d{3}\.?\d{3}\.?\d{3}-?\d{2})(?![\w/-])")
_RG = _ci(
    r"\b(?:RG|R\.G\.|carteira de identidade|c[ée]dula de identidade|identidade)\b"
    r"[^\d\n]{0,20}?(\d{1,2}\.?\d{3}\.?\d{3}(?:-?[\dxX])?|\d{5,10}-?[\dxX]?)(?![\w/-])"
)
_cnpj, _cpf = CNPJ(), CPF()


def detect_ids(text: str, folded: str) -> list[Mention]:
    found: list[Mention] = []
    spans: list[tuple[int, int]] = []
    for m in _CNPJ.finditer(text):
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
    cpfs = [(_CPF_FORMATTED, text)] + ([(_CPF_CUED, folded)] if "cpf" in folded else [])
    for pattern, haystack in cpfs:
        for m in pattern.finditer(haystack):
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
    for m in _RG.finditer(folded) if ("rg" in folded or "identidade" in folded) else ():
        plain = re.sub(r"[^\dX]", "", m.group(1).upper())
        found.append(
            Mention("CNPJ_CPF_RG", m.group(1), frozenset({f"rg|{plain}"}), m.start(1), m.end(1))
        )
    return found


# ---------------------------------------------------------------------------- gazetteers


@cache
def _named_patterns() -> tuple[_Alternatives | None, _Alternatives | None]:
    """Codes of law, public bodies and programmes: one acronym pattern, one name pattern."""
    acronyms: list[tuple[str, str]] = []
    names: list[tuple[str, str]] = []
    for code, (_law, code_acronyms, code_names) in gz.CODES.items():
        acronyms += [(a, f"LEI|{code}") for a in code_acronyms]
        names += [(n, f"LEI|{code}") for n in code_names]
    for category, entries in (("ENTIDADE_BR", gz.BODIES), ("POLITICA", gz.PROGRAMMES)):
        for ident, (entry_acronyms, entry_names) in entries.items():
            acronyms += [(a, f"{category}|{ident}") for a in entry_acronyms]
            names += [(n, f"{category}|{ident}") for n in entry_names]
    return _alternatives(acronyms, r"[\w/]"), _alternatives(names, r"[\w-]")


_NAMED_KIND = {"ENTIDADE_BR": "body", "POLITICA": "programme"}
_BODY_UF = re.compile(r"[-/]\s?(" + "|".join(gz.UFS) + r")\b")


def detect_named(text: str, folded: str) -> list[Mention]:
    """Codes of law (CDC, CLT, LGPD ...), public bodies and programmes, by acronym or name."""
    acronyms, names = _named_patterns()
    found = []
    for haystack, alternatives in ((text, acronyms), (folded, names)):
        for start, end, value in _matches_names(alternatives, haystack):
            category, _, ident = value.partition("|")
            if category == "LEI":
                found.append(Mention("LEI", text[start:end], _code_keys(ident), start, end))
            else:
                key = frozenset({f"{_NAMED_KIND[category]}|{ident}"})
                suffix = _BODY_UF.match(text, end)
                extra: frozenset[str] = frozenset()
                if suffix is not None:  # "Procon-PE", "Detran/SP": the body names its state
                    extra = frozenset(
                        {f"uf|{suffix.group(1)}", f"bodyuf|{ident}:{suffix.group(1)}"}
                    )
                    end = suffix.end()
                found.append(
                    Mention(
                        category,
                        text[start:end],
                        key,
                        start,
                        end,
                        contradictable=False,
                        extra=extra,
                    )
                )
    return found


_INSTITUTION_WORD = re.compile(
    r"Universidade|Instituto|Hospital|Tribunal|Secretaria|Ministério|Defensoria|Procuradoria"
    r"|Agência|Conselho|Fundação"
)
_INSTITUTION = re.compile(
    r"(?:U(?<!\wU)niversidade|I(?<!\wI)nstituto|H(?<!\wH)ospital|T(?<!\wT)ribunal\s+Regional"
    r"|S(?<!\wS)ecretaria|M(?<!\wM)inistério|D(?<!\wD)efensoria|P(?<!\wP)rocuradoria"
    r"|A(?<!\wA)gência|C(?<!\wC)onselho|F(?<!\wF)undação)(?:\s+(?:d[aeo]s?\s+)?[A-ZÁÉÍÓÚÂÊÔÃÕÇ][\w-]+)+"
)


def detect_institutions(text: str, folded: str) -> list[Mention]:
    """A named public institution the gazetteer lacks ("Universidade Federal de Pernambuco")."""
    return [
        Mention(
            "ENTIDADE_BR",
            m.group(0),
            frozenset({f"body|{fold(m.group(0))}"}),
            m.start(),
            m.end(),
            contradictable=False,
        )
        for m in (_INSTITUTION.finditer(text) if _INSTITUTION_WORD.search(text) else ())
    ]


# ---------------------------------------------------------------------------- GEOGRAFIA_BR

_UF_CODES = "|".join(gz.UFS)
_UF_AFTER_CITY = re.compile(rf"\s*(?:/|-|–|\()\s*({_UF_CODES})\b\)?")
_UF_CODE = re.compile(rf"(?:{_UF_CODES})\b(?![/-]?\s*\d)")
# what comes before a state's code for it to name the state: "/SP", "(SP", "em SP", "estado de SP"
_UF_CUE = re.compile(r"(?:[/(]\s*|(?<![\w])(?:em|no|na|do|da|de|estado\s+d[eo])\s+)\Z")
_CAPITALISED_RUN = re.compile(
    r"[A-ZÁÉÍÓÚÂÊÔÃÕÇ](?<![\w-].)[\w'’]+(?:-[\w'’]+)*"
    r"(?:\s+(?:d[aeo]s?\s+)?[A-ZÁÉÍÓÚÂÊÔÃÕÇ][\w'’]+(?:-[\w'’]+)*)*"
)
_CITY_CUE = _ci(r"(?:cidade|munic[ií]pio|prefeitura|comarca|capital)\s+(?:de\s+|d[eo]\s+)?$")
_UF_NAMES = {name: code for code, name in gz.UFS.items()}
_BIG_CITIES = frozenset(
    """manaus belem fortaleza recife curitiba florianopolis goiania teresina maceio aracaju
    joinville londrina campinas guarulhos osasco santos sorocaba uberlandia contagem betim niteroi
    petropolis juazeiro cuiaba macapa brasilia maringa cascavel blumenau chapeco pelotas diadema
    maua jundiai piracicaba bauru limeira taubate jacarei barueri carapicuiba itaquaquecetuba
    anapolis cariacica olinda caruaru petrolina mossoro parnamirim sobral caucaia maraba santarem
    ananindeua imperatriz araguaina rondonopolis dourados uberaba ipatinga divinopolis macae
    ilheus itabuna camacari guarapuava criciuma itajai gravatai viamao guaruja sumare hortolandia
    indaiatuba americana aracatuba araraquara botucatu atibaia valinhos vinhedo paulinia cotia
    suzano mogi""".split()
)
_REGION_PATTERN = _names_pattern({k: v for k, v in gz.REGIONS.items()})


def _match_place(
    text: str,
    folded: str,
    offset: int,
    tokens: list[re.Match[str]],
    i: int,
    cities: dict[str, frozenset[str]],
) -> tuple[Mention, int] | None:
    """The longest run of tokens from ``i`` that names a place, and the token after it."""
    first = folded[offset + tokens[i].start() : offset + tokens[i].end()].rstrip(".,;:!?)")
    if first not in _place_first_words():
        return None  # no state or municipality begins with this word
    for j in range(min(len(tokens), i + 7), i, -1):  # no place name has more than 7 words
        start, end = offset + tokens[i].start(), offset + tokens[j - 1].end()
        surface = text[start:end].rstrip(".,;:!?)")
        end = start + len(surface)
        name = folded[start:end]
        if name == "para" and surface != "Pará":
            continue  # "Para" opening a sentence is the preposition
        uf_code = _UF_NAMES.get(name)
        is_city = name in cities
        if not uf_code and not is_city:
            continue
        after = _UF_AFTER_CITY.match(text, end)
        cued = bool(after and after.group(1) in cities.get(name, ()))
        cued = cued or bool(_CITY_CUE.search(fold(text[max(0, start - 30) : start])))
        keys: set[str] = set()
        extra: set[str] = set()
        if uf_code:
            keys.add(f"uf|{uf_code}")
            if is_city:  # "São Paulo", "Rio de Janeiro": the state or its capital
                keys.add(f"city|{name}")
        if is_city and (
            cued
            or (name not in gz.AMBIGUOUS_CITIES and (len(name.split()) > 1 or name in _BIG_CITIES))
        ):
            keys.add(f"city|{name}")
            if cued and after:
                extra.add(f"uf|{after.group(1)}")
            elif len(cities[name]) == 1 and not uf_code:
                extra.add(f"uf|{next(iter(cities[name]))}")
        if not keys:
            continue
        mention_end = after.end() if (after and cued) else end
        mention = Mention(
            "GEOGRAFIA_BR",
            text[start:mention_end],
            frozenset(keys),
            start,
            mention_end,
            extra=frozenset(extra),
        )
        return mention, j
    return None


@cache
def _place_first_words() -> frozenset[str]:
    names = [*gz.municipalities(), *_UF_NAMES]
    return frozenset(name.split()[0] for name in names)


_NON_SPACE = re.compile(r"\S+")


def detect_places(text: str, folded: str) -> list[Mention]:
    cities = gz.municipalities()
    found: list[Mention] = []
    covered: list[tuple[int, int]] = []
    for run in _CAPITALISED_RUN.finditer(text):
        words = run.group(0)
        # longest prefix-anchored sub-run that names a place
        tokens = list(_NON_SPACE.finditer(words))
        i = 0
        while i < len(tokens):
            matched = _match_place(text, folded, run.start(), tokens, i, cities)
            if matched is None:
                i += 1
                continue
            mention, j = matched
            found.append(mention)
            covered.append((mention.start, mention.end))
            i = j
    for m in _UF_CODE.finditer(text):
        if any(a <= m.start() < b for a, b in covered):
            continue
        if not _UF_CUE.search(text[max(0, m.start() - 24) : m.start()]):
            continue
        found.append(
            Mention("GEOGRAFIA_BR", m.group(0), frozenset({f"uf|{m.group(0)}"}), m.start(), m.end())
        )
    for start, end, region in _matches_names(_REGION_PATTERN, folded):
        found.append(
            Mention("GEOGRAFIA_BR", text[start:end], frozenset({f"region|{region}"}), start, end)
        )
    return found


# ---------------------------------------------------------------------------- PRAZO_VALOR

# Every pattern that scans a whole text starts with a literal or a character class: Python's
# matcher then skips to the next candidate position in C, instead of trying the whole pattern at
# every position (a leading lookbehind, ``\b``, group or ``\d+`` defeats that; they are written
# after the first character instead: ``\d(?<![\w.]\d)`` is ``(?<![\w.])\d``).
_MONEY_SIGN = re.compile(
    r"(?:\$(?<=r\$)|\$(?<=us\$)|€)\s*(?P<a>\d(?:\d{0,2}(?:\.\d{3})+|\d*))(?:,(?P<ac>\d{1,4}))?"
)
_MONEY_WORDS = re.compile(
    r"(?P<b>\d(?:\d{0,2}(?:\.\d{3})+|\d*))(?:,(?P<bc>\d{1,2}))?\s+(?:de\s+)?reais\b"
    r"(?:\s+e\s+(?P<cents>\d{1,2})\s+centavos?\b)?"
)
_PERCENT = _ci(r"(?P<n>\d\d*(?:[.,]\d+)?)\s*(?:%|por\s*cento\b|por\s+100\b)")
_MONTHS = {
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
_DATE_NUMERIC = re.compile(r"(?P<d>\d(?<![\d/]\d)\d?)/(?P<m>\d{1,2})/(?P<y>\d{4}|\d{2})(?![\d/])")
# "05.03.2025" and ISO "2025-03-05" (a 4-digit year, so that 1.500.000 stays a number)
_DATE_DOTTED = re.compile(
    r"(?P<d>\d(?<![\w.-]\d)\d?)\.(?P<m>\d{1,2})\.(?P<y>(?:19|20)\d{2})(?![\d.-]?\d)"
)
_DATE_ISO = re.compile(r"(?P<y>(?:19|20)(?<![\w.-]..)\d{2})-(?P<m>\d{2})-(?P<d>\d{2})(?![\d.-]?\d)")
_DATE_WORDS = _ci(
    r"(?:(?P<d>\d{1,2})\s*[º°o]?|(?P<first>primeiro))\s+de\s+(?P<month>janeiro|fevereiro|mar[cç]o|"
    r"abril|maio|junho|julho|agosto|setembro|outubro|novembro|dezembro)(?:\s+de\s+(?P<y>\d{4}))?"
)
_MONTH_YEAR = _ci(
    r"\b(?P<month>janeiro|fevereiro|mar[cç]o|abril|maio|junho|julho|agosto|setembro|outubro|"
    r"novembro|dezembro)\s+de\s+(?P<y>\d{4})"
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
_CLOCK_GATE = re.compile(r"h(?<=\dh)")  # starts with a literal: re skips to each "h"
_CLOCK = re.compile(r"(?<![\w,.])(?P<h>\d{1,2})h(?P<min>\d{2})?(?!\w)")
_DAY_OF_MONTH = re.compile(
    r"dia(?<!\wdia)\s+(?P<d>\d{1,2})(?![\d/.,]|\s*(?:de\s+)?(?:" + "|".join(_MONTHS) + "))"
)
_DURATION = _ci(
    r"(?P<n>\d\d*(?:,\d+)?)\s*(?:\(\s*[\w\s]+\s*\)\s*)?"
    r"(?P<unit>dias?\s+[uú]teis|dia\s+[uú]til|dias\s+corridos|dias?|horas?|m[eê]s|meses|anos?|"
    r"semanas?|minutos?)\b"
)
_FRACTION = re.compile(r"(?P<a>\d(?<![\d/]\d))/(?P<b>\d{1,2})(?![\d/])")
_FRACTION_WORD = _ci(
    r"\b(?P<w>metade|um\s+ter[cç]o|(?:dois|2)\s+ter[cç]os|um\s+quarto|(?:tr[eê]s|3)\s+quartos)\b"
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
_COUNT = re.compile(
    r"(?P<n>\d(?<![\w.,/]\d)\d*(?:,\d+)?)\s+(?P<noun>[a-záéíóúâêôãõç]{3,}(?:\s+m[ií]nimos?)?)\b"
)
_NOT_COUNT_NOUNS = frozenset(
    "de do da dos das por para com sem que ate e ou ao aos mil".split()
    # pronouns, verbs and discourse words after a number are not what it counts
    # ("na Faixa 2 você", "placas com final 7 têm", "por dois motivos")
    + "voce voces ele ela eles elas tem sao e foi foram vai pode podem deve devem esta estao"
    " informando motivos razoes coisas formas maneiras dicas".split()
    + list(_MONTHS)
)
_YEAR = re.compile(r"(?P<y>(?:19|20)(?<![\d.,/]\d\d)\d{2})(?![\d/]|[.,]\d)")
_BIG_NUMBER = re.compile(r"(?P<n>\d(?<![\w.,/$]\d)(?:[\d .-]{2,}\d|\d{2,}))(?![\w/%]|[.,]\d)")


def _cents(integer: str, fraction: str | None) -> str:
    """The amount in centavos, as text: ``150000`` for 1.500,00; ``987.7`` for a tariff of 9,877."""
    value = Decimal(integer.replace(".", "")) * 100
    if fraction:
        value += Decimal(f"0.{fraction}") * 100
    return format(value.normalize(), "f")


def detect_amounts(text: str, folded: str) -> list[Mention]:
    found: list[Mention] = []
    taken = bytearray(len(text))  # 1 where an amount was found

    def add(m: re.Match[str], keys: set[str], extra: Iterable[str] = ()) -> None:
        start, end = m.span()
        found.append(
            Mention(
                "PRAZO_VALOR",
                text[start:end].strip(),
                frozenset(keys),
                start,
                end,
                extra=frozenset(extra),
            )
        )
        taken[start:end] = b"\x01" * (end - start)

    def free(m: re.Match[str]) -> bool:
        return taken.find(1, m.start(), m.end()) < 0

    has_month = any(month in folded for month in _MONTH_STEMS)
    for m in _MONEY_SIGN.finditer(folded) if ("$" in text or "€" in text) else ():
        start = m.start() - (2 if folded.startswith("us$", m.start() - 2) else 1)
        if folded[m.start()] == "€":
            start = m.start()
        found.append(
            Mention(
                "PRAZO_VALOR",
                text[start : m.end()].strip(),
                frozenset({f"money|{_cents(m.group('a'), m.group('ac'))}"}),
                start,
                m.end(),
            )
        )
        taken[start : m.end()] = b"\x01" * (m.end() - start)
    for m in _MONEY_WORDS.finditer(folded) if "reais" in folded else ():
        add(m, {f"money|{_cents(m.group('b'), m.group('bc') or m.group('cents'))}"})
    for m in _PERCENT.finditer(folded) if ("%" in text or "por 100" in folded) else ():
        if free(m):
            value = float(m.group("n").replace(",", "."))
            add(m, {f"percent|{value:g}"})
    for m in _DATE_NUMERIC.finditer(text) if "/" in text else ():
        year, month, day = _year(m.group("y")), int(m.group("m")), int(m.group("d"))
        add(
            m,
            {f"date|{year}-{month:02d}-{day:02d}"},
            {f"daymonth|{month:02d}-{day:02d}", f"monthyear|{year}-{month:02d}", f"year|{year}"},
        )
    other_dates: list[re.Match[str]] = []
    if ".19" in text or ".20" in text:
        other_dates += _DATE_DOTTED.finditer(text)
    if "-0" in text or "-1" in text:
        other_dates += _DATE_ISO.finditer(text)
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
    for m in _DATE_WORDS.finditer(folded) if has_month else ():
        if not free(m):
            continue
        day = 1 if m.group("first") else int(m.group("d"))
        month = _MONTHS[fold(m.group("month"))]
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
    for m in _MONTH_YEAR.finditer(folded) if has_month else ():
        if free(m):
            month = _MONTHS[fold(m.group("month"))]
            add(m, {f"monthyear|{m.group('y')}-{month:02d}"}, {f"year|{m.group('y')}"})
    for m in _CLOCK.finditer(folded) if _CLOCK_GATE.search(folded) else ():  # "22h", "6h30"
        hour, minute = int(m.group("h")), int(m.group("min") or 0)
        if hour <= 24 and minute < 60 and free(m):
            add(m, {f"clock|{hour:02d}:{minute:02d}"})
    for m in _DAY_OF_MONTH.finditer(folded) if "dia " in folded else ():  # "até o dia 20"
        if free(m) and 1 <= int(m.group("d")) <= 31:
            add(m, {f"dayofmonth|{int(m.group('d'))}"})
    for m in _DURATION.finditer(folded):
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
    fractions: Iterable[re.Match[str]] = _FRACTION.finditer(folded) if "/" in text else ()
    if "metade" in folded or "terc" in folded or "quart" in folded:
        fractions = sorted([*fractions, *_FRACTION_WORD.finditer(folded)], key=lambda m: m.start())
    for m in fractions:
        if free(m):
            a, b = (
                (int(m.group("a")), int(m.group("b")))
                if m.re is _FRACTION
                else _FRACTION_WORDS[re.sub(r"\s+", " ", fold(m.group("w")))]
            )
            if b:
                add(m, {f"percent|{round(100 * a / b, 2):g}"})
    for m in _YEAR.finditer(text):
        if free(m):
            add(m, {f"year|{m.group('y')}"})
    for m in _COUNT.finditer(text):
        noun = fold(m.group("noun")).split()[0]
        value = float(m.group("n").replace(",", "."))
        if free(m) and noun not in _NOT_COUNT_NOUNS and value >= 2:
            # the same number anywhere in the context grounds it ("5 vezes" / "5 faltas")
            keys = {f"count:{_stem(noun)}|{value:g}"}
            if value.is_integer():
                keys.add(f"number|{int(value)}")
            add(m, keys)
    for m in _BIG_NUMBER.finditer(text):
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
    return [_with_number(m) for m in found]


def _with_number(mention: Mention) -> Mention:
    """Every amount also grounds a bare number of the same value (``180`` by ``180 dias``)."""
    extra = set(mention.extra)
    for key in mention.keys:
        kind, _, value = key.partition("|")
        if kind == "money":
            extra.add(f"number|{int(Decimal(value)) // 100}")
        elif kind.startswith(("duration", "count", "percent")):
            number = float(value)
            if number.is_integer():
                extra.add(f"number|{int(number)}")
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


DETECTORS: tuple[Callable[[str, str], list[Mention]], ...] = (
    detect_ids,
    detect_laws,
    detect_named,
    detect_institutions,
    detect_places,
    detect_amounts,
)


Detector = Callable[[str, str], list[Mention]]

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
    starts: list[int] = []  # the spans taken so far, disjoint and in order
    ends: list[int] = []
    result: list[Mention] = []
    for detect in detectors:
        for mention in sorted(detect(text, folded), key=_span_order):
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
