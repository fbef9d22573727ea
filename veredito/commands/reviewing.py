"""The commands over reviewers' labels and the judge's confidence: ``calibrate`` (the agreement,
``--from-store``, ``--fit``) and ``labels export``."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any

from veredito.commands.common import verdict_store
from veredito.worker.settings import Settings

log = logging.getLogger("veredito")


def calibrate(args: argparse.Namespace, settings: Settings) -> int:
    import json

    from veredito.worker.calibrate import LabelledSetError, calibrate
    from veredito.worker.judges import JudgeNotConfigured

    if args.rollback is not None or args.list:
        return _stored_calibrations(args)
    if args.fit:
        return _fit(args, settings)
    if args.from_store:
        return _calibrate_from_store(args, settings)
    if len(args.labelled) != 1:
        print("veredito: calibrate needs one labelled file or --from-store URL", file=sys.stderr)
        return 2
    try:
        report = calibrate(args.labelled[0], settings)
    except OSError as exc:
        print(f"veredito: cannot read {args.labelled[0]}: {exc.strerror}", file=sys.stderr)
        return 3
    except (LabelledSetError, JudgeNotConfigured) as exc:
        print(f"veredito: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.as_dict(), ensure_ascii=False, indent=2))
    elif args.by_verdict:
        print(report.by_verdict(), end="")
    else:
        print(report.table(), end="")
    return 0


def _review_filters(args: argparse.Namespace) -> Any:
    from veredito.store import Filters, parse_when

    times = {}
    for name in ("since", "until"):
        value = getattr(args, name, None)
        try:
            times[name] = parse_when(value) if value else None
        except (ValueError, OverflowError) as exc:
            raise ValueError(f"--{name}: {exc}") from None
    return Filters(app=args.app, since=times["since"], until=times["until"])


def _open_sql(url: str) -> Any:
    from veredito.store import SQLStore

    store = verdict_store(url, patience=None)
    if store is None:
        return None
    if not isinstance(store, SQLStore):
        store.close()
        print("veredito: labels live in a database store (sqlite:/// or postgresql://)",
              file=sys.stderr)  # fmt: skip
        return None
    return store


def _stored_calibrations(args: argparse.Namespace) -> int:
    """``calibrate --list`` and ``calibrate --rollback VERSION``, on ``--store URL``."""
    from veredito.store.calibrations import UnknownVersion
    from veredito.worker.confidence import CalibrationError, parse_calibration

    if not args.store:
        print("veredito: --rollback and --list need --store URL", file=sys.stderr)
        return 2
    store = _open_sql(args.store)
    if store is None:
        return 2
    try:
        if args.rollback is not None:
            found = store.calibration(args.rollback)
            if found is None:
                known = ", ".join(str(c["version"]) for c in store.calibrations(20)) or "none"
                print(
                    f"veredito: no stored calibration has version {args.rollback} "
                    f"(stored: {known})",
                    file=sys.stderr,
                )
                return 2
            try:
                parse_calibration(found["body"], f"version {args.rollback}")
            except CalibrationError as exc:
                print(f"veredito: version {args.rollback} cannot be used: {exc}", file=sys.stderr)
                return 2
            try:
                store.set_current_calibration(args.rollback, "rollback")
            except UnknownVersion:
                print(f"veredito: no stored calibration has version {args.rollback}",
                      file=sys.stderr)  # fmt: skip
                return 2
            log.info("calibration version %d is current (rollback)", args.rollback)
            print(f"calibration version {args.rollback} is current")
            return 0
        print(_calibrations_table(store.calibrations()), end="")
        return 0
    finally:
        store.close()


def _calibrations_table(rows: list[dict[str, Any]]) -> str:
    def num(value: Any) -> str:
        return "-" if value is None else f"{value:.4f}"

    lines = [
        f"{'version':>7}  {'created':<20} {'adopted':<8}{'log loss':>9}{'ECE':>8}"
        f"{'vs log loss':>12}{'vs ECE':>8}{'labelled':>9}{'held out':>9}  current"
    ]
    for row in rows:
        f = row["figures"]
        mine, theirs = f.get("candidate", {}), f.get("compared_with", {})
        lines.append(
            f"{row['version']:>7}  {row['created_at'][:19]:<20} "
            f"{'yes' if row['adopted'] else 'no':<8}{num(mine.get('log_loss')):>9}"
            f"{num(mine.get('ece')):>8}{num(theirs.get('log_loss')):>12}"
            f"{num(theirs.get('ece')):>8}{f.get('labels', {}).get('answers', 0):>9}"
            f"{f.get('held_out', {}).get('claims', 0):>9}  {'*' if row['current'] else ''}"
        )
    if not rows:
        lines.append("(none yet: the judges use the shipped calibration)")
    return "\n".join(lines) + "\n"


def _calibrate_from_store(args: argparse.Namespace, settings: Settings) -> int:
    import json

    from veredito.labels import agreement_table
    from veredito.web.reviewing import agreement_of

    try:
        filters = _review_filters(args)
    except ValueError as exc:
        print(f"veredito: {exc}", file=sys.stderr)
        return 2
    store = _open_sql(args.from_store)
    if store is None:
        return 2
    judge = args.judge if args.judge in ("llm", "rules") else None
    try:
        result = agreement_of(store, filters, judge, settings.review_sample)
    finally:
        store.close()
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=2))
    else:
        print(agreement_table(result), end="")
    return 0


def _labelled_sets(paths: list[str], option: str) -> list[dict[str, Any]] | int:
    """The records of labelled sets (spec §12), or the exit code after saying what is wrong."""
    from veredito.worker.calibrate import LabelledSetError, load_labelled

    records: list[dict[str, Any]] = []
    for path in paths:
        try:
            records += load_labelled(path)
        except OSError as exc:
            print(f"veredito: cannot read {path}: {exc.strerror}", file=sys.stderr)
            return 3
        except LabelledSetError as exc:
            print(f"veredito: {option}{path}: {exc}", file=sys.stderr)
            return 2
    return records


def _fit(args: argparse.Namespace, settings: Settings) -> int:
    import json

    from veredito.worker.fitting import (
        fit_calibration,
        llm_examples,
        reliability_table,
        rules_examples,
    )

    if not args.out:
        print("veredito: --fit needs --out FILE", file=sys.stderr)
        return 2
    if bool(args.labelled) == bool(args.from_store):
        print("veredito: --fit takes labelled files or --from-store URL", file=sys.stderr)
        return 2
    records: list[dict[str, Any]] = []
    verdicts: list[dict[str, Any]] = []
    sources: list[str] = []
    if args.from_store:
        from veredito.labels import labelled_record

        try:
            filters = _review_filters(args)
        except ValueError as exc:
            print(f"veredito: {exc}", file=sys.stderr)
            return 2
        store = _open_sql(args.from_store)
        if store is None:
            return 2
        try:
            for verdict, rows, _ in store.labelled(filters):
                records.append(labelled_record(verdict, rows))
                verdicts.append(verdict)
        finally:
            store.close()
        sources.append("store")
    else:
        loaded = _labelled_sets(args.labelled, "")
        if isinstance(loaded, int):
            return loaded
        records += loaded
        sources += [Path(path).name for path in args.labelled]
    if not records:
        print("veredito: no labelled answers to fit on", file=sys.stderr)
        return 2
    evidence = _labelled_sets(getattr(args, "evidence", None) or [], "--evidence ")
    if isinstance(evidence, int):
        return evidence
    try:
        body = fit_calibration(
            rules_examples(records),
            llm_examples(records, verdicts) if verdicts else None,
            args.name or Path(args.out).stem,
            sources,
            rules_examples(evidence),
        )
    except RuntimeError as exc:
        print(f"veredito: {exc}", file=sys.stderr)
        return 2
    target = Path(args.out)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    partial.write_text(json.dumps(body, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    with partial.open("rb") as f:
        os.fsync(f.fileno())
    partial.replace(target)
    for judge_name, report in body["held_out"].items():
        print(f"{judge_name}: held-out quarter of the answers (not fitted on)")
        print(reliability_table(report["all"]))
        print()
    print(
        f"wrote {target} ({body['examples']['rules']} rules claims, "
        f"{body['examples']['llm']} LLM claims)"
    )
    return 0


def labels(args: argparse.Namespace, settings: Settings) -> int:
    import json

    from veredito.labels import labelled_record

    try:
        filters = _review_filters(args)
    except ValueError as exc:
        print(f"veredito: {exc}", file=sys.stderr)
        return 2
    store = _open_sql(args.source)
    if store is None:
        return 2
    try:
        reviewed = store.labelled(filters)
    finally:
        store.close()
    target = Path(args.target)
    target.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    partial = target.with_name(target.name + ".partial")
    with partial.open("w", encoding="utf-8") as out:
        for verdict, rows, in_slice in reviewed:
            if args.slice == "uniform" and not in_slice:  # as recorded when it was labelled
                continue
            out.write(json.dumps(labelled_record(verdict, rows), ensure_ascii=False) + "\n")
            written += 1
        out.flush()
        os.fsync(out.fileno())
    partial.replace(target)  # a reader never sees half a file
    print(f"wrote {written} reviewed answers to {target}", file=sys.stderr)
    return 0
