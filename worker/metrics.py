"""Prometheus metrics (spec §10).  Label values are bounded enums, never user text.

One :class:`Metrics` object per process, holding its own ``CollectorRegistry`` so tests can make
fresh ones.  The worker runs one process (a thread pool feeding one asyncio loop), so no
multiprocess mode is needed.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from worker.verdict import CATEGORIES, VERDICTS, Verdict

__all__ = ["Metrics"]

SCORE_BUCKETS = tuple(round(i / 10, 1) for i in range(1, 11))
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600)
REQUEST_BUCKETS = (0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1, 1.5, 2, 3, 5, 8, 13, 20, 30, 60)
REPAIR_KINDS = ("fence", "prose", "syntax", "category", "chunk_idx", "empty_claim")


class Metrics:
    def __init__(
        self, registry: CollectorRegistry | None = None, app_label_limit: int = 50
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self._app_limit = app_label_limit
        self._apps: set[str] = set()
        self._lock = threading.Lock()
        r = self.registry
        self.evaluations = Counter(
            "veredito_evaluations_total",
            "Verdicts produced",
            ["app", "judge", "status"],
            registry=r,
        )
        self.claims = Counter(
            "veredito_claims_total",
            "Claims judged, by verdict and hallucination category (none for grounded)",
            ["app", "judge", "verdict", "category"],
            registry=r,
        )
        self.hallucinated = Counter(
            "veredito_hallucinated_answers_total",
            "Answers with at least one claim that is not grounded",
            ["app", "judge"],
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
        self.latency = Histogram(
            "veredito_evaluation_latency_seconds",
            "Time from triple produced to verdict published",
            ["app"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )

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

    def serve(self, port: int, addr: str = "0.0.0.0") -> None:
        start_http_server(port, addr=addr, registry=self.registry)

    def record_verdict(self, verdict: Verdict, latency: float | None = None) -> None:
        app = self.app_label(verdict.app)
        judge = verdict.judge.kind if verdict.judge else "none"
        self.evaluations.labels(app, judge, verdict.status).inc()
        if verdict.status == "ok":
            for claim in verdict.claims:
                category = "none" if claim.verdict == "grounded" else (claim.category or "GENERICA")
                if claim.verdict in VERDICTS and category in (*CATEGORIES, "none"):
                    self.claims.labels(app, judge, claim.verdict, category).inc()
            if verdict.hallucinated:
                self.hallucinated.labels(app, judge).inc()
            if verdict.score is not None:
                self.score.labels(app, judge).observe(verdict.score)
            if verdict.faithfulness is not None:
                self.faithfulness.labels(app).observe(verdict.faithfulness.score)
        if latency is not None and latency >= 0:
            self.latency.labels(app).observe(latency)

    def record_repairs(self, kinds: Iterable[str]) -> None:
        for kind in kinds:
            self.repairs.labels(kind if kind in REPAIR_KINDS else "other").inc()
