"""CPU-heavy work of ``serve`` in worker processes, so that no request holds up the others.

Parsing an 8 MiB JSON body, decoding an OTLP export or rendering the page of a 256 KiB answer is
C or Python work of tens to hundreds of milliseconds. In a thread of the server's own process it
still takes the interpreter's lock (C parsers hold it throughout), and ``/healthz`` and every
other tenant's request wait behind it. So large pieces of work go to a small pool of processes
(``spawn``: nothing of the server's threads or sockets is inherited), and the server's process
only hands bytes over and back. Small ones stay in-process, where handing over would cost more
than the work.

Functions sent here are module-level and their arguments and results plain data; errors come
back as the same exception types (they pickle).
"""

from __future__ import annotations

import asyncio
import importlib
import multiprocessing
import os
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any, TypeVar

from aiohttp import web

__all__ = ["HEAVY", "HEAVY_BYTES", "HeavyPool"]

T = TypeVar("T")

HEAVY_BYTES = 256 * 1024  # a body or an answer past this goes to the pool


def _warm(modules: tuple[str, ...]) -> None:
    """Import in the child what its tasks need, once, before the first request."""
    for module in modules:
        importlib.import_module(module)


class HeavyPool:
    """A lazily started pool of ``workers`` processes; :meth:`run` awaits one task. The
    processes import ``modules`` (those whose functions will be sent) as they start."""

    def __init__(self, workers: int | None = None, modules: Iterable[str] = ()) -> None:
        self.workers = workers or max(1, min(2, (os.cpu_count() or 2) - 1))
        self.modules = tuple(modules)
        self._pool: ProcessPoolExecutor | None = None

    def start(self) -> None:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                self.workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_warm,
                initargs=(self.modules,),
            )

    async def warm(self) -> None:
        """Start the processes now (they import veredito: about a second), not on the first
        large request."""
        self.start()
        assert self._pool is not None
        loop = asyncio.get_running_loop()
        await asyncio.gather(
            *(loop.run_in_executor(self._pool, _noop) for _ in range(self.workers))
        )

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        self.start()
        assert self._pool is not None
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        """The same from a thread (a background job that waits on it there, not on the loop)."""
        self.start()
        assert self._pool is not None
        return self._pool.submit(fn, *args)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


def _noop() -> None:
    return None


HEAVY: web.AppKey[HeavyPool] = web.AppKey("heavy")
