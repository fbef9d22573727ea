"""The ``veredito`` command line (spec §11).

Exit codes: 0 done; 1 ``--fail-on-hallucination`` and an answer was hallucinated; 2 bad usage or
configuration (the message says what to change); 3 the input could not be read; 4 the verdict
store stayed unreachable for a minute.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from pydantic import ValidationError

from veredito.worker.logs import configure_logging

if TYPE_CHECKING:
    from veredito.producer.mapping import Mapper
    from veredito.producer.sampling import Dedup
from veredito.store import StoreUnavailable
from veredito.worker.settings import Settings

if TYPE_CHECKING:
    from veredito.store import Store

__all__ = ["main"]

log = logging.getLogger("veredito")


def _settings(args: argparse.Namespace, **extra: Any) -> Settings:
    overrides = {
        "judge": getattr(args, "judge", None),
        "prompts": getattr(args, "prompts", None),
        "concurrency": getattr(args, "concurrency", None),
        "metrics_port": getattr(args, "metrics_port", None),
        "broker_url": getattr(args, "broker", None),
        "log_level": getattr(args, "log_level", None),
        "sample_rate": getattr(args, "sample", None),
        "dedup_window": getattr(args, "dedup_window", None),
        **extra,
    }
    return Settings(**{k: v for k, v in overrides.items() if v is not None})


def _add_judge_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--judge", choices=["auto", "llm", "rules"], help="default: auto")
    p.add_argument("--prompts", help="claims,faithfulness (default both)")
    p.add_argument("--concurrency", type=int, help="evaluations in flight (default 128)")
    p.add_argument("--metrics-port", type=int, help="serve Prometheus metrics on this port")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="veredito", description="Hallucination judge for Brazilian-Portuguese RAG answers."
    )
    parser.add_argument("--log-level", help="DEBUG, INFO, WARNING ... (default INFO)")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="evaluate a JSONL file in-process, no broker")
    run.add_argument("input", help="JSONL file of triples, or - for stdin")
    run.add_argument("--out", help="write verdicts here as JSONL (default stdout)")
    run.add_argument(
        "--to",
        help="store the verdicts (as well as --out): file:PATH.jsonl, sqlite:///PATH.db, "
        "postgresql://...",
    )
    _add_judge_options(run)
    run.add_argument(
        "--fail-on-hallucination",
        action="store_true",
        help="exit 1 when any answer is hallucinated",
    )
    run.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")

    produce = sub.add_parser("produce", help="publish triples to the broker")
    produce.add_argument(
        "input",
        help="JSONL file of triples, or - for stdin; with --follow a "
        "path or a glob (quote it) of files to follow as they grow",
    )
    produce.add_argument(
        "--follow", action="store_true", help="keep reading as the files grow, across rotation"
    )
    produce.add_argument(
        "--checkpoint",
        type=Path,
        help="--follow: where to keep the offsets (default ~/.local/state/veredito/follow-*.json)",
    )
    produce.add_argument(
        "--broker", help="broker URL (default VEREDITO_BROKER_URL or local RabbitMQ)"
    )
    _add_intake_options(produce)
    produce.add_argument(
        "--map",
        action="append",
        default=[],
        metavar="FIELD=EXPRESSION",
        help="read a contract field with a JMESPath expression (repeatable), or name a preset: "
        "ragas, aferiq, langchain (see docs/ingestion.md)",
    )

    worker = sub.add_parser("worker", help="run a Celery worker")
    _add_judge_options(worker)
    worker.add_argument("--broker", help="broker URL")

    results = sub.add_parser("results", help="consume verdicts into a store (JSONL, SQL)")
    results.add_argument(
        "--to",
        help="file:PATH.jsonl (the default, stdout when no path), sqlite:///PATH.db, "
        "postgresql://USER@HOST/DB",
    )
    results.add_argument("--out", help="append verdicts to this JSONL file (= --to file:PATH)")
    results.add_argument(
        "--batch", type=int, default=1000, help="verdicts per commit (default 1000; 1-10000)"
    )
    results.add_argument("--broker", help="broker URL")
    results.add_argument("--limit", type=int, help="stop after writing this many verdicts")
    results.add_argument(
        "--idle-timeout", type=float, help="stop after this many seconds without a verdict"
    )
    serve = sub.add_parser("serve", help="HTTP ingest: triples and aferiq-eval traces in")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on")
    serve.add_argument("--port", type=int, default=8080)
    serve.add_argument("--broker", help="broker URL")
    serve.add_argument(
        "--store",
        help="serve the verdicts API and the review page from this store "
        "(sqlite:///PATH.db or postgresql://...; default VEREDITO_STORE)",
    )
    _add_intake_options(serve)
    serve.add_argument(
        "--insecure-no-auth",
        action="store_true",
        help="accept requests without a token (ingest when VEREDITO_INGEST_TOKENS is unset, "
        "reads when VEREDITO_READ_TOKENS is unset)",
    )

    replay = sub.add_parser("replay", help="send dead-lettered triples back to the queue")
    replay.add_argument("--broker", help="broker URL")
    replay.add_argument("--limit", type=int, help="replay at most this many")

    calibrate = sub.add_parser("calibrate", help="precision, recall and F1 on a labelled set")
    calibrate.add_argument(
        "labelled", nargs="*", help="JSONL of triples with labels (spec §12); several with --fit"
    )
    calibrate.add_argument(
        "--fit",
        action="store_true",
        help="fit a calibration of the judges' confidences (spec §17) on the labelled answers "
        "(files or --from-store) and write it to --out; VEREDITO_CALIBRATION=FILE uses it",
    )
    calibrate.add_argument("--out", help="with --fit: the calibration file to write")
    calibrate.add_argument("--name", help="with --fit: the name verdicts carry (judge.calibration)")
    calibrate.add_argument(
        "--from-store",
        metavar="URL",
        help="measure the stored verdicts against reviewers' labels instead (spec §16): the "
        "agreement of GET /v1/agreement, from the uniform slice",
    )
    calibrate.add_argument("--app", help="with --from-store: one app")
    calibrate.add_argument("--since", help="with --from-store: verdicts since (7d, ISO 8601)")
    calibrate.add_argument("--until", help="with --from-store: verdicts before")
    calibrate.add_argument("--judge", choices=["auto", "llm", "rules"], help="default: auto")
    calibrate.add_argument("--prompts", help="claims,faithfulness (default both)")
    calibrate.add_argument("--concurrency", type=int, help="evaluations in flight")
    calibrate.add_argument("--json", action="store_true", help="print the report as JSON")
    calibrate.add_argument(
        "--by-verdict",
        action="store_true",
        help="claims by gold and predicted verdict (grounded, partial, invented, contradicted)",
    )
    labels = sub.add_parser("labels", help="reviewers' labels (spec §16)")
    labels_sub = labels.add_subparsers(dest="labels_command", required=True)
    export = labels_sub.add_parser(
        "export", help="reviewed answers as a labelled set (spec §12), corrections applied"
    )
    export.add_argument("--from", dest="source", required=True, help="the store's URL")
    export.add_argument("--to", dest="target", required=True, help="the JSONL file to write")
    export.add_argument("--app", help="one app")
    export.add_argument("--since", help="verdicts since (7d, ISO 8601)")
    export.add_argument("--until", help="verdicts before")
    export.add_argument(
        "--slice",
        choices=["all", "uniform"],
        default="all",
        help="every reviewed answer (default), or those of the uniform slice only",
    )
    return parser


def _add_intake_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sample",
        type=float,
        metavar="RATE",
        help="keep this share of valid triples, decided by a hash of the id (default 1)",
    )
    parser.add_argument(
        "--dedup-window",
        type=float,
        metavar="SECONDS",
        help="drop a triple whose id was accepted this recently (shared through Redis when "
        "VEREDITO_REDIS_URL or a Redis broker is set; default off)",
    )


def _dedup(settings: Settings) -> Dedup | None:
    from veredito.producer.sampling import Dedup

    if not settings.dedup_window:
        return None
    return Dedup(settings.dedup_window, settings.marks_url)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = _settings(args)
    except ValidationError as exc:
        for error in exc.errors():
            field = ".".join(str(p) for p in error["loc"]) or "settings"
            print(f"veredito: invalid setting {field}: {error['msg']}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level)
    if settings.calibration:
        from veredito.worker.confidence import CalibrationError, load_calibration

        try:
            load_calibration(settings.calibration)
        except CalibrationError as exc:
            print(f"veredito: VEREDITO_CALIBRATION: {exc}", file=sys.stderr)
            return 2
    handler = {
        "run": _run,
        "produce": _produce,
        "worker": _worker,
        "results": _results,
        "calibrate": _calibrate,
        "replay": _replay,
        "serve": _serve,
        "labels": _labels,
    }
    return handler[args.command](args, settings)


def _open_input(path: str) -> IO[str] | None:
    from veredito.producer.reader import open_input

    try:
        return open_input(path)
    except OSError as exc:
        print(f"veredito: cannot read {path}: {exc.strerror}", file=sys.stderr)
        return None


def _open_store(url: str, patience: float | None = 60.0) -> Store | None:
    """The store ``url`` names, or None after saying on stderr why it cannot be opened. A
    database that does not answer (restarting, not up yet) is tried again with backoff for
    ``patience`` seconds (None: until it answers, or a signal stops the process)."""
    import time

    from veredito.store import StoreError, open_store

    deadline = None if patience is None else time.monotonic() + patience
    delay = 0.5
    while True:
        try:
            return open_store(url)
        except StoreError as exc:
            print(f"veredito: {exc}", file=sys.stderr)
            return None
        except StoreUnavailable as exc:
            if deadline is not None and time.monotonic() + delay > deadline:
                print(f"veredito: the store does not answer: {exc}", file=sys.stderr)
                return None
            log.warning("the store does not answer yet (%s); trying again in %.1f s", exc, delay)
            time.sleep(delay)
            delay = min(delay * 2, 10.0)


def _run(args: argparse.Namespace, settings: Settings) -> int:
    from tqdm import tqdm

    from veredito.producer.reader import read_lines
    from veredito.worker.judges import JudgeNotConfigured
    from veredito.worker.metrics import Metrics
    from veredito.worker.run import run_lines

    stream = _open_input(args.input)
    if stream is None:
        return 3
    metrics = Metrics(
        app_label_limit=settings.app_label_limit, alert_confidence=settings.alert_confidence
    )
    if settings.metrics_port:
        metrics.serve(settings.metrics_port)
    total = None
    if args.input != "-":
        with Path(args.input).open("rb") as f:
            total = sum(1 for line in f if line.strip())
    out: IO[str] | None = sys.stdout
    store = None
    if args.to:  # with --out too, both get every verdict
        store = _open_store(args.to)
        if store is None:
            return 2
        out = None
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        out = Path(args.out).open("w", encoding="utf-8")  # noqa: SIM115 - closed below
    bar = tqdm(total=total, unit="answer", file=sys.stderr, disable=args.no_progress or None)
    try:
        summary = asyncio.run(
            run_lines(
                read_lines(stream),
                settings,
                args.input,
                out,
                metrics=metrics,
                progress=bar,
                blocking=args.input == "-",
                store=store,
            )
        )
    except JudgeNotConfigured as exc:
        print(f"veredito: {exc}", file=sys.stderr)
        return 2
    except StoreUnavailable as exc:
        print(f"veredito: the store stayed away: {exc}", file=sys.stderr)
        return 4
    finally:
        bar.close()
        if out is not None and out is not sys.stdout:
            out.close()
        if store is not None:
            store.close()
        if stream is not sys.stdin:
            stream.close()
    sys.stderr.write(summary.table())
    if args.fail_on_hallucination and summary.hallucinated:
        return 1
    return 0


def _produce(args: argparse.Namespace, settings: Settings) -> int:
    from kombu.exceptions import OperationalError

    from veredito.producer.mapping import Mapper, MappingError, parse_maps
    from veredito.producer.publish import produce
    from veredito.producer.reader import read_lines

    try:
        mapper = Mapper(parse_maps(args.map)) if args.map else None
    except MappingError as exc:
        print(f"veredito: {exc}", file=sys.stderr)
        return 2
    if args.follow:
        return _follow(args, settings, mapper)
    stream = _open_input(args.input)
    if stream is None:
        return 3
    try:
        report = produce(
            read_lines(stream),
            settings.broker_url,
            args.input,
            settings.limits,
            sample_rate=settings.sample_rate,
            dedup=_dedup(settings),
            mapper=mapper,
            idle=_nothing_waiting(stream) if stream is sys.stdin else None,
        )
    except (OperationalError, ConnectionError, OSError) as exc:
        print(f"veredito: cannot publish to the broker: {exc}", file=sys.stderr)
        return 2
    finally:
        if stream is not sys.stdin:
            stream.close()
    skipped = (
        f"; {report.sampled_out} sampled out, {report.duplicates} duplicates dropped"
        if settings.sample_rate < 1 or settings.dedup_window
        else ""
    )
    print(
        f"published {report.accepted + report.rejected}: "
        f"{report.accepted} accepted, {report.rejected} rejected{skipped}"
    )
    for problem in report.problems:
        print(f"  rejected {problem}", file=sys.stderr)
    if report.stopped_by is not None:
        resume = (
            f" (resume with: tail -n +{report.last_line + 1} {args.input} | veredito produce -)"
            if args.input != "-"
            else ""
        )
        print(
            f"veredito: stopped by signal {report.stopped_by} after line {report.last_line} of "
            f"{args.input}; every line up to it is in the queue, none after it was sent{resume}",
            file=sys.stderr,
        )
        return 128 + report.stopped_by
    return 0


def _nothing_waiting(stream: IO[str]) -> Callable[[], bool]:
    """For a stream (``tail -f app.log | veredito produce -``): True when no more input is
    there right now, so what was read is confirmed before waiting for more."""
    import select

    def idle() -> bool:
        try:
            ready, _, _ = select.select([stream], [], [], 0)
        except (OSError, ValueError):  # not selectable: confirm each line
            return True
        return not ready

    return idle


def _follow(args: argparse.Namespace, settings: Settings, mapper: Mapper | None) -> int:
    from kombu.exceptions import OperationalError

    from veredito.producer.follow import checkpoint_for, follow_files

    checkpoint = args.checkpoint or checkpoint_for(args.input)

    def ready() -> None:
        print(f"veredito: following {args.input} (checkpoint {checkpoint})", file=sys.stderr)
        sys.stderr.flush()

    try:
        report = follow_files(
            args.input,
            settings.broker_url,
            checkpoint,
            settings.limits,
            sample_rate=settings.sample_rate,
            dedup=_dedup(settings),
            mapper=mapper,
            on_ready=ready,
        )
    except (OperationalError, ConnectionError) as exc:
        print(f"veredito: cannot publish to the broker: {exc}", file=sys.stderr)
        return 2
    print(
        f"published {report.accepted + report.rejected}: {report.accepted} accepted, "
        f"{report.rejected} rejected; stopped following, offsets saved in {checkpoint}"
    )
    return 0


def _worker(args: argparse.Namespace, settings: Settings) -> int:
    from veredito.producer import topology
    from veredito.worker.celery_app import app, configure

    if settings.resolved_judge() == "llm" and not settings.llm_configured:
        from veredito.worker.judges import NO_LLM_MESSAGE

        print(f"veredito: {NO_LLM_MESSAGE}", file=sys.stderr)
        return 2
    if settings.metrics_port is None:
        settings = settings.model_copy(update={"metrics_port": 9808})
    configure(settings)
    app.worker_main(
        [
            "worker",
            "--pool=threads",
            f"--concurrency={settings.concurrency}",
            f"--queues={topology.TRIPLES_QUEUE}",
            f"--loglevel={settings.log_level}",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            f"--hostname=veredito-{os.getpid()}@%h",  # several workers on one host
        ]
    )
    return 0


def _results(args: argparse.Namespace, settings: Settings) -> int:
    from tqdm import tqdm

    from veredito.worker.results import collect

    if args.out and args.to:
        print("veredito: --out and --to name two outputs; choose one", file=sys.stderr)
        return 2
    if not 1 <= args.batch <= 10_000:
        print("veredito: --batch: from 1 to 10000 verdicts per commit", file=sys.stderr)
        return 2
    # a sink outlives a database restart: it waits for the database, however long
    store = _open_store(args.to or f"file:{args.out or '-'}", patience=None)
    if store is None:
        return 2
    bar = tqdm(total=args.limit, unit="verdict", file=sys.stderr, disable=None)
    try:
        sink = collect(
            settings.broker_url,
            store,
            limit=args.limit,
            idle_timeout=args.idle_timeout,
            batch_size=args.batch,
            progress=bar,
            transport_options=settings.broker_transport_options(),
            transport=settings.broker_transport(),
        )
    finally:
        bar.close()
        store.close()
    rate = f", {sink.written / sink.seconds:.0f}/s" if sink.seconds else ""
    print(
        f"wrote {sink.written} verdicts ({sink.duplicates} duplicates skipped) "
        f"in {sink.seconds:.2f} s{rate}",
        file=sys.stderr,
    )
    return 0


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    from veredito.producer.ingest import TokenError, Tokens
    from veredito.producer.serve import IngestConfig
    from veredito.serving.guard import HostPolicy, serve_forever
    from veredito.web.app import make_app
    from veredito.web.reviewing import ReviewTokens

    tokens = settings.ingest_tokens.get_secret_value() if settings.ingest_tokens else None
    read_tokens = settings.read_tokens.get_secret_value() if settings.read_tokens else None
    review_spec = settings.review_tokens.get_secret_value() if settings.review_tokens else None
    try:
        ingest_tokens = Tokens(tokens)
        reading_tokens = Tokens(read_tokens, "VEREDITO_READ_TOKENS")
        reviewers = ReviewTokens(review_spec)
    except TokenError as exc:
        print(f"veredito: {exc}", file=sys.stderr)
        return 2
    loopback = args.host in ("127.0.0.1", "::1", "localhost")
    open_reads = not reading_tokens
    config = IngestConfig(
        broker_url=settings.broker_url,
        tokens=ingest_tokens,
        insecure_no_auth=args.insecure_no_auth,
        max_bytes=settings.ingest_max_bytes,
        max_backlog=settings.ingest_max_backlog,
        backlog_interval=settings.ingest_backlog_interval,
        trace_timeout=settings.ingest_trace_timeout,
        limits=settings.limits,
        sample_rate=settings.sample_rate,
        dedup=_dedup(settings),
        max_items=settings.ingest_max_items,
        otlp_max_spans_per_request=settings.otlp_max_spans_per_request,
        otlp_max_traces=settings.otlp_max_traces,
        otlp_max_spans=settings.otlp_max_spans,
        otlp_max_bytes=settings.otlp_max_bytes,
        body_timeout=settings.serve_body_timeout,
        # on loopback, a request that needs no token (open reads, ingest with
        # --insecure-no-auth) must name a loopback host: DNS rebinding otherwise lets any web
        # page the operator opens in a browser read or post through it
        hosts=HostPolicy.from_setting(
            settings.allowed_hosts,
            open_reads=loopback
            and (
                (open_reads and bool(args.store or settings.store))
                or (args.insecure_no_auth and not ingest_tokens)
            ),
        ),
    )
    review = None
    store_url = args.store or settings.store
    if store_url:
        from veredito.store import SQLStore
        from veredito.web.reading import Review

        if open_reads and not loopback and not args.insecure_no_auth:
            print(
                "veredito: no read tokens: set VEREDITO_READ_TOKENS to serve verdicts on "
                f"{args.host}, or pass --insecure-no-auth to let anyone read them",
                file=sys.stderr,
            )
            return 2
        store = _open_store(store_url, patience=None)
        if store is None:
            return 2
        if not isinstance(store, SQLStore):
            store.close()
            print(
                "veredito: --store needs a database (sqlite:///PATH.db or postgresql://...); "
                "write one with `veredito run --to` or `veredito results --to`",
                file=sys.stderr,
            )
            return 2
        review = Review(
            store,
            reading_tokens,
            open_reads=open_reads,
            reviewers=reviewers,
            sample_share=settings.review_sample,
            teach_every=settings.review_teach_every,
            window=settings.review_window,
            refresh_seconds=settings.review_refresh,
            precision_floor=settings.review_precision_floor,
            min_labels=settings.review_min_labels,
        )
        if settings.session_secret is not None:
            review.session_secret = settings.session_secret.get_secret_value().encode()
    try:
        app = make_app(config, review=review)
    except ValueError as exc:
        print(f"veredito: {exc}", file=sys.stderr)
        return 2
    parts = []
    if review is not None:
        parts.append("review page and verdicts API")
    parts.append("ingest" if config.tokens or config.insecure_no_auth else "ingest off")

    def ready() -> None:
        print(
            f"veredito serve: listening on http://{args.host}:{args.port} ({', '.join(parts)})",
            flush=True,
        )

    asyncio.run(
        serve_forever(
            app,
            args.host,
            args.port,
            header_timeout=settings.serve_header_timeout,
            shutdown_timeout=settings.shutdown_grace,
            ready=ready,
        )
    )
    return 0


def _replay(args: argparse.Namespace, settings: Settings) -> int:
    from veredito.worker.replay import replay

    report = replay(settings.broker_url, limit=args.limit)
    print(
        f"replayed {report.replayed} dead letters; {report.repeats} repeated records dropped; "
        f"{report.left} left (not triples)"
    )
    return 0


def _calibrate(args: argparse.Namespace, settings: Settings) -> int:
    import json

    from veredito.worker.calibrate import LabelledSetError, calibrate
    from veredito.worker.judges import JudgeNotConfigured

    if args.fit:
        return _fit(args, settings)
    if args.from_store:
        return _calibrate_from_store(args, settings)
    if len(args.labelled) != 1:
        print("veredito: calibrate needs one labelled file or --from-store URL", file=sys.stderr)
        return 2
    try:
        report = calibrate(args.labelled[0], settings)
    except OSError as exc:
        print(f"veredito: cannot read {args.labelled[0]}: {exc.strerror}", file=sys.stderr)
        return 3
    except (LabelledSetError, JudgeNotConfigured) as exc:
        print(f"veredito: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.as_dict(), ensure_ascii=False, indent=2))
    elif args.by_verdict:
        print(report.by_verdict(), end="")
    else:
        print(report.table(), end="")
    return 0


def _review_filters(args: argparse.Namespace) -> Any:
    from veredito.store import Filters, parse_when

    times = {}
    for name in ("since", "until"):
        value = getattr(args, name, None)
        try:
            times[name] = parse_when(value) if value else None
        except (ValueError, OverflowError) as exc:
            raise ValueError(f"--{name}: {exc}") from None
    return Filters(app=args.app, since=times["since"], until=times["until"])


def _open_sql(url: str) -> Any:
    from veredito.store import SQLStore

    store = _open_store(url, patience=None)
    if store is None:
        return None
    if not isinstance(store, SQLStore):
        store.close()
        print("veredito: labels live in a database store (sqlite:/// or postgresql://)",
              file=sys.stderr)  # fmt: skip
        return None
    return store


def _calibrate_from_store(args: argparse.Namespace, settings: Settings) -> int:
    import json

    from veredito.labels import agreement_table
    from veredito.web.reviewing import agreement_of

    try:
        filters = _review_filters(args)
    except ValueError as exc:
        print(f"veredito: {exc}", file=sys.stderr)
        return 2
    store = _open_sql(args.from_store)
    if store is None:
        return 2
    judge = args.judge if args.judge in ("llm", "rules") else None
    try:
        result = agreement_of(store, filters, judge, settings.review_sample)
    finally:
        store.close()
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=2))
    else:
        print(agreement_table(result), end="")
    return 0


def _fit(args: argparse.Namespace, settings: Settings) -> int:
    import json
    import os

    from veredito.worker.calibrate import LabelledSetError, load_labelled
    from veredito.worker.fitting import (
        fit_calibration,
        llm_examples,
        reliability_table,
        rules_examples,
    )

    if not args.out:
        print("veredito: --fit needs --out FILE", file=sys.stderr)
        return 2
    if bool(args.labelled) == bool(args.from_store):
        print("veredito: --fit takes labelled files or --from-store URL", file=sys.stderr)
        return 2
    records: list[dict[str, Any]] = []
    verdicts: list[dict[str, Any]] = []
    sources: list[str] = []
    if args.from_store:
        from veredito.labels import labelled_record

        try:
            filters = _review_filters(args)
        except ValueError as exc:
            print(f"veredito: {exc}", file=sys.stderr)
            return 2
        store = _open_sql(args.from_store)
        if store is None:
            return 2
        try:
            for verdict, rows, _ in store.labelled(filters):
                records.append(labelled_record(verdict, rows))
                verdicts.append(verdict)
        finally:
            store.close()
        sources.append("store")
    else:
        for path in args.labelled:
            try:
                records += load_labelled(path)
            except OSError as exc:
                print(f"veredito: cannot read {path}: {exc.strerror}", file=sys.stderr)
                return 3
            except LabelledSetError as exc:
                print(f"veredito: {path}: {exc}", file=sys.stderr)
                return 2
            sources.append(Path(path).name)
    if not records:
        print("veredito: no labelled answers to fit on", file=sys.stderr)
        return 2
    try:
        body = fit_calibration(
            rules_examples(records),
            llm_examples(records, verdicts) if verdicts else None,
            args.name or Path(args.out).stem,
            sources,
        )
    except RuntimeError as exc:
        print(f"veredito: {exc}", file=sys.stderr)
        return 2
    target = Path(args.out)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    partial.write_text(json.dumps(body, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    with partial.open("rb") as f:
        os.fsync(f.fileno())
    partial.replace(target)
    for judge_name, report in body["held_out"].items():
        print(f"{judge_name}: held-out quarter of the answers (not fitted on)")
        print(reliability_table(report["all"]))
        print()
    print(
        f"wrote {target} ({body['examples']['rules']} rules claims, "
        f"{body['examples']['llm']} LLM claims)"
    )
    return 0


def _labels(args: argparse.Namespace, settings: Settings) -> int:
    import json
    import os

    from veredito.labels import labelled_record

    try:
        filters = _review_filters(args)
    except ValueError as exc:
        print(f"veredito: {exc}", file=sys.stderr)
        return 2
    store = _open_sql(args.source)
    if store is None:
        return 2
    try:
        reviewed = store.labelled(filters)
    finally:
        store.close()
    target = Path(args.target)
    target.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    partial = target.with_name(target.name + ".partial")
    with partial.open("w", encoding="utf-8") as out:
        for verdict, rows, key in reviewed:
            if args.slice == "uniform" and key >= settings.review_sample:
                continue
            out.write(json.dumps(labelled_record(verdict, rows), ensure_ascii=False) + "\n")
            written += 1
        out.flush()
        os.fsync(out.fileno())
    partial.replace(target)  # a reader never sees half a file
    print(f"wrote {written} reviewed answers to {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
