"""The SQL stores: SQLite (one machine) and PostgreSQL (production), one schema, one set of queries.

Writes: a batch is one transaction.  Verdicts whose id is already stored are left alone (their
claims too), so redeliveries and concurrent sinks writing the same ids store each verdict once.
A lost connection raises :class:`StoreUnavailable`; the next call reconnects.

Schema: numbered SQL files in ``migrations/<dialect>/`` applied in order at open, each recorded in
``schema_version``, all in one transaction under a lock (PostgreSQL's advisory lock, SQLite's
``BEGIN IMMEDIATE``), so several sinks starting at once migrate once.  A database whose schema is
newer than this code is refused rather than written to.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
import select
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any

from veredito.store.base import (
    ClaimRow,
    Filters,
    Page,
    StoreError,
    StoreUnavailable,
    VerdictRow,
    marks,
    parse_when,
    rows_of,
    sample_key,
    timestamp,
)
from veredito.store.calibrations import CalibrationQueries
from veredito.store.labelling import LabelQueries
from veredito.store.releases import ReleaseQueries

__all__ = [
    "SCHEMA_VERSION",
    "AmbiguousId",
    "SQLStore",
    "migrations",
    "open_sql_store",
]

log = logging.getLogger(__name__)

# a thread's connection idle longer than this (seconds) proves it works before it is used
IDLE_CHECK = 30.0


def psycopg_errors() -> type[BaseException]:
    import psycopg

    return psycopg.Error


_FILE = re.compile(r"^(\d{4})_(\w+)\.sql$")
_VERDICT_COLUMNS = (
    "id, app, status, hallucinated, score, faithfulness_score, judge_kind, judge_model, "
    "evaluated_at, categories, body, sample_key, hallucination_confidence, release"
)
_CLAIM_COLUMNS = (
    "verdict_id, position, text, verdict, category, chunk_idx, source, app, confidence, release"
)
_PG_LOCK = 7_465_102_301  # pg_advisory_xact_lock key for migrations


def migrations(dialect: str) -> list[tuple[int, str, str]]:
    """(version, name, SQL) of every migration file of ``dialect``, in order."""
    folder = resources.files("veredito.store").joinpath("migrations", dialect)
    found = []
    for entry in folder.iterdir():
        match = _FILE.match(entry.name)
        if match:
            found.append((int(match.group(1)), match.group(2), entry.read_text("utf-8")))
    return sorted(found)


SCHEMA_VERSION = max(v for v, _, _ in migrations("sqlite"))


def _statements(sql: str) -> list[str]:
    return [s.strip() for s in re.split(r";\s*(?:\n|$)", sql) if s.strip()]


def _encode_cursor(evaluated_at: str, verdict_id: str, app: str) -> str:
    raw = json.dumps([evaluated_at, verdict_id, app], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[str, str, str]:
    """The (evaluated_at, id, app) a cursor stands for; ValueError for one this store never
    gave (a cursor of schema 2, without the app, is read as app '')."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        value = json.loads(raw)
    except (ValueError, binascii.Error):
        raise ValueError("cursor: not a cursor this server gave") from None
    if not (
        isinstance(value, list)
        and len(value) in (2, 3)
        and all(isinstance(v, str) and "\x00" not in v for v in value)
    ):
        raise ValueError("cursor: not a cursor this server gave")
    try:
        parse_when(value[0])
    except (ValueError, OverflowError):
        raise ValueError("cursor: not a cursor this server gave") from None
    return value[0], value[1], value[2] if len(value) == 3 else ""


class AmbiguousId(LookupError):
    """Several apps have a verdict with this id: the caller must name the app."""

    def __init__(self, verdict_id: str, apps: list[str]) -> None:
        super().__init__(verdict_id, apps)
        self.apps = apps


