"""Portuguese text handling for the rules judge: folding, numbers in words, sentences, stems.

- ``fold``: lower case without accents (``Ação`` → ``acao``).
- ``digitise``: numbers written in words become digits (``trinta dias`` → ``30 dias``,
  ``mil e quinhentos reais`` → ``1500 reais``, ``quinze por cento`` → ``15 por 100``) with
  ``text2num``; ``1,5 mil`` → ``1500`` first, so that the two forms agree.
- ``split_sentences``: sentence boundaries that ignore the dots of ``art.``, ``nº``, ``Dr.``,
  ``Ltda.``, ``S.A.``, ``8.078`` and ``R$ 1.500,00``.
- ``content_stems``: Snowball (PyStemmer) stems of the words that carry content.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

import Stemmer
from text_to_num import alpha2digit

__all__ = ["content_stems", "digitise", "fold", "split_sentences", "stem"]


def _slow_fold(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).lower()


# Latin letters fold one character to one character; str.translate does it in C.
_FOLD_TABLE = {
    code: folded
    for code in range(0x41, 0x250)
    if len(folded := _slow_fold(chr(code))) == 1 and folded != chr(code)
}
_FOLD_TABLE |= {ord("º"): "o", ord("ª"): "a"}


# Symbols NFKD would drop or expand, mapped to one ASCII character each so that folding keeps
# every character's position: "§" and "°" become control characters that patterns can name.
SECTION, DEGREE = "\x01", "\x02"
_SYMBOLS = {
    "§": SECTION,
    "°": DEGREE,
    "–": "-",
    "—": "-",
    "\u00a0": " ",
    "’": "'",
    "‘": "'",
    "“": '"',
    "”": '"',
    "…": ".",
    "€": "E",
    "ª": "a",
    "º": "o",
}
_SYMBOL = re.compile("|".join(map(re.escape, _SYMBOLS)))


def _nfkd_ascii(text: str) -> str:
    """The first way :func:`fold` tries: symbols mapped, accents dropped, ASCII kept."""
    plain = _SYMBOL.sub(lambda m: _SYMBOLS[m.group(0)], text)
    return unicodedata.normalize("NFKD", plain).encode("ascii", "ignore").decode().lower()


# Latin-1 characters that fold, alone, to one ASCII character (accented letters, "§", "º"),
# and a non-ASCII byte for the others: a Latin-1 text folds one character at a time (NFKD
# decomposes character by character and only the ASCII base is kept), so ``bytes.translate``
# folds it in C when every character has its one ASCII character. Any other text takes the
# general path.
_LATIN1 = bytes(
    ord(folded) if len(folded := _nfkd_ascii(chr(code))) == 1 else 0xFF for code in range(256)
)


def fold(text: str) -> str:
    """Lower case without accents (``Ação`` → ``acao``), one character for one."""
    if text.isascii():
        return text.lower()
    try:
        quick = text.encode("latin-1").translate(_LATIN1)
    except UnicodeEncodeError:
        return _fold_general(text)
    return quick.decode("ascii") if quick.isascii() else _fold_general(text)


def _fold_general(text: str) -> str:
    """:func:`fold` of any text (the quick path gives the same for the texts it takes)."""
    if text.isascii():
        return text.lower()
    plain = _SYMBOL.sub(lambda m: _SYMBOLS[m.group(0)], text)
    fast = unicodedata.normalize("NFKD", plain).encode("ascii", "ignore").decode().lower()
    if len(fast) == len(text):
        return fast
    folded = plain.translate(_FOLD_TABLE)  # rare letters: one by one
    slow = _slow_fold(folded)
    return slow if len(slow) == len(text) else folded.lower()


_SCALE = {
    "mil": 1_000,
    "milhao": 1_000_000,
    "milhoes": 1_000_000,
    "mi": 1_000_000,
    "bilhao": 1_000_000_000,
    "bilhoes": 1_000_000_000,
    "bi": 1_000_000_000,
}
_SCALED = re.compile(
    r"(\d+(?:[.,]\d+)?)\s+(mil|milh[aã]o|milh[oõ]es|mi|bilh[aã]o|bilh[oõ]es|bi)\b", re.IGNORECASE
)
_NUMBER_WORDS = (
    "um uma dois duas três tres quatro cinco seis sete oito nove dez onze doze treze quatorze "
    "catorze quinze dezesseis dezessete dezoito dezenove vinte trinta quarenta cinquenta sessenta "
    "setenta oitenta noventa cem cento duzent trezent quatrocent quinhent seiscent setecent "
    "oitocent novecent mil"
).split()
# a word that begins like a number (``\b(?:um|uma|dois|...)``), written so that the matcher
# skips in C to the letters that can begin one: the word boundary is checked after the first
# letter
_BY_FIRST: dict[str, list[str]] = {}
for _word in _NUMBER_WORDS:
    _BY_FIRST.setdefault(_word[0], []).append(re.escape(_word[1:]))
_NUMBER_WORD = re.compile(
    "(?:"
    + "|".join(f"{first}(?<!\\w.)(?:{'|'.join(rest)})" for first, rest in _BY_FIRST.items())
    + ")"
)


def _scaled(match: re.Match[str]) -> str:
    number = float(match.group(1).replace(".", "").replace(",", "."))
    scale = _SCALE[fold(match.group(2))]
    value = number * scale
    return str(int(value)) if value.is_integer() else str(value)


_REPEATED = re.compile(r"(\d+(?:[.,]\d+)?)(\s*%)?\s*\(\s*\1\s*(?:%|por\s+100)?\s*\)")
_PER_CENT = re.compile(r"\s*\bpor\s+cento\b", re.IGNORECASE)


def digitise(text: str) -> str:
    """Numbers in words to digits (from 2 up: "um" and "uma" stay words); ``1,5 mil`` to ``1500``;
    ``por cento`` to ``%``."""
    lowered = text.lower()
    if " mil" in lowered or " bi" in lowered or " mi" in lowered:
        text = _SCALED.sub(_scaled, text)
    if "cento" in lowered:
        text = _PER_CENT.sub("%", text)
    if _NUMBER_WORD.search(lowered) is not None:
        text = str(alpha2digit(text, "pt", threshold=1))
    if "(" in text:
        text = _REPEATED.sub(r"\1\2", text)  # "7 (sete)" became "7 (7)": keep one
    return text


_ABBREVIATIONS = (
    "art|arts|inc|incs|par|al|n|nº|no|nos|núm|num|pág|pag|p|pp|cap|fl|fls|sr|sra|srs|dr|dra|drs|"
    "prof|profa|ltda|cia|s\\.a|s/a|me|epp|eireli|av|r|tel|cel|ex|exs|etc|obs|aprox|min|máx|max|"
    "méd|med|jan|fev|mar|abr|mai|jun|jul|ago|set|out|nov|dez|vol|ed|e\\.g|i\\.e|c/c|v|vs|id|ss"
)
_BOUNDARY = re.compile(r"(?<=[.!?…])[\"')\]]*\s+(?=[\"'(\[]?[A-ZÁÉÍÓÚÂÊÔÃÕÇ0-9])")
_ENDS_WITH_ABBREVIATION = re.compile(rf"(?:^|[\s(])(?:{_ABBREVIATIONS})\.$", re.IGNORECASE)
_ENDS_WITH_INITIAL = re.compile(r"(?:^|\s)[A-Z]\.$")


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``; abbreviations and numbers with dots do not end one."""
    text = text.strip()
    if not text:
        return []
    pieces: list[str] = []
    start = 0
    for match in _BOUNDARY.finditer(text):
        candidate = text[start : match.start()].rstrip()
        tail = max(0, len(candidate) - 12)  # no abbreviation is longer; "^" still means the start
        if _ENDS_WITH_ABBREVIATION.search(candidate, tail) or _ENDS_WITH_INITIAL.search(
            candidate, tail
        ):
            continue
        pieces.append(candidate)
        start = match.end()
    pieces.append(text[start:].strip())
    result: list[str] = []
    for piece in pieces:
        result.extend(p.strip() for p in re.split(r"\n\s*\n|\n\s*[-•*]\s+", piece) if p.strip())
    return result


