"""The Python API (veredito.evaluate, aevaluate, Judge, Report), veredito.testing and the pytest
fixture: offline with the rules judge, and against the local test judge."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import veredito
from tests.conftest import ROOT
from tests.llm_server import ServerThread
from veredito.testing import assert_grounded

EXAMPLES = [json.loads(line) for line in (ROOT / "examples" / "triples.jsonl").open()]
PRAZO = {
    "query": "Em quanto tempo posso desistir de uma compra online?",
    "context": ["Art. 49 do CDC: o consumidor pode desistir do contrato no prazo de 7 dias."],
    "answer": "Você tem 30 dias para desistir da compra online.",
}


def test_evaluate_judges_dicts_in_order_with_the_rules_judge() -> None:
    report = veredito.evaluate(EXAMPLES, judge="rules")
    assert [v.id for v in report] == [t["id"] for t in EXAMPLES]
    assert report.summary.answers == len(EXAMPLES)
    assert {v.judge.kind for v in report if v.judge} == {"rules"}
    assert 0 < len(report.hallucinated) < len(EXAMPLES)
    assert report.hallucination_rate == pytest.approx(len(report.hallucinated) / report.summary.ok)
    # the same verdicts as `veredito run` writes, but the timings
    assert report[1].categories == {"PRAZO_VALOR": 1}


def test_three_ways_to_pass_triples() -> None:
    as_lists = veredito.evaluate(
        queries=[PRAZO["query"]], contexts=[PRAZO["context"]], answers=[PRAZO["answer"]],
        judge="rules",
    )  # fmt: skip
    as_tuples = veredito.evaluate([(PRAZO["query"], PRAZO["context"], PRAZO["answer"])],
                                  judge="rules")  # fmt: skip
    as_aliases = veredito.evaluate(
        [{"question": PRAZO["query"], "contexts": PRAZO["context"], "response": PRAZO["answer"]}],
        judge="rules",
    )
    ids = {r[0].id for r in (as_lists, as_tuples, as_aliases)}
    assert len(ids) == 1  # the same triple, the same deterministic id
    assert as_lists[0].categories == {"PRAZO_VALOR": 1}
    with pytest.raises(ValueError, match="differ in length"):
        veredito.evaluate(queries=["a", "b"], contexts=[["c"]], answers=["d"], judge="rules")
    with pytest.raises(TypeError, match="not both"):
        veredito.evaluate([PRAZO], answers=["x"], judge="rules")


def test_a_bad_triple_is_a_rejected_verdict_naming_its_field() -> None:
    report = veredito.evaluate([PRAZO, {"query": "q", "answer": "a"}], judge="rules")
    assert [v.status for v in report] == ["ok", "rejected"]
    assert report[1].error is not None and "context" in report[1].error.message


def test_it_works_inside_a_running_loop_as_in_a_notebook() -> None:
    async def notebook_cell() -> veredito.Report:
        return veredito.evaluate([PRAZO], judge="rules")  # sync call, loop already running

    assert asyncio.run(notebook_cell())[0].hallucinated


def test_aevaluate() -> None:
    report = asyncio.run(veredito.aevaluate([PRAZO, EXAMPLES[0]], judge="rules"))
    assert [v.hallucinated for v in report] == [True, False]


def test_report_writes_jsonl_and_shows_itself(tmp_path: Path) -> None:
    hostile = {**PRAZO, "query": "<script>alert(1)</script>"}
    report = veredito.evaluate([hostile, EXAMPLES[0]], judge="rules")
    path = report.to_jsonl(tmp_path / "out" / "v.jsonl")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["id"] for line in lines] == [v.id for v in report]
    assert "veredito summary" in repr(report) and "hallucinated" in repr(report)
    page = report._repr_html_()
    assert "<script>" not in page and "&lt;script&gt;" in page
    rows = report.records()
    assert rows[0]["categories"] == "PRAZO_VALOR" and rows[0]["unsupported"] == 1
    frame = report.to_pandas()  # pandas is in [dev]; users without it get a clear ImportError
    assert list(frame["id"]) == [v.id for v in report]
    assert list(frame["hallucinated"]) == [True, False]


def test_a_judge_is_reused_with_one_session(
    llm_server: ServerThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VEREDITO_LLM_BASE_URL", llm_server.base_url)
    with veredito.Judge("llm", prompts="claims", concurrency=4) as judge:
        first = judge.evaluate([PRAZO])
        session = judge._state["session"]
        second = judge.evaluate(EXAMPLES[:3])
        assert judge._state["session"] is session
        assert asyncio.run(judge.aevaluate([EXAMPLES[3]]))[0].judge.kind == "llm"  # type: ignore[union-attr]
    assert llm_server.script.served == 5
    assert first[0].judge is not None and first[0].judge.kind == "llm"
    assert len(second) == 3
    assert session.closed


def test_assert_grounded_lists_what_the_context_does_not_support() -> None:
    assert_grounded(EXAMPLES[0]["query"], EXAMPLES[0]["context"], EXAMPLES[0]["answer"])
    with pytest.raises(AssertionError) as failed:
        assert_grounded(PRAZO["query"], PRAZO["context"], PRAZO["answer"])
    message = str(failed.value)
    assert message.startswith("1 of 1 claims not supported by the context:")
    assert "[contradicted, PRAZO_VALOR] Você tem 30 dias" in message
    assert "30 dias" in message.split("rule findings:")[1]
    verdict = assert_grounded(PRAZO["query"], PRAZO["context"], PRAZO["answer"],
                              allow={"PRAZO_VALOR"})  # fmt: skip
    assert verdict.hallucinated  # tolerated, not hidden


def test_the_pytest_fixture_is_a_shared_rules_judge(veredito_judge: veredito.Judge) -> None:
    assert isinstance(veredito_judge, veredito.Judge)
    assert veredito_judge.settings.resolved_judge() == "rules"
    assert_grounded(EXAMPLES[0]["query"], EXAMPLES[0]["context"], EXAMPLES[0]["answer"],
                    judge=veredito_judge)  # fmt: skip


def test_the_notebook_example_runs(tmp_path: Path) -> None:
    """examples/notebook.py, as a user runs it: a fresh interpreter, the rules judge."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith(("VEREDITO_", "OPENAI_"))}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "notebook.py")],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "retriever A:" in done.stdout and "retriever B:" in done.stdout
