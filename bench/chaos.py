"""The chaos suite: nothing lost, nothing stored twice, no ``failed`` verdict for a transient fault.

    .venv/bin/python bench/chaos.py --broker rabbitmq --n 10000
    .venv/bin/python bench/chaos.py --broker redis --n 3000

One run:

1. writes ``--n`` distinct triples (every ``--bad-every``-th one asks the test judge to answer
   badly twice: those, and only those, must end ``failed`` with a dead-letter record);
2. starts the local test judge (tests/llm_server.py) in this process, failing ``--fault-rate`` of
   its requests at random (500, 503, 429 with ``Retry-After``, hangs past the client's timeout,
   connection resets, malformed completions);
3. starts ``veredito produce``, ``--workers`` worker processes and one ``veredito results``;
4. while the verdicts come in: SIGKILLs a worker every ``--kill-every`` seconds and starts it
   again; SIGKILLs and restarts the results sink at 30 % of the verdicts; restarts RabbitMQ's app
   at 50 % (not on Redis); takes the judge fully down for ``--outage`` seconds at 70 %;
   with ``--store postgresql://…`` the sink writes to PostgreSQL instead of a file, and
   PostgreSQL itself is restarted at 60 %;
5. when every id has a verdict (or ``--deadline`` passes), stops the workers and the sink with
   SIGTERM (they must exit 0) and checks: every input id exactly once in the results file (or
   once in the database, with each verdict's claims stored once); the
   ``failed`` verdicts are exactly the bad-twice triples; one dead-letter record per failed
   triple; nothing dead-lettered by the broker.

On Redis, at every worker kill the killed process's held triples are read from the leases
(``veredito:holders``, worker/redis_transport.py) and the report gives, for those, how long after
the kill their verdicts were made (``held_at_kills``, ``back_max_seconds``, ``back_over_60s``).
The test judge keeps a request log: ``judged_twice`` counts prompts answered validly more than
once (a triple judged twice, whatever the done markers would have saved); with no worker kills
(``--kill-every 0``) it must be 0. On RabbitMQ, ``renewed`` counts the triples the workers renewed
instead of letting the queue's delivery limit count their returns (worker/poison.py), and
``dead_letters_not_bad`` the dead-letter records for triples that were not bad twice (must be 0).

The broker URLs come from ``VEREDITO_TEST_RABBITMQ_URL`` and ``VEREDITO_TEST_REDIS_URL`` when set
(a vhost and a Redis db of one's own; the done markers then live in that Redis db too).

It prints a JSON report and exits 1 if a check fails. ``tests/test_chaos.py`` runs small ones.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis
from kombu import Connection

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.judge_log import LoggedServer, PerSecondScript  # noqa: E402
from veredito.producer import topology  # noqa: E402
from veredito.producer.triple import parse_triple  # noqa: E402
from veredito.worker.redis_transport import HOLDERS_KEY  # noqa: E402

BROKERS = {
    "rabbitmq": os.environ.get("VEREDITO_TEST_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672//"),
    "redis": os.environ.get("VEREDITO_TEST_REDIS_URL", "redis://127.0.0.1:6379/13"),
}
MARKS_URL = os.environ.get("VEREDITO_TEST_REDIS_URL", "redis://127.0.0.1:6379/13")

TOPICS = [
    (
        "Posso desistir de uma compra feita pela internet?",
        "Art. 49 do Código de Defesa do Consumidor (Lei nº 8.078/1990): o consumidor pode desistir "
        "do contrato no prazo de {d} dias a contar da assinatura ou do recebimento do produto.",
        "Sim, você tem {d} dias para desistir, pelo art. 49 do CDC.",
    ),
    (
        "Quando posso sacar o FGTS na demissão?",
        "Na despedida sem justa causa o trabalhador pode sacar o FGTS e recebe multa de {p}% "
        "sobre o saldo, paga pelo empregador em até {d} dias.",
        "Na demissão sem justa causa você saca o FGTS e recebe multa de {p}% do saldo.",
    ),
    (
        "Qual o prazo para o INSS analisar o pedido de aposentadoria?",
        "O INSS deve concluir a análise do requerimento em até {d} dias; a Portaria nº {n}/2023 "
        "fixa esse prazo para benefícios programáveis.",
        "O INSS tem até {d} dias para analisar, conforme a Portaria nº {n}/2023.",
    ),
    (
        "Quanto custa a multa por atraso na declaração do IRPF?",
        "A multa por atraso na entrega da declaração é de 1% ao mês sobre o imposto devido, com "
        "mínimo de R$ {v},75 e máximo de {p}% do imposto.",
        "A multa mínima é de R$ {v},75, limitada a {p}% do imposto devido.",
    ),
    (
        "O plano de saúde pode negar cobertura de urgência?",
        "A ANS determina que a carência para urgência e emergência é de no máximo {h} horas após "
        "a contratação; depois disso a cobertura é obrigatória.",
        "Não. Após {h} horas de carência a cobertura de urgência é obrigatória, segundo a ANS.",
    ),
]


def make_triples(n: int, bad_every: int) -> tuple[list[str], set[str]]:
    """``n`` JSONL lines of distinct triples; the ids of those the judge answers badly twice."""
    lines, bad = [], set()
    for i in range(n):
        query, context, answer = TOPICS[i % len(TOPICS)]
        values = {"d": 5 + i % 90, "p": 10 + i % 40, "n": 100 + i, "v": 100 + i % 900, "h": 24}
        marker = " #llm:bad_twice" if bad_every and i % bad_every == bad_every - 1 else ""
        triple = {
            "id": f"chaos-{i:06d}",
            "query": f"{query} (atendimento {i})",
            "context": [
                context.format(**values),
                f"Protocolo {i:06d}: atendimento registrado no canal digital, unidade {i % 27}.",
            ],
            "answer": answer.format(**values) + marker,
            "metadata": {"app": f"chaos{i % 3}"},
        }
        if marker:
            bad.add(parse_triple(triple).id)
        lines.append(json.dumps(triple, ensure_ascii=False))
    return lines, bad


@dataclass
class ChaosConfig:
    broker: str = "rabbitmq"
    n: int = 1000
    workers: int = 2
    concurrency: int = 16
    latency: float = 0.3
    fault_rate: float = 0.12
    timeout: float = 2.0
    kill_every: float = 4.0  # 0: no worker kills
    max_kills: int | None = None
    sink_kill_at: float | None = 0.3
    broker_restart_at: float | None = 0.5
    outage_at: float | None = 0.7
    outage: float = 40.0
    bad_every: int = 97
    visibility_timeout: float = 30.0
    lease: float = 10.0  # VEREDITO_REDIS_LEASE
    deadline: float = 900.0
    workdir: Path = field(default_factory=lambda: Path("out/chaos"))
    store: str | None = None  # postgresql://… : the sink writes there (default: a JSONL file)
    store_restart_at: float | None = 0.6  # restart PostgreSQL (only with a postgresql store)


@dataclass
class ChaosReport:
    broker: str
    n: int
    elapsed_seconds: float = 0.0
    verdict_lines: int = 0
    distinct_ids: int = 0
    missing: int = 0
    written_twice: int = 0
    unknown_ids: int = 0
    ok: int = 0
    rejected: int = 0
    failed: int = 0
    failed_unexpected: int = 0
    expected_failed: int = 0
    dead_letter_records: int = 0
    dead_letter_ids: int = 0
    broker_dead_lettered: int = 0
    worker_kills: int = 0
    sink_kills: int = 0
    broker_restarts: int = 0
    store_restarts: int = 0
    claims_mismatched: int = 0
    outage_seconds: float = 0.0
    held_at_kills: int = 0
    back_max_seconds: float | None = None
    back_over_60s: int = 0
    judged_twice: int = 0
    renewed: int = 0
    max_returns: int = 0
    returned_too_often: int = 0
    dead_letters_not_bad: int = 0
    judge_requests: int = 0
    judge_faults: dict[str, int] = field(default_factory=dict)
    exit_codes: dict[str, int | None] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.problems


def reset(url: str) -> None:
    topology.delete_queues(url)
    client = redis.Redis.from_url(MARKS_URL)
    keys = list(client.scan_iter("veredito:done:*", count=1000))
    keys += list(client.scan_iter("veredito:cache:*", count=1000))  # judged afresh each run
    if url.startswith("redis"):  # kombu's bookkeeping of unacked messages from earlier runs
        keys += [b"unacked", b"unacked_index", b"unacked_mutex"]
    if keys:
        client.delete(*keys)
    client.close()


class Processes:
    """The veredito processes of one run, each logging to a file of its own."""

    def __init__(self, env: dict[str, str], workdir: Path) -> None:
        self.env = env
        self.workdir = workdir
        self.starts: Counter[str] = Counter()

    def start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        self.starts[name] += 1
        log = (self.workdir / f"{name}.{self.starts[name]}.log").open("wb")
        return subprocess.Popen(
            [sys.executable, "-m", "veredito", *args],
            env=self.env,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def sigkill(process: subprocess.Popen[bytes]) -> None:
    process.kill()
    process.wait(timeout=30)


def sigterm(process: subprocess.Popen[bytes], timeout: float = 90) -> int | None:
    if process.poll() is not None:
        return process.returncode
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return None


def restart_rabbitmq() -> None:
    for action in ("stop_app", "start_app"):
        subprocess.run(["rabbitmqctl", action], check=True, capture_output=True, timeout=120)
    subprocess.run(["rabbitmqctl", "await_startup"], check=True, capture_output=True, timeout=120)


class Tail:
    """Reads the results file as it grows: ids seen, and how many times each."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.ids: Counter[str] = Counter()
        self.verdicts: dict[str, dict[str, Any]] = {}
        self.lines = 0

    def poll(self) -> None:
        if not self.path.exists():
            return
        with self.path.open("rb") as f:
            f.seek(self.offset)
            data = f.read()
        end = data.rfind(b"\n") + 1
        self.offset += end
        for line in data[:end].splitlines():
            verdict = json.loads(line)
            self.lines += 1
            self.ids[verdict["id"]] += 1
            self.verdicts[verdict["id"]] = verdict


