"""Throughput of one worker process through a real broker, against its ceiling.

    .venv/bin/python bench/throughput.py [--n 4000] [--concurrency 200] [--latency 0.2]
                                         [--broker amqp://guest:guest@127.0.0.1:5672//]
                                         [--triples corpus|repeated] [--cross-check flag|off|both]

1. Starts the local OpenAI-compatible test server (tests/llm_server.py) in its own process,
   answering every request after ``--latency`` seconds.
2. Ceiling: a bare aiohttp client makes the same calls (both prompts of each triple, rendered the
   same way, at most ``--concurrency`` triples in flight) and counts evaluations per second.
3. Worker: empties the queues, publishes ``--n`` triples, starts ``veredito worker`` (one
   process, ``--concurrency`` evaluations in flight) and counts verdicts arriving on
   ``veredito.verdicts`` per second.

Both rates are (n - 1) / (last completion - first completion), so start-up is left out of both
alike. The triples are distinct (``bench/corpus.py``: new chunks and answer every time) unless
``--triples repeated`` asks for the one triple of the first benchmarks, where every cache is warm.
The worker's CPU per evaluation is its user plus system time from /proc (start-up
included). Each of ``--repeat`` runs measures both; the medians are printed as JSON on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import aiohttp
from kombu import Connection

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from veredito.producer import topology  # noqa: E402
from veredito.producer.publish import TriplePublisher  # noqa: E402
from veredito.prompts import load_template  # noqa: E402

CONTEXT = [
    "Art. 49 do Código de Defesa do Consumidor (Lei nº 8.078/1990): o consumidor pode desistir do "
    "contrato, no prazo de 7 dias a contar de sua assinatura ou do ato de recebimento do produto "
    "ou serviço, sempre que a contratação ocorrer fora do estabelecimento comercial.",
    "Os valores eventualmente pagos, a qualquer título, durante o prazo de reflexão, serão "
    "devolvidos, de imediato, monetariamente atualizados.",
    "Em caso de recusa, o cliente pode registrar reclamação na plataforma consumidor.gov.br.",
]


def repeated_triple(i: int) -> dict[str, Any]:
    return {
        "id": f"bench-{i:06d}",
        "query": f"Posso desistir de uma compra feita pela internet? (pedido {i})",
        "context": CONTEXT,
        "answer": "Sim. Pelo art. 49 do CDC, você pode desistir em até 7 dias do recebimento. "
        "Os valores pagos são devolvidos de imediato. Você também pode reclamar no "
        "consumidor.gov.br. O Procon pode multar a loja #invent:ENTIDADE_BR.",
        "metadata": {"app": "bench"},
    }


_CORPUS: list[dict[str, Any]] = []


def triple(i: int) -> dict[str, Any]:
    """The i-th triple: distinct chunks and answer from ``bench/corpus.py`` (or the old single
    repeated triple with ``--triples repeated``, every cache warm)."""
    if MODE["triples"] == "repeated":
        return repeated_triple(i)
    if len(_CORPUS) <= i:  # the corpus is prefix-stable: a longer one starts with the same
        from bench.corpus import triples

        _CORPUS[:] = triples(max(2 * len(_CORPUS), i + 1, 1000), MODE["seed"])
    return _CORPUS[i]


MODE: dict[str, Any] = {"triples": "corpus", "seed": 1}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_for_port(port: int, deadline: float = 20) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"test server did not start on :{port}")


async def ceiling(base_url: str, n: int, concurrency: int, prompts: list[str]) -> float:
    templates = [load_template(name) for name in prompts]
    url = base_url + "/chat/completions"
    done: list[float] = []
    limit = asyncio.Semaphore(concurrency)
    connector = aiohttp.TCPConnector(limit=concurrency * len(templates))
    async with aiohttp.ClientSession(connector=connector) as session:

        async def call(prompt: str) -> None:
            body = {
                "model": "bench",
                "messages": [{"role": "user", "content": prompt}],
                "temperature": 0,
                "max_tokens": 2048,
                "response_format": {"type": "json_object"},
            }
            async with session.post(url, json=body) as response:
                json.loads(await response.text())

        async def evaluate(i: int) -> None:
            t = triple(i)
            async with limit:
                await asyncio.gather(
                    *(call(tp.render(t["query"], t["context"], t["answer"])) for tp in templates)
                )
            done.append(time.perf_counter())

        await asyncio.gather(*(evaluate(i) for i in range(n)))
    return (n - 1) / (max(done) - min(done))


def reset(url: str) -> None:
    """Start from empty queues."""
    topology.delete_queues(url)


def count_verdicts(url: str, n: int, arrivals: list[float], stop: threading.Event) -> None:
    with Connection(url) as conn:
        queue = topology.verdicts_queue(url)

        def on_message(_body: Any, message: Any) -> None:
            arrivals.append(time.perf_counter())

        with conn.Consumer(queue, callbacks=[on_message], no_ack=True, prefetch_count=1000):
            while len(arrivals) < n and not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    conn.drain_events(timeout=0.5)


def peak_rss_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def cpu_seconds(pid: int) -> float | None:
    """User plus system CPU of a live process, from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def worker_rate(
    url: str,
    base_url: str,
    n: int,
    concurrency: int,
    prompts: str,
    timeout: float,
    cross_check: str = "flag",
) -> tuple[float, float | None, float | None]:
    """Evaluations per second of one worker, its peak RSS (MiB) and CPU per evaluation (ms)."""
    reset(url)
    with TriplePublisher(url) as publisher:
        for i in range(n):
            publisher.publish_object(triple(i))
    arrivals: list[float] = []
    stop = threading.Event()
    counter = threading.Thread(target=count_verdicts, args=(url, n, arrivals, stop), daemon=True)
    counter.start()
    env = {
        **os.environ,
        "VEREDITO_BROKER_URL": url,
        "VEREDITO_LLM_BASE_URL": base_url,
        "VEREDITO_PROMPTS": prompts,
        "VEREDITO_CROSS_CHECK": cross_check,
        "VEREDITO_LOG_LEVEL": "WARNING",
    }
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "veredito",
            "worker",
            "--concurrency",
            str(concurrency),
            "--metrics-port",
            "0",
        ],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    rss = cpu = None
    try:
        counter.join(timeout)
        rss = peak_rss_mib(worker.pid)
        cpu = cpu_seconds(worker.pid)
    finally:
        stop.set()
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=60)
        except subprocess.TimeoutExpired:
            worker.kill()
    if len(arrivals) < n:
        raise SystemExit(f"only {len(arrivals)} of {n} verdicts arrived in {timeout}s")
    reset(url)
    cpu_ms = None if cpu is None else cpu / n * 1000  # start-up included (about 0.7 s)
    return (n - 1) / (max(arrivals) - min(arrivals)), rss, cpu_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4000)
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=3, help="runs; the median is reported")
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--prompts", default="claims,faithfulness")
    parser.add_argument("--broker", default="amqp://guest:guest@127.0.0.1:5672//")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument(
        "--triples",
        choices=("corpus", "repeated"),
        default="corpus",
        help="distinct triples from bench/corpus.py, or the old one repeated (warm caches)",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--cross-check", default="flag", help="flag|off, or both: each run measures both"
    )
    args = parser.parse_args()
    MODE.update(triples=args.triples, seed=args.seed)
    modes = ["flag", "off"] if args.cross_check == "both" else [args.cross_check]

    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "tests" / "llm_server.py"),
            "--port",
            str(port),
            "--latency",
            str(args.latency),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    runs: list[dict[str, float]] = []
    try:
        wait_for_port(port)
        base_url = f"http://127.0.0.1:{port}/v1"
        prompts = args.prompts.split(",")
        for _ in range(args.repeat):
            top = asyncio.run(ceiling(base_url, args.n, args.concurrency, prompts))
            run: dict[str, float] = {"ceiling": top}
            for mode in modes:
                rate, rss, cpu = worker_rate(
                    args.broker,
                    base_url,
                    args.n,
                    args.concurrency,
                    args.prompts,
                    args.timeout,
                    mode,
                )
                run.update(
                    {
                        f"worker_{mode}": rate,
                        f"ratio_{mode}": rate / top,
                        f"rss_{mode}": rss or 0.0,
                        f"cpu_ms_{mode}": cpu or 0.0,
                    }
                )
            runs.append(run)
            print(json.dumps({k: round(v, 3) for k, v in runs[-1].items()}), file=sys.stderr)
    finally:
        server.terminate()
        server.wait(timeout=30)

    def median(key: str) -> float:
        return round(statistics.median(r[key] for r in runs), 3)

    result: dict[str, Any] = {
        "n": args.n,
        "triples": args.triples,
        "concurrency": args.concurrency,
        "latency_s": args.latency,
        "prompts": args.prompts,
        "broker": args.broker.split("://")[0],
        "runs": len(runs),
        "ceiling_evals_per_s": median("ceiling"),
    }
    for mode in modes:
        result[f"cross_check_{mode}"] = {
            "worker_evals_per_s": median(f"worker_{mode}"),
            "ratio": median(f"ratio_{mode}"),
            "worker_min_max": [
                round(min(r[f"worker_{mode}"] for r in runs), 1),
                round(max(r[f"worker_{mode}"] for r in runs), 1),
            ],
            "worker_peak_rss_mib": median(f"rss_{mode}"),
            "worker_cpu_ms_per_eval": median(f"cpu_ms_{mode}"),
        }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
