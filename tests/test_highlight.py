"""The review page's highlighting: where claims sit in the answer, the excerpt of a cited chunk,
and links built from ids. Work is counted (candidate checks), never timed."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from veredito.web import highlight
from veredito.web.highlight import (
    EXCERPT_CHARS,
    MAX_CANDIDATES,
    ChunkWords,
    Segment,
    claim_spans,
    marked_chunk,
    path_segment,
    segments,
)
from veredito.worker.rules.text import STOPWORDS, fold

SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
_WORD = re.compile(r"\w+", re.UNICODE)


# -- the algorithms as they were (quadratic), the reference ------------------------------------
def _words(text: str) -> list[tuple[str, int, int]]:
    return [(fold(m.group()), m.start(), m.end()) for m in _WORD.finditer(text)]


def reference_spans(answer: str, claims: list[str]) -> dict[int, tuple[int, int]]:
    words = _words(answer)
    folded = [w for w, _, _ in words]
    taken = [False] * len(words)
    spans: dict[int, tuple[int, int]] = {}
    for index, claim in enumerate(claims):
        wanted = [w for w, _, _ in _words(claim)]
        if not wanted:
            continue
        size = len(wanted)
        for start in range(len(folded) - size + 1):
            if folded[start : start + size] == wanted and not any(taken[start : start + size]):
                spans[index] = (words[start][1], words[start + size - 1][2])
                for k in range(start, start + size):
                    taken[k] = True
                break
    return spans


def reference_marked(chunk: str, claim: str) -> list[Segment]:
    shared = {w for w, _, _ in _words(claim) if len(w) > 1 and w not in STOPWORDS}
    out: list[Segment] = []
    at = 0
    for word, start, end in _words(chunk):
        if word in shared:
            if start > at:
                out.append(Segment(chunk[at:start]))
            out.append(Segment(chunk[start:end], marked=True))
            at = end
    if at < len(chunk):
        out.append(Segment(chunk[at:]))
    return out


# -- what every result must be -------------------------------------------------------------------
def occurrences(answer: str, claim: str) -> list[tuple[int, int]]:
    """Every (start, end) word range where the answer has the claim's words."""
    folded = [w for w, _, _ in _words(answer)]
    wanted = [w for w, _, _ in _words(claim)]
    if not wanted:
        return []
    size = len(wanted)
    return [
        (start, start + size)
        for start in range(len(folded) - size + 1)
        if folded[start : start + size] == wanted
    ]


def check_invariants(answer: str, claims: list[str], spans: dict[int, tuple[int, int]]) -> None:
    """Spans lie in the answer on word boundaries, do not overlap, and hold the claim's words."""
    words = _words(answer)
    starts = {s: i for i, (_, s, _) in enumerate(words)}
    ends = {e: i for i, (_, _, e) in enumerate(words)}
    for number, (start, end) in spans.items():
        assert 0 <= start < end <= len(answer)
        assert start in starts and end in ends, "a span cuts through a word"
        assert [w for w, _, _ in _words(answer[start:end])] == [
            w for w, _, _ in _words(claims[number])
        ]
    ordered = sorted(spans.values())
    for (_, end), (start, _) in pairwise(ordered):
        assert end <= start, "spans overlap"


def check_maximal(answer: str, claims: list[str], spans: dict[int, tuple[int, int]]) -> None:
    """With every candidate tried (under the cap), a claim is left out only when each place
    holding its words overlaps a span of an earlier located claim."""
    words = _words(answer)
    index = {s: i for i, (_, s, _) in enumerate(words)}
    for number, claim in enumerate(claims):
        if number in spans:
            continue
        earlier = [
            (index[s], index[s] + len(_words(answer[s:e])))
            for n, (s, e) in spans.items()
            if n < number
        ]
        for start, end in occurrences(answer, claim):
            assert any(s < end and start < e for s, e in earlier), (
                f"claim {number} {claim!r} has free words at word {start}"
            )


