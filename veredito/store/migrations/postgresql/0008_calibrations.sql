-- Schema 8 (issue 30): calibration that refits itself from reviewers' labels.
-- labels.uniform: whether the labelled answer was in the review queue's uniform slice when the
-- label was given (its sample_key below serve's VEREDITO_REVIEW_SAMPLE then), so the agreement,
-- `calibrate --from-store` and `labels export` no longer depend on the caller's share. Labels
-- given before this schema are back-filled with the default share's rule (sample_key < 0.05).
ALTER TABLE labels ADD COLUMN uniform BOOLEAN NOT NULL DEFAULT FALSE;
UPDATE labels l SET uniform = TRUE FROM verdicts v
WHERE v.app = l.app AND v.id = l.verdict_id AND v.sample_key < 0.05;
-- every calibration `serve --store` fitted (adopted or not) and its held-out figures; body is
-- the calibration file's JSON, figures the comparison that decided; labels_upto the newest
-- label id the fit read (the next fit waits for enough labels past it)
CREATE TABLE calibrations (
    version INTEGER PRIMARY KEY,
    created_at TIMESTAMPTZ NOT NULL,
    name TEXT NOT NULL,
    body TEXT NOT NULL,
    adopted BOOLEAN NOT NULL,
    figures TEXT NOT NULL,
    labels_upto BIGINT NOT NULL DEFAULT 0
);
-- which version is current: the newest row (an adoption, or a rollback); append-only
CREATE TABLE calibration_current (
    id BIGSERIAL PRIMARY KEY,
    version INTEGER NOT NULL REFERENCES calibrations (version),
    set_at TIMESTAMPTZ NOT NULL,
    reason TEXT NOT NULL
);
