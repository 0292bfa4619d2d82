-- Webhook events, written by the transaction that makes the change (an event exists exactly
-- when the change committed), whatever code path made it. Each trigger fans out one delivery
-- row per enabled endpoint of the project's customer that subscribes to the event's type and
-- whose project filter lets it through; with no such endpoint nothing is written, so a
-- customer without webhooks pays one index probe per event.

-- Queues `p_type` for every matching endpoint of the customer: the event row once, one
-- delivery per endpoint. p_id is the event's stable id (the `webhook-id` header).
CREATE OR REPLACE FUNCTION taskroute_webhook_emit(
    p_customer uuid, p_project uuid, p_type text, p_id text, p_change bigint, p_data jsonb
) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    v_endpoints uuid[];
BEGIN
    SELECT array_agg(e.id) INTO v_endpoints
    FROM webhook_endpoints e
    WHERE e.customer_id = p_customer AND e.status = 'enabled'
      AND (e.project_id IS NULL OR e.project_id = p_project) AND p_type = ANY (e.event_types);
    IF v_endpoints IS NULL THEN
        RETURN;
    END IF;
    INSERT INTO webhook_events (id, customer_id, project_id, type, change_seq, data)
    VALUES (p_id, p_customer, p_project, p_type, p_change, p_data)
    ON CONFLICT (id) DO NOTHING;
    INSERT INTO webhook_deliveries (endpoint_id, event_id)
    SELECT unnest(v_endpoints), p_id
    ON CONFLICT (endpoint_id, event_id) DO NOTHING;
END
$fn$;

-- A new random event id (events other than item results).
CREATE OR REPLACE FUNCTION taskroute_webhook_id() RETURNS text
LANGUAGE sql VOLATILE
AS $fn$ SELECT 'msg_' || replace(gen_random_uuid()::text, '-', '') $fn$;

-- The type of an item result event for a change-feed row.
CREATE OR REPLACE FUNCTION taskroute_webhook_change_type(p_change text) RETURNS text
LANGUAGE sql IMMUTABLE
AS $fn$ SELECT CASE WHEN p_change = 'resolved' THEN 'item.result.resolved'
                    ELSE 'item.result.changed' END $fn$;

-- An item result event's data, from its change-feed row (the trigger and a replay build it
-- alike, so a replayed event is the event that was sent).
CREATE OR REPLACE FUNCTION taskroute_webhook_change_data(
    p_seq bigint, p_project uuid, p_item uuid, p_external_id text, p_version integer,
    p_change text, p_answer jsonb, p_agreement real, p_at timestamptz
) RETURNS jsonb
LANGUAGE sql IMMUTABLE
AS $fn$ SELECT jsonb_build_object(
    'project_id', p_project, 'item_id', p_item, 'external_id', p_external_id,
    'version', p_version, 'change', p_change, 'answer', p_answer, 'agreement', p_agreement,
    'at', p_at, 'change_seq', p_seq) $fn$;

-- Item results: every change-feed row (resolved, re-resolved, retracted) is an event with the
-- feed's own position, so a receiver can reconcile with itemResultChanges or replay from it.
-- Its id is derived from the change, so a replay sends the same id again.
CREATE OR REPLACE FUNCTION taskroute_webhook_result_changes() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    -- No enabled endpoint of these changes' customers (the common case: a submit that
    -- resolved an item): one probe, and the writing statement below is never started.
    IF NOT EXISTS (
        SELECT 1 FROM new_changes n
        JOIN projects p ON p.id = n.project_id
        JOIN webhook_endpoints e ON e.customer_id = p.customer_id AND e.status = 'enabled'
    ) THEN
        RETURN NULL;
    END IF;
    WITH c AS (
        SELECT n.*, p.customer_id, taskroute_webhook_change_type(n.change) AS type
        FROM new_changes n JOIN projects p ON p.id = n.project_id
    ), t AS (
        SELECT c.*, e.id AS endpoint_id, 'msg_change_' || c.seq AS event_id
        FROM c JOIN webhook_endpoints e
          ON e.customer_id = c.customer_id AND e.status = 'enabled'
         AND (e.project_id IS NULL OR e.project_id = c.project_id) AND c.type = ANY (e.event_types)
    ), ev AS (
        INSERT INTO webhook_events (id, customer_id, project_id, type, change_seq, data)
        SELECT DISTINCT ON (t.seq) t.event_id, t.customer_id, t.project_id, t.type, t.seq,
               taskroute_webhook_change_data(t.seq, t.project_id, t.item_id, i.external_id,
                                             t.version, t.change, t.answer, t.agreement, t.at)
        FROM t JOIN items i ON i.id = t.item_id
        ON CONFLICT (id) DO NOTHING
    )
    INSERT INTO webhook_deliveries (endpoint_id, event_id)
    SELECT t.endpoint_id, t.event_id FROM t
    ON CONFLICT (endpoint_id, event_id) DO NOTHING;
    RETURN NULL;
