"""The ``veredito`` command line (spec §11).

Exit codes: 0 done; 1 ``--fail-on-hallucination`` and an answer was hallucinated; 2 bad usage or
configuration (the message says what to change); 3 the input could not be read; 4 the verdict
store stayed unreachable for a minute.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from veredito.commands import compare, otlp, pipeline, reviewing, serving
from veredito.worker.logs import configure_logging
from veredito.worker.settings import Settings

__all__ = ["main"]

log = logging.getLogger("veredito")


def _settings(args: argparse.Namespace, **extra: Any) -> Settings:
    overrides = {
        "judge": getattr(args, "judge", None),
        "prompts": getattr(args, "prompts", None),
        "concurrency": getattr(args, "concurrency", None),
        "metrics_port": getattr(args, "metrics_port", None),
        "otlp_grpc_port": getattr(args, "otlp_grpc_port", None),
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
    _add_release_option(run)

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
    _add_release_option(produce)

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
        "--otlp-grpc-port",
        type=int,
        metavar="PORT",
        help="also take OTLP/gRPC traces and logs on this port (standard: 4317; needs "
        "'veredito[otel-grpc]'; default VEREDITO_OTLP_GRPC_PORT, off)",
    )
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
    calibrate.add_argument(
        "--evidence",
        action="append",
        metavar="LABELLED",
        help="with --fit: a labelled set never fitted on, where each category's flags earn their "
        "highest confidence (default: out-of-fold answers of what is fitted); repeatable",
    )
    calibrate.add_argument("--name", help="with --fit: the name verdicts carry (judge.calibration)")
    calibrate.add_argument(
        "--from-store",
        metavar="URL",
        help="measure the stored verdicts against reviewers' labels instead (spec §16): the "
        "agreement of GET /v1/agreement, from the uniform slice",
    )
    calibrate.add_argument(
        "--rollback",
        type=int,
        metavar="VERSION",
        help="make a calibration serve --store fitted current again (with --store); serve's "
        "GET /v1/calibration then serves it",
    )
    calibrate.add_argument(
        "--list",
        action="store_true",
        help="the calibrations serve --store fitted, with their held-out figures (with --store)",
    )
    calibrate.add_argument("--store", metavar="URL", help="with --rollback, --list: the store")
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
    compare.add_parser(sub)
    otlp = sub.add_parser("otlp", help="OpenTelemetry traces: what serve makes of them")
    otlp_sub = otlp.add_subparsers(dest="otlp_command", required=True)
    explain = otlp_sub.add_parser(
        "explain",
        help="the triple each trace of an OTLP export would become, and why (no broker)",
    )
    explain.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="an OTLP/JSON export (one per line is fine) or a protobuf body, traces or logs, "
        "gzipped or not; - for stdin; several (a traces and a logs export) are read together",
    )
    explain.add_argument("--json", action="store_true", help="one JSON object per trace")
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


def _release(value: str) -> str:
    from veredito.producer.triple import check_release

    problem = check_release(value)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{value!r}: {problem}")
    return value


def _add_release_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--release",
        type=_release,
        metavar="RELEASE",
        help="the release of the app that gave these answers, set as metadata.release on every "
        "line (over a release a line names; spec §18): up to 64 of A-Z a-z 0-9 . _ + -",
    )


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
    if settings.calibration and not settings.calibration.lower().startswith(
        ("http://", "https://")
    ):  # a URL of serve's route is fetched by the judges: unreachable is a WARNING, not a stop
        from veredito.worker.confidence import CalibrationError, load_calibration

        try:
            load_calibration(settings.calibration)
        except CalibrationError as exc:
            print(f"veredito: VEREDITO_CALIBRATION: {exc}", file=sys.stderr)
            return 2
    handler = {
        "run": pipeline.run,
        "produce": pipeline.produce,
        "worker": pipeline.worker,
        "results": pipeline.results,
        "calibrate": reviewing.calibrate,
        "replay": pipeline.replay,
        "serve": serving.serve,
        "labels": reviewing.labels,
        "otlp": otlp.explain,
        "compare": compare.compare,
    }
    return handler[args.command](args, settings)


if __name__ == "__main__":
    sys.exit(main())
