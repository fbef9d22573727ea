-- Schema 2: what the review page and the Grafana table filter on.
-- `categories`: the verdict's hallucinated categories, space-separated (NULL when none),
-- back-filled from the claims already stored.
ALTER TABLE verdicts ADD COLUMN categories TEXT;
UPDATE verdicts v SET categories = s.cats FROM (
    SELECT verdict_id,
           string_agg(DISTINCT COALESCE(category, 'GENERICA'), ' '
                      ORDER BY COALESCE(category, 'GENERICA')) AS cats
    FROM claims WHERE verdict <> 'grounded' GROUP BY verdict_id
) s WHERE s.verdict_id = v.id;
DROP INDEX verdicts_app_time;
CREATE INDEX verdicts_time ON verdicts (evaluated_at DESC, id DESC);
CREATE INDEX verdicts_app_time ON verdicts (app, evaluated_at DESC, id DESC);
CREATE INDEX verdicts_hallucinated_time ON verdicts (hallucinated, evaluated_at DESC, id DESC);
CREATE INDEX claims_category ON claims (category, verdict_id);
-- lz4 compresses the verdict's JSON several times faster than the default pglz; servers built
-- without lz4 (or before PostgreSQL 14) keep pglz.
DO $$ BEGIN ALTER TABLE verdicts ALTER COLUMN body SET COMPRESSION lz4; EXCEPTION WHEN OTHERS THEN NULL; END $$;