# -- strategies ------------------------------------------------------------------------------------
SENTENCES = [
    "O prazo é de 7 dias.",
    "O prazo é de 30 dias.",
    "**O prazo** é de 7 dias!",
    "Procure o Procon.",
    "procure o PROCON",
    "A Ação é válida.",
    "O prazo.",
    "dias",
    "Procon",
]
SEPARATORS = [" ", "\n", "\n- ", " **", "; ", "\n### "]


@st.composite
def answers_and_claims(draw: Any, max_sentences: int = 10) -> tuple[str, list[str]]:
    chosen = draw(st.lists(st.sampled_from(SENTENCES), min_size=0, max_size=max_sentences))
    pieces: list[str] = []
    for sentence in chosen:
        pieces.append(sentence)
        pieces.append(draw(st.sampled_from(SEPARATORS)))
    answer = "".join(pieces)
    words = [m.group() for m in _WORD.finditer(answer)]
    claim = st.one_of(
        st.sampled_from(SENTENCES),
        st.lists(st.sampled_from(["o", "prazo", "é", "de", "7", "dias", "procon", "acao"]),
                 min_size=0, max_size=4).map(" ".join),
    )  # fmt: skip
    if words:  # runs of the answer's own words, so that many claims are found
        claim = st.one_of(
            claim,
            st.tuples(st.integers(0, len(words) - 1), st.integers(1, 6)).map(
                lambda t: " ".join(words[t[0] : t[0] + t[1]])
            ),
        )
    claims = draw(st.lists(claim, max_size=12))
    if draw(st.booleans()):  # in answer order, the usual case
        claims.sort(key=lambda c: min((s for s, _ in occurrences(answer, c)), default=0))
    return answer, claims


@contextmanager
def counted() -> Iterator[dict[str, int]]:
    """Counts the candidate checks (``_fits``) and the dropped (taken) candidates."""
    counts = {"checks": 0, "drops": 0}
    fits, drop = highlight._fits, highlight._Candidates.drop

    def counting_fits(*args: Any) -> bool:
        counts["checks"] += 1
        return fits(*args)

    def counting_drop(self: Any, j: int) -> None:
        counts["drops"] += 1
        drop(self, j)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(highlight, "_fits", counting_fits)
        patch.setattr(highlight._Candidates, "drop", counting_drop)
        yield counts


# -- (a) the new claim_spans against the old one ---------------------------------------------------
@settings(SETTINGS, max_examples=600)
@given(answers_and_claims())
@example(("O prazo é de 7 dias. O prazo é de 7 dias.", ["O prazo é de 7 dias."] * 3))
@example(("A b. C. A b.", ["c", "a b", "a b"]))
@example(("A b c a b", ["c", "a b", "b c"]))
def test_claim_spans_agrees_with_the_quadratic_scan(case: tuple[str, list[str]]) -> None:
    """Asserted, for answers of fewer words than MAX_CANDIDATES (so that no claim can reach the
    cap and every candidate is tried):

    1. always: spans lie in the answer on word boundaries, do not overlap, and each one's folded
       words are its claim's;
    2. always: a claim is left out only if every place holding its words overlaps the span of an
       earlier located claim (the documented rule, as the old scan had it);
    3. when the claims the old scan locates come in answer order (its spans increase with the
       claim's number) the result is exactly the old scan's. Out of order, a repeated sentence
       may be given a different one of its places (the nearest to the previous claim, not the
       first in the answer), so only 1 and 2 hold there.
    """
    answer, claims = case
    assert len(_words(answer)) < MAX_CANDIDATES
    spans = claim_spans(answer, claims)
    check_invariants(answer, claims, spans)
    check_maximal(answer, claims, spans)
    expected = reference_spans(answer, claims)
    in_order = [expected[n] for n in sorted(expected)]
    if in_order == sorted(in_order):
        assert spans == expected
    # the answer cut at the spans gives the answer back
    assert "".join(s.text for s in segments(answer, spans)) == answer


