"""Releases compared (spec §18): the statistics against published values, the comparison on
verdict files shaped as spec §6 writes them, and ``veredito compare`` on those files."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import veredito
from veredito.api import Report
from veredito.cli import main
from veredito.comparison import (
    CATEGORY_ALPHA,
    Tally,
    compare,
    compare_tallies,
    format_table,
    precision_from_labels,
    tally,
)
from veredito.proportions import (
    mcnemar_exact,
    newcombe_interval,
    newcombe_paired_interval,
    wilson_interval,
)
from veredito.worker.verdict import CATEGORIES, Verdict

APP = "sac-bot"


# -- the statistics against published values -----------------------------------------------------
def close(got: Sequence[float] | None, want: tuple[float, float], places: int = 4) -> bool:
    assert got is not None
    return all(round(g, places) == w for g, w in zip(got, want, strict=True))


@pytest.mark.parametrize(
    ("hits", "total", "want"),
    [
        (81, 263, (0.2553, 0.3662)),  # Newcombe 1998a, Table I
        (15, 148, (0.0624, 0.1605)),  # Newcombe 1998a, Table I
        (0, 20, (0.0, 0.1611)),  # Newcombe 1998a, Table I
        (1, 29, (0.0061, 0.1718)),  # Newcombe 1998a, Table I
    ],
)
def test_wilson_interval_matches_newcombe(hits: int, total: int, want: tuple[float, float]) -> None:
    assert close(wilson_interval(hits, total), want)


@pytest.mark.parametrize(
    ("head", "base", "want"),
    [
        ((56, 70), (48, 80), (0.0524, 0.3339)),  # Newcombe 1998a, Table II, example (a)
        ((9, 10), (3, 10), (0.1705, 0.8090)),  # (b)
        ((5, 56), (0, 29), (-0.0381, 0.1926)),  # (d)
        ((7, 34), (1, 34), (0.0189, 0.3404)),  # Fagerland et al. 2017, §4 (Perondi et al.)
    ],
)
def test_newcombe_interval_matches_published_examples(
    head: tuple[int, int], base: tuple[int, int], want: tuple[float, float]
) -> None:
    assert close(newcombe_interval(base[0], base[1], head[0], head[1]), want)


def test_newcombe_paired_interval_matches_published_example() -> None:
    # Fagerland, Lydersen & Laake 2017, §8 (Cavo et al. 2012): 59 both, 6 first only, 16 second
    # only, 80 neither; difference first − second −0.0621 (−0.1186 to −0.0046)
    interval = newcombe_paired_interval(both=59, base_only=16, head_only=6, neither=80)
    assert close(interval, (-0.1186, -0.0046))
    # head − base is base − head turned round
    turned = newcombe_paired_interval(both=59, base_only=6, head_only=16, neither=80)
    assert close(turned, (0.0046, 0.1186))


@pytest.mark.parametrize(
    ("b", "c", "want"),
    [(1, 9, 0.021484375), (9, 1, 0.021484375), (0, 0, 1.0), (5, 5, 1.0), (0, 5, 0.0625)],
)
def test_mcnemar_exact(b: int, c: int, want: float) -> None:
    assert mcnemar_exact(b, c) == pytest.approx(want, rel=1e-12)


def test_mcnemar_in_log_space_agrees_with_the_exact_sum() -> None:
    from veredito.proportions import _log_lower_tail

    n, m = 4000, 1900
    exact = 2 * sum(math.comb(n, k) for k in range(m + 1)) / 2**n
    assert math.exp(math.log(2) + _log_lower_tail(n, m)) == pytest.approx(exact, rel=1e-9)
    # a million discordant pairs, 2 standard deviations apart: p ≈ 0.0455 (normal), quickly
    assert mcnemar_exact(499_000, 501_000) == pytest.approx(0.0455, abs=0.0005)


@given(st.integers(0, 200), st.integers(1, 200), st.integers(0, 200), st.integers(1, 200))
def test_newcombe_interval_holds_the_difference(k1: int, n1: int, k2: int, n2: int) -> None:
    k1, k2 = min(k1, n1), min(k2, n2)
    lower, upper = newcombe_interval(k1, n1, k2, n2) or (math.nan, math.nan)
    assert -1 <= lower <= k2 / n2 - k1 / n1 <= upper <= 1


@given(st.integers(0, 60), st.integers(0, 60), st.integers(0, 60), st.integers(0, 60))
def test_paired_interval_holds_the_difference(a: int, b: int, c: int, d: int) -> None:
    n = a + b + c + d
    interval = newcombe_paired_interval(a, b, c, d)
    if n == 0:
        assert interval is None
        return
    assert interval is not None
    assert -1 <= interval[0] <= (c - b) / n + 1e-12
    assert (c - b) / n - 1e-12 <= interval[1] <= 1
    assert 0 < mcnemar_exact(b, c) <= 1


# -- verdicts as spec §6 writes them ---------------------------------------------------------------
def verdict(
    vid: str,
    categories: Sequence[str | None] = (),
    confidence: float | None = 0.95,
    *,
    status: str = "ok",
    app: str = APP,
    release: str = "1.0",
) -> dict[str, Any]:
    """One verdict: a grounded claim, and an invented claim of each of ``categories`` (None: a
    claim without a category, counted as GENERICA)."""
    claims: list[dict[str, Any]] = [
        {"text": "O prazo de troca é de 7 dias.", "verdict": "grounded", "category": None,
         "chunk_idx": 0, "source": "llm", "confidence": 0.9}
    ]  # fmt: skip
    for category in categories:
        claims.append(
            {"text": "A multa é de R$ 500,00.", "verdict": "invented", "category": category,
             "chunk_idx": None, "source": "llm", "confidence": confidence}
        )  # fmt: skip
    flagged = [c for c in claims if c["verdict"] != "grounded"]
    counts: dict[str, int] = {}
    for claim in flagged:
        counts[claim["category"] or "GENERICA"] = counts.get(claim["category"] or "GENERICA", 0) + 1
    model = Verdict.model_validate(
        {
            "id": vid,
            "status": status,
            "error": None if status == "ok" else {"kind": "judge_down", "message": "x"},
            "judge": {"kind": "llm", "model": "gpt-4o-mini", "prompts": {}},
            "claims": claims if status == "ok" else [],
            "score": 1 / len(claims) if status == "ok" else None,
            "hallucinated": bool(flagged) and status == "ok",
            "hallucination_confidence": confidence if flagged and status == "ok" else None,
            "categories": counts if status == "ok" else {},
            "metadata": {"app": app, "release": release},
        }
    )
    return model.model_dump(mode="json")


SPREAD = ["LEI", "CNPJ_CPF_RG", "ENTIDADE_BR", "PRAZO_VALOR", "POLITICA", "GEOGRAFIA_BR"]


def release(
    name: str, answers: int, hallucinated: int, extra: int = 0, extra_confidence: float = 0.95
) -> list[dict[str, Any]]:
    """``answers`` judged answers of release ``name``: ``hallucinated`` spread over six
    categories, then ``extra`` more all in PRAZO_VALOR; plus a rejected and a failed verdict."""
    out = []
    for i in range(answers):
        if i < hallucinated:
            out.append(verdict(f"{name}-{i}", [SPREAD[i % len(SPREAD)]], release=name))
        elif i < hallucinated + extra:
            out.append(verdict(f"{name}-{i}", ["PRAZO_VALOR"], extra_confidence, release=name))
        else:
            out.append(verdict(f"{name}-{i}", release=name))
    out.append(verdict(f"{name}-rejected", status="rejected", release=name))
    out.append(verdict(f"{name}-failed", status="failed", release=name))
    return out


def write(path: Path, verdicts: Sequence[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(v, ensure_ascii=False) + "\n" for v in verdicts), "utf-8")
    return path


def row(result: dict[str, Any], name: str) -> dict[str, Any]:
    return next(r for r in result["rows"] if r["category"] == name)


# -- the comparison ------------------------------------------------------------------------------
def test_tally_counts_judged_answers_categories_and_generica() -> None:
    verdicts = [
        verdict("a", ["LEI", "LEI"]),
        verdict("b", [None]),
        verdict("c"),
        verdict("d", status="failed"),
    ]
    counted = tally(verdicts)
    assert (counted.answers, counted.hallucinated) == (3, 2)
    assert counted.categories == {**dict.fromkeys(CATEGORIES, 0), "LEI": 1, "GENERICA": 1}
    as_models = [Verdict.model_validate(v) for v in verdicts]
    assert tally(as_models) == counted
    assert tally(Report(verdicts=as_models)) == counted


def test_ten_against_thirty_percent_regresses_on_the_answer_and_that_category_only() -> None:
    base = release("1.0", 300, 30)
    head = release("1.1", 300, 30, extra=60)

    result = compare(base, head, base_name="1.0", head_name="1.1")

    assert result["paired"] is False
    answer = row(result, "answer")
    assert (answer["base"]["answers"], answer["base"]["hallucinated"]) == (300, 30)
    assert (answer["head"]["answers"], answer["head"]["hallucinated"]) == (300, 90)
    assert answer["difference"] == pytest.approx(0.2)
    assert answer["interval"][0] > 0 and answer["regressed"] and not answer["improved"]
    prazo = row(result, "PRAZO_VALOR")
    assert (prazo["base"]["hallucinated"], prazo["head"]["hallucinated"]) == (5, 65)
    assert prazo["regressed"] and prazo["alpha"] == CATEGORY_ALPHA
    assert prazo["adjusted_interval"][0] < prazo["interval"][0]  # the wider, adjusted one decides
    others = [r for r in result["rows"] if r["category"] not in ("answer", "PRAZO_VALOR")]
    assert len(others) == 6 and not any(r["regressed"] or r["improved"] for r in others)
    assert result["regressed"] and not result["improved"]


def test_twenty_against_twenty_one_percent_is_not_a_regression() -> None:
    result = compare(release("2.0", 300, 60), release("2.1", 300, 60, extra=3))
    answer = row(result, "answer")
    assert answer["difference"] == pytest.approx(0.01)
    assert answer["interval"][0] < 0 < answer["interval"][1]
    assert not result["regressed"] and not result["improved"]


def test_a_category_just_past_95_percent_is_not_flagged_at_the_adjusted_level() -> None:
    base, head = Tally(answers=300), Tally(answers=300)
    base.categories["LEI"], head.categories["LEI"] = 5, 16
    result = compare_tallies(base, head)
    lei = row(result, "LEI")
    assert lei["interval"][0] > 0  # at 95 % alone it would have been a regression
    assert lei["adjusted_interval"][0] < 0 and not lei["regressed"]


def test_the_same_ids_are_compared_paired() -> None:
    base = [verdict(f"q-{i}", ["LEI"] if i < 10 else []) for i in range(200)]
    head = [verdict(f"q-{i}", ["LEI"] if i < 40 else []) for i in range(200)]

    result = compare(base, head)

    assert result["paired"] is True and result["pairs"] == 200
    assert result["unpaired"] == {"base": 0, "head": 0}
    answer = row(result, "answer")
    assert answer["discordant"] == {"base_only": 0, "head_only": 30}
    assert answer["p_value"] == pytest.approx(2 / 2**30)
    assert answer["difference"] == pytest.approx(0.15)
    assert answer["regressed"] and row(result, "LEI")["regressed"]
    assert not row(result, "PRAZO_VALOR")["regressed"]
    independent = compare(base, head, paired=False)
    assert independent["paired"] is False and row(independent, "answer")["regressed"]


def test_pairing_is_by_app_and_id_and_needs_half_of_the_smaller_side() -> None:
    base = [verdict(f"q-{i}") for i in range(100)]
    other_app = [verdict(f"q-{i}", app="outro-bot") for i in range(100)]
    assert compare(base, other_app)["paired"] is False
    few = [verdict(f"q-{i}") for i in range(40)] + [verdict(f"n-{i}") for i in range(60)]
    assert compare(base, few)["paired"] is False  # 40 of 100 shared
    most = [verdict(f"q-{i}") for i in range(60)] + [verdict(f"n-{i}") for i in range(40)]
    result = compare(base, most)
    assert result["paired"] is True and result["pairs"] == 60
    assert result["unpaired"] == {"base": 40, "head": 40}
    failed_on_head = [verdict(f"q-{i}", status="failed" if i < 50 else "ok") for i in range(100)]
    assert compare(base, failed_on_head)["pairs"] == 50  # judged on both sides only
    with pytest.raises(ValueError, match="share no judged ids"):
        compare(base, other_app, paired=True)


def test_confident_counts_only_the_sure_hallucinations() -> None:
    base = release("3.0", 300, 30)
    head = release("3.1", 300, 30, extra=60, extra_confidence=0.5)
    assert compare(base, head)["regressed"]

    result = compare(base, head, confident=True, threshold=0.8)

    assert result["confident"] is True and result["threshold"] == 0.8
    assert row(result, "answer")["head"]["hallucinated"] == 30
    assert row(result, "PRAZO_VALOR")["head"]["hallucinated"] == 5
    assert not result["regressed"]
    # no confidences at all (an older worker's verdict): confident, as the metrics count it
    old = verdict("old", ["LEI"], confidence=None)
    assert tally([old], confident=True).hallucinated == 1
    assert tally([old], confident=True).categories["LEI"] == 1
    # a category counts by its own highest claim
    mixed = verdict("mixed", ["LEI"], confidence=0.95)
    mixed["claims"].append({**mixed["claims"][1], "category": "POLITICA", "confidence": 0.3})
    mixed["categories"]["POLITICA"] = 1
    sure = tally([mixed], confident=True)
    assert (sure.categories["LEI"], sure.categories["POLITICA"]) == (1, 0)


@pytest.mark.parametrize("order", ["missing first", "low first"])
def test_a_claim_without_confidence_makes_its_category_confident_as_the_store_does(
    order: str,
) -> None:
    """The store's SQL counts a category as confident when any of its flagged claims has a
    confidence at or above the threshold or none at all; the library counts it the same, in
    whichever order the claims come."""
    both = verdict("both", ["LEI", "LEI"], confidence=0.3)
    missing, low = (1, 2) if order == "missing first" else (2, 1)
    both["claims"][missing]["confidence"] = None
    both["claims"][low]["confidence"] = 0.3
    sure = tally([both], confident=True, threshold=0.8)
    assert sure.categories["LEI"] == 1
    low_only = verdict("low", ["LEI", "LEI"], confidence=0.3)
    assert tally([low_only], confident=True, threshold=0.8).categories["LEI"] == 0


def test_a_side_without_judged_answers_is_named() -> None:
    with pytest.raises(ValueError, match=r"^1\.1: no judged answers"):
        compare(release("1.0", 10, 1), [verdict("x", status="failed")], head_name="1.1")
    with pytest.raises(ValueError, match="verdict 2: status"):
        tally([verdict("a"), {"id": "b", "status": "done"}])


def test_the_library_exports_compare() -> None:
    assert "compare" in veredito.__all__
    base = Report(verdicts=[Verdict.model_validate(v) for v in release("1.0", 300, 30)])
    head = Report(verdicts=[Verdict.model_validate(v) for v in release("1.1", 300, 30, 60)])
    assert veredito.compare(base, head)["regressed"]


# -- the judge's precision beside the rates ------------------------------------------------------
def labelled(vid: str, hallucinated: bool) -> dict[str, Any]:
    spans = [{"text": "A multa é de R$ 500,00.", "category": "LEI", "verdict": "invented"}]
    return {"id": vid, "metadata": {"app": APP}, "query": "q", "context": ["c"], "answer": "a",
            "labels": {"hallucinated": hallucinated, "spans": spans if hallucinated else []}}  # fmt: skip


def test_a_regression_the_judge_invented_gets_a_note() -> None:
    # one labelled set, 10 hallucinated answers; the head judge flags 30 more the labels deny
    gold = [labelled(f"q-{i}", i < 10) for i in range(200)]
    base = [verdict(f"q-{i}", ["LEI"] if i < 10 else []) for i in range(200)]
    head = [verdict(f"q-{i}", ["LEI"] if i < 40 else []) for i in range(200)]

    result = compare(base, head, labels=gold)

    answer = row(result, "answer")
    assert answer["regressed"]
    assert answer["precision"]["base"]["precision"] == 1.0
    assert answer["precision"]["head"]["precision"] == pytest.approx(0.25)
    assert answer["precision"]["head"]["labelled"] == 40
    assert "may be the judge's" in answer["note"]
    assert row(result, "LEI")["precision"]["head"]["precision"] == pytest.approx(0.25)
    assert "precision" in row(result, "PRAZO_VALOR")  # no figures: precision null
    assert row(result, "PRAZO_VALOR")["precision"]["head"]["precision"] is None
    # labels carried on the verdicts themselves give the same
    inline = compare(
        [{**v, "labels": g["labels"]} for v, g in zip(base, gold, strict=True)],
        [{**v, "labels": g["labels"]} for v, g in zip(head, gold, strict=True)],
    )
    assert row(inline, "answer")["precision"] == answer["precision"]
    assert "precision" not in row(compare(base, head), "answer")  # no labels: no precision


def test_labels_of_another_answer_text_are_not_this_answers() -> None:
    gold = [labelled(f"q-{i}", i < 10) for i in range(200)]  # the labelled answer: "a"
    base = [verdict(f"q-{i}", ["LEI"] if i < 10 else []) for i in range(200)]
    answered_anew = {"query": "q", "context": ["c"], "answer": "outra resposta"}
    head = [{**verdict(f"q-{i}", ["LEI"] if i < 40 else []), "input": answered_anew}
            for i in range(200)]  # fmt: skip
    the_same = [{**v, "input": {**answered_anew, "answer": "a"}} for v in head]
    assert precision_from_labels(head, gold) is None
    assert precision_from_labels(the_same, gold) is not None
    assert "precision" not in row(compare(base, head, labels=gold), "answer")


def test_precision_given_by_the_caller() -> None:
    base, head = Tally(answers=300, hallucinated=30), Tally(answers=300, hallucinated=90)
    sure = {"answer": {"precision": 0.9, "labelled": 50}}
    doubtful = {"answer": {"precision": 0.65, "labelled": 40}}
    result = compare_tallies(base, head, base_precision=sure, head_precision=doubtful)
    assert row(result, "answer")["precision"]["head"] == {"precision": 0.65, "labelled": 40}
    assert "note" in row(result, "answer")  # 0.25 below the base's
    fine = compare_tallies(base, head, base_precision=sure, head_precision=sure)
    assert "note" not in row(fine, "answer")
    one_side = compare_tallies(base, head, base_precision=sure)
    assert "precision" not in row(one_side, "answer")


# -- the table -----------------------------------------------------------------------------------
def test_the_table_says_what_regressed() -> None:
    result = compare(release("1.0", 300, 30), release("1.1", 300, 30, 60), base_name="1.0",
                     head_name="1.1")  # fmt: skip
    table = format_table(result)
    lines = {line.split()[0]: line for line in table.splitlines() if line.strip()}
    assert lines["answer"].endswith("REGRESSED") and "+20.0" in lines["answer"]
    assert "10.0%" in lines["answer"] and "30.0%" in lines["answer"]
    assert lines["PRAZO_VALOR"].endswith("REGRESSED")
    assert lines["LEI"].endswith("—")
    base = [verdict(f"q-{i}", ["LEI"] if i < 10 else []) for i in range(200)]
    head = [verdict(f"q-{i}", ["LEI"] if i < 40 else []) for i in range(200)]
    paired = format_table(compare(base, head))
    assert "paired: 200 answers" in paired and "McNemar" in paired and "1.9e-09" in paired


# -- veredito compare ----------------------------------------------------------------------------
@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    monkeypatch.delenv("VEREDITO_ALERT_CONFIDENCE", raising=False)
    return {
        "base": write(tmp_path / "base.jsonl", release("1.0", 300, 30)),
        "head": write(tmp_path / "head.jsonl", release("1.1", 300, 30, extra=60)),
        "twenty": write(tmp_path / "twenty.jsonl", release("2.0", 300, 60)),
        "twenty_one": write(tmp_path / "twenty_one.jsonl", release("2.1", 300, 60, extra=3)),
    }


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


def test_cli_json_is_the_library_result(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    base, head = str(files["base"]), str(files["head"])
    assert main(["compare", base, head, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == compare(lines_of(files["base"]), lines_of(files["head"]), base_name=base,
                              head_name=head)  # fmt: skip
    assert main(["compare", base, head, "--json", "--confident", "--threshold", "0.9"]) == 0
    sure = json.loads(capsys.readouterr().out)
    assert sure == compare(lines_of(files["base"]), lines_of(files["head"]), base_name=base,
                           head_name=head, confident=True, threshold=0.9)  # fmt: skip


def test_cli_fails_on_regression_only_when_asked_and_only_on_one(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    regressed = ["compare", str(files["base"]), str(files["head"])]
    assert main(regressed) == 0
    assert "REGRESSED" in capsys.readouterr().out
    assert main([*regressed, "--fail-on-regression"]) == 1
    capsys.readouterr()
    steady = ["compare", str(files["twenty"]), str(files["twenty_one"]), "--fail-on-regression"]
    assert main(steady) == 0
    assert "REGRESSED" not in capsys.readouterr().out


def test_cli_names_the_bad_line_and_exits_2(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken.jsonl"
    good = files["head"].read_text("utf-8").splitlines()
    broken.write_text("\n".join([*good[:2], '{"id": "x", "status": "ok"', *good[2:]]) + "\n")
    assert main(["compare", str(files["base"]), str(broken)]) == 2
    assert f"{broken}, line 3: not valid JSON" in capsys.readouterr().err
    not_verdict = tmp_path / "not_verdict.jsonl"
    not_verdict.write_text('{"id": "x", "status": "ok"}\n[1, 2]\n')
    assert main(["compare", str(files["base"]), str(not_verdict)]) == 2
    assert f"{not_verdict}, line 2: not a JSON object" in capsys.readouterr().err
    missing = tmp_path / "missing.jsonl"
    assert main(["compare", str(missing), str(files["head"])]) == 2
    assert f"{missing}: No such file" in capsys.readouterr().err
    failed_only = write(tmp_path / "failed.jsonl", [verdict("f", status="failed")])
    assert main(["compare", str(files["base"]), str(failed_only)]) == 2
    assert f"{failed_only}: no judged answers" in capsys.readouterr().err


def test_cli_keeps_one_app_and_pairs_as_told(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = [verdict(f"q-{i}", ["LEI"] if i < 10 else []) for i in range(200)]
    head = [verdict(f"q-{i}", ["LEI"] if i < 40 else []) for i in range(200)]
    noise = [verdict(f"o-{i}", ["LEI"], app="outro-bot") for i in range(500)]
    a = write(tmp_path / "a.jsonl", base + noise)
    b = write(tmp_path / "b.jsonl", head)
    assert main(["compare", str(a), str(b), "--app", APP, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["paired"] is True and result["pairs"] == 200 and result["unpaired"]["base"] == 0
    assert main(["compare", str(a), str(b), "--app", APP, "--json", "--paired", "no"]) == 0
    assert json.loads(capsys.readouterr().out)["paired"] is False
    gold = tmp_path / "gold.jsonl"
    write(gold, [labelled(f"q-{i}", i < 10) for i in range(200)])
    assert main(["compare", str(a), str(b), "--app", APP, "--labels", str(gold)]) == 0
    out = capsys.readouterr().out
    assert "1.00/0.25" in out and "note: answer:" in out
