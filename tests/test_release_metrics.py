"""Releases in the metrics (spec §18): the worker's counters carry ``release``, bounded per app to
the ``VEREDITO_RELEASES_KEPT`` most recently first-seen; serve's release gauges publish and prune;
and the dashboard's release row and ``VereditoReleaseRegressed`` run on a real Prometheus that
scrapes them (no broker, no store: the gauges are published here as serve would)."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest, start_http_server
from prometheus_client.parser import text_string_to_metric_families
from pydantic import ValidationError

from tests.test_monitoring import Prometheus, free_port, panel_queries, tool, wait_for
from veredito.cli import main
from veredito.serving.release_gauges import ReleaseGauges
from veredito.worker.metrics import DEMOTED_REMEMBERED, Metrics
from veredito.worker.settings import Settings
from veredito.worker.verdict import Claim, JudgeInfo, Verdict

COUNTERS = (
    "veredito_evaluations_total",
    "veredito_claims_total",
    "veredito_hallucinated_answers_total",
    "veredito_answers_with_category_total",
)
LABELS = {
    "veredito_evaluations_total": ["app", "release", "judge", "status"],
    "veredito_claims_total": ["app", "release", "judge", "verdict", "category"],
    "veredito_hallucinated_answers_total": ["app", "release", "judge", "confident"],
    "veredito_answers_with_category_total": ["app", "release", "judge", "category", "confident"],
}


def verdict(app: str | None, release: object = None, n: int = 0) -> Verdict:
    """An ok verdict that touches every counter carrying release: a grounded claim and an
    invented LEI one, so hallucinated and with a category."""
    metadata: dict[str, Any] = {} if app is None else {"app": app}
    if release is not None:
        metadata["release"] = release
    return Verdict(
        id=f"v{n}",
        status="ok",
        judge=JudgeInfo(kind="rules"),
        claims=[
            Claim(text="a", verdict="grounded", confidence=0.9),
            Claim(text="b", verdict="invented", category="LEI", confidence=0.95),
        ],
        score=0.5,
        hallucinated=True,
        hallucination_confidence=0.95,
        categories={"LEI": 1},
        metadata=metadata,
    )


def samples(registry: CollectorRegistry) -> dict[str, list[tuple[dict[str, str], float]]]:
    """The exposition as Prometheus would read it: per sample name, its labels and value."""
    found: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in family.samples:
            found[s.name].append((s.labels, s.value))
    return found


def releases_of(registry: CollectorRegistry, app: str) -> dict[str, set[str]]:
    """Per counter, the release label values of ``app``'s series."""
    scraped = samples(registry)
    return {
        name: {labels["release"] for labels, _ in scraped[name] if labels["app"] == app}
        for name in COUNTERS
    }


def evaluations(registry: CollectorRegistry, app: str, release: str) -> float | None:
    return registry.get_sample_value(
        "veredito_evaluations_total",
        {"app": app, "release": release, "judge": "rules", "status": "ok"},
    )


# -------------------------------------------------------------------------- the counters


def test_the_counters_carry_release_after_app() -> None:
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    metrics.record_verdict(verdict("sac", "1.0"))
    counters = (metrics.evaluations, metrics.claims, metrics.hallucinated,
                metrics.answers_by_category)  # fmt: skip
    assert {c._name + "_total": list(c._labelnames) for c in counters} == LABELS
    scraped = samples(registry)
    for name in COUNTERS:
        assert scraped[name], name
        assert all(labels["release"] == "1.0" for labels, _ in scraped[name]), name


def test_an_app_with_five_releases_keeps_the_three_newest_first_seen() -> None:
    registry = CollectorRegistry()
    metrics = Metrics(registry, releases_kept=3)
    for n, release in enumerate(("r1", "r2", "r3", "r4", "r5")):
        for _ in range(2):
            metrics.record_verdict(verdict("sac", release, n))
        metrics.record_verdict(verdict("rh", "only", n))  # another app: its own releases
    assert releases_of(registry, "sac") == {name: {"r3", "r4", "r5"} for name in COUNTERS}
    assert evaluations(registry, "sac", "r1") is None  # the oldest's series are gone
    assert evaluations(registry, "sac", "r2") is None
    assert evaluations(registry, "sac", "r5") == 2

    # a verdict of a demoted release counts as other; its old counts are not brought back
    metrics.record_verdict(verdict("sac", "r1"))
    assert releases_of(registry, "sac") == {name: {"r3", "r4", "r5", "other"} for name in COUNTERS}
    assert evaluations(registry, "sac", "other") == 1
    assert evaluations(registry, "sac", "r1") is None
    assert releases_of(registry, "rh") == {name: {"only"} for name in COUNTERS}
    assert evaluations(registry, "rh", "only") == 5

    # seen again, a kept release stays itself and demotes nothing
    metrics.record_verdict(verdict("sac", "r3"))
    assert evaluations(registry, "sac", "r3") == 3
    assert metrics.release_label("sac", "r2") == "other"
    assert metrics.release_label("sac", "r4") == "r4"


