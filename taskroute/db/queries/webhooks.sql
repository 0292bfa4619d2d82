-- Webhook endpoints, their deliveries and the sender's claims (functions/webhooks.sql writes
-- the events). An endpoint is named by (id, customer, project scope): $3 NULL means an
-- account-wide viewer; else only endpoints filtered to that project are in sight.

-- name: webhook_endpoint_insert
-- $1 customer, $2 project (NULL: all), $3 url, $4 event types, $5 description, $6 secret.
INSERT INTO webhook_endpoints (customer_id, project_id, url, event_types, description, secret)
VALUES ($1, $2, $3, $4, $5, $6)
RETURNING *;

-- name: webhook_customer_lock
-- $1 customer. One customer's endpoint creations queue here, so the count below holds.
SELECT 1 FROM customers WHERE id = $1 FOR NO KEY UPDATE;

-- name: webhook_endpoint_count
-- $1 customer.
SELECT count(*) FROM webhook_endpoints WHERE customer_id = $1;

-- name: webhook_endpoints_of
-- $1 customer, $2 project scope (NULL: every endpoint of the customer).
SELECT * FROM webhook_endpoints
WHERE customer_id = $1 AND ($2::uuid IS NULL OR project_id = $2)
ORDER BY created_at, id;

-- name: webhook_endpoint_get
-- $1 endpoint, $2 customer, $3 project scope.
SELECT * FROM webhook_endpoints
WHERE id = $1 AND customer_id = $2 AND ($3::uuid IS NULL OR project_id = $3);

-- name: webhook_endpoint_update
-- $1 endpoint, $2 customer, $3 project scope, $4 url, $5 event types, $6 description,
-- $7 enabled (NULL: unchanged). NULL leaves a field as it is. Enabling clears the failure
-- streak and makes pending deliveries due at once (webhook_endpoint_resume).
UPDATE webhook_endpoints
SET url = coalesce($4, url), event_types = coalesce($5, event_types),
    description = coalesce($6, description),
    status = CASE WHEN $7::boolean IS NULL THEN status
                  WHEN $7 THEN 'enabled' ELSE 'disabled' END,
    disabled_reason = CASE WHEN $7::boolean IS NULL THEN disabled_reason
                           WHEN $7 THEN NULL ELSE 'disabled by the customer' END,
    failing_since = CASE WHEN $7 THEN NULL ELSE failing_since END,
    updated_at = taskroute_now()
WHERE id = $1 AND customer_id = $2 AND ($3::uuid IS NULL OR project_id = $3)
RETURNING *;

-- name: webhook_endpoint_resume
-- $1 endpoint. Re-enabled: its pending deliveries (not mid-attempt) are due now.
UPDATE webhook_deliveries SET next_attempt_at = taskroute_now()
WHERE endpoint_id = $1 AND state = 'pending' AND lease_token IS NULL;

-- name: webhook_endpoint_delete
-- $1 endpoint, $2 customer, $3 project scope. Its deliveries and attempts go with it.
DELETE FROM webhook_endpoints
WHERE id = $1 AND customer_id = $2 AND ($3::uuid IS NULL OR project_id = $3)
RETURNING id;

-- name: webhook_endpoint_rotate
-- $1 endpoint, $2 customer, $3 project scope, $4 new secret, $5 seconds the old one still signs.
UPDATE webhook_endpoints
SET previous_secret = secret,
    previous_secret_until = taskroute_now() + make_interval(secs => $5),
    secret = $4, updated_at = taskroute_now()
WHERE id = $1 AND customer_id = $2 AND ($3::uuid IS NULL OR project_id = $3)
RETURNING *;

-- name: webhook_claim_lock
-- No parameters. Claims run one at a time (a short transaction), so the in-flight count per
-- endpoint that a claim reads includes every other claim's leases.
SELECT pg_advisory_xact_lock(2052874268);

