-- An expert gives a live claim back (queries/releases.sql). One round trip, like the claim.
-- Lock order: the expert row (so one expert's releases are counted one after the other), the
-- task, the assignment, then the item (flagging). A release racing a submit or the sweeper
-- loses or wins on the task lock: one of them ends the claim, the others see it ended.
-- The same for gold and real work (the slot's fate differs, what the expert sees does not).
-- outcome: 'released' | 'not_found' (no such assignment, or another expert's) | 'submitted'
--          | 'expired' (the lease ended or was taken over) | 'limited' (no release left this
--          hour: resets_at says when one is).
-- opened: the slot reopened ([{skill, project_id, min_quality}]) for wake-up hints.
CREATE OR REPLACE FUNCTION taskroute_release(
    p_assignment uuid, p_expert uuid, p_reason text, p_per_hour integer
) RETURNS TABLE (
    outcome text, project_id uuid, opened jsonb, releases_left integer, resets_at timestamptz
)
-- ROWS 1: it returns one row; at the default guess (1000) the planner joined the callers'
-- look-ups by hashing whole tables instead of probing them by key.
LANGUAGE plpgsql ROWS 1 AS $fn$
#variable_conflict use_column
DECLARE
    v_status text;
    v_found record;
    v_task record;
    v_current record;
    v_allow record;
    v_row record;
    v_flagged record;
BEGIN
    opened := '[]';
    {{ expert_touch(p_expert) }} INTO v_status;
    {{ assignment_get(p_assignment) }} INTO v_found;
    IF NOT FOUND OR v_found.expert_id <> p_expert THEN
        outcome := 'not_found';
        RETURN NEXT;
        RETURN;
    END IF;
    project_id := v_found.project_id;
    {{ task_lock(v_found.task_id) }} INTO v_task;
    {{ assignment_lock(p_assignment) }} INTO v_current;
    IF v_current.status = 'submitted' THEN
        outcome := 'submitted';
        RETURN NEXT;
        RETURN;
    END IF;
    IF {{ claim_lost(v_current, v_task, p_assignment) }} THEN
        outcome := 'expired';
        RETURN NEXT;
        RETURN;
    END IF;
    {{ release_allowance(p_expert, p_per_hour) }} INTO v_allow;
    IF v_allow.used >= p_per_hour THEN
        outcome := 'limited';
        releases_left := 0;
        resets_at := v_allow.resets_at;
        RETURN NEXT;
        RETURN;
    END IF;
    {{ assignment_release(p_assignment) }};
    {{ item_release_insert(v_found.item_id, p_expert, p_assignment, v_found.project_id, p_reason) }};
    IF p_reason = 'BAD_ITEM' THEN
        PERFORM 1 FROM ({{ item_lock(v_found.item_id) }}) l;
        {{ item_flag_if_bad(v_found.item_id) }} INTO v_flagged;
    END IF;
    {{ task_release(v_found.task_id) }} INTO v_row;
    IF v_row.status = 'open' THEN
        opened := jsonb_build_array(jsonb_build_object(
            'skill', v_row.skill, 'project_id', v_row.project_id,
            'min_quality', v_row.min_quality));
    ELSE
        -- canceled slots (flagged item, gold, canceled project) may have been the last work
        PERFORM taskroute_project_settle(v_found.project_id, true);
    END IF;
    outcome := 'released';
    releases_left := p_per_hour - v_allow.used - 1;
    resets_at := coalesce(v_allow.resets_at, taskroute_now() + interval '1 hour');
    RETURN NEXT;
END
$fn$;
