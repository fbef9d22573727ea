"""The loop of issue 30, measured: reviewers' labels for half of a set make ``serve`` refit, and
the other half is judged before and after.

    .venv/bin/python bench/refit_loop.py                                  # loop_consorcio, SQLite
    .venv/bin/python bench/refit_loop.py --set FILE.jsonl --store postgresql://…/db

1. The set (spec §12; default ``tests/data/loop_consorcio.jsonl``: consórcios, a domain absent
   from every set the shipped calibration was fitted on, written blind) is split by the parity
   of its answers' number: odd ones are *taught*, even ones *measured*.
2. The taught half is judged by the rules judge with the shipped calibration into a store
   (``veredito run --to``), and ``veredito serve --store`` starts on it with every answer in the
   uniform slice (``VEREDITO_REVIEW_SAMPLE=1``) and a refit at ``--min-labels`` answers.
3. Each taught answer's labels are posted through ``POST /v1/verdicts/{id}/labels`` as a
   reviewer who knows the gold spans would give them: a claim holding a labelled span is a
   hallucination of its category, one holding none is grounded, a span in no claim is missed.
4. Once serve has stored a candidate (``GET /v1/calibrations``), the measured half is judged by
   ``veredito calibrate --judge rules`` with the shipped calibration and with
   ``VEREDITO_CALIBRATION=<serve>/v1/calibration``: the confident answers' precision and recall,
   each category's confident precision and the claims' calibration error, side by side.

Nothing here is fitted on the measured half: the refit sees only the taught half's labels.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

READ = "bench-read-token-5Gx8pQ2w"
REVIEW = "bench-review-token-7Rt4nK1c"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VEREDITO_")}
    return {**env, "VEREDITO_CACHE_TTL": "0", **extra}


def _veredito(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "veredito", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=1200, env=_env(**env),
    )  # fmt: skip


def _call(base: str, method: str, path: str, body: Any = None, token: str = READ) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method)
    request.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            raw, status = response.read(), response.status
    except urllib.error.HTTPError as exc:
        raw, status = exc.read(), exc.code
    return status, json.loads(raw) if raw else None


def _fold(text: str) -> str:
    from veredito.worker.rules.text import fold

    return fold(text)


def labels_of(verdict: dict[str, Any], record: dict[str, Any]) -> dict[str, Any]:
    """What a reviewer who knows ``record``'s gold spans says of ``verdict`` (spec §16)."""
    spans = record["labels"]["spans"]
    claims = []
    used: set[int] = set()
    for i, claim in enumerate(verdict["claims"]):
        text = _fold(claim["text"])
        inside = [n for n, s in enumerate(spans) if _fold(s["text"]) in text]
        used.update(inside)
        flagged = claim["verdict"] != "grounded"
        if inside and not flagged:
            span = spans[inside[0]]
            claims.append({"claim_idx": i, "correct": False, "verdict": span["verdict"],
                           "category": span["category"]})  # fmt: skip
        elif flagged and not inside:
            claims.append({"claim_idx": i, "correct": False, "verdict": "grounded",
                           "category": None})  # fmt: skip
        else:
            claims.append({"claim_idx": i, "correct": True})
    missed = [
        {"text": s["text"], "category": s["category"], "verdict": s["verdict"]}
        for n, s in enumerate(spans)
        if n not in used
    ]
    body: dict[str, Any] = {"claims": claims, "hallucinated": record["labels"]["hallucinated"]}
    if missed:
        body["missed"] = missed
    return body


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _figures(report: dict[str, Any]) -> dict[str, Any]:
    confident = report["confidence"]
    answers = confident["answer_level"]
    return {
        "precision": answers["precision"],
        "recall": answers["recall"],
        "confident": answers["tp"] + answers["fp"],
        "ece": confident["claims"]["ece"],
        "categories": {
            name: {"precision": row["precision"], "flags": row["tp"] + row["fp"]}
            for name, row in confident["categories"].items()
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", type=Path, default=ROOT / "tests/data/loop_consorcio.jsonl")
    parser.add_argument("--store", help="a store URL (default: a new SQLite file)")
    parser.add_argument("--min-labels", type=int, default=60, help="serve's refit minimum")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    records = [json.loads(line) for line in args.set.read_text(encoding="utf-8").splitlines()]
    taught = [r for n, r in enumerate(records) if n % 2 == 0]  # lc-001, lc-003, …
    measured = [r for n, r in enumerate(records) if n % 2 == 1]
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        store = args.store or f"sqlite:///{tmp / 'loop.db'}"
        for name, part in (("taught", taught), ("measured", measured)):
            (tmp / f"{name}.jsonl").write_text(
                "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in part), encoding="utf-8"
            )
        out = tmp / "verdicts.jsonl"
        done = _veredito("run", str(tmp / "taught.jsonl"), "--judge", "rules", "--to", store,
                         "--out", str(out), "--no-progress")  # fmt: skip
        if done.returncode not in (0, 1):
            print(done.stderr, file=sys.stderr)
            return 1
        verdicts = {v["id"]: v for v in map(json.loads, out.read_text().splitlines())}
        port = _free_port()
        env = {"VEREDITO_READ_TOKENS": READ, "VEREDITO_REVIEW_TOKENS": f"{REVIEW}:bench",
               "VEREDITO_REVIEW_SAMPLE": "1", "VEREDITO_REVIEW_RATE": "0",
               "VEREDITO_REFIT_MIN_LABELS": str(args.min_labels),
               "VEREDITO_REFIT_INTERVAL": "1"}  # fmt: skip
        log = (tmp / "serve.log").open("w")
        serve = subprocess.Popen(
            [sys.executable, "-m", "veredito", "serve", "--port", str(port), "--store", store],
            cwd=ROOT, env=_env(**env), stdout=subprocess.PIPE, stderr=log, text=True,
        )  # fmt: skip
        base = f"http://127.0.0.1:{port}"
        try:
            assert serve.stdout is not None
            line = serve.stdout.readline()
            if "listening" not in line:
                print((tmp / "serve.log").read_text(), file=sys.stderr)
                return 1
            posted = 0
            for record in taught:
                verdict = verdicts.get(record["id"])
                if verdict is None or verdict["status"] != "ok" or not verdict["claims"]:
                    continue
                app = verdict["metadata"].get("app", "")
                path = f"/v1/verdicts/{record['id']}/labels?app={app}"
                status, answer = _call(base, "POST", path, labels_of(verdict, record), REVIEW)
                if status != 201:
                    print(f"label {record['id']}: {status} {answer}", file=sys.stderr)
                    return 1
                posted += 1
            print(f"posted the labels of {posted} answers", file=sys.stderr)
            deadline = time.monotonic() + 600
            while True:
                _, listed = _call(base, "GET", "/v1/calibrations")
                if listed and listed["calibrations"]:
                    break
                if time.monotonic() > deadline:
                    print("no refit within 600 s", file=sys.stderr)
                    return 1
                time.sleep(0.5)
            candidate = listed["calibrations"][-1]
            before = _veredito("calibrate", str(tmp / "measured.jsonl"), "--judge", "rules",
                               "--json")  # fmt: skip
            after = _veredito(
                "calibrate", str(tmp / "measured.jsonl"), "--judge", "rules", "--json",
                VEREDITO_CALIBRATION=f"{base}/v1/calibration", VEREDITO_CALIBRATION_TOKEN=READ,
            )  # fmt: skip
        finally:
            serve.send_signal(signal.SIGTERM)
            serve.wait(timeout=60)
            log.close()
        for name, result in (("before", before), ("after", after)):
            if result.returncode != 0:
                print(f"calibrate ({name}): {result.stderr}", file=sys.stderr)
                return 1
        figures = {
            "set": args.set.name,
            "taught": len(taught),
            "labelled": posted,
            "measured": len(measured),
            "refit": {k: candidate.get(k) for k in ("version", "adopted", "figures")},
            "before": _figures(json.loads(before.stdout)),
            "after": _figures(json.loads(after.stdout)),
        }
    text = json.dumps(figures, indent=1, ensure_ascii=False)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
