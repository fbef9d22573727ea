"""The rules judge's two engines (issue 21): the compiled scan and pure ``re`` say the same.

- Every verdict, check and mention on every labelled set and 2,000 corpus triples matches the
  fingerprint taken before the compiled scan existed (``tests/data/rules_fingerprint.json``,
  written by ``bench/rules_fingerprint.py``), for each engine.
- The compiled scan never loses a start: wherever a pattern matches, the scan said it may
  (on the corpus, every position; on generated text, as a property), and each detector finds
  the same mentions, in the same order, from either engine.
- The engine is chosen by ``VEREDITO_RULES_ENGINE``; without the ``hyperscan`` package the
  judge runs on ``re`` and says the same.
- The names other modules import still import; every detector pattern is registered with the
  scan, the one place that knows them all.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bench.corpus import triples
from bench.rules_fingerprint import FINGERPRINT, fingerprint, record_views
from veredito.worker.rules import scan as sc
from veredito.worker.rules.detectors import DETECTORS
from veredito.worker.rules.mention import Mention, fold_same_length
from veredito.worker.rules.text import _fold_general, digitise, fold

ROOT = Path(__file__).resolve().parent.parent
try:
    import hyperscan  # noqa: F401  (the fast extra)
except ImportError:
    HAS_HYPERSCAN = False
else:
    HAS_HYPERSCAN = True
needs_hyperscan = pytest.mark.skipif(not HAS_HYPERSCAN, reason="the fast extra is not installed")
ENGINES = ["re", pytest.param("hyperscan", marks=needs_hyperscan)]
SETTINGS = settings(
    deadline=None,
    max_examples=300,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.fixture
def engine(request: pytest.FixtureRequest) -> Iterator[str]:
    name = sc.use_engine(request.param)
    assert name == request.param
    yield name
    sc.use_engine(None)


@pytest.fixture
def hyperscan_engine() -> Iterator[None]:
    if not HAS_HYPERSCAN:
        pytest.skip("the fast extra is not installed")
    assert sc.use_engine("hyperscan") == "hyperscan"
    yield
    sc.use_engine(None)


# ------------------------------------------------------------------------------- the verdicts


@pytest.mark.parametrize("engine", ENGINES, indirect=True)
def test_every_verdict_is_the_one_recorded_before_the_compiled_scan(engine: str) -> None:
    expected = json.loads(FINGERPRINT.read_text("utf-8"))
    found = fingerprint()
    changed = [
        f"{name}: {view}"
        for name in expected
        for view in expected[name]
        if found.get(name, {}).get(view) != expected[name][view]
    ]
    assert not changed, (
        f"the {engine} engine changed {changed}: `bench/rules_fingerprint.py --dump DIR` before "
        "and after shows which records; after a deliberate change, `--write` records it"
    )


# ------------------------------------------------------------------------- the compiled scan


def _sample_texts() -> list[str]:
    texts: list[str] = []
    for row in triples(40, seed=21):
        texts += [*row["context"], row["answer"]]
    for path in sorted((ROOT / "tests" / "data").glob("*.jsonl")):
        for line in path.read_text("utf-8").splitlines()[:6]:
            row = json.loads(line)
            texts += [*row["context"], row["answer"]]
    return [digitise(t) for t in texts]


def _missed_starts(text: str) -> list[tuple[str, int, str]]:
    """(pattern, position, text there) of every match the compiled scan did not announce."""
    folded = fold_same_length(text)
    scan = sc.scan(text, folded)
    missed = []
    for p in sc.patterns():
        regex = p.resolve()
        candidates = scan.candidates(p)
        if regex is None or candidates is None:
            continue
        haystack = folded if p.folded else text
        for at in range(len(haystack)):
            if at not in candidates and regex.match(haystack, at) is not None:
                missed.append((p.name, at, haystack[max(0, at - 10) : at + 20]))
    return missed


def test_the_scan_announces_every_position_where_a_pattern_matches(hyperscan_engine: None) -> None:
    texts = _sample_texts()
    assert len(texts) > 200
    missed = [m for t in texts for m in _missed_starts(t)]
    assert not missed, missed[:10]
    held = [p for p in sc.patterns() if sc.scan("", "").candidates(p) is not None]
    assert len(held) >= 25  # the compiled scan holds nearly every pattern; re reads the rest


WORDS = [
    "Lei", "lei", "nº", "n.", "8.078/1990", "8.078/90", "13.709", ", de 14 de agosto de 2018",
    "LC", "123/06", "Decreto-Lei", "IN RFB", "2.178/24", "MP", "art.", "arts.", "49", "§", "2º",
    "parágrafo único", "inciso", "IV", "12, V", "CPF", "529.982.247-25", "52998224725", "CNPJ",
    "11.222.333/0001-81", "12.ABC.345/01DE-35", "RG", "identidade", "12.345.678-9", "R$",
    "US$", "€", "1.500,00", "mil", "reais", "e 50 centavos", "%", "por cento", "por 100", "dias",
    "úteis", "corridos", "meses", "anos", "(trinta)", "horas", "22h", "6h30", "dia", "20",
    "15/03/2024", "05.03.2025", "2025-03-05", "15 de março de 2024", "primeiro de maio",
    "março de 2024", "metade", "um terço", "2/3", "1/3", "2024", "1990", "5 faltas",
    "2 salários mínimos", "(91) 3201-2700", "Procon-PE", "Detran/SP", "INSS", "Anatel",
    "Código de Defesa do Consumidor", "CDC", "Bolsa Família", "Pé-de-Meia", "FGTS", "Pix",
    "Universidade Federal de Pernambuco", "Tribunal Regional do Trabalho", "Ministério da Saúde",
    "São Paulo", "Belo Horizonte", "Natal/RN", "cidade de Natal", "em SP", "estado de MG",
    "(SP)", "Nordeste", "região Sul", "Pará", "Para", "capital", "TJRJ", "procon.sp.gov.br",
]  # fmt: skip
ALPHABET = (
    "0123456789 /.,-%$:;()\n\tºª°§'\"aeiouAEIOUlLrRsStTdDcCpPnNmMhHxXvViIbBgGqQ"
    "áéíóúâêôãõçÁÉÇÃ–—’“”…€\u00a0\u2028ßİﬁ\x00\x01\x81"
)
texts_like_answers = st.lists(
    st.one_of(st.sampled_from(WORDS), st.text(alphabet=ALPHABET, max_size=6)), max_size=24
).map(" ".join)


def _mentions(text: str, folded: str, scan: sc.Scan) -> list[list[tuple[Any, ...]]]:
    return [
        [
            (m.category, m.text, sorted(m.keys), sorted(m.extra), m.start, m.end, m.invalid)
            for m in detect(text, folded, scan)
        ]
        for detect in DETECTORS
    ]


@needs_hyperscan
@SETTINGS
@given(texts_like_answers)
@example("Lei nº 8.078/1990, art. 49, § 2º: 7 dias úteis; R$ 1.500,00 (15%) em 15/03/2024.")
@example("Procon-PE, INSS e Bolsa Família em Natal/RN; CPF 529.982.247-25, 22h30, metade.")
@example("\x00\x81–“8.078”—’ß İ ﬁ\u2028")
def test_both_engines_find_the_same_mentions(hyperscan_engine: None, text: str) -> None:
    for candidate in (text, digitise(text)):
        folded = fold_same_length(candidate)
        compiled = sc.scan(candidate, folded)
        plain = sc.Scan(candidate, folded)  # the re engine's reading
        assert _mentions(candidate, folded, compiled) == _mentions(candidate, folded, plain)
        assert not _missed_starts(candidate)


@SETTINGS
@given(st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=40))
@example("Ação § 2º – “São” … € ½ ß İ ﬁ")
def test_the_quick_fold_is_the_general_fold(text: str) -> None:
    assert fold(text) == _fold_general(text)
    assert len(fold_same_length(text)) == len(text)


# --------------------------------------------------------------------------------- choosing


def _python(code: str, **env: str) -> str:
    environment = {k: v for k, v in os.environ.items() if k != sc.ENGINE_VARIABLE}
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**environment, **env},
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return done.stdout.strip()


_RECORD = json.loads((ROOT / "tests/data/devset.jsonl").read_text("utf-8").splitlines()[3])
_JUDGE = (
    "from bench.rules_fingerprint import record_views\n"
    "from veredito.worker.rules.scan import engine\n"
    f"views = record_views(json.loads({json.dumps(json.dumps(_RECORD))}))\n"
    "print(json.dumps([engine(), views]))\n"
)


@pytest.mark.parametrize(
    ("variable", "block", "expected"),
    [
        ("re", False, "re"),
        ("auto", False, "hyperscan" if HAS_HYPERSCAN else "re"),
        ("", False, "hyperscan" if HAS_HYPERSCAN else "re"),
        ("nonsense", False, "hyperscan" if HAS_HYPERSCAN else "re"),
        ("hyperscan", False, "hyperscan" if HAS_HYPERSCAN else "re"),
        ("hyperscan", True, "re"),  # a base install: the package is missing
        ("auto", True, "re"),
    ],
)
def test_the_engine_is_chosen_by_the_variable_and_re_stands_in(
    variable: str, block: bool, expected: str
) -> None:
    blocked = "sys.modules['hyperscan'] = None  # as if not installed\n" if block else ""
    code = "import json, sys\n" + blocked + _JUDGE
    out = _python(code, **{sc.ENGINE_VARIABLE: variable})
    name, views = json.loads(out)
    assert name == expected
    assert views == json.loads(json.dumps(record_views(_RECORD)))


@needs_hyperscan
def test_threads_scan_with_their_own_scratch(hyperscan_engine: None) -> None:
    from veredito.worker.rules import judge

    rows = list(triples(24, seed=5))
    serial = [repr(judge(r["answer"], r["context"], r["query"])) for r in rows]
    sc.use_engine("hyperscan")  # empty the caches: every thread scans for itself
    found: dict[int, list[str]] = {}

    def work(k: int) -> None:
        found[k] = [repr(judge(r["answer"], r["context"], r["query"])) for r in rows]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(found[k] == serial for k in range(4))


@needs_hyperscan
def test_the_databases_are_compiled_once(hyperscan_engine: None) -> None:
    from veredito.worker.rules import judge

    first = sc._active()
    for row in triples(5, seed=9):
        judge(row["answer"], row["context"], row["query"])
    assert sc._active() is first


def _mentions_of(texts: list[str]) -> list[list[tuple[str, str, int]]]:
    from veredito.worker.rules.detectors import find_mentions

    return [[(m.category, m.text, m.start) for m in find_mentions(t)] for t in texts]


@needs_hyperscan
def test_the_compiled_scan_is_kept_for_the_next_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = [row["answer"] + " " + " ".join(row["context"]) for row in triples(40, seed=5)]
    monkeypatch.setenv(sc.CACHE_VARIABLE, str(tmp_path / "cache"))
    sc.use_engine("hyperscan")
    try:
        built = _mentions_of(texts)
        (kept,) = (tmp_path / "cache").iterdir()
        assert kept.name.startswith("rules-scan-") and kept.stat().st_size > 10_000
        compiled = sc._active()
        loaded_engine = sc._Hyperscan()  # what the next process does: load, not compile
        assert isinstance(compiled, sc._Hyperscan)
        assert loaded_engine._meta == compiled._meta
        assert loaded_engine._direct == compiled._direct
        sc.use_engine("re")
        assert _mentions_of(texts) == built
        sc.use_engine("hyperscan")  # loads from the cache
        assert _mentions_of(texts) == built and any(built)

        kept.write_bytes(kept.read_bytes()[:5000])  # truncated: compiled again, and rewritten
        sc.use_engine("hyperscan")
        assert _mentions_of(texts) == built
        assert kept.stat().st_size > 10_000
        kept.write_bytes(b'{"direct": [], "sizes": {"text": 3}, "meta": {}}\nabc')  # garbage
        sc.use_engine("hyperscan")
        assert _mentions_of(texts) == built
    finally:
        sc.use_engine(None)


@needs_hyperscan
@pytest.mark.parametrize("where", ["off", "unwritable"])
def test_without_a_cache_each_process_compiles(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = [row["answer"] for row in triples(10, seed=6)]
    sc.use_engine("re")
    expected = _mentions_of(texts)
    if where == "off":
        monkeypatch.setenv(sc.CACHE_VARIABLE, "off")
    else:
        blocker = tmp_path / "a-file"
        blocker.write_text("")
        monkeypatch.setenv(sc.CACHE_VARIABLE, str(blocker / "cache"))  # cannot be a directory
    try:
        assert sc.use_engine("hyperscan") == "hyperscan"
        assert _mentions_of(texts) == expected
        assert [p.name for p in tmp_path.iterdir()] == ([] if where == "off" else ["a-file"])
    finally:
        sc.use_engine(None)


@needs_hyperscan
@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX owners")
def test_a_cache_directory_others_can_write_is_not_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A file planted where others can write would reach Hyperscan's deserialiser: such a
    directory is neither read nor written, and the scan is compiled as without a cache."""
    texts = [row["answer"] for row in triples(10, seed=7)]
    sc.use_engine("re")
    expected = _mentions_of(texts)
    shared = tmp_path / "shared"
    shared.mkdir()
    monkeypatch.setenv(sc.CACHE_VARIABLE, str(shared))
    try:
        sc.use_engine("hyperscan")  # kept while the directory is only ours
        (kept,) = shared.iterdir()
        planted = kept.read_bytes()
        kept.write_bytes(b'{"direct": [], "sizes": {"text": 4}, "meta": {"text": [[], []]}}\nHSDB')
        shared.chmod(0o777)  # anyone may now replace it
        with caplog.at_level(logging.WARNING, logger="veredito.worker.rules.scan"):
            assert sc.use_engine("hyperscan") == "hyperscan"
        assert _mentions_of(texts) == expected  # compiled, not the planted file
        assert kept.read_bytes().endswith(b"HSDB")  # and not rewritten
        assert [r for r in caplog.records if "only it can write" in r.getMessage()]
        shared.chmod(0o700)
        kept.write_bytes(planted)
        assert sc._Hyperscan()._load(sc._cache_key(_hyperscan_version())) is not None
    finally:
        shared.chmod(0o700)
        sc.use_engine(None)


