-- Issue 16: an accepted background batch keeps its request in the blob store, not in
-- Postgres. A chunk's text (resolvers/ingest.py: encode_chunk) was written to
-- `ingest_chunks.body`, read back by the worker, then deleted with the chunk: each payload
-- went through the database twice (chunk, then item) and its WAL three times. Now the accept
-- writes each chunk's text as one blob (durably, before the 202) and the row keeps its key;
-- `body` holds the text only when the store refused it at accept (the request is then kept
-- in Postgres as before) and for chunks accepted before this migration.
ALTER TABLE ingest_chunks
    ALTER COLUMN body DROP NOT NULL,
    -- blob key of the chunk's text in the blob store (random, never shared)
    ADD COLUMN body_key text,
    -- the blob keys of the chunk's payloads, in task order: what the worker writes, and
    -- what a cancel that drops the chunk queues for deletion (it cannot read the blob)
    ADD COLUMN payload_keys text[];

-- Chunks accepted before: their payloads' keys, hashed as the worker hashes them (sha256 of
-- each line's canonical payload JSON, the text after the line's one tab).
UPDATE ingest_chunks
SET payload_keys = ARRAY(
    SELECT encode(sha256(convert_to(split_part(l.line, E'\t', 2), 'UTF8')), 'hex')
    FROM string_to_table(body, E'\n') WITH ORDINALITY AS l(line, n)
    ORDER BY l.n);

ALTER TABLE ingest_chunks
    ALTER COLUMN payload_keys SET NOT NULL,
    ADD CONSTRAINT ingest_chunks_text_in_one_place CHECK ((body IS NULL) <> (body_key IS NULL));

-- What a queued key is: a payload ('payload': retention, or a dropped chunk's payloads) or
-- a chunk's stored request ('request': deleted once its chunk is stored or dropped). The
-- retention audit counts payloads; a request's blob is never any item's payload.
ALTER TABLE blob_deletions
    ADD COLUMN kind text NOT NULL DEFAULT 'payload' CHECK (kind IN ('payload', 'request'));
