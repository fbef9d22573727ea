"""The review loop on PostgreSQL at a million verdicts: the agreement, the queue, and the sink
beside them (issue 18).

    .venv/bin/python bench/review_speed.py [--verdicts 1000000] [--labels 20000] [--keep]
        [--db veredito_bench_review] [--calls 200] [--sink 50000] [--skip agreement,queue,sink]

1. Fills the database ``--db`` (created; dropped first unless ``--keep`` finds it filled alike:
   same sizes, seed and migration files, and the rows to show for it) with ``--verdicts``
   distinct verdicts, written with ``Store.write`` in batches of 1,000 as the results sink writes
   them: ``--pool`` triples of ``bench/corpus.py`` judged by the rules judge (about 4 KB of JSON
   each with their input, 6.7 claims), each written many times under its own id, app and time:
   five apps (40/22/16/13/9 %), evaluated over the last 60 days, 80 % under an LLM judge's name
   (the claims' source ``llm``), 1 % failed. Then ``--labels`` submissions, through
   ``add_labels``, over answers of the busiest app, each served to its reviewer first (a
   ``review_served`` row, some time in the three days after the answer came, never within the
   last hour: no lease holds) as the queue does: 85 % of the uniform slice (``sample_key <
   0.05``, in key order, the queue's order; one in ten a second reviewer on an answer already
   labelled), 15 % hallucinated answers outside it (chosen to teach). A submission marks every
   claim right or wrong with the verdict to put instead (3 % of the grounded claims wrong, 25 %
   of the others), says whether the answer is hallucinated one time in seven and adds a missed
   span one in thirty.
2. Measures:
   - ``agreement``: ``agreement_of`` (what ``GET /v1/agreement`` computes) for the busiest app
     over 30 days, judge None; 5 runs; and ``refresh_precision`` (the metrics loop's minute);
   - ``queue``: ``next_for_review`` for a new reviewer of the busiest app (and of every app),
     ``--calls`` calls, each recording what it served;
   - ``sink``: ``Store.write`` of 50,000 new verdicts in batches of 1,000 from one thread,
     alone, then beside a reviewer loop (``refresh_precision``, then ten
     ``next_for_review`` + ``add_labels``, over and over) in another process (as ``serve`` is to
     ``results``), then beside the same loop in a thread of the writer's process.
3. Removes what the measurements added (their reviewers' labels and served rows, the new
   verdicts), so that ``--keep`` finds the database as filled; without ``--keep`` the database
   is dropped at the end.

Targets (issue 18): the agreement under 1 s, the queue under 50 ms a call.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import multiprocessing
import random
import re
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import corpus  # noqa: E402
from veredito.labels import Label, sample_key  # noqa: E402
from veredito.store import Filters, StoreUnavailable, parse_when  # noqa: E402
from veredito.store.sql import SQLStore, migrations, open_sql_store  # noqa: E402

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
DB = "veredito_bench_review"  # --db
URL = f"postgresql://postgres@127.0.0.1:5432/{DB}"
APPS = (
    ("sac-varejo", 0.40),
    ("rh-folha", 0.22),
    ("fiscal-irpf", 0.16),
    ("saude-plano", 0.13),
    ("gov-beneficios", 0.09),
)
BUSIEST = APPS[0][0]
SHARE = 0.05
DAYS = 60
BATCH = 1000
REVIEWERS = ("ana", "bruno", "carla", "diego", "elisa")
CATEGORIES = ("LEI", "CNPJ_CPF_RG", "ENTIDADE_BR", "PRAZO_VALOR", "POLITICA", "GEOGRAFIA_BR")
# what the measurements add, removed at the start and the end of every run
MEASURED_REVIEWERS = "bench-%"
NEW_IDS = ("new-", "new.")  # [from, to): ids of the sink measurement's verdicts
_PLACE = re.compile(r"@@(ID|APP|AT)@@")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- verdicts --------------------------------------------------------------------------------
class Template:
    """One judged verdict as the worker serialises it, with its id, app and time left open: a
    body is three string joins, not a pydantic dump."""

    def __init__(self, body: str, verdict: dict[str, Any]) -> None:
        self.parts = _PLACE.split(body)
        assert sorted(self.parts[1::2]) == ["APP", "AT", "ID"], self.parts[1::2]
        self.hallucinated = verdict["hallucinated"] is True
        self.ok = verdict["status"] == "ok"
        self.claims: list[dict[str, Any]] = verdict["claims"]
        self.answer: str = (verdict.get("input") or {}).get("answer") or ""

    def body(self, verdict_id: str, app: str, at: str) -> bytes:
        values = {"ID": verdict_id, "APP": app, "AT": at}
        parts = self.parts
        out = [parts[0]]
        for i in range(1, len(parts), 2):
            out.append(values[parts[i]])
            out.append(parts[i + 1])
        return "".join(out).encode()


async def _judged(n: int, seed: int) -> list[Any]:
    from veredito.worker.judges.rules import RulesJudge
    from veredito.worker.pipeline import Pipeline

    pipeline = Pipeline(RulesJudge())
    out = []
    for triple in corpus.triples(n, seed=seed):
        triple["metadata"] = {"app": "@@APP@@"}
        out.append((await pipeline.evaluate({"triple": triple})).verdict)
    return out


def templates(n: int, seed: int) -> tuple[list[Template], list[Template], list[Template]]:
    """(rules judge, LLM judge, failed) templates of ``n`` judged triples."""
    from veredito.worker.verdict import JudgeInfo, VerdictError

    rules, llm, failed = [], [], []
    rng = random.Random(seed)
    for verdict in asyncio.run(_judged(n, seed)):
        base = verdict.model_copy(update={"id": "@@ID@@", "evaluated_at": "@@AT@@"})
        rules.append(Template(base.model_dump_json(), base.model_dump(mode="json")))
        as_llm = base.model_copy(
            update={
                "judge": JudgeInfo(kind="llm", model="gpt-4o-mini", prompts={"claims": "v3"}),
                "claims": [c.model_copy(update={"source": "llm"}) for c in base.claims],
                "usage": {
                    "prompt_tokens": rng.randint(1500, 2400),
                    "completion_tokens": rng.randint(200, 500),
                },
                "cost_usd": round(rng.uniform(0.0003, 0.0007), 6),
            }
        )
        llm.append(Template(as_llm.model_dump_json(), as_llm.model_dump(mode="json")))
        if len(failed) < n // 20 + 1:
            gone = base.model_copy(
                update={
                    "status": "failed",
                    "error": VerdictError(
                        kind="judge_timeout", message="the judge did not answer in 60 s"
                    ),
                    "judge": JudgeInfo(kind="llm", model="gpt-4o-mini"),
                    "claims": [],
                    "score": None,
                    "hallucinated": False,
                    "categories": {},
                    "rule_findings": [],
                    "reasoning": None,
                }
            )
            failed.append(Template(gone.model_dump_json(), gone.model_dump(mode="json")))
    return rules, llm, failed


class Verdicts:
    """Distinct verdicts, drawn from the templates: id, app, judge and time."""

    def __init__(self, pool: tuple[list[Template], list[Template], list[Template]], seed: int):
        self.rules, self.llm, self.failed = pool
        self.rng = random.Random(seed)
        self.apps = [a for a, _ in APPS]
        self.weights = [w for _, w in APPS]

    def make(self, verdict_id: str, now: float, span: float) -> tuple[bytes, str, Template, float]:
        rng = self.rng
        app = rng.choices(self.apps, self.weights)[0]
        draw = rng.random()
        kind = self.failed if draw < 0.01 else self.llm if draw < 0.81 else self.rules
        template = kind[rng.randrange(len(kind))]
        moment = now - rng.uniform(0, span)
        at = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(moment)) + (
            f".{rng.randrange(10**6):06d}Z"
        )
        return template.body(verdict_id, app, at), app, template, moment


# -- the database ----------------------------------------------------------------------------
def retrying(call: Callable[[], Any], what: str) -> Any:
    """``call``, again while the server is away (restarted by someone else's test) for up to
    two minutes: the fill's writes are safe to repeat (a stored id is skipped)."""
    deadline = time.monotonic() + 120
    while True:
        try:
            return call()
        except StoreUnavailable as exc:
            if time.monotonic() > deadline:
                raise
            log(f"{what}: {exc}; again in 2 s")
            time.sleep(2)


def admin(statement: str) -> None:
    import psycopg

    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(statement)  # type: ignore[arg-type]


def query(sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(URL, autocommit=True) as conn:
        cur = conn.execute(sql, params)  # type: ignore[arg-type]
        return cur.fetchall() if cur.description is not None else []


def exists() -> bool:
    import psycopg

    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        return (
            conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DB,)).fetchone()
            is not None
        )