class SQLStore(LabelQueries, ReleaseQueries, CalibrationQueries):
    """Shared by both dialects; subclasses say how to connect and how to insert a batch."""

    dialect = ""
    placeholder = "%s"

    def __init__(self, url: str, *, migrate_to: int | None = None) -> None:
        self.url = url
        self.invalid = 0  # bodies that were not verdicts (no string id): logged, not stored
        self.careful_batches = 0  # PostgreSQL: batches that met another sink's rows mid-write
        self.refused = 0  # verdicts the database would not take (logged with their id)
        self._local = threading.local()
        self._all: list[Any] = []
        self._lock = threading.Lock()
        self.migrate(migrate_to)

    # -- connections -------------------------------------------------------------------------
    def connect(self) -> Any:
        raise NotImplementedError

    def unavailable_errors(self) -> tuple[type[BaseException], ...]:
        raise NotImplementedError

    def data_errors(self) -> tuple[type[BaseException], ...]:
        """Errors about a row's content, not about the database being there."""
        raise NotImplementedError

    def _conn(self) -> Any:
        conn = getattr(self._local, "conn", None)
        now = time.monotonic()
        if conn is not None and (
            self.spoke(conn) or now - getattr(self._local, "used", now) > IDLE_CHECK
        ):
            # the server said something while the connection was idle (it ends a backend with
            # an error before closing it), or it has been idle a while (the server may have
            # restarted since): one round trip proves it, or a new one is made, instead of a
            # 503 for the first request each thread serves after an outage
            try:
                self.probe(conn)
            except self.unavailable_errors() as exc:
                log.warning(
                    "the %s connection was lost while idle (%s: the server restarted or ended "
                    "it); a new one is made",
                    self.dialect,
                    type(exc).__name__,
                )
                self._drop()
                conn = None
        if conn is None:
            conn = self.connect()
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        self._local.used = now
        return conn

    def probe(self, conn: Any) -> None:
        """Raise one of :meth:`unavailable_errors` when ``conn`` no longer works (nothing for a
        file database)."""

    def spoke(self, conn: Any) -> bool:
        """Has the server sent something on idle ``conn`` (no system call for a file database)?"""
        return False

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            with self._lock:
                if conn in self._all:
                    self._all.remove(conn)
            try:
                conn.close()
            except Exception:  # a broken connection may fail to close; it is gone either way
                log.debug("closing a broken %s connection failed", self.dialect)

    @contextmanager
    def _using(self) -> Iterator[Any]:
        """This thread's connection; a lost one is dropped and reported as StoreUnavailable."""
        try:
            yield self._conn()
        except self.unavailable_errors() as exc:
            self._drop()
            raise StoreUnavailable(f"{self.dialect}: {type(exc).__name__}: {exc}") from exc

    def close(self) -> None:
        with self._lock:
            conns, self._all = self._all, []
        for conn in conns:
            try:
                conn.close()
            except Exception:
                log.debug("closing a %s connection failed", self.dialect)
        self._local = threading.local()

    def sql(self, text: str) -> str:
        return text if self.placeholder == "%s" else text.replace("%s", self.placeholder)

    # -- schema --------------------------------------------------------------------------------
    def schema_version(self) -> int:
        with self._using() as conn:
            cur = conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_version")
            return int(cur.fetchone()[0])

    def migrate(self, target: int | None = None) -> None:
        raise NotImplementedError

    def _apply(self, conn: Any, current: int, target: int | None) -> None:
        known = migrations(self.dialect)
        newest = known[-1][0]
        if current > newest:
            raise StoreError(
                f"the database's schema is version {current}, newer than this veredito "
                f"knows ({newest}): upgrade veredito before writing to it"
            )
        for version, name, text in known:
            if version <= current or (target is not None and version > target):
                continue
            for statement in _statements(text):
                conn.execute(statement)
            if version == 4:
                self._fill_sample_keys(conn)
            conn.execute(
                self.sql("INSERT INTO schema_version (version, name) VALUES (%s, %s)"),
                (version, name),
            )
            log.info("store schema migrated to version %d (%s)", version, name)

    def _fill_sample_keys(self, conn: Any) -> None:
        """Schema 4: the uniform slice's key of every verdict already stored."""
        rows = conn.execute("SELECT app, id FROM verdicts WHERE sample_key IS NULL").fetchall()
        update = self.sql("UPDATE verdicts SET sample_key = %s WHERE app = %s AND id = %s")
        for start in range(0, len(rows), 5000):
            part = rows[start : start + 5000]
            params = [(sample_key(app, verdict_id), app, verdict_id) for app, verdict_id in part]
            if self.dialect == "sqlite":
                conn.executemany(update, params)
            else:
                with conn.cursor() as cur:
                    cur.executemany(update, params)
        if rows:
            log.info("uniform-slice keys given to %d stored verdicts", len(rows))

    # -- writes ---------------------------------------------------------------------------------
    def write(self, verdicts: Sequence[bytes]) -> tuple[int, int]:
        batch: dict[tuple[str, str], tuple[VerdictRow, list[ClaimRow]]] = {}
        duplicates = 0
        for body in verdicts:
            rows = rows_of(body)
            if rows is None:
                self.invalid += 1
                log.warning("a message on the verdicts queue is not a verdict; not stored")
                continue
            key = (rows[0][1], rows[0][0])  # (app, id): one app's id is not another's
            if key in batch:
                duplicates += 1
                continue
            batch[key] = rows
        if not batch:
            return 0, duplicates
        refused_before = self.refused
        # in key order: concurrent sinks writing the same ids take their locks in one order and
        # cannot deadlock
        ordered = [batch[key] for key in sorted(batch)]
        try:
            with self._using() as conn:
                written = self._insert(conn, ordered)
        except self.data_errors() as exc:
            # One verdict the database refuses must not hold the others back (nor loop the
            # sink forever): write them one by one, and report the ones refused.
            log.warning(
                "a batch was refused (%s); writing it verdict by verdict", type(exc).__name__
            )
            written = 0
            for item in ordered:
                try:
                    with self._using() as conn:
                        written += self._insert(conn, [item])
                except self.data_errors() as one:
                    self.refused += 1
                    log.error(
                        "verdict %s cannot be stored (%s); acked without storing it",
                        item[0][0],
                        type(one).__name__,
                    )
        return written, duplicates + len(batch) - written - (self.refused - refused_before)

    def _insert(self, conn: Any, batch: list[tuple[VerdictRow, list[ClaimRow]]]) -> int:
        raise NotImplementedError

    # -- reads ----------------------------------------------------------------------------------
    def _where(self, filters: Filters) -> tuple[list[str], list[Any]]:
        where: list[str] = []
        params: list[Any] = []
        if filters.app is not None:
            where.append("v.app = %s")
            params.append(filters.app)
        if filters.status is not None:
            where.append("v.status = %s")
            params.append(filters.status)
        if filters.hallucinated is not None:
            where.append("v.hallucinated = %s")
            params.append(filters.hallucinated)
        if filters.category is not None:
            where.append(
                "EXISTS (SELECT 1 FROM claims c WHERE c.app = v.app AND c.verdict_id = v.id "
                "AND c.verdict <> 'grounded' AND COALESCE(c.category, 'GENERICA') = %s)"
            )
            params.append(filters.category)
        if filters.verdict is not None:
            where.append(
                "EXISTS (SELECT 1 FROM claims c WHERE c.app = v.app AND c.verdict_id = v.id "
                "AND c.verdict = %s)"
            )
            params.append(filters.verdict)
        if filters.since is not None:
            where.append(f"v.evaluated_at >= {self._time_param()}")
            params.append(filters.since)
        if filters.until is not None:
            where.append(f"v.evaluated_at < {self._time_param()}")
            params.append(filters.until)
        if filters.min_confidence is not None:
            where.append("v.hallucination_confidence >= %s")
            params.append(filters.min_confidence)
        if filters.release is not None:
            where.append("v.release = %s")
            params.append(filters.release)
        return where, params

    def _time_param(self) -> str:
        return "%s"

    @staticmethod
    def _body(value: Any) -> dict[str, Any]:
        loaded = json.loads(value) if isinstance(value, str | bytes) else value
        return loaded if isinstance(loaded, dict) else {}

    @staticmethod
    def _time(value: Any) -> str:
        return timestamp(value) if isinstance(value, datetime) else str(value)

    def list_verdicts(
        self, filters: Filters, *, cursor: str | None = None, limit: int = 50
    ) -> Page:
        """Newest first, ``limit`` at a time; ``next_cursor`` continues after the last one."""
        where, params = self._where(filters)
        if cursor is not None:
            at, verdict_id, app = decode_cursor(cursor)
            where.append(f"(v.evaluated_at, v.id, v.app) < ({self._time_param()}, %s, %s)")
            params += [at, verdict_id, app]
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        query = (
            f"SELECT v.evaluated_at, v.id, v.app, v.body FROM verdicts v {clause} "
            "ORDER BY v.evaluated_at DESC, v.id DESC, v.app DESC LIMIT %s"
        )
        with self._using() as conn:
            rows = conn.execute(self.sql(query), (*params, limit + 1)).fetchall()
        page = Page([self._body(body) for _, _, _, body in rows[:limit]])
        if len(rows) > limit:
            at, verdict_id, app, _ = rows[limit - 1]
            page.next_cursor = _encode_cursor(self._time(at), verdict_id, app)
        return page

    def get(self, verdict_id: str, app: str | None = None) -> dict[str, Any] | None:
        """The verdict of ``app`` with this id (``""``: the verdicts that name no app). With
        ``app`` None, the one verdict of this id whatever its app; :class:`AmbiguousId` when
        several apps have one."""
        with self._using() as conn:
            if app is not None:
                row = conn.execute(
                    self.sql("SELECT body FROM verdicts WHERE app = %s AND id = %s"),
                    (app, verdict_id),
                ).fetchone()
                return None if row is None else self._body(row[0])
            rows = conn.execute(
                self.sql("SELECT app, body FROM verdicts WHERE id = %s ORDER BY app LIMIT 10"),
                (verdict_id,),
            ).fetchall()
        if len(rows) > 1:
            raise AmbiguousId(verdict_id, [str(r[0]) for r in rows])
        return None if not rows else self._body(rows[0][1])

    def stats(self, filters: Filters) -> dict[str, Any]:
        """Answers, hallucinated answers, and counts by status, category and claim verdict."""
        where, params = self._where(filters)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        joined = f"AND {' AND '.join(where)}" if where else ""
        with self._using() as conn:
            total, hallucinated = conn.execute(
                self.sql(
                    "SELECT COUNT(*), COALESCE(SUM(CASE WHEN v.hallucinated THEN 1 ELSE 0 END), 0) "
                    f"FROM verdicts v {clause}"
                ),
                params,
            ).fetchone()
            by_status = conn.execute(
                self.sql(f"SELECT v.status, COUNT(*) FROM verdicts v {clause} GROUP BY v.status"),
                params,
            ).fetchall()
            by_category = conn.execute(
                self.sql(
                    "SELECT COALESCE(c.category, 'GENERICA'), COUNT(*), COUNT(DISTINCT v.id) "
                    "FROM claims c JOIN verdicts v ON v.app = c.app AND v.id = c.verdict_id "
                    f"WHERE c.verdict <> 'grounded' {joined} GROUP BY 1"
                ),
                params,
            ).fetchall()
            by_verdict = conn.execute(
                self.sql(
                    "SELECT c.verdict, COUNT(*) FROM claims c JOIN verdicts v "
                    f"ON v.app = c.app AND v.id = c.verdict_id {clause} GROUP BY c.verdict"
                ),
                params,
            ).fetchall()
        return {
            "answers": int(total),
            "hallucinated": int(hallucinated),
            "by_status": {str(k): int(n) for k, n in sorted(by_status)},
            "by_category": {
                str(k): {"claims": int(n), "answers": int(a)} for k, n, a in sorted(by_category)
            },
            "by_verdict": {str(k): int(n) for k, n in sorted(by_verdict)},
        }


