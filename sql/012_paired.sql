-- Issue 20 (point 7, daemon side): the commit rule that knows the noise.
-- Every evaluation of a proposal names the version it is measured paired
-- against (against_id: the island's best when it was proposed; NULL for
-- the seed and for unpaired evaluations), and the worker claims the
-- against's source and the job's commit confidence with it, so the harness
-- times both in one process (daemon/worker/evaluate.h). The paired result
-- ("paired" in evaluations.result) goes to the engine through the snapshot,
-- where daemon/avod/commit.c decides (docs/jobs.md, "The commit rule").
-- purpose: 'search' (a proposal of the search) or 'final' (the job's end:
-- its best measured paired against its seed, never consumed as a search
-- result and not counted in the evaluation budget; docs/jobs.md).

ALTER TABLE evaluations
    ADD COLUMN against_id bigint REFERENCES candidates(id),
    ADD COLUMN purpose text NOT NULL DEFAULT 'search' CHECK (purpose IN ('search','final'));

-- The job's reported speedup, set when it finishes ({ratio, low, ci,
-- confidence, evaluation, method, paired: true} from its final measurement,
-- {ratio, paired: false, reason} without one, {ratio: 1, note} when no
-- version beat the seed), and the finish the engine decided while the final
-- measurement runs ({state, reason}; the job stays 'running' meanwhile).
ALTER TABLE jobs
    ADD COLUMN speedup   jsonb,
    ADD COLUMN finishing jsonb;

-- The claim as in 004, with the against (id and source, NULL when none)
-- and the job's commit confidence (0.95 when the job's spec predates it).
DROP FUNCTION avo_claim(bigint, text, double precision);
CREATE FUNCTION avo_claim(p_worker bigint, p_target text, p_lease_s double precision)
RETURNS TABLE (id bigint, job_id bigint, candidate_id bigint, problem text, source text, attempts int,
               against_id bigint, against_source text, confidence double precision)
LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY
    WITH next AS (
        SELECT e.id FROM evaluations e
         WHERE e.state = 'queued' AND e.target = p_target
           AND (e.available_at IS NULL OR e.available_at <= now())
           AND (e.gpu_model IS NULL OR EXISTS (
                  SELECT 1 FROM workers w, jsonb_array_elements(w.devices) d
                   WHERE w.id = p_worker AND d->>'kind' = 'gpu'
                     AND strpos(lower(d->>'name'), lower(e.gpu_model)) > 0))
         ORDER BY e.priority DESC, e.id
         LIMIT 1
         FOR UPDATE SKIP LOCKED
    ), claimed AS (
        UPDATE evaluations e
           SET state = 'running', worker_id = p_worker, attempts = e.attempts + 1,
               claimed_at = now(), lease_expires = now() + make_interval(secs => p_lease_s)
          FROM next WHERE e.id = next.id
        RETURNING e.id, e.job_id, e.candidate_id, e.problem, e.attempts, e.against_id
    )
    SELECT c.id, c.job_id, c.candidate_id, c.problem, s.body, c.attempts, c.against_id, sa.body,
           COALESCE((j.spec->'commit'->>'confidence')::float8, 0.95)
      FROM claimed c
      JOIN candidates cand ON cand.id = c.candidate_id
      JOIN sources s ON s.sha256 = cand.sha256
      LEFT JOIN candidates ag ON ag.id = c.against_id
      LEFT JOIN sources sa ON sa.sha256 = ag.sha256
      LEFT JOIN jobs j ON j.id = c.job_id;
END $$;

-- An agent's attempt as in 006, measured against its island's best.
CREATE OR REPLACE FUNCTION avo_agent_propose(p_job bigint, p_island int, p_parent bigint, p_sha text,
                                             p_source text, p_diff text)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    cid bigint; eid bigint; j jobs%ROWTYPE;