-- name: webhook_claim
-- $1 most deliveries to claim, $2 most attempts in flight per endpoint, $3 lease seconds.
-- Due deliveries of enabled endpoints, oldest due first, at most $2 leased per endpoint; each
-- chosen one gets a lease (a token, and next_attempt_at at the lease's end: a process that
-- dies mid-attempt leaves it due again then) and its attempt is counted.
WITH due AS (
    SELECT d.endpoint_id, d.event_id, d.next_attempt_at
    FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
    WHERE d.state = 'pending' AND d.next_attempt_at <= taskroute_now() AND e.status = 'enabled'
    ORDER BY d.next_attempt_at
    LIMIT $1 * 4
    FOR UPDATE OF d SKIP LOCKED
), ranked AS (
    SELECT due.endpoint_id, due.event_id,
           row_number() OVER (PARTITION BY due.endpoint_id ORDER BY due.next_attempt_at)
             + (SELECT count(*) FROM webhook_deliveries f
                WHERE f.endpoint_id = due.endpoint_id AND f.state = 'pending'
                  AND f.lease_token IS NOT NULL AND f.next_attempt_at > taskroute_now())
             AS slot,
           due.next_attempt_at
    FROM due
), chosen AS (
    SELECT endpoint_id, event_id FROM ranked WHERE slot <= $2
    ORDER BY next_attempt_at LIMIT $1
)
UPDATE webhook_deliveries d
SET lease_token = gen_random_uuid(), attempts = d.attempts + 1,
    next_attempt_at = taskroute_now() + make_interval(secs => $3)
FROM chosen c, webhook_endpoints e, webhook_events ev
WHERE d.endpoint_id = c.endpoint_id AND d.event_id = c.event_id
  AND e.id = d.endpoint_id AND ev.id = d.event_id
RETURNING d.endpoint_id, d.event_id, d.lease_token, d.attempts, e.url, e.secret,
          CASE WHEN e.previous_secret_until > taskroute_now() THEN e.previous_secret END
            AS previous_secret,
          ev.type, ev.data, ev.change_seq, ev.created_at AS event_at;

-- name: webhook_attempt_done
-- $1 endpoint, $2 event, $3 lease token, $4 delivered, $5 HTTP status (NULL: none), $6 error,
-- $7 latency ms, $8 seconds to the next attempt, $9 give-up seconds (a delivery queued longer
-- ago fails for good), $10 seconds of failing after which the endpoint is disabled.
-- Only the lease holder records its outcome (a lease that ran out belongs to the next taker).
-- The endpoint row is written only when its health changes.
WITH d AS (
    UPDATE webhook_deliveries d
    SET state = CASE WHEN $4 THEN 'delivered'
                     WHEN d.queued_at + make_interval(secs => $9) <= taskroute_now() THEN 'failed'
                     ELSE 'pending' END,
        next_attempt_at = CASE WHEN $4 THEN d.next_attempt_at
                               ELSE taskroute_now() + make_interval(secs => $8) END,
        lease_token = NULL, last_status = $5, last_error = $6, last_latency_ms = $7,
        delivered_at = CASE WHEN $4 THEN taskroute_now() ELSE d.delivered_at END
    WHERE d.endpoint_id = $1 AND d.event_id = $2 AND d.lease_token = $3
    RETURNING d.endpoint_id, d.event_id, d.attempts, d.state
), a AS (
    INSERT INTO webhook_attempts (endpoint_id, event_id, attempt, status, error, latency_ms)
    SELECT endpoint_id, event_id, attempts, $5, $6, $7 FROM d
), e AS (
    UPDATE webhook_endpoints w
    SET failing_since = CASE WHEN $4 THEN NULL ELSE coalesce(w.failing_since, taskroute_now()) END,
        status = CASE WHEN NOT $4 AND w.failing_since <= taskroute_now() - make_interval(secs => $10)
                      THEN 'disabled' ELSE w.status END,
        disabled_reason = CASE
            WHEN NOT $4 AND w.failing_since <= taskroute_now() - make_interval(secs => $10)
            THEN format('every delivery failed since %s; last: %s', w.failing_since, $6)
            ELSE w.disabled_reason END,
        updated_at = taskroute_now()
    WHERE w.id = $1 AND EXISTS (SELECT 1 FROM d)
      AND CASE WHEN $4 THEN w.failing_since IS NOT NULL
               ELSE w.failing_since IS NULL
                    OR (w.status = 'enabled'
                        AND w.failing_since <= taskroute_now() - make_interval(secs => $10)) END
    RETURNING w.status
)
SELECT d.state, (SELECT status FROM e) AS endpoint_status FROM d;

-- name: webhook_deliveries_page
-- $1 endpoint, $2 after seq (NULL: the newest first), $3 limit. Newest first.
SELECT d.*, ev.type, ev.created_at AS event_at FROM webhook_deliveries d
JOIN webhook_events ev ON ev.id = d.event_id
WHERE d.endpoint_id = $1 AND ($2::bigint IS NULL OR d.seq < $2)
ORDER BY d.seq DESC
LIMIT $3;

-- name: webhook_delivery_get
-- $1 endpoint, $2 event.
SELECT d.*, ev.type, ev.created_at AS event_at FROM webhook_deliveries d
JOIN webhook_events ev ON ev.id = d.event_id
WHERE d.endpoint_id = $1 AND d.event_id = $2;

