"""Calibrated confidence (spec §17): every claim and verdict carries it, the LLM judge's prior
says so, a bad calibration file is refused at start, a fitted one is used, and the shipped one is
what `make calibration` builds today."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from veredito.worker.confidence import (
    Calibration,
    CalibrationError,
    default_calibration,
    hallucination_confidence,
    llm_features,
    load_calibration,
)
from veredito.worker.fitting import reliability
from veredito.worker.verdict import Claim

SHIPPED = ROOT / "worker" / "rules" / "data" / "calibration.json"
TRIPLE = {
    "query": "Qual o prazo para desistir?",
    "context": ["Art. 49 do CDC: o consumidor pode desistir no prazo de 7 dias."],
    "answer": "Você tem 30 dias para desistir, pelo art. 49 do CDC. Guarde o comprovante.",
}


def test_every_claim_and_verdict_carries_a_confidence() -> None:
    import veredito

    (verdict,) = veredito.evaluate([TRIPLE], judge="rules")
    flagged = [c for c in verdict.claims if c.verdict != "grounded"]
    assert flagged and all(
        c.confidence is not None and 0 <= c.confidence <= 1 for c in verdict.claims
    )
    assert verdict.hallucination_confidence == max(c.confidence for c in flagged)  # type: ignore[type-var]
    assert verdict.judge is not None and verdict.judge.calibration == "default"
    clean = veredito.evaluate(
        [{**TRIPLE, "answer": "Você tem 7 dias para desistir."}], judge="rules"
    )[0]
    assert clean.hallucination_confidence is None


def test_a_grounded_claim_with_nothing_checkable_is_never_sure() -> None:
    import veredito

    answer = "Recomendamos guardar todos os comprovantes da compra em local seguro por precaução."
    (verdict,) = veredito.evaluate([{**TRIPLE, "answer": answer}], judge="rules")
    (claim,) = verdict.claims
    assert claim.verdict == "grounded" and claim.confidence is not None and claim.confidence <= 0.5


def test_the_llm_prior_and_hallucination_confidence() -> None:
    calibration = default_calibration()
    assert calibration.label("llm") == "prior"
    flagged = Claim(text="x", verdict="invented", category="LEI")
    both = calibration.confidence("llm", True, llm_features(flagged, "flag"))
    alone = calibration.confidence("llm", True, llm_features(flagged, "grounded"))
    assert both > alone  # the rules agreeing makes a flag surer
    grounded = Claim(text="y", verdict="grounded")
    objected = calibration.confidence("llm", False, llm_features(grounded, "flag"))
    assert objected < calibration.confidence("llm", False, llm_features(grounded, "grounded"))
    claims = [Claim(text="a", verdict="invented", confidence=0.6), Claim(text="b", verdict="grounded", confidence=0.99),
              Claim(text="c", verdict="contradicted", confidence=0.9)]  # fmt: skip
    assert hallucination_confidence(claims) == 0.9


def test_reliability_and_ece() -> None:
    report = reliability([(0.9, True)] * 9 + [(0.9, False)] + [(0.2, False)] * 4 + [(0.2, True)])
    assert report["claims"] == 15 and report["ece"] == 0.0
    assert reliability([(0.9, False)] * 10)["ece"] == 0.9


@pytest.mark.parametrize(
    "content, message",
    [
        ("not json", "not JSON"),
        ('{"format": "other"}', "not a veredito calibration"),
        ('{"format": "veredito.calibration/1", "judges": {"rules": {}}}', "judges must hold"),
    ],
)
def test_a_bad_or_foreign_calibration_is_refused_at_start(
    tmp_path: Path, content: str, message: str
) -> None:
    bad = tmp_path / "cal.json"
    bad.write_text(content)
    with pytest.raises(CalibrationError, match=message):
        load_calibration(bad)
    done = subprocess.run(
        [sys.executable, "-m", "veredito", "run", "-", "--judge", "rules"],
        input=json.dumps(TRIPLE), capture_output=True, text=True, cwd=ROOT, timeout=120,
        env={**os.environ, "VEREDITO_CALIBRATION": str(bad)},
    )  # fmt: skip
    assert done.returncode == 2 and "VEREDITO_CALIBRATION" in done.stderr and message in done.stderr


def test_a_fitted_calibration_is_used(tmp_path: Path) -> None:
    out = tmp_path / "team.json"
    fit = subprocess.run(
        [sys.executable, "-m", "veredito", "calibrate", "--fit", str(ROOT / "tests/data/devset.jsonl"),
         "--out", str(out), "--name", "equipe-sac"],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert fit.returncode == 0, fit.stderr
    assert "expected calibration error" in fit.stdout
    body = json.loads(out.read_text())
    assert body["held_out"]["rules"]["all"]["claims"] > 50
    loaded = load_calibration(out)
    assert isinstance(loaded, Calibration) and loaded.label("rules") == "equipe-sac"
    assert loaded.label("llm") == "prior"  # no LLM verdicts in a file: the prior stays
    done = subprocess.run(
        [sys.executable, "-m", "veredito", "run", "-", "--judge", "rules"],
        input=json.dumps(TRIPLE), capture_output=True, text=True, cwd=ROOT, timeout=120,
        env={**os.environ, "VEREDITO_CALIBRATION": str(out)},
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    verdict = json.loads(done.stdout.splitlines()[0])
    assert verdict["judge"]["calibration"] == "equipe-sac"


def test_the_shipped_calibration_is_fresh(tmp_path: Path) -> None:
    """`make calibration` rebuilt now gives the shipped models: refit after any change to the
    rules judge or the labelled sets."""
    sets = [ROOT / "tests/data/devset.jsonl", ROOT / "tests/data/holdout.jsonl",
            *sorted((ROOT / "tests/data").glob("holdout[2-8].jsonl"))]  # fmt: skip
    out = tmp_path / "fresh.json"
    fit = subprocess.run(
        [sys.executable, "-m", "veredito", "calibrate", "--fit", *map(str, sets), "--out", str(out),
         "--name", "default", "--evidence", str(ROOT / "tests/data/holdout9.jsonl")],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
    )  # fmt: skip
    assert fit.returncode == 0, fit.stderr
    fresh, shipped = json.loads(out.read_text()), json.loads(SHIPPED.read_text())
    assert fresh["sources"] == shipped["sources"]
    for part in ("flagged", "grounded"):
        a, b = fresh["judges"]["rules"][part], shipped["judges"]["rules"][part]
        assert a["features"] == b["features"], "stale: run `make calibration`"
        assert a["coef"] == pytest.approx(b["coef"], abs=1e-4), "stale: run `make calibration`"
        assert a.get("caps") == b.get("caps"), "stale: run `make calibration`"
    assert fresh["judges"]["llm"] == shipped["judges"]["llm"], "stale: run `make calibration`"


def test_llm_verdicts_with_labels_replace_the_prior() -> None:
    """From a store, the LLM judge's stored claims and the reviewers' labels fit its models."""
    from veredito.worker.fitting import fit_calibration, llm_examples, rules_examples

    context = ["O prazo de desistência é de 7 dias (art. 49 do CDC)."]
    records, verdicts = [], []
    for i in range(60):
        wrong = i % 3 == 0
        answer = f"O prazo é de {30 if wrong else 7} dias. Atendimento número {i}."
        claims = [
            {"text": f"O prazo é de {30 if wrong else 7} dias.", "verdict": "contradicted" if i % 2 else "grounded",
             "category": "PRAZO_VALOR" if i % 2 else None},
            {"text": f"Atendimento número {i}.", "verdict": "grounded", "category": None},
        ]  # fmt: skip
        spans = (
            [{"text": "30 dias", "category": "PRAZO_VALOR", "verdict": "contradicted"}]
            if wrong
            else []
        )
        records.append({"id": f"r{i}", "query": "Qual o prazo?", "context": context, "answer": answer,
                        "labels": {"hallucinated": wrong, "spans": spans}})  # fmt: skip
        verdicts.append(
            {
                "id": f"r{i}",
                "status": "ok",
                "judge": {"kind": "llm", "model": "m"},
                "claims": claims,
            }
        )
    examples = llm_examples(records, verdicts)
    assert len(examples) == 120
    assert any(e.features.get("llm:grounded&rules:flag") for e in examples)  # the rules see 30
    body = fit_calibration(rules_examples(records), examples, "equipe", ["store"])
    assert body["judges"]["llm"]["calibration"] == "equipe"
    assert body["judges"]["llm"]["flagged"]["kind"] in ("logistic", "table")
    assert "llm" in body["held_out"]


def test_the_store_api_and_page_show_and_filter_confidence(tmp_path: Path) -> None:
    import veredito
    from tests.test_serve import call
    from tests.test_serve_security import server
    from veredito.store import open_store

    report = veredito.evaluate(
        [TRIPLE, {**TRIPLE, "answer": "Você tem 7 dias para desistir."},
         {**TRIPLE, "answer": "O prazo é de 7 dias, e a multa é de 12% sobre o valor."}],
        judge="rules",
    )  # fmt: skip
    url = f"sqlite:///{tmp_path / 'v.db'}"
    store = open_store(url)
    store.write([v.model_dump_json().encode() for v in report])
    store.close()
    with server(tmp_path, "--store", url, VEREDITO_INGEST_TOKENS="") as s:
        status, page, _ = call(s.base, "GET", "/v1/verdicts?confidence=0.8", token=None)
        sure = [v["id"] for v in report if (v.hallucination_confidence or 0) >= 0.8]
        assert status == 200 and sorted(v["id"] for v in page["items"]) == sorted(sure)
        assert call(s.base, "GET", "/v1/verdicts?confidence=2", token=None)[0] == 400
        first = report[0]
        html = call(s.base, "GET", f"/verdicts/{first.id}?app=", token=None)[1]
        assert "confiança" in html
        listing = call(s.base, "GET", "/?period=&confidence=0.8", token=None)[1]
        assert 'value="0.8" selected' in listing
