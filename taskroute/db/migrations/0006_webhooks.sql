-- Webhooks: a customer's endpoints, the events written by the transactions that make the
-- changes (functions/webhooks.sql), one delivery row per (endpoint, event) that the sender job
-- claims with a lease (queries/webhooks.sql), and each attempt's outcome (the delivery log).

CREATE TABLE webhook_endpoints (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    customer_id uuid NOT NULL REFERENCES customers(id),
    -- NULL: every project of the customer; else only this project's events
    project_id uuid REFERENCES projects(id),
    url text NOT NULL CHECK (length(url) <= 2048),
    event_types text[] NOT NULL CHECK (cardinality(event_types) > 0),
    description text NOT NULL DEFAULT '' CHECK (length(description) <= 500),
    -- the signing key (`whsec_` + base64), needed in clear to sign
    secret text NOT NULL,
    -- after a rotation the old key signs too (a second signature) until this instant
    previous_secret text,
    previous_secret_until timestamptz,
    status text NOT NULL DEFAULT 'enabled' CHECK (status IN ('enabled', 'disabled')),
    disabled_reason text,
    -- first failed attempt since the last success (NULL: healthy)
    failing_since timestamptz,
    created_at timestamptz NOT NULL DEFAULT taskroute_now(),
    updated_at timestamptz NOT NULL DEFAULT taskroute_now()
);
CREATE INDEX webhook_endpoints_customer ON webhook_endpoints (customer_id);

CREATE TABLE webhook_events (
    -- the `webhook-id` header: stable across attempts, redeliveries and replays
    id text PRIMARY KEY,
    customer_id uuid NOT NULL REFERENCES customers(id),
    project_id uuid,
    type text NOT NULL,
    -- result_changes.seq for item result events: the change feed's cursor
    change_seq bigint,
    data jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT taskroute_now()
);
CREATE INDEX webhook_events_created ON webhook_events (created_at);

CREATE TABLE webhook_deliveries (
    seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    endpoint_id uuid NOT NULL REFERENCES webhook_endpoints(id) ON DELETE CASCADE,
    event_id text NOT NULL REFERENCES webhook_events(id) ON DELETE CASCADE,
    state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts integer NOT NULL DEFAULT 0,
    -- when the next attempt is due; while an attempt runs (lease_token set), when its lease ends
    next_attempt_at timestamptz NOT NULL DEFAULT taskroute_now(),
    lease_token uuid,
    last_status integer,
    last_error text,
    last_latency_ms integer,
    delivered_at timestamptz,
    -- when it was (re)queued: retries stop once it is older than the give-up window
    queued_at timestamptz NOT NULL DEFAULT taskroute_now(),
    PRIMARY KEY (endpoint_id, event_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_leased ON webhook_deliveries (endpoint_id)
    WHERE state = 'pending' AND lease_token IS NOT NULL;
CREATE INDEX webhook_deliveries_log ON webhook_deliveries (endpoint_id, seq);
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id);

CREATE TABLE webhook_attempts (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    endpoint_id uuid NOT NULL REFERENCES webhook_endpoints(id) ON DELETE CASCADE,
    event_id text NOT NULL,
    attempt integer NOT NULL,
    at timestamptz NOT NULL DEFAULT taskroute_now(),
    status integer,
    error text,
    latency_ms integer NOT NULL
);
CREATE INDEX webhook_attempts_delivery ON webhook_attempts (endpoint_id, event_id, seq);