STOPWORDS = frozenset(
    fold(w)
    for w in (
        "a o as os um uma uns umas de do da dos das no na nos nas ao aos à às em por pelo pela "
        "pelos pelas para pra com sem sob sobre entre até após ante contra desde e ou mas nem que "
        "se como quando onde porque pois já não sim também só apenas mais menos muito muita "
        "muitos muitas pouco todo toda todos todas outro outra outros outras mesmo mesma esse "
        "essa esses essas este esta estes estas isso isto aquele aquela aqueles aquelas aquilo "
        "seu sua seus suas meu minha meus minhas nosso nossa nossos nossas lhe lhes ele ela eles "
        "elas você vocês voce voces eu nós nos me te se si ser é são foi foram era eram será serão "
        "seria sendo sido estar está estão estava esteve ter tem têm tinha teve terá haver há "
        "houve "
        "havia pode podem poderá deve devem fazer faz feito vai vão ir qual quais quem cujo cuja "
        "assim então ainda bem caso cada qualquer quaisquer alguns algumas algum alguma nenhum "
        "nenhuma sim olá oi claro segundo conforme acordo forma vez vezes lá aqui aí dessa desse "
        "deste desta disso nesse nessa neste nesta nisso daquele dela dele delas deles num numa"
    ).split()
)

_WORD = re.compile(r"[a-z0-9]+")
_stemmer = Stemmer.Stemmer("portuguese")


@lru_cache(maxsize=8192)  # content_stems memoises in front of it
def stem(word: str) -> str:
    """The Snowball stem of one folded word."""
    return str(_stemmer.stemWord(word))


class _Content(dict[str, str]):
    """Folded word -> its stem, or "" for a word that carries no content; bounded (cleared when
    full: 50,000 words is more than the vocabulary of a RAG app's documents, about 6 MB). A
    word seen before is looked up in C (``map``); a new one comes through ``__missing__``."""

    def __missing__(self, word: str) -> str:
        if word.isdigit():  # numbers are their own stem; not memoised (they are too many)
            return word if len(word) > 1 else ""
        found = "" if len(word) < 2 or word in STOPWORDS else stem(word)
        if len(self) >= _CONTENT_MAX:
            self.clear()
        self[word] = found
        return found


_CONTENT = _Content()
_CONTENT_MAX = 50_000


def content_stems(text: str) -> list[str]:
    """Stems of the content words of ``text`` (folded; stop words and 1-letter words dropped)."""
    return list(filter(None, map(_CONTENT.__getitem__, _WORD.findall(fold(text)))))