def _hyperscan_version() -> str:
    import hyperscan

    return str(getattr(hyperscan, "__version__", "unknown"))


# ------------------------------------------------------------------------------ the layout


def test_the_names_other_modules_import_still_import() -> None:
    from veredito.worker.rules import (
        AnswerJudgement,
        Check,
        ClaimJudgement,
        ContextIndex,
        check_text,
        check_texts,
        index_context,
        judge,
        judge_answer,
    )
    from veredito.worker.rules.detectors import (
        _fold_same_length,
        detect_ids,
        detectors_for,
        find_mentions,
    )
    from veredito.worker.rules.engine import _chunk_text
    from veredito.worker.rules.engine import check_texts as engine_check_texts

    assert engine_check_texts is check_texts and callable(judge_answer) and callable(judge)
    assert {"basis", "support", "words"} <= set(ClaimJudgement.__dataclass_fields__)
    assert {"why", "nearest", "derivation"} <= set(Check.__dataclass_fields__)
    assert AnswerJudgement and ContextIndex and check_text and index_context and detectors_for
    assert _chunk_text("A. B.").clauses and _fold_same_length("Ação") == "acao"
    (cpf,) = detect_ids("CPF 529.982.247-25", "cpf 529.982.247-25")
    assert isinstance(cpf, Mention) and cpf.keys == {"cpf|52998224725"}
    assert [m.text for m in find_mentions("Lei 8.078/90, 30 dias")] == ["Lei 8.078/90", "30 dias"]


def test_every_detector_pattern_is_registered_with_the_scan() -> None:
    from veredito.worker.rules import amounts, bodies, ids, laws, names, places, programmes

    registered = {id(p.resolve()) for p in sc.patterns()}
    loose = [
        f"{module.__name__}.{name}"
        for module in (amounts, bodies, ids, laws, names, places, programmes)
        for name, value in vars(module).items()
        if isinstance(value, re.Pattern) and id(value) not in registered
    ]
    assert not loose, f"compile detector patterns through scan.pattern(): {loose}"
    assert len({p.name for p in sc.patterns()}) == len(sc.patterns())
