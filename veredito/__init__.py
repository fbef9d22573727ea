"""veredito: a hallucination judge for the answers of Brazilian-Portuguese RAG systems.

The installed distribution has one top-level package, ``veredito``. The repository keeps the
folders of the design card at its top level and the build maps them under this package:

- :mod:`veredito.producer`: the way in (the triple contract, readers, the task publisher);
- :mod:`veredito.worker`: judging (pipeline, judges, Celery app, command line);
- :mod:`veredito.prompts`: the two judge prompts, byte for byte.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

__all__ = ["__version__"]

try:
    __version__ = version("veredito")  # one place for it: pyproject.toml
except PackageNotFoundError:  # a checkout that was never installed
    __version__ = "0+unknown"
