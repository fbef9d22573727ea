"""The Python API: ``veredito.evaluate``, ``veredito.aevaluate``, ``veredito.Judge``, ``Report``.

The same engine as ``veredito run`` (:func:`veredito.worker.run.run_lines`): the same judges,
prompts, parsing, scoring and verdicts. A :class:`Judge` keeps one HTTP session and one event loop
of its own, in a background thread, so that it can be called from plain code, from a Jupyter
notebook (whose loop is already running) and from ``async`` code alike, and reused across calls.
"""

from __future__ import annotations

import asyncio
import html
import threading
from collections.abc import Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from veredito.producer.reader import InputLine
from veredito.worker.run import Summary, build_pipeline, close_pipeline, run_lines
from veredito.worker.settings import Settings
from veredito.worker.verdict import Verdict

__all__ = ["Judge", "Report", "aevaluate", "evaluate"]

JudgeKind = Literal["auto", "llm", "rules"]


@dataclass
class Report:
    """The verdicts of one call, in input order, and the summary ``veredito run`` prints."""

    verdicts: list[Verdict] = field(default_factory=list)
    summary: Summary = field(default_factory=Summary)

    def __len__(self) -> int:
        return len(self.verdicts)

    def __iter__(self) -> Any:
        return iter(self.verdicts)

    def __getitem__(self, index: int) -> Verdict:
        return self.verdicts[index]

    @property
    def hallucinated(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.hallucinated]

    @property
    def hallucination_rate(self) -> float:
        """Hallucinated answers among those judged (status ok)."""
        return self.summary.hallucinated / self.summary.ok if self.summary.ok else 0.0

    def confident(self, threshold: float = 0.8) -> list[Verdict]:
        """The hallucinated answers the judge is sure of: ``hallucination_confidence`` at or above
        ``threshold`` (spec §17; the alerts' default line is 0.8)."""
        return [
            v
            for v in self.verdicts
            if v.hallucinated
            and v.hallucination_confidence is not None
            and v.hallucination_confidence >= threshold
        ]

    def to_jsonl(self, path: str | Path) -> Path:
        """One verdict per line, as ``veredito run --out`` writes them."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("w", encoding="utf-8") as f:
            for verdict in self.verdicts:
                f.write(verdict.model_dump_json() + "\n")
        return target

    def records(self) -> list[dict[str, Any]]:
        """One flat row per verdict: what a table of answers needs."""
        rows = []
        for v in self.verdicts:
            rows.append(
                {
                    "id": v.id,
                    "app": v.app,
                    "status": v.status,
                    "hallucinated": v.hallucinated,
                    "hallucination_confidence": v.hallucination_confidence,
                    "score": v.score,
                    "categories": ", ".join(sorted(v.categories)),
                    "claims": len(v.claims),
                    "unsupported": sum(1 for c in v.claims if c.verdict != "grounded"),
                    "judge": v.judge.kind if v.judge else None,
                    "query": v.input.query if v.input else None,
                    "error": v.error.message if v.error else None,
                }
            )
        return rows

    def to_pandas(self) -> Any:
        """The records as a pandas DataFrame (pandas is optional: ``pip install pandas``)."""
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("Report.to_pandas() needs pandas: pip install pandas") from None
        return pd.DataFrame(self.records())

    def __repr__(self) -> str:
        return f"<veredito.Report: {len(self.verdicts)} answers>" + self.summary.table()

    def _repr_html_(self) -> str:
        """A notebook's view: the summary, then one row per answer (escaped)."""
        s = self.summary
        head = (
            f"<p><b>veredito</b>: {s.answers} answers, {s.ok} judged, "
            f"{s.hallucinated} hallucinated ({self.hallucination_rate:.1%}), "
            f"{s.rejected} rejected, {s.failed} failed</p>"
        )
        columns = [
            "id", "status", "hallucinated", "hallucination_confidence", "score", "categories",
            "query",
        ]  # fmt: skip
        rows = "".join(
            "<tr>" + "".join(f"<td>{html.escape(str(r[c] if r[c] is not None else ''))}</td>"
                             for c in columns) + "</tr>"
            for r in self.records()[:200]
        )  # fmt: skip
        table = (
            "<table><thead><tr>"
            + "".join(f"<th>{c}</th>" for c in columns)
            + f"</tr></thead><tbody>{rows}</tbody></table>"
        )
        more = f"<p>… and {len(self.verdicts) - 200} more</p>" if len(self.verdicts) > 200 else ""
        return head + table + more


def _values(
    triples: Iterable[Any] | None,
    queries: Sequence[str] | None,
    contexts: Sequence[Any] | None,
    answers: Sequence[str] | None,
) -> list[Any]:
    """The triples of a call: dicts (spec §3, aliases accepted), (query, context, answer) tuples,
    or three parallel lists."""
    if triples is not None:
        if queries is not None or contexts is not None or answers is not None:
            raise TypeError("pass triples, or queries=, contexts= and answers=, not both")
        values = []
        for item in triples:
            if isinstance(item, tuple | list) and len(item) == 3:
                values.append({"query": item[0], "context": item[1], "answer": item[2]})
            else:
                values.append(item)
        return values
    if queries is None or contexts is None or answers is None:
        raise TypeError("pass triples, or all three of queries=, contexts= and answers=")
    if not len(queries) == len(contexts) == len(answers):
        raise ValueError(
            f"queries, contexts and answers differ in length "
            f"({len(queries)}, {len(contexts)}, {len(answers)})"
        )
    return [
        {"query": q, "context": c, "answer": a}
        for q, c, a in zip(queries, contexts, answers, strict=True)
    ]


