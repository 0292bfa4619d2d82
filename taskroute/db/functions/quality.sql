-- Quality decisions inside the database: comparing answers, scoring gold, pausing, resolving
-- items. Called by taskroute_submit (one round trip per submit) and by the admin paths
-- (pause, retraction), so each rule exists once. `{{ name(args) }}` splices the named blocks
-- of queries/*.sql (taskroute/db/queries.py); migrate.py installs this file whenever it
-- changes. Rules in words: the docstring of taskroute/resolvers/quality.py.

-- What two answers are compared on: the whole answer, or its top-level `field`; NULL when
-- the answer lacks that field (such answers never agree on anything). jsonb equality, so key
-- order and number spelling (4 vs 4.0) do not matter.
CREATE FUNCTION taskroute_answer_key(p_answer jsonb, p_field text) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN p_field IS NULL THEN p_answer
            WHEN jsonb_typeof(p_answer) = 'object' THEN p_answer -> p_field END;

-- A gold answer is correct when it matches the known answer on the compared field (a gold
-- answer given as the bare value, not an answer object, is compared as it is).
CREATE FUNCTION taskroute_gold_correct(p_answer jsonb, p_gold jsonb, p_field text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN coalesce(taskroute_answer_key(p_answer, p_field)
                = coalesce(taskroute_answer_key(p_gold, p_field), p_gold), false);

-- Pauses an active skill of an expert (a status change with reason and time, never a delete)
-- and gives their live claims on it back. Returns the tasks that became open again
-- ([{skill, project_id, min_quality}], for wake-up hints), or NULL if the skill was not active.
CREATE FUNCTION taskroute_pause_skill(p_expert uuid, p_skill text, p_reason text)
RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
    v_paused uuid;
    v_row record;
    v_opened jsonb := '[]';
BEGIN
    {{ expert_skill_pause(p_expert, p_skill, p_reason) }} INTO v_paused;
    IF v_paused IS NULL THEN
        RETURN NULL;
    END IF;
    FOR v_row IN {{ leases_release_for_skill(p_expert, p_skill) }} LOOP
        IF v_row.status = 'open' THEN
            v_opened := v_opened || jsonb_build_object(
                'skill', v_row.skill, 'project_id', v_row.project_id,
                'min_quality', v_row.min_quality);
        END IF;
    END LOOP;
    RETURN v_opened;
END
$fn$;

-- Scores a gold answer: the (expert, skill) estimate moves, and the skill is paused once the
-- rule says so. Returns the tasks the pause reopened ('[]' if none).
CREATE FUNCTION taskroute_score_gold(
    p_expert uuid, p_skill text, p_correct boolean, p_pause_min_gold integer,
    p_pause_below real
) RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
    v_rec record;
BEGIN
    {{ expert_skill_gold_score(p_expert, p_skill, p_correct) }} INTO v_rec;
    IF NOT FOUND OR v_rec.status <> 'active'
       OR v_rec.gold_seen - v_rec.pause_check_from < p_pause_min_gold
       -- real columns against float8 literals: 0.5 is stored as 0.5000000xx
       OR v_rec.quality >= p_pause_below - 1e-6 THEN
        RETURN '[]';
    END IF;
    RETURN coalesce(taskroute_pause_skill(p_expert, p_skill, format(
        'gold quality %s below %s after %s gold answers (%s correct)',
        round(v_rec.quality::numeric, 2), round(p_pause_below::numeric, 2),
        v_rec.gold_seen, v_rec.gold_correct)), '[]');
END
$fn$;

-- Recomputes an item's result from its valid answers and records a change row when a
-- customer can see the difference. `p_refill` (retraction): add open slots so that valid
-- answers plus live slots make the redundancy again. Returns the tasks it opened (refills,
-- an adjudication) as [{skill, project_id, min_quality}].
--
-- Resolution: fewer than k valid normal answers -> pending. Else the most common answer
-- (compared by taskroute_answer_key) resolves it when it is unique at the top, has the
-- compared field, and its share reaches agreement_threshold ('majority'); else an
-- adjudication answer resolves it ('adjudicated', the latest); else, with adjudication off,
-- the most common answer, earliest on a tie ('plurality'); else one adjudication task opens.
CREATE FUNCTION taskroute_resolve_item(p_item uuid, p_refill boolean) RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
    st record;
    v_group record;
    v_rank integer := 0;
    v_normal integer;
    v_adjudicated jsonb;
    v_top jsonb;
    v_top_n integer := 0;
    v_top_missing boolean := false;
    v_second_n integer;
    v_share float8;
    v_agreement real;
    v_status text;
    v_answer jsonb;
    v_method text;
    v_missing integer;
    v_live boolean;
    v_was boolean;
    v_change text;
    v_version integer;
    v_row record;
    v_opened jsonb := '[]';
BEGIN
    {{ item_lock_state(p_item) }} INTO st;
    v_live := st.project_status = 'active';

    SELECT count(*) FILTER (WHERE v.kind = 'normal'),
           (array_agg(v.answer ORDER BY v.submitted_at DESC, v.id DESC)
                FILTER (WHERE v.kind = 'adjudication'))[1]
    INTO v_normal, v_adjudicated
    FROM ({{ item_valid_answers(p_item) }}) v;

    -- The two largest groups of normal answers by compared key (NULL key: field missing),
    -- ties broken by who answered first; each group's earliest answer stands for it.
    FOR v_group IN
        WITH n AS (
            SELECT v.answer, taskroute_answer_key(v.answer, st.answer_field) AS k,
                   row_number() OVER (ORDER BY v.submitted_at, v.id) AS ord
            FROM ({{ item_valid_answers(p_item) }}) v
            WHERE v.kind = 'normal'
        ),
        g AS (SELECT n.k, count(*)::int AS size, min(n.ord) AS first FROM n GROUP BY n.k)
        SELECT g.k IS NULL AS missing, g.size,
               (SELECT n.answer FROM n WHERE n.ord = g.first) AS answer
        FROM g ORDER BY g.size DESC, g.first LIMIT 2
    LOOP
        v_rank := v_rank + 1;
        IF v_rank = 1 THEN
            v_top := v_group.answer;
            v_top_n := v_group.size;
            v_top_missing := v_group.missing;
        ELSE
            v_second_n := v_group.size;
        END IF;
    END LOOP;

    v_missing := st.redundancy - v_normal - st.live_slots;
    IF p_refill AND v_live AND v_missing > 0 THEN
        FOR v_row IN {{ item_slots_add(p_item, v_missing) }} LOOP
            v_opened := v_opened || jsonb_build_object(
                'skill', v_row.skill, 'project_id', v_row.project_id,
                'min_quality', v_row.min_quality);
        END LOOP;
    END IF;

    v_share := CASE WHEN v_normal > 0 THEN v_top_n::float8 / v_normal ELSE 0 END;
    v_agreement := CASE WHEN v_normal > 0 THEN v_share END;
    IF v_normal < st.redundancy THEN
        v_status := 'pending';
    ELSIF NOT v_top_missing AND v_second_n IS DISTINCT FROM v_top_n
          AND v_share >= st.agreement_threshold - 1e-6 THEN
        v_status := 'resolved'; v_answer := v_top; v_method := 'majority';
    ELSIF v_adjudicated IS NOT NULL THEN
        v_status := 'resolved'; v_answer := v_adjudicated; v_method := 'adjudicated';
    ELSIF NOT st.adjudicate THEN
        v_status := 'resolved'; v_answer := v_top; v_method := 'plurality';
    ELSE
        v_status := 'adjudicating';
    END IF;

    IF v_status = 'adjudicating' THEN
        IF v_live THEN
            FOR v_row IN {{ adjudication_open(p_item, st.adjudication_min_quality) }} LOOP
                v_opened := v_opened || jsonb_build_object(
                    'skill', v_row.skill, 'project_id', v_row.project_id,
                    'min_quality', v_row.min_quality);
            END LOOP;
        END IF;
    ELSE
        {{ adjudication_cancel_open(p_item) }};
    END IF;

    v_was := coalesce(st.result_status = 'resolved', false);
    IF v_status = 'resolved' AND NOT v_was THEN
        v_change := CASE WHEN st.version = 0 THEN 'resolved' ELSE 're-resolved' END;
    ELSIF v_was AND v_status <> 'resolved' THEN
        v_change := 'retracted';
    ELSIF v_status = 'resolved' AND (
            v_answer IS DISTINCT FROM st.result_answer
            OR v_method IS DISTINCT FROM st.result_method
            OR abs(coalesce(v_agreement, 0) - coalesce(st.result_agreement, 0)) > 1e-6) THEN
        v_change := 're-resolved';
    END IF;
    v_version := st.version + (v_change IS NOT NULL)::int;
    {{ item_result_upsert(p_item, st.project_id, v_status, v_answer, v_agreement, v_normal, v_method, v_version) }};
    IF v_change IS NOT NULL THEN
        PERFORM pg_advisory_xact_lock({{ result_feed_lock_key(st.project_id) }});
        {{ result_change_insert(st.project_id, p_item, v_version, v_change, v_answer, v_agreement) }};
    END IF;
    RETURN v_opened;
END
$fn$;
