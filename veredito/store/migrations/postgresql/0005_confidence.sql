-- Schema 5: spec §17's confidences as columns, for the review page's filter and queue:
-- `verdicts.hallucination_confidence` (the highest among its flagged claims) and
-- `claims.confidence`, back-filled from the verdicts' JSON where they carry them.
ALTER TABLE verdicts ADD COLUMN hallucination_confidence DOUBLE PRECISION;
ALTER TABLE claims ADD COLUMN confidence DOUBLE PRECISION;
UPDATE verdicts SET hallucination_confidence = (body->>'hallucination_confidence')::double precision
WHERE json_typeof(body->'hallucination_confidence') = 'number';
CREATE INDEX verdicts_app_confidence ON verdicts (app, hallucination_confidence);
