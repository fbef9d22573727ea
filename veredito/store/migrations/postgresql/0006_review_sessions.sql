-- Schema 6 (issue 27): review sessions that end on the server, and bounded label reads.
-- review_sessions: each session key's generation (the key is an HMAC of a review token under
-- VEREDITO_SESSION_SECRET, never the token); a cookie names the generation it was signed for,
-- and signing out, or signing in again, moves it on, so older cookies stop working on every
-- replica and after a restart. labels_latest: each reviewer's latest label of each claim, and
-- their submissions of an answer (the cap), from the index.
CREATE TABLE review_sessions (
    session_key TEXT PRIMARY KEY,
    generation INTEGER NOT NULL,
    changed_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX labels_latest ON labels (app, verdict_id, reviewer, kind, claim_idx, id);
