-- Schema 7 (spec §18): the release that answered, a column of its own for the releases API,
-- the comparisons and the verdicts API's filter; 'unknown' when the verdict names none.
-- Back-filled from the verdicts' JSON where it carries a release the contract would take.
ALTER TABLE verdicts ADD COLUMN release TEXT NOT NULL DEFAULT 'unknown';
UPDATE verdicts SET release = json_extract(body, '$.metadata.release')
WHERE json_valid(body) AND json_type(body, '$.metadata.release') = 'text'
AND length(json_extract(body, '$.metadata.release')) BETWEEN 1 AND 64
AND json_extract(body, '$.metadata.release') NOT GLOB '*[^A-Za-z0-9._+-]*';
CREATE INDEX verdicts_app_release ON verdicts (app, release, evaluated_at);
