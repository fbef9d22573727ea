"""Calibration that refits itself from reviewers' labels (issue 30): what ``serve --store`` runs
when enough labelled answers have come in since the last fit.

A candidate is fitted with ``calibrate --fit``'s code (:mod:`veredito.worker.fitting`) on the
labels chosen to teach plus three quarters of the uniform slice, and judged on the uniform
slice's remaining quarter (by a hash of the verdict id, fixed: every candidate is judged on the
same answers): the held-out claims' log loss and expected calibration error, the candidate's and
the current calibration's (the shipped one when the store has none). The candidate is adopted
only when its log loss is lower and its ECE not higher; every candidate is stored with its
figures, adopted or not. The uniform slice alone judges because it is the traffic as it comes;
the answers chosen to teach are what drew a reviewer's eye and would flatter a candidate fitted
on their like.

:func:`refit_at` is what serve's refresh hands to a process of its own (the fit is CPU work of
seconds to minutes that must not hold serve's interpreter lock); :func:`refit` is the same on an
open store, in-process.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from veredito.labels import labelled_record
from veredito.store import Filters, SQLStore
from veredito.worker.confidence import (
    Calibration,
    CalibrationError,
    default_calibration,
    parse_calibration,
)

__all__ = ["decide", "due", "refit", "refit_at"]

log = logging.getLogger(__name__)


def due(store: SQLStore, min_labels: int) -> tuple[bool, int]:
    """Whether a refit is due: at least ``min_labels`` answers labelled since the last fit
    (adopted or not: a rejected candidate is not fitted again on the same labels, and a
    rollback is not undone by a refit on labels older than it); and that count."""
    since = store.labelled_since(store.last_fit_labels())
    return since >= min_labels, since


def _current(store: SQLStore) -> tuple[int | None, Calibration]:
    stored = store.calibration()
    if stored is None:
        return None, default_calibration()
    try:
        return stored["version"], parse_calibration(stored["body"], f"version {stored['version']}")
    except CalibrationError as exc:
        log.warning("the current calibration cannot be read (%s); comparing with the shipped", exc)
        return None, default_calibration()


def _figures(pairs: list[tuple[float, bool]]) -> dict[str, float | None]:
    from veredito.worker.fitting import log_loss, reliability

    loss = log_loss(pairs)
    return {
        "log_loss": None if loss is None else round(loss, 6),
        "ece": reliability(pairs)["ece"] if pairs else None,
    }


def decide(candidate: dict[str, Any], current: dict[str, Any], claims: int) -> tuple[bool, str]:
    """Adopt the candidate only when its held-out log loss is lower and its ECE not higher."""
    if not claims or candidate["log_loss"] is None or current["log_loss"] is None:
        return False, "the uniform slice's held-out quarter has no claims to judge on"
    lower = candidate["log_loss"] < current["log_loss"]
    not_worse = candidate["ece"] <= current["ece"]
    said = (
        f"log loss {candidate['log_loss']:.4f} {'<' if lower else '>='} "
        f"{current['log_loss']:.4f}, ECE {candidate['ece']:.4f} "
        f"{'<=' if not_worse else '>'} {current['ece']:.4f}"
    )
    return lower and not_worse, said


def refit(
    store: SQLStore,
    *,
    min_labels: int = 1,
    tamper: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Fit, judge and store one candidate (when a refit is due): ``{"version", "adopted",
    "figures"}``, or ``{"skipped": reason}``. ``tamper`` changes the fitted body before it is
    judged (the tests' candidate made worse on purpose)."""
    from veredito.worker.fitting import (
        fit_calibration,
        held_out_pairs,
        in_held_out_quarter,
        llm_examples,
        rules_examples,
    )

    is_due, since = due(store, min_labels)
    if not is_due:
        return {"skipped": f"{since} answers labelled since the last fit (fewer than {min_labels})"}
    upto = store.newest_label_id()
    train: tuple[list[dict[str, Any]], list[dict[str, Any]]] = ([], [])
    test: tuple[list[dict[str, Any]], list[dict[str, Any]]] = ([], [])
    counted = {"uniform": 0, "chosen_to_teach": 0}
    for verdict, rows, uniform in store.labelled(Filters()):
        if any(int(r["id"]) > upto for r in rows):
            rows = [r for r in rows if int(r["id"]) <= upto]  # labels that came mid-read wait
            if not rows:
                continue
        counted["uniform" if uniform else "chosen_to_teach"] += 1
        into = test if uniform and in_held_out_quarter(str(verdict.get("id"))) else train
        into[0].append(labelled_record(verdict, rows))
        into[1].append(verdict)
    if not train[0]:
        return {"skipped": "no labelled answers to fit on outside the held-out quarter"}
    newest = store.calibrations(1)
    version = (newest[0]["version"] if newest else 0) + 1
    name = f"store-v{version}"
    body = fit_calibration(rules_examples(train[0]), llm_examples(*train) or None, name, ["store"])
    if tamper is not None:
        body = tamper(body)
    current_version, current = _current(store)
    held_rules, held_llm = rules_examples(test[0]), llm_examples(*test)
    try:
        candidate = parse_calibration(body, name)
    except CalibrationError as exc:  # a judge with no claims of one kind: nothing to adopt
        cand_figures: dict[str, float | None] = {"log_loss": None, "ece": None}
        adopted, reason = False, f"the fitted calibration is not usable: {exc}"
    else:
        pairs = held_out_pairs(candidate, held_rules, held_llm)
        cand_figures = _figures(pairs)
        adopted, reason = decide(
            cand_figures, _figures(held_out_pairs(current, held_rules, held_llm)), len(pairs)
        )
    figures = {
        "candidate": cand_figures,
        "compared_with": {
            "version": current_version,
            "name": current.name,
            **_figures(held_out_pairs(current, held_rules, held_llm)),
        },
        "held_out": {"answers": len(test[0]), "claims": len(held_rules) + len(held_llm)},
        "labels": {
            "answers": counted["uniform"] + counted["chosen_to_teach"],
            "uniform": counted["uniform"],
            "chosen_to_teach": counted["chosen_to_teach"],
            "trained_on": len(train[0]),
            "new": since,
        },
        "reason": reason,
    }
    stored = store.add_calibration(
        name, body, figures, adopted=adopted, labels_upto=upto, expect_version=version
    )
    if stored is None:
        return {"skipped": "another serve fitted these labels first"}
    return {"version": stored, "adopted": adopted, "figures": figures}


def refit_at(store_url: str, min_labels: int) -> dict[str, Any]:
    """:func:`refit` on the store at ``store_url`` (in a process of serve's refit pool)."""
    from veredito.store.sql import open_sql_store

    store = open_sql_store(store_url)
    try:
        return refit(store, min_labels=min_labels)
    finally:
        store.close()