class StoreTail(Tail):
    """The same view of a PostgreSQL store: every id stored (the primary key makes a second row
    impossible; a verdict whose claims were written twice or only in part shows in
    ``claims_mismatched``)."""

    def __init__(self, url: str) -> None:
        super().__init__(Path("/nonexistent"))
        self.url = url
        self.claims_mismatched = 0

    def poll(self) -> None:
        import psycopg

        try:
            with psycopg.connect(self.url, connect_timeout=5) as conn:
                rows = conn.execute("SELECT id, status FROM verdicts").fetchall()
                self.claims_mismatched = conn.execute(
                    "SELECT COUNT(*) FROM verdicts v WHERE json_array_length(v.body->'claims') "
                    "<> (SELECT COUNT(*) FROM claims c WHERE c.verdict_id = v.id)"
                ).fetchone()[0]
        except psycopg.OperationalError:  # PostgreSQL restarting: look again next time
            return
        self.ids = Counter(verdict_id for verdict_id, _ in rows)
        self.verdicts = {verdict_id: {"status": status} for verdict_id, status in rows}
        self.lines = len(rows)


def held_by(url: str, pid: int) -> set[str]:
    """The ids of the triples a worker process holds under its leases (Redis broker)."""
    client = redis.Redis.from_url(url)
    ids: set[str] = set()
    try:
        for tag, held in client.hgetall(HOLDERS_KEY).items():
            if f":{pid}:" not in held.split(b"\t", 1)[0].decode():
                continue
            record = client.hget("unacked", tag)
            if record is None:
                continue
            with contextlib.suppress(ValueError, KeyError, IndexError, TypeError):
                payload = json.loads(record)[0]
                body = json.loads(base64.b64decode(payload["body"]))
                ids.add(str(body[1]["triple"]["id"]))
    finally:
        client.close()
    return ids


