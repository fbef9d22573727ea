"""Logging set-up for the command line and the worker.

Records go to stderr.  Celery's per-task lines ("received", "succeeded") are lowered to DEBUG
visibility: at hundreds of evaluations a second they would drown everything else.  Nothing
logged by veredito at INFO or above contains a prompt, an answer, an ID number or a key.
"""

from __future__ import annotations

import logging
import sys

__all__ = ["configure_logging"]

_PER_TASK_LOGGERS = ("celery.app.trace", "celery.worker.strategy", "celery.worker.request")


def configure_logging(level: str | int = "INFO") -> None:
    if isinstance(level, str):
        level = logging.getLevelName(level.upper())
        if not isinstance(level, int):
            level = logging.INFO
    root = logging.getLogger()
    if not any(getattr(h, "_veredito", False) for h in root.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handler._veredito = True  # type: ignore[attr-defined]
        root.addHandler(handler)
    root.setLevel(level)
    quiet = logging.WARNING if level > logging.DEBUG else logging.DEBUG
    for name in _PER_TASK_LOGGERS:
        logging.getLogger(name).setLevel(quiet)