@pytest.mark.parametrize("release", [None, "", 7, ["1.0"]])
def test_a_verdict_without_a_release_is_unknown(release: object) -> None:
    registry = CollectorRegistry()
    assert verdict("sac", release).release == "unknown"
    Metrics(registry).record_verdict(verdict("sac", release))
    assert releases_of(registry, "sac") == {name: {"unknown"} for name in COUNTERS}


def test_unknown_is_a_release_like_any_other() -> None:
    registry = CollectorRegistry()
    metrics = Metrics(registry, releases_kept=2)
    for release in (None, "2.0", "3.0"):
        metrics.record_verdict(verdict(None, release))  # no app: default
    assert releases_of(registry, "default") == {name: {"2.0", "3.0"} for name in COUNTERS}
    metrics.record_verdict(verdict(None))
    assert evaluations(registry, "default", "other") == 1


def test_a_release_named_other_is_the_bucket() -> None:
    registry = CollectorRegistry()
    metrics = Metrics(registry, releases_kept=1)
    metrics.record_verdict(verdict("sac", "other"))
    metrics.record_verdict(verdict("sac", "1.0"))  # not a second release: nothing demoted
    assert evaluations(registry, "sac", "other") == 1
    assert evaluations(registry, "sac", "1.0") == 1


def test_releases_of_apps_past_the_app_limit_are_bounded_too() -> None:
    registry = CollectorRegistry()
    metrics = Metrics(registry, app_label_limit=1, releases_kept=2)
    metrics.record_verdict(verdict("first", "1"))
    for n in range(10):
        metrics.record_verdict(verdict(f"app{n}", f"release{n}"))
    assert releases_of(registry, "other") == {name: {"release8", "release9"} for name in COUNTERS}


def test_the_bookkeeping_is_bounded() -> None:
    """However many releases an app goes through, it exports its kept ones and other, and
    remembers a bounded number of demoted ones."""
    registry = CollectorRegistry()
    metrics = Metrics(registry, releases_kept=3)
    many = DEMOTED_REMEMBERED + 100
    for n in range(many):
        metrics.record_verdict(verdict("sac", f"r{n}", n))
    metrics.record_verdict(verdict("sac", f"r{many - 10}"))  # demoted a while ago: other
    expected = {f"r{many - 3}", f"r{many - 2}", f"r{many - 1}", "other"}
    assert releases_of(registry, "sac") == {name: expected for name in COUNTERS}
    assert len(metrics._releases["sac"].demoted) == DEMOTED_REMEMBERED
    assert len(metrics._children) < 30  # the demoted releases' cached children are gone too


