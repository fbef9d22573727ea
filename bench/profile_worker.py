"""Profile one ``veredito worker`` at 400 in flight on distinct triples, with py-spy.

    .venv/bin/pip install py-spy
    .venv/bin/python bench/profile_worker.py [--n 8000] [--seconds 20] [--cross-check flag]
                                             [--tree DIR] [--out out/profile.txt]

Publishes ``--n`` distinct triples (``bench/corpus.py``) to an empty ``veredito.triples``,
starts the local test judge (200 ms) and one worker under ``py-spy record --gil`` (100
samples/s for ``--seconds``, only the thread holding the GIL: where Python spends CPU), then prints
the functions that hold the most samples: *self* (the frame on top of the stack) and *total*
(anywhere on the stack), as shares of all samples. ``--tree`` runs another checkout's code (the
folder that holds its ``veredito`` package, e.g. one made by ``scripts/typecheck-tree.sh``), for
a before/after comparison.
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.throughput import MODE, free_port, reset, triple, wait_for_port  # noqa: E402
from veredito.producer.publish import TriplePublisher  # noqa: E402


def summarise(raw: Path, top: int) -> str:
    """The top functions of py-spy's raw (collapsed) output, by self and by total samples."""
    own: collections.Counter[str] = collections.Counter()
    total: collections.Counter[str] = collections.Counter()
    samples = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        n = int(count)
        samples += n
        frames = [f.rsplit(" (", 1)[0] + " (" + f.rsplit("/", 1)[-1] for f in stack.split(";")]
        frames = [f.split(":")[0] + ")" if f.endswith(")") else f for f in frames]
        own[frames[-1]] += n
        for frame in set(frames):
            total[frame] += n
    out = [f"{samples} samples"]
    for title, counter in (("self", own), ("total", total)):
        out.append(f"\n{title}:")
        for name, n in counter.most_common(top):
            out.append(f"  {100 * n / samples:5.1f} %  {name}")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=8000)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=400)
    parser.add_argument("--cross-check", default="flag")
    parser.add_argument("--prompts", default="claims")
    parser.add_argument("--tree", type=Path, default=None)
    parser.add_argument("--broker", default="amqp://guest:guest@127.0.0.1:5672//")
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "profile.txt")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    MODE.update(triples="corpus", seed=5)

    port = free_port()
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "llm_server.py"), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port)
        reset(args.broker)
        with TriplePublisher(args.broker) as publisher:
            for i in range(args.n):
                publisher.publish_object(triple(i))
        env = {
            **os.environ,
            "VEREDITO_BROKER_URL": args.broker,
            "VEREDITO_LLM_BASE_URL": f"http://127.0.0.1:{port}/v1",
            "VEREDITO_PROMPTS": args.prompts,
            "VEREDITO_CROSS_CHECK": args.cross_check,
            "VEREDITO_LOG_LEVEL": "WARNING",
        }
        if args.tree is not None:
            env["PYTHONPATH"] = str(args.tree.resolve())
        with tempfile.TemporaryDirectory() as tmp:
            raw = Path(tmp) / "raw.txt"
            worker = subprocess.Popen(
                [
                    *(sys.executable, "-m", "veredito", "worker"),
                    *("--concurrency", str(args.concurrency), "--metrics-port", "0"),
                ],
                env=env,
                cwd=tmp if args.tree is not None else ROOT,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(3)  # start-up and the first replies: not what we profile
            subprocess.run(
                [
                    *(
                        str(Path(sys.executable).parent / "py-spy"),
                        "record",
                        "--pid",
                        str(worker.pid),
                    ),
                    *("--duration", str(args.seconds), "--rate", "100", "--format", "raw"),
                    *("--output", str(raw), "--nonblocking", "--gil"),
                ],
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            worker.terminate()
            worker.wait(timeout=60)
            report = summarise(raw, args.top)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(report + "\n")
        print(report)
    finally:
        reset(args.broker)
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
