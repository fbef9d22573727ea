"""Reviewers' labels in the SQL stores (spec §16): a submission appended in one transaction, the
labels of an answer, the labelled answers and keys the agreement reads, and the review queue (the
uniform slice first, then the answers chosen to teach). :class:`LabelQueries` is a part of
:class:`~veredito.store.sql.SQLStore`, which gives it its connections and its dialect."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from typing import Any

from veredito.labels import DEFAULT_SHARE, Label, collector_paused
from veredito.store.base import (
    Filters,
    marks,
    sample_key,
    timestamp,
)

__all__ = ["LOW_CONFIDENCE", "LabelQueries", "TooManySubmissions", "submissions"]


class TooManySubmissions(Exception):
    """The reviewer has given an answer as many submissions as the cap allows."""

    def __init__(self, cap: int) -> None:
        super().__init__(cap)
        self.cap = cap


class LabelQueries:
    """The label queries of :class:`~veredito.store.sql.SQLStore`; what they use of it is
    declared here, for the type checker, and defined there."""

    dialect = ""

    def _using(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def sql(self, text: str) -> str:
        raise NotImplementedError

    def _where(self, filters: Filters) -> tuple[list[str], list[Any]]:
        raise NotImplementedError

    def _time_param(self) -> str:
        raise NotImplementedError

    @staticmethod
    def _body(value: Any) -> dict[str, Any]:
        raise NotImplementedError

    @staticmethod
    def _time(value: Any) -> str:
        raise NotImplementedError

    def _tx(self, conn: Any) -> Any:
        raise NotImplementedError

    def _bool_out(self, value: Any) -> bool | None:
        return None if value is None else bool(value)

    def add_labels(
        self,
        app: str,
        verdict_id: str,
        reviewer: str,
        labels: Sequence[Label],
        *,
        max_submissions: int | None = None,
        share: float = DEFAULT_SHARE,
    ) -> dict[str, Any] | None:
        """Append one submission's labels; the stored submission, or None when the store has no
        verdict (app, id). One transaction: all its rows or none. With ``max_submissions``,
        :class:`TooManySubmissions` when the reviewer already gave the answer that many (the
        verdict's row is locked meanwhile on PostgreSQL; SQLite writes one at a time). Each row
        records ``uniform``: whether the answer is in the uniform slice of ``share`` (serve's
        ``VEREDITO_REVIEW_SAMPLE``) now, which is what the agreement later reads."""
        submission = uuid.uuid4().hex
        created = timestamp(datetime.now(UTC))
        with self._using() as conn, self._tx(conn):
            lock = " FOR UPDATE" if self.dialect == "postgresql" else ""
            found = conn.execute(
                self.sql(f"SELECT sample_key FROM verdicts WHERE app = %s AND id = %s{lock}"),
                (app, verdict_id),
            ).fetchone()
            if found is None:
                return None
            key = float(found[0]) if found[0] is not None else sample_key(app, verdict_id)
            uniform = key < share
            rows = [
                (submission, app, verdict_id, label.kind, label.claim_idx, reviewer, created,
                 label.correct, label.verdict, label.category, label.text, label.hallucinated,
                 label.note, uniform)
                for label in labels
            ]  # fmt: skip
            if max_submissions is not None:
                given = conn.execute(
                    self.sql(
                        "SELECT COUNT(DISTINCT submission) FROM labels "
                        "WHERE app = %s AND verdict_id = %s AND reviewer = %s"
                    ),
                    (app, verdict_id, reviewer),
                ).fetchone()[0]
                if int(given) >= max_submissions:
                    raise TooManySubmissions(max_submissions)
            insert = self.sql(f"INSERT INTO labels ({_LABEL_COLUMNS}) VALUES ({marks(14)})")
            if self.dialect == "sqlite":
                conn.executemany(insert, rows)
            else:
                with conn.cursor() as cur:
                    cur.executemany(insert, rows)
        return _submission(
            submission,
            app,
            verdict_id,
            reviewer,
            created,
            [dict(zip(_LABEL_KEYS, (None, *r), strict=True)) for r in rows],
        )

    def _label_rows(self, conn: Any, where: str, params: Sequence[Any]) -> list[dict[str, Any]]:
        found = conn.execute(
            self.sql(f"SELECT l.id, {_LABEL_COLUMNS_L} FROM labels l {where} ORDER BY l.id"),
            params,
        ).fetchall()
        out = []
        times: dict[Any, str] = {}  # a submission's rows share one created_at: format it once
        for row in found:
            item = dict(zip(_LABEL_KEYS, row, strict=True))
            for key in ("correct", "hallucinated", "uniform"):
                item[key] = self._bool_out(item[key])
            created = item["created_at"]
            text = times.get(created)
            if text is None:
                text = times[created] = self._time(created)
            item["created_at"] = text
            out.append(item)
        return out

    def labels_of(self, app: str, verdict_id: str) -> list[dict[str, Any]]:
        """Every label row of one answer, oldest first."""
        with self._using() as conn:
            return self._label_rows(
                conn, "WHERE l.app = %s AND l.verdict_id = %s", (app, verdict_id)
            )

    # -- bounded reads of one answer's labels (its page and the labels API) -------------------
    def latest_labels(self, app: str, verdict_id: str) -> list[dict[str, Any]]:
        """Each reviewer's latest label of each claim, and their latest answer-level
        ``hallucinated``: what the form shows as theirs and the disagreements are made of; as
        many rows as reviewers times claims, however many submissions there are."""
        with self._using() as conn:
            return self._label_rows(
                conn,
                "WHERE l.id IN (SELECT MAX(id) FROM labels WHERE app = %s AND verdict_id = %s "
                "AND (kind = 'claim' OR (kind = 'answer' AND hallucinated IS NOT NULL)) "
                "GROUP BY reviewer, kind, claim_idx)",
                (app, verdict_id),
            )

    def latest_notes(self, app: str, verdict_id: str) -> list[dict[str, Any]]:
        """The note and missed spans of each reviewer's latest submission that has either."""
        with self._using() as conn:
            return self._label_rows(
                conn,
                "WHERE l.app = %s AND l.verdict_id = %s AND (l.kind = 'missed' OR l.note IS NOT "
                "NULL) AND l.submission IN (SELECT submission FROM labels WHERE id IN (SELECT "
                "MAX(id) FROM labels WHERE app = %s AND verdict_id = %s AND (kind = 'missed' OR "
                "note IS NOT NULL) GROUP BY reviewer))",
                (app, verdict_id, app, verdict_id),
            )

    def submission_counts(self, app: str, verdict_id: str) -> dict[str, int]:
        """How many submissions each reviewer gave one answer."""
        with self._using() as conn:
            found = conn.execute(
                self.sql(
                    "SELECT reviewer, COUNT(DISTINCT submission) FROM labels "
                    "WHERE app = %s AND verdict_id = %s GROUP BY reviewer"
                ),
                (app, verdict_id),
            ).fetchall()
        return {str(reviewer): int(n) for reviewer, n in found}

    def submissions_page(
        self,
        app: str,
        verdict_id: str,
        *,
        after: int | None = None,
        limit: int = 50,
        newest_first: bool = False,
    ) -> tuple[list[dict[str, Any]], int | None]:
        """One page of an answer's submissions (each with its rows), oldest first or newest
        first, past the submission whose first row is ``after``; and the cursor of the next
        page (None on the last)."""
        beyond = ("<" if newest_first else ">") if after is not None else ""
        having = f" HAVING MIN(id) {beyond} %s" if beyond else ""
        params: list[Any] = [app, verdict_id, *([after] if beyond else []), limit + 1]
        with self._using() as conn:
            firsts = conn.execute(
                self.sql(
                    "SELECT submission, MIN(id) FROM labels WHERE app = %s AND verdict_id = %s "
                    f"GROUP BY submission{having} ORDER BY MIN(id) "
                    f"{'DESC' if newest_first else 'ASC'} LIMIT %s"
                ),
                params,
            ).fetchall()
            page = firsts[:limit]
            if not page:
                return [], None
            rows = self._label_rows(
                conn,
                f"WHERE l.app = %s AND l.verdict_id = %s AND l.submission IN ({marks(len(page))})",
                (app, verdict_id, *(str(s) for s, _ in page)),
            )
        grouped: dict[str, list[dict[str, Any]]] = {str(s): [] for s, _ in page}
        for row in rows:
            grouped[str(row["submission"])].append(row)
        items = submissions([r for s, _ in page for r in grouped[str(s)]])
        return items, (int(page[-1][1]) if len(firsts) > limit else None)

    def one_submission(self, app: str, verdict_id: str, submission: str) -> dict[str, Any] | None:
        """One submission whole, or None."""
        with self._using() as conn:
            rows = self._label_rows(
                conn,
                "WHERE l.app = %s AND l.verdict_id = %s AND l.submission = %s",
                (app, verdict_id, submission),
            )
        return submissions(rows)[0] if rows else None

    # -- review sessions ---------------------------------------------------------------------
    def session_generation(self, key: str) -> int:
        """The generation a session key's cookies must carry (0 before any sign-out)."""
        with self._using() as conn:
            found = conn.execute(
                self.sql("SELECT generation FROM review_sessions WHERE session_key = %s"), (key,)
            ).fetchone()
        return 0 if found is None else int(found[0])

    def end_sessions(self, key: str) -> int:
        """End every session of a key (its cookies, on every replica): the new generation."""
        now = timestamp(datetime.now(UTC))
        with self._using() as conn, self._tx(conn):
            conn.execute(
                self.sql(
                    "INSERT INTO review_sessions (session_key, generation, changed_at) "
                    f"VALUES (%s, 1, {self._time_param()}) ON CONFLICT (session_key) DO UPDATE "
                    "SET generation = review_sessions.generation + 1, "
                    "changed_at = excluded.changed_at"
                ),
                (key, now),
            )
            found = conn.execute(
                self.sql("SELECT generation FROM review_sessions WHERE session_key = %s"), (key,)
            ).fetchone()
        return int(found[0])

    def labelled(
        self, filters: Filters, judge: str | None = None
    ) -> list[tuple[dict[str, Any], list[dict[str, Any]], bool]]:
        """(verdict, its label rows, uniform) of every labelled answer the filters keep
        (``judge``: the verdict's judge kind, llm or rules). ``uniform``: whether the answer was
        in the uniform slice when it was first labelled (its first label's recorded flag)."""
        where, params = self._where(filters)
        if judge is not None:
            where.append("v.judge_kind = %s")
            params.append(judge)
        has_labels = "EXISTS (SELECT 1 FROM labels l WHERE l.app = v.app AND l.verdict_id = v.id)"
        clause = " AND ".join([*where, has_labels])
        with collector_paused(), self._using() as conn:
            verdicts = conn.execute(
                self.sql(f"SELECT v.app, v.id, v.body FROM verdicts v WHERE {clause}"),
                params,
            ).fetchall()
            # the join keeps labelled answers only: no EXISTS (PostgreSQL planned it as a second
            # hash semi-join over every label, twice the time at 140,000 labels)
            rows = self._label_rows(
                conn,
                "JOIN verdicts v ON v.app = l.app AND v.id = l.verdict_id"
                + (f" WHERE {' AND '.join(where)}" if where else ""),
                params,
            )
            by_answer: dict[tuple[str, str], list[dict[str, Any]]] = {}
            for row in rows:
                by_answer.setdefault((row["app"], row["verdict_id"]), []).append(row)
            out = []
            for app, verdict_id, body in verdicts:
                mine = by_answer.get((app, verdict_id), [])
                first = min(mine, key=lambda r: int(r["id"])) if mine else None
                out.append((self._body(body), mine, bool(first and first["uniform"])))
            return out

    def labelled_keys(
        self, filters: Filters, judge: str | None = None
    ) -> list[tuple[str, str, bool, int, int]]:
        """(app, id, uniform, newest label id, label rows) of every labelled answer the filters
        keep: enough to tell which answers' labels changed since last asked (``uniform`` as in
        :meth:`labelled`: the first label's recorded flag)."""
        where, params = self._where(filters)
        if judge is not None:
            where.append("v.judge_kind = %s")
            params.append(judge)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        with self._using() as conn:
            found = conn.execute(
                self.sql(
                    "SELECT v.app, v.id, MIN(l.id), MIN(CASE WHEN l.uniform THEN l.id END), "
                    "MAX(l.id), COUNT(*) FROM verdicts v "
                    f"JOIN labels l ON l.app = v.app AND l.verdict_id = v.id {clause} "
                    "GROUP BY v.app, v.id"
                ),
                params,
            ).fetchall()
        return [
            (str(app), str(verdict_id), first_uniform is not None and first_uniform == first,
             int(last), int(n))
            for app, verdict_id, first, first_uniform, last, n in found
        ]  # fmt: skip

    def labelled_answers(
        self, keys: Sequence[tuple[str, str]]
    ) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
        """(verdict, its label rows) of the answers ``keys`` name ((app, id) pairs)."""
        out: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
        with collector_paused(), self._using() as conn:
            for start in range(0, len(keys), 400):
                part = keys[start : start + 400]
                pairs = " OR ".join(["(v.app = %s AND v.id = %s)"] * len(part))
                flat = [x for pair in part for x in pair]
                bodies = conn.execute(
                    self.sql(f"SELECT v.app, v.id, v.body FROM verdicts v WHERE {pairs}"), flat
                ).fetchall()
                rows = self._label_rows(
                    conn,
                    "JOIN verdicts v ON v.app = l.app AND v.id = l.verdict_id WHERE "
                    + pairs.replace("v.app", "l.app").replace("v.id", "l.verdict_id"),
                    flat,
                )
                by_answer: dict[tuple[str, str], list[dict[str, Any]]] = {}
                for row in rows:
                    by_answer.setdefault((row["app"], row["verdict_id"]), []).append(row)
                out += [
                    (self._body(body), by_answer.get((str(app), str(verdict_id)), []))
                    for app, verdict_id, body in bodies
                ]
        return out

    def label_counts(self) -> dict[str, int]:
        """Label rows by app."""
        with self._using() as conn:
            found = conn.execute("SELECT app, COUNT(*) FROM labels GROUP BY app").fetchall()
        return {str(app): int(n) for app, n in found}

    def next_for_review(
        self,
        reviewer: str,
        app: str | None,
        *,
        share: float,
        teach_every: int = 4,
        lease_seconds: float = 900.0,
    ) -> tuple[str, str, str] | None:
        """The next answer for ``reviewer`` (``(app, id, reason)``, recorded as served to them),
        or None when none is left. Answers of the uniform slice (``sample_key < share``) come
        in key order — a random order — and every ``teach_every``-th answer is one chosen to
        teach (a hallucinated answer outside the slice, the rarest category among the labels
        first). Never an answer this reviewer was served, one anybody labelled, or one served to
        another reviewer in the last ``lease_seconds``."""
        now = datetime.now(UTC)
        lease = timestamp(now - timedelta(seconds=lease_seconds))
        with self._using() as conn:
            served = conn.execute(
                self.sql("SELECT COUNT(*) FROM review_served WHERE reviewer = %s"), (reviewer,)
            ).fetchone()[0]
            teach_first = teach_every > 0 and int(served) % teach_every == teach_every - 1
            order = ("teach", "uniform") if teach_first else ("uniform", "teach")
            chosen = None
            for kind in order:
                chosen = self._uniform(conn, reviewer, app, share, lease) if kind == "uniform" \
                    else self._teach(conn, reviewer, app, share, lease)  # fmt: skip
                if chosen is not None:
                    break
            if chosen is None:
                return None
            with self._tx(conn):
                conn.execute(
                    self.sql(
                        "INSERT INTO review_served (reviewer, app, verdict_id, reason, served_at) "
                        f"VALUES (%s, %s, %s, %s, {self._time_param()}) "
                        "ON CONFLICT (reviewer, app, verdict_id) DO NOTHING"
                    ),
                    (reviewer, chosen[0], chosen[1], chosen[2], timestamp(now)),
                )
        return chosen

    def _not_taken(self) -> str:
        return (
            "v.status = 'ok' "
            "AND NOT EXISTS (SELECT 1 FROM labels l WHERE l.app = v.app AND l.verdict_id = v.id) "
            "AND NOT EXISTS (SELECT 1 FROM review_served s WHERE s.app = v.app "
            f"AND s.verdict_id = v.id AND (s.reviewer = %s OR s.served_at > {self._time_param()}))"
        )

    def _uniform(
        self, conn: Any, reviewer: str, app: str | None, share: float, lease: str
    ) -> tuple[str, str, str] | None:
        scope = "v.app = %s AND " if app is not None else ""
        params: list[Any] = [app] if app is not None else []
        row = conn.execute(
            self.sql(
                f"SELECT v.app, v.id FROM verdicts v WHERE {scope}v.sample_key < %s AND "
                f"{self._not_taken()} ORDER BY v.sample_key LIMIT 1"
            ),
            (*params, share, reviewer, lease),
        ).fetchone()
        return None if row is None else (str(row[0]), str(row[1]), "uniform")

    def _teach(
        self, conn: Any, reviewer: str, app: str | None, share: float, lease: str
    ) -> tuple[str, str, str] | None:
        scope = "v.app = %s AND " if app is not None else ""
        params: list[Any] = [app] if app is not None else []
        rows = conn.execute(
            self.sql(
                f"SELECT v.app, v.id, v.categories, v.body FROM verdicts v WHERE {scope}"
                f"v.sample_key >= %s AND v.hallucinated AND {self._not_taken()} "
                "ORDER BY v.evaluated_at DESC LIMIT 50"
            ),
            (*params, share, reviewer, lease),
        ).fetchall()
        if not rows:
            return None
        labelled: dict[str, int] = {}
        # grouped by the column, not COALESCE(…): PostgreSQL counts from labels_category alone
        for category, count in conn.execute(
            "SELECT category, COUNT(*) FROM labels WHERE kind <> 'answer' GROUP BY category"
        ).fetchall():
            name = "GENERICA" if category is None else str(category)
            labelled[name] = labelled.get(name, 0) + int(count)
        best: tuple[tuple[int, int], tuple[str, str, str]] | None = None
        for position, (row_app, row_id, categories, body) in enumerate(rows):
            verdict = self._body(body)
            sure = verdict.get("hallucination_confidence")
            if _judges_disagree(verdict):
                rank, reason = (0, position), "judges_disagree"
            elif isinstance(sure, int | float) and LOW_CONFIDENCE[0] <= sure < LOW_CONFIDENCE[1]:
                rank, reason = (1, position), "low_confidence"
            else:
                cats = str(categories or "GENERICA").split()
                rarest = min(cats, key=lambda c: (int(labelled.get(c, 0)), c))
                rank, reason = (
                    (2 + int(labelled.get(rarest, 0)), position),
                    f"rare_category:{rarest}",
                )
            if best is None or rank < best[0]:
                best = (rank, (str(row_app), str(row_id), reason))
        return None if best is None else best[1]


# a hallucination the judge is this unsure of teaches the most (spec §17's confidence)
LOW_CONFIDENCE = (0.35, 0.75)
_LABEL_COLUMNS = (
    "submission, app, verdict_id, kind, claim_idx, reviewer, created_at, correct, verdict, "
    "category, text, hallucinated, note, uniform"
)
_LABEL_COLUMNS_L = ", ".join(f"l.{c.strip()}" for c in _LABEL_COLUMNS.split(","))
_LABEL_KEYS = ("id", *(c.strip() for c in _LABEL_COLUMNS.split(",")))


def _judges_disagree(verdict: dict[str, Any]) -> bool:
    """The LLM called a claim grounded that the rules' cross-check found a problem in."""
    judge = _dict(verdict.get("judge"))
    if judge.get("kind") != "llm":
        return False
    claims = [c for c in verdict.get("claims") or [] if isinstance(c, dict)]
    for finding in verdict.get("rule_findings") or []:
        if not isinstance(finding, dict) or finding.get("kind") == "derived":
            continue
        idx = finding.get("claim_idx")
        if (
            isinstance(idx, int)
            and 0 <= idx < len(claims)
            and claims[idx].get("verdict") == "grounded"
        ):
            return True
    return False


def _submission(
    submission: str, app: str, verdict_id: str, reviewer: str, created: str,
    rows: list[dict[str, Any]],
) -> dict[str, Any]:  # fmt: skip
    """A stored submission as the API shows it (its rows folded back into one object)."""
    answer = next((r for r in rows if r["kind"] == "answer"), None)
    return {
        "submission": submission,
        "app": app,
        "verdict_id": verdict_id,
        "reviewer": reviewer,
        "created_at": created,
        "claims": [
            {
                "claim_idx": r["claim_idx"],
                "correct": r["correct"],
                "verdict": r["verdict"],
                "category": r["category"],
            }
            for r in rows
            if r["kind"] == "claim"
        ],
        "missed": [
            {"text": r["text"], "category": r["category"], "verdict": r["verdict"]}
            for r in rows
            if r["kind"] == "missed"
        ],
        "hallucinated": answer["hallucinated"] if answer else None,
        "note": answer["note"] if answer else None,
    }


def submissions(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Label rows grouped back into the submissions they came in, oldest first."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        grouped.setdefault(str(row["submission"]), []).append(row)
    return [
        _submission(key, str(r[0]["app"]), str(r[0]["verdict_id"]), str(r[0]["reviewer"]),
                    str(r[0]["created_at"]), r)
        for key, r in grouped.items()
    ]  # fmt: skip


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
