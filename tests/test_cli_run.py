"""``veredito run``: in-process, no broker, against the local test server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.llm_server import ServerThread
from veredito.cli import main

EXAMPLES = ROOT / "examples" / "triples.jsonl"


def lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_run_writes_one_verdict_per_line_in_order(
    llm_server: ServerThread,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("VEREDITO_LLM_BASE_URL", llm_server.base_url)
    source = tmp_path / "in.jsonl"
    rows = [
        json.dumps({"id": f"t{i}", "query": "q", "context": ["c"], "answer": f"Frase {i}."})
        for i in range(30)
    ]
    rows.insert(10, "{não é json")
    rows.insert(20, json.dumps({"id": "sem-contexto", "query": "q", "answer": "a"}))
    rows.append(
        json.dumps(
            {
                "id": "inventa",
                "query": "q",
                "context": ["c"],
                "answer": "Veja a Lei 1.234/2020 #invent:LEI.",
            }
        )
    )
    source.write_text("\n".join(rows) + "\n", encoding="utf-8")
    out = tmp_path / "out" / "verdicts.jsonl"

    code = main(["run", str(source), "--out", str(out), "--concurrency", "4", "--no-progress"])

    assert code == 0
    verdicts = lines(out)
    assert len(verdicts) == 33
    ids = [v["id"] for v in verdicts]
    assert ids[:10] == [f"t{i}" for i in range(10)]
    assert verdicts[10]["status"] == "rejected"
    assert verdicts[10]["error"]["message"].startswith("line 11: not valid JSON")  # type: ignore[index]
    assert verdicts[20]["id"] == "sem-contexto" and verdicts[20]["status"] == "rejected"
    assert "line 21: context: missing" in verdicts[20]["error"]["message"]  # type: ignore[index]
    assert verdicts[-1]["hallucinated"] is True and verdicts[-1]["categories"] == {"LEI": 1}
    err = capsys.readouterr().err
    assert "answers         " in err and "33" in err
    assert "rejected" in err and "category LEI     1" in err


def test_fail_on_hallucination_sets_the_exit_code(
    llm_server: ServerThread, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VEREDITO_LLM_BASE_URL", llm_server.base_url)
    clean = tmp_path / "clean.jsonl"
    clean.write_text(json.dumps({"query": "q", "context": ["c"], "answer": "Certo."}) + "\n")
    dirty = tmp_path / "dirty.jsonl"
    dirty.write_text(
        json.dumps({"query": "q", "context": ["c"], "answer": "X #invent:LEI."}) + "\n"
    )
    out = str(tmp_path / "o.jsonl")
    assert main(["run", str(clean), "--out", out, "--fail-on-hallucination", "--no-progress"]) == 0
    assert main(["run", str(dirty), "--out", out, "--fail-on-hallucination", "--no-progress"]) == 1
    assert main(["run", str(dirty), "--out", out, "--no-progress"]) == 0


def test_stdin_to_stdout_as_a_real_process(llm_server: ServerThread) -> None:
    env = {**os.environ, "VEREDITO_LLM_BASE_URL": llm_server.base_url}
    data = EXAMPLES.read_text(encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "veredito", "run", "-", "--prompts", "claims"],
        input=data,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    verdicts = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [v["id"] for v in verdicts] == [json.loads(line)["id"] for line in data.splitlines()]
    assert all(v["status"] == "ok" and v["faithfulness"] is None for v in verdicts)
    assert "veredito summary" in proc.stderr


def test_unreadable_input_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(tmp_path / "nope.jsonl")]) == 3
    assert "cannot read" in capsys.readouterr().err


def test_bad_setting_names_the_setting(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(EXAMPLES), "--prompts", "claims,resumo"]) == 2
    assert "invalid setting prompts" in capsys.readouterr().err


def test_a_rules_engine_that_does_not_exist_stops_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VEREDITO_RULES_ENGINE", "fast")
    out = tmp_path / "v.jsonl"
    assert main(["run", str(EXAMPLES), "--judge", "rules", "--out", str(out)]) == 2
    assert "invalid setting rules_engine" in capsys.readouterr().err
    assert not out.exists()  # nothing judged with an engine nobody asked for
    monkeypatch.setenv("VEREDITO_RULES_ENGINE", " RE ")  # as the scan reads it: case and spaces
    assert main(["run", str(EXAMPLES), "--judge", "rules", "--out", str(out)]) == 0


def test_secrets_and_answers_stay_out_of_logs(
    llm_server: ServerThread,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("VEREDITO_LLM_BASE_URL", llm_server.base_url)
    monkeypatch.setenv("VEREDITO_LLM_API_KEY", "sk-segredo-123")
    source = tmp_path / "in.jsonl"
    answer = "O CPF 529.982.247-25 consta. #llm:bad_twice"
    source.write_text(json.dumps({"query": "q", "context": ["c"], "answer": answer}) + "\n")
    caplog.set_level("INFO")
    main(["run", str(source), "--out", str(tmp_path / "o.jsonl"), "--no-progress"])
    logged = "\n".join(r.getMessage() + str(r.__dict__) for r in caplog.records if r.levelno >= 20)
    assert "evaluation failed" in logged
    for secret in ("sk-segredo-123", "529.982.247-25", "Desculpe", "Você é um avaliador"):
        assert secret not in logged


def test_run_to_dev_null_is_not_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--out /dev/null`` (a benchmark, a dry run) cannot be fsynced; nothing to make durable."""
    monkeypatch.delenv("VEREDITO_LLM_BASE_URL", raising=False)
    monkeypatch.delenv("VEREDITO_LLM_API_KEY", raising=False)
    code = main(["run", str(EXAMPLES), "--out", os.devnull, "--judge", "rules", "--no-progress"])
    assert code == 0