BEGIN
    SELECT * INTO j FROM jobs WHERE id = p_job FOR UPDATE;
    IF NOT FOUND OR j.state <> 'running' THEN
        RETURN jsonb_build_object('error', 'the job is not running');
    END IF;
    SELECT c.id, (SELECT max(e.id) FROM evaluations e WHERE e.candidate_id = c.id AND e.purpose = 'search')
      INTO cid, eid FROM candidates c WHERE c.job_id = p_job AND c.sha256 = p_sha;
    IF FOUND THEN
        RETURN jsonb_build_object('candidate', cid, 'evaluation', eid, 'fresh', false);
    END IF;
    IF (SELECT count(*) FROM evaluations WHERE job_id = p_job AND purpose = 'search') >= j.eval_budget THEN
        RETURN jsonb_build_object('error', 'the job''s evaluation budget is spent');
    END IF;
    INSERT INTO sources (sha256, body) VALUES (p_sha, p_source) ON CONFLICT (sha256) DO NOTHING;
    INSERT INTO candidates (job_id, sha256, parent_id, operator, island, hold, diff)
    VALUES (p_job, p_sha, p_parent, 'agent', p_island, true, p_diff) RETURNING id INTO cid;
    INSERT INTO evaluations (job_id, candidate_id, problem, target, priority, gpu_model, against_id)
    VALUES (p_job, cid, j.problem, j.target, j.priority, j.spec->>'gpu',
            (SELECT best_candidate FROM islands WHERE job_id = p_job AND idx = p_island))
    RETURNING id INTO eid;
    RETURN jsonb_build_object('candidate', cid, 'evaluation', eid, 'fresh', true);
END $$;

-- The snapshot as in 006: each finished result with its against and its
-- paired measurement; only the search's evaluations count (total, in
-- flight, finished); the pending finish and the final evaluation.
CREATE OR REPLACE FUNCTION avo_job_snapshot(p_id bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'id', j.id, 'state', j.state, 'problem', j.problem, 'operator', j.operator,
        'spec', j.spec, 'budget', j.eval_budget, 'target', j.target,
        'seed_candidate', j.seed_candidate, 'best_candidate', j.best_candidate,
        'best_aggregate', (SELECT aggregate FROM candidates WHERE id = j.best_candidate),
        'seed_aggregate', (SELECT aggregate FROM candidates WHERE id = j.seed_candidate),
        'seed_source', (SELECT body FROM sources WHERE sha256 = j.spec->'seed'->>'sha256'),
        'elapsed_s', EXTRACT(EPOCH FROM now() - COALESCE(j.started_at, now())),
        'gpu_seconds', j.gpu_seconds, 'cpu_seconds', j.cpu_seconds, 'energy_j', j.energy_j,
        'commits', j.commits, 'stale', j.stale,
        'total', (SELECT count(*) FROM evaluations WHERE job_id = j.id AND purpose = 'search'),
        'tokens', j.tokens, 'cost_usd', j.cost_usd,
        'finishing', j.finishing,
        'final', (SELECT jsonb_build_object('eval', e.id, 'candidate', e.candidate_id, 'against', e.against_id,
                                            'state', e.state, 'outcome', e.outcome, 'aggregate', e.aggregate,
                                            'detail', e.result->>'detail', 'paired', e.result->'paired')
                    FROM evaluations e WHERE e.job_id = j.id AND e.purpose = 'final'
                   ORDER BY e.id DESC LIMIT 1),
        'inflight', (SELECT count(*) FROM evaluations e JOIN candidates c ON c.id = e.candidate_id
                      WHERE e.job_id = j.id AND e.purpose = 'search'
                        AND (e.state IN ('queued','running') OR (c.hold AND NOT e.consumed))),
        'islands', COALESCE((SELECT jsonb_agg(jsonb_build_object(
                        'idx', i.idx, 'head', i.head, 'best_candidate', i.best_candidate,
                        'best', i.best, 'commits', i.commits, 'stale', i.stale, 'level', i.level,
                        'migrations', i.migrations,
                        'inflight', (SELECT count(*) FROM evaluations e JOIN candidates c ON c.id = e.candidate_id
                                      WHERE e.job_id = j.id AND c.island = i.idx AND e.purpose = 'search'
                                        AND (e.state IN ('queued','running') OR (c.hold AND NOT e.consumed)))) ORDER BY i.idx)
                      FROM islands i WHERE i.job_id = j.id), '[]'::jsonb),
        'finished', COALESCE((SELECT jsonb_agg(jsonb_build_object(
                        'eval', e.id, 'candidate', e.candidate_id, 'parent', c.parent_id,
                        'island', c.island, 'outcome', e.outcome, 'aggregate', e.aggregate,
                        'detail', e.result->>'detail', 'knobs', c.knobs,
                        'operator', c.operator, 'commit_requested', c.commit_requested,
                        'against', e.against_id, 'paired', e.result->'paired',
                        'gpu_s', k.gpu_s, 'cpu_s', k.cpu_s, 'energy_j', k.energy_j) ORDER BY e.id)
                      FROM evaluations e JOIN candidates c ON c.id = e.candidate_id,
                           LATERAL avo_eval_cost(e.target, e.result) k
                     WHERE e.job_id = j.id AND e.state IN ('done','failed') AND NOT e.consumed AND NOT c.hold
                       AND e.purpose = 'search'),
                     '[]'::jsonb),
        'tried', COALESCE((SELECT jsonb_agg(jsonb_build_object(
                        'candidate', c.id, 'knobs', c.knobs, 'outcome', c.outcome,
                        'aggregate', c.aggregate, 'island', c.island) ORDER BY c.id)
                      FROM candidates c WHERE c.job_id = j.id), '[]'::jsonb))
      FROM jobs j WHERE j.id = p_id;
