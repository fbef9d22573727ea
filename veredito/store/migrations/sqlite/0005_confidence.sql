-- Schema 5: spec §17's confidences as columns, for the review page's filter and queue:
-- `verdicts.hallucination_confidence` (the highest among its flagged claims) and
-- `claims.confidence`, back-filled from the verdicts' JSON where they carry them.
ALTER TABLE verdicts ADD COLUMN hallucination_confidence REAL;
ALTER TABLE claims ADD COLUMN confidence REAL;
UPDATE verdicts SET hallucination_confidence = json_extract(body, '$.hallucination_confidence')
WHERE json_valid(body) AND json_type(body, '$.hallucination_confidence') IN ('real', 'integer');
CREATE INDEX verdicts_app_confidence ON verdicts (app, hallucination_confidence);
