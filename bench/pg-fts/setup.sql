DROP TABLE IF EXISTS msgs;
CREATE TABLE msgs (id bigserial PRIMARY KEY, user_id int NOT NULL, body text NOT NULL,
  tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED);
\copy msgs (user_id, body) from 'data.tsv'
CREATE INDEX msgs_tsv ON msgs USING gin (tsv);
CREATE INDEX msgs_user ON msgs (user_id);
ANALYZE msgs;
