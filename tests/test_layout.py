"""The packages' layering (docs/design.md's map): no module imports, even for type checking
only, a module that imports it back, and the model-calling side of the worker does not reach
into Celery's side or the judges."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"veredito.worker": ROOT / "worker", "veredito.producer": ROOT / "producer"}


def _module_of(path: Path, package: str, base: Path) -> str:
    parts = path.relative_to(base).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((package, *parts))


def _graph() -> dict[str, set[str]]:
    modules: dict[str, Path] = {}
    for package, base in PACKAGES.items():
        for path in base.rglob("*.py"):
            modules[_module_of(path, package, base)] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            deps.update(t for t in targets if t in modules and t != name)
        graph[name] = deps
    return graph


def _cycle(graph: dict[str, set[str]], within: str) -> list[str] | None:
    nodes = {n for n in graph if n.startswith(within)}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph[node] & nodes):
            if state.get(dep) == 1:
                return [*stack[stack.index(dep) :], dep]
            if dep not in state and (found := visit(dep)):
                return found
        state[node] = 2
        stack.pop()
        return None

    for node in sorted(nodes):
        if node not in state and (found := visit(node)):
            return found
    return None


@pytest.mark.parametrize("package", ["veredito.worker.rules.", "veredito.worker.llm."])
def test_no_import_circle(package: str) -> None:
    cycle = _cycle(_graph(), package)
    assert cycle is None, " → ".join(cycle or [])


def test_the_model_calling_side_stands_apart() -> None:
    """``worker/llm/`` (the client, rate limits, breaker, spend, privacy, parsing) imports
    neither Celery's side of the worker nor the judges, only the interface every judge
    implements (``judges.base``: the pseudonymising wrapper and the spend cap take a judge)."""
    graph = _graph()
    llm = {n for n in graph if n.startswith("veredito.worker.llm.")}
    assert llm, "worker/llm/ holds the modules that call the model"
    celery_side = {
        f"veredito.worker.{m}"
        for m in (
            "celery_app",
            "runtime",
            "poison",
            "redis_transport",
            "marks",
            "results",
            "publish",
        )
    }
    for module in llm:
        reached = {
            d
            for d in graph[module]
            if d in celery_side or (".judges" in d and d != "veredito.worker.judges.base")
        }
        assert not reached, f"{module} imports {sorted(reached)}"
