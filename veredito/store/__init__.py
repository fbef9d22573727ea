"""Verdict stores (spec §14): ``file:PATH.jsonl``, ``sqlite:///PATH.db``, ``postgresql://…``.

Every store takes verdicts in batches and is idempotent by id: a batch is committed (written,
flushed and fsynced for a file) before :meth:`Store.write` returns, and an id already stored
changes nothing, so the sink acks only after ``write`` and a redelivery costs nothing.

The SQL stores migrate their schema at open (numbered files under ``migrations/``, a
``schema_version`` table, one transaction under a lock) and also answer the verdicts API and the
review page (:meth:`SQLStore.list_verdicts`, :meth:`SQLStore.get`, :meth:`SQLStore.stats`).
"""

from __future__ import annotations

from veredito.store.base import (
    Filters,
    Page,
    Store,
    StoreError,
    StoreUnavailable,
    parse_when,
)
from veredito.store.files import FileStore
from veredito.store.sql import SQLStore, open_sql_store

__all__ = [
    "FileStore",
    "Filters",
    "Page",
    "SQLStore",
    "Store",
    "StoreError",
    "StoreUnavailable",
    "open_store",
    "parse_when",
]


def open_store(url: str) -> Store:
    """The store a ``--to``/``--store`` URL names; a bare path is a JSONL file."""
    if url.startswith(("sqlite:", "postgresql:", "postgres:")):
        return open_sql_store(url)
    if url.startswith("file:"):
        url = url.removeprefix("file:")
        if url.startswith("//"):
            url = url[2:]
    if "://" in url:
        raise StoreError(
            f"unknown store {url.split('://')[0]!r}: use file:PATH.jsonl, sqlite:///PATH.db "
            "or postgresql://USER@HOST/DB"
        )
    return FileStore(url)
