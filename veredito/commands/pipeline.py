"""The pipeline's commands: ``run`` (in-process, no broker), ``produce`` and ``produce
--follow`` (triples onto the broker), ``worker``, ``results`` (verdicts off the broker) and
``replay``."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING

from veredito.commands.common import dedup_window, input_stream, verdict_store
from veredito.store import StoreUnavailable
from veredito.worker.settings import Settings

if TYPE_CHECKING:
    from veredito.producer.mapping import Mapper

log = logging.getLogger("veredito")


def run(args: argparse.Namespace, settings: Settings) -> int:
    from tqdm import tqdm

    from veredito.producer.reader import read_lines, with_release
    from veredito.worker.judges import JudgeNotConfigured
    from veredito.worker.metrics import Metrics, MetricsPortError
    from veredito.worker.run import run_lines

    stream = input_stream(args.input)
    if stream is None:
        return 3
    metrics = Metrics(
        app_label_limit=settings.app_label_limit,
        alert_confidence=settings.alert_confidence,
        releases_kept=settings.releases_kept,
    )
    if settings.metrics_port:
        try:
            metrics.serve(settings.metrics_port)
        except MetricsPortError as exc:
            print(f"veredito: {exc}", file=sys.stderr)
            return 2
    total = None
    if args.input != "-":
        with Path(args.input).open("rb") as f:
            total = sum(1 for line in f if line.strip())
    out: IO[str] | None = sys.stdout
    store = None
    if args.to:  # with --out too, both get every verdict
        store = verdict_store(args.to)
        if store is None:
            return 2
        out = None
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        out = Path(args.out).open("w", encoding="utf-8")  # noqa: SIM115 - closed below
    bar = tqdm(total=total, unit="answer", file=sys.stderr, disable=args.no_progress or None)
    try:
        lines = read_lines(stream)
        summary = asyncio.run(
            run_lines(
                with_release(lines, args.release) if args.release else lines,
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


def produce(args: argparse.Namespace, settings: Settings) -> int:
    from kombu.exceptions import OperationalError

    from veredito.producer.mapping import Mapper, MappingError, parse_maps
    from veredito.producer.publish import produce
    from veredito.producer.reader import read_lines

    maps = list(args.map)
    if args.release:  # checked by the parser: a plain JSON string literal
        maps.append(f'metadata.release=`"{args.release}"`')
    try:
        mapper = Mapper(parse_maps(maps)) if maps else None
    except MappingError as exc:
        print(f"veredito: {exc}", file=sys.stderr)
        return 2
    if args.follow:
        return _follow(args, settings, mapper)
    stream = input_stream(args.input)
    if stream is None:
        return 3
    try:
        report = produce(
            read_lines(stream),
            settings.broker_url,
            args.input,
            settings.limits,
            sample_rate=settings.sample_rate,
            dedup=dedup_window(settings),
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
            dedup=dedup_window(settings),
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


def port_free(port: int) -> bool:
    """Whether a TCP port can be listened on, on every address, as the metrics server does."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def worker(args: argparse.Namespace, settings: Settings) -> int:
    from veredito.producer import topology
    from veredito.worker.celery_app import app, configure

    if settings.resolved_judge() == "llm" and not settings.llm_configured:
        from veredito.worker.judges import NO_LLM_MESSAGE

        print(f"veredito: {NO_LLM_MESSAGE}", file=sys.stderr)
        return 2
    if settings.metrics_port is None:
        settings = settings.model_copy(update={"metrics_port": 9808})
    if settings.metrics_port and not port_free(settings.metrics_port):
        print(
            f"veredito: the metrics port {settings.metrics_port} is in use: give each worker on "
            "this host its own (--metrics-port or VEREDITO_METRICS_PORT)",
            file=sys.stderr,
        )
        return 2
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


def results(args: argparse.Namespace, settings: Settings) -> int:
    from tqdm import tqdm

    from veredito.worker.results import collect

    if args.out and args.to:
        print("veredito: --out and --to name two outputs; choose one", file=sys.stderr)
        return 2
    if not 1 <= args.batch <= 10_000:
        print("veredito: --batch: from 1 to 10000 verdicts per commit", file=sys.stderr)
        return 2
    # a sink outlives a database restart: it waits for the database, however long
    store = verdict_store(args.to or f"file:{args.out or '-'}", patience=None)
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


def replay(args: argparse.Namespace, settings: Settings) -> int:
    from veredito.worker.replay import replay

    report = replay(settings.broker_url, limit=args.limit)
    print(
        f"replayed {report.replayed} dead letters; {report.repeats} repeated records dropped; "
        f"{report.left} left (not triples)"
    )
    return 0
