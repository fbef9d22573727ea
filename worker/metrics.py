"""Prometheus metrics (spec §10).  Label values are bounded enums, never user text.

One :class:`Metrics` object per process, holding its own ``CollectorRegistry`` so tests can make
fresh ones.  The worker runs one process (a thread pool feeding one asyncio loop), so no
multiprocess mode is needed.  The port also answers the worker's health checks
(:meth:`Metrics.serve`'s ``checks``: ``/healthz``, ``/readyz``).

The counters that carry ``app`` also carry ``release`` (spec §18), bounded per app: only the
``releases_kept`` most recently first-seen releases of an app keep their own value. A new release
beyond them demotes the oldest: its series are removed and its later verdicts count as ``other``.
"""

from __future__ import annotations

import errno
import socket
import threading
from collections import Counter as Tally
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, make_wsgi_app

from veredito.worker.verdict import CATEGORIES, VERDICTS, Verdict

__all__ = ["Metrics"]

SCORE_BUCKETS = tuple(round(i / 10, 1) for i in range(1, 11))
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600)
REQUEST_BUCKETS = (0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1, 1.5, 2, 3, 5, 8, 13, 20, 30, 60)
REPAIR_KINDS = ("fence", "prose", "syntax", "category", "chunk_idx", "empty_claim", "unicode")
_CATEGORY_LABELS = frozenset((*CATEGORIES, "none"))
# demoted releases remembered per app (so that a straggler of an old release is not taken for a
# new one and demotes a newer release); past this many the longest-demoted is forgotten
DEMOTED_REMEMBERED = 256


class _Releases:
    """One app's releases: those kept with their own label, oldest first-seen first, and those
    demoted (bounded)."""

    __slots__ = ("demoted", "kept")

    def __init__(self) -> None:
        self.kept: dict[str, None] = {}  # insertion order: the order first seen
        self.demoted: OrderedDict[str, None] = OrderedDict()


class MetricsPortError(OSError):
    """The metrics port cannot be listened on (another worker on the host has it, most often);
    the message names the settings that choose it."""

    def __init__(self, port: int, cause: OSError) -> None:
        reason = "is in use" if cause.errno == errno.EADDRINUSE else f"cannot be used ({cause})"
        super().__init__(
            f"metrics port {port} {reason}: give each process on this host its own "
            "(VEREDITO_METRICS_PORT or --metrics-port)"
        )
        self.port = port