-- name: webhook_attempts_of
-- $1 endpoint, $2 event. Oldest first.
SELECT attempt, at, status, error, latency_ms FROM webhook_attempts
WHERE endpoint_id = $1 AND event_id = $2
ORDER BY seq;

-- name: webhook_redeliver
-- $1 endpoint, $2 event. Queued again, due now (an attempt running keeps its lease). The
-- same event id: receivers deduplicate by it.
UPDATE webhook_deliveries d
SET state = 'pending', queued_at = taskroute_now(),
    next_attempt_at = CASE WHEN d.state = 'pending' AND d.lease_token IS NOT NULL
                           THEN d.next_attempt_at ELSE taskroute_now() END
WHERE d.endpoint_id = $1 AND d.event_id = $2
RETURNING d.event_id;

-- name: webhook_replay
-- $1 endpoint, $2 after change seq (0: the start), $3 limit. The endpoint's item result events
-- after the change-feed position, in the feed's order (transaction, change), rebuilt from the
-- feed with their original ids and queued again for this endpoint alone. Returns the last
-- change queued and how many.
WITH ep AS (
    SELECT * FROM webhook_endpoints WHERE id = $1
), c AS (
    SELECT c.*, i.external_id, p.customer_id, taskroute_webhook_change_type(c.change) AS type
    FROM ep
    JOIN projects p ON p.customer_id = ep.customer_id
                   AND (ep.project_id IS NULL OR p.id = ep.project_id)
    JOIN result_changes c ON c.project_id = p.id
    JOIN items i ON i.id = c.item_id
    WHERE (c.xact, c.seq) > (coalesce((SELECT a.xact FROM result_changes a WHERE a.seq = $2),
                                      '0'::xid8), $2)
      AND taskroute_webhook_change_type(c.change) = ANY (ep.event_types)
    ORDER BY c.xact, c.seq
    LIMIT $3
), ev AS (
    INSERT INTO webhook_events (id, customer_id, project_id, type, change_seq, data)
    SELECT 'msg_change_' || c.seq, c.customer_id, c.project_id, c.type, c.seq,
           taskroute_webhook_change_data(c.seq, c.project_id, c.item_id, c.external_id,
                                         c.version, c.change, c.answer, c.agreement, c.at)
    FROM c
    ON CONFLICT (id) DO NOTHING
), q AS (
    INSERT INTO webhook_deliveries (endpoint_id, event_id)
    SELECT $1, 'msg_change_' || c.seq FROM c
    ON CONFLICT (endpoint_id, event_id) DO UPDATE
    SET state = 'pending', queued_at = taskroute_now(),
        next_attempt_at = CASE WHEN webhook_deliveries.state = 'pending'
                                    AND webhook_deliveries.lease_token IS NOT NULL
                               THEN webhook_deliveries.next_attempt_at ELSE taskroute_now() END
)
SELECT count(*) AS queued,
       (SELECT c2.seq FROM c c2 ORDER BY c2.xact DESC, c2.seq DESC LIMIT 1) AS last_seq
FROM c;

-- name: webhook_ping
-- $1 endpoint, $2 customer, $3 project, $4 data. A test event for this endpoint alone.
WITH ev AS (
    INSERT INTO webhook_events (id, customer_id, project_id, type, data)
    VALUES (taskroute_webhook_id(), $2, $3, 'webhook.test', $4)
    RETURNING id
)
INSERT INTO webhook_deliveries (endpoint_id, event_id)
SELECT $1, id FROM ev
RETURNING event_id;

-- name: webhook_prune
-- $1 seconds after which finished deliveries, their attempts and events no delivery needs
-- are deleted; $2 most rows per pass.
WITH old AS (
    SELECT endpoint_id, event_id FROM webhook_deliveries
    WHERE state <> 'pending' AND queued_at < taskroute_now() - make_interval(secs => $1)
    LIMIT $2
), a AS (
    DELETE FROM webhook_attempts w USING old
    WHERE w.endpoint_id = old.endpoint_id AND w.event_id = old.event_id
), d AS (
    DELETE FROM webhook_deliveries w USING old
    WHERE w.endpoint_id = old.endpoint_id AND w.event_id = old.event_id
    RETURNING w.event_id
)
DELETE FROM webhook_events e
WHERE e.id IN (SELECT event_id FROM d)
  AND NOT EXISTS (SELECT 1 FROM webhook_deliveries x
                  WHERE x.event_id = e.id
                    AND (x.endpoint_id, x.event_id) NOT IN (SELECT endpoint_id, event_id FROM old));
