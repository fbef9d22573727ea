-- Schema 7 (spec §18): the release that answered, a column of its own for the releases API,
-- the comparisons and the verdicts API's filter; 'unknown' when the verdict names none.
-- Back-filled from the verdicts' JSON where it carries a release the contract would take.
-- verdicts_app_release covers what a release's figures read (its judged answers, hallucinated,
-- how sure), and claims carry their verdict's release (NULL for a verdict that is not a judged
-- answer) with a partial index of the flagged claims: comparing two releases reads two index
-- ranges, never the verdicts' JSON nor a join. A column with a constant default is added
-- without rewriting the table; only the claims of verdicts that name a release are updated.
ALTER TABLE verdicts ADD COLUMN release TEXT NOT NULL DEFAULT 'unknown';
UPDATE verdicts SET release = body->'metadata'->>'release'
WHERE json_typeof(body->'metadata'->'release') = 'string'
AND (body->'metadata'->>'release') ~ '^[A-Za-z0-9._+-]{1,64}$';
CREATE INDEX verdicts_app_release ON verdicts (app, release, status, evaluated_at)
INCLUDE (hallucinated, hallucination_confidence);
ALTER TABLE claims ADD COLUMN release TEXT DEFAULT 'unknown';
UPDATE claims c SET release = CASE WHEN v.status = 'ok' THEN v.release END
FROM verdicts v WHERE v.app = c.app AND v.id = c.verdict_id
AND (v.release <> 'unknown' OR v.status <> 'ok');
CREATE INDEX claims_release_flags ON claims (app, release, category, verdict_id, confidence)
WHERE verdict <> 'grounded';
