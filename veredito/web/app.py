"""The app ``veredito serve`` runs: the ingest routes (from :mod:`veredito.producer.serve`), the
verdicts API and the review page (:mod:`veredito.web.review`), health, readiness, metrics and the
OpenAPI document, behind one middleware that turns every error into ``{"error": {"code",
"message"}}``, refuses hosts outside the allow-list (:mod:`veredito.serving.guard`) and counts every
request.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from veredito.producer.ingest import NDJSON, HeaderError
from veredito.producer.otlp import PROTOBUF
from veredito.producer.serve import (
    CONFIG,
    INGEST_ROUTES,
    STATE,
    IngestConfig,
    JsonError,
    add_ingest,
    check_ready,
)
from veredito.serving.heavy import HEAVY, HeavyPool
from veredito.serving.release_gauges import ReleaseGauges
from veredito.store import StoreUnavailable
from veredito.web.calibrations import CalibrationMetrics
from veredito.web.labels import openapi_paths
from veredito.web.reading import REVIEW, BadParameter, Review
from veredito.web.render import _store_away_page
from veredito.web.review import API_ROUTES, PAGE_ROUTES, add_routes, openapi_part
from veredito.web.reviewing import ReviewMetrics

__all__ = ["ROUTES", "make_app", "openapi"]

log = logging.getLogger(__name__)

ROUTES = (
    *INGEST_ROUTES,
    "/healthz",
    "/readyz",
    "/metrics",
    "/openapi.json",
    *API_ROUTES,
    *PAGE_ROUTES,
)

OPEN_ROUTES = ("/healthz", "/readyz", "/metrics")  # probes and scrapes name the pod's address


@web.middleware
async def errors_and_metrics(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    started = time.perf_counter()
    route = request.match_info.route.resource.canonical if request.match_info.route.resource else ""
    route = route if route in ROUTES else "other"
    state = request.app[STATE]
    status = 500
    try:
        if route not in OPEN_ROUTES:
            refusal = request.app[CONFIG].hosts.refusal(request)
            if refusal is not None:
                raise JsonError(*refusal)
        response = await handler(request)
        status = response.status
        return response
    except JsonError as exc:
        status = exc.status
        raise
    except HeaderError as exc:
        status = 400
        raise JsonError(400, "invalid_header", str(exc)) from None
    except BadParameter as exc:
        status = 400
        raise JsonError(400, "invalid_parameter", str(exc)) from None
    except StoreUnavailable:  # e.g. a page's session could not be checked
        status = 503
        log.warning("the store cannot be reached (%s)", route)
        if request.path.startswith("/v1/"):
            raise JsonError(
                503, "store_unavailable", "the verdict store cannot be reached",
                headers={"Retry-After": "5"},
            ) from None  # fmt: skip
        return _store_away_page()
    except web.HTTPRequestEntityTooLarge:
        status = 413
        limit = request.app[CONFIG].max_bytes
        raise JsonError(
            413, "too_large", f"the body is over {limit} bytes (VEREDITO_INGEST_MAX_BYTES)"
        ) from None
    except web.HTTPException as exc:
        status = exc.status
        raise JsonError(exc.status, exc.reason.lower().replace(" ", "_"), exc.reason) from None
    except Exception as exc:
        # the type only: a message may quote the request; the frames at DEBUG
        log.error("request to %s crashed (%s)", route, type(exc).__name__)
        log.debug("the crash", exc_info=True)
        raise JsonError(500, "internal_error", "the server failed; nothing was queued") from None
    finally:
        state.metrics.requests.labels(route, str(status)).inc()
        state.metrics.duration.labels(route).observe(time.perf_counter() - started)


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "alive"})


async def readyz(request: web.Request) -> web.Response:
    state, config = request.app[STATE], request.app[CONFIG]
    if state.publisher is not None:
        check_ready(state, config, adding=1)  # ready: room for one more triple
    review = request.app.get(REVIEW)
    if review is not None:
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(review.executor, review.store.schema_version)
        except StoreUnavailable:
            raise JsonError(
                503, "store_unavailable", "the verdict store cannot be reached",
                headers={"Retry-After": "5"},
            ) from None  # fmt: skip
    return web.json_response({"status": "ready", "backlog": state.backlog})


async def metrics(request: web.Request) -> web.Response:
    body = generate_latest(request.app[STATE].metrics.registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def openapi_json(request: web.Request) -> web.Response:
    return web.json_response(openapi())


def make_app(
    config: IngestConfig,
    registry: CollectorRegistry | None = None,
    review: Review | None = None,
) -> web.Application:
    """Ingest when there are ingest tokens (or ``insecure_no_auth``); the verdicts API and the
    review page when there is a ``review`` store; at least one of the two."""
    ingest = bool(config.tokens) or config.insecure_no_auth
    if not ingest and review is None:
        raise ValueError(
            "no ingest tokens: set VEREDITO_INGEST_TOKENS (token or token:app, comma-separated), "
            "or pass --insecure-no-auth to accept anyone (or --store alone for a read-only server)"
        )
    app = web.Application(client_max_size=config.max_bytes, middlewares=[errors_and_metrics])
    # the processes import what is sent to them: bodies and OTLP exports to parse, long pages
    pool = app[HEAVY] = HeavyPool(
        modules=(
            "veredito.producer.ingest",
            "veredito.producer.otlp",
            "veredito.producer.otlp.logs",
            "veredito.web.render",
        )
    )

    async def warm(_: web.Application) -> None:
        await pool.warm()

    async def close(_: web.Application) -> None:
        pool.close()

    app.on_startup.append(warm)
    app.on_cleanup.append(close)
    add_ingest(app, config, registry, enabled=ingest)
    if review is not None:
        review.metrics = ReviewMetrics(app[STATE].metrics.registry)  # one /metrics for all
        review.release_gauges = ReleaseGauges(
            app[STATE].metrics.registry, min_answers=review.release_min_answers
        )
        review.calibration_metrics = CalibrationMetrics(app[STATE].metrics.registry)
        add_routes(app, review)
    app.router.add_get("/healthz", healthz, allow_head=True)
    app.router.add_get("/readyz", readyz, allow_head=True)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/openapi.json", openapi_json)
    return app


def _error_response(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }


def openapi() -> dict[str, Any]:
    """The OpenAPI 3.1 document of these routes (``tests/test_serve.py`` keeps it true)."""
    errors = {
        "400": _error_response("not JSON, or NDJSON with a bad line (named)"),
        "401": _error_response("missing or unknown bearer token"),
        "403": _error_response("an Origin not in VEREDITO_ALLOWED_HOSTS"),
        "408": _error_response("the body did not arrive within VEREDITO_SERVE_BODY_TIMEOUT"),
        "413": _error_response(
            "body over VEREDITO_INGEST_MAX_BYTES, or more items than VEREDITO_INGEST_MAX_ITEMS "
            "(spans: VEREDITO_OTLP_MAX_SPANS_PER_REQUEST)"
        ),
        "415": _error_response("content type other than JSON or NDJSON"),
        "503": _error_response("broker unreachable or backlog full; see Retry-After"),
    }
    body = {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "oneOf": [
                        {"$ref": "#/components/schemas/Triple"},
                        {"type": "array", "items": {"$ref": "#/components/schemas/Triple"}},
                    ]
                }
            },
            NDJSON: {"schema": {"type": "string", "description": "one triple per line"}},
        },
    }
    result = {
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Accepted"}}}
    }
    otlp_route: dict[str, Any] = {
        "post": {
            "summary": "OTLP/HTTP trace export; spans become triples per trace",
            "requestBody": {
                "required": True,
                "content": {
                    PROTOBUF: {"schema": {"type": "string", "format": "binary"}},
                    "application/json": {"schema": {"type": "object"}},
                },
            },
            "responses": {
                "200": {
                    "description": "ExportTraceServiceResponse: empty for a full success; "
                    "partial_success with rejected_spans and the first reasons when spans "
                    "could not become a triple or were dropped as oversize"
                },
                **errors,
            },
        }
    }
    read_schemes, read_schemas, read_paths = openapi_part()
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "veredito",
            "version": "1",
            "description": "Ingest routes are served with ingest tokens; the verdicts API and "
            "the review page with --store.",
        },
        "components": {
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                **read_schemes,
            },
            "schemas": {
                "Triple": {
                    "type": "object",
                    "description": "spec §3; aliases accepted (question, contexts, response ...)",
                    "properties": {
                        "id": {"type": "string", "maxLength": 128},
                        "query": {"type": "string"},
                        "context": {
                            "oneOf": [
                                {"type": "string"},
                                {"type": "array", "items": {"type": "string"}},
                            ]
                        },
                        "answer": {"type": "string"},
                        "metadata": {"type": "object"},
                    },
                },
                "AferiqTrace": {
                    "type": "object",
                    "description": "aferiq-eval's RAG trace (a Triple) or agent trace",
                    "properties": {
                        "trace_id": {"type": "string"},
                        "goal": {"type": "string"},
                        "final_answer": {"type": "string"},
                        "steps": {"type": "array", "items": {"type": "object"}},
                        "tool_specs": {"type": ["array", "null"]},
                    },
                },
                "Accepted": {
                    "type": "object",
                    "required": [
                        "accepted",
                        "rejected",
                        "rejected_count",
                        "sampled_out",
                        "duplicates",
                    ],
                    "properties": {
                        "accepted": {"type": "array", "items": {"type": "string"}},
                        "rejected_count": {
                            "type": "integer",
                            "description": "every rejected item; `rejected` lists the first 100",
                        },
                        "sampled_out": {
                            "type": "array",
                            "items": {"type": "string"},
                            "description": "valid, left out by VEREDITO_SAMPLE_RATE",
                        },
                        "duplicates": {
                            "type": "array",
                            "items": {"type": "string"},
                            "description": "accepted within VEREDITO_DEDUP_WINDOW; dropped",
                        },
                        "rejected": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "required": ["index", "id", "error"],
                                "properties": {
                                    "index": {"type": "integer"},
                                    "id": {"type": "string"},
                                    "error": {"type": "string"},
                                },
                            },
                        },
                    },
                },
                **read_schemas,
                "Error": {
                    "type": "object",
                    "required": ["error"],
                    "properties": {
                        "error": {
                            "type": "object",
                            "required": ["code", "message"],
                            "properties": {
                                "code": {"type": "string"},
                                "message": {"type": "string"},
                            },
                        }
                    },
                },
            },
        },
        "security": [{"bearer": []}],
        "paths": {
            "/v1/triples": {
                "post": {
                    "summary": "Queue triples (one, an array, or NDJSON)",
                    "requestBody": body,
                    "responses": {"202": {"description": "all queued", **result}, **errors},
                }
            },
            "/v1/traces": otlp_route,
            "/v1/logs": {
                "post": {
                    "summary": "OTLP/HTTP logs export: GenAI events (the messages of LLM calls) "
                    "join their trace's spans; other records are ignored",
                    "requestBody": otlp_route["post"]["requestBody"],
                    "responses": {
                        "200": {
                            "description": "ExportLogsServiceResponse: empty for a full "
                            "success; partial_success with rejected_log_records and the reasons "
                            "for GenAI events with no trace and span id or dropped as oversize"
                        },
                        **errors,
                    },
                }
            },
            "/api/public/otel/v1/traces": {
                "post": {
                    **otlp_route["post"],
                    "summary": "Langfuse's OTLP route (its SDK v3): the same as /v1/traces; "
                    "HTTP Basic public:secret of VEREDITO_LANGFUSE_KEYS stands for its token",
                }
            },
            "/api/v1/traces": {
                "post": {
                    "summary": "aferiq-eval's ingest route",
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {
                                "schema": {"$ref": "#/components/schemas/AferiqTrace"}
                            }
                        },
                    },
                    "responses": {"200": {"description": "queued", **result}, **errors},
                },
                "head": {
                    "summary": "aferiq-eval's key probe",
                    "responses": {
                        "200": {"description": "the key is valid"},
                        "401": {"description": "the key is not valid"},
                    },
                },
            },
            "/healthz": {
                "get": {
                    "summary": "alive",
                    "security": [],
                    "responses": {"200": {"description": "alive"}},
                }
            },
            "/readyz": {
                "get": {
                    "summary": "broker reachable and queue below its limit",
                    "security": [],
                    "responses": {"200": {"description": "ready"}, "503": errors["503"]},
                }
            },
            "/metrics": {
                "get": {
                    "summary": "Prometheus exposition",
                    "security": [],
                    "responses": {"200": {"description": "metrics"}},
                }
            },
            "/openapi.json": {
                "get": {
                    "summary": "this document",
                    "security": [],
                    "responses": {"200": {"description": "OpenAPI 3.1"}},
                }
            },
            **read_paths,
            **openapi_paths(),
        },
    }
