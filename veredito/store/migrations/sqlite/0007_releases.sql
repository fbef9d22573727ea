-- Schema 7 (spec §18): the release that answered, a column of its own for the releases API,
-- the comparisons and the verdicts API's filter; 'unknown' when the verdict names none.
-- Back-filled from the verdicts' JSON where it carries a release the contract would take.
-- verdicts_app_release covers what a release's figures read (its judged answers, hallucinated,
-- how sure), and claims carry their verdict's release (NULL for a verdict that is not a judged
-- answer) with a partial index of the flagged claims: comparing two releases reads two index
-- ranges, never the verdicts' JSON nor a join.
ALTER TABLE verdicts ADD COLUMN release TEXT NOT NULL DEFAULT 'unknown';
UPDATE verdicts SET release = json_extract(body, '$.metadata.release')
WHERE json_valid(body) AND json_type(body, '$.metadata.release') = 'text'
AND length(json_extract(body, '$.metadata.release')) BETWEEN 1 AND 64
AND json_extract(body, '$.metadata.release') NOT GLOB '*[^A-Za-z0-9._+-]*';
CREATE INDEX verdicts_app_release
ON verdicts (app, release, status, evaluated_at, hallucinated, hallucination_confidence);
ALTER TABLE claims ADD COLUMN release TEXT DEFAULT 'unknown';
UPDATE claims SET release = (
    SELECT CASE WHEN v.status = 'ok' THEN v.release END FROM verdicts v
    WHERE v.app = claims.app AND v.id = claims.verdict_id
) WHERE EXISTS (
    SELECT 1 FROM verdicts v WHERE v.app = claims.app AND v.id = claims.verdict_id
    AND (v.release <> 'unknown' OR v.status <> 'ok')
);
CREATE INDEX claims_release_flags ON claims (app, release, category, verdict_id, confidence)
WHERE verdict <> 'grounded';