class SQLiteStore(SQLStore):
    dialect = "sqlite"
    placeholder = "?"

    def __init__(self, url: str, *, migrate_to: int | None = None) -> None:
        path = url.removeprefix("sqlite:")
        if not path.startswith("///") or len(path) <= 3:
            raise StoreError(
                f"{url!r}: write sqlite:///relative/path.db or sqlite:////absolute/path.db"
            )
        self.path = Path(path[3:])
        self.path.parent.mkdir(parents=True, exist_ok=True)
        super().__init__(url, migrate_to=migrate_to)

    def connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path, timeout=30.0, isolation_level=None, check_same_thread=False
        )
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")  # a commit is on disk before the sink acks
        conn.execute("PRAGMA foreign_keys=ON")
        return conn

    def unavailable_errors(self) -> tuple[type[BaseException], ...]:
        return (sqlite3.OperationalError,)  # locked past the timeout, disk full, I/O error

    def _tx(self, conn: Any) -> Any:
        return self._transaction(conn)

    def data_errors(self) -> tuple[type[BaseException], ...]:
        return (sqlite3.IntegrityError, sqlite3.DataError)

    @contextmanager
    def _transaction(self, conn: sqlite3.Connection) -> Iterator[None]:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                log.debug("rollback failed after an error")
            raise
        conn.execute("COMMIT")

    def migrate(self, target: int | None = None) -> None:
        with self._using() as conn, self._transaction(conn):
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, "
                "name TEXT NOT NULL, applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)"
            )
            current = conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_version")
            self._apply(conn, int(current.fetchone()[0]), target)

    def _insert(self, conn: Any, batch: list[tuple[VerdictRow, list[ClaimRow]]]) -> int:
        with self._transaction(conn):
            ids = sorted({row[0] for row, _ in batch})
            existing: set[tuple[str, str]] = set()
            for start in range(0, len(ids), 500):
                part = ids[start : start + 500]
                asked = ",".join("?" * len(part))
                found = conn.execute(f"SELECT app, id FROM verdicts WHERE id IN ({asked})", part)
                existing.update((r[0], r[1]) for r in found)
            new = [(row, claims) for row, claims in batch if (row[1], row[0]) not in existing]
            conn.executemany(
                self.sql(f"INSERT INTO verdicts ({_VERDICT_COLUMNS}) VALUES ({marks(14)})"),
                [row for row, _ in new],
            )
            conn.executemany(
                self.sql(f"INSERT INTO claims ({_CLAIM_COLUMNS}) VALUES ({marks(10)})"),
                [claim for _, claims in new for claim in claims],
            )
        return len(new)


