"""What several commands share: opening the input and the verdict store, the dedup window."""

from __future__ import annotations

import logging
import sys
from typing import IO, TYPE_CHECKING

from veredito.store import StoreUnavailable
from veredito.worker.settings import Settings

if TYPE_CHECKING:
    from veredito.producer.sampling import Dedup
    from veredito.store import Store

log = logging.getLogger("veredito")


def dedup_window(settings: Settings) -> Dedup | None:
    from veredito.producer.sampling import Dedup

    if not settings.dedup_window:
        return None
    return Dedup(settings.dedup_window, settings.marks_url)


def input_stream(path: str) -> IO[str] | None:
    from veredito.producer.reader import open_input

    try:
        return open_input(path)
    except OSError as exc:
        print(f"veredito: cannot read {path}: {exc.strerror}", file=sys.stderr)
        return None


def verdict_store(url: str, patience: float | None = 60.0) -> Store | None:
    """The store ``url`` names, or None after saying on stderr why it cannot be opened. A
    database that does not answer (restarting, not up yet) is tried again with backoff for
    ``patience`` seconds (None: until it answers, or a signal stops the process)."""
    import time

    from veredito.store import StoreError, open_store

    deadline = None if patience is None else time.monotonic() + patience
    delay = 0.5
    while True:
        try:
            return open_store(url)
        except StoreError as exc:
            print(f"veredito: {exc}", file=sys.stderr)
            return None
        except StoreUnavailable as exc:
            if deadline is not None and time.monotonic() + delay > deadline:
                print(f"veredito: the store does not answer: {exc}", file=sys.stderr)
                return None
            log.warning("the store does not answer yet (%s); trying again in %.1f s", exc, delay)
            time.sleep(delay)
            delay = min(delay * 2, 10.0)
