"""``veredito compare BASE HEAD``: did the new release make it worse? (spec §18)

BASE and HEAD are verdict files (JSONL, one verdict per line, as ``veredito run --out`` writes
them) or ``store:URL#release``. Prints the table of :func:`veredito.comparison.format_table`, or
with ``--json`` the result of :func:`veredito.comparison.compare`, the same as the API's.

Exit codes: 0 compared; 1 with ``--fail-on-regression`` when a row regressed (a CI gate); 2 bad
usage: a file missing or unreadable, a line that is not a verdict (named by file and line: none
is skipped), a side without judged answers, ``--paired yes`` on sides that share no id.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from veredito.worker.settings import Settings

__all__ = ["Side", "VerdictFileError", "add_parser", "compare", "read_verdicts"]

STORE_PREFIX = "store:"


class VerdictFileError(ValueError):
    """A verdict file that cannot be read, or a line of it that is not a verdict."""

    def __init__(self, path: str, message: str, line: int | None = None) -> None:
        super().__init__(path, message, line)
        self.path, self.message, self.line = path, message, line

    def __str__(self) -> str:
        where = f"{self.path}, line {self.line}" if self.line is not None else self.path
        return f"{where}: {self.message}"


@dataclass
class Side:
    """One side of the comparison as read: its verdicts (files; pairing needs them) or its counts
    (a store may count in SQL), and the judge's precision on it where labels say."""

    name: str
    verdicts: list[dict[str, Any]] | None = None
    tally: Any = None  # veredito.comparison.Tally
    precision: dict[str, dict[str, Any]] | None = None