class Judge:
    """A judge configured once and reused: one HTTP session, one background event loop.

    ``kind``: ``"auto"`` (the LLM when one is configured, else the rules judge), ``"llm"`` or
    ``"rules"``. Any other setting of ``docs/configuration.md`` may be given by name, without the
    ``VEREDITO_`` prefix (``llm_model="gpt-4o-mini"``); the rest come from the environment.
    Close it with :meth:`close` (or use it as a context manager) to release the session."""

    def __init__(
        self,
        kind: JudgeKind = "auto",
        *,
        prompts: str | Sequence[str] | None = None,
        concurrency: int | None = None,
        **settings: Any,
    ) -> None:
        overrides: dict[str, Any] = {"judge": kind, **settings}
        if prompts is not None:
            overrides["prompts"] = prompts if isinstance(prompts, str) else ",".join(prompts)
        if concurrency is not None:
            overrides["concurrency"] = concurrency
        self.settings = Settings(**overrides)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._state: dict[str, Any] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<veredito.Judge {self.settings.resolved_judge()}>"

    # -- the background loop ---------------------------------------------------------------------
    def _submit(self, coro: Any) -> Future[Any]:
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(
                    target=self._loop.run_forever, name="veredito-judge", daemon=True
                )
                self._thread.start()
            loop = self._loop
        return asyncio.run_coroutine_threadsafe(coro, loop)

    async def _pipeline(self) -> Any:
        if "pipeline" not in self._state:
            from veredito.worker.judges import new_session

            session = new_session(self.settings)
            self._state["session"] = session
            self._state["pipeline"] = build_pipeline(self.settings, session)
        return self._state["pipeline"]

    async def _evaluate(self, values: list[Any], progress: Any = None) -> Report:
        pipeline = await self._pipeline()
        report = Report()
        lines = (InputLine(i, "", value) for i, value in enumerate(values, 1))
        report.summary = await run_lines(
            lines, self.settings, "api", None, pipeline=pipeline,
            on_verdict=report.verdicts.append, progress=progress,
        )  # fmt: skip
        return report

    # -- the API -----------------------------------------------------------------------------------
    def evaluate(
        self,
        triples: Iterable[Any] | None = None,
        *,
        queries: Sequence[str] | None = None,
        contexts: Sequence[Any] | None = None,
        answers: Sequence[str] | None = None,
    ) -> Report:
        """Judge, and wait: from plain code or from inside a running loop (a notebook)."""
        values = _values(triples, queries, contexts, answers)
        return self._submit(self._evaluate(values)).result()  # type: ignore[no-any-return]

    async def aevaluate(
        self,
        triples: Iterable[Any] | None = None,
        *,
        queries: Sequence[str] | None = None,
        contexts: Sequence[Any] | None = None,
        answers: Sequence[str] | None = None,
    ) -> Report:
        """Judge, awaiting: the work runs on the judge's own loop, never blocking yours."""
        values = _values(triples, queries, contexts, answers)
        future = self._submit(self._evaluate(values))
        return await asyncio.wrap_future(future)

    def close(self) -> None:
        """Release the HTTP session and stop the background loop."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None:
            return

        async def shutdown() -> None:
            pipeline = self._state.pop("pipeline", None)
            if pipeline is not None:
                await close_pipeline(pipeline)
            session = self._state.pop("session", None)
            if session is not None:
                await session.close()

        asyncio.run_coroutine_threadsafe(shutdown(), loop).result(timeout=30)
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(timeout=10)
        loop.close()

    def __enter__(self) -> Judge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Judge:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.close)


def _judge_for(
    judge: JudgeKind | Judge, prompts: Any, concurrency: int | None
) -> tuple[Judge, bool]:
    if isinstance(judge, Judge):
        if prompts is not None or concurrency is not None:
            raise TypeError("prompts= and concurrency= belong to the Judge you pass")
        return judge, False
    return Judge(judge, prompts=prompts, concurrency=concurrency), True


def evaluate(
    triples: Iterable[Any] | None = None,
    *,
    queries: Sequence[str] | None = None,
    contexts: Sequence[Any] | None = None,
    answers: Sequence[str] | None = None,
    judge: JudgeKind | Judge = "auto",
    prompts: str | Sequence[str] | None = None,
    concurrency: int | None = None,
) -> Report:
    """Judge triples and return a :class:`Report` (synchronous; works in a notebook too).

    ``triples``: dicts as in ``veredito run``'s input (``query``, ``context``, ``answer``, optional
    ``id`` and ``metadata``; aliases such as ``question``/``contexts``/``response`` accepted), or
    ``(query, context, answer)`` tuples; or pass ``queries=``, ``contexts=``, ``answers=``. A
    triple that breaks the contract becomes a ``rejected`` verdict naming its field, as in files.
    ``judge``: ``"auto"``, ``"llm"``, ``"rules"``, or a :class:`Judge` to reuse."""
    chosen, own = _judge_for(judge, prompts, concurrency)
    try:
        return chosen.evaluate(triples, queries=queries, contexts=contexts, answers=answers)
    finally:
        if own:
            chosen.close()


async def aevaluate(
    triples: Iterable[Any] | None = None,
    *,
    queries: Sequence[str] | None = None,
    contexts: Sequence[Any] | None = None,
    answers: Sequence[str] | None = None,
    judge: JudgeKind | Judge = "auto",
    prompts: str | Sequence[str] | None = None,
    concurrency: int | None = None,
) -> Report:
    """:func:`evaluate`, awaited."""
    chosen, own = _judge_for(judge, prompts, concurrency)
    try:
        return await chosen.aevaluate(triples, queries=queries, contexts=contexts, answers=answers)
    finally:
        if own:
            await asyncio.to_thread(chosen.close)
