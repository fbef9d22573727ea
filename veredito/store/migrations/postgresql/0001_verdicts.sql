-- Schema 1: one row per triple id (spec §14), its claims in their own table.
CREATE TABLE verdicts (
    id TEXT PRIMARY KEY,
    app TEXT,
    status TEXT NOT NULL,
    hallucinated BOOLEAN NOT NULL,
    score DOUBLE PRECISION,
    faithfulness_score DOUBLE PRECISION,
    judge_kind TEXT,
    judge_model TEXT,
    evaluated_at TIMESTAMPTZ NOT NULL,
    body JSON NOT NULL
);
CREATE TABLE claims (
    verdict_id TEXT NOT NULL REFERENCES verdicts (id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    text TEXT NOT NULL,
    verdict TEXT NOT NULL,
    category TEXT,
    chunk_idx INTEGER,
    source TEXT,
    PRIMARY KEY (verdict_id, position)
);
CREATE INDEX verdicts_app_time ON verdicts (app, evaluated_at);
