-- Quality decisions inside the database: comparing answers, scoring gold, pausing, resolving
-- items. Called by taskroute_submit (one round trip per submit) and by the admin paths
-- (pause, retraction), so each rule exists once. `{{ name(args) }}` splices the named blocks
-- of queries/*.sql (taskroute/db/queries.py). Rules in words: the docstring of
-- taskroute/resolvers/quality/__init__.py.

-- What two answers are compared on: the whole answer, or its top-level `field`; NULL when
-- the answer lacks that field (such answers never agree on anything). jsonb equality, so key
-- order and number spelling (4 vs 4.0) do not matter.
CREATE OR REPLACE FUNCTION taskroute_answer_key(p_answer jsonb, p_field text) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN p_field IS NULL THEN p_answer
            WHEN jsonb_typeof(p_answer) = 'object' THEN p_answer -> p_field END;

-- A gold answer is correct when it matches the known answer on the compared field (a gold
-- answer given as the bare value, not an answer object, is compared as it is).
CREATE OR REPLACE FUNCTION taskroute_gold_correct(p_answer jsonb, p_gold jsonb, p_field text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN coalesce(taskroute_answer_key(p_answer, p_field)
                = coalesce(taskroute_answer_key(p_gold, p_field), p_gold), false);

-- Pauses an active skill of an expert (a status change with reason and time, never a delete)
-- and gives their live claims on it back. Returns the tasks that became open again
-- ([{skill, project_id, min_quality}], for wake-up hints), or NULL if the skill was not active.
CREATE OR REPLACE FUNCTION taskroute_pause_skill(p_expert uuid, p_skill text, p_reason text)
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

-- The pause test's evidence: ln of how much likelier `p_correct` right and `p_wrong` wrong
-- gold answers are from an expert whose accuracy is below `p_bar` (a mixture: 64 accuracies
-- evenly spread over [0, bar], equally likely) than from one at `p_trusted`. For an expert at
-- or above p_trusted the ratio is a non-negative supermartingale, so by Ville's inequality the
-- chance that it EVER reaches 1 / risk is at most risk, however many gold answers they give
-- (checked after each one: a sequential test, not a fixed sample). Log-sum-exp keeps it finite.
-- NULL when the bar is 0 (nothing can be below it).
CREATE OR REPLACE FUNCTION taskroute_pause_llr(
    p_correct integer, p_wrong integer, p_bar float8, p_trusted float8
) RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    WITH t AS (
        SELECT p_correct * ln(g.p / p_trusted) + p_wrong * ln((1 - g.p) / (1 - p_trusted)) AS v
        FROM (SELECT p_bar * (i - 0.5) / 64 AS p FROM generate_series(1, 64) i) g
        WHERE p_bar > 0
    )
    SELECT m.top + ln(avg(exp(greatest(t.v - m.top, -700))))
    FROM t, (SELECT max(v) AS top FROM t) m
    GROUP BY m.top
$$;

-- Scores a gold answer: the (expert, skill) estimate and pause evidence move, and the skill is
-- paused once the project's rule says so (the project the gold item belongs to).
-- 'sequential': at least pause_min_gold gold answers since the last unpause and evidence
-- >= ln(1 / pause_risk). 'fixed' (the older rule): at least pause_min_gold gold
-- answers and a Beta mean below pause_below. Returns the tasks the pause reopened ('[]').
CREATE OR REPLACE FUNCTION taskroute_score_gold(
    p_expert uuid, p_skill text, p_correct boolean, p_project uuid
) RETURNS jsonb
LANGUAGE plpgsql AS $fn$
DECLARE
    q record;
    v_rec record;
    v_seen integer;
    v_reason text;
BEGIN
    {{ quality_policy_get(p_project) }} INTO q;
    {{ expert_skill_gold_score(p_expert, p_skill, p_correct, q.pause_below, q.trusted_accuracy) }}
        INTO v_rec;
    IF NOT FOUND OR v_rec.status <> 'active' THEN
        RETURN '[]';
    END IF;
    v_seen := v_rec.gold_seen - v_rec.pause_check_from;
    IF v_seen < q.pause_min_gold THEN
        RETURN '[]';
    END IF;
    IF q.pause_rule = 'sequential' THEN
        IF v_rec.pause_llr IS NULL OR v_rec.pause_llr < ln(1 / q.pause_risk::float8) THEN
            RETURN '[]';
        END IF;
        v_reason := format(
            'sequential test: %s of %s gold answers right since the last unpause; that is %s '
            'times likelier from an expert below %s accuracy than from one at %s '
            '(pausing needs %s times)',
            v_rec.gold_correct - v_rec.pause_correct_from, v_seen,
            round(exp(least(v_rec.pause_llr, 700))::numeric),
            round(q.pause_below::numeric, 2), round(q.trusted_accuracy::numeric, 2),
            round(1 / q.pause_risk::numeric));
    ELSE
        -- real columns against float8 literals: 0.5 is stored as 0.5000000xx
        IF v_rec.quality >= q.pause_below - 1e-6 THEN
            RETURN '[]';
        END IF;
        v_reason := format(
            'gold quality %s below %s after %s gold answers (%s correct)',
            round(v_rec.quality::numeric, 2), round(q.pause_below::numeric, 2),
            v_rec.gold_seen, v_rec.gold_correct);
    END IF;
    RETURN coalesce(taskroute_pause_skill(p_expert, p_skill, v_reason), '[]');
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
--
-- Resolution 'weighted' (the project's policy): each valid answer weighs the log-odds of its
-- expert's measured accuracy (queries/quality.sql: item_weighted_answers); the probability of
-- an answer is exp(its weight) / (the sum over the answers given + 1 for each of the
-- answer_choices nobody gave). With at least min_answers answers and the best answer's
-- probability at confidence_threshold the item resolves ('weighted'). Otherwise, below the
-- redundancy cap, it waits for one more answer: a slot opens when none is live (dynamic
-- overlap; min_answers slots are created with the item). At the cap: one adjudication task,
-- whose answer is weighed with the others by its expert's measured accuracy (an adjudicator is
-- one more expert: letting one answer overrule five was the largest source of wrong results in
-- bench/quality.py); the heaviest answer then resolves the item ('adjudicated'). With
-- adjudication off, the heaviest answer at the cap ('weighted-plurality'). A retraction
-- recomputes with the same rule and asks for answers the same way.
CREATE OR REPLACE FUNCTION taskroute_resolve_item(p_item uuid, p_refill boolean) RETURNS jsonb
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
    v_weighted boolean;
    v_best record;
    v_confidence real;
    v_want integer := 0;
    v_pay_all boolean;
    v_correction jsonb;
BEGIN
    PERFORM 1 FROM ({{ item_lock(p_item) }}) l;
    {{ item_lock_state(p_item) }} INTO st;
    v_weighted := st.resolution = 'weighted';
    -- a completed project takes work again (a retraction's refill reopens it)
    v_live := st.project_status IN ('active', 'completed');

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

    IF v_weighted THEN
        -- The heaviest answer group (earliest on a tie) and its probability; log-sum-exp
        -- with the largest score (or 0, the score of an answer nobody gave) subtracted.
        -- An adjudication answer weighs in like any other; `size` counts normal answers only
        -- (agreement is the share of the item's answers that match the result).
        WITH w AS (
            SELECT w.answer, w.k, w.weight, w.kind,
                   row_number() OVER (ORDER BY w.submitted_at, w.id) AS ord
            FROM ({{ item_weighted_answers(p_item, st.answer_field, st.answer_choices) }}) w
        ),
        g AS (
            SELECT w.k, (count(*) FILTER (WHERE w.kind = 'normal'))::int AS size,
                   sum(w.weight) AS score, min(w.ord) AS first
            FROM w WHERE w.k IS NOT NULL GROUP BY w.k
        ),
        m AS (SELECT greatest(max(g.score), 0) AS top FROM g)
        SELECT g.size, (SELECT w.answer FROM w WHERE w.ord = g.first) AS answer,
               exp(greatest(g.score - m.top, -700))
               / (sum(exp(greatest(g.score - m.top, -700))) OVER ()
                  + greatest(st.answer_choices - count(*) OVER (), 0)
                    * exp(greatest(-m.top, -700))) AS confidence
        INTO v_best
        FROM g, m
        ORDER BY g.score DESC, g.first
        LIMIT 1;
        IF FOUND THEN
            v_top := v_best.answer;
            v_top_n := v_best.size;
            v_confidence := v_best.confidence;
        ELSE
            v_confidence := 0;
        END IF;
        -- Dynamic overlap: while not confident and below the cap, keep one slot live (and at
        -- least min_answers answers or slots), never more than the cap.
        IF NOT (v_normal >= st.min_answers
                AND v_confidence >= st.confidence_threshold - 1e-6) THEN
            v_want := least(
                greatest(st.min_answers - v_normal - st.live_slots,
                         CASE WHEN st.live_slots = 0 THEN 1 ELSE 0 END),
                st.redundancy - v_normal - st.live_slots);
        END IF;
    ELSIF p_refill THEN
        v_want := st.redundancy - v_normal - st.live_slots;
    END IF;
    IF v_live AND v_want > 0 THEN
        FOR v_row IN {{ item_slots_add(p_item, v_want) }} LOOP
            v_opened := v_opened || jsonb_build_object(
                'skill', v_row.skill, 'project_id', v_row.project_id,
                'min_quality', v_row.min_quality);
        END LOOP;
    END IF;

    v_share := CASE WHEN v_normal > 0 THEN v_top_n::float8 / v_normal ELSE 0 END;
    v_agreement := CASE WHEN v_normal > 0 THEN v_share END;
    IF v_weighted AND v_normal >= st.min_answers
       AND v_confidence >= st.confidence_threshold - 1e-6 THEN
        v_status := 'resolved'; v_answer := v_top;
        v_method := CASE WHEN v_adjudicated IS NULL THEN 'weighted' ELSE 'adjudicated' END;
    ELSIF v_normal < st.redundancy THEN
        v_status := 'pending';
    ELSIF NOT v_weighted AND NOT v_top_missing AND v_second_n IS DISTINCT FROM v_top_n
          AND v_share >= st.agreement_threshold - 1e-6 THEN
        v_status := 'resolved'; v_answer := v_top; v_method := 'majority';
    ELSIF v_adjudicated IS NOT NULL THEN
        -- weighted: the heaviest answer with the adjudicator's counted in (one more expert,
        -- not a veto over the others); majority: the adjudicator's answer
        v_status := 'resolved'; v_method := 'adjudicated';
        v_answer := CASE WHEN v_weighted THEN coalesce(v_top, v_adjudicated)
                         ELSE v_adjudicated END;
    ELSIF NOT st.adjudicate THEN
        v_status := 'resolved'; v_answer := v_top;
        v_method := CASE WHEN v_weighted THEN 'weighted-plurality' ELSE 'plurality' END;
    ELSE
        v_status := 'adjudicating';
    END IF;

    -- An expert reviewer's correction is the label (functions/reviews.sql).
    {{ item_review_correction(p_item) }} INTO v_correction;
    IF FOUND THEN
        v_status := 'resolved'; v_answer := v_correction; v_method := 'corrected';
    END IF;

    IF v_status = 'adjudicating' THEN
        IF v_live THEN
            FOR v_row IN {{ adjudication_open(p_item, st.adjudication_min_quality) }} LOOP
                v_opened := v_opened || jsonb_build_object(
                    'skill', v_row.skill, 'project_id', v_row.project_id,
                    'min_quality', v_row.min_quality);
            END LOOP;
        END IF;
    ELSIF st.result_status = 'adjudicating' THEN
        -- Only an adjudicating item can have one open (adjudication_open runs in the branch
        -- above, which stores 'adjudicating'); a tasks UPDATE fires the task-count trigger
        -- even when it changes no row.
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
    {{ item_result_upsert(p_item, st.project_id, v_status, v_answer, v_agreement, v_normal, v_method, v_version, v_confidence) }};
    IF v_change IS NOT NULL THEN
        -- No lock: the feed is read up to a horizon (queries/quality.sql result_feed_horizon).
        {{ result_change_insert(st.project_id, p_item, v_version, v_change, v_answer, v_agreement, v_method, v_confidence) }};
    END IF;

    -- Payment policy on_acceptance: a resolved item decides its undecided answers
    -- (agree: accepted and paid; disagree: rejected, or paid when the project pays
    -- disagreements with an adjudicated result). Decisions stand once made: a later
    -- re-resolution changes the result, not the pay (a retraction is the correction).
    -- On a canceled project an item that can no longer resolve pays its answers.
    IF st.payment_policy = 'on_acceptance' THEN
        IF v_status = 'resolved' THEN
            v_pay_all := v_method = 'adjudicated' AND st.pay_adjudicated_disagreements;
            {{ assignments_decide_resolved(p_item, st.answer_field, v_answer, v_pay_all) }};
        ELSIF NOT v_live THEN
            {{ assignments_decide_canceled(st.project_id, p_item) }};
        END IF;
    END IF;
    RETURN v_opened;
END
$fn$;

-- Payment policy on_acceptance: gold answers are decided on real work's schedule, so the
-- timing of a decision never tells an expert which task was gold. Real work is decided when
-- its item resolves: at the expert's submit when theirs was the deciding answer, else later.
-- A gold answer is decided together with its twin (queries/ledger.sql gold_twin_before): at
-- once when the twin is decided already, else when it is (the trigger assignments_gold_twins,
-- below). Without a twin yet it waits (pending) for the auto-approval job to link the
-- next real answer. Called by taskroute_submit for every gold answer.
CREATE OR REPLACE FUNCTION taskroute_gold_submitted(p_assignment uuid) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    v_twin record;
BEGIN
    {{ gold_twin_before(p_assignment) }} INTO v_twin;
    IF NOT FOUND THEN
        RETURN;  -- another payment policy: decided with the rest of its work
    END IF;
    IF v_twin.twin_status IS DISTINCT FROM 'submitted'
       AND (v_twin.twin_id IS NOT NULL OR v_twin.own_decided) THEN
        PERFORM taskroute_gold_decide(ARRAY[p_assignment]);
    ELSE
        {{ gold_exposure_wait(p_assignment, v_twin.twin_id) }};
    END IF;
END
$fn$;

-- Decides gold answers by their correctness (queries/ledger.sql assignments_decide_gold).
-- Also called by the trigger assignments_gold_twins when a twin is decided.
CREATE OR REPLACE FUNCTION taskroute_gold_decide(p_assignments uuid[]) RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
    {{ assignments_decide_gold(p_assignments) }};
END
$fn$;

-- Every path that decides real work (the item's resolution, a customer's review, a retraction,
-- a cancel) decides the gold answers waiting on it, in its own transaction.
CREATE OR REPLACE FUNCTION assignments_decide_gold_twins() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM taskroute_gold_decide(array_agg(x.assignment_id))
    FROM gold_exposures x WHERE x.pending AND x.decide_with = NEW.id
    HAVING count(*) > 0;
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER assignments_gold_twins AFTER UPDATE OF review_status ON assignments
    FOR EACH ROW WHEN (OLD.review_status = 'submitted' AND NEW.review_status <> 'submitted')
    EXECUTE FUNCTION assignments_decide_gold_twins();

-- Every project gets its quality policy row, with the defaults, as it is created.
CREATE OR REPLACE FUNCTION project_quality_default() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO project_quality (project_id) VALUES (NEW.id) ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER projects_quality_default AFTER INSERT ON projects
    FOR EACH ROW EXECUTE FUNCTION project_quality_default();

-- Every insert path (createProject, addTasks, background ingest, addGoldItems) fills the pool.
CREATE OR REPLACE FUNCTION gold_pool_add() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO gold_pool (item_id, project_id, skill)
    VALUES (NEW.id, NEW.project_id, NEW.skill) ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER items_gold_pool AFTER INSERT ON items
    FOR EACH ROW WHEN (NEW.gold_answer IS NOT NULL) EXECUTE FUNCTION gold_pool_add();
