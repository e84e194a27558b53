-- The evolution engine's own state (docs/jobs.md): islands with their own
-- lineage heads, lineage detail per candidate (island, parents, diff,
-- notes), per-job accounting, stagnation counters, custom seeds, and the
-- events a person watching a job needs (island migrated, stagnation, budget
-- reached). avod still decides in C from one snapshot and applies the
-- decision in one transaction (see 001_init.sql).

ALTER TABLE candidates
    ADD COLUMN island  int NOT NULL DEFAULT 0,
    -- every candidate this one was derived from; parent_id is the lineage
    -- parent (the island head it was proposed against), the one its diff is
    -- taken against
    ADD COLUMN parents bigint[] NOT NULL DEFAULT '{}',
    ADD COLUMN diff    text,
    ADD COLUMN notes   text;
CREATE INDEX candidates_job_id ON candidates (job_id, id);

ALTER TABLE jobs
    ADD COLUMN gpu_seconds double precision NOT NULL DEFAULT 0,
    ADD COLUMN cpu_seconds double precision NOT NULL DEFAULT 0,
    ADD COLUMN energy_j    double precision NOT NULL DEFAULT 0,
    ADD COLUMN commits     int NOT NULL DEFAULT 0,
    -- applied evaluations since the last commit on any island (the
    -- stagnation limit counts these)
    ADD COLUMN stale       int NOT NULL DEFAULT 0;

CREATE TABLE islands (
    job_id         bigint NOT NULL REFERENCES jobs(id),
    idx            int NOT NULL CHECK (idx >= 0),
    head           bigint REFERENCES candidates(id),
    best_candidate bigint REFERENCES candidates(id),
    best           double precision NOT NULL DEFAULT 0,
    commits        int NOT NULL DEFAULT 0,
    stale          int NOT NULL DEFAULT 0,   -- applied evaluations since its last commit
    level          int NOT NULL DEFAULT 0,   -- times the operator was told it stagnates
    migrations     int NOT NULL DEFAULT 0,   -- times it adopted the global best
    PRIMARY KEY (job_id, idx)
);

-- What one evaluation cost. GPU-seconds: the harness's wall time on a GPU
-- target (the GPU is held for all of it); CPU-seconds: compilation, plus the
-- harness's wall time on a CPU target; energy: NVML's counter delta.
CREATE FUNCTION avo_eval_cost(p_target text, p_result jsonb,
                              OUT gpu_s double precision, OUT cpu_s double precision,
                              OUT energy_j double precision)
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p_target <> 'cpu' THEN COALESCE((p_result->'sandbox'->>'wall_s')::float8, 0) ELSE 0 END,
           COALESCE((p_result->'compile'->>'seconds')::float8, 0)
             + CASE WHEN p_target = 'cpu' THEN COALESCE((p_result->'sandbox'->>'wall_s')::float8, 0) ELSE 0 END,
           COALESCE((p_result->>'energy_mj')::float8, 0) / 1000.0;
$$;

DROP FUNCTION avo_job_submit(jsonb, text, text, text, int, int);
-- p_seed_source: a seed given as a file or taken from another job's
-- candidate (transfer); stored once by content, named in spec.seed.sha256.
CREATE FUNCTION avo_job_submit(p_spec jsonb, p_problem text, p_operator text, p_target text,
                               p_priority int, p_budget int, p_seed_source text) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE jid bigint;
BEGIN
    IF p_seed_source IS NOT NULL THEN
        INSERT INTO sources (sha256, body) VALUES (p_spec->'seed'->>'sha256', p_seed_source)
            ON CONFLICT (sha256) DO NOTHING;
    END IF;
    INSERT INTO jobs (problem, operator, spec, target, priority, eval_budget)
    VALUES (p_problem, p_operator, p_spec, p_target, p_priority, p_budget)
    RETURNING id INTO jid;
    PERFORM avo_event(jid, 'job_submitted',
                      jsonb_build_object('problem', p_problem, 'operator', p_operator,
                                         'budget', p_spec->'budget', 'islands', p_spec->'islands',
                                         'seed', p_spec->'seed'));
    PERFORM pg_notify('avo_jobs', jid::text);
    RETURN avo_job_json(jid);
