-- Schema 2: what the review page and the Grafana table filter on.
-- `categories`: the verdict's hallucinated categories, space-separated (NULL when none),
-- back-filled from the claims already stored.
ALTER TABLE verdicts ADD COLUMN categories TEXT;
UPDATE verdicts SET categories = (
    SELECT group_concat(cat, ' ') FROM (
        SELECT DISTINCT COALESCE(c.category, 'GENERICA') AS cat FROM claims c
        WHERE c.verdict_id = verdicts.id AND c.verdict <> 'grounded' ORDER BY cat
    )
);
DROP INDEX verdicts_app_time;
CREATE INDEX verdicts_time ON verdicts (evaluated_at DESC, id DESC);
CREATE INDEX verdicts_app_time ON verdicts (app, evaluated_at DESC, id DESC);
CREATE INDEX verdicts_hallucinated_time ON verdicts (hallucinated, evaluated_at DESC, id DESC);
CREATE INDEX claims_category ON claims (category, verdict_id);
