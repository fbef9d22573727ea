"""Reading the judge's reply (spec §5).  The reply is untrusted text.

``parse_claims`` and ``parse_faithfulness`` either return a parsed reply with the list of repairs
they made (each counted in ``veredito_judge_output_repairs_total``) or raise
:class:`~veredito.worker.errors.JudgeOutputInvalid` with a message that can be sent back to the
model.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

import json_repair

from veredito.worker.errors import JudgeOutputInvalid
from veredito.worker.verdict import CATEGORIES, Claim, Faithfulness, VerdictLabel

__all__ = [
    "ParsedClaims",
    "extract_json_object",
    "normalise_verdict",
    "parse_claims",
    "parse_faithfulness",
]

_VERDICT_WORDS: dict[str, VerdictLabel] = {
    "grounded": "grounded",
    "fundamentado": "grounded",
    "fundamentada": "grounded",
    "partial": "partial",
    "parcial": "partial",
    "invented": "invented",
    "inventado": "invented",
    "inventada": "invented",
    "contradicted": "contradicted",
    "contradito": "contradicted",
    "contradita": "contradicted",
    "contraditado": "contradicted",
    "contraditada": "contradicted",
    "contraditorio": "contradicted",
    "contraditoria": "contradicted",
}
_NO_CATEGORY = {"", "null", "none"}
_DECODER = json.JSONDecoder()
_NUMERIC = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass
class ParsedClaims:
    claims: list[Claim]
    reported_score: float | None
    reasoning: str | None
    repairs: list[str] = field(default_factory=list)


def _text(value: str, repairs: list[str]) -> str:
    """``value`` with any lone surrogate (a ``\\ud800`` escape cut in half) replaced by U+FFFD:
    no verdict could be written as UTF-8 with one in it."""
    if _SURROGATE.search(value) is None:
        return value
    repairs.append("unicode")
    return _SURROGATE.sub("\ufffd", value)


def _preview(value: object) -> str:
    """A short rendering of an untrusted value for an error message (repr escapes surrogates)."""
    if isinstance(value, str):
        return repr(value if len(value) <= 40 else value[:40] + "...")
    if isinstance(value, dict | list):
        return "an object" if isinstance(value, dict) else "a list"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return "a number"
    return repr(value)


def _fold(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).strip().lower()


def normalise_verdict(value: object) -> VerdictLabel | None:
    if not isinstance(value, str):
        return None
    found = _VERDICT_WORDS.get(value)  # the common case: the exact English word
    return found if found is not None else _VERDICT_WORDS.get(_fold(value))


def _object_end(text: str, start: int) -> int | None:
    """Index just past the ``}`` closing the object opened at ``start``; None if never closed."""
    depth = 0
    in_string = False
    escaped = False
    for i in range(start, len(text)):
        c = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def extract_json_object(text: str, repairs: list[str]) -> dict[str, Any]:
    """The first complete top-level JSON object in ``text``, repaired if its syntax is off."""
    start = text.find("{")
    if start < 0:
        raise JudgeOutputInvalid("the reply contains no JSON object", text)
    try:
        value = _decode_object(text, start, repairs)
    except RecursionError:  # "[[[[..." thousands deep: the decoders recurse
        raise JudgeOutputInvalid("the reply's JSON is nested too deeply", text) from None
    if not isinstance(value, dict):
        raise JudgeOutputInvalid("the reply's JSON is not an object", text)
    return value


def _decode_object(text: str, start: int, repairs: list[str]) -> object:
    end: int | None
    try:  # fast path: the C decoder finds where the first object ends
        value, end = _DECODER.raw_decode(text, start)
    except ValueError:
        value, end = None, _object_end(text, start)
    candidate = text[start:end] if end is not None else text[start:]
    before, after = text[:start], text[end:] if end is not None else ""
    if "```" in before or "```" in after:
        repairs.append("fence")
    elif before.strip() or after.strip():
        repairs.append("prose")
    if value is None:
        try:
            value = json.loads(candidate)
        except ValueError:
            try:
                value = json_repair.repair_json(
                    candidate, return_objects=True, skip_json_loads=True
                )
            except ValueError as exc:  # json_repair's own "nesting exceeds ... recursion depth"
                raise JudgeOutputInvalid(
                    f"the reply's JSON cannot be repaired: {exc}", text
                ) from None
            repairs.append("syntax")
    return value


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        try:
            number = float(value)
        except OverflowError:  # an integer with hundreds of digits
            return None
    elif isinstance(value, str):
        numeral = value.strip().replace(",", ".")
        if _NUMERIC.fullmatch(numeral) is None:  # float() would take "1_0", "inf", "١"
            return None
        number = float(numeral)
    else:
        return None
    return number if math.isfinite(number) else None


def _category(value: object, verdict: VerdictLabel, repairs: list[str]) -> str | None:
    code = value.strip().upper() if isinstance(value, str) else None
    if value is None or (code is not None and code.lower() in _NO_CATEGORY):
        code = None
    if verdict == "grounded":
        if code is not None:
            repairs.append("category")
        return None
    if code in CATEGORIES:
        return code
    repairs.append("category")
    return "GENERICA"


def _chunk_idx(
    value: object, verdict: VerdictLabel, n_chunks: int, repairs: list[str]
) -> int | None:
    if value is None:
        return None
    if verdict in ("invented", "contradicted"):
        repairs.append("chunk_idx")
        return None
    number = _number(value)
    if number is None or not number.is_integer() or not 0 <= number < n_chunks:
        repairs.append("chunk_idx")
        return None
    if not isinstance(value, int):
        repairs.append("chunk_idx")
    return int(number)


def parse_claims(text: str, n_chunks: int) -> ParsedClaims:
    repairs: list[str] = []
    data = extract_json_object(text, repairs)
    raw_claims = data.get("claims")
    if not isinstance(raw_claims, list):
        raise JudgeOutputInvalid('"claims" must be a list', text)
    claims: list[Claim] = []
    for i, item in enumerate(raw_claims):
        if not isinstance(item, dict):
            raise JudgeOutputInvalid(f"claims[{i}] must be an object", text)
        if "text" not in item or "verdict" not in item:
            raise JudgeOutputInvalid(f'claims[{i}] needs "text" and "verdict"', text)
        claim_text = item["text"]
        if not isinstance(claim_text, str):
            raise JudgeOutputInvalid(f"claims[{i}].text must be a string", text)
        verdict = normalise_verdict(item["verdict"])
        if verdict is None:
            raise JudgeOutputInvalid(
                f"claims[{i}].verdict {_preview(item['verdict'])} is not one of "
                "grounded, partial, invented, contradicted",
                text,
            )
        claim_text = _text(claim_text, repairs)
        if not claim_text.strip():
            repairs.append("empty_claim")
            continue
        claims.append(
            Claim(
                text=claim_text.strip(),
                verdict=verdict,
                category=_category(item.get("category"), verdict, repairs),
                chunk_idx=_chunk_idx(item.get("chunk_idx"), verdict, n_chunks, repairs),
                source="llm",
            )
        )
    reasoning = data.get("reasoning")
    return ParsedClaims(
        claims=claims,
        reported_score=_number(data.get("score")),
        reasoning=_text(reasoning, repairs) if isinstance(reasoning, str) else None,
        repairs=repairs,
    )


def parse_faithfulness(text: str) -> tuple[Faithfulness, list[str]]:
    repairs: list[str] = []
    data = extract_json_object(text, repairs)
    score = _number(data.get("score"))
    if score is None or not 0.0 <= score <= 1.0:
        raise JudgeOutputInvalid('"score" must be a number between 0 and 1', text)
    unsupported = data.get("unsupported_claims", [])
    if unsupported is None:
        unsupported = []
    if not isinstance(unsupported, list) or not all(isinstance(u, str) for u in unsupported):
        raise JudgeOutputInvalid('"unsupported_claims" must be a list of strings', text)
    reasoning = data.get("reasoning", "")
    if reasoning is None:
        reasoning = ""
    if not isinstance(reasoning, str):
        raise JudgeOutputInvalid('"reasoning" must be a string', text)
    unsupported = [_text(u, repairs) for u in unsupported]
    reasoning = _text(reasoning, repairs)
    return Faithfulness(score=score, reasoning=reasoning, unsupported_claims=unsupported), repairs
