-- Issue 20 (point 8): noise made visible. The result JSON (stored whole in
-- evaluations.result) now says per configuration whether its timing ended
-- over the problem's timing.rse target ("noisy", "rse_target",
-- "stopped_by"), how many did ("noisy_configs"), the host's load before and
-- after ("load") and, on CPU problems, how much of the timed wall time the
-- runner was off a CPU ("clock_gap"). No column: the read models below pass
-- them on, so `avoctl show`, `lineage`, `report` and `watch` can mark them.

-- A candidate: noisy_configs always, load and clock_gap with the full
-- result; each score with its rse, the target and the flag.
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
                          AND ev.state = 'done' ORDER BY ev.id DESC LIMIT 1) e ON true
     WHERE c.id = p_id;
$$;

-- The lineage: each candidate's count of noisy configurations (its latest
-- evaluation's), null when it has none yet.
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
                       WHERE ev.candidate_id = c.id AND ev.state = 'done' ORDER BY ev.id DESC LIMIT 1))
            ORDER BY c.id)
            FROM candidates c WHERE c.job_id = j.id), '[]'::jsonb))
      FROM jobs j WHERE j.id = p_id;
$$;

-- The report: per configuration the seed's and the best's rse and flag.
CREATE OR REPLACE FUNCTION avo_job_report(p_id bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'job', jj, 'seed', avo_candidate_json(j.seed_candidate, false),
        'best', avo_candidate_json(j.best_candidate, false),
        'configs', COALESCE((SELECT jsonb_agg(jsonb_build_object(
                        'config', s->>'config', 'seed', (s->>'score')::float8,
                        'best', (b->>'score')::float8,
                        'seed_rse', s->'rse', 'best_rse', b->'rse', 'rse_target', s->'rse_target',
                        'seed_noisy', s->'noisy', 'best_noisy', b->'noisy',
                        'speedup', CASE WHEN (s->>'score')::float8 > 0
                                        THEN (b->>'score')::float8 / (s->>'score')::float8 END))
                      FROM jsonb_array_elements(avo_candidate_json(j.seed_candidate, false)->'scores') s
                      LEFT JOIN jsonb_array_elements(avo_candidate_json(j.best_candidate, false)->'scores') b
                        ON b->>'config' = s->>'config'), '[]'::jsonb))
      FROM jobs j, avo_job_json(j.id) jj WHERE j.id = p_id;
$$;

-- avo_job_apply as in 004, its candidate_evaluated event carrying the
-- evaluation's noisy_configs ("noisy"), for `avoctl watch`.
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
            'noisy', (SELECT result->'noisy_configs' FROM evaluations WHERE id = (x->>'eval')::bigint)));
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
        INSERT INTO evaluations (job_id, candidate_id, problem, target, priority, gpu_model)
        VALUES (p_id, cid, prob, tgt, prio, (SELECT spec->>'gpu' FROM jobs WHERE id = p_id));
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

    IF d ? 'finish' AND d->'finish' IS NOT NULL AND jsonb_typeof(d->'finish') = 'object' THEN
        UPDATE jobs SET state = d->'finish'->>'state', reason = d->'finish'->>'reason',
                        finished_at = now()
         WHERE id = p_id;
        UPDATE evaluations SET state = 'cancelled', finished_at = now()
         WHERE job_id = p_id AND state = 'queued';
        PERFORM avo_event(p_id, 'job_finished', avo_job_finish_data(p_id));
    END IF;
    RETURN true;
END $$;
