"""Cross-check of the LLM by the rules detectors, the offline default, and `veredito calibrate`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from tests.conftest import ROOT
from tests.llm_server import ServerThread
from veredito.cli import main
from veredito.worker.judges import build_judge, new_session
from veredito.worker.metrics import Metrics
from veredito.worker.pipeline import Pipeline
from veredito.worker.settings import Settings

TRIPLE = {
    "query": "Qual o CNPJ e o prazo?",
    "context": ["Comercial Ipê Ltda., CNPJ 11.222.333/0001-81. Prazo de devolução: 7 dias."],
    "answer": "O CNPJ é 11.222.333/0001-82. O prazo de devolução é de 7 dias.",
}


async def judge_with(
    server: ServerThread, mode: str
) -> tuple[dict[str, object], CollectorRegistry]:
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    settings = Settings(llm_base_url=server.base_url, cross_check=mode, prompts="claims")
    async with new_session(settings) as session:
        pipeline = Pipeline(build_judge(settings, session, metrics), settings.limits, metrics)
        outcome = await pipeline.evaluate({"triple": TRIPLE})
    return outcome.verdict.model_dump(), registry


async def test_flag_records_the_disagreement_and_keeps_the_llm_verdict(
    llm_server: ServerThread,
) -> None:
    verdict, registry = await judge_with(llm_server, "flag")
    claims = verdict["claims"]
    assert [c["verdict"] for c in claims] == ["grounded", "grounded"]  # the LLM said so
    assert verdict["rule_findings"] == [
        {
            "category": "CNPJ_CPF_RG",
            "text": "11.222.333/0001-82",
            "kind": "invalid_check_digit",
            "claim_idx": 0,
        }
    ]
    assert (
        registry.get_sample_value("veredito_rule_disagreements_total", {"category": "CNPJ_CPF_RG"})
        == 1
    )
    assert verdict["hallucinated"] is False


async def test_override_turns_the_claim(llm_server: ServerThread) -> None:
    verdict, _ = await judge_with(llm_server, "override")
    first = verdict["claims"][0]
    assert (first["verdict"], first["category"], first["source"]) == (
        "contradicted",
        "CNPJ_CPF_RG",
        "rules",
    )
    assert verdict["hallucinated"] is True and verdict["categories"] == {"CNPJ_CPF_RG": 1}
    assert verdict["score"] == 0.5


async def test_off_runs_no_rules(llm_server: ServerThread) -> None:
    verdict, registry = await judge_with(llm_server, "off")
    assert verdict["rule_findings"] == []
    assert (
        registry.get_sample_value("veredito_rule_disagreements_total", {"category": "CNPJ_CPF_RG"})
        is None
    )


def test_run_without_llm_uses_the_rules_judge(tmp_path: Path) -> None:
    out = tmp_path / "v.jsonl"
    assert (
        main(["run", str(ROOT / "examples" / "triples.jsonl"), "--out", str(out), "--no-progress"])
        == 0
    )
    verdicts = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(verdicts) == 26
    assert {v["judge"]["kind"] for v in verdicts} == {"rules"}
    assert all(v["status"] == "ok" for v in verdicts)
    assert any(v["hallucinated"] for v in verdicts) and not all(v["hallucinated"] for v in verdicts)
    assert all(c["source"] == "rules" for v in verdicts for c in v["claims"])


def test_judge_llm_without_endpoint_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(ROOT / "examples" / "triples.jsonl"), "--judge", "llm"]) == 2
    assert "VEREDITO_LLM_BASE_URL" in capsys.readouterr().err


def test_calibrate_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "calibrate",
                str(ROOT / "tests" / "data" / "devset.jsonl"),
                "--judge",
                "rules",
                "--json",
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["records"] >= 150
    assert report["answer_level"]["f1"] >= 0.95
    assert set(report["categories"]) >= {"LEI", "PRAZO_VALOR", "GEOGRAFIA_BR"}
    assert {"gold", "predicted", "count"} <= set(report["verdict_confusion"][0])


def test_calibrate_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["calibrate", str(ROOT / "tests" / "data" / "holdout.jsonl"), "--judge", "rules"]) == 0
    )
    out = capsys.readouterr().out
    assert "answer level" in out and "CNPJ_CPF_RG" in out and "span verdict" in out


def test_calibrate_names_a_bad_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps(
            {"query": "q", "context": ["c"], "answer": "a", "labels": {"hallucinated": True}}
        )
        + "\n"
        + json.dumps({"query": "q", "context": ["c"], "answer": "a"})
        + "\n"
    )
    assert main(["calibrate", str(bad), "--judge", "rules"]) == 2
    assert "line 2: labels.hallucinated" in capsys.readouterr().err