$$;

-- avo_job_apply as in 010, "final" starting the job's final measurement
-- and "speedup" stored when it finishes, each proposal's evaluation recording its
-- against (the decision's "against": the island's best after this step's
-- results, daemon/avod/evolve.c), and candidate_evaluated saying how the
-- commit rule decided ("rule": paired or not, and why).
CREATE OR REPLACE FUNCTION avo_job_apply(p_id bigint, d jsonb) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    st text; x jsonb; ev jsonb; n int; cid bigint; prio int; tgt text; prob text;
BEGIN
    SELECT state, priority, target, problem INTO st, prio, tgt, prob
      FROM jobs WHERE id = p_id FOR UPDATE;
    IF NOT FOUND OR st NOT IN ('queued','running') THEN RETURN false; END IF;

    IF (d->>'start')::boolean THEN
        UPDATE jobs SET state = 'running', started_at = now() WHERE id = p_id;
        PERFORM avo_event(p_id, 'job_started', '{}'::jsonb);
    END IF;

    FOR x IN SELECT * FROM jsonb_array_elements(COALESCE(d->'consume', '[]'::jsonb)) LOOP
        UPDATE evaluations SET consumed = true
         WHERE id = (x->>'eval')::bigint AND job_id = p_id
           AND state IN ('done','failed') AND NOT consumed;
        GET DIAGNOSTICS n = ROW_COUNT;
        IF n <> 1 THEN
            RAISE EXCEPTION 'stale decision: evaluation % already consumed', x->>'eval';
        END IF;
        UPDATE jobs j SET gpu_seconds = j.gpu_seconds + k.gpu_s, cpu_seconds = j.cpu_seconds + k.cpu_s,
                          energy_j = j.energy_j + k.energy_j
          FROM evaluations e, LATERAL avo_eval_cost(e.target, e.result) k
         WHERE j.id = p_id AND e.id = (x->>'eval')::bigint;
        UPDATE candidates SET outcome = x->>'outcome', aggregate = (x->>'aggregate')::float8,
                              committed = (x->>'commit')::boolean
         WHERE id = (x->>'candidate')::bigint;
        PERFORM avo_event(p_id, 'candidate_evaluated', jsonb_build_object(
            'candidate', x->'candidate', 'island', x->'island', 'outcome', x->'outcome',
            'aggregate', x->'aggregate', 'detail', x->'detail', 'knobs', x->'knobs',
            'unit', (SELECT result->>'unit' FROM evaluations WHERE id = (x->>'eval')::bigint),
            'noisy', (SELECT result->'noisy_configs' FROM evaluations WHERE id = (x->>'eval')::bigint),
            'rule', x->'rule'));
        IF (x->>'commit')::boolean THEN
            PERFORM avo_event(p_id, 'committed', jsonb_build_object(
                'candidate', x->'candidate', 'parent', x->'parent', 'island', x->'island',
                'aggregate', x->'aggregate'));
        END IF;
        IF (x->>'new_best')::boolean THEN
            UPDATE jobs SET best_candidate = (x->>'candidate')::bigint WHERE id = p_id;
            PERFORM avo_event(p_id, 'new_best', jsonb_build_object(
                'candidate', x->'candidate', 'island', x->'island', 'aggregate', x->'aggregate',
                'speedup', x->'speedup'));
        END IF;
        -- what this result caused (stagnation, migration), in its place
        FOR ev IN SELECT * FROM jsonb_array_elements(COALESCE(x->'events', '[]'::jsonb)) LOOP
            PERFORM avo_event(p_id, ev->>'kind', COALESCE(ev->'data', '{}'::jsonb));
        END LOOP;
    END LOOP;

    -- Island heads always name candidates that exist before this decision
    -- (the seed's island rows are written when its result is applied).
    FOR x IN SELECT * FROM jsonb_array_elements(COALESCE(d->'propose', '[]'::jsonb)) LOOP
        INSERT INTO sources (sha256, body) VALUES (x->>'sha256', x->>'source')
            ON CONFLICT (sha256) DO NOTHING;
        INSERT INTO candidates (job_id, sha256, parent_id, operator, knobs, island, parents, diff, notes)
        VALUES (p_id, x->>'sha256', (x->>'parent')::bigint, x->>'operator', x->'knobs',
                COALESCE((x->>'island')::int, 0),
                COALESCE(ARRAY(SELECT jsonb_array_elements_text(x->'parents')::bigint), '{}'),
                x->>'diff', x->>'notes')
            ON CONFLICT (job_id, sha256) DO NOTHING
        RETURNING id INTO cid;
        IF cid IS NULL THEN CONTINUE; END IF;
        IF (x->>'seed')::boolean THEN
            UPDATE jobs SET seed_candidate = cid WHERE id = p_id;
        END IF;
        INSERT INTO evaluations (job_id, candidate_id, problem, target, priority, gpu_model, against_id)
        VALUES (p_id, cid, prob, tgt, prio, (SELECT spec->>'gpu' FROM jobs WHERE id = p_id),
                (x->>'against')::bigint);
    END LOOP;

    FOR x IN SELECT * FROM jsonb_array_elements(COALESCE(d->'islands', '[]'::jsonb)) LOOP
        INSERT INTO islands AS i (job_id, idx, head, best_candidate, best, commits, stale, level, migrations)
        VALUES (p_id, (x->>'idx')::int, (x->>'head')::bigint, (x->>'best_candidate')::bigint,
                COALESCE((x->>'best')::float8, 0), COALESCE((x->>'commits')::int, 0),
                COALESCE((x->>'stale')::int, 0), COALESCE((x->>'level')::int, 0),
                COALESCE((x->>'migrations')::int, 0))
        ON CONFLICT (job_id, idx) DO UPDATE
           SET head = EXCLUDED.head, best_candidate = EXCLUDED.best_candidate, best = EXCLUDED.best,
               commits = EXCLUDED.commits, stale = EXCLUDED.stale, level = EXCLUDED.level,
               migrations = EXCLUDED.migrations;
    END LOOP;
    IF d ? 'commits' THEN
        UPDATE jobs SET commits = (d->>'commits')::int, stale = (d->>'stale')::int WHERE id = p_id;
    END IF;

    FOR x IN SELECT * FROM jsonb_array_elements(COALESCE(d->'events', '[]'::jsonb)) LOOP
        PERFORM avo_event(p_id, x->>'kind', COALESCE(x->'data', '{}'::jsonb));
    END LOOP;

    -- The search is over; its best is measured paired against the seed
    -- before the job ends (evolve.c). Queued search work is dropped now.
    IF jsonb_typeof(d->'final') = 'object' THEN
        UPDATE evaluations SET state = 'cancelled', finished_at = now()
         WHERE job_id = p_id AND state = 'queued' AND purpose = 'search';
        INSERT INTO evaluations (job_id, candidate_id, problem, target, priority, gpu_model, against_id, purpose)
        VALUES (p_id, (d->'final'->>'candidate')::bigint, prob, tgt, prio,
                (SELECT spec->>'gpu' FROM jobs WHERE id = p_id), (d->'final'->>'against')::bigint, 'final')
        RETURNING id INTO cid;
        UPDATE jobs SET finishing = jsonb_build_object('state', d->'final'->'state', 'reason', d->'final'->'reason')
         WHERE id = p_id;
        PERFORM avo_event(p_id, 'final_measurement', jsonb_build_object(
            'status', 'started', 'evaluation', cid, 'candidate', d->'final'->'candidate',
            'against', d->'final'->'against', 'state', d->'final'->'state', 'reason', d->'final'->'reason'));
    END IF;

    IF d ? 'finish' AND d->'finish' IS NOT NULL AND jsonb_typeof(d->'finish') = 'object' THEN
        -- what the final measurement cost is the job's too
        UPDATE jobs j SET gpu_seconds = j.gpu_seconds + k.gpu_s, cpu_seconds = j.cpu_seconds + k.cpu_s,
                          energy_j = j.energy_j + k.energy_j
          FROM evaluations e, LATERAL avo_eval_cost(e.target, e.result) k
         WHERE j.id = p_id AND e.id = (d->'speedup'->>'evaluation')::bigint AND e.job_id = p_id
           AND e.purpose = 'final';
        UPDATE jobs SET state = d->'finish'->>'state', reason = d->'finish'->>'reason',
                        finished_at = now(), finishing = NULL,
                        speedup = CASE WHEN jsonb_typeof(d->'speedup') = 'object' THEN d->'speedup' END
         WHERE id = p_id;
        UPDATE evaluations SET state = 'cancelled', finished_at = now()
         WHERE job_id = p_id AND state = 'queued';
        PERFORM avo_event(p_id, 'job_finished', avo_job_finish_data(p_id));
    END IF;
    RETURN true;
END $$;

-- The job: its reported speedup ("speedup": the final measurement's ratio
-- once the job has one, else best/seed aggregates as before;
-- "speedup_detail": the stored object), whether it is measuring its final
-- speedup ("finishing"), and evaluation counts of the search only (the
-- final measurement is "final", outside the budget).
CREATE OR REPLACE FUNCTION avo_job_json(p_id bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'id', j.id, 'problem', j.problem, 'operator', j.operator, 'target', j.target,
        'state', j.state, 'reason', j.reason, 'priority', j.priority, 'spec', j.spec,
        'created_at', j.created_at, 'started_at', j.started_at, 'finished_at', j.finished_at,
        'evaluations', (SELECT jsonb_build_object(
                            'budget', j.eval_budget,
                            'final', (SELECT count(*) FROM evaluations WHERE job_id = j.id AND purpose = 'final'),
                            'queued', count(*) FILTER (WHERE state = 'queued'),
                            'running', count(*) FILTER (WHERE state = 'running'),
                            'done', count(*) FILTER (WHERE state IN ('done','failed')),
                            'cancelled', count(*) FILTER (WHERE state = 'cancelled'),
                            'ok', count(*) FILTER (WHERE outcome = 'ok'),
                            'by_outcome', COALESCE((SELECT jsonb_object_agg(o, n) FROM (
                                SELECT outcome o, count(*) n FROM evaluations
                                 WHERE job_id = j.id AND consumed GROUP BY outcome) b), '{}'::jsonb))
                          FROM evaluations WHERE job_id = j.id AND purpose = 'search'),
        'accounting', jsonb_build_object('gpu_seconds', j.gpu_seconds, 'cpu_seconds', j.cpu_seconds,
                                         'energy_j', j.energy_j,
                                         'wall_seconds', EXTRACT(EPOCH FROM COALESCE(j.finished_at, now())
                                                                  - COALESCE(j.started_at, now()))),
        'commits', j.commits, 'stale', j.stale,
        'islands', COALESCE((SELECT jsonb_agg(jsonb_build_object(
                        'idx', i.idx, 'head', i.head, 'best', i.best, 'best_candidate', i.best_candidate,
                        'commits', i.commits, 'stale', i.stale, 'level', i.level,
                        'migrations', i.migrations,
                        'evaluations', (SELECT count(*) FROM evaluations e JOIN candidates c
                                          ON c.id = e.candidate_id
                                         WHERE e.job_id = j.id AND c.island = i.idx AND e.purpose = 'search'
                                           AND e.state IN ('done','failed'))) ORDER BY i.idx)
                      FROM islands i WHERE i.job_id = j.id), '[]'::jsonb),
        'unit', (SELECT e.result->>'unit' FROM evaluations e
                  WHERE e.job_id = j.id AND e.result ? 'unit' LIMIT 1),
        'seed', (SELECT jsonb_build_object('candidate', c.id, 'aggregate', c.aggregate,
                                           'outcome', c.outcome)
                   FROM candidates c WHERE c.id = j.seed_candidate),
        'best', (SELECT jsonb_build_object('candidate', c.id, 'aggregate', c.aggregate)
                   FROM candidates c WHERE c.id = j.best_candidate),
        'speedup', COALESCE((j.speedup->>'ratio')::float8,
                            (SELECT CASE WHEN s.aggregate > 0 THEN b.aggregate / s.aggregate END
                               FROM candidates s, candidates b
                              WHERE s.id = j.seed_candidate AND b.id = j.best_candidate)),
        'speedup_detail', j.speedup,
        'finishing', j.state = 'running' AND j.finishing IS NOT NULL)
      FROM jobs j WHERE j.id = p_id;
$$;

-- A candidate and the lineage as in 010, from the candidate's search
-- evaluations only: a final measurement of the job's best (timed paired
-- against the seed) must not replace the result its lineage entry has.
CREATE OR REPLACE FUNCTION avo_candidate_json(p_id bigint, p_with_source boolean) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'id', c.id, 'job', c.job_id, 'sha256', c.sha256, 'parent', c.parent_id,
        'parents', to_jsonb(c.parents), 'island', c.island, 'operator', c.operator,
        'knobs', c.knobs, 'committed', c.committed, 'outcome', c.outcome,
        'aggregate', c.aggregate, 'notes', c.notes, 'created_at', c.created_at,
        'unit', e.result->>'unit',
        'scores', COALESCE((SELECT jsonb_agg(jsonb_build_object('config', x->>'name',
                                                               'score', (x->>'score')::float8,
                                                               'rse', x->'rse', 'rse_target', x->'rse_target',
                                                               'noisy', x->'noisy'))
                            FROM jsonb_array_elements(e.result->'configs') x), '[]'::jsonb),
        'detail', e.result->>'detail',
        'noisy_configs', e.result->'noisy_configs',
        'evaluation', e.id)
        || CASE WHEN p_with_source THEN jsonb_build_object(
               'source', s.body, 'diff', c.diff,
               'configs', e.result->'configs', 'compile', e.result->'compile',
               'counters', e.result->'counters', 'energy_mj', e.result->'energy_mj',
               'load', e.result->'load', 'clock_gap', e.result->'clock_gap',
               'worker', (SELECT jsonb_build_object('id', w.id, 'host', w.host, 'target', w.target,
                                                    'devices', w.devices)
                            FROM workers w WHERE w.id = e.worker_id),
               'cost', (SELECT to_jsonb(k) FROM avo_eval_cost(e.target, e.result) k))
           ELSE '{}'::jsonb END
      FROM candidates c
      JOIN sources s ON s.sha256 = c.sha256
      LEFT JOIN LATERAL (SELECT * FROM evaluations ev WHERE ev.candidate_id = c.id
                          AND ev.state = 'done' AND ev.purpose = 'search' ORDER BY ev.id DESC LIMIT 1) e ON true
     WHERE c.id = p_id;
