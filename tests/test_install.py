"""The distribution as users get it: the wheel's contents."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT, require_service


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    # no deprecated licence table, no data folder left out: the build says nothing to fix
    assert "BuildBackendWarning" not in build.stdout + build.stderr, build.stdout[-3000:]
    (built,) = out.glob("veredito-*.whl")
    return built


def test_wheel_installs_one_top_level_package(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/", 1)[0] for name in names}
    dist_info = {t for t in top if t.endswith(".dist-info")}
    assert top - dist_info == {"veredito"}, sorted(top)
    for expected in (
        "veredito/__init__.py",
        "veredito/__main__.py",
        "veredito/py.typed",
        "veredito/producer/triple.py",
        "veredito/worker/celery_app.py",
        "veredito/worker/rules/data/municipios.tsv",
        "veredito/prompts/claims.pt-BR.txt",
        "veredito/prompts/faithfulness.pt-BR.txt",
        "veredito/cli.py",
        "veredito/store/migrations/sqlite/0001_verdicts.sql",
        "veredito/store/migrations/postgresql/0003_tenant_ids.sql",
        "veredito/web/app.py",
        "veredito/web/templates/verdict.html",
        "veredito/web/static/review.css",
    ):
        assert expected in names, expected
    assert not any(name.startswith(("tests/", "bench/")) for name in names)


def test_wheel_prompts_are_the_shipped_bytes(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        for name in ("claims", "faithfulness"):
            shipped = (ROOT / "prompts" / f"{name}.pt-BR.txt").read_bytes()
            assert archive.read(f"veredito/prompts/{name}.pt-BR.txt") == shipped


def test_console_script_points_into_the_package(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        (entry_points,) = [n for n in archive.namelist() if n.endswith("entry_points.txt")]
        text = archive.read(entry_points).decode()
    assert "veredito = veredito.cli:main" in text
    assert "[pytest11]" in text and "veredito = veredito.pytest_plugin" in text


def test_the_licence_is_declared(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        metadata = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        text = archive.read(metadata).decode()
    assert "License-Expression: LicenseRef-Proprietary" in text
    assert "License-File: LICENSE" in text


def test_celery_finds_the_app_by_package_name(tmp_path: Path) -> None:
    """`celery -A veredito.worker worker` works from any directory (nothing relies on the checkout)."""
    celery = Path(sys.executable).with_name("celery")
    report = subprocess.run(
        [str(celery), "-A", "veredito.worker", "report"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert report.returncode == 0, report.stderr[-2000:]
    assert "task_default_queue: 'veredito.triples'" in report.stdout


def test_python_dash_m_veredito(tmp_path: Path) -> None:
    help_text = subprocess.run(
        [sys.executable, "-m", "veredito", "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "run" in help_text and "worker" in help_text


def _venv(wheel: Path, folder: Path, extras: str = "") -> Path:
    """The wheel installed the way users install it: a new venv, not editable."""
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True, timeout=120)
    pip = subprocess.run(
        [str(folder / "bin" / "pip"), "install", "--quiet", f"{wheel}{extras}"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert pip.returncode == 0, pip.stderr[-3000:]
    return folder


@pytest.fixture(scope="session")
def bare_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``pip install veredito``: no extras at all."""
    return _venv(wheel, tmp_path_factory.mktemp("bare-venv"))


