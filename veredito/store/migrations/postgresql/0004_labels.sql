-- Schema 4: reviewers' labels (spec §16), append-only; what the review queue served to whom;
-- each verdict's place in the uniform slice (`sample_key`, from a hash of (app, id), filled in
-- for the rows already stored by the migration's code).
CREATE TABLE labels (
    id BIGSERIAL PRIMARY KEY,
    submission TEXT NOT NULL,
    app TEXT NOT NULL,
    verdict_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    claim_idx INTEGER,
    reviewer TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    correct BOOLEAN,
    verdict TEXT,
    category TEXT,
    text TEXT,
    hallucinated BOOLEAN,
    note TEXT,
    FOREIGN KEY (app, verdict_id) REFERENCES verdicts (app, id) ON DELETE CASCADE
);
CREATE INDEX labels_verdict ON labels (app, verdict_id, id);
CREATE INDEX labels_time ON labels (app, created_at);
CREATE TABLE review_served (
    reviewer TEXT NOT NULL,
    app TEXT NOT NULL,
    verdict_id TEXT NOT NULL,
    reason TEXT NOT NULL,
    served_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (reviewer, app, verdict_id)
);
CREATE INDEX review_served_answer ON review_served (app, verdict_id, served_at);
ALTER TABLE verdicts ADD COLUMN sample_key DOUBLE PRECISION;
CREATE INDEX verdicts_sample ON verdicts (app, sample_key);
CREATE INDEX verdicts_sample_all ON verdicts (sample_key);