def schema_hash() -> str:
    text = "".join(sql for _, _, sql in migrations("postgresql"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def kept(args: argparse.Namespace) -> bool:
    """The database holds what this run would fill it with (same sizes, seed and schema files)."""
    if not exists():
        return False
    try:
        meta = dict(query("SELECT key, value FROM bench_review"))
    except Exception:
        return False
    want = {
        "verdicts": str(args.verdicts), "labels": str(args.labels), "seed": str(args.seed),
        "pool": str(args.pool), "schema": schema_hash(),
    }  # fmt: skip
    if meta != want:
        log(f"--keep: the database was filled otherwise ({meta}); filling it again")
        return False
    clean()
    (verdicts,) = query("SELECT COUNT(*) FROM verdicts")[0]
    (submissions,) = query(
        "SELECT COUNT(DISTINCT submission) FROM labels WHERE reviewer NOT LIKE %s",
        (MEASURED_REVIEWERS,),
    )[0]
    if (verdicts, submissions) != (args.verdicts, args.labels):
        log(f"--keep: {verdicts} verdicts and {submissions} submissions; filling it again")
        return False
    return True


def clean() -> None:
    """Remove what measurements added."""
    import psycopg

    with psycopg.connect(URL, autocommit=True) as conn:
        conn.execute("DELETE FROM labels WHERE reviewer LIKE %s", (MEASURED_REVIEWERS,))
        conn.execute("DELETE FROM review_served WHERE reviewer LIKE %s", (MEASURED_REVIEWERS,))
        conn.execute("DELETE FROM verdicts WHERE id >= %s AND id < %s", NEW_IDS)
        conn.execute("VACUUM (ANALYZE) verdicts, claims, labels, review_served")


def fill(args: argparse.Namespace, pool: tuple[list[Template], ...]) -> dict[str, Any]:
    admin(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    admin(f"CREATE DATABASE {DB}")
    store = open_sql_store(URL)
    maker = Verdicts(pool, args.seed)  # type: ignore[arg-type]
    now = time.time()
    busiest: list[tuple[float, str, Template, float]] = []  # sample key, id, template, time
    started = time.perf_counter()
    write_s = 0.0
    for start in range(0, args.verdicts, BATCH):
        bodies = []
        for i in range(start, min(args.verdicts, start + BATCH)):
            verdict_id = f"v{i:09d}"
            body, app, template, moment = maker.make(verdict_id, now, DAYS * 86400)
            bodies.append(body)
            if app == BUSIEST:
                busiest.append((sample_key(app, verdict_id), verdict_id, template, moment))
        t = time.perf_counter()
        written, stored = retrying(lambda: store.write(bodies), "write")  # noqa: B023
        write_s += time.perf_counter() - t
        assert written + stored == len(bodies), (written, stored, len(bodies))
        if (start // BATCH) % 100 == 99:
            done = start + BATCH
            log(f"{done:,} verdicts, {done / (time.perf_counter() - started):,.0f}/s")
    verdicts_s = time.perf_counter() - started
    log(f"{args.verdicts:,} verdicts in {verdicts_s:.0f} s; labels ...")
    started = time.perf_counter()
    rows = label(store, busiest, args.labels, args.seed)
    labels_s = time.perf_counter() - started
    log(f"{args.labels:,} submissions ({rows:,} label rows) in {labels_s:.0f} s; vacuum ...")
    started = time.perf_counter()
    query("VACUUM (ANALYZE) verdicts, claims, labels, review_served")
    vacuum_s = time.perf_counter() - started
    query("CREATE TABLE bench_review (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    for key, value in (
        ("verdicts", args.verdicts), ("labels", args.labels), ("seed", args.seed),
        ("pool", args.pool), ("schema", schema_hash()),
    ):  # fmt: skip
        query("INSERT INTO bench_review VALUES (%s, %s)", (key, str(value)))
    store.close()
    return {
        "verdicts_s": round(verdicts_s),
        "verdicts_per_s": round(args.verdicts / verdicts_s),
        "store_write_per_s": round(args.verdicts / write_s),
        "labels_s": round(labels_s),
        "label_rows": rows,
        "vacuum_analyze_s": round(vacuum_s),
    }


def submission(rng: random.Random, template: Template) -> list[Label]:
    """What a reviewer says of one answer: every claim right or wrong, sometimes the answer."""
    out = []
    for idx, claim in enumerate(template.claims):
        grounded = claim["verdict"] == "grounded"
        if rng.random() >= (0.03 if grounded else 0.25):
            out.append(Label("claim", idx, True))
        elif grounded:
            out.append(Label("claim", idx, False, "invented", rng.choice(CATEGORIES)))
        else:
            out.append(Label("claim", idx, False, "grounded"))
    if rng.random() < 1 / 30 and len(template.answer) > 80:
        start = rng.randrange(0, len(template.answer) - 60)
        text = template.answer[start : start + 40].strip()
        if text:
            out.append(Label("missed", None, None, "invented", rng.choice(CATEGORIES), text))
    if not out or rng.random() < 1 / 7:
        said = template.hallucinated if rng.random() < 0.9 else not template.hallucinated
        out.append(Label("answer", hallucinated=said))
    return out


def label(
    store: SQLStore, busiest: list[tuple[float, str, Template, float]], n: int, seed: int
) -> int:
    """``n`` submissions over the busiest app's answers, each served first; label rows."""
    import psycopg

    rng = random.Random(seed + 1)
    uniform = sorted(b for b in busiest if b[0] < SHARE and b[2].ok)
    teach = [b for b in busiest if b[0] >= SHARE and b[2].ok and b[2].hallucinated]
    n_teach = round(n * 0.15)
    n_uniform = n - n_teach
    first = min(round(n_uniform * 0.9), int(len(uniform) * 0.9))  # a tenth of the slice left
    plan: list[tuple[str, str, tuple[float, str, Template, float]]] = []
    labelled_by: dict[str, list[str]] = {}
    for i in range(first):
        reviewer = REVIEWERS[i % len(REVIEWERS)]
        plan.append((reviewer, "uniform", uniform[i]))
        labelled_by[uniform[i][1]] = [reviewer]
    while len(plan) < min(n_uniform, first * len(REVIEWERS)):  # second opinions
        answer = uniform[rng.randrange(first)]
        others = [r for r in REVIEWERS if r not in labelled_by[answer[1]]]
        if not others:
            continue
        reviewer = rng.choice(others)
        labelled_by[answer[1]].append(reviewer)
        plan.append((reviewer, "uniform", answer))
    for answer in rng.sample(teach, min(n_teach, len(teach))):
        cats = " ".join(sorted({c.get("category") or "GENERICA" for c in answer[2].claims
                                if c["verdict"] != "grounded"})) or "GENERICA"  # fmt: skip
        plan.append((rng.choice(REVIEWERS), f"rare_category:{cats.split()[0]}", answer))
    served = []
    rows = 0
    latest = time.time() - 3600  # nothing served within the queue's lease (15 minutes)
    for reviewer, reason, (_, verdict_id, template, moment) in plan:
        labels = submission(rng, template)
        rows += len(labels)
        stored = retrying(
            lambda: store.add_labels(BUSIEST, verdict_id, reviewer, labels),  # noqa: B023
            "add_labels",
        )
        assert stored is not None, verdict_id
        # served (and labelled) some time after the answer came, not all just now
        at = min(latest, moment + rng.uniform(600, 3 * 86400))
        served.append((reviewer, BUSIEST, verdict_id, reason, _stamp(at)))
    with psycopg.connect(URL, autocommit=True) as conn, conn.transaction(), conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO review_served (reviewer, app, verdict_id, reason, served_at) "
            "VALUES (%s, %s, %s, %s, %s::timestamptz) ON CONFLICT DO NOTHING",
            served,
        )
        cur.execute(
            "UPDATE labels l SET created_at = s.served_at + interval '3 minutes' "
            "FROM review_served s WHERE s.reviewer = l.reviewer AND s.app = l.app "
            "AND s.verdict_id = l.verdict_id"
        )
    return rows


def _stamp(moment: float) -> str:
    return (
        time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(moment)) + f".{int(moment % 1 * 1e6):06d}Z"
    )


# -- measurements ----------------------------------------------------------------------------
def timed(call: Callable[[], Any], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        out.append(time.perf_counter() - started)
    return out


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def measure_agreement(store: SQLStore) -> dict[str, Any]:
    from prometheus_client import CollectorRegistry

    from veredito.web.reviewing import (
        AgreementCache,
        ReviewMetrics,
        agreement_of,
        refresh_precision,
    )

    since = parse_when("30d")
    filters = Filters(app=BUSIEST, since=since)
    result = agreement_of(store, filters, None, SHARE)
    runs = timed(lambda: agreement_of(store, filters, None, SHARE), 5)  # cold: every answer read
    # serve's way: a cache of each answer's share, warmed by the minute's refresh (here: no new
    # label between two calls; a new label costs its answer's reading again)
    cache = AgreementCache()
    agreement_of(store, filters, None, SHARE, cache)
    warm = timed(lambda: agreement_of(store, filters, None, SHARE, cache), 5)
    metrics = ReviewMetrics(CollectorRegistry())
    refresh = timed(lambda: refresh_precision(store, metrics, since, SHARE), 3)
    refresh_warm = timed(lambda: refresh_precision(store, metrics, since, SHARE, cache), 3)
    return {
        "warm_median_s": round(statistics.median(warm), 3),
        "warm_max_s": round(max(warm), 3),
        "refresh_precision_warm_median_s": round(statistics.median(refresh_warm), 3),
        "answers_uniform": result["uniform"]["answers"],
        "answers_chosen": result["chosen_to_teach"]["answers"],
        "label_rows": result["labels"],
        "precision": result["uniform"]["answer_level"]["precision"],
        "median_s": round(statistics.median(runs), 3),
        "max_s": round(max(runs), 3),
        "runs_s": [round(r, 3) for r in runs],
        "refresh_precision_median_s": round(statistics.median(refresh), 3),
        "refresh_precision_runs_s": [round(r, 3) for r in refresh],
    }


def measure_queue(store: SQLStore, app: str | None, reviewer: str, calls: int) -> dict[str, Any]:
    reasons: dict[str, int] = {}
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        got = store.next_for_review(reviewer, app, share=SHARE)
        times.append(time.perf_counter() - started)
        reason = "none" if got is None else got[2].split(":")[0]
        reasons[reason] = reasons.get(reason, 0) + 1
    return {
        "calls": calls,
        "median_ms": round(statistics.median(times) * 1000, 1),
        "p95_ms": round(p95(times) * 1000, 1),
        "max_ms": round(max(times) * 1000, 1),
        "served": reasons,
    }


def reviewer_loop(url: str, name: str, stop: Any, counts: Any) -> None:
    """Refresh the precision gauges, then ten answers from the queue labelled, over and over."""
    from prometheus_client import CollectorRegistry

    from veredito.web.reviewing import ReviewMetrics, refresh_precision

    store = open_sql_store(url)
    metrics = ReviewMetrics(CollectorRegistry())
    rng = random.Random(name)
    since = parse_when("30d")
    while not stop.is_set():
        refresh_precision(store, metrics, since, SHARE)
        counts[0] += 1
        for _ in range(10):
            got = store.next_for_review(name, BUSIEST, share=SHARE)
            if got is None:
                break
            verdict = store.get(got[1], got[0]) or {}
            claims = [c for c in verdict.get("claims") or [] if isinstance(c, dict)]
            labels = [Label("claim", i, rng.random() < 0.9) for i in range(len(claims))]
            store.add_labels(got[0], got[1], name, labels or [Label("answer", hallucinated=False)])
            counts[1] += 1
    store.close()


def measure_sink(
    store: SQLStore, maker: Verdicts, n: int, tag: str, loop: str | None
) -> dict[str, Any]:
    """``Store.write`` of ``n`` new verdicts in batches of 1,000, beside a reviewer loop in a
    ``process`` or a ``thread`` (or alone)."""
    now = time.time()
    bodies = [maker.make(f"new-{tag}-{i:07d}", now, 60)[0] for i in range(n)]
    stop: Any
    worker: Any = None
    if loop == "process":
        ctx = multiprocessing.get_context("spawn")
        stop, counts = ctx.Event(), ctx.Array("l", 2)
        worker = ctx.Process(target=reviewer_loop, args=(URL, f"bench-loop-{tag}", stop, counts))
    elif loop == "thread":
        stop, counts = threading.Event(), [0, 0]
        worker = threading.Thread(
            target=reviewer_loop, args=(URL, f"bench-loop-{tag}", stop, counts)
        )
    if worker is not None:
        worker.start()
        time.sleep(3.0)  # the loop is running (a spawned process imports first)
        before = (counts[0], counts[1])
    started = time.perf_counter()
    for i in range(0, n, BATCH):
        store.write(bodies[i : i + BATCH])
    elapsed = time.perf_counter() - started
    out: dict[str, Any] = {"per_s": round(n / elapsed), "seconds": round(elapsed, 1)}
    if worker is not None:
        during = (counts[0] - before[0], counts[1] - before[1])
        stop.set()
        worker.join()
        out["loop"] = loop
        out["loop_refreshes"] = during[0]
        out["loop_labelled"] = during[1]
    return out


def main() -> None:
    global DB, URL
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verdicts", type=int, default=1_000_000)
    parser.add_argument("--labels", type=int, default=20_000, help="label submissions")
    parser.add_argument("--keep", action="store_true", help="reuse the database when filled alike")
    parser.add_argument("--pool", type=int, default=5000, help="triples judged for the verdicts")
    parser.add_argument("--seed", type=int, default=18)
    parser.add_argument("--calls", type=int, default=200, help="next_for_review calls")
    parser.add_argument("--sink", type=int, default=50_000, help="verdicts written per sink run")
    parser.add_argument(
        "--skip", default="", help="comma-separated: agreement, queue, sink (not measured)"
    )
    parser.add_argument("--db", default="veredito_bench_review", help="the database's name")
    args = parser.parse_args()
    DB, URL = args.db, f"postgresql://postgres@127.0.0.1:5432/{args.db}"
    skip = set(filter(None, args.skip.split(",")))
    report: dict[str, Any] = {"verdicts": args.verdicts, "label_submissions": args.labels}
    log(f"judging {args.pool} triples for the verdicts' pool ...")
    pool = templates(args.pool, args.seed)
    if args.keep and kept(args):
        log("--keep: the database is filled already")
        report["fill"] = "kept"
    else:
        report["fill"] = fill(args, pool)
    store = open_sql_store(URL)
    (size,) = query("SELECT pg_size_pretty(pg_database_size(current_database()))")[0]
    counts = query(
        "SELECT (SELECT COUNT(*) FROM labels), (SELECT COUNT(*) FROM review_served), "
        "(SELECT COUNT(*) FROM verdicts WHERE app = %s AND sample_key < %s)", (BUSIEST, SHARE)
    )[0]  # fmt: skip
    report["database"] = {
        "size": size, "label_rows": counts[0], "served_rows": counts[1],
        "busiest_app_uniform_slice": counts[2],
    }  # fmt: skip
    log(f"database: {report['database']}")
    try:
        if "agreement" not in skip:
            log("agreement ...")
            report["agreement"] = measure_agreement(store)
            log(json.dumps(report["agreement"]))
        if "queue" not in skip:
            log("queue ...")
            report["queue_app"] = measure_queue(store, BUSIEST, "bench-queue-app", args.calls)
            log(json.dumps(report["queue_app"]))
            report["queue_all"] = measure_queue(store, None, "bench-queue-all", args.calls)
            log(json.dumps(report["queue_all"]))
        if "sink" not in skip:
            maker = Verdicts(pool, args.seed + 2)
            for tag, loop in (("alone", None), ("process", "process"), ("thread", "thread")):
                log(f"sink, {tag} ...")
                report[f"sink_{tag}"] = measure_sink(store, maker, args.sink, tag, loop)
                log(json.dumps(report[f"sink_{tag}"]))
    finally:
        store.close()
        if args.keep:
            log("removing what the measurements added ...")
            clean()
        else:
            admin(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    print(json.dumps(report, indent=2))
    print(table(report))


def table(report: dict[str, Any]) -> str:
    lines = [
        f"\n{report['verdicts']:,} verdicts, {report['label_submissions']:,} label submissions "
        f"({report['database']['label_rows']:,} label rows), database {report['database']['size']}",
        "",
        "| what | median | p95 / max | target |",
        "|---|---:|---:|---:|",
    ]
    if "agreement" in report:
        a = report["agreement"]
        lines.append(
            f"| agreement, {BUSIEST}, 30 days ({a['answers_uniform']:,} + "
            f"{a['answers_chosen']:,} answers) | {a['median_s']:.3f} s | max {a['max_s']:.3f} s "
            "| < 1 s |"
        )
        lines.append(
            f"| refresh_precision (every labelled app, llm and rules) | "
            f"{a['refresh_precision_median_s']:.3f} s | | |"
        )
    for key, what in (("queue_app", f"next_for_review, app {BUSIEST}"),
                      ("queue_all", "next_for_review, every app")):  # fmt: skip
        if key in report:
            q = report[key]
            lines.append(
                f"| {what} ({q['calls']} calls) | {q['median_ms']} ms | p95 {q['p95_ms']} ms "
                "| < 50 ms |"
            )
    for tag, what in (("alone", "alone"), ("process", "beside a reviewer loop (process)"),
                      ("thread", "beside a reviewer loop (thread)")):  # fmt: skip
        if f"sink_{tag}" in report:
            s = report[f"sink_{tag}"]
            extra = (
                f" ({s['loop_refreshes']} refreshes, {s['loop_labelled']} labelled)"
                if "loop" in s else ""
            )  # fmt: skip
            lines.append(f"| Store.write, batches of 1,000, {what}{extra} | {s['per_s']:,}/s | | |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
