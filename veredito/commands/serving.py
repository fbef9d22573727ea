"""``veredito serve``: ingest over HTTP, the verdicts API and the review page."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from veredito.commands.common import dedup_window, verdict_store
from veredito.worker.settings import Settings

log = logging.getLogger("veredito")


def serve(args: argparse.Namespace, settings: Settings) -> int:
    from veredito.producer.ingest import LangfuseKeys, TokenError, Tokens
    from veredito.producer.serve import IngestConfig
    from veredito.serving.guard import HostPolicy, serve_forever
    from veredito.web.app import make_app
    from veredito.web.reviewing import ReviewTokens, WriteLimits

    tokens = settings.ingest_tokens.get_secret_value() if settings.ingest_tokens else None
    read_tokens = settings.read_tokens.get_secret_value() if settings.read_tokens else None
    review_spec = settings.review_tokens.get_secret_value() if settings.review_tokens else None
    langfuse = settings.langfuse_keys.get_secret_value() if settings.langfuse_keys else None
    try:
        ingest_tokens = Tokens(tokens)
        reading_tokens = Tokens(read_tokens, "VEREDITO_READ_TOKENS")
        reviewers = ReviewTokens(review_spec)
        langfuse_keys = LangfuseKeys(langfuse, ingest_tokens)
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
        trace_quiet=settings.ingest_trace_quiet,
        event_wait=settings.otlp_event_wait,
        retrieval_tools=tuple(
            t.strip() for t in (settings.otlp_retrieval_tools or "").split(",") if t.strip()
        ),
        limits=settings.limits,
        sample_rate=settings.sample_rate,
        dedup=dedup_window(settings),
        max_items=settings.ingest_max_items,
        otlp_max_spans_per_request=settings.otlp_max_spans_per_request,
        otlp_max_traces=settings.otlp_max_traces,
        otlp_max_spans=settings.otlp_max_spans,
        otlp_max_bytes=settings.otlp_max_bytes,
        body_timeout=settings.serve_body_timeout,
        langfuse_keys=langfuse_keys or None,
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
        store = verdict_store(store_url, patience=None)
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
            alert_confidence=settings.alert_confidence,
            releases_kept=settings.releases_kept,
            release_min_answers=settings.release_min_answers,
            refit=settings.refit,
            refit_min_labels=settings.refit_min_labels,
            refit_interval=settings.refit_interval,
        )
        review.limits = WriteLimits(settings.review_rate, settings.review_burst)
        review.max_submissions = settings.review_max_submissions
        if settings.session_secret is not None:
            review.session_secret = settings.session_secret.get_secret_value().encode()
        elif reviewers:
            log.warning(
                "VEREDITO_SESSION_SECRET is not set: the review page's sessions are signed with "
                "a random key of this process; they end when it restarts and do not span "
                "replicas"
            )
    try:
        app = make_app(config, review=review)
    except ValueError as exc:
        print(f"veredito: {exc}", file=sys.stderr)
        return 2
    grpc_port = settings.otlp_grpc_port
    if grpc_port:
        if not (config.tokens or config.insecure_no_auth):
            print(
                "veredito: --otlp-grpc-port needs ingest (VEREDITO_INGEST_TOKENS)", file=sys.stderr
            )
            return 2
        try:
            import grpc  # noqa: F401
        except ImportError:
            print(
                "veredito: --otlp-grpc-port needs grpcio: pip install 'veredito[otel-grpc]'",
                file=sys.stderr,
            )
            return 2
        from veredito.producer.otlp_grpc import add_grpc

        add_grpc(app, args.host, grpc_port)
    parts = []
    if review is not None:
        parts.append("review page and verdicts API")
    parts.append("ingest" if config.tokens or config.insecure_no_auth else "ingest off")
    if grpc_port:
        parts.append(f"OTLP/gRPC on :{grpc_port}")

    def ready() -> None:
        print(
            f"veredito serve: listening on http://{args.host}:{args.port} ({', '.join(parts)})",
            flush=True,
        )

    try:
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
    except RuntimeError as exc:  # a start-up step that cannot be done (a port in use)
        print(f"veredito: {exc}", file=sys.stderr)
        return 2
    return 0