@settings(SETTINGS, max_examples=300)
@given(answers_and_claims(max_sentences=14), st.integers(1, 3))
def test_the_cap_bounds_the_checks_and_keeps_spans_sound(
    case: tuple[str, list[str]], cap: int
) -> None:
    """With a cap of 1-3 places per claim, some claims go unlocated, but no claim costs more than
    ``cap`` checks and every span found is still right."""
    answer, claims = case
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(highlight, "MAX_CANDIDATES", cap)
        with counted() as counts:
            spans = claim_spans(answer, claims)
    check_invariants(answer, claims, spans)
    assert counts["checks"] <= cap * len(claims)


def test_a_claim_out_of_answer_order_is_found_near_the_previous_one() -> None:
    sentences = [f"O prazo é de {i} dias." for i in range(500)]  # one key for all of them
    answer = " ".join(sentences)
    claims = list(sentences)
    for i in range(0, len(claims) - 1, 2):  # each pair swapped
        claims[i], claims[i + 1] = claims[i + 1], claims[i]
    with counted() as counts:
        spans = claim_spans(answer, claims)
    assert spans == reference_spans(answer, claims)
    assert len(spans) == len(claims)
    assert counts["checks"] <= 3 * len(claims)


def test_the_documented_difference_out_of_order() -> None:
    """A repeated sentence claimed after a later one takes its place nearest to that claim."""
    answer = "O prazo é de 7 dias. **O prazo** é de 7 dias! Procure o Procon."
    assert reference_spans(answer, ["procure o procon", "o prazo é de 7 dias"]) == {
        0: (46, 62), 1: (0, 19)
    }  # fmt: skip
    assert claim_spans(answer, ["procure o procon", "o prazo é de 7 dias"]) == {
        0: (46, 62), 1: (23, 44)
    }  # fmt: skip
    # in order, as the old scan: each sentence in turn, markdown and case ignored
    claims = ["O prazo é de 7 dias.", "o prazo é de 7 dias", "Procure o Procon", "prazo"]
    assert claim_spans(answer, claims) == reference_spans(answer, claims) == {
        0: (0, 19), 1: (23, 44), 2: (46, 62)
    }  # fmt: skip


# -- (b) the work, counted -------------------------------------------------------------------------
def in_order(spans: dict[int, tuple[int, int]], count: int) -> bool:
    return list(spans) == list(range(count)) and all(
        spans[i][1] <= spans[i + 1][0] for i in range(count - 1)
    )


@pytest.mark.parametrize(
    "sentence",
    [lambda i: "O prazo é de 7 dias.", lambda i: f"O prazo é de {i} dias."],
    ids=["8000 identical sentences", "8000 sentences sharing their first words"],
)
def test_thousands_of_claims_cost_a_bounded_number_of_checks(sentence: Any) -> None:
    n = 8000
    sentences = [sentence(i) for i in range(n)]
    answer = " ".join(sentences)
    assert len(answer.encode()) <= 256 * 1024
    with counted() as counts:
        spans = claim_spans(answer, sentences)
    assert len(spans) == n and in_order(spans, n)
    assert counts["checks"] <= 2 * n  # one each, in fact
    assert counts["checks"] == n

    with counted() as counts:  # the same claims, last first
        spans = claim_spans(answer, sentences[::-1])
    if len(set(sentences)) == 1:  # identical: each takes the nearest free one, all found
        assert len(spans) == n
        assert counts["checks"] <= 2 * n
        assert counts["drops"] <= 2 * n  # each taken place is skipped once
    # distinct but with one key, reversed: the cap bounds the work (most are not located)
    assert counts["checks"] <= MAX_CANDIDATES * n
    check_invariants(answer, sentences[::-1], spans)


def test_identical_claims_after_a_claim_at_the_end_still_take_each_occurrence() -> None:
    n = 8000
    answer = " ".join(["O prazo é de 7 dias."] * n) + " Procure o Procon."
    claims = ["Procure o Procon."] + ["O prazo é de 7 dias."] * n
    with counted() as counts:
        spans = claim_spans(answer, claims)
    assert len(spans) == n + 1
    assert counts["checks"] <= 2 * len(claims)
    assert counts["drops"] <= 2 * len(claims)


