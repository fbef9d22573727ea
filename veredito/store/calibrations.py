"""Calibrations in the SQL stores (issue 30): every calibration ``serve --store`` fitted from the
reviewers' labels (adopted or not) with the held-out figures that decided, and which version is
current. :class:`CalibrationQueries` is a part of :class:`~veredito.store.sql.SQLStore`, which
gives it its connections and its dialect.

Schema 8: ``calibrations`` (``version``, ``created_at``, ``name``, ``body`` — the calibration
file's JSON —, ``adopted``, ``figures`` JSON, ``labels_upto`` — the newest label id the fit read)
and ``calibration_current``, append-only: its newest row names the current version (an adoption,
or a rollback), so who changed it when stays on record.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Any

from veredito.store.base import timestamp

__all__ = ["CalibrationQueries", "UnknownVersion"]

_PG_LOCK = 7_465_102_302  # pg_advisory_xact_lock key: one writer of calibrations at a time


class UnknownVersion(LookupError):
    """No stored calibration has this version."""

    def __init__(self, version: int) -> None:
        super().__init__(version)
        self.version = version


class CalibrationQueries:
    """The calibration queries of :class:`~veredito.store.sql.SQLStore`."""

    dialect = ""

    def _using(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def sql(self, text: str) -> str:
        raise NotImplementedError

    def _tx(self, conn: Any) -> Any:
        raise NotImplementedError

    def _time_param(self) -> str:
        raise NotImplementedError

    @staticmethod
    def _time(value: Any) -> str:
        raise NotImplementedError

    def _lock_calibrations(self, conn: Any) -> None:
        if self.dialect == "postgresql":  # SQLite's BEGIN IMMEDIATE already writes one at a time
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_PG_LOCK,))

    def newest_label_id(self) -> int:
        """The id of the newest label row (0 with none)."""
        with self._using() as conn:
            return int(conn.execute("SELECT COALESCE(MAX(id), 0) FROM labels").fetchone()[0])

    def labelled_since(self, label_id: int) -> int:
        """How many answers got a label past the label row ``label_id``."""
        with self._using() as conn:
            found = conn.execute(
                self.sql(
                    "SELECT COUNT(*) FROM (SELECT DISTINCT app, verdict_id FROM labels "
                    "WHERE id > %s) t"
                ),
                (label_id,),
            ).fetchone()
        return int(found[0])

    def last_fit_labels(self) -> int:
        """The newest label id the latest fit read (adopted or not; 0 before any fit)."""
        with self._using() as conn:
            found = conn.execute(
                "SELECT labels_upto FROM calibrations ORDER BY version DESC LIMIT 1"
            ).fetchone()
        return 0 if found is None else int(found[0])

    def add_calibration(
        self,
        name: str,
        body: dict[str, Any],
        figures: dict[str, Any],
        *,
        adopted: bool,
        labels_upto: int,
        expect_version: int | None = None,
    ) -> int | None:
        """Store a candidate as the next version (current too when ``adopted``): its version.
        With ``expect_version``, None when the next version is another (a fit of another serve
        replica was stored meanwhile: the first one stored wins, the other is dropped)."""
        now = timestamp(datetime.now(UTC))
        with self._using() as conn, self._tx(conn):
            self._lock_calibrations(conn)
            newest = conn.execute("SELECT COALESCE(MAX(version), 0) FROM calibrations").fetchone()
            version = int(newest[0]) + 1
            if expect_version is not None and version != expect_version:
                return None
            conn.execute(
                self.sql(
                    "INSERT INTO calibrations (version, created_at, name, body, adopted, figures, "
                    f"labels_upto) VALUES (%s, {self._time_param()}, %s, %s, %s, %s, %s)"
                ),
                (version, now, name, json.dumps(body, ensure_ascii=False), adopted,
                 json.dumps(figures, ensure_ascii=False), labels_upto),
            )  # fmt: skip
            if adopted:
                self._set_current(conn, version, "adopted", now)
        return version

    def _set_current(self, conn: Any, version: int, reason: str, now: str) -> None:
        conn.execute(
            self.sql(
                "INSERT INTO calibration_current (version, set_at, reason) "
                f"VALUES (%s, {self._time_param()}, %s)"
            ),
            (version, now, reason),
        )

    def set_current_calibration(self, version: int, reason: str = "rollback") -> None:
        """Make a stored version current (``veredito calibrate --rollback``);
        :class:`UnknownVersion` when none has it."""
        now = timestamp(datetime.now(UTC))
        with self._using() as conn, self._tx(conn):
            self._lock_calibrations(conn)
            found = conn.execute(
                self.sql("SELECT 1 FROM calibrations WHERE version = %s"), (version,)
            ).fetchone()
            if found is None:
                raise UnknownVersion(version)
            self._set_current(conn, version, reason, now)

    def current_calibration_version(self) -> int | None:
        """The current version: the newest adoption or rollback; None before any."""
        with self._using() as conn:
            found = conn.execute(
                "SELECT version FROM calibration_current ORDER BY id DESC LIMIT 1"
            ).fetchone()
        return None if found is None else int(found[0])

    def _row(self, row: Any, *, body: bool) -> dict[str, Any]:
        version, created, name, adopted, figures, upto, *rest = row
        out: dict[str, Any] = {
            "version": int(version),
            "created_at": self._time(created),
            "name": str(name),
            "adopted": bool(adopted),
            "figures": json.loads(figures) if isinstance(figures, str) else figures,
            "labels_upto": int(upto),
        }
        if body:
            out["body"] = json.loads(rest[0]) if isinstance(rest[0], str) else rest[0]
        return out

    def calibration(self, version: int | None = None) -> dict[str, Any] | None:
        """A stored calibration (the current one when ``version`` is None) with its ``body``;
        None when there is none."""
        if version is None:
            version = self.current_calibration_version()
            if version is None:
                return None
        with self._using() as conn:
            found = conn.execute(
                self.sql(
                    "SELECT version, created_at, name, adopted, figures, labels_upto, body "
                    "FROM calibrations WHERE version = %s"
                ),
                (version,),
            ).fetchone()
        return None if found is None else self._row(found, body=True)

    def calibrations(self, limit: int = 1000) -> list[dict[str, Any]]:
        """Every stored calibration, newest first, without bodies; ``current`` marks the one
        in use."""
        current = self.current_calibration_version()
        with self._using() as conn:
            found = conn.execute(
                self.sql(
                    "SELECT version, created_at, name, adopted, figures, labels_upto "
                    "FROM calibrations ORDER BY version DESC LIMIT %s"
                ),
                (limit,),
            ).fetchall()
        return [{**self._row(row, body=False), "current": int(row[0]) == current}
                for row in found]  # fmt: skip
