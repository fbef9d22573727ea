"""Releases in the SQL stores (spec §18): the releases an app's verdicts name, and one release's
figures for the comparison (:mod:`veredito.comparison`). :class:`ReleaseQueries` is a part of
:class:`~veredito.store.sql.SQLStore`, which gives it its connections and its dialect.

Both read the ``verdicts_app_release`` index (schema 7: app, release, status, evaluated_at, and
what a release's figures need), and the flagged claims by their own release (the partial index
``claims_release_flags``; through the verdicts only when a period is asked for), never the
verdicts' JSON: a comparison of two releases costs what the two releases hold, not what the store
holds.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from veredito.store.base import Filters, marks
from veredito.worker.verdict import CATEGORIES

__all__ = ["ReleaseQueries"]


class ReleaseQueries:
    """The release queries of :class:`~veredito.store.sql.SQLStore`."""

    def _using(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def sql(self, text: str) -> str:
        raise NotImplementedError

    def _where(self, filters: Filters) -> tuple[list[str], list[Any]]:
        raise NotImplementedError

    @staticmethod
    def _time(value: Any) -> str:
        raise NotImplementedError

    def apps(self, limit: int = 1000) -> list[str]:
        """The apps that have verdicts, in order, at most ``limit``: one index probe per app (a
        loose scan of ``verdicts_app_time``), not a pass over every verdict."""
        query = (
            "WITH RECURSIVE found (app) AS ("
            "SELECT MIN(app) FROM verdicts "
            "UNION ALL SELECT (SELECT MIN(v.app) FROM verdicts v WHERE v.app > found.app) "
            "FROM found WHERE found.app IS NOT NULL) "
            "SELECT app FROM found WHERE app IS NOT NULL LIMIT %s"
        )
        with self._using() as conn:
            return [str(row[0]) for row in conn.execute(self.sql(query), (limit,)).fetchall()]

    def releases(self, app: str, limit: int = 100) -> list[dict[str, Any]]:
        """The releases ``app``'s verdicts name, newest first (by when each was first seen):
        ``release``, ``first_seen``, ``last_seen``, ``answers`` (judged answers: status ok)
        and ``verdicts`` (every verdict, rejected and failed too); at most ``limit``."""
        query = (
            "SELECT release, MIN(evaluated_at), MAX(evaluated_at), "
            "SUM(CASE WHEN status = 'ok' THEN 1 ELSE 0 END), COUNT(*) "
            "FROM verdicts WHERE app = %s GROUP BY release "
            "ORDER BY MIN(evaluated_at) DESC, release DESC LIMIT %s"
        )
        with self._using() as conn:
            rows = conn.execute(self.sql(query), (app, limit)).fetchall()
        return [
            {
                "release": str(release),
                "first_seen": self._time(first),
                "last_seen": self._time(last),
                "answers": int(answers or 0),
                "verdicts": int(verdicts),
            }
            for release, first, last, answers, verdicts in rows
        ]

    def release_figures(
        self,
        app: str,
        release: str,
        *,
        since: str | None = None,
        until: str | None = None,
        threshold: float = 0.8,
    ) -> dict[str, dict[str, Any]]:
        """One release's judged answers of ``app`` as the comparison counts them, every
        suspicion (``all``) and the confident ones (``confident``: confidence at or above
        ``threshold``, or none given — an older worker's verdict counts as confident, as the
        metrics count it): ``answers``, ``hallucinated`` and ``categories`` (answers with a
        claim not grounded in each category; a claim without one is GENERICA)."""
        return self.releases_figures(app, [release], since=since, until=until, threshold=threshold)[
            release
        ]

    def releases_figures(
        self,
        app: str,
        releases: list[str],
        *,
        since: str | None = None,
        until: str | None = None,
        threshold: float = 0.8,
    ) -> dict[str, dict[str, dict[str, Any]]]:
        """:meth:`release_figures` of several releases of ``app`` at once (two queries)."""
        out: dict[str, dict[str, dict[str, Any]]] = {
            release: {
                kind: {"answers": 0, "hallucinated": 0,
                       "categories": dict.fromkeys(CATEGORIES, 0)}
                for kind in ("all", "confident")
            }
            for release in releases
        }  # fmt: skip
        if not releases:
            return out
        where, params = self._where(Filters(app=app, status="ok", since=since, until=until))
        clause = " AND ".join([*where, f"v.release IN ({marks(len(releases))})"])
        params = [*params, *releases]
        with self._using() as conn:
            rows = conn.execute(
                self.sql(
                    "SELECT v.release, COUNT(*), "
                    "COALESCE(SUM(CASE WHEN v.hallucinated THEN 1 ELSE 0 END), 0), "
                    "COALESCE(SUM(CASE WHEN v.hallucinated AND (v.hallucination_confidence IS "
                    "NULL OR v.hallucination_confidence >= %s) THEN 1 ELSE 0 END), 0) "
                    f"FROM verdicts v WHERE {clause} GROUP BY v.release"
                ),
                (threshold, *params),
            ).fetchall()
            counted = (
                "SELECT c.release, COALESCE(c.category, 'GENERICA'), "
                "COUNT(DISTINCT c.verdict_id), "
                "COUNT(DISTINCT CASE WHEN c.confidence IS NULL OR c.confidence >= %s "
                "THEN c.verdict_id END) "
            )
            if since is None and until is None:  # the flagged claims' index alone
                query = (
                    f"{counted} FROM claims c WHERE c.verdict <> 'grounded' AND c.app = %s "
                    f"AND c.release IN ({marks(len(releases))}) GROUP BY 1, 2"
                )
                values: tuple[Any, ...] = (threshold, app, *releases)
            else:  # a period: the verdicts' times, through the join
                query = (
                    f"{counted} FROM claims c JOIN verdicts v ON v.app = c.app "
                    f"AND v.id = c.verdict_id WHERE c.verdict <> 'grounded' AND {clause} "
                    "GROUP BY 1, 2"
                )
                values = (threshold, *params)
            by_category = conn.execute(self.sql(query), values).fetchall()
        for release, answers, hallucinated, confident in rows:
            for kind, count in (("all", hallucinated), ("confident", confident)):
                out[release][kind]["answers"] = int(answers)
                out[release][kind]["hallucinated"] = int(count)
        for release, category, count, confident in by_category:
            if category in CATEGORIES:  # a category the judges never give is not compared
                out[release]["all"]["categories"][category] = int(count)
                out[release]["confident"]["categories"][category] = int(confident)
        return out
