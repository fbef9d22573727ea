-- Schema 3: a verdict is keyed by (app, id), not id alone, so that one app posting an id first
-- cannot take it from another (docs/security.md). `app` is '' when the verdict names none.
-- SQLite cannot change a primary key in place: both tables are rebuilt and their rows copied.
CREATE TABLE verdicts_v3 (
    app TEXT NOT NULL DEFAULT '',
    id TEXT NOT NULL,
    status TEXT NOT NULL,
    hallucinated INTEGER NOT NULL,
    score REAL,
    faithfulness_score REAL,
    judge_kind TEXT,
    judge_model TEXT,
    evaluated_at TEXT NOT NULL,
    body TEXT NOT NULL,
    categories TEXT,
    PRIMARY KEY (app, id)
);
INSERT INTO verdicts_v3 (app, id, status, hallucinated, score, faithfulness_score, judge_kind,
                         judge_model, evaluated_at, body, categories)
SELECT COALESCE(app, ''), id, status, hallucinated, score, faithfulness_score, judge_kind,
       judge_model, evaluated_at, body, categories FROM verdicts;
CREATE TABLE claims_v3 (
    app TEXT NOT NULL DEFAULT '',
    verdict_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    text TEXT NOT NULL,
    verdict TEXT NOT NULL,
    category TEXT,
    chunk_idx INTEGER,
    source TEXT,
    PRIMARY KEY (app, verdict_id, position),
    FOREIGN KEY (app, verdict_id) REFERENCES verdicts_v3 (app, id) ON DELETE CASCADE
);
INSERT INTO claims_v3 (app, verdict_id, position, text, verdict, category, chunk_idx, source)
SELECT COALESCE(v.app, ''), c.verdict_id, c.position, c.text, c.verdict, c.category, c.chunk_idx,
       c.source FROM claims c JOIN verdicts v ON v.id = c.verdict_id;
DROP TABLE claims;
DROP TABLE verdicts;
ALTER TABLE verdicts_v3 RENAME TO verdicts;
ALTER TABLE claims_v3 RENAME TO claims;
CREATE INDEX verdicts_time ON verdicts (evaluated_at DESC, id DESC);
CREATE INDEX verdicts_app_time ON verdicts (app, evaluated_at DESC, id DESC);
CREATE INDEX verdicts_hallucinated_time ON verdicts (hallucinated, evaluated_at DESC, id DESC);
CREATE INDEX verdicts_id ON verdicts (id);
CREATE INDEX claims_category ON claims (category, verdict_id);
