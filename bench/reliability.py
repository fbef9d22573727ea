"""The reliability diagram of the judges' confidences on a labelled set (spec §17).

    .venv/bin/python bench/reliability.py tests/data/holdout9.jsonl --out docs/img/reliability.png

Judges every answer with the rules judge and the shipped calibration (or VEREDITO_CALIBRATION),
then plots, for flagged and grounded claims, the share really right against the confidence given
(bins of 0.1, the number of claims printed at each point), with the diagonal a perfect
calibration would follow. Prints the figures as JSON too. Needs matplotlib (not a dependency of
veredito: `pip install matplotlib`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("labelled", nargs="+")
    parser.add_argument("--out", required=True)
    parser.add_argument("--title", default="")
    args = parser.parse_args()

    from veredito.worker.calibrate import calibrate
    from veredito.worker.fitting import reliability
    from veredito.worker.settings import Settings

    settings = Settings(judge="rules")
    pairs: dict[str, list[tuple[float, bool]]] = {"all": [], "flagged": [], "grounded": []}
    reports = []
    for path in args.labelled:
        report = calibrate(path, settings)
        reports.append(report.as_dict())
        for pair, flagged in zip(report.claim_confidences, report.claim_flagged, strict=True):
            pairs["all"].append(pair)
            pairs["flagged" if flagged else "grounded"].append(pair)
    figures = {name: reliability(values) for name, values in pairs.items() if values}

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 6), dpi=120)
    ax.plot([0, 1], [0, 1], linestyle="--", color="#888", label="perfect calibration")
    for name, colour in (("flagged", "#b3261e"), ("grounded", "#1f7a3a")):
        if name not in figures:
            continue
        bins = figures[name]["bins"]
        xs = [b["confidence"] for b in bins]
        ys = [b["right"] for b in bins]
        ax.plot(xs, ys, marker="o", color=colour,
                label=f"{name} claims (ECE {figures[name]['ece']:.3f}, "
                f"n={figures[name]['claims']})")  # fmt: skip
        for b in bins:
            ax.annotate(str(b["claims"]), (b["confidence"], b["right"]), textcoords="offset points",
                        xytext=(4, -12), fontsize=8, color=colour)  # fmt: skip
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("confidence given")
    ax.set_ylabel("share of claims whose verdict is right")
    ax.set_title(args.title or "Reliability of the rules judge's confidences")
    ax.legend(loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out)
    print(json.dumps({"reliability": figures, "reports": [
        {k: r[k] for k in ("records", "answer_level", "confidence")} for r in reports]},
        ensure_ascii=False, indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