END $$;

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
        'total', (SELECT count(*) FROM evaluations WHERE job_id = j.id),
        'inflight', (SELECT count(*) FROM evaluations
                      WHERE job_id = j.id AND state IN ('queued','running')),
        'islands', COALESCE((SELECT jsonb_agg(jsonb_build_object(
                        'idx', i.idx, 'head', i.head, 'best_candidate', i.best_candidate,
                        'best', i.best, 'commits', i.commits, 'stale', i.stale, 'level', i.level,
                        'migrations', i.migrations,
                        'inflight', (SELECT count(*) FROM evaluations e JOIN candidates c ON c.id = e.candidate_id
                                      WHERE e.job_id = j.id AND c.island = i.idx
                                        AND e.state IN ('queued','running'))) ORDER BY i.idx)
                      FROM islands i WHERE i.job_id = j.id), '[]'::jsonb),
        'finished', COALESCE((SELECT jsonb_agg(jsonb_build_object(
                        'eval', e.id, 'candidate', e.candidate_id, 'parent', c.parent_id,
                        'island', c.island, 'outcome', e.outcome, 'aggregate', e.aggregate,
                        'detail', e.result->>'detail', 'knobs', c.knobs,
                        'gpu_s', k.gpu_s, 'cpu_s', k.cpu_s, 'energy_j', k.energy_j) ORDER BY e.id)
                      FROM evaluations e JOIN candidates c ON c.id = e.candidate_id,
                           LATERAL avo_eval_cost(e.target, e.result) k
                     WHERE e.job_id = j.id AND e.state IN ('done','failed') AND NOT e.consumed),
                     '[]'::jsonb),
        'tried', COALESCE((SELECT jsonb_agg(jsonb_build_object(
                        'candidate', c.id, 'knobs', c.knobs, 'outcome', c.outcome,
                        'aggregate', c.aggregate, 'island', c.island) ORDER BY c.id)
                      FROM candidates c WHERE c.job_id = j.id), '[]'::jsonb))
      FROM jobs j WHERE j.id = p_id;
$$;

-- The decision (daemon/avod/evolve.c): start, consume (results applied to
-- the lineage, each with the events it caused), islands (their new state),
-- commits/stale (the job's counters), events (the step's own: budget
-- reached), propose (new candidates), finish. Accounting is added here from the stored results, not from the
-- decision, so it always equals the sum over the applied evaluations.
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
            'unit', (SELECT result->>'unit' FROM evaluations WHERE id = (x->>'eval')::bigint)));
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

-- Read models. A candidate with everything `avoctl show` prints: the
-- lineage fields, its latest evaluation's result (score vector, compile
-- report, counters, energy) and where it ran.
CREATE OR REPLACE FUNCTION avo_candidate_json(p_id bigint, p_with_source boolean) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'id', c.id, 'job', c.job_id, 'sha256', c.sha256, 'parent', c.parent_id,
        'parents', to_jsonb(c.parents), 'island', c.island, 'operator', c.operator,
        'knobs', c.knobs, 'committed', c.committed, 'outcome', c.outcome,
        'aggregate', c.aggregate, 'notes', c.notes, 'created_at', c.created_at,
        'unit', e.result->>'unit',
        'scores', COALESCE((SELECT jsonb_agg(jsonb_build_object('config', x->>'name',
                                                               'score', (x->>'score')::float8))
                            FROM jsonb_array_elements(e.result->'configs') x), '[]'::jsonb),
        'detail', e.result->>'detail',
        'evaluation', e.id)
        || CASE WHEN p_with_source THEN jsonb_build_object(
               'source', s.body, 'diff', c.diff,
               'configs', e.result->'configs', 'compile', e.result->'compile',
               'counters', e.result->'counters', 'energy_mj', e.result->'energy_mj',
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

CREATE OR REPLACE FUNCTION avo_job_json(p_id bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'id', j.id, 'problem', j.problem, 'operator', j.operator, 'target', j.target,
        'state', j.state, 'reason', j.reason, 'priority', j.priority, 'spec', j.spec,
        'created_at', j.created_at, 'started_at', j.started_at, 'finished_at', j.finished_at,
        'evaluations', (SELECT jsonb_build_object(
                            'budget', j.eval_budget,
                            'queued', count(*) FILTER (WHERE state = 'queued'),
                            'running', count(*) FILTER (WHERE state = 'running'),
                            'done', count(*) FILTER (WHERE state IN ('done','failed')),
                            'cancelled', count(*) FILTER (WHERE state = 'cancelled'),
                            'ok', count(*) FILTER (WHERE outcome = 'ok'),
                            'by_outcome', COALESCE((SELECT jsonb_object_agg(o, n) FROM (
                                SELECT outcome o, count(*) n FROM evaluations
                                 WHERE job_id = j.id AND consumed GROUP BY outcome) b), '{}'::jsonb))
                          FROM evaluations WHERE job_id = j.id),
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
                                         WHERE e.job_id = j.id AND c.island = i.idx
                                           AND e.state IN ('done','failed'))) ORDER BY i.idx)
                      FROM islands i WHERE i.job_id = j.id), '[]'::jsonb),
        'unit', (SELECT e.result->>'unit' FROM evaluations e
                  WHERE e.job_id = j.id AND e.result ? 'unit' LIMIT 1),
        'seed', (SELECT jsonb_build_object('candidate', c.id, 'aggregate', c.aggregate,
                                           'outcome', c.outcome)
                   FROM candidates c WHERE c.id = j.seed_candidate),
        'best', (SELECT jsonb_build_object('candidate', c.id, 'aggregate', c.aggregate)
                   FROM candidates c WHERE c.id = j.best_candidate),
        'speedup', (SELECT CASE WHEN s.aggregate > 0 THEN b.aggregate / s.aggregate END
                      FROM candidates s, candidates b
                     WHERE s.id = j.seed_candidate AND b.id = j.best_candidate))
      FROM jobs j WHERE j.id = p_id;
