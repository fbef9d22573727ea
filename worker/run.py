"""``veredito run``: evaluate a JSONL file in-process, with no broker (the embedded default).

Lines are read lazily and evaluated with at most ``concurrency`` in flight; verdicts are written
in input order as JSONL, each line flushed as soon as it and every line before it are done.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import sys
import time
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import IO, Any

from veredito.producer.reader import InputLine
from veredito.store import Store, StoreUnavailable
from veredito.worker.judges import build_judge, build_spending, new_session
from veredito.worker.metrics import Metrics
from veredito.worker.pipeline import Outcome, Pipeline
from veredito.worker.settings import Settings
from veredito.worker.verdict import CATEGORIES, VERDICTS, Verdict

__all__ = [
    "Summary",
    "build_pipeline",
    "close_pipeline",
    "envelope_from_line",
    "run_lines",
    "write_patiently",
]

log = logging.getLogger(__name__)


def envelope_from_line(item: InputLine, input_name: str) -> dict[str, Any]:
    """The same envelope a producer publishes (see :mod:`veredito.producer.publish`)."""
    source = {"input": input_name, "line": item.line}
    if item.error is not None:
        return {"triple": None, "source": source, "error": item.error, "raw": item.text}
    return {"triple": item.value, "source": source}


@dataclass
class Summary:
    answers: int = 0
    ok: int = 0
    rejected: int = 0
    failed: int = 0
    hallucinated: int = 0
    score_sum: float = 0.0
    scored: int = 0
    categories: Counter[str] = field(default_factory=Counter)
    verdicts: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)

    def add(self, verdict: Verdict) -> None:
        self.answers += 1
        if verdict.status == "rejected":
            self.rejected += 1
        elif verdict.status == "failed":
            self.failed += 1
        else:
            self.ok += 1
        if verdict.error is not None and len(self.errors) < 10:
            self.errors.append(f"{verdict.id}: {verdict.error.kind}: {verdict.error.message}")
        if verdict.status != "ok":
            return
        self.hallucinated += verdict.hallucinated
        self.categories.update(verdict.categories)
        self.verdicts.update(c.verdict for c in verdict.claims)
        if verdict.score is not None:
            self.score_sum += verdict.score
            self.scored += 1

    def table(self) -> str:
        share = self.hallucinated / self.ok if self.ok else 0.0
        mean = f"{self.score_sum / self.scored:.3f}" if self.scored else "-"
        rows = [
            ("answers", str(self.answers)),
            ("evaluated (ok)", str(self.ok)),
            ("hallucinated", f"{self.hallucinated} ({share:.1%} of ok)"),
            ("mean score", mean),
            ("rejected", str(self.rejected)),
            ("failed", str(self.failed)),
        ]
        rows += [(f"claims {v}", str(self.verdicts[v])) for v in VERDICTS if self.verdicts[v]]
        rows += [
            (f"category {c}", str(self.categories[c])) for c in CATEGORIES if self.categories[c]
        ]
        width = max(len(name) for name, _ in rows)
        lines = ["", "veredito summary", "-" * (width + 12)]
        lines += [f"{name:<{width}}  {value}" for name, value in rows]
        if self.errors:
            lines.append("first problems:")
            lines += [f"  {e}" for e in self.errors]
        return "\n".join(lines) + "\n"


async def _aiter(lines: Iterable[InputLine], blocking: bool) -> AsyncIterator[InputLine]:
    iterator = iter(lines)
    while True:
        item = await asyncio.to_thread(next, iterator, None) if blocking else next(iterator, None)
        if item is None:
            return
        yield item


def build_pipeline(settings: Settings, session: Any, metrics: Metrics | None = None) -> Pipeline:
    """The pipeline ``run`` and the library use: the judge the settings ask for, prices and
    budgets, what verdicts carry."""
    return Pipeline(
        build_judge(settings, session, metrics),
        settings.limits,
        metrics,
        keep_input=settings.verdict_input,
        spending=build_spending(settings),
        redact_stored=settings.redact_stored,
    )


async def close_pipeline(pipeline: Pipeline) -> None:
    await pipeline.judge.aclose()
    await pipeline.spending.aclose()


async def run_lines(
    lines: Iterable[InputLine],
    settings: Settings,
    input_name: str,
    out: IO[str] | None,
    *,
    metrics: Metrics | None = None,
    progress: Any = None,
    blocking: bool = False,
    store: Store | None = None,
    pipeline: Pipeline | None = None,
    on_verdict: Callable[[Verdict], None] | None = None,
) -> Summary:
    """Evaluate ``lines``; ``blocking`` says reading them may wait (a pipe), so read in a thread.
    Verdicts go to ``out`` as JSONL, to ``store`` (committed every 500 and at the end) and to
    ``on_verdict``, in input order. A ``pipeline`` given is used (and left open); otherwise one is
    built for the call, with its own HTTP session."""
    if pipeline is None:
        async with new_session(settings) as session:
            own = build_pipeline(settings, session, metrics)
            try:
                return await run_lines(
                    lines, settings, input_name, out, metrics=metrics, progress=progress,
                    blocking=blocking, store=store, pipeline=own, on_verdict=on_verdict,
                )  # fmt: skip
            finally:
                await close_pipeline(own)
    summary = Summary()
    batch: list[bytes] = []

    def commit() -> None:
        if store is not None and batch:
            write_patiently(store, batch)
            batch.clear()

    limit = asyncio.Semaphore(settings.concurrency)
    ready = pipeline

    async def evaluate(item: InputLine) -> Outcome:
        async with limit:
            return await ready.evaluate(envelope_from_line(item, input_name))

    pending: deque[asyncio.Task[Outcome]] = deque()
    window = settings.concurrency * 4

    def write(outcome: Outcome) -> None:
        if out is not None or store is not None:
            line = outcome.verdict.model_dump_json(exclude_none=False)
            if out is not None:
                out.write(line + "\n")
                out.flush()
            if store is not None:
                batch.append(line.encode())
                if len(batch) >= 500:
                    commit()
        summary.add(outcome.verdict)
        if on_verdict is not None:
            on_verdict(outcome.verdict)
        if metrics is not None:
            metrics.record_verdict(outcome.verdict)
        if progress is not None:
            progress.update(1)

    try:
        async for item in _aiter(lines, blocking):
            pending.append(asyncio.create_task(evaluate(item)))
            while len(pending) >= window or (pending and pending[0].done()):
                write(await pending.popleft())
        while pending:
            write(await pending.popleft())
        commit()
    finally:
        for task in pending:
            task.cancel()
    if out is not None and out is not sys.stdout:
        _sync(out)
    return summary


def write_patiently(store: Store, bodies: list[bytes], patience: float = 60.0) -> None:
    """``store.write`` retried with backoff while the database is away, for ``patience`` s."""
    deadline = time.monotonic() + patience
    delay = 0.5
    while True:
        try:
            store.write(bodies)
            return
        except StoreUnavailable:
            if time.monotonic() + delay > deadline:
                raise
            log.warning("the store is away; retrying in %.1f s", delay)
            time.sleep(delay)
            delay = min(delay * 2, 10.0)


def _sync(out: IO[str]) -> None:
    """A file on disk before we say done; nothing to do for /dev/null, a pipe, a StringIO."""
    try:
        fd = out.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
        return
    if stat.S_ISREG(os.fstat(fd).st_mode):
        os.fsync(fd)