def test_a_claim_with_a_word_the_answer_lacks_costs_no_check() -> None:
    answer = " ".join(["O prazo é de 7 dias."] * 1000)
    with counted() as counts:
        assert claim_spans(answer, ["O prazo é de 8 dias."] * 1000 + ["", "..."]) == {}
    assert counts["checks"] == 0


# -- (c) the cited chunk ---------------------------------------------------------------------------
@settings(SETTINGS, max_examples=300)
@given(
    st.text(st.sampled_from("abcdeáÉ çõ\n.,-_1"), max_size=EXCERPT_CHARS // 10),
    st.text(st.sampled_from("abcdeáÉ çõ\n.,-_1"), max_size=40),
)
def test_a_short_chunk_is_marked_as_before(chunk: str, claim: str) -> None:
    assert marked_chunk(chunk, claim) == reference_marked(chunk, claim)
    assert marked_chunk(ChunkWords(chunk), claim) == reference_marked(chunk, claim)


def big_chunk() -> str:
    filler = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. "
    middle = "O direito de arrependimento vale por sete dias corridos. "
    chunk = filler * 1800 + middle + filler * 1800
    assert len(chunk) >= 200_000
    return chunk


def test_a_large_chunk_gives_a_bounded_excerpt_with_the_shared_words_marked() -> None:
    chunk = big_chunk()
    pieces = marked_chunk(chunk, "O consumidor tem direito de arrependimento em sete dias.")
    text = "".join(p.text for p in pieces)
    assert len(text) <= EXCERPT_CHARS + 2
    assert pieces[0] == Segment("…") and pieces[-1] == Segment("…")
    assert text[1:-1] in chunk  # one piece of the chunk, between the two cuts
    marked = [p.text.lower() for p in pieces if p.marked]
    assert {"direito", "arrependimento", "sete", "dias"} <= set(marked)
    assert "de" not in marked and "o" not in marked  # stopwords and one-letter words are not

    # a claim sharing nothing: the start of the chunk, nothing marked
    pieces = marked_chunk(chunk, "Nada em comum: xyz.")
    assert pieces[0].text.startswith("Lorem") and pieces[-1] == Segment("…")
    assert not any(p.marked for p in pieces)
    assert len("".join(p.text for p in pieces)) <= EXCERPT_CHARS + 1

    # near the end: the last EXCERPT_CHARS characters at most, no cut at the end
    pieces = marked_chunk(chunk + "Fim do contrato.", "contrato")
    assert pieces[0] == Segment("…")
    assert pieces[-2:] == [Segment("contrato", marked=True), Segment(".")]
    assert len("".join(p.text for p in pieces)) <= EXCERPT_CHARS + 1


def test_the_excerpt_is_cut_between_words() -> None:
    chunk = " ".join(f"palavra{i}" for i in range(30_000))  # every word once
    for claim in ("palavra15000", "palavra0", "palavra29999", "palavra100"):
        pieces = marked_chunk(chunk, claim)
        text = "".join(p.text for p in pieces).strip("…")
        start = chunk.index(text)
        end = start + len(text)
        assert len(text) <= EXCERPT_CHARS
        assert start == 0 or not (chunk[start - 1].isalnum() and chunk[start].isalnum())
        assert end == len(chunk) or not (chunk[end - 1].isalnum() and chunk[end].isalnum())
        assert [p.text for p in pieces if p.marked] == [claim]
        assert (pieces[0] == Segment("…")) == (start > 0)
        assert (pieces[-1] == Segment("…")) == (end < len(chunk))


def test_a_large_chunk_is_read_once_for_all_the_claims_citing_it() -> None:
    chunk = big_chunk()
    made = 0

    class Counting(ChunkWords):
        def __init__(self, text: str) -> None:
            nonlocal made
            made += 1
            super().__init__(text)

    highlight._CHUNKS.clear()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(highlight, "ChunkWords", Counting)
        for i in range(2000):
            pieces = marked_chunk(chunk, f"Afirmação {i}: arrependimento em sete dias.")
            assert len("".join(p.text for p in pieces)) <= EXCERPT_CHARS + 2
    assert made == 1
    highlight._CHUNKS.clear()


def test_the_chunk_cache_keeps_a_bounded_amount_of_text() -> None:
    cache = highlight._ChunkCache(budget=100_000)
    chunks = [f"{i} " + "palavra " * 5000 for i in range(10)]  # 40 KB each
    for chunk in chunks:
        cache.get(chunk)
    assert cache._size <= 100_000 and len(cache._entries) == 2
    assert cache.get(chunks[-1]) is cache.get(chunks[-1])
    # an equal string from another page is keyed anew, so that its lookups go by identity
    copy = "".join(list(chunks[-1]))
    assert copy is not chunks[-1]
    found = cache.get(copy)
    assert found.text is copy and next(reversed(cache._entries)) is copy
    assert found.first is cache.get(copy).first and len(cache._entries) == 2


# -- (d) links ---------------------------------------------------------------------------------------
def test_path_segment_encodes_what_would_break_a_path() -> None:
    assert path_segment("a/b?c#d") == "a%2Fb%3Fc%23d"
    assert path_segment("50%") == "50%25"
    assert path_segment("ação 1") == "a%C3%A7%C3%A3o%201"
    assert path_segment("v-00001_x.y~z") == "v-00001_x.y~z"


def test_the_pages_link_ids_as_one_segment_and_isolate_user_text() -> None:
    jinja2 = pytest.importorskip("jinja2")
    from veredito.web.render import _environment

    env = _environment()
    assert isinstance(env, jinja2.Environment)
    hostile = "a/b?c#d\u202e"
    row = {"id": hostile, "app": "app\u202e", "status": "ok", "hallucinated": False,
           "score": 1.0, "categories": [], "query": "Qual o prazo?\u202e",
           "evaluated_at": "2026-11-30T14:05:00Z"}  # fmt: skip
    page = env.get_template("list.html").render(
        rows=[row],
        stats={"answers": 1, "hallucinated": 0, "by_category": {}, "by_verdict": {}},
        form=dict.fromkeys(
            ("app", "category", "verdict", "status", "period", "de", "ate", "confidence"), ""
        )
        | {"app_locked": False, "only": False},
        more=None,
        first_page=True,
    )
    assert 'href="/verdicts/a%2Fb%3Fc%23d%E2%80%AE?app=app%E2%80%AE"' in page
    assert "<bdi>app\u202e</bdi>" in page
    assert 'class="open" dir="auto"' in page

    page = env.get_template("verdict.html").render(
        row=row,
        query="Qual o prazo?\u202e",
        answer=[Segment("Antes \u202e "), Segment("O prazo é de 7 dias.", claim=0)],
        claims=[{"number": 1, "text": "O prazo é de 7 dias.\u202e", "verdict": "grounded",
                 "category": "", "source": "rules", "in_answer": True, "advice": False,
                 "cited": {"index": 0, "segments": [Segment("prazo", marked=True)]}}],
        has_input=True,
        context=["O prazo é de 7 dias."],
        findings=[{"category": "PRAZO_VALOR", "text": "7\u202e", "kind": "derived", "claim": 1,
                   "operation": "soma\u202e", "operands": ["3", "4\u202e"]}],
        error=None,
        judge={"kind": "rules", "model": "m\u202e"},
        reasoning="porque\u202e",
    )  # fmt: skip
    assert f'<code dir="auto">{hostile}</code>' in page
    assert "<title>Resposta \u2068" in page or "<title>Resposta &#x2068;" in page
    assert "<bdi>Antes \u202e </bdi>" in page
    assert '<span class="claim-text" dir="auto">' in page
    assert "(<bdi>soma\u202e</bdi> de <bdi>3</bdi>, <bdi>4\u202e</bdi>)" in page
    assert "(<bdi>m\u202e</bdi>)" in page
    assert page.count('class="claim v-') == 1 + 4  # the claim and the legend, as before
    css = (highlight.__file__.rsplit("/", 1)[0]) + "/static/review.css"
    with open(css, encoding="utf-8") as f:
        style = f.read()
    assert "unicode-bidi: isolate" in style and "unicode-bidi: plaintext" in style
