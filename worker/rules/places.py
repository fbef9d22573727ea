"""GEOGRAFIA_BR: states, municipalities and regions.

- **States** by name (``Pernambuco``, ``São Paulo``) ``uf|PE``, and by code where a cue says
  it is one (``/SP``, ``(SP``, ``em SP``, ``estado de SP``).
- **Municipalities** (``data/municipios.tsv``, IBGE's 5,570) ``city|<folded name>``: names of
  several words always (``Belo Horizonte``), single words only for capitals and large cities,
  and names that are also common words (``Natal``, ``Vitória``, ``Salvador``) only with a cue
  (``Natal/RN``, ``cidade de Natal``). A city also grounds its state (``uf|``) when only one
  state has a municipality of that name, or when the cue names it.
- **Regions** (``Nordeste``, ``região Sul``) ``region|<id>``.

In the judge, another city or state contradicts; a state the context names only through a body
or court (``Procon-PE``, ``TJRJ``, ``procon.sp.gov.br``) grounds it (:func:`implied_ufs`), and
so does a capital where the context speaks of "a capital" (:func:`implied_place`).
"""

from __future__ import annotations

import re
from functools import cache

from veredito.worker.rules import gazetteer as gz
from veredito.worker.rules import scan as sc
from veredito.worker.rules.mention import (
    Alternatives,
    ContextView,
    Mention,
    alternatives_source,
    ci,
)
from veredito.worker.rules.text import fold

__all__ = ["PATTERNS", "detect_places", "implied_place", "implied_ufs"]

_UF_CODES = "|".join(gz.UFS)
UF_AFTER_CITY = sc.pattern(
    "UF_AFTER_CITY", rf"\s*(?:/|-|–|\()\s*({_UF_CODES})\b\)?", folded=False, scanned=False
)
UF_CODE = sc.pattern("UF_CODE", rf"(?:{_UF_CODES})\b(?![/-]?\s*\d)", folded=False)
# what comes before a state's code for it to name the state: "/SP", "(SP", "em SP", "estado de SP"
UF_CUE = sc.pattern(
    "UF_CUE",
    r"(?:[/(]\s*|(?<![\w])(?:em|no|na|do|da|de|estado\s+d[eo])\s+)\Z",
    folded=False,
    scanned=False,
)
CAPITALISED_RUN = sc.pattern(
    "CAPITALISED_RUN",
    r"[A-ZÁÉÍÓÚÂÊÔÃÕÇ](?<![\w-].)[\w'’]+(?:-[\w'’]+)*"
    r"(?:\s+(?:d[aeo]s?\s+)?[A-ZÁÉÍÓÚÂÊÔÃÕÇ][\w'’]+(?:-[\w'’]+)*)*",
    folded=False,
)
CITY_CUE = sc.pattern(
    "CITY_CUE",
    ci(r"(?:cidade|munic[ií]pio|prefeitura|comarca|capital)\s+(?:de\s+|d[eo]\s+)?$"),
    folded=True,
    scanned=False,
)
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
_REGION_SOURCE, _REGION_IDS = alternatives_source(
    ((n, ident) for ident, names in gz.REGIONS.items() for n in names), r"[\w-]"
)
REGION = sc.pattern("REGION", _REGION_SOURCE, folded=True)
_REGIONS = Alternatives(REGION, _REGION_IDS)


def _match_place(
    text: str,
    folded: str,
    offset: int,
    tokens: list[re.Match[str]],
    i: int,
    cities: dict[str, frozenset[str]],
) -> tuple[Mention, int] | None:
    """The longest run of tokens from ``i`` that names a place, and the token after it."""
    uf_after_city, city_cue = UF_AFTER_CITY.regex, CITY_CUE.regex
    assert uf_after_city is not None and city_cue is not None
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
        after = uf_after_city.match(text, end)
        cued = bool(after and after.group(1) in cities.get(name, ()))
        cued = cued or bool(city_cue.search(fold(text[max(0, start - 30) : start])))
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