def add_parser(sub: Any) -> None:
    """The ``compare`` subcommand on the command line's subparsers."""
    p = sub.add_parser(
        "compare", help="compare two releases' verdicts: did the head make it worse? (spec §18)"
    )
    p.add_argument("base", help="verdict file (JSONL, what run --out writes) or store:URL#release")
    p.add_argument("head", help="the same, for the release under test")
    p.add_argument("--app", help="only this app's verdicts (metadata.app)")
    p.add_argument(
        "--confident",
        action="store_true",
        help="count only confident hallucinations (spec §17)",
    )
    p.add_argument(
        "--threshold",
        type=float,
        help="with --confident: the confidence line (default VEREDITO_ALERT_CONFIDENCE, 0.8)",
    )
    p.add_argument(
        "--paired",
        choices=["auto", "yes", "no"],
        default="auto",
        help="paired on the shared triple ids (exact McNemar) or two independent samples; "
        "auto: paired when at least half of the smaller side's ids are shared (default)",
    )
    p.add_argument(
        "--labels",
        metavar="LABELLED.jsonl",
        help="a labelled set (spec §12, what labels export writes): the judge's precision on "
        "each side, beside the rates",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument(
        "--fail-on-regression", action="store_true", help="exit 1 when any row regressed"
    )


def read_verdicts(path: str, app: str | None = None) -> list[dict[str, Any]]:
    """The verdicts of a JSONL file (``app``: that app's only); a line that is not a verdict
    raises :class:`VerdictFileError` naming it."""
    from veredito.comparison import check_verdict

    out = []
    try:
        with Path(path).open(encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    verdict = json.loads(line)
                except ValueError as exc:
                    raise VerdictFileError(path, f"not valid JSON ({exc})", number) from None
                problem = check_verdict(verdict)
                if problem is not None:
                    raise VerdictFileError(path, problem, number)
                if app is None or (verdict.get("metadata") or {}).get("app") == app:
                    out.append(verdict)
    except OSError as exc:
        raise VerdictFileError(path, exc.strerror or str(exc)) from None
    except UnicodeDecodeError as exc:
        raise VerdictFileError(path, f"not UTF-8 text ({exc.reason})") from None
    return out


def _store_side(
    spec: str, app: str | None, confident: bool, threshold: float, share: float = 0.05
) -> Side:
    """A side read from a verdict store, ``store:URL#release``: the release's counts from SQL
    (not its verdicts: no pairing, a store keeps one verdict per id), and the judge's precision
    on the uniform slice's labels of that release where there are any (``share``: the slice,
    ``VEREDITO_REVIEW_SAMPLE``)."""
    from veredito.comparison import Tally
    from veredito.store import StoreError, StoreUnavailable
    from veredito.store.base import Filters
    from veredito.store.sql import open_sql_store
    from veredito.web.releases import _precision
    from veredito.web.reviewing import agreement_of

    url, sep, release = spec[len(STORE_PREFIX) :].rpartition("#")
    if not sep or not url or not release:
        raise VerdictFileError(spec, "a store side is store:URL#release")
    try:
        store = open_sql_store(url)
    except (StoreError, StoreUnavailable, ValueError) as exc:
        raise VerdictFileError(url, f"cannot open the store: {exc}") from None
    try:
        if app is None:
            apps = store.apps(2)
            if len(apps) != 1:
                raise VerdictFileError(spec, "the store holds several apps: name one with --app")
            app = apps[0]
        known = {r["release"] for r in store.releases(app, 10_000)}
        if release not in known:
            raise VerdictFileError(spec, f"{release!r} is not a release of the app {app!r}")
        figures = store.release_figures(app, release, threshold=threshold)
        counts = figures["confident" if confident else "all"]
        result = agreement_of(store, Filters(app=app, release=release), None, share)
    except StoreUnavailable as exc:
        raise VerdictFileError(url, f"the store cannot be reached: {exc}") from None
    finally:
        store.close()
    return Side(
        release,
        tally=Tally(counts["answers"], counts["hallucinated"], counts["categories"]),
        precision=_precision(result),
    )


def _side(spec: str, app: str | None, confident: bool, threshold: float, share: float) -> Side:
    if spec.startswith(STORE_PREFIX):
        return _store_side(spec, app, confident, threshold, share)
    return Side(spec, verdicts=read_verdicts(spec, app))


def _labelled(path: str) -> list[dict[str, Any]]:
    from veredito.worker.calibrate import LabelledSetError, load_labelled

    try:
        return load_labelled(path)
    except OSError as exc:
        raise VerdictFileError(path, exc.strerror or str(exc)) from None
    except LabelledSetError as exc:
        raise VerdictFileError(path, str(exc)) from None


def compare(args: argparse.Namespace, settings: Settings) -> int:
    from veredito.comparison import compare as compare_sides
    from veredito.comparison import compare_tallies, format_table, precision_from_labels, tally

    threshold = settings.alert_confidence if args.threshold is None else args.threshold
    if not 0 <= threshold <= 1:
        print(f"veredito: --threshold {threshold:g}: must be between 0 and 1", file=sys.stderr)
        return 2
    try:
        share = settings.review_sample
        base = _side(args.base, args.app, args.confident, threshold, share)
        head = _side(args.head, args.app, args.confident, threshold, share)
        labelled = _labelled(args.labels) if args.labels else []
        for side in (base, head):
            if side.precision is None and side.verdicts is not None:
                side.precision = precision_from_labels(side.verdicts, labelled)
        options: dict[str, Any] = {
            "base_name": base.name,
            "head_name": head.name,
            "confident": args.confident,
            "threshold": threshold,
            "base_precision": base.precision,
            "head_precision": head.precision,
        }
        if base.verdicts is not None and head.verdicts is not None:
            paired = {"auto": None, "yes": True, "no": False}[args.paired]
            result = compare_sides(base.verdicts, head.verdicts, paired=paired, **options)
        else:
            if args.paired == "yes":
                print("veredito: --paired yes needs the verdicts of both sides", file=sys.stderr)
                return 2
            sides = [
                s.tally
                if s.verdicts is None
                else tally(s.verdicts, confident=args.confident, threshold=threshold)
                for s in (base, head)
            ]
            result = compare_tallies(sides[0], sides[1], **options)
    except ValueError as exc:  # VerdictFileError, a side without judged answers, nothing paired
        print(f"veredito: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=2))
    else:
        print(format_table(result), end="")
    return 1 if args.fail_on_regression and result["regressed"] else 0
