\set u random(1, 100)
SELECT id FROM msgs WHERE user_id = :u AND tsv @@ phraseto_tsquery('simple', 'w1c4c w2c81') ORDER BY ts_rank(tsv, phraseto_tsquery('simple', 'w1c4c w2c81')) DESC LIMIT 20;