class Metrics:
    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        app_label_limit: int = 50,
        alert_confidence: float = 0.8,
        releases_kept: int = 3,
    ) -> None:
        if releases_kept < 1:
            raise ValueError(f"releases_kept must be at least 1, not {releases_kept}")
        self.registry = registry if registry is not None else CollectorRegistry()
        self.alert_confidence = alert_confidence
        self.releases_kept = releases_kept
        self._app_limit = app_label_limit
        self._apps: set[str] = set()
        self._lock = threading.Lock()
        # per app label (bounded by app_label_limit): its releases; the lock also covers the
        # increments of the counters that carry release, so none lands on a series being removed
        self._releases: dict[str, _Releases] = {}
        self._release_lock = threading.Lock()
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        r = self.registry
        self.evaluations = Counter(
            "veredito_evaluations_total",
            "Verdicts produced",
            ["app", "release", "judge", "status"],
            registry=r,
        )
        self.claims = Counter(
            "veredito_claims_total",
            "Claims judged, by verdict and hallucination category (none for grounded)",
            ["app", "release", "judge", "verdict", "category"],
            registry=r,
        )
        self.hallucinated = Counter(
            "veredito_hallucinated_answers_total",
            "Answers with at least one claim that is not grounded; confident: its "
            "hallucination_confidence is at least VEREDITO_ALERT_CONFIDENCE",
            ["app", "release", "judge", "confident"],
            registry=r,
        )
        self.answers_by_category = Counter(
            "veredito_answers_with_category_total",
            "Answers with at least one claim that is not grounded, by that claim's category; "
            "confident: such a claim of the category has at least VEREDITO_ALERT_CONFIDENCE",
            ["app", "release", "judge", "category", "confident"],
            registry=r,
        )
        self.score = Histogram(
            "veredito_score",
            "Claim-based score of ok verdicts",
            ["app", "judge"],
            buckets=SCORE_BUCKETS,
            registry=r,
        )
        self.faithfulness = Histogram(
            "veredito_faithfulness_score",
            "Faithfulness score reported by the judge",
            ["app"],
            buckets=SCORE_BUCKETS,
            registry=r,
        )
        self.request_duration = Histogram(
            "veredito_judge_request_duration_seconds",
            "Duration of one request to the judge model",
            ["model", "outcome"],
            buckets=REQUEST_BUCKETS,
            registry=r,
        )
        self.tokens = Counter(
            "veredito_judge_tokens_total", "Tokens used by the judge", ["model", "kind"], registry=r
        )
        self.retries = Counter(
            "veredito_judge_retries_total", "Judge requests tried again", ["reason"], registry=r
        )
        self.cost = Counter(
            "veredito_judge_cost",
            "US dollars the judge's tokens cost (approximate prices; cached verdicts cost 0)",
            ["app", "model"],
            registry=r,
        )
        self.cache = Counter(
            "veredito_judge_cache",
            "Verdict cache look-ups: hit, miss, error (Redis away)",
            ["result"],
            registry=r,
        )
        self.budget_fallbacks = Counter(
            "veredito_budget_fallbacks",
            "Triples judged by the rules judge because their app's daily budget was spent",
            ["app"],
            registry=r,
        )
        self.budget_spent = Gauge(
            "veredito_budget_spent_usd",
            "Today's spend of an app with a daily budget (UTC day), as this process last saw it",
            ["app"],
            registry=r,
        )
        self.rate_limit = Gauge(
            "veredito_judge_rate_limit",
            "The shared rate limit now in force (VEREDITO_LLM_RPM/TPM, lowered after 429s)",
            ["model", "kind"],
            registry=r,
        )
        self.rate_wait = Counter(
            "veredito_judge_rate_wait_seconds_total",
            "Seconds requests waited for their turn under the shared rate limit",
            ["model"],
            registry=r,
        )
        self.rate_limited = Counter(
            "veredito_judge_rate_limited_total",
            "429 Too Many Requests answers from the judge",
            ["model"],
            registry=r,
        )
        self.repairs = Counter(
            "veredito_judge_output_repairs_total",
            "Repairs made to judge replies",
            ["kind"],
            registry=r,
        )
        self.disagreements = Counter(
            "veredito_rule_disagreements_total",
            "Mentions the rules judge proved wrong but the LLM called grounded",
            ["category"],
            registry=r,
        )
        self.dead_letters = Counter(
            "veredito_dead_letters_total", "Dead-letter records written", ["reason"], registry=r
        )
        self.inflight = Gauge(
            "veredito_inflight_evaluations", "Evaluations in progress", registry=r
        )
        self.circuit_state = Gauge(
            "veredito_judge_circuit_state",
            "The judge's circuit breaker: 0 closed, 1 half-open, 2 open",
            registry=r,
        )
        self.circuit_transitions = Counter(
            "veredito_judge_circuit_transitions_total",
            "Changes of the judge's circuit breaker, by the state entered",
            ["to"],
            registry=r,
        )
        self.redeliveries_skipped = Counter(
            "veredito_redeliveries_skipped_total",
            "Redelivered triples whose verdict was already published (not judged again)",
            registry=r,
        )
        self.latency = Histogram(
            "veredito_evaluation_latency_seconds",
            "Time from triple produced to verdict published",
            ["app"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.calibration_in_use = Gauge(
            "veredito_calibration_in_use",
            "1 for the calibration this process's judges use: version is the store's version of "
            "one serve --store fitted (VEREDITO_CALIBRATION=<serve's /v1/calibration URL>), "
            "'none' for the shipped one or a file",
            ["version"],
            registry=r,
        )
        self._calibration_version: str | None = None
        # the counters whose label values start with (app, release)
        self._by_release = {
            id(m): m
            for m in (self.evaluations, self.claims, self.hallucinated, self.answers_by_category)
        }

    def calibration_used(self, version: int | None) -> None:
        """The calibration now in use: its series at 1, the previous one's removed."""
        label = "none" if version is None else str(version)
        with self._lock:
            if self._calibration_version not in (None, label):
                self.calibration_in_use.remove(self._calibration_version)
            self.calibration_in_use.labels(label).set(1)
            self._calibration_version = label

    def child(self, metric: Any, *values: str) -> Any:
        """``metric.labels(*values)``, cached: label look-ups are on every evaluation's path."""
        key = (id(metric), values)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*values)
        return found

    def app_label(self, app: str | None) -> str:
        """The app's own name for the first ``app_label_limit`` apps seen, ``other`` after."""
        if not app:
            return "default"
        with self._lock:
            if app in self._apps:
                return app
            if len(self._apps) < self._app_limit:
                self._apps.add(app)
                return app
        return "other"

    def release_label(self, app_label: str, release: str) -> str:
        """The ``release`` label of a verdict of ``app_label`` (already bounded by
        :meth:`app_label`): the release itself while it is one of the app's ``releases_kept``
        most recently first-seen, ``other`` once a newer one demoted it. A release seen for the
        first time when the app already keeps that many demotes the oldest first-seen, whose
        series leave the counters. :meth:`record_verdict` counts under the same lock."""
        with self._release_lock:
            return self._release_label(app_label, release)

    def _release_label(self, app: str, release: str) -> str:
        """:meth:`release_label`, the lock held."""
        releases = self._releases.get(app)
        if releases is None:
            releases = self._releases[app] = _Releases()
        if release in releases.kept:
            return release
        if release == "other" or release in releases.demoted:
            return "other"  # a release named other is the bucket: never its own series
        if len(releases.kept) >= self.releases_kept:
            oldest = next(iter(releases.kept))
            del releases.kept[oldest]
            releases.demoted[oldest] = None
            if len(releases.demoted) > DEMOTED_REMEMBERED:
                releases.demoted.popitem(last=False)
            self._remove_release(app, oldest)
        releases.kept[release] = None
        return release

    def _remove_release(self, app: str, release: str) -> None:
        """Remove a demoted release's series from the counters that carry it, and from the
        :meth:`child` cache; those series were all made through it, under the release lock."""
        for key in list(self._children):
            metric = self._by_release.get(key[0])
            if metric is not None and key[1][:2] == (app, release):
                metric.remove(*key[1])
                self._children.pop(key, None)

    def serve(
        self,
        port: int,
        addr: str = "0.0.0.0",
        checks: Mapping[str, Callable[[], str | None]] | None = None,
    ) -> None:
        """Serve the metrics on every path, but the ``checks``' paths: each answers 200 while its
        check returns None, else 503 with the reason it returns. In a daemon thread."""
        metrics_app = make_wsgi_app(self.registry)
        routes = dict(checks or {})

        def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterator[bytes]:
            check = routes.get(environ.get("PATH_INFO", ""))
            if check is None:
                return iter(metrics_app(environ, start_response))
            problem = check()
            body = f"{problem or 'ok'}\n".encode()
            status = "503 Service Unavailable" if problem else "200 OK"
            headers = [("Content-Type", "text/plain; charset=utf-8"), ("Cache-Control", "no-store")]
            start_response(status, [*headers, ("Content-Length", str(len(body)))])
            return iter([body])

        server_class = _ServerV6 if ":" in addr else _Server
        try:
            httpd = make_server(addr, port, app, server_class, handler_class=_QuietHandler)
        except OSError as exc:
            raise MetricsPortError(port, exc) from None
        thread = threading.Thread(target=httpd.serve_forever, name="veredito-metrics", daemon=True)
        thread.start()

    def record_verdict(self, verdict: Verdict, latency: float | None = None) -> None:
        app = self.app_label(verdict.app)
        judge = verdict.judge.kind if verdict.judge else "none"
        ok = verdict.status == "ok"
        with self._release_lock:  # no increment lands on the series of a release being demoted
            release = self._release_label(app, verdict.release)
            self.child(self.evaluations, app, release, judge, verdict.status).inc()
            if ok:
                self._count_hallucinations(verdict, app, release, judge)
        if ok:
            if verdict.score is not None:
                self.child(self.score, app, judge).observe(verdict.score)
            if verdict.faithfulness is not None:
                self.child(self.faithfulness, app).observe(verdict.faithfulness.score)
        if latency is not None and latency >= 0:
            self.child(self.latency, app).observe(latency)
        if verdict.cost_usd and not verdict.cached and verdict.judge is not None:
            self.child(self.cost, app, verdict.judge.model or "unknown").inc(verdict.cost_usd)

    def _count_hallucinations(self, verdict: Verdict, app: str, release: str, judge: str) -> None:
        """An ok verdict's claims, hallucinated answer and categories (the release lock held)."""
        counts = Tally(
            (c.verdict, "none" if c.verdict == "grounded" else (c.category or "GENERICA"))
            for c in verdict.claims
        )
        for (label, category), n in counts.items():
            if label in VERDICTS and category in _CATEGORY_LABELS:
                self.child(self.claims, app, release, judge, label, category).inc(n)
        if verdict.hallucinated:
            confident = self.confident(verdict.hallucination_confidence)
            self.child(self.hallucinated, app, release, judge, confident).inc()
        sure: dict[str, float] = {}
        for claim in verdict.claims:
            if claim.verdict != "grounded" and claim.confidence is not None:
                category = claim.category or "GENERICA"
                sure[category] = max(sure.get(category, 0.0), claim.confidence)
        for category in verdict.categories:
            if category in _CATEGORY_LABELS:
                confident = self.confident(sure.get(category))
                self.child(self.answers_by_category, app, release, judge, category, confident).inc()

    def confident(self, confidence: float | None) -> str:
        """The ``confident`` label: "true" at or above the alert threshold. A verdict without
        confidences (an older worker's) counts as confident, as every verdict used to."""
        return "true" if confidence is None or confidence >= self.alert_confidence else "false"

    def record_repairs(self, kinds: Iterable[str]) -> None:
        for kind in kinds:
            self.child(self.repairs, kind if kind in REPAIR_KINDS else "other").inc()


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True  # a scrape in progress never holds up the process's exit


class _ServerV6(_Server):
    address_family = socket.AF_INET6


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # no line per scrape or probe
        pass
