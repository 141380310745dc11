\set u random(1, 100)
SELECT id FROM msgs WHERE user_id = :u AND tsv @@ to_tsquery('simple', 'w40001bd') LIMIT 20;
