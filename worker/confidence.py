"""Calibrated confidence (spec §17): how sure a judge is of each claim's verdict.

For a non-grounded claim, ``confidence`` is the probability that it really is a hallucination;
for a grounded one, that it really is supported. The verdict's ``hallucination_confidence`` is the
highest confidence among its non-grounded claims.

A :class:`Calibration` holds two small models per judge, one for the claims the judge flags and
one for those it calls grounded, each over what the judge already knows of a claim
(:func:`rules_features`, :func:`llm_features`):

- ``logistic``: ``p = 1 / (1 + exp(-(intercept + Σ coef·feature)))`` — fitted by
  ``veredito calibrate --fit`` (scikit-learn, the ``[calibration]`` extra) on labelled answers;
  judging needs nothing but this module;
- ``table``: a probability per key — the LLM judge's shipped **prior**, since no real model can
  be measured here; a calibration fitted on a team's labels replaces it.

The default calibration ships in the package (``worker/rules/data/calibration.json``, rebuilt by
``make calibration`` from the project's labelled sets); ``VEREDITO_CALIBRATION=FILE`` points at
another. ``judge.calibration`` in each verdict names the one used (``default``, ``prior``, or the
file's name).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

from veredito.worker.verdict import CATEGORIES, Claim, RuleFinding

__all__ = [
    "CAPS",
    "FORMAT",
    "Calibration",
    "CalibrationError",
    "Model",
    "default_calibration",
    "hallucination_confidence",
    "llm_features",
    "load_calibration",
    "parse_calibration",
    "rules_feature_sets",
    "rules_features",
]

FORMAT = "veredito.calibration/1"
KINDS = ("money", "percent", "duration", "law", "article", "programme", "body", "number", "city",
         "state", "cpf", "cnpj", "rg", "date", "count")  # fmt: skip
# A grounded claim the rules judge had nothing to check in (no value, law, id, body, place…)
# says only that no objection was found: the labelled sets mark errors in checkable pieces, so a
# model fitted on them would call these safe. On real chatbot answers (BR-TaxQA-R, labelled
# blind, docs/rules.md) only 14 of 50 claims the judge called grounded were really supported,
# most of them claims with nothing checkable. These caps keep such claims below the alert line.
CAPS: tuple[tuple[str, float], ...] = (
    ("b:short", 0.5),
    ("b:advice", 0.5),
    ("b:meta", 0.5),
    ("b:lexical", 0.7),
)
FINDINGS = {
    "conflicts_with_context": "conflicts",
    "absent_from_context": "absent",
    "invalid_check_digit": "check_digit",
}


class CalibrationError(ValueError):
    """A calibration file that cannot be used; the message says why."""


@dataclass(frozen=True)
class Model:
    kind: str  # logistic | table
    features: tuple[str, ...] = ()
    coef: tuple[float, ...] = ()
    intercept: float = 0.0
    table: tuple[tuple[str, float], ...] = ()
    default: float = 0.5
    # (feature, highest probability): a prior the labelled sets cannot teach (see CAPS)
    caps: tuple[tuple[str, float], ...] = ()

    def predict(self, features: dict[str, float]) -> float:
        p = self._predict(features)
        for key, cap in self.caps:
            if features.get(key):
                p = min(p, cap)
        return p

    def _predict(self, features: dict[str, float]) -> float:
        if self.kind == "table":
            for key, p in self.table:
                if features.get(key):
                    return p
            return self.default
        z = self.intercept + sum(
            c * features.get(f, 0.0) for f, c in zip(self.features, self.coef, strict=True)
        )
        return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z))))

    @classmethod
    def parse(cls, data: Any, where: str) -> Model:
        if not isinstance(data, dict):
            raise CalibrationError(f"{where}: not an object")
        caps = data.get("caps", [])
        if not isinstance(caps, list) or not all(
            isinstance(row, list) and len(row) == 2 and isinstance(row[0], str)
            and isinstance(row[1], int | float) and 0 <= row[1] <= 1
            for row in caps
        ):  # fmt: skip
            raise CalibrationError(f"{where}: caps is a list of [feature, probability]")
        model = cls._parse(data, where)
        return replace(model, caps=tuple((k, float(p)) for k, p in caps))

    @classmethod
    def _parse(cls, data: dict[str, Any], where: str) -> Model:
        kind = data.get("kind")
        if kind == "logistic":
            features, coef = data.get("features"), data.get("coef")
            intercept = data.get("intercept")
            if (
                not isinstance(features, list)
                or not all(isinstance(f, str) for f in features)
                or not isinstance(coef, list)
                or len(coef) != len(features)
                or not all(isinstance(c, int | float) and math.isfinite(c) for c in coef)
                or not isinstance(intercept, int | float)
                or not math.isfinite(intercept)
            ):
                raise CalibrationError(f"{where}: a logistic model needs features, coef, intercept")
            return cls("logistic", tuple(features), tuple(float(c) for c in coef), float(intercept))
        if kind == "table":
            table, default = data.get("table"), data.get("default", 0.5)
            if not isinstance(table, list) or not all(
                isinstance(row, list) and len(row) == 2 and isinstance(row[0], str)
                and isinstance(row[1], int | float) and 0 <= row[1] <= 1
                for row in table
            ) or not isinstance(default, int | float):  # fmt: skip
                raise CalibrationError(f"{where}: a table is a list of [key, probability]")
            return cls(
                "table", table=tuple((k, float(p)) for k, p in table), default=float(default)
            )
        raise CalibrationError(f"{where}: kind must be logistic or table")

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any]
        if self.kind == "table":
            out = {"kind": "table", "table": [list(r) for r in self.table], "default": self.default}
        else:
            out = {"kind": "logistic", "features": list(self.features), "coef": list(self.coef),
                   "intercept": self.intercept}  # fmt: skip
        if self.caps:
            out["caps"] = [list(r) for r in self.caps]
        return out


@dataclass(frozen=True)
class Calibration:
    name: str
    models: dict[str, dict[str, Model]]  # judge -> flagged|grounded -> model
    labels: dict[str, str]  # judge -> what judge.calibration says ("default", "prior", name)
    body: dict[str, Any]

    def confidence(
        self, judge: str, flagged: bool, features: dict[str, float] | Sequence[dict[str, float]]
    ) -> float:
        """The confidence of a claim from its features; given several feature sets (one per
        part of a claim: :func:`rules_feature_sets`), the weakest part's."""
        model = self.models[judge]["flagged" if flagged else "grounded"]
        if isinstance(features, dict):
            return round(model.predict(features), 4)
        return round(min(model.predict(f) for f in features), 4)

    def label(self, judge: str) -> str:
        return self.labels[judge]


