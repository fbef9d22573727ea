-- Schema 7 (spec §18): the release that answered, a column of its own for the releases API,
-- the comparisons and the verdicts API's filter; 'unknown' when the verdict names none.
-- Back-filled from the verdicts' JSON where it carries a release the contract would take.
ALTER TABLE verdicts ADD COLUMN release TEXT NOT NULL DEFAULT 'unknown';
UPDATE verdicts SET release = body->'metadata'->>'release'
WHERE json_typeof(body->'metadata'->'release') = 'string'
AND (body->'metadata'->>'release') ~ '^[A-Za-z0-9._+-]{1,64}$';
CREATE INDEX verdicts_app_release ON verdicts (app, release, evaluated_at);
