-- Issue 20 (point 6): screening (docs/evaluation.md, "Screening"). A
-- search's evaluation measured paired on a problem that declares "screen"
-- times the screen's configurations first and stops there when the
-- candidate is slower than the island's best beyond noise (the result's
-- "screened_out", "screen", and its "paired" the screen's, with
-- "screened_out": true). The worker asks the harness to screen only for a
-- search's evaluations: the claim says which (a job's final measurement is
-- measured in full). The engine never commits a screened-out result
-- (daemon/avod/commit.c), emits screened_out for it, and stores no aggregate
-- on its candidate (the screen's configurations' figure stays in the
-- evaluation, shown as partial): the candidate, lineage and report views
-- below carry the screen's verdict so avoctl can say so.

-- The claim as in 012, with "screen": whether the harness may screen.
DROP FUNCTION avo_claim(bigint, text, double precision);
CREATE FUNCTION avo_claim(p_worker bigint, p_target text, p_lease_s double precision)
RETURNS TABLE (id bigint, job_id bigint, candidate_id bigint, problem text, source text, attempts int,
               against_id bigint, against_source text, confidence double precision, screen boolean)
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
        RETURNING e.id, e.job_id, e.candidate_id, e.problem, e.attempts, e.against_id, e.purpose
    )
    SELECT c.id, c.job_id, c.candidate_id, c.problem, s.body, c.attempts, c.against_id, sa.body,
           COALESCE((j.spec->'commit'->>'confidence')::float8, 0.95),
           c.purpose = 'search' AND c.against_id IS NOT NULL
      FROM claimed c
      JOIN candidates cand ON cand.id = c.candidate_id
      JOIN sources s ON s.sha256 = cand.sha256
      LEFT JOIN candidates ag ON ag.id = c.against_id
      LEFT JOIN sources sa ON sa.sha256 = ag.sha256
      LEFT JOIN jobs j ON j.id = c.job_id;
END $$;

-- A candidate as in 012, with its search evaluation's "screen" (null when
-- it was not screened).
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
        'screen', e.result->'screen',
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

-- The lineage as in 012, each candidate with its search evaluation's
-- "screen" as well as its noisy count.
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
            'noisy', ev.result->'noisy_configs', 'screen', ev.result->'screen')
            ORDER BY c.id)
            FROM candidates c
            LEFT JOIN LATERAL (SELECT e.result FROM evaluations e
                                WHERE e.candidate_id = c.id AND e.state = 'done' AND e.purpose = 'search'
                                ORDER BY e.id DESC LIMIT 1) ev ON true
           WHERE c.job_id = j.id), '[]'::jsonb))
      FROM jobs j WHERE j.id = p_id;
$$;

-- The report as in 010, with how many of the search's evaluations the
-- screen stopped.
CREATE OR REPLACE FUNCTION avo_job_report(p_id bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'job', jj, 'seed', avo_candidate_json(j.seed_candidate, false),
        'best', avo_candidate_json(j.best_candidate, false),
        'screened_out', (SELECT count(*) FROM evaluations e
                          WHERE e.job_id = j.id AND e.purpose = 'search' AND e.state = 'done'
                            AND (e.result->>'screened_out')::boolean),
        'screened', (SELECT count(*) FROM evaluations e
                      WHERE e.job_id = j.id AND e.purpose = 'search' AND e.state = 'done'
                        AND e.result ? 'screened_out'),
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