NON_SPACE = sc.pattern("NON_SPACE", r"\S+", folded=False, scanned=False)  # a run's words


def detect_places(text: str, folded: str, scan: sc.Scan | None = None) -> list[Mention]:
    scan = scan or sc.scan(text, folded)
    uf_cue, non_space = UF_CUE.regex, NON_SPACE.regex
    assert uf_cue is not None and non_space is not None
    cities = gz.municipalities()
    found: list[Mention] = []
    covered: list[tuple[int, int]] = []
    for run in scan.finditer(CAPITALISED_RUN):
        words = run.group(0)
        # longest prefix-anchored sub-run that names a place
        tokens = list(non_space.finditer(words))
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
    for m in scan.finditer(UF_CODE):
        if any(a <= m.start() < b for a, b in covered):
            continue
        if not uf_cue.search(text[max(0, m.start() - 24) : m.start()]):
            continue
        found.append(
            Mention("GEOGRAFIA_BR", m.group(0), frozenset({f"uf|{m.group(0)}"}), m.start(), m.end())
        )
    for start, end, region in _REGIONS.matches(scan):
        found.append(
            Mention("GEOGRAFIA_BR", text[start:end], frozenset({f"region|{region}"}), start, end)
        )
    return found


PATTERNS = (CAPITALISED_RUN, UF_CODE, REGION)

# ---------------------------------------------------------------------------- in the judge

# read only when the judge asks (a context's states implied by its bodies and courts)
UF_SUFFIX = sc.pattern(
    "UF_SUFFIX",
    r"\b(?:TJ|TRE|TRT|TRF|MP|DPE)-?([A-Z]{2})\b|\b[A-Z][A-Za-z]{1,12}[-/]([A-Z]{2})\b",
    folded=False,
    scanned=False,
)
UF_DOMAIN = sc.pattern("UF_DOMAIN", r"\.([a-z]{2})\.gov\.br\b", folded=False, scanned=False)
_UF_SET = frozenset(gz.UFS)
# a state's capital, said as "a capital" or through its court ("Comarca da Capital do TJRJ")
_CAPITALS = {
    "rio branco": "AC",
    "maceio": "AL",
    "macapa": "AP",
    "manaus": "AM",
    "salvador": "BA",
    "fortaleza": "CE",
    "brasilia": "DF",
    "vitoria": "ES",
    "goiania": "GO",
    "sao luis": "MA",
    "cuiaba": "MT",
    "campo grande": "MS",
    "belo horizonte": "MG",
    "belem": "PA",
    "joao pessoa": "PB",
    "curitiba": "PR",
    "recife": "PE",
    "teresina": "PI",
    "rio de janeiro": "RJ",
    "natal": "RN",
    "porto alegre": "RS",
    "porto velho": "RO",
    "boa vista": "RR",
    "florianopolis": "SC",
    "sao paulo": "SP",
    "aracaju": "SE",
    "palmas": "TO",
}


def implied_ufs(text: str) -> frozenset[str]:
    """States ``text`` names only through a body or a court: "Procon-PE", "TJRJ",
    "Detran/SP", "procon.sp.gov.br"."""
    suffix, domain = UF_SUFFIX.regex, UF_DOMAIN.regex
    assert suffix is not None and domain is not None
    found = {m.group(1) or m.group(2) for m in suffix.finditer(text)}
    found |= {m.group(1).upper() for m in domain.finditer(text)}
    return frozenset(found & _UF_SET)


def implied_place(mention: Mention, ctx: ContextView) -> bool:
    """A state the context implies (:attr:`ContextView.implied_ufs`), or its capital when the
    context speaks of "a capital"."""
    for key in mention.keys:
        kind, _, value = key.partition("|")
        if kind == "uf" and value in ctx.implied_ufs:
            return True
        if kind == "city" and _CAPITALS.get(value) in ctx.implied_ufs and "capital" in ctx.folded:
            return True
    return False
