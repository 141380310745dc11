\set u random(1, 100)
SELECT id FROM msgs WHERE user_id = :u AND tsv @@ to_tsquery('simple', 'w2c81') ORDER BY ts_rank(tsv, to_tsquery('simple', 'w2c81')) DESC LIMIT 20;
