"""Monitoring: rules, alerts, dashboard and Compose file, checked by the real tools.

The integration test runs a real Prometheus with the project's rules, scraping a running worker
and RabbitMQ's Prometheus plugin, sends a batch through the broker, then evaluates every recording
rule and every dashboard panel query through Prometheus's HTTP API. The rules and panels on
reviewers' labels, which only `veredito serve --store` exports, are checked the same way against
a real serve on SQLite, with no broker; those on serve's release gauges (spec §18) against the
gauges themselves in tests/test_release_metrics.py.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import IN_CI, ROOT, require_service
from tests.llm_server import ServerThread
from tests.test_broker_e2e import reset_broker, running_worker, veredito

MONITORING = ROOT / "monitoring"
PROMETHEUS_DIR = MONITORING / "prometheus"
DASHBOARD = MONITORING / "grafana" / "dashboards" / "veredito.json"
AMQP = "amqp://guest:guest@127.0.0.1:5672//"
CACHE_REDIS = "redis://127.0.0.1:6379/11"
# metrics that only `veredito serve --store` exports (reviewers' labels, spec §16)
FROM_SERVE = (
    "veredito_judge_precision",
    "veredito_review_labels_total",
    "veredito_calibration_version",  # the calibration refitted from the labels (issue 30)
    "veredito_calibration_held_out",
    "veredito_calibration_refits_total",
)
# serve's release gauges (spec §18): tests/test_release_metrics.py runs their panels and alert
RELEASE_GAUGES = "veredito_release_"


def from_serve(expr: str) -> bool:
    return any(name in expr for name in FROM_SERVE)


def from_release_gauges(expr: str) -> bool:
    return RELEASE_GAUGES in expr


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        message = f"{name} is not installed (make test installs Debian's prometheus package)"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    return path


def wait_for(condition: Callable[[], Any], what: str, deadline: float = 60) -> Any:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        value = condition()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out after {deadline}s waiting for {what}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def panel_queries() -> list[tuple[str, str]]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [
        (panel["title"], target["expr"])
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])  # a row has none
        if "expr" in target  # the PostgreSQL table has rawSql (test_latest_hallucinated_...)
    ]


def recording_rules() -> list[str]:
    groups = yaml.safe_load((PROMETHEUS_DIR / "recording.yml").read_text())["groups"]
    return [rule["record"] for group in groups for rule in group["rules"]]


# -------------------------------------------------------------------------- static checks


def test_promtool_check_rules_is_clean() -> None:
    promtool = tool("promtool")
    result = subprocess.run(
        [promtool, "check", "rules", "recording.yml", "alerts.yml"],
        cwd=PROMETHEUS_DIR,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 28 rules found" in result.stdout and "SUCCESS: 13 rules found" in result.stdout


def test_promtool_alert_tests_pass() -> None:
    promtool = tool("promtool")
    result = subprocess.run(
        [promtool, "test", "rules", "tests/alerts_test.yml"],
        cwd=PROMETHEUS_DIR,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_a_test_that_fires_and_one_that_does_not() -> None:
    alerts = [
        r["alert"]
        for g in yaml.safe_load((PROMETHEUS_DIR / "alerts.yml").read_text())["groups"]
        for r in g["rules"]
    ]
    cases = [
        case
        for test in yaml.safe_load((PROMETHEUS_DIR / "tests" / "alerts_test.yml").read_text())[
            "tests"
        ]
        for case in test.get("alert_rule_test", [])  # some test only recording rules
    ]
    for alert in alerts:
        mine = [c for c in cases if c["alertname"] == alert]
        assert any(c["exp_alerts"] for c in mine), f"{alert} never fires in a test"
        assert any(not c["exp_alerts"] for c in mine), f"{alert} has no must-not-fire case"
    for group in yaml.safe_load((PROMETHEUS_DIR / "alerts.yml").read_text())["groups"]:
        for rule in group["rules"]:
            assert rule.get("for"), rule["alert"]
            assert rule["labels"]["severity"] in ("warning", "critical")
            assert len(rule["annotations"]["description"]) > 40


def test_dashboard_has_a_stable_uid_variables_and_the_panels_asked_for() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "veredito-main"
    assert [v["name"] for v in dashboard["templating"]["list"]] == ["app", "judge", "review_url"]
    titles = " ".join(p["title"].lower() for p in dashboard["panels"])
    for words in (
        "by app",
        "by category",
        "confident",
        "all suspicions",
        "verdict mix",
        "score distribution",
        "faithfulness",
        "p50",
        "tokens",
        "failures",
        "repairs",
        "disagreements",
        "dead letters",
        "in-flight",
        "throughput",
        "queue depth",
        "latest hallucinated answers",
        "the judge on your traffic",
        "precision",
        "reviewers' labels by app",
        "labelled answers behind each precision",
        "calibration in use",
    ):
        assert words in titles, words
    import runpy

    build = runpy.run_path(str(MONITORING / "grafana" / "make_dashboard.py"))["dashboard"]
    assert build() == dashboard, "veredito.json is stale: run monitoring/grafana/make_dashboard.py"


def test_hallucination_alerts_count_the_confident_and_the_dashboard_shows_both() -> None:
    """Spec §17: the hallucination alerts fire on the confident shares only; the dashboard's
    headline panels show the confident shares, each with the share of all suspicions beside it."""
    records = recording_rules()
    for level in ("app", "category", "app_category"):
        for window in ("5m", "1h"):
            assert f"{level}:veredito_confident_hallucinated_answers:ratio_rate{window}" in records
            assert f"{level}:veredito_hallucinated_answers:ratio_rate{window}" in records
    exprs = {
        r["alert"]: r["expr"]
        for g in yaml.safe_load((PROMETHEUS_DIR / "alerts.yml").read_text())["groups"]
        for r in g["rules"]
    }
    for alert in ("VereditoHallucinationRatioHigh", "VereditoCategoryHallucinationHigh",
                  "VereditoCategorySpike"):  # fmt: skip
        assert ":veredito_confident_hallucinated_answers:" in exprs[alert], alert
    assert not any(":veredito_hallucinated_answers:" in e for e in exprs.values())

    panels = {p["title"]: p for p in json.loads(DASHBOARD.read_text())["panels"]}
    for by in ("app", "category"):
        sure = panels[f"Hallucinated answers, confident, by {by} (5m)"]
        every = panels[f"Hallucinated answers, all suspicions, by {by} (5m)"]
        assert all(
            ":veredito_confident_hallucinated_answers:" in t["expr"] for t in sure["targets"]
        )
        assert all(":veredito_hallucinated_answers:" in t["expr"] for t in every["targets"])
        assert sure["gridPos"]["y"] == every["gridPos"]["y"]  # right beside
        assert sure["gridPos"]["x"] + sure["gridPos"]["w"] == every["gridPos"]["x"]
        assert "VEREDITO_ALERT_CONFIDENCE" in sure["description"]
    [first] = [p for p in panels.values() if (p["gridPos"]["x"], p["gridPos"]["y"]) == (0, 0)]
    assert first["title"] == "Hallucinated answers, confident, by app (5m)"  # the headline


def test_latest_hallucinated_answers_table_runs_on_the_store(pg_url: str) -> None:
    """The table panel's SQL, with Grafana's macros expanded as Grafana does, on a real
    PostgreSQL store; its datasource is the provisioned one, and each id links to the page."""
    from tests.test_store import make_verdict
    from veredito.store import open_store

    dashboard = json.loads(DASHBOARD.read_text())
    [panel] = [p for p in dashboard["panels"] if p["title"] == "Latest hallucinated answers"]
    provisioned = yaml.safe_load(
        (MONITORING / "grafana" / "provisioning" / "datasources" / "postgres.yml").read_text()
    )["datasources"][0]
    assert panel["datasource"]["uid"] == provisioned["uid"]
    assert panel["datasource"]["type"] == provisioned["type"]
    [link] = panel["fieldConfig"]["overrides"][0]["properties"][0]["value"]
    assert link["url"] == "${review_url}/verdicts/${__value.raw}"

    verdicts = [make_verdict(i) for i in range(80)]
    store = open_store(pg_url)
    store.write([v.model_dump_json().encode() for v in verdicts])
    store.close()
    sql = panel["targets"][0]["rawSql"]
    for apps, regex in ((None, ".*"), ({"rh-bot", "sac-bot"}, "rh-bot|sac-bot")):
        expanded = sql.replace(
            "$__timeFilter(evaluated_at)",
            "evaluated_at BETWEEN '2026-11-30T12:00:00Z' AND '2026-11-30T14:10:00Z'",
        ).replace("${app:regex}", regex)
        import psycopg

        with psycopg.connect(pg_url) as conn:
            rows = conn.execute(expanded).fetchall()
        expected = sorted(
            (v for v in verdicts if v.hallucinated and (apps is None or v.app in apps)),
            key=lambda v: (v.evaluated_at, v.id),
            reverse=True,
        )[:50]
        assert [r[4] for r in rows] == [v.id for v in expected]
        assert all(r[2] for r in rows)  # the categories column says what was invented


def test_compose_file_validates_against_the_compose_specification() -> None:
    import jsonschema

    schema = json.loads((ROOT / "tests" / "data" / "compose-spec.json").read_text())
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    errors = list(jsonschema.Draft201909Validator(schema).iter_errors(compose))
    assert not errors, [e.message for e in errors]
    services = compose["services"]
    for name in (
        "rabbitmq",
        "redis",
        "worker",
        "results",
        "producer",
        "prometheus",
        "alertmanager",
        "grafana",
        "postgres",
    ):
        assert name in services, name
    for name in ("rabbitmq", "redis", "worker", "prometheus", "alertmanager", "grafana",
                 "postgres"):  # fmt: skip
        assert "healthcheck" in services[name], name
    env = services["worker"]["environment"]
    assert {"VEREDITO_LLM_BASE_URL", "VEREDITO_LLM_API_KEY"} <= set(env)
    mounts = " ".join(services["grafana"]["volumes"])
    assert "provisioning" in mounts and "dashboards" in mounts
    # and the schema does catch mistakes
    broken = {**compose, "services": {**services, "worker": {**services["worker"], "restart": 5}}}
    assert list(jsonschema.Draft201909Validator(schema).iter_errors(broken))


# -------------------------------------------------------------------------- the real thing


class Prometheus:
    def __init__(
        self, binary: str, tmp: Path, worker_port: int, serve_port: int | None = None
    ) -> None:
        self.port = free_port()
        rules = tmp / "rules"
        rules.mkdir()
        for name in ("recording.yml", "alerts.yml"):
            shutil.copy(PROMETHEUS_DIR / name, rules / name)
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(rules / "recording.yml"), str(rules / "alerts.yml")],
            "scrape_configs": [
                {
                    "job_name": "veredito-worker",
                    "static_configs": [{"targets": [f"127.0.0.1:{worker_port}"]}],
                },
                {
                    "job_name": "rabbitmq-queues",
                    "metrics_path": "/metrics/detailed",
                    "params": {"family": ["queue_coarse_metrics"], "vhost": ["/"]},
                    "static_configs": [{"targets": ["127.0.0.1:15692"]}],
                },
            ],
        }
        if serve_port is not None:  # serve alone: reviewers' labels and the judge's precision
            config["scrape_configs"] = [
                {
                    "job_name": "veredito-serve",
                    "static_configs": [{"targets": [f"127.0.0.1:{serve_port}"]}],
                }
            ]
        (tmp / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.process = subprocess.Popen(
            [
                binary,
                f"--config.file={tmp / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=(tmp / "prometheus.log").open("w"),
        )

    def query(self, expr: str) -> list[dict[str, Any]]:
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode(
            {"query": expr}
        )
        with urllib.request.urlopen(url, timeout=10) as response:
            body = json.loads(response.read())
        assert body["status"] == "success", body
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=30)


def batch() -> list[dict[str, Any]]:
    base = {
        "context": [
            "Comercial Ipê Ltda., CNPJ 11.222.333/0001-81. Devolução em 7 dias, "
            "conforme o art. 49 do CDC."
        ]
    }
    rows = []
    for i in range(30):
        marker = ["", " #invent:LEI", " #invent:PRAZO_VALOR", ""][i % 4]
        rows.append(
            {
                **base,
                "id": f"mon-{i}",
                "query": f"Posso devolver? ({i})",
                "answer": f"Sim, em 7 dias.{marker} Procure a loja.",
                # two releases per app (spec §18); the rows below name none: unknown
                "metadata": {"app": ["sac", "rh"][i % 2], "release": ["1.0", "2.0"][i // 15]},
            }
        )
    rows += [
        {**base, "id": "mon-bad", "query": "q #llm:bad_twice", "answer": "Sim."},
        {**base, "id": "mon-fence", "query": "q #llm:fenced", "answer": "Sim, em 7 dias."},
        {**base, "id": "mon-500", "query": "q #llm:http500_once", "answer": "Sim."},
        # the test model calls this grounded; the rules know the check digits are wrong
        {
            **base,
            "id": "mon-cnpj",
            "query": "Qual o CNPJ?",
            "answer": "O CNPJ é 11.222.333/0001-82.",
        },
    ]
    return rows


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[dict[str, Any]]:
    require_service(5672, "RabbitMQ")
    require_service(15692, "RabbitMQ's Prometheus plugin")
    binary = tool("prometheus")
    reset_broker(AMQP)
    worker_port = free_port()
    with ServerThread() as llm:
        import redis

        redis.Redis.from_url(CACHE_REDIS).flushdb()  # no result cached by an earlier run
        env = {
            **os.environ,
            "VEREDITO_BROKER_URL": AMQP,
            "VEREDITO_LLM_BASE_URL": llm.base_url,
            "VEREDITO_LLM_MAX_BACKOFF": "0.05",
            # the cost, cache and rate-limit panels have data too
            "VEREDITO_LLM_MODEL": "gpt-4o-mini",
            "VEREDITO_REDIS_URL": CACHE_REDIS,
            "VEREDITO_CACHE_TTL": "600",
            "VEREDITO_LLM_RPM": "60000",
        }
        with running_worker(env, 16, worker_port):
            prometheus = Prometheus(binary, tmp_path, worker_port)
            try:
                wait_for(prometheus.ready, "Prometheus to be ready")
                yield {
                    "env": env,
                    "prometheus": prometheus,
                    "worker_port": worker_port,
                    "tmp": tmp_path,
                }
            finally:
                prometheus.stop()
    reset_broker(AMQP)


@pytest.mark.broker
def test_rules_panels_and_metrics_against_a_real_prometheus(stack: dict[str, Any]) -> None:
    prometheus: Prometheus = stack["prometheus"]
    tmp: Path = stack["tmp"]
    rows = batch()
    source = tmp / "batch.jsonl"
    source.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    out = tmp / "verdicts.jsonl"

    wait_for(lambda: prometheus.query('up{job="veredito-worker"} == 1'), "the worker to be scraped")
    assert veredito("produce", str(source), env=stack["env"]).returncode == 0
    results = veredito(
        "results",
        "--out",
        str(out),
        "--limit",
        str(len(rows)),
        "--idle-timeout",
        "60",
        env=stack["env"],
        timeout=120,
    )
    assert results.returncode == 0, results.stderr
    verdicts = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(verdicts) == len(rows)

    # 1. the worker's counters equal the verdicts, exactly
    with urllib.request.urlopen(
        f"http://127.0.0.1:{stack['worker_port']}/metrics", timeout=10
    ) as r:
        exposition = r.read().decode()
    samples: dict[str, Counter[tuple[tuple[str, str], ...]]] = {}
    for family in text_string_to_metric_families(exposition):
        for s in family.samples:
            samples.setdefault(s.name, Counter())[tuple(sorted(s.labels.items()))] += s.value

    def total(name: str, **labels: str) -> float:
        return sum(v for k, v in samples.get(name, {}).items() if set(labels.items()) <= set(k))

    for status in ("ok", "failed", "rejected"):
        assert total("veredito_evaluations_total", status=status) == sum(
            v["status"] == status for v in verdicts
        ), status
    assert total("veredito_hallucinated_answers_total") == sum(v["hallucinated"] for v in verdicts)
    # each verdict counted under its app's release (spec §18), unknown when it names none
    releases = Counter(str(v["metadata"].get("release", "unknown")) for v in verdicts)
    assert set(releases) == {"1.0", "2.0", "unknown"}
    for release, n in releases.items():
        assert total("veredito_evaluations_total", release=release) == n, release
    claims = Counter(
        (c["verdict"], "none" if c["verdict"] == "grounded" else c["category"])
        for v in verdicts
        if v["status"] == "ok"
        for c in v["claims"]
    )
    assert claims
    for (verdict, category), n in claims.items():
        assert total("veredito_claims_total", verdict=verdict, category=category) == n
    assert total("veredito_claims_total") == sum(claims.values())
    for category in {c for v in verdicts for c in v["categories"]}:
        assert total("veredito_answers_with_category_total", category=category) == sum(
            category in v["categories"] for v in verdicts
        )
    # split by the label confident (spec §17): at least VEREDITO_ALERT_CONFIDENCE, or no
    # confidence at all; per category, the highest confidence of its claims not grounded
    threshold = float(stack["env"].get("VEREDITO_ALERT_CONFIDENCE", 0.8))

    def sure(confidence: float | None) -> str:
        return "true" if confidence is None or confidence >= threshold else "false"

    def category_confidence(verdict: dict[str, Any], category: str) -> float | None:
        found = [
            c["confidence"]
            for c in verdict["claims"]
            if c["verdict"] != "grounded"
            and (c["category"] or "GENERICA") == category
            and c["confidence"] is not None
        ]
        return max(found) if found else None

    for confident in ("true", "false"):
        assert total("veredito_hallucinated_answers_total", confident=confident) == sum(
            v["hallucinated"] and sure(v["hallucination_confidence"]) == confident for v in verdicts
        ), confident
        for category in {c for v in verdicts for c in v["categories"]}:
            assert total(
                "veredito_answers_with_category_total", category=category, confident=confident
            ) == sum(
                category in v["categories"] and sure(category_confidence(v, category)) == confident
                for v in verdicts
            ), (category, confident)
    assert total("veredito_dead_letters_total") == sum(v["status"] == "failed" for v in verdicts)
    assert total("veredito_rule_disagreements_total", category="CNPJ_CPF_RG") == 1
    assert total("veredito_judge_output_repairs_total", kind="fence") >= 1
    assert total("veredito_judge_retries_total", reason="server_error") == 2  # both prompts

    # 2. promtool finds nothing to say about the exposition
    check = subprocess.run(
        [tool("promtool"), "check", "metrics"],
        input=exposition,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.returncode == 0 and not (check.stdout + check.stderr).strip(), (
        check.stdout + check.stderr
    )

    # 3. Prometheus has it all, and every recording rule and panel query returns data
    wait_for(
        lambda: prometheus.query(f"sum(veredito_evaluations_total) == {len(rows)}"),
        "Prometheus to scrape the whole batch",
    )
    for record in recording_rules():
        if from_serve(record):
            continue  # no serve here: test_review_rules_and_panels_against_serve_and_prometheus
        wait_for(lambda record=record: prometheus.query(record), f"recording rule {record}", 30)
    for title, expr in panel_queries():
        if from_serve(expr) or from_release_gauges(expr):
            continue  # no serve here: test_review_rules_and_panels_against_serve_and_prometheus
        concrete = (
            expr.replace("$app", ".*").replace("$judge", ".*").replace("$__rate_interval", "1m")
        )
        wait_for(lambda q=concrete: prometheus.query(q), f"panel {title!r}: {concrete}", 30)


# -------------------------------------------------------------------------- reviewers' labels


def test_review_rules_and_panels_against_serve_and_prometheus(tmp_path: Path) -> None:
    """A real `serve --store` on SQLite with reviewers' labels, scraped by a real Prometheus with
    the project's rules: every rule and panel query on serve's metrics returns data, the upper
    end of the precision's interval is the one GET /v1/agreement gives, and
    VereditoJudgePrecisionLow is pending for exactly the precisions whose whole interval lies
    below serve's floor on at least serve's minimum of labels."""
    from tests.test_labels import ANA, INGEST, READ, REVIEW, judged_store, post
    from tests.test_serve import call
    from tests.test_serve_security import server

    binary = tool("prometheus")
    store = f"sqlite:///{tmp_path / 'v.db'}"
    verdicts = judged_store(store, tmp_path)
    floor, least = 0.9, 3
    env = {"VEREDITO_INGEST_TOKENS": INGEST, "VEREDITO_READ_TOKENS": READ,
           "VEREDITO_REVIEW_TOKENS": REVIEW, "VEREDITO_REVIEW_SAMPLE": "1",
           "VEREDITO_REVIEW_REFRESH": "1", "VEREDITO_REVIEW_PRECISION_FLOOR": str(floor),
           "VEREDITO_REVIEW_MIN_LABELS": str(least),
           "VEREDITO_REVIEW_RATE": "0"}  # a script labels as fast as it sends  # fmt: skip
    apps = ("fisco-faq", "rh-bot")
    with server(tmp_path, "--store", store, **env) as s:
        # fisco-faq's reviewer contradicts every claim the judge flagged, rh-bot's confirms them
        for v in verdicts:
            app = v["metadata"].get("app")
            if not v["hallucinated"] or app not in apps:
                continue
            right = app == "rh-bot"
            claims = [
                {"claim_idx": i, "correct": True}
                if right
                else {"claim_idx": i, "correct": False, "verdict": "grounded"}
                for i, claim in enumerate(v["claims"])
                if claim["verdict"] != "grounded"
            ]
            status, answer = post(s, v, {"hallucinated": right, "claims": claims}, ANA)
            assert status == 201, answer
        uppers: dict[tuple[str, str, str], float] = {}
        alerting = set()
        for app in apps:
            for judge in ("llm", "rules"):
                status, body, _ = call(
                    s.base, "GET", f"/v1/agreement?app={app}&judge={judge}", token=READ
                )
                assert status == 200, body
                uniform = body["uniform"]
                figures = {"answer": uniform["answer_level"], **uniform["categories"]}
                for category, f in figures.items():
                    if not f["labelled"]:
                        continue
                    uppers[app, category, judge] = upper = f["precision_interval"][1]
                    if upper < floor and f["labelled"] >= least:
                        alerting.add((app, category, judge))
        assert alerting and set(uppers) - alerting  # some precisions alert, some do not

        prometheus = Prometheus(binary, tmp_path, 0, serve_port=s.port)
        try:
            wait_for(prometheus.ready, "Prometheus to be ready")
            for record in filter(from_serve, recording_rules()):
                wait_for(lambda record=record: prometheus.query(record), f"rule {record}", 30)
            served = [
                (title, expr)
                for title, expr in panel_queries()
                if from_serve(expr) and not from_release_gauges(expr)
            ]
            assert len(served) >= 6
            for title, expr in served:
                concrete = (
                    expr.replace("$app", ".*").replace("$judge", ".*")
                    .replace("$__rate_interval", "1m")
                )  # fmt: skip
                wait_for(lambda q=concrete: prometheus.query(q), f"panel {title!r}: {concrete}", 30)

            def found(expr: str) -> dict[tuple[str, str, str], float]:
                return {
                    (r["metric"]["app"], r["metric"]["category"], r["metric"]["judge"]): float(
                        r["value"][1]
                    )
                    for r in prometheus.query(expr)
                }

            # the upper end computed from the precision and its labels is the agreement's
            record = "app_category_judge:veredito_judge_precision:upper95"
            wait_for(lambda: set(found(record)) == set(uppers), "an upper end for each", 30)
            for key, value in found(record).items():
                assert abs(value - uppers[key]) < 1e-4, (key, value, uppers[key])
            # the alert waits out its `for:` on exactly the precisions below serve's floor
            alerts = 'ALERTS{alertname="VereditoJudgePrecisionLow",alertstate="pending"}'
            wait_for(
                lambda: set(found(alerts)) == alerting, f"pending alerts {sorted(alerting)}", 30
            )
        finally:
            prometheus.stop()
