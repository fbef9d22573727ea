"""veredito's worker side: the evaluation pipeline, the judges, the Celery app and the CLI.

``celery -A veredito.worker worker`` finds the Celery app through :func:`__getattr__`, which
imports Celery only when asked: ``veredito run`` and the pipeline never import it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["app"]


def __getattr__(name: str) -> Any:
    if name in ("app", "celery"):
        from veredito.worker.celery_app import app

        return app
    raise AttributeError(f"module 'veredito.worker' has no attribute {name!r}")
