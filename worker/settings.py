"""One typed settings object, built once at start-up and passed down.

Precedence: command-line flags (passed as init arguments), then ``VEREDITO_*`` environment
variables, then the defaults below.  ``OPENAI_BASE_URL``/``OPENAI_API_KEY`` are honoured when the
project's own variables are unset.  Nothing here runs at import time.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from veredito.producer.triple import Limits
from veredito.prompts import NAMES

__all__ = ["OPENAI_DEFAULT_BASE_URL", "Settings"]

OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="VEREDITO_", extra="ignore", populate_by_name=True)

    broker_url: str = "amqp://guest:guest@localhost:5672//"

    judge: Literal["auto", "llm", "rules"] = "auto"
    prompts: Annotated[tuple[str, ...], NoDecode] = ("claims", "faithfulness")
    cross_check: Literal["flag", "override", "off"] = "flag"
    # the rules judge's pattern scan: worker/rules/scan.py reads the same variable (the rules
    # judge is also a library; so does VEREDITO_RULES_CACHE, any directory); here a wrong value
    # stops the command at start-up, naming it, instead of a warning at the first scan
    rules_engine: Literal["auto", "hyperscan", "re"] = Field(
        default="auto", description="the rules judge's pattern scan: hyperscan when installed"
    )

    llm_base_url: str | None = Field(
        default=None, validation_alias=AliasChoices("VEREDITO_LLM_BASE_URL", "OPENAI_BASE_URL")
    )
    llm_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("VEREDITO_LLM_API_KEY", "OPENAI_API_KEY")
    )
    llm_model: str = "gpt-4o-mini"
    llm_timeout: float = Field(default=60.0, gt=0, description="seconds per judge request")
    llm_max_tokens: int = Field(default=2048, gt=0)
    llm_json_mode: bool = True
    llm_max_attempts: int = Field(
        default=6,
        ge=1,
        description="tries per request on retryable errors while the judge is otherwise healthy",
    )
    llm_max_backoff: float = Field(default=30.0, ge=0, description="longest wait between tries")
    llm_rpm: int | None = Field(
        default=None, ge=1, description="requests per minute to the judge, across every worker"
    )
    llm_tpm: int | None = Field(
        default=None, ge=1, description="tokens per minute to the judge, across every worker"
    )
    llm_price_prompt: float | None = Field(
        default=None, ge=0, description="dollars per million prompt tokens (default: the table)"
    )
    llm_price_completion: float | None = Field(
        default=None, ge=0, description="dollars per million completion tokens"
    )
    budget_daily: str | None = Field(
        default=None,
        description="app:dollars a day, comma-separated (* for any other app); past it, the "
        "rules judge",
    )
    cache_ttl: int | None = Field(
        default=None,
        ge=0,
        description="seconds the verdict cache keeps a result; 0 off (default: a day in the "
        "worker when it has a Redis, off in run)",
    )
    llm_rate_recovery: float = Field(
        default=20.0,
        gt=0,
        description="seconds for a rate cut by a 429 to climb back to where the 429 came; past "
        "it the rate probes upward (CUBIC) to the configured one",
    )
    llm_rate_burst: float = Field(
        default=0.0,
        ge=0,
        description="seconds' worth of VEREDITO_LLM_RPM/TPM that may go at once above the steady "
        "rate (0: none, no second above the per-second rate); for providers that allow bursts",
    )

    breaker_failures: int = Field(
        default=10, ge=1, description="consecutive retryable failures that open the circuit"
    )
    breaker_failure_rate: float = Field(
        default=0.5, gt=0, le=1, description="share of failed requests in 10 s that opens it"
    )
    breaker_open_seconds: float = Field(default=2.0, gt=0, description="first wait when open")
    breaker_max_open_seconds: float = Field(default=30.0, gt=0, description="longest wait")

    shutdown_grace: float = Field(
        default=30.0, ge=0, description="seconds SIGTERM leaves in-flight work to finish"
    )
    redis_url: str | None = Field(
        default=None,
        description="Redis for the done markers of published verdicts (default: the broker's "
        "Redis when the broker is Redis; none with RabbitMQ)",
    )
    done_ttl: int = Field(default=3600, ge=1, description="seconds a done marker lives")
    redis_visibility_timeout: float = Field(
        default=300.0,
        gt=0,
        description="seconds before an unacked message on the Redis broker is delivered again, "
        "for messages taken by a consumer without a lease (an older veredito); veredito's own "
        "consumers hold theirs under VEREDITO_REDIS_LEASE",
    )
    redis_lease: float = Field(
        default=10.0,
        ge=3,
        description="seconds a Redis consumer's lease on the messages it holds lasts without a "
        "heartbeat (renewed every sixth of it); a dead consumer's messages are back within this "
        "plus 2.5 s",
    )

    max_returns: int = Field(
        default=100,
        ge=0,
        description="RabbitMQ: a triple returned to the queue this many times by workers that "
        "died or stopped while holding it is dead-lettered (returned_too_often), a guard "
        "against a message that kills every worker; 0 never. Worker deaths and judge outages "
        "never count toward the poison limit itself (see docs/reliability.md)",
    )

    concurrency: int = Field(default=128, ge=1, description="evaluations in flight per worker")
    metrics_port: int | None = None
    health_loop_stall: float = Field(
        default=30.0,
        gt=0,
        description="worker: /healthz fails when the runtime's event loop has not run for this "
        "many seconds",
    )
    health_broker_grace: float = Field(
        default=120.0,
        gt=0,
        description="worker: /healthz fails when the consumer has had no broker connection for "
        "this many seconds",
    )
    app_label_limit: int = Field(default=50, ge=1)
    releases_kept: int = Field(
        default=3,
        ge=1,
        description="metrics: releases of each app that keep their own release label, the most "
        "recently first-seen; older ones are counted as other",
    )
    release_min_answers: int = Field(
        default=200,
        ge=1,
        description="serve --store: the judged answers each of two releases needs before "
        "veredito_release_regressed may say the newest regressed (and the alert fire)",
    )

    max_chunks: int = Field(default=64, ge=1)
    max_triple_bytes: int = Field(default=256 * 1024, ge=1)

    ingest_tokens: SecretStr | None = Field(
        default=None, description="serve: token or token:app, comma-separated"
    )
    ingest_max_bytes: int = Field(default=8 * 1024 * 1024, ge=1024)
    ingest_trace_timeout: float = Field(
        default=30.0, gt=0, description="serve: seconds an OTLP trace may wait for its root span"
    )
    ingest_max_backlog: int = Field(
        default=100_000, ge=1, description="serve answers 503 above this many queued triples"
    )
    ingest_backlog_interval: float = Field(
        default=1.0,
        gt=0,
        description="serve: seconds between two reads of veredito.triples' depth (also how "
        "soon it notices the broker is gone); what it queues in between counts at once",
    )
    ingest_max_items: int = Field(
        default=1000,
        ge=1,
        description="serve: triples (array items or NDJSON lines) one request may carry; more "
        "is answered 413 before anything is queued",
    )
    otlp_max_spans_per_request: int = Field(
        default=10_000, ge=1, description="serve: spans one OTLP export request may carry"
    )
    otlp_max_traces: int = Field(
        default=10_000, ge=1, description="serve: OTLP traces one token may have waiting"
    )
    otlp_max_spans: int = Field(
        default=50_000, ge=1, description="serve: OTLP spans one token may have waiting"
    )
    otlp_max_bytes: int = Field(
        default=32 * 1024 * 1024,
        ge=1024,
        description="serve: estimated bytes of OTLP spans one token may have waiting",
    )
    ingest_trace_quiet: float = Field(
        default=2.0,
        gt=0,
        description="serve: seconds without a new span after which an OTLP trace whose chain "
        "or agent span has a parent elsewhere (a service behind a traced gateway) is judged",
    )
    langfuse_keys: SecretStr | None = Field(
        default=None,
        description="serve: Langfuse key pairs taken as ingest tokens on /api/public/otel/v1/"
        "traces, public:secret:ingest-token, comma-separated",
    )
    otlp_grpc_port: int | None = Field(
        default=None,
        ge=0,
        le=65535,
        description="serve: also take OTLP/gRPC (traces and logs) on this port (4317 is the "
        "standard one); needs the otel-grpc extra",
    )
    otlp_event_wait: float = Field(
        default=5.0,
        ge=0,
        description="serve: seconds a complete OTLP trace whose LLM calls carry no messages waits "
        "for them as GenAI events on /v1/logs; 0 never waits",
    )
    otlp_retrieval_tools: str | None = Field(
        default=None,
        description="serve: the tools whose results are an agent's context (names or globs, "
        "comma-separated); default every tool",
    )
    serve_header_timeout: float = Field(
        default=10.0,
        gt=0,
        description="serve: seconds a connection has to send a request's headers, from its "
        "opening or the end of its previous response (idle keep-alive included)",
    )
    serve_body_timeout: float = Field(
        default=60.0, gt=0, description="serve: seconds a request has to send its body"
    )
    allowed_hosts: str | None = Field(
        default=None,
        description="serve: Host names (comma-separated, port optional) the page and the read "
        "API answer when reads are open without a token; default loopback names only",
    )

    sample_rate: float = Field(
        default=1.0, ge=0, le=1, description="produce/serve: share of valid triples kept"
    )
    dedup_window: float = Field(
        default=0.0, ge=0, description="produce/serve: seconds an accepted id blocks repeats"
    )

    pseudonymise: bool = Field(
        default=False,
        description="replace CPFs, CNPJs, RGs, e-mails, telephones and CEPs by placeholders "
        "before a prompt leaves the machine",
    )
    redact_stored: bool = Field(
        default=False,
        description="keep those placeholders in the verdicts written and stored, input included",
    )
    verdict_input: bool = Field(
        default=True,
        description="verdicts carry the query, context and answer judged (the review page "
        "shows them); off keeps messages and stores smaller",
    )
    store: str | None = Field(
        default=None,
        description="serve: the verdict store the API and review page read "
        "(sqlite:///PATH.db or postgresql://...)",
    )
    read_tokens: SecretStr | None = Field(
        default=None,
        description="serve: tokens for the verdicts API and review page (token or token:app, "
        "comma-separated); separate from the ingest tokens",
    )
    review_tokens: SecretStr | None = Field(
        default=None,
        description="serve: tokens that write labels, token:reviewer or token:reviewer:app "
        "(labels that app only), comma-separated",
    )
    review_sample: float = Field(
        default=0.05,
        gt=0,
        le=1,
        description="serve: share of answers in the review queue's uniform slice (by a hash of "
        "app and id); the agreement is measured on it",
    )
    review_teach_every: int = Field(
        default=4, ge=0, description="serve: every n-th answer of the queue is chosen to teach"
    )
    review_window: str = Field(
        default="30d", description="serve: the period of the precision gauges (1h, 7d, 30d …)"
    )
    review_refresh: float = Field(
        default=60.0, gt=0, le=60, description="serve: seconds between precision refreshes"
    )
    review_precision_floor: float = Field(
        default=0.7,
        ge=0,
        le=1,
        description="serve: the alert fires when a category's precision interval lies below",
    )
    review_min_labels: int = Field(
        default=30, ge=1, description="serve: labels a precision must rest on before it alerts"
    )
    session_secret: SecretStr | None = Field(
        default=None,
        description="serve: key that signs the review page's session cookies, at least 16 "
        "characters (several serve replicas need the same one); unset or empty: a random key "
        "per process, and sessions end with it",
    )
    review_rate: float = Field(
        default=1.0,
        ge=0,
        description="serve: label submissions a second each reviewer may make, past the burst "
        "(429 with Retry-After beyond it); 0 turns the limit off",
    )
    review_burst: int = Field(
        default=20, ge=1, description="serve: label submissions a reviewer may make at once"
    )
    review_max_submissions: int = Field(
        default=20,
        ge=1,
        description="serve: submissions one reviewer may give one answer (409 past it; their "
        "latest labels count)",
    )
    calibration: str | None = Field(
        default=None,
        description="a calibration file (veredito calibrate --fit … --out FILE) the judges' "
        "confidences come from, or the http(s) URL of serve's GET /v1/calibration (fetched at "
        "start, then polled); default the one shipped in the package",
    )
    calibration_token: SecretStr | None = Field(
        default=None,
        description="the bearer token (a read token of every app) sent to VEREDITO_CALIBRATION "
        "when it is a URL",
    )
    calibration_poll: float = Field(
        default=60.0,
        gt=0,
        description="seconds between asking VEREDITO_CALIBRATION's URL for a new calibration",
    )
    refit: bool = Field(
        default=True,
        description="serve --store: refit the calibration from reviewers' labels (off disables)",
    )
    refit_min_labels: int = Field(
        default=200,
        ge=1,
        description="serve --store: labelled answers since the last fit before a new one",
    )
    refit_interval: float = Field(
        default=300.0,
        gt=0,
        description="serve --store: seconds between checks for a refit (and the calibration "
        "gauges' refresh)",
    )
    alert_confidence: float = Field(
        default=0.8,
        ge=0,
        le=1,
        description="hallucinations at or above this confidence count as confident in the "
        "metrics (the alerts fire on those)",
    )
    log_level: str = "INFO"

    @field_validator("prompts", mode="before")
    @classmethod
    def _split_prompts(cls, value: object) -> object:
        if isinstance(value, str):
            value = [p.strip() for p in value.split(",") if p.strip()]
        return value

    @field_validator("prompts")
    @classmethod
    def _known_prompts(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [p for p in value if p not in NAMES]
        if unknown or not value:
            raise ValueError(f"prompts must be a comma-separated subset of {','.join(NAMES)}")
        return tuple(dict.fromkeys(value))

    @field_validator("session_secret", mode="before")
    @classmethod
    def _empty_secret(cls, value: object) -> object:
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
        return None if value == "" else value

    @field_validator("session_secret")
    @classmethod
    def _long_secret(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value()) < 16:
            raise ValueError(
                "VEREDITO_SESSION_SECRET must be at least 16 characters (make one with "
                "python -c 'import secrets; print(secrets.token_urlsafe(32))'), or empty for a "
                "random key per process"
            )
        return value

    @field_validator("rules_engine", mode="before")
    @classmethod
    def _engine_name(cls, value: object) -> object:
        return (value.strip().lower() or "auto") if isinstance(value, str) else value

    @field_validator("llm_base_url")
    @classmethod
    def _strip_slash(cls, value: str | None) -> str | None:
        return value.rstrip("/") if value else None

    @property
    def limits(self) -> Limits:
        return Limits(max_chunks=self.max_chunks, max_bytes=self.max_triple_bytes)

    @property
    def llm_configured(self) -> bool:
        return bool(self.llm_base_url or self.llm_api_key)

    @property
    def effective_base_url(self) -> str:
        return self.llm_base_url or OPENAI_DEFAULT_BASE_URL

    def broker_transport_options(self) -> dict[str, Any]:
        """RabbitMQ: publisher confirms. Redis: a killed consumer's messages come back once its
        lease (``redis_lease``) expires, found by a sweep every 10 s; ``redis_visibility_timeout``
        is for messages held without a lease (see worker/redis_transport.py)."""
        scheme = self.broker_url.split("://", 1)[0].lower()
        if scheme in ("redis", "rediss"):
            return {
                "visibility_timeout": self.redis_visibility_timeout,
                "unacked_restore_interval": 10,
                "unacked_restore_throttle": 1,
                "priority_steps": [0],  # one list per queue: see worker/redis_transport.py
                "veredito_lease": self.redis_lease,
            }
        return {"confirm_publish": True}

    def broker_transport(self) -> str | None:
        """Our Redis transport for consumers (no lost message when one is killed), else the
        URL's own."""
        scheme = self.broker_url.split("://", 1)[0].lower()
        if scheme in ("redis", "rediss"):
            from veredito.worker.redis_transport import TRANSPORT

            return TRANSPORT
        return None

    @field_validator("budget_daily")
    @classmethod
    def _check_budgets(cls, value: str | None) -> str | None:
        from veredito.worker.llm.spend import parse_budgets

        parse_budgets(value)  # a ValueError names the bad pair
        return value

    def cache_seconds(self, worker: bool) -> int:
        """The verdict cache's TTL: on by default in the worker when it has a Redis."""
        if self.cache_ttl is not None:
            return self.cache_ttl if self.marks_url else 0
        return 86400 if worker and self.marks_url else 0

    @property
    def marks_url(self) -> str | None:
        """Where done markers live: ``redis_url``, else the broker when it is Redis."""
        if self.redis_url:
            return self.redis_url
        scheme = self.broker_url.split("://", 1)[0].lower()
        return self.broker_url if scheme in ("redis", "rediss") else None

    def resolved_judge(self) -> Literal["llm", "rules"]:
        if self.judge == "auto":
            return "llm" if self.llm_configured else "rules"
        return self.judge
