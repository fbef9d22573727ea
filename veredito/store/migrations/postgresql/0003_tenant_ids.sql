-- Schema 3: a verdict is keyed by (app, id), not id alone, so that one app posting an id first
-- cannot take it from another (docs/security.md). `app` is '' when the verdict names none.
UPDATE verdicts SET app = '' WHERE app IS NULL;
ALTER TABLE verdicts ALTER COLUMN app SET DEFAULT '';
ALTER TABLE verdicts ALTER COLUMN app SET NOT NULL;
ALTER TABLE claims ADD COLUMN app TEXT NOT NULL DEFAULT '';
UPDATE claims c SET app = v.app FROM verdicts v WHERE v.id = c.verdict_id AND v.app <> '';
ALTER TABLE claims DROP CONSTRAINT claims_verdict_id_fkey;
ALTER TABLE claims DROP CONSTRAINT claims_pkey;
ALTER TABLE verdicts DROP CONSTRAINT verdicts_pkey;
ALTER TABLE verdicts ADD PRIMARY KEY (app, id);
ALTER TABLE claims ADD PRIMARY KEY (app, verdict_id, position);
ALTER TABLE claims ADD FOREIGN KEY (app, verdict_id) REFERENCES verdicts (app, id) ON DELETE CASCADE;
CREATE INDEX verdicts_id ON verdicts (id);
