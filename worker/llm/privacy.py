"""Privacy before the judge (``VEREDITO_PSEUDONYMISE=on``): personal data never leaves the machine.

Before a prompt is rendered, CPFs, CNPJs, RGs, e-mail addresses, telephone numbers and CEPs in
the query, the context and the answer are replaced by stable placeholders, numbered per kind in
order of appearance: ``[CPF_1]``, ``[EMAIL_2]``. The same value (by its digits, or an address
whatever its case) gets the same placeholder in all three texts; a value that differs by one digit
gets another. So the judge can still tell an ID the answer copied from one it changed.

Back on this machine the rules check the real values (check digits, presence in the context or
the query) and report a changed or absent ID as a rule finding whether or not the judge's claims
mention it. The claims, the reasoning and the findings are mapped back to the real text, or stay
masked, together with the stored input, with ``VEREDITO_REDACT_STORED=on`` (the pipeline then
masks every text of the verdict, whichever judge wrote it: :func:`redact_verdict`).

aferiq-eval redacts on the client to a bare ``[CPF]``: every CPF becomes the same token, and a
judge can no longer see that the answer's CPF is not the context's. See ``docs/privacy.md``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from validate_docbr import CPF

from veredito.producer.triple import Triple
from veredito.worker.judges.base import Judge, Judgement
from veredito.worker.rules.detectors import Mention, detect_ids
from veredito.worker.verdict import Faithfulness, JudgeInfo, RuleFinding, TripleInput, Verdict

__all__ = ["Masked", "PseudonymisingJudge", "find_personal", "mask_triple", "redact_verdict"]

_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)+(?![\w-])")
_PHONE = re.compile(
    r"(?<![\w+])(?:\+?55[\s.-]?)?(?:\(\d{2}\)\s?|\d{2}[\s.-])?(?:9\s?\d{4}|\d{4})[\s.-]?\d{4}(?![\w])"
)
_CEP = re.compile(r"(?<![\w.-])(?:CEP[:\s]*)?(\d{5}-\d{3}|\d{2}\.\d{3}-\d{3})(?![\w-])", re.I)
_CEP_CUED = re.compile(r"\bCEP[:\s]*(\d{8})(?!\d)", re.I)
_BARE_DIGITS = re.compile(r"(?<![\w./-])(\d{11}|\d{14})(?![\w/-])")
_YEARS = re.compile(r"(?:19|20)\d\d(?:19|20)\d\d")
_PLACEHOLDER = re.compile(r"\[(CPF|CNPJ|RG|EMAIL|TELEFONE|CEP)_(\d+)\]")
_cpf = CPF()


@dataclass(frozen=True, slots=True)
class Found:
    kind: str  # CPF, CNPJ, RG, EMAIL, TELEFONE, CEP
    value: str  # as written
    key: str  # what makes two spellings the same value
    start: int
    end: int


def _id_kind(mention: Mention) -> tuple[str, str]:
    key = next(iter(mention.keys))
    kind, _, digits = key.partition("|")
    return kind.upper(), digits


def find_personal(text: str) -> list[Found]:
    """Every personal value in ``text``, without overlaps, in order."""
    found: list[Found] = []
    for mention in detect_ids(text, text.casefold()):
        kind, digits = _id_kind(mention)
        found.append(Found(kind, mention.text, f"{kind}|{digits}", mention.start, mention.end))
    for m in _EMAIL.finditer(text):
        found.append(Found("EMAIL", m.group(), f"EMAIL|{m.group().casefold()}", m.start(), m.end()))
    for pattern in (_CEP, _CEP_CUED):
        for m in pattern.finditer(text):
            digits = re.sub(r"\D", "", m.group(1))
            found.append(Found("CEP", m.group(1), f"CEP|{digits}", m.start(1), m.end(1)))
    for m in _BARE_DIGITS.finditer(text):  # unformatted CPFs and CNPJs with no cue
        digits = m.group(1)
        if len(digits) == 14:
            kind = "CNPJ"
        elif _cpf.validate(digits) or not re.fullmatch(r"\d{2}9\d{8}", digits):
            kind = "CPF"
        else:
            kind = "TELEFONE"  # DDD + a mobile number, and not a valid CPF
        found.append(Found(kind, digits, f"{kind}|{digits}", m.start(1), m.end(1)))
    for m in _PHONE.finditer(text):
        digits = re.sub(r"\D", "", m.group())
        if len(digits) < 8 or _YEARS.fullmatch(digits):
            continue  # "2020-2024" is a span of years, not a telephone
        national = digits[2:] if digits.startswith("55") and len(digits) > 11 else digits
        found.append(Found("TELEFONE", m.group(), f"TELEFONE|{national}", m.start(), m.end()))
    found.sort(key=lambda f: (f.start, -(f.end - f.start)))
    kept: list[Found] = []
    for item in found:  # first (and longest) wins where two overlap
        if kept and item.start < kept[-1].end:
            continue
        kept.append(item)
    return kept


@dataclass
class Masked:
    """A triple with its personal values replaced, and the way back."""

    triple: Triple
    placeholders: dict[str, str] = field(default_factory=dict)  # key -> placeholder
    originals: dict[str, str] = field(default_factory=dict)  # placeholder -> first spelling
    counters: dict[str, int] = field(default_factory=dict)

    def mask(self, text: str) -> str:
        """``text`` with every personal value replaced; a value seen before keeps its
        placeholder, a new one gets the next number of its kind."""
        out, at = [], 0
        for item in find_personal(text):
            placeholder = self.placeholders.get(item.key)
            if placeholder is None:
                self.counters[item.kind] = self.counters.get(item.kind, 0) + 1
                placeholder = f"[{item.kind}_{self.counters[item.kind]}]"
                self.placeholders[item.key] = placeholder
                self.originals[placeholder] = item.value
            out += [text[at : item.start], placeholder]
            at = item.end
        out.append(text[at:])
        return "".join(out)

    def unmask(self, text: str) -> str:
        return _PLACEHOLDER.sub(lambda m: self.originals.get(m.group(), m.group()), text)


def mask_triple(triple: Triple) -> Masked:
    masked = Masked(triple)
    # the context first: its values get the low numbers, and the answer's copies reuse them
    context = tuple(masked.mask(chunk) for chunk in triple.context)
    query = masked.mask(triple.query)
    answer = masked.mask(triple.answer)
    masked.triple = Triple(triple.id, query, context, answer, dict(triple.metadata))
    return masked


def redact_verdict(verdict: Verdict, triple: Triple) -> None:
    """``VEREDITO_REDACT_STORED=on``: every text of the verdict masked as the judge saw it."""
    masked = mask_triple(triple)
    m = masked.mask
    verdict.claims = [c.model_copy(update={"text": m(c.text)}) for c in verdict.claims]
    verdict.rule_findings = [
        f.model_copy(update={"text": m(f.text), "operands": None if f.operands is None
                             else [m(o) for o in f.operands]})
        for f in verdict.rule_findings
    ]  # fmt: skip
    if verdict.reasoning is not None:
        verdict.reasoning = m(verdict.reasoning)
    if verdict.faithfulness is not None:
        f = verdict.faithfulness
        verdict.faithfulness = Faithfulness(
            score=f.score,
            reasoning=m(f.reasoning),
            unsupported_claims=[m(u) for u in f.unsupported_claims],
        )
    if verdict.error is not None:
        verdict.error = verdict.error.model_copy(
            update={"message": m(verdict.error.message), "raw_reply": None
                    if verdict.error.raw_reply is None else m(verdict.error.raw_reply)}
        )  # fmt: skip
    if verdict.input is not None:
        t = masked.triple
        verdict.input = TripleInput(query=t.query, context=list(t.context), answer=t.answer)


def _keys(texts: Iterable[str]) -> set[str]:
    return {f.key for text in texts for f in find_personal(text)}


class PseudonymisingJudge:
    """Wraps the LLM judge: it sees placeholders only; the verdict gets the real text back."""

    def __init__(self, inner: Judge) -> None:
        self._inner = inner

    @property
    def info(self) -> JudgeInfo:
        return self._inner.info

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def judge(self, triple: Triple) -> Judgement:
        masked = mask_triple(triple)
        judgement = await self._inner.judge(masked.triple)
        back = masked.unmask
        if judgement.claims is not None:
            judgement.claims = [
                c.model_copy(update={"text": back(c.text)}) for c in judgement.claims
            ]
        if judgement.reasoning is not None:
            judgement.reasoning = back(judgement.reasoning)
        if judgement.faithfulness is not None:
            f = judgement.faithfulness
            judgement.faithfulness = Faithfulness(
                score=f.score,
                reasoning=back(f.reasoning),
                unsupported_claims=[back(u) for u in f.unsupported_claims],
            )
        judgement.rule_findings = [
            f.model_copy(update={"text": back(f.text)}) for f in judgement.rule_findings
        ]
        judgement.rule_findings += self._id_findings(triple, masked, judgement)
        return judgement

    def _id_findings(
        self, triple: Triple, masked: Masked, judgement: Judgement
    ) -> list[RuleFinding]:
        """The answer's CPFs, CNPJs and RGs checked on the real values: wrong check digits, or
        not in the context nor the query. Pointed at the claim that carries its placeholder."""
        given = _keys([*triple.context, triple.query])
        claims = judgement.claims or []
        findings: list[RuleFinding] = []
        for mention in detect_ids(triple.answer, triple.answer.casefold()):
            kind, digits = _id_kind(mention)
            key = f"{kind}|{digits}"
            placeholder = masked.placeholders.get(key, mention.text)
            idx = next((i for i, c in enumerate(claims) if placeholder in c.text
                        or mention.text in c.text), None)  # fmt: skip
            shown = mention.text
            if mention.invalid:
                findings.append(RuleFinding(category="CNPJ_CPF_RG", text=shown,
                                            kind="invalid_check_digit", claim_idx=idx))  # fmt: skip
            elif key not in given:
                findings.append(RuleFinding(category="CNPJ_CPF_RG", text=shown,
                                            kind="absent_from_context", claim_idx=idx))  # fmt: skip
        return findings