$$;

CREATE OR REPLACE FUNCTION avo_job_lineage(p_id bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('job', j.id, 'state', j.state, 'seed', j.seed_candidate,
                              'best', j.best_candidate,
                              'unit', (SELECT e.result->>'unit' FROM evaluations e
                                        WHERE e.job_id = j.id AND e.result ? 'unit' LIMIT 1),
                              'candidates', COALESCE((SELECT jsonb_agg(jsonb_build_object(
            'id', c.id, 'parent', c.parent_id, 'parents', to_jsonb(c.parents), 'island', c.island,
            'operator', c.operator, 'committed', c.committed, 'outcome', c.outcome,
            'aggregate', c.aggregate, 'knobs', c.knobs, 'created_at', c.created_at,
            'noisy', (SELECT ev.result->'noisy_configs' FROM evaluations ev
                       WHERE ev.candidate_id = c.id AND ev.state = 'done' AND ev.purpose = 'search'
                       ORDER BY ev.id DESC LIMIT 1))
            ORDER BY c.id)
            FROM candidates c WHERE c.job_id = j.id), '[]'::jsonb))
      FROM jobs j WHERE j.id = p_id;
$$;

-- job_finished says the speedup with its interval.
CREATE OR REPLACE FUNCTION avo_job_finish_data(p_id bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('state', j->'state', 'reason', j->'reason', 'best', j->'best',
                              'seed', j->'seed', 'speedup', j->'speedup', 'speedup_detail', j->'speedup_detail',
                              'unit', j->'unit', 'evaluations', j->'evaluations')
      FROM avo_job_json(p_id) j;
$$;