@pytest.fixture(scope="session")
def clean_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``pip install 'veredito[redis]'``: what a broker deployment on Redis needs."""
    return _venv(wheel, tmp_path_factory.mktemp("venv"), "[redis]")


@pytest.mark.broker
@pytest.mark.parametrize("broker", ["rabbitmq", "redis"])
def test_a_plain_install_runs_produce_worker_and_results(
    clean_venv: Path, broker: str, tmp_path: Path
) -> None:
    from tests.test_broker_e2e import BROKERS, reset_broker

    url, port = BROKERS[broker]
    require_service(port, broker)
    reset_broker(url)
    veredito = str(clean_venv / "bin" / "veredito")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VEREDITO_", "OPENAI_"))}
    env.update(VEREDITO_BROKER_URL=url, PYTHONPATH="")
    source = tmp_path / "in.jsonl"
    source.write_text((ROOT / "examples" / "triples.jsonl").read_text(encoding="utf-8"))
    expected = len([line for line in source.read_text().splitlines() if line.strip()])
    produced = subprocess.run(
        [veredito, "produce", str(source)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert produced.returncode == 0, produced.stderr
    worker = subprocess.Popen(
        [veredito, "worker", "--concurrency", "4", "--metrics-port", "0"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out = tmp_path / "verdicts.jsonl"
        results = subprocess.run(
            [
                veredito,
                "results",
                "--out",
                str(out),
                "--limit",
                str(expected),
                "--idle-timeout",
                "60",
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert results.returncode == 0, results.stderr
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            _, stderr = worker.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            worker.kill()
            _, stderr = worker.communicate()
    assert worker.returncode == 0, stderr[-3000:]
    assert len(out.read_text(encoding="utf-8").splitlines()) == expected
    assert "Traceback" not in stderr
    reset_broker(url)


@pytest.mark.broker
def test_a_plain_install_serves_http(bare_venv: Path, tmp_path: Path) -> None:
    """serve (and its OTLP/JSON route) runs on the base install; only OTLP protobuf needs [otel]."""
    import json
    import socket
    import urllib.request

    from tests.test_broker_e2e import BROKERS

    url, port = BROKERS["rabbitmq"]
    require_service(port, "RabbitMQ")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        http_port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VEREDITO_", "OPENAI_"))}
    env.update(
        VEREDITO_BROKER_URL=url, VEREDITO_INGEST_TOKENS="install-token-3e9b1c7a", PYTHONPATH=""
    )
    serve = subprocess.Popen(
        [str(bare_venv / "bin" / "veredito"), "serve", "--port", str(http_port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert serve.stdout is not None and "listening" in serve.stdout.readline()
        base = f"http://127.0.0.1:{http_port}"
        assert urllib.request.urlopen(base + "/healthz", timeout=10).status == 200
        request = urllib.request.Request(
            base + "/v1/traces",
            data=json.dumps({"resourceSpans": []}).encode(),
            headers={
                "Authorization": "Bearer install-token-3e9b1c7a",
                "Content-Type": "application/json",
            },
        )
        assert urllib.request.urlopen(request, timeout=10).status == 200
    finally:
        serve.send_signal(signal.SIGTERM)
        _, stderr = serve.communicate(timeout=60)
    assert serve.returncode == 0, stderr[-3000:]


def test_a_plain_install_runs_the_library_run_and_the_review_api(
    bare_venv: Path, tmp_path: Path
) -> None:
    """The base install (no extras): the library, `veredito run --to sqlite`, and `serve --store`
    answering the verdicts API (the page says it needs the [serve] extra)."""
    import json
    import socket
    import urllib.error
    import urllib.request

    python = str(bare_venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VEREDITO_", "OPENAI_"))}
    env["PYTHONPATH"] = ""
    script = (
        "import veredito\n"
        "r = veredito.evaluate([('Qual o prazo?', ['O prazo é de 7 dias.'], 'São 30 dias.')],"
        " judge='rules')\n"
        "assert r[0].categories == {'PRAZO_VALOR': 1}, r[0]\n"
        "from veredito.testing import assert_grounded\n"
        "assert_grounded('Qual o prazo?', ['O prazo é de 7 dias.'], 'São 7 dias.')\n"
        "print('library ok')\n"
    )
    done = subprocess.run([python, "-c", script], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0 and "library ok" in done.stdout, done.stderr[-2000:]

    db = tmp_path / "v.db"
    veredito = str(bare_venv / "bin" / "veredito")
    no_redis = subprocess.run([python, "-c", "import redis"], capture_output=True, timeout=60)
    assert no_redis.returncode != 0  # the base install does not bring it
    run = subprocess.run(
        [veredito, "run", str(ROOT / "examples" / "triples.jsonl"), "--to", f"sqlite:///{db}",
         "--no-progress"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    serve = subprocess.Popen(
        [veredito, "serve", "--port", str(port), "--store", f"sqlite:///{db}"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert serve.stdout is not None and "listening" in serve.stdout.readline()
        base = f"http://127.0.0.1:{port}"
        with urllib.request.urlopen(base + "/v1/stats", timeout=10) as r:
            assert json.loads(r.read())["answers"] == 26
        with pytest.raises(urllib.error.HTTPError) as page:
            urllib.request.urlopen(base + "/", timeout=10)
        assert page.value.code == 501 and b"veredito[serve]" in page.value.read()
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.communicate(timeout=30)


def test_every_command_of_the_readme_starts_in_a_plain_install(
    bare_venv: Path, tmp_path: Path
) -> None:
    """Each subcommand answers --help, and calibrate runs on a labelled set, from the wheel."""
    import json

    veredito = str(bare_venv / "bin" / "veredito")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VEREDITO_", "OPENAI_"))}
    env["PYTHONPATH"] = ""
    for command in ("run", "produce", "worker", "results", "serve", "replay", "calibrate"):
        done = subprocess.run([veredito, command, "--help"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=60)  # fmt: skip
        assert done.returncode == 0 and "usage: veredito" in done.stdout, (command, done.stderr)
    calibrate = subprocess.run(
        [veredito, "calibrate", str(ROOT / "tests" / "data" / "devset.jsonl"), "--judge", "rules",
         "--json"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert calibrate.returncode == 0, calibrate.stderr[-2000:]
    assert json.loads(calibrate.stdout)["answer_level"]["f1"] == 1.0  # the dev set