def _parse(body: Any, source: str) -> Calibration:
    if not isinstance(body, dict) or body.get("format") != FORMAT:
        raise CalibrationError(
            f"{source}: not a veredito calibration (format {FORMAT!r}); make one with "
            "`veredito calibrate --fit LABELLED.jsonl --out FILE`"
        )
    judges = body.get("judges")
    if not isinstance(judges, dict) or set(judges) != {"rules", "llm"}:
        raise CalibrationError(f"{source}: judges must hold rules and llm")
    models: dict[str, dict[str, Model]] = {}
    labels: dict[str, str] = {}
    for judge, parts in judges.items():
        if not isinstance(parts, dict):
            raise CalibrationError(f"{source}: judges.{judge} is not an object")
        models[judge] = {
            part: Model.parse(parts.get(part), f"{source}: judges.{judge}.{part}")
            for part in ("flagged", "grounded")
        }
        label = parts.get("calibration")
        labels[judge] = label if isinstance(label, str) and label else str(body.get("name", source))
    version = body.get("version")
    if version is not None and (
        not isinstance(version, int) or isinstance(version, bool) or version < 1
    ):
        raise CalibrationError(f"{source}: version must be a whole number from 1")
    return Calibration(str(body.get("name") or source), models, labels, body)


def parse_calibration(body: Any, source: str) -> Calibration:
    """A calibration from its JSON value (a file's, or ``GET /v1/calibration``'s answer);
    :class:`CalibrationError` naming ``source`` and what is wrong."""
    return _parse(body, source)


