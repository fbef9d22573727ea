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
-- labels_verdict: an answer's labels, and whether it has any (the review queue asks for each
-- answer it passes over; without the id column PostgreSQL keeps one entry per answer, a fifth
-- of the size). labels_category: the queue's count of labels by category, from the index alone.
CREATE INDEX labels_verdict ON labels (app, verdict_id);
CREATE INDEX labels_time ON labels (app, created_at);
CREATE INDEX labels_category ON labels (category) WHERE kind <> 'answer';
CREATE TABLE review_served (
    reviewer TEXT NOT NULL,
    app TEXT NOT NULL,
    verdict_id TEXT NOT NULL,
    reason TEXT NOT NULL,
    served_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (reviewer, app, verdict_id)
);
-- with the reviewer: whether an answer is taken is answered from the index alone
CREATE INDEX review_served_answer ON review_served (app, verdict_id, served_at, reviewer);
ALTER TABLE verdicts ADD COLUMN sample_key DOUBLE PRECISION;
-- the review queue walks the uniform slice of the answers that can be labelled (status ok) in
-- key order, from the index alone (the id is in it), past the answers already labelled
CREATE INDEX verdicts_sample ON verdicts (app, sample_key, id) WHERE status = 'ok';
CREATE INDEX verdicts_sample_all ON verdicts (sample_key, app, id) WHERE status = 'ok';
