"""Writes monitoring/grafana/dashboards/veredito.json (uid ``veredito-main``).

Run: .venv/bin/python monitoring/grafana/make_dashboard.py
Panels are listed here once; tests run every panel query against a real Prometheus.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DS = {"type": "prometheus", "uid": "veredito-prometheus"}
PG = {"type": "grafana-postgresql-datasource", "uid": "veredito-postgres"}
# The table of the latest hallucinated answers, from the verdict store; each id links to the
# review page of `veredito serve --store` (the dashboard variable review_url says where it is).
LATEST_SQL = """SELECT evaluated_at AS "time", app, categories, score, id
FROM verdicts
WHERE hallucinated AND $__timeFilter(evaluated_at)
  AND COALESCE(app, '') ~ '^(${app:regex})$'
ORDER BY evaluated_at DESC, id DESC
LIMIT 50"""
APP = 'app=~"$app"'
AJ = 'app=~"$app",judge=~"$judge"'
RI = "$__rate_interval"

# (title, type, unit, [(expr, legend)], width)
PANELS: list[tuple[str, str, str, list[tuple[str, str]], int]] = [
    (
        "Hallucinated answers, by app (5m)",
        "timeseries",
        "percentunit",
        [(f"app:veredito_hallucinated_answers:ratio_rate5m{{{APP}}}", "{{app}}")],
        12,
    ),
    (
        "Hallucinated answers, by category (5m)",
        "timeseries",
        "percentunit",
        [
            (
                f"app_category:veredito_hallucinated_answers:ratio_rate5m{{{APP}}}",
                "{{app}} {{category}}",
            )
        ],
        12,
    ),
    (
        "Claims not grounded, by app (5m)",
        "timeseries",
        "percentunit",
        [(f"app:veredito_claims_not_grounded:ratio_rate5m{{{APP}}}", "{{app}}")],
        12,
    ),
    (
        "Claims not grounded, by category (1h)",
        "timeseries",
        "percentunit",
        [("category:veredito_claims_not_grounded:ratio_rate1h", "{{category}}")],
        12,
    ),
    (
        "Verdict mix (claims per second)",
        "timeseries",
        "reqps",
        [(f"sum by (verdict) (rate(veredito_claims_total{{{AJ}}}[{RI}]))", "{{verdict}}")],
        8,
    ),
    (
        "Verdicts by status (per second)",
        "timeseries",
        "reqps",
        [(f"sum by (status) (rate(veredito_evaluations_total{{{AJ}}}[{RI}]))", "{{status}}")],
        8,
    ),
    (
        "Throughput (verdicts per second)",
        "stat",
        "reqps",
        [(f"sum(rate(veredito_evaluations_total{{{AJ}}}[{RI}]))", "verdicts/s")],
        8,
    ),
    (
        "Score distribution",
        "bargauge",
        "short",
        [(f"sum by (le) (increase(veredito_score_bucket{{{AJ}}}[{RI}]))", "≤ {{le}}")],
        12,
    ),
    (
        "Faithfulness distribution",
        "bargauge",
        "short",
        [
            (
                f"sum by (le) (increase(veredito_faithfulness_score_bucket{{{APP}}}[{RI}]))",
                "≤ {{le}}",
            )
        ],
        12,
    ),
    (
        "Judge latency p50 / p95 / p99",
        "timeseries",
        "s",
        [
            (
                f"histogram_quantile({q}, sum by (le) (rate(veredito_judge_request_duration_seconds_bucket[{RI}])))",
                f"p{int(q * 100)}",
            )
            for q in (0.5, 0.95, 0.99)
        ],
        12,
    ),
    (
        "Judge tokens per second",
        "timeseries",
        "short",
        [(f"sum by (kind) (rate(veredito_judge_tokens_total[{RI}]))", "{{kind}}")],
        12,
    ),
    (
        "Judge failures and retries (per second)",
        "timeseries",
        "reqps",
        [
            (
                f'sum(rate(veredito_evaluations_total{{status="failed",{AJ}}}[{RI}]))',
                "failed verdicts",
            ),
            (f"sum by (reason) (rate(veredito_judge_retries_total[{RI}]))", "retry: {{reason}}"),
        ],
        8,
    ),
    (
        "Judge output repairs (per second)",
        "timeseries",
        "reqps",
        [(f"sum by (kind) (rate(veredito_judge_output_repairs_total[{RI}]))", "{{kind}}")],
        8,
    ),
    (
        "Rule disagreements with the LLM (per second)",
        "timeseries",
        "reqps",
        [(f"sum by (category) (rate(veredito_rule_disagreements_total[{RI}]))", "{{category}}")],
        8,
    ),
    (
        "Dead letters (per second)",
        "timeseries",
        "reqps",
        [(f"sum by (reason) (rate(veredito_dead_letters_total[{RI}]))", "{{reason}}")],
        8,
    ),
    (
        "In-flight evaluations",
        "timeseries",
        "short",
        [("sum(veredito_inflight_evaluations)", "in flight")],
        8,
    ),
    (
        "Triple → verdict latency p95",
        "timeseries",
        "s",
        [
            (
                f"histogram_quantile(0.95, sum by (le) (rate(veredito_evaluation_latency_seconds_bucket{{{APP}}}[{RI}])))",
                "p95",
            )
        ],
        8,
    ),
    (
        "Judge circuit (0 closed, 1 half-open, 2 open), by worker",
        "timeseries",
        "short",
        [("max by (instance) (veredito_judge_circuit_state)", "{{instance}}")],
        12,
    ),
    (
        "Redeliveries not judged again (per second)",
        "timeseries",
        "reqps",
        [(f"sum(rate(veredito_redeliveries_skipped_total[{RI}]))", "skipped")],
        12,
    ),
    (
        "Judge cost by app (US$ per hour, approximate prices)",
        "timeseries",
        "currencyUSD",
        [(f"sum by (app) (rate(veredito_judge_cost_total{{{APP}}}[{RI}])) * 3600", "{{app}}")],
        8,
    ),
    (
        "Verdict cache hit rate",
        "timeseries",
        "percentunit",
        [
            (
                f'(sum(rate(veredito_judge_cache_total{{result="hit"}}[{RI}])) or vector(0)) '
                f"/ sum(rate(veredito_judge_cache_total[{RI}]))",
                "hits",
            )
        ],
        8,
    ),
    (
        "Judge rate limit in force, waits and 429s",
        "timeseries",
        "short",
        [
            ("max by (model, kind) (veredito_judge_rate_limit)", "{{model}} {{kind}}"),
            (
                f"sum(rate(veredito_judge_rate_wait_seconds_total[{RI}])) or vector(0)",
                "seconds waited / s",
            ),
            (f"sum(rate(veredito_judge_rate_limited_total[{RI}])) or vector(0)", "429s / s"),
            (
                f"sum by (app) (rate(veredito_budget_fallbacks_total[{RI}])) or vector(0)",
                "budget spent: {{app}}",
            ),
        ],
        8,
    ),
    (
        "Queue depth",
        "timeseries",
        "short",
        [
            (
                'sum by (queue) (rabbitmq_detailed_queue_messages_ready{queue=~"veredito.*"})',
                "{{queue}} ready",
            ),
            (
                'sum by (queue) (rabbitmq_detailed_queue_messages_unacked{queue=~"veredito.*"})',
                "{{queue}} unacked",
            ),
        ],
        24,
    ),
]


def variable(name: str, metric: str) -> dict[str, Any]:
    return {
        "name": name,
        "label": name,
        "type": "query",
        "datasource": DS,
        "query": {"query": f"label_values({metric}, {name})", "refId": name},
        "definition": f"label_values({metric}, {name})",
        "multi": True,
        "includeAll": True,
        "allValue": ".*",
        "refresh": 2,
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
    }


def latest_table(panel_id: int, y: int) -> dict[str, Any]:
    link = {
        "title": "Abrir no veredito",
        "url": "${review_url}/verdicts/${__value.raw}",
        "targetBlank": True,
    }
    return {
        "id": panel_id,
        "type": "table",
        "title": "Latest hallucinated answers",
        "description": "From the verdict store (PostgreSQL); the id opens the review page.",
        "datasource": PG,
        "gridPos": {"x": 0, "y": y, "w": 24, "h": 10},
        "fieldConfig": {
            "defaults": {},
            "overrides": [
                {
                    "matcher": {"id": "byName", "options": "id"},
                    "properties": [{"id": "links", "value": [link]}],
                },
                {
                    "matcher": {"id": "byName", "options": "score"},
                    "properties": [{"id": "decimals", "value": 2}],
                },
            ],
        },
        "options": {"showHeader": True, "sortBy": [{"displayName": "time", "desc": True}]},
        "targets": [{"refId": "A", "datasource": PG, "format": "table", "rawQuery": True,
                     "editorMode": "code", "rawSql": LATEST_SQL}],
    }  # fmt: skip


def dashboard() -> dict[str, Any]:
    panels = []
    x = y = 0
    for i, (title, kind, unit, queries, width) in enumerate(PANELS, 1):
        if x + width > 24:
            x, y = 0, y + 8
        panels.append(
            {
                "id": i,
                "type": kind,
                "title": title,
                "datasource": DS,
                "gridPos": {"x": x, "y": y, "w": width, "h": 8},
                "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                "targets": [
                    {"refId": chr(65 + n), "datasource": DS, "expr": expr, "legendFormat": legend}
                    for n, (expr, legend) in enumerate(queries)
                ],
            }
        )
        x += width
    panels.append(latest_table(len(PANELS) + 1, y + 8))
    return {
        "uid": "veredito-main",
        "title": "veredito — RAG hallucinations",
        "tags": ["veredito", "rag", "llm"],
        "timezone": "browser",
        "schemaVersion": 39,
        "version": 1,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {
            "list": [
                variable("app", "veredito_evaluations_total"),
                variable("judge", "veredito_evaluations_total"),
                {
                    "name": "review_url",
                    "label": "review page",
                    "type": "textbox",
                    "query": "http://localhost:8080",
                    "current": {"text": "http://localhost:8080", "value": "http://localhost:8080"},
                    "description": "where veredito serve --store answers, for the table's links",
                },
            ]
        },
        "panels": panels,
    }


if __name__ == "__main__":
    path = Path(__file__).parent / "dashboards" / "veredito.json"
    path.write_text(json.dumps(dashboard(), ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    print(f"{len(PANELS) + 1} panels -> {path}")