END
$fn$;

CREATE OR REPLACE TRIGGER result_changes_webhooks AFTER INSERT ON result_changes
    REFERENCING NEW TABLE AS new_changes
    FOR EACH STATEMENT EXECUTE FUNCTION taskroute_webhook_result_changes();

-- A project completed or canceled.
CREATE OR REPLACE FUNCTION taskroute_webhook_project_status() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM taskroute_webhook_emit(
        NEW.customer_id, NEW.id, 'project.' || NEW.status, taskroute_webhook_id(), NULL,
        jsonb_build_object('project_id', NEW.id, 'name', NEW.name, 'status', NEW.status,
                           'at', taskroute_now()));
    RETURN NULL;
END
$fn$;

CREATE OR REPLACE TRIGGER projects_webhooks AFTER UPDATE OF status ON projects
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status
                       AND NEW.status IN ('completed', 'canceled'))
    EXECUTE FUNCTION taskroute_webhook_project_status();

-- A queued batch stored (ingest finished) or given up (ingest failed; its error is the
-- generic reason the customer is shown).
CREATE OR REPLACE FUNCTION taskroute_webhook_ingest() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM taskroute_webhook_emit(
        NEW.customer_id, NEW.project_id,
        CASE WHEN NEW.state = 'done' THEN 'project.ingest.finished'
             ELSE 'project.ingest.failed' END,
        taskroute_webhook_id(), NULL,
        jsonb_build_object('project_id', NEW.project_id, 'ingest_id', NEW.id,
                           'kind', NEW.kind, 'tasks_total', NEW.tasks_total,
                           'tasks_stored', NEW.tasks_stored, 'error', NEW.error,
                           'at', taskroute_now()));
    RETURN NULL;
END
$fn$;

CREATE OR REPLACE TRIGGER ingest_jobs_webhooks AFTER UPDATE OF state ON ingest_jobs
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state AND NEW.state IN ('done', 'failed'))
    EXECUTE FUNCTION taskroute_webhook_ingest();

-- A deadline alert raised (at risk) or cleared (recovered).
CREATE OR REPLACE FUNCTION taskroute_webhook_alert() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM taskroute_webhook_emit(
        p.customer_id, NEW.project_id,
        CASE WHEN NEW.kind = 'at_risk' THEN 'project.deadline_alert.raised'
             ELSE 'project.deadline_alert.cleared' END,
        taskroute_webhook_id(), NULL,
        jsonb_build_object('project_id', NEW.project_id, 'alert_id', NEW.id,
                           'kind', NEW.kind, 'message', NEW.message,
                           'remaining', NEW.remaining, 'eta', NEW.eta,
                           'deadline', NEW.deadline, 'at', NEW.created_at))
    FROM projects p WHERE p.id = NEW.project_id;
    RETURN NULL;
END
$fn$;

CREATE OR REPLACE TRIGGER project_alerts_webhooks AFTER INSERT ON project_alerts
    FOR EACH ROW EXECUTE FUNCTION taskroute_webhook_alert();

-- Work awaiting the customer's review (an answer submitted under the on_review policy). The
-- WHEN clause keeps on_submit submits (accepted at once) out of the function entirely.
CREATE OR REPLACE FUNCTION taskroute_webhook_review() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM taskroute_webhook_emit(
        p.customer_id, NEW.project_id, 'review.needed', taskroute_webhook_id(), NULL,
        jsonb_build_object('project_id', NEW.project_id, 'assignment_id', NEW.id,
                           'item_id', NEW.item_id, 'submitted_at', NEW.submitted_at,
                           'auto_approve_at',
                           NEW.submitted_at + make_interval(secs => p.auto_approve_seconds)))
    FROM projects p WHERE p.id = NEW.project_id AND p.payment_policy = 'on_review';
    RETURN NULL;
END
$fn$;

CREATE OR REPLACE TRIGGER assignments_webhooks AFTER UPDATE OF review_status ON assignments
    FOR EACH ROW WHEN (NEW.review_status = 'submitted'
                       AND OLD.review_status IS DISTINCT FROM 'submitted')
    EXECUTE FUNCTION taskroute_webhook_review();
