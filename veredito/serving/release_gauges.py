"""The release gauges of ``veredito serve --store`` (spec §18): how each kept release of an app
hallucinates, on how many answers, and whether the newest regressed against the one before.

Serve's refresh loop computes the figures from the store and :mod:`veredito.comparison` and hands
them to :meth:`ReleaseGauges.publish`, one app at a time; the gauges only hold them for
Prometheus. What an app no longer publishes (a release that aged out or was demoted, a pair of
releases no longer the newest two) is removed at once, so that a stale figure never keeps
``VereditoReleaseRegressed`` firing.

=================================================  =============================================
``veredito_release_hallucination_rate``            share of the release's judged answers that
``{app,release,confident}``                        hallucinate: ``confident="false"`` counts
                                                   every suspicion, confident or not;
                                                   ``confident="true"`` only those at or above
                                                   ``VEREDITO_ALERT_CONFIDENCE`` (spec §17)
``veredito_release_answers{app,release}``          the release's judged answers the rates rest on
``veredito_release_regressed``                     1 when ``head`` regressed against ``base`` on
``{app,base,head,category}``                       the category (``answer``: the answer level),
                                                   else 0
``veredito_release_min_answers``                   ``VEREDITO_RELEASE_MIN_ANSWERS``: the answers
                                                   each side needs before the alert fires
=================================================  =============================================
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Gauge

from veredito.worker.verdict import CATEGORIES

__all__ = ["ALL", "CONFIDENT", "ROWS", "ReleaseGauges"]

ALL = "all"  # every suspicion, confident or not: the series confident="false"
CONFIDENT = "confident"  # confident hallucinations only: the series confident="true"
_CONFIDENT_LABEL = {ALL: "false", CONFIDENT: "true"}
ROWS = ("answer", *CATEGORIES)  # the rows of a comparison: the answer level, then each category


@dataclass
class _Series:
    """One app's series now exported, gauge by gauge: label values to value."""

    rates: dict[tuple[str, ...], float] = field(default_factory=dict)  # app, release, confident
    answers: dict[tuple[str, ...], float] = field(default_factory=dict)  # app, release
    regressed: dict[tuple[str, ...], float] = field(default_factory=dict)  # app, base, head, row

    def __bool__(self) -> bool:
        return bool(self.rates or self.answers or self.regressed)


class ReleaseGauges:
    """The release gauges on ``registry`` (serve's, so that one ``/metrics`` carries them), and
    the series each app exports now. Thread-safe: serve publishes from a worker thread while
    Prometheus scrapes."""

    def __init__(self, registry: CollectorRegistry, min_answers: int = 200) -> None:
        self._lock = threading.Lock()
        self._apps: dict[str, _Series] = {}
        self.rate = Gauge(
            "veredito_release_hallucination_rate",
            "Share of a release's judged answers that hallucinate, from the verdict store; "
            'confident="false": every suspicion, confident="true": only those at or above '
            "VEREDITO_ALERT_CONFIDENCE",
            ["app", "release", "confident"],
            registry=registry,
        )
        self.answers = Gauge(
            "veredito_release_answers",
            "Judged answers of a release, which its hallucination rates rest on",
            ["app", "release"],
            registry=registry,
        )
        self.regressed = Gauge(
            "veredito_release_regressed",
            "1 when the head release hallucinates more than the base release before it (the "
            "interval of the difference wholly above 0: 95 %, Bonferroni-adjusted for a "
            "category), else 0; category answer is the answer level",
            ["app", "base", "head", "category"],
            registry=registry,
        )
        self.min_answers = Gauge(
            "veredito_release_min_answers",
            "VEREDITO_RELEASE_MIN_ANSWERS: the judged answers each release needs before "
            "VereditoReleaseRegressed fires",
            registry=registry,
        )
        self.min_answers.set(min_answers)

    @property
    def apps(self) -> frozenset[str]:
        """The apps that export series now (to :meth:`forget` those the store no longer has)."""
        with self._lock:
            return frozenset(self._apps)

    def publish(
        self,
        app: str,
        rates: Mapping[str, Mapping[str, float]],
        answers: Mapping[str, int],
        regressed: Mapping[tuple[str, str, str], bool] | None = None,
    ) -> None:
        """Set ``app``'s gauges to these figures and remove the app's series not among them.

        - ``rates``: per release, ``{"all": rate, "confident": rate}`` (either may be left out):
          ``all`` is exported as ``confident="false"``, ``confident`` as ``confident="true"``;
        - ``answers``: per release, its judged answers;
        - ``regressed``: per ``(base, head, category)``, whether head regressed against base;
          category is ``answer`` or one of the seven categories. ``None`` (no comparison made,
          such as an app with one release) removes every regressed series of the app.

        A key other than ``all``/``confident`` or an unknown category raises ``ValueError``
        before any gauge changes."""
        fresh = _Series()
        for release, by_kind in rates.items():
            for kind, rate in by_kind.items():
                if kind not in _CONFIDENT_LABEL:
                    raise ValueError(f"rates of {release!r}: {kind!r} is neither 'all' nor "
                                     "'confident'")  # fmt: skip
                fresh.rates[(app, release, _CONFIDENT_LABEL[kind])] = rate
        for release, n in answers.items():
            fresh.answers[(app, release)] = n
        for (base, head, category), worse in (regressed or {}).items():
            if category not in ROWS:
                raise ValueError(f"regressed: unknown category {category!r}")
            fresh.regressed[(app, base, head, category)] = 1.0 if worse else 0.0
        with self._lock:
            self._remove(self._apps.get(app, _Series()), fresh)
            for gauge, figures in self._pairs(fresh):
                for key, value in figures.items():
                    gauge.labels(*key).set(value)
            if fresh:
                self._apps[app] = fresh
            else:
                self._apps.pop(app, None)

    def forget(self, app: str) -> None:
        """Remove every series of ``app`` (an app gone from the store, or no longer served)."""
        with self._lock:
            self._remove(self._apps.pop(app, _Series()), _Series())

    def _pairs(self, series: _Series) -> tuple[tuple[Gauge, dict[tuple[str, ...], float]], ...]:
        return ((self.rate, series.rates), (self.answers, series.answers),
                (self.regressed, series.regressed))  # fmt: skip

    def _remove(self, old: _Series, new: _Series) -> None:
        """Remove the series in ``old`` and not in ``new`` (the lock held)."""
        for (gauge, before), (_, now) in zip(self._pairs(old), self._pairs(new), strict=True):
            for key in before.keys() - now.keys():
                gauge.remove(*key)
