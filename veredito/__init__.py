"""veredito: a hallucination judge for the answers of Brazilian-Portuguese RAG systems.

The installed distribution has one top-level package, ``veredito``. The repository keeps the
folders of the design card at its top level and the build maps them under this package:

- :mod:`veredito.producer`: the way in (the triple contract, readers, the task publisher);
- :mod:`veredito.worker`: judging (pipeline, judges, Celery app, command line);
- :mod:`veredito.prompts`: the two judge prompts, byte for byte.

The library API (``docs/library.md``)::

    import veredito
    report = veredito.evaluate([{"query": q, "context": chunks, "answer": a}], judge="rules")
    report.hallucinated, report.to_pandas(), report.to_jsonl("verdicts.jsonl")
    veredito.compare(base_report, head_report)  # did the new release make it worse?

``veredito.testing.assert_grounded`` and the pytest fixture ``veredito_judge`` check a RAG app's
answers in its own test suite. The names load on first use, so ``import veredito`` stays cheap
for the command line and the worker.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from veredito.api import Judge, Report, aevaluate, evaluate
    from veredito.comparison import compare
    from veredito.worker.verdict import Verdict

__all__ = ["Judge", "Report", "Verdict", "__version__", "aevaluate", "compare", "evaluate"]

_LAZY = {
    "Judge": "veredito.api",
    "Report": "veredito.api",
    "aevaluate": "veredito.api",
    "evaluate": "veredito.api",
    "compare": "veredito.comparison",
    "Verdict": "veredito.worker.verdict",
}


def __getattr__(name: str) -> Any:
    """The API's names, imported when first asked for (PEP 562)."""
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'veredito' has no attribute {name!r}")


try:
    __version__ = version("veredito")  # one place for it: pyproject.toml
except PackageNotFoundError:  # a checkout that was never installed
    __version__ = "0+unknown"
