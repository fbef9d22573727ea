"""The picture of the dashboard's release row in docs/releases.md, from a real Prometheus.

    .venv/bin/python scripts/release_picture.py [--out docs/img/release-row.png]

No Grafana installs here (it is not in Debian's archive, and nothing else can be reached), so the
row's panels are drawn by Prometheus' own graph page: eight hours of one app's counters as the
workers export them (``veredito_evaluations_total`` and ``veredito_hallucinated_answers_total``
with their ``release`` label) are backfilled with ``promtool tsdb create-blocks-from
openmetrics``, a ``prometheus`` serves them, and Debian's ``chromium`` takes the graph page of the
row's two time-series panels' expressions (the recording rules'
``app_release:veredito_confident_hallucinated_answers:ratio_rate1h`` and
``app_release:veredito_hallucinated_answers:ratio_rate1h``, read from recording.yml).

The traffic (seeded): sac-bot's release 2026.11.3 answers alone for four hours (8 % of its
answers confidently hallucinated, 14 % suspected); 2026.12.1 takes 10 % of the traffic as a
canary for half an hour, then all of it, at 15 % and 22 %.
"""

from __future__ import annotations

import argparse
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
HOURS = 8
OLD, NEW = "2026.11.3", "2026.12.1"


def openmetrics(end: int) -> str:
    """Counters, one sample a minute, ending at ``end`` (seconds)."""
    rng = random.Random(18)
    start = end - HOURS * 3600
    totals = {(r, k): 0 for r in (OLD, NEW) for k in ("ok", "true", "false")}
    samples: dict[tuple[str, str], list[tuple[int, int]]] = {key: [] for key in totals}
    for minute in range(HOURS * 60):
        at = start + minute * 60
        answers = rng.randint(30, 50)
        share_new = 0.0 if minute < 240 else 0.1 if minute < 270 else 1.0
        for release, share, sure, suspected in ((OLD, 1 - share_new, 0.08, 0.14),
                                                (NEW, share_new, 0.15, 0.22)):  # fmt: skip
            n = round(answers * share)
            if n == 0 and totals[(release, "ok")] == 0:
                continue
            confident = sum(rng.random() < sure for _ in range(n))
            unsure = sum(rng.random() < (suspected - sure) for _ in range(n))
            for kind, add in (("ok", n), ("true", confident), ("false", unsure)):
                totals[(release, kind)] += add
                samples[(release, kind)].append((at, totals[(release, kind)]))
    lines = ["# TYPE veredito_evaluations counter"]
    for release in (OLD, NEW):
        for at, value in samples[(release, "ok")]:
            lines.append(
                f'veredito_evaluations_total{{app="sac-bot",release="{release}",judge="rules",'
                f'status="ok"}} {value} {at}'
            )
    lines.append("# TYPE veredito_hallucinated_answers counter")
    for release in (OLD, NEW):
        for confident in ("true", "false"):
            for at, value in samples[(release, confident)]:
                lines.append(
                    f'veredito_hallucinated_answers_total{{app="sac-bot",release="{release}",'
                    f'judge="rules",confident="{confident}"}} {value} {at}'
                )
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def rule(name: str) -> str:
    groups = yaml.safe_load((ROOT / "monitoring/prometheus/recording.yml").read_text())["groups"]
    for group in groups:
        for entry in group["rules"]:
            if entry.get("record") == name:
                return " ".join(str(entry["expr"]).split())
    raise SystemExit(f"no recording rule {name}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs/img/release-row.png")
    args = parser.parse_args()
    for tool in ("promtool", "prometheus", "chromium"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is needed (apt-get install prometheus chromium)")
    end = int(time.time()) // 60 * 60 - 120
    work = Path(tempfile.mkdtemp(prefix="veredito-picture-"))
    (work / "data.om").write_text(openmetrics(end))
    subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics",
                    str(work / "data.om"), str(work / "tsdb")],
                   check=True, capture_output=True)  # fmt: skip
    (work / "prometheus.yml").write_text("global:\n  scrape_interval: 1m\n")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        ["prometheus", f"--config.file={work / 'prometheus.yml'}",
         f"--storage.tsdb.path={work / 'tsdb'}", "--storage.tsdb.retention.time=30d",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{base}/-/ready", timeout=2) as ready:
                    if ready.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("prometheus never became ready")
            time.sleep(0.3)
        query: dict[str, str] = {}
        panels = ("app_release:veredito_confident_hallucinated_answers:ratio_rate1h",
                  "app_release:veredito_hallucinated_answers:ratio_rate1h")  # fmt: skip
        for i, name in enumerate(panels):
            query.update({f"g{i}.expr": rule(name), f"g{i}.tab": "0",
                          f"g{i}.range_input": f"{HOURS}h", f"g{i}.stacked": "0"})  # fmt: skip
        url = f"{base}/classic/graph?{urllib.parse.urlencode(query)}"
        args.out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--window-size=1280,1480", "--virtual-time-budget=15000",
             f"--screenshot={args.out.resolve()}", url],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip
    finally:
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
