-- Every process asks once a second which credentials expired since it last asked (a rotated
-- token's grace ending): a probe of the few that can still expire, not a scan of them all.
CREATE INDEX credentials_expiring ON credentials (expires_at)
    WHERE expires_at IS NOT NULL AND revoked_at IS NULL;
