-- Forecasts, deadline alerts and the payout ledger's read paths (issue 7).

-- The risk state each project was last judged to be in, so a flip is recorded once
-- (hysteresis: at risk when the ETA passes the deadline; on track again only with slack).
CREATE TABLE project_risk (
    project_id   uuid PRIMARY KEY REFERENCES projects (id),
    state        text NOT NULL CHECK (state IN ('on_track', 'at_risk')),
    changed_at   timestamptz NOT NULL DEFAULT now(),
    evaluated_at timestamptz NOT NULL DEFAULT now()
);

-- One row per flip: 'at_risk' when a project stops being on track, 'recovered' when it is again.
CREATE TABLE project_alerts (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    seq         bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    project_id  uuid NOT NULL REFERENCES projects (id),
    kind        text NOT NULL CHECK (kind IN ('at_risk', 'recovered')),
    message     text NOT NULL,
    remaining   integer NOT NULL,
    eta         timestamptz,
    deadline    timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX project_alerts_project ON project_alerts (project_id, seq);

-- Throughput: submissions in a recent window, across all projects.
CREATE INDEX assignments_submitted_recent ON assignments (submitted_at)
    WHERE status = 'submitted';
-- Which (project, skill) pairs still have work: one probe per pair, for fair sharing.
CREATE INDEX tasks_project_skill_live ON tasks (project_id, skill)
    WHERE status IN ('open', 'pending', 'claimed');
