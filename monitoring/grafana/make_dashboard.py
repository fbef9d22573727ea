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

# The headline: hallucinated answers the judge is confident of (spec §17: hallucination_confidence
# at least the worker's VEREDITO_ALERT_CONFIDENCE), which the alerts fire on, each with the share
# of all suspicions, confident or not, right beside it.
SURE_BY_APP = "Hallucinated answers, confident, by app (5m)"
ALL_BY_APP = "Hallucinated answers, all suspicions, by app (5m)"
SURE_BY_CATEGORY = "Hallucinated answers, confident, by category (5m)"
ALL_BY_CATEGORY = "Hallucinated answers, all suspicions, by category (5m)"

# (title, type, unit, [(expr, legend)], width)
PANELS: list[tuple[str, str, str, list[tuple[str, str]], int]] = [
    (
        SURE_BY_APP,
        "timeseries",
        "percentunit",
        [(f"app:veredito_confident_hallucinated_answers:ratio_rate5m{{{APP}}}", "{{app}}")],
        12,
    ),
    (
        ALL_BY_APP,
        "timeseries",
        "percentunit",
        [(f"app:veredito_hallucinated_answers:ratio_rate5m{{{APP}}}", "{{app}}")],
        12,
    ),
    (
        SURE_BY_CATEGORY,
        "timeseries",
        "percentunit",
        [
            (
                f"app_category:veredito_confident_hallucinated_answers:ratio_rate5m{{{APP}}}",
                "{{app}} {{category}}",
            )
        ],
        12,
    ),
    (
        ALL_BY_CATEGORY,
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


# The judge on the team's own traffic (spec §16): reviewers' labels of the uniform slice, from
# `veredito serve --store` (scrape job veredito-serve); max by (app, category, judge) keeps one
# series whatever the number of serve replicas, as the alert VereditoJudgePrecisionLow does.
REVIEW_ROW = "The judge on your traffic (reviewers' labels)"
ACJ = "app, category, judge"
WHO = "{{app}} {{category}} {{judge}}"
REVIEW_PANELS: list[tuple[str, str, str, list[tuple[str, str]], int]] = [
    (
        "Judge precision on reviewers' labels, by category and judge (95 % interval)",
        "timeseries",
        "percentunit",
        [
            (f"max by ({ACJ}) (veredito_judge_precision{{{AJ}}})", WHO),
            (f"max by ({ACJ}) (veredito_judge_precision_lower{{{AJ}}})", f"{WHO} lower end"),
            (f"app_category_judge:veredito_judge_precision:upper95{{{AJ}}}", f"{WHO} upper end"),
            ("min(veredito_judge_precision_floor) or vector(0.7)", "floor"),
        ],
        24,
    ),
    (
        "Reviewers' labels by app (per hour)",
        "timeseries",
        "short",
        [(f"sum by (app) (rate(veredito_review_labels_total{{{APP}}}[{RI}])) * 3600", "{{app}}")],
        12,
    ),
    (
        "Labelled answers behind each precision",
        "timeseries",
        "short",
        [
            (f"max by ({ACJ}) (veredito_judge_precision_labels{{{AJ}}})", WHO),
            ("max(veredito_judge_precision_min_labels) or vector(30)", "alerts from"),
        ],
        12,
    ),
]

# Releases (spec §18): the newest release of each app against the one before. From `veredito
# serve --store`'s gauges (figures from the store; max by (…) keeps one series whatever the number
# of serve replicas) and from the workers' counters per release (the last hour).
RELEASE_ROW = "Newest release against the one before"
SURE_BY_RELEASE = "Hallucinated answers by release, confident (1h)"
ALL_BY_RELEASE = "Hallucinated answers by release, all suspicions (1h)"
SURE_BY_RELEASE_CATEGORY = "Hallucinated answers by release and category, confident (1h)"
ALL_BY_RELEASE_CATEGORY = "Hallucinated answers by release and category, all suspicions (1h)"
REGRESSED = "Regressed: newest release against the one before (1 regressed)"
RELEASE_RATE = "Hallucination rate by release, confident and all suspicions (store)"
RELEASE_ANSWERS = "Judged answers by release (store)"
AR = "app, release"
RELEASE_PANELS: list[tuple[str, str, str, list[tuple[str, str]], int]] = [
    (
        RELEASE_RATE,
        "bargauge",
        "percentunit",
        [
            (
                f'max by ({AR}) (veredito_release_hallucination_rate{{confident="true",{APP}}})',
                "{{app}} {{release}} confident",
            ),
            (
                f'max by ({AR}) (veredito_release_hallucination_rate{{confident="false",{APP}}})',
                "{{app}} {{release}} all suspicions",
            ),
        ],
        12,
    ),
    (
        RELEASE_ANSWERS,
        "bargauge",
        "short",
        [
            (f"max by ({AR}) (veredito_release_answers{{{APP}}})", "{{app}} {{release}}"),
            ("max(veredito_release_min_answers) or vector(200)", "alerts from"),
        ],
        12,
    ),
    (
        SURE_BY_RELEASE,
        "timeseries",
        "percentunit",
        [
            (
                f"app_release:veredito_confident_hallucinated_answers:ratio_rate1h{{{APP}}}",
                "{{app}} {{release}}",
            )
        ],
        12,
    ),
    (
        ALL_BY_RELEASE,
        "timeseries",
        "percentunit",
        [
            (
                f"app_release:veredito_hallucinated_answers:ratio_rate1h{{{APP}}}",
                "{{app}} {{release}}",
            )
        ],
        12,
    ),
    (
        SURE_BY_RELEASE_CATEGORY,
        "timeseries",
        "percentunit",
        [
            (
                f"app_release_category:veredito_confident_hallucinated_answers:ratio_rate1h{{{APP}}}",
                "{{app}} {{release}} {{category}}",
            )
        ],
        12,
    ),
    (
        ALL_BY_RELEASE_CATEGORY,
        "timeseries",
        "percentunit",
        [
            (
                f"app_release_category:veredito_hallucinated_answers:ratio_rate1h{{{APP}}}",
                "{{app}} {{release}} {{category}}",
            )
        ],
        12,
    ),
    (
        REGRESSED,
        "table",
        "short",
        [
            (
                f"max by (app, base, head, category) (veredito_release_regressed{{{APP}}})",
                "{{app}} {{head}} against {{base}}: {{category}}",
            )
        ],
        24,
    ),
]
# The calibration that refits itself from reviewers' labels (issue 30): serve --store's gauges of
# the current version and its held-out figures (max: one series whatever the number of serve
# replicas), and which version the workers judge with.
CALIBRATION_ROW = "Calibration: refitted from reviewers' labels"
CALIBRATION_IN_USE = "Calibration in use: version and held-out ECE, log loss"
CALIBRATION_WORKERS = "Workers by calibration version"
CALIBRATION_PANELS: list[tuple[str, str, str, list[tuple[str, str]], int]] = [
    (
        CALIBRATION_IN_USE,
        "timeseries",
        "short",
        [
            ("max(veredito_calibration_version)", "version"),
            ("max(veredito_calibration_held_out_ece)", "held-out ECE"),
            ("max(veredito_calibration_held_out_log_loss)", "held-out log loss"),
            (
                "sum by (outcome) (increase(veredito_calibration_refits_total[1h]))",
                "refits {{outcome}} (1h)",
            ),
        ],
        12,
    ),
    (
        CALIBRATION_WORKERS,
        "timeseries",
        "short",
        [("count by (version) (veredito_calibration_in_use == 1)", "version {{version}}")],
        12,
    ),
]
DESCRIPTIONS = {
    CALIBRATION_IN_USE: (
        "The calibration serve --store serves (GET /v1/calibration): its version (0: none fitted "
        "yet, the shipped one), and its log loss and expected calibration error on the uniform "
        "slice's held-out quarter when it was fitted; refits adopted and rejected. A refit is "
        "adopted only when its held-out log loss is lower and its ECE not higher; "
        "veredito calibrate --rollback VERSION makes an older one current."
    ),
    CALIBRATION_WORKERS: (
        "How many worker processes judge with each calibration version (VEREDITO_CALIBRATION="
        "serve's /v1/calibration URL, polled every VEREDITO_CALIBRATION_POLL seconds); 'none' "
        "is the shipped calibration or a file. During a change both versions show for a poll."
    ),
    SURE_BY_APP: (
        "Share of the app's judged answers with a hallucination the judge is confident of: "
        "hallucination_confidence at least the worker's VEREDITO_ALERT_CONFIDENCE (0.8). "
        "VereditoHallucinationRatioHigh fires on this share. The panel beside counts every "
        "suspicion, confident or not."
    ),
    ALL_BY_APP: (
        "Share of the app's judged answers with at least one claim not grounded, however sure "
        "the judge is: every suspicion. No alert fires on it; the panel beside shows the "
        "confident ones the alerts count."
    ),
    SURE_BY_CATEGORY: (
        "Share of the app's judged answers with a claim of the category not grounded that the "
        "judge is confident of (at least VEREDITO_ALERT_CONFIDENCE, 0.8). "
        "VereditoCategoryHallucinationHigh and VereditoCategorySpike fire on the same share "
        "taken over all apps. The panel beside counts every suspicion."
    ),
    ALL_BY_CATEGORY: (
        "Share of the app's judged answers with a claim of the category not grounded, however "
        "sure the judge is: every suspicion. No alert fires on it; the panel beside shows the "
        "confident ones the alerts count."
    ),
    REVIEW_PANELS[0][0]: (
        "The judge's precision on the answers reviewers labelled in the uniform slice, over "
        "VEREDITO_REVIEW_WINDOW (category answer: the answer level), with its 95 % Wilson "
        "interval. VereditoJudgePrecisionLow fires when the upper end stays under the floor on "
        "enough labels; GET /v1/agreement on the review server gives the whole table."
    ),
    REVIEW_PANELS[2][0]: (
        "How many labelled answers each precision rests on (those the judge flagged in the "
        "category, or all labelled answers at the answer level); under 'alerts from' "
        "(VEREDITO_REVIEW_MIN_LABELS) a precision never alerts."
    ),
    RELEASE_RATE: (
        "Each kept release's share of hallucinated answers among its judged answers in the "
        "verdict store, as veredito serve --store computes it for the comparison: confident (at "
        "least VEREDITO_ALERT_CONFIDENCE) and all suspicions, side by side."
    ),
    RELEASE_ANSWERS: (
        "The judged answers each release's rates rest on; under 'alerts from' "
        "(VEREDITO_RELEASE_MIN_ANSWERS) VereditoReleaseRegressed never fires."
    ),
    SURE_BY_RELEASE: (
        "The app's confident share per release over the last hour, from the workers' counters: "
        "during a rollout both releases answer and the lines run side by side. Each app keeps its "
        "VEREDITO_RELEASES_KEPT (3) most recently first-seen releases; older ones are 'other'."
    ),
    ALL_BY_RELEASE: "The same per release, every suspicion counted, confident or not.",
    REGRESSED: (
        "1 where the newest release hallucinates more than the one before it (the interval of "
        "the difference wholly above 0: 95 %, Bonferroni-adjusted for a category) at the answer "
        "level ('answer') or in a category, 0 "
        "where not; VereditoReleaseRegressed fires on a 1 with enough answers on both sides. "
        "GET /v1/compare?app=…&base=…&head=… on the review server gives the whole table."
    ),
}


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


def grid(
    specs: list[tuple[str, str, str, list[tuple[str, str]], int]], first_id: int, y: int
) -> tuple[list[dict[str, Any]], int]:
    """The panels of ``specs``, 8 high, left to right from row ``y``; and the next free row."""
    panels = []
    x = 0
    for i, (title, kind, unit, queries, width) in enumerate(specs, first_id):
        if x + width > 24:
            x, y = 0, y + 8
        panel = {
            "id": i,
            "type": kind,
            "title": title,
            "datasource": DS,
            "gridPos": {"x": x, "y": y, "w": width, "h": 8},
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "targets": [
                {"refId": chr(65 + n), "datasource": DS, "expr": expr, "legendFormat": legend}
                | ({"format": "table", "instant": True} if kind == "table" else {})
                for n, (expr, legend) in enumerate(queries)
            ],
        }
        if title in DESCRIPTIONS:
            panel["description"] = DESCRIPTIONS[title]
        panels.append(panel)
        x += width
    return panels, y + 8


def row(panel_id: int, title: str, y: int) -> dict[str, Any]:
    return {
        "id": panel_id,
        "type": "row",
        "title": title,
        "collapsed": False,
        "gridPos": {"x": 0, "y": y, "w": 24, "h": 1},
        "panels": [],
    }


def dashboard() -> dict[str, Any]:
    panels, y = grid(PANELS, 1, 0)
    panels.append(latest_table(len(PANELS) + 1, y))
    y += 10  # the table's height
    panels.append(row(len(PANELS) + 2, REVIEW_ROW, y))
    review, y = grid(REVIEW_PANELS, len(PANELS) + 3, y + 1)
    panels += review
    first = len(PANELS) + len(REVIEW_PANELS) + 3
    panels.append(row(first, RELEASE_ROW, y))
    releases, y = grid(RELEASE_PANELS, first + 1, y + 1)
    panels += releases
    first += len(RELEASE_PANELS) + 1
    panels.append(row(first, CALIBRATION_ROW, y))
    calibration, _ = grid(CALIBRATION_PANELS, first + 1, y + 1)
    panels += calibration
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
    count = len(PANELS) + len(REVIEW_PANELS) + len(RELEASE_PANELS) + len(CALIBRATION_PANELS) + 1
    print(f"{count} panels and three rows -> {path}")