def calibration_version(calibration: Calibration) -> int | None:
    """The store's version of a calibration ``serve --store`` fitted (``version`` in its
    body, as ``GET /v1/calibration`` gives it); None for the shipped one or a file of one's own."""
    version = calibration.body.get("version")
    return version if isinstance(version, int) and not isinstance(version, bool) else None


def is_calibration_url(setting: str | None) -> bool:
    """``VEREDITO_CALIBRATION`` names ``serve``'s calibration route rather than a file."""
    return bool(setting) and str(setting).lower().startswith(("http://", "https://"))


class CalibrationUnavailable(Exception):
    """``GET /v1/calibration`` gave no calibration: ``status`` is the HTTP status (404: the
    store has none yet), 0 when the server could not be reached."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def fetch_calibration(
    url: str, token: str | None = None, etag: str | None = None, timeout: float = 10.0
) -> tuple[Calibration | None, str | None]:
    """``serve``'s calibration route (``VEREDITO_CALIBRATION=https://…/v1/calibration``): the
    calibration and its ETag, or ``(None, etag)`` when it has not changed since ``etag``
    (``304``). :class:`CalibrationUnavailable` when there is none (``404``) or the server cannot
    be reached or refuses; :class:`CalibrationError` naming what is wrong with a bad body."""
    import urllib.error
    import urllib.parse
    import urllib.request

    parts = urllib.parse.urlsplit(url)  # what messages show: never a password in the URL
    netloc = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
    shown = parts._replace(netloc=netloc, query="").geturl()
    headers = {"Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if etag:
        headers["If-None-Match"] = etag
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw = response.read(16 * 1024 * 1024 + 1)
            tag = response.headers.get("ETag")
    except urllib.error.HTTPError as exc:
        if exc.code == 304:
            return None, etag
        raise CalibrationUnavailable(exc.code, f"{shown}: HTTP {exc.code}") from None
    except (OSError, ValueError) as exc:  # refused, timed out, DNS, a URL urllib cannot use
        raise CalibrationUnavailable(
            0, f"{shown}: cannot be reached ({type(exc).__name__})"
        ) from None
    if len(raw) > 16 * 1024 * 1024:
        raise CalibrationError(f"{shown}: the body is over 16 MiB")
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise CalibrationError(f"{shown}: not JSON ({exc})") from None
    calibration = _parse(body, shown)
    if calibration_version(calibration) is None:
        raise CalibrationError(f"{shown}: the body has no version (not serve's calibration route)")
    return calibration, tag


def load_calibration(path: str | Path) -> Calibration:
    """A calibration file; :class:`CalibrationError` naming what is wrong."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CalibrationError(f"{path}: cannot be read ({exc.strerror})") from None
    try:
        body = json.loads(text)
    except ValueError as exc:
        raise CalibrationError(f"{path}: not JSON ({exc})") from None
    return _parse(body, str(path))


_DEFAULT: Calibration | None = None


def default_calibration() -> Calibration:
    """The calibration shipped in the package."""
    global _DEFAULT
    if _DEFAULT is None:
        text = (
            resources.files("veredito.worker.rules")
            .joinpath("data/calibration.json")
            .read_text("utf-8")
        )
        _DEFAULT = _parse(json.loads(text), "the shipped calibration")
    return _DEFAULT


# -- features -----------------------------------------------------------------------------------
def _kind(kinds: Iterable[str]) -> str | None:
    for kind in sorted(kinds):  # a frozenset: its order follows the hash seed
        base = kind.partition(":")[0]
        if base in KINDS:
            return base
    return None