class PostgresStore(SQLStore):
    dialect = "postgresql"

    def connect(self) -> Any:
        try:
            import psycopg
        except ImportError:  # pragma: no cover - depends on the install
            raise StoreError(
                "postgresql:// needs psycopg: pip install 'veredito[postgres]'"
            ) from None
        return psycopg.connect(self.url, autocommit=True, connect_timeout=10)

    def probe(self, conn: Any) -> None:
        conn.execute("SELECT 1")  # autocommit: no transaction is left open

    def spoke(self, conn: Any) -> bool:
        # an idle connection that LISTENs to nothing has nothing to read unless the server ended
        # it ("terminating connection due to administrator command") or closed the socket
        try:
            readable, _, _ = select.select([conn.pgconn.socket], [], [], 0)
        except (OSError, ValueError, AttributeError, psycopg_errors()):
            return True
        return bool(readable)

    def unavailable_errors(self) -> tuple[type[BaseException], ...]:
        import psycopg

        return (psycopg.OperationalError, psycopg.InterfaceError)

    def data_errors(self) -> tuple[type[BaseException], ...]:
        import psycopg

        return (psycopg.DataError, psycopg.IntegrityError)

    def _time_param(self) -> str:
        return "%s::timestamptz"

    def _tx(self, conn: Any) -> Any:
        return conn.transaction()

    def migrate(self, target: int | None = None) -> None:
        with self._using() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_PG_LOCK,))
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, "
                "name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
            )
            current = conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_version")
            self._apply(conn, int(current.fetchone()[0]), target)

    def _insert(self, conn: Any, batch: list[tuple[VerdictRow, list[ClaimRow]]]) -> int:
        """The ids not stored yet are COPYed straight into ``verdicts`` and their claims into
        ``claims``. If another sink stored one of them meanwhile (a unique violation), the batch
        goes the careful way instead: COPY into a temporary table, then one ``INSERT … ON
        CONFLICT DO NOTHING RETURNING id``, and the claims of the ids that were new."""
        import psycopg

        with conn.transaction(), conn.cursor() as cur:
            cur.execute(
                "SELECT app, id FROM verdicts WHERE id = ANY(%s)", ([r[0] for r, _ in batch],)
            )
            stored = {(r[0], r[1]) for r in cur.fetchall()}
            new = [(row, claims) for row, claims in batch if (row[1], row[0]) not in stored]
            if not new:
                return 0
            try:
                with conn.transaction():  # a savepoint: a violation undoes only this
                    with cur.copy(f"COPY verdicts ({_VERDICT_COLUMNS}) FROM STDIN") as copy:
                        for row, _ in new:
                            copy.write_row(row)
                    self._copy_claims(cur, new)
                return len(new)
            except psycopg.errors.UniqueViolation:
                self.careful_batches += 1
                log.debug("another sink wrote some of these ids; taking the careful path")
            cur.execute(
                "CREATE TEMP TABLE IF NOT EXISTS verdicts_in "
                "(LIKE verdicts INCLUDING DEFAULTS) ON COMMIT DELETE ROWS"
            )
            with cur.copy(f"COPY verdicts_in ({_VERDICT_COLUMNS}) FROM STDIN") as copy:
                for row, _ in new:
                    copy.write_row(row)
            cur.execute(
                f"INSERT INTO verdicts ({_VERDICT_COLUMNS}) SELECT {_VERDICT_COLUMNS} "
                "FROM verdicts_in ORDER BY app, id ON CONFLICT (app, id) DO NOTHING "
                "RETURNING app, id"
            )
            written = {(r[0], r[1]) for r in cur.fetchall()}
            self._copy_claims(
                cur, [(row, claims) for row, claims in new if (row[1], row[0]) in written]
            )
            return len(written)

    @staticmethod
    def _copy_claims(cur: Any, batch: list[tuple[VerdictRow, list[ClaimRow]]]) -> None:
        with cur.copy(f"COPY claims ({_CLAIM_COLUMNS}) FROM STDIN") as copy:
            for _, claims in batch:
                for claim in claims:
                    copy.write_row(claim)


def open_sql_store(url: str, *, migrate_to: int | None = None) -> SQLStore:
    if url.startswith("sqlite:"):
        return SQLiteStore(url, migrate_to=migrate_to)
    if url.startswith("postgres:"):
        url = "postgresql:" + url.removeprefix("postgres:")
    return PostgresStore(url, migrate_to=migrate_to)