def test_concurrent_verdicts_never_bring_a_demoted_release_back() -> None:
    """Threads recording verdicts of ever newer releases while others record older ones: no
    series of a demoted release survives (none lands on a series being removed), and every
    verdict of a release still kept is counted."""
    registry = CollectorRegistry()
    metrics = Metrics(registry, releases_kept=3)
    rounds = 200

    def record(offset: int) -> None:
        for n in range(rounds):
            metrics.record_verdict(verdict("sac", f"r{n + offset}", n))

    threads = [threading.Thread(target=record, args=(offset,)) for offset in (0, 1, 2, 3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    kept = {name: releases_of(registry, "sac")[name] - {"other"} for name in COUNTERS}
    assert all(len(values) <= 3 for values in kept.values()), kept
    assert len({frozenset(values) for values in kept.values()}) == 1  # the same in every counter
    for release in kept["veredito_evaluations_total"]:
        assert metrics.release_label("sac", release) == release
    # what the series hold: verdicts of the kept releases and of other (the demoted ones' left)
    total = sum(v for _, v in samples(registry)["veredito_evaluations_total"])
    assert 0 < total <= 4 * rounds


# -------------------------------------------------------------------------- the setting


def test_releases_kept_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().releases_kept == 3
    monkeypatch.setenv("VEREDITO_RELEASES_KEPT", "5")
    assert Settings().releases_kept == 5


@pytest.mark.parametrize("value", ["0", "-1", "x", "2.5"])
def test_a_bad_releases_kept_is_refused_naming_it(
    value: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setenv("VEREDITO_RELEASES_KEPT", value)
    with pytest.raises(ValidationError) as caught:
        Settings()
    assert [e["loc"] for e in caught.value.errors()] == [("releases_kept",)]
    assert main(["run", str(tmp_path / "none.jsonl"), "--judge", "rules"]) == 2
    assert "invalid setting releases_kept" in capsys.readouterr().err


def test_metrics_refuse_fewer_than_one_release() -> None:
    with pytest.raises(ValueError, match="releases_kept"):
        Metrics(CollectorRegistry(), releases_kept=0)


# -------------------------------------------------------------------------- serve's gauges


GAUGE_LABELS = {
    "veredito_release_hallucination_rate": ("app", "release", "confident"),
    "veredito_release_answers": ("app", "release"),
    "veredito_release_regressed": ("app", "base", "head", "category"),
    "veredito_release_min_answers": (),
}


def gauges_of(registry: CollectorRegistry) -> dict[str, dict[tuple[str, ...], float]]:
    """Per release gauge, its series: label values in the gauge's order, and value."""
    found: dict[str, dict[tuple[str, ...], float]] = defaultdict(dict)
    for name, rows in samples(registry).items():
        if name.startswith("veredito_release_"):
            for labels, value in rows:
                assert set(labels) == set(GAUGE_LABELS[name]), name
                found[name][tuple(labels[k] for k in GAUGE_LABELS[name])] = value
    return found


def test_release_gauges_publish_and_remove_what_is_no_longer_published() -> None:
    registry = CollectorRegistry()
    gauges = ReleaseGauges(registry, min_answers=150)
    gauges.publish(
        "sac",
        rates={"1.0": {"all": 0.1, "confident": 0.05}, "2.0": {"all": 0.3, "confident": 0.2}},
        answers={"1.0": 400, "2.0": 250},
        regressed={("1.0", "2.0", "answer"): True, ("1.0", "2.0", "LEI"): False},
    )
    gauges.publish("rh", rates={"a": {"all": 0.2}}, answers={"a": 90}, regressed=None)
    found = gauges_of(registry)
    assert found["veredito_release_hallucination_rate"] == {
        ("sac", "1.0", "false"): 0.1, ("sac", "1.0", "true"): 0.05,
        ("sac", "2.0", "false"): 0.3, ("sac", "2.0", "true"): 0.2,
        ("rh", "a", "false"): 0.2,
    }  # fmt: skip
    assert found["veredito_release_answers"] == {
        ("sac", "1.0"): 400, ("sac", "2.0"): 250, ("rh", "a"): 90
    }  # fmt: skip
    assert found["veredito_release_regressed"] == {
        ("sac", "1.0", "2.0", "answer"): 1, ("sac", "1.0", "2.0", "LEI"): 0
    }  # fmt: skip
    assert found["veredito_release_min_answers"] == {(): 150}
    assert gauges.apps == {"sac", "rh"}

    # 3.0 came: 1.0 is no longer published, and the pair compared is 2.0 against 3.0
    gauges.publish(
        "sac",
        rates={"2.0": {"all": 0.3, "confident": 0.2}, "3.0": {"all": 0.1, "confident": 0.1}},
        answers={"2.0": 600, "3.0": 20},
        regressed={("2.0", "3.0", "answer"): False},
    )
    found = gauges_of(registry)
    assert {k[1] for k in found["veredito_release_hallucination_rate"] if k[0] == "sac"} == {
        "2.0", "3.0"
    }  # fmt: skip
    assert found["veredito_release_answers"][("sac", "2.0")] == 600
    assert ("sac", "1.0") not in found["veredito_release_answers"]
    assert found["veredito_release_regressed"] == {("sac", "2.0", "3.0", "answer"): 0}
    assert ("rh", "a") in found["veredito_release_answers"]  # the other app untouched

    # no comparison (None) removes the app's regressed series; forget removes the rest
    gauges.publish("sac", rates={"3.0": {"all": 0.1}}, answers={"3.0": 20}, regressed=None)
    assert "veredito_release_regressed" not in gauges_of(registry)
    gauges.forget("sac")
    found = gauges_of(registry)
    assert all(k[0] != "sac" for name in found for k in found[name] if k)
    assert gauges.apps == {"rh"}
    gauges.publish("rh", rates={}, answers={})  # nothing left to publish: as forget
    assert gauges.apps == frozenset()
    assert set(gauges_of(registry)) == {"veredito_release_min_answers"}


@pytest.mark.parametrize(
    ("rates", "regressed", "message"),
    [
        ({"1.0": {"sure": 0.1}}, None, "neither 'all' nor 'confident'"),
        ({}, {("1.0", "2.0", "RECEITA"): True}, "unknown category"),
    ],
)
def test_release_gauges_refuse_unknown_keys_before_changing_anything(
    rates: dict[str, dict[str, float]],
    regressed: dict[tuple[str, str, str], bool] | None,
    message: str,
) -> None:
    registry = CollectorRegistry()
    gauges = ReleaseGauges(registry)
    gauges.publish("sac", rates={"1.0": {"all": 0.1}}, answers={"1.0": 10})
    before = gauges_of(registry)
    with pytest.raises(ValueError, match=message):
        gauges.publish("sac", rates=rates, answers={}, regressed=regressed)
    assert gauges_of(registry) == before


# -------------------------------------------------------------------------- a real Prometheus


@pytest.fixture
def scraped(tmp_path: Path) -> Iterator[tuple[Prometheus, Metrics, ReleaseGauges]]:
    """A worker's counters and serve's release gauges on one registry, served over HTTP and
    scraped every second by a real Prometheus with the project's rules (job veredito-serve)."""
    binary = tool("prometheus")
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    gauges = ReleaseGauges(registry, min_answers=100)
    port = free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    prometheus = Prometheus(binary, tmp_path, 0, serve_port=port)
    try:
        wait_for(prometheus.ready, "Prometheus to be ready")
        yield prometheus, metrics, gauges
    finally:
        prometheus.stop()
        server.shutdown()
        thread.join(timeout=10)


def test_release_row_and_alert_against_a_real_prometheus(
    scraped: tuple[Prometheus, Metrics, ReleaseGauges],
) -> None:
    """Every query of the dashboard's release row returns data; VereditoReleaseRegressed is
    pending for the pair that regressed on enough answers only, and leaves when serve stops
    publishing the pair."""
    prometheus, metrics, gauges = scraped
    for n in range(20):
        metrics.record_verdict(verdict("sac", ["1.0", "2.0"][n % 2], n))
    gauges.publish(
        "sac",
        rates={"1.0": {"all": 0.1, "confident": 0.05}, "2.0": {"all": 0.3, "confident": 0.2}},
        answers={"1.0": 400, "2.0": 300},
        regressed={("1.0", "2.0", "answer"): True, ("1.0", "2.0", "LEI"): True},
    )
    gauges.publish(  # regressed, but 2.0 has too few answers
        "rh",
        rates={"1.0": {"all": 0.1}, "2.0": {"all": 0.4}},
        answers={"1.0": 400, "2.0": 50},
        regressed={("1.0", "2.0", "answer"): True},
    )
    wait_for(lambda: prometheus.query('up{job="veredito-serve"} == 1'), "the first scrape")
    for n in range(20):  # the counters grow between two scrapes: rates to see
        metrics.record_verdict(verdict("sac", ["1.0", "2.0"][n % 2], n))

    row = [(t, e) for t, e in panel_queries() if "release" in e]
    assert len(row) == 9  # the row's seven panels: two with two queries
    for title, expr in row:
        concrete = expr.replace("$app", ".*").replace("$__rate_interval", "1m")
        wait_for(lambda q=concrete: prometheus.query(q), f"panel {title!r}: {concrete}", 30)

    def pending() -> set[tuple[str, str, str, str]]:
        alerts = 'ALERTS{alertname="VereditoReleaseRegressed",alertstate="pending"}'
        return {
            (r["metric"]["app"], r["metric"]["base"], r["metric"]["head"], r["metric"]["category"])
            for r in prometheus.query(alerts)
        }

    expected = {("sac", "1.0", "2.0", "answer"), ("sac", "1.0", "2.0", "LEI")}
    wait_for(lambda: pending() == expected, f"pending alerts {sorted(expected)}", 30)

    # 3.0 came: serve compares 2.0 with 3.0 (too young to tell), the old pair's alert goes
    gauges.publish(
        "sac",
        rates={"2.0": {"all": 0.3}, "3.0": {"all": 0.1}},
        answers={"2.0": 300, "3.0": 10},
        regressed={("2.0", "3.0", "answer"): False},
    )
    wait_for(lambda: not pending(), "the alert to leave with its series", 30)