def rules_feature_sets(judged: Any) -> list[dict[str, float]]:
    """The features of each part of a claim: a flagged claim with several failed mentions (a
    right law next to a wrong decree and a wrong date) is as sure as its weakest part, so it
    gets one feature set per failed mention (:meth:`Calibration.confidence` takes the lowest);
    any other claim one set (:func:`rules_features`)."""
    bad = [c for c in judged.checks if c.status != "grounded"]
    if judged.verdict == "grounded" or len(bad) < 2:
        return [rules_features(judged)]
    return [rules_features(judged, part) for part in bad]


def rules_features(judged: Any, part: Any = None) -> dict[str, float]:
    """What the rules judge knows of one claim (a ``ClaimJudgement``), as model features; for a
    flagged claim, of its failed mention ``part`` (its first by default)."""
    features: dict[str, float] = {}
    flagged = judged.verdict != "grounded"
    bad = [c for c in judged.checks if c.status != "grounded"]
    good = [c for c in judged.checks if c.status == "grounded"]
    features["good_checks"] = min(len(good), 3) / 3
    features["derived"] = float(any(c.derivation is not None for c in judged.checks))
    features["words"] = min(judged.words, 40) / 40
    if judged.support is not None:
        features["support"] = judged.support
    if flagged:
        features[f"v:{judged.verdict}"] = 1.0
        features[f"c:{judged.category or 'GENERICA'}"] = 1.0
        features["bad_checks"] = min(len(bad), 3) / 3
        if bad:
            first = bad[0] if part is None else part
            features[f"f:{FINDINGS.get(first.finding or '', 'absent')}"] = 1.0
            kind = _kind(first.mention.kinds)
            if kind:
                features[f"k:{kind}"] = 1.0
            if first.why:
                features[f"why:{first.why}"] = 1.0
            if first.nearest is not None:
                # a value near a context one is a slip; one far from all is often computed
                features["near"] = first.nearest
                features["near:close"] = float(first.nearest >= 0.8)
                features["near:far"] = float(first.nearest < 0.3)
            elif kind in ("money", "percent", "duration", "count", "number", "date"):
                features["near:none"] = 1.0
        else:
            features["f:lexical"] = 1.0
    else:
        features[f"b:{judged.basis}"] = 1.0
        for check in good:
            features[f"gc:{check.mention.category}"] = 1.0
            kind = _kind(check.mention.kinds)
            if kind:
                features[f"k:{kind}"] = 1.0
    return features


def llm_features(claim: Claim, rules: str) -> dict[str, float]:
    """What is known of an LLM judge's claim: its verdict and category and what the rules said
    of it — ``flag`` (a mention absent, conflicting or with wrong check digits), ``grounded``
    (its mentions all found), ``silent`` (nothing checkable), ``unknown`` (no cross-check)."""
    flagged = claim.verdict != "grounded"
    side = "llm:flag" if flagged else "llm:grounded"
    features = {f"{side}&rules:{rules}": 1.0, f"rules:{rules}": 1.0}
    if claim.kind == "advice":
        features["kind:advice"] = 1.0
    if flagged:
        features[f"v:{claim.verdict}"] = 1.0
        features[f"c:{claim.category or 'GENERICA'}"] = 1.0
    return features


def rules_verdict_on(checks: Sequence[Any]) -> str:
    if any(c.status != "grounded" for c in checks):
        return "flag"
    return "grounded" if checks else "silent"


def hallucination_confidence(claims: Sequence[Claim]) -> float | None:
    """The highest confidence among the non-grounded claims (None when there are none, or when
    none has a confidence)."""
    values = [c.confidence for c in claims if c.verdict != "grounded" and c.confidence is not None]
    return max(values) if values else None


def findings_by_claim(findings: Sequence[RuleFinding]) -> dict[int, list[RuleFinding]]:
    out: dict[int, list[RuleFinding]] = {}
    for finding in findings:
        if finding.claim_idx is not None and finding.problem:
            out.setdefault(finding.claim_idx, []).append(finding)
    return out


CATEGORY_FEATURES = tuple(f"c:{c}" for c in CATEGORIES)
