-- Each server process caches token hash -> viewer (resolvers/accounts/credential_cache.py). These
-- triggers tell every process what to drop, on the channel `taskroute_credentials`:
--   a credential row changed or went away  -> payload: its token hash, hex (64 characters)
--   an expert's status changed             -> payload: the expert id (a UUID, with dashes)
--   credentials truncated                  -> payload: '*' (drop everything)
-- NOTIFY is transactional: it reaches listeners only when (and if) the change commits, after
-- the change is visible to new snapshots, so a lookup that follows the invalidation reads the
-- new row. INSERTs need no notice: unknown tokens are never cached.

CREATE OR REPLACE FUNCTION credentials_notify_invalidation() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        PERFORM pg_notify('taskroute_credentials', '*');
        RETURN NULL;
    END IF;
    -- OLD's hash is the one caches hold; an UPDATE of the hash itself makes NEW's a new key,
    -- which no cache holds (misses are not cached).
    PERFORM pg_notify('taskroute_credentials', encode(OLD.token_hash, 'hex'));
    RETURN NULL;
END $$;

-- Any real change of the row, not a list of the columns the viewer is made of today: a
-- column added later that affects authentication must not silently skip invalidation. If a
-- frequently written column is ever added here, narrow this WHEN rather than flood the channel.
CREATE OR REPLACE TRIGGER credentials_invalidate_update AFTER UPDATE ON credentials
    FOR EACH ROW WHEN (OLD IS DISTINCT FROM NEW)
    EXECUTE FUNCTION credentials_notify_invalidation();
CREATE OR REPLACE TRIGGER credentials_invalidate_delete AFTER DELETE ON credentials
    FOR EACH ROW EXECUTE FUNCTION credentials_notify_invalidation();
CREATE OR REPLACE TRIGGER credentials_invalidate_truncate AFTER TRUNCATE ON credentials
    FOR EACH STATEMENT EXECUTE FUNCTION credentials_notify_invalidation();

CREATE OR REPLACE FUNCTION experts_notify_status() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('taskroute_credentials', NEW.id::text);
    RETURN NULL;
END $$;

-- Only a real status change: the claim path updates experts (last_seen_at) on every claim.
CREATE OR REPLACE TRIGGER experts_invalidate_status AFTER UPDATE OF status ON experts
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION experts_notify_status();