$$;

-- Every candidate of a job in id order (committed ones form the lineage;
-- the rest are attempts), for `avoctl lineage`.
CREATE FUNCTION avo_job_lineage(p_id bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('job', j.id, 'state', j.state, 'seed', j.seed_candidate,
                              'best', j.best_candidate,
                              'unit', (SELECT e.result->>'unit' FROM evaluations e
                                        WHERE e.job_id = j.id AND e.result ? 'unit' LIMIT 1),
                              'candidates', COALESCE((SELECT jsonb_agg(jsonb_build_object(
            'id', c.id, 'parent', c.parent_id, 'parents', to_jsonb(c.parents), 'island', c.island,
            'operator', c.operator, 'committed', c.committed, 'outcome', c.outcome,
            'aggregate', c.aggregate, 'knobs', c.knobs, 'created_at', c.created_at) ORDER BY c.id)
            FROM candidates c WHERE c.job_id = j.id), '[]'::jsonb))
      FROM jobs j WHERE j.id = p_id;
$$;

-- Seed against best per configuration, and what the job spent.
CREATE FUNCTION avo_job_report(p_id bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'job', jj, 'seed', avo_candidate_json(j.seed_candidate, false),
        'best', avo_candidate_json(j.best_candidate, false),
        'configs', COALESCE((SELECT jsonb_agg(jsonb_build_object(
                        'config', s->>'config', 'seed', (s->>'score')::float8,
                        'best', (b->>'score')::float8,
                        'speedup', CASE WHEN (s->>'score')::float8 > 0
                                        THEN (b->>'score')::float8 / (s->>'score')::float8 END))
                      FROM jsonb_array_elements(avo_candidate_json(j.seed_candidate, false)->'scores') s
                      LEFT JOIN jsonb_array_elements(avo_candidate_json(j.best_candidate, false)->'scores') b
                        ON b->>'config' = s->>'config'), '[]'::jsonb))
      FROM jobs j, avo_job_json(j.id) jj WHERE j.id = p_id;
$$;

-- A job may ask for a GPU model ("H200"), not only an architecture: sm_90
-- spans GPUs that time differently. Its evaluations carry the model, and a
-- worker claims one only when a GPU it registered (workers.devices, from
-- NVML) has that name. Evaluations without a model take the fast path.
ALTER TABLE evaluations ADD COLUMN gpu_model text;

CREATE OR REPLACE FUNCTION avo_claim(p_worker bigint, p_target text, p_lease_s double precision)
RETURNS TABLE (id bigint, job_id bigint, candidate_id bigint, problem text, source text, attempts int)
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
        RETURNING e.id, e.job_id, e.candidate_id, e.problem, e.attempts
    )
    SELECT c.id, c.job_id, c.candidate_id, c.problem, s.body, c.attempts
      FROM claimed c
      JOIN candidates cand ON cand.id = c.candidate_id
      JOIN sources s ON s.sha256 = cand.sha256;
END $$;