def epoch(stamp: str) -> float:
    """A verdict's ``evaluated_at`` as seconds since the epoch."""
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()


def count_in_logs(workdir: Path, pattern: str) -> int:
    """Occurrences of a pattern in the workers' logs, every start of every worker."""
    found = re.compile(pattern)
    return sum(
        len(found.findall(path.read_text(errors="replace"))) for path in workdir.glob("worker*.log")
    )


def restart_postgresql() -> None:
    for version in sorted(os.listdir("/etc/postgresql")):
        subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "restart"],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip


def drain_dead(url: str) -> list[Any]:
    records = []
    with Connection(url) as conn:
        queue = topology.dead_queue(url)(conn.channel())
        queue.declare()
        while (message := queue.get(no_ack=True)) is not None:
            body = message.body if isinstance(message.body, bytes) else message.body.encode()
            records.append(json.loads(body))
    return records


def run_chaos(config: ChaosConfig) -> ChaosReport:
    url = BROKERS[config.broker]
    workdir = config.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    for old in workdir.glob("*"):
        old.unlink()
    report = ChaosReport(config.broker, config.n)
    lines, bad = make_triples(config.n, config.bad_every)
    expected = {json.loads(line)["id"] for line in lines}
    report.expected_failed = len(bad)
    source = workdir / "triples.jsonl"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    results = workdir / "verdicts.jsonl"
    reset(url)
    if config.store:  # this run's verdicts only: the store is created, migrated and emptied
        import psycopg
        from psycopg.conninfo import conninfo_to_dict

        from veredito.store import open_store

        target = conninfo_to_dict(config.store)
        admin = {**target, "dbname": "postgres"}
        with psycopg.connect(**admin, autocommit=True) as conn:  # type: ignore[arg-type]
            exists = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (target["dbname"],)
            ).fetchone()
            if not exists:
                conn.execute(f'CREATE DATABASE "{target["dbname"]}"')
        open_store(config.store).close()
        with psycopg.connect(config.store, autocommit=True) as conn:
            conn.execute("TRUNCATE verdicts, claims, labels, review_served")

    script = PerSecondScript(
        latency=config.latency,
        record=False,
        fault_rate=config.fault_rate,
        hang_seconds=config.timeout + 1.0,
    )
    kills: list[tuple[float, set[str]]] = []  # (when, ids the killed worker held), Redis only
    with LoggedServer(script) as judge:
        env = {
            **os.environ,
            "VEREDITO_BROKER_URL": url,
            "VEREDITO_LLM_BASE_URL": judge.base_url,
            "VEREDITO_LLM_API_KEY": "sk-chaos",
            "VEREDITO_LLM_TIMEOUT": str(config.timeout),
            "VEREDITO_LLM_MAX_BACKOFF": "1",
            # the judge's faults are random (12 %): with the default 6 tries a request fails them
            # all about once in 300,000, so one good triple in about a hundred 1,000-triple runs
            # ended `failed` (seen in CI); 10 tries make that about one in 10^9 per request, and
            # a judge that fails systematically still fails every try
            "VEREDITO_LLM_MAX_ATTEMPTS": "10",
            "VEREDITO_REDIS_URL": MARKS_URL,
            "VEREDITO_REDIS_VISIBILITY_TIMEOUT": str(config.visibility_timeout),
            "VEREDITO_REDIS_LEASE": str(config.lease),
            "VEREDITO_SHUTDOWN_GRACE": "10",
            "VEREDITO_CONCURRENCY": str(config.concurrency),
        }
        procs = Processes(env, workdir)
        worker_args = ("worker", "--metrics-port", "0")
        started = time.monotonic()
        producer = procs.start("produce", "produce", str(source))
        workers = [procs.start(f"worker{i}", *worker_args) for i in range(config.workers)]
        sink_args = ("--to", config.store) if config.store else ("--out", str(results))
        sink = procs.start("results", "results", *sink_args)
        tail = StoreTail(config.store) if config.store else Tail(results)
        last_kill = time.monotonic()
        outage_ends: float | None = None
        done = False
        try:
            while time.monotonic() - started < config.deadline:
                time.sleep(0.25)
                tail.poll()
                progress = len(tail.ids) / config.n
                if expected <= tail.ids.keys():
                    done = True
                    break
                now = time.monotonic()
                kills_left = config.kill_every > 0 and (
                    config.max_kills is None or report.worker_kills < config.max_kills
                )
                if kills_left and now - last_kill >= config.kill_every:
                    i = report.worker_kills % config.workers
                    if config.broker == "redis":
                        held = held_by(url, workers[i].pid)
                        kills.append((time.time(), held))
                    sigkill(workers[i])
                    workers[i] = procs.start(f"worker{i}", *worker_args)
                    report.worker_kills += 1
                    last_kill = now
                if config.sink_kill_at is not None and progress >= config.sink_kill_at:
                    config.sink_kill_at = None
                    sigkill(sink)
                    sink = procs.start("results", "results", *sink_args)
                    report.sink_kills += 1
                if (
                    config.store is not None
                    and config.store_restart_at is not None
                    and progress >= config.store_restart_at
                ):
                    config.store_restart_at = None
                    restart_postgresql()
                    report.store_restarts += 1
                if (
                    config.broker_restart_at is not None
                    and config.broker == "rabbitmq"
                    and progress >= config.broker_restart_at
                ):
                    config.broker_restart_at = None
                    restart_rabbitmq()
                    report.broker_restarts += 1
                if (
                    config.outage_at is not None
                    and config.outage > 0
                    and progress >= config.outage_at
                ):
                    config.outage_at = None
                    script.down = True
                    outage_ends = now + config.outage
                if outage_ends is not None and now >= outage_ends:
                    script.down = False
                    report.outage_seconds = config.outage
                    outage_ends = None
        finally:
            script.down = False
            report.elapsed_seconds = round(time.monotonic() - started, 1)
            time.sleep(1.0)  # a last redelivered repeat, if any, reaches the sink
            report.exit_codes["produce"] = producer.wait(timeout=120)
            for i, worker in enumerate(workers):
                report.exit_codes[f"worker{i}"] = sigterm(worker)
            report.exit_codes["results"] = sigterm(sink)
        report.judge_requests = script.served
        report.judge_faults = dict(script.faults)

    tail.poll()
    if not done:
        report.problems.append(f"deadline of {config.deadline:.0f} s passed")
    report.verdict_lines = tail.lines
    report.distinct_ids = len(tail.ids)
    report.missing = len(expected - tail.ids.keys())
    report.unknown_ids = len(tail.ids.keys() - expected)
    report.written_twice = sum(1 for count in tail.ids.values() if count > 1)
    statuses = Counter(v["status"] for v in tail.verdicts.values())
    report.ok, report.rejected, report.failed = (
        statuses["ok"],
        statuses["rejected"],
        statuses["failed"],
    )
    failed_ids = {i for i, v in tail.verdicts.items() if v["status"] == "failed"}
    report.failed_unexpected = len(failed_ids - bad)
    records = drain_dead(url)
    ours = [r for r in records if isinstance(r, dict) and "reason" in r]
    report.dead_letter_records = len(ours)
    report.dead_letter_ids = len({r["id"] for r in ours})
    report.broker_dead_lettered = len(records) - len(ours)
    report.dead_letters_not_bad = len({r["id"] for r in ours} - bad)
    report.judged_twice = sum(1 for n in script.answers().values() if n > 1)
    report.renewed = count_in_logs(workdir, r"was renewed")
    report.max_returns = max(
        (
            int(n)
            for path in workdir.glob("worker*.log")
            for n in re.findall(r"returned (\d+) times", path.read_text(errors="replace"))
        ),
        default=0,
    )
    report.returned_too_often = count_in_logs(workdir, r"dead-lettered as returned_too_often")
    backs = []
    for killed_at, held in kills:
        report.held_at_kills += len(held)
        for ident in held:
            verdict = tail.verdicts.get(ident)
            if verdict is None or not verdict.get("evaluated_at"):
                continue  # missing: counted as such below
            backs.append(epoch(verdict["evaluated_at"]) - killed_at)
    if backs:
        report.back_max_seconds = round(max(backs), 1)
        report.back_over_60s = sum(1 for b in backs if b > 60)

    if isinstance(tail, StoreTail):
        report.claims_mismatched = tail.claims_mismatched
        if tail.claims_mismatched:
            report.problems.append(f"{tail.claims_mismatched} verdicts with their claims wrong")
    if report.missing:
        report.problems.append(f"{report.missing} input ids have no verdict")
    if report.written_twice:
        report.problems.append(f"{report.written_twice} ids written more than once")
    if report.unknown_ids:
        report.problems.append(f"{report.unknown_ids} verdicts for ids never produced")
    if failed_ids != bad:
        report.problems.append(
            f"failed verdicts: {len(failed_ids)}, expected the {len(bad)} bad-twice triples "
            f"({report.failed_unexpected} unexpected)"
        )
    if report.dead_letter_ids != report.failed:
        report.problems.append(
            f"{report.dead_letter_ids} triples dead-lettered, {report.failed} failed verdicts"
        )
    if report.broker_dead_lettered:
        report.problems.append(f"{report.broker_dead_lettered} dead-lettered by the broker")
    if report.dead_letters_not_bad:
        report.problems.append(f"{report.dead_letters_not_bad} dead letters for good triples")
    if report.back_over_60s:
        report.problems.append(
            f"{report.back_over_60s} triples held by a killed worker judged more than 60 s "
            "after the kill"
        )
    if report.judged_twice and report.worker_kills == 0:
        report.problems.append(f"{report.judged_twice} prompts answered twice with no kill")
    for name, code in report.exit_codes.items():
        if code != 0:
            report.problems.append(f"{name} exited {code} (expected 0 after SIGTERM)")
    with contextlib.suppress(Exception):
        reset(url)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--broker", choices=sorted(BROKERS), default="rabbitmq")
    defaults = ChaosConfig()
    parser.add_argument("--n", type=int, default=defaults.n)
    parser.add_argument("--workers", type=int, default=defaults.workers)
    parser.add_argument("--concurrency", type=int, default=defaults.concurrency)
    parser.add_argument("--latency", type=float, default=defaults.latency)
    parser.add_argument("--fault-rate", type=float, default=defaults.fault_rate)
    parser.add_argument("--kill-every", type=float, default=defaults.kill_every)
    parser.add_argument("--max-kills", type=int, default=None)
    parser.add_argument("--outage", type=float, default=defaults.outage)
    parser.add_argument("--bad-every", type=int, default=defaults.bad_every)
    parser.add_argument("--visibility-timeout", type=float, default=defaults.visibility_timeout)
    parser.add_argument("--lease", type=float, default=defaults.lease)
    parser.add_argument(
        "--no-broker-restart", action="store_true",
        help="do not restart RabbitMQ's app at 50 %% (a RabbitMQ shared with others)",
    )  # fmt: skip
    parser.add_argument(
        "--no-sink-kill", action="store_true", help="do not kill the results sink at 30 %%"
    )
    parser.add_argument(
        "--outage-at", type=float, default=defaults.outage_at, help="progress at which the "
        "judge goes down for --outage seconds (0 to 1; default 0.7)",
    )  # fmt: skip
    parser.add_argument("--deadline", type=float, default=defaults.deadline)
    parser.add_argument("--workdir", type=Path, default=defaults.workdir)
    parser.add_argument(
        "--store", help="postgresql://…: the sink writes there, and PostgreSQL is restarted"
    )
    args = parser.parse_args()
    config = ChaosConfig(
        broker=args.broker,
        n=args.n,
        workers=args.workers,
        concurrency=args.concurrency,
        latency=args.latency,
        fault_rate=args.fault_rate,
        kill_every=args.kill_every,
        max_kills=args.max_kills,
        outage=args.outage,
        bad_every=args.bad_every,
        visibility_timeout=args.visibility_timeout,
        lease=args.lease,
        sink_kill_at=None if args.no_sink_kill else defaults.sink_kill_at,
        broker_restart_at=None if args.no_broker_restart else defaults.broker_restart_at,
        outage_at=args.outage_at,
        deadline=args.deadline,
        workdir=args.workdir,
        store=args.store,
    )
    report = run_chaos(config)
    print(json.dumps({**asdict(report), "passed": report.passed}, indent=2))
    sys.exit(0 if report.passed else 1)


if __name__ == "__main__":
    main()
