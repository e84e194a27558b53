-- A secret input seed per job (issue 20, point 2; docs/evaluation.md,
-- "Input sets"): the warm-up calls of every evaluation of a job (the first
-- check.input_sets calls of each configuration: checked, never timed) get
-- the job's input sets, so their reference outputs can be computed once
-- and kept by the worker. avod draws it (getrandom, 63 bits) when the job
-- is created; avo_claim hands it to the worker, which gives it to the
-- harness on stdin. It must never leave those three: no function that
-- serialises a job (avo_job_json, avo_job_snapshot, avo_job_report,
-- events, the API) names the column, and none may select jobs.* into JSON.
ALTER TABLE jobs ADD COLUMN input_seed bigint CHECK (input_seed IS NULL OR input_seed > 0);

-- The submission with the seed avod drew; the 7-argument form stays (a job
-- without one: its evaluations draw their own, nothing is reused).
CREATE FUNCTION avo_job_submit(p_spec jsonb, p_problem text, p_operator text, p_target text,
                               p_priority int, p_budget int, p_seed_source text, p_input_seed bigint)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE j jsonb;
BEGIN
    IF p_input_seed IS NOT NULL AND p_input_seed <= 0 THEN
        RAISE EXCEPTION 'input_seed must be positive';
    END IF;
    j := avo_job_submit(p_spec, p_problem, p_operator, p_target, p_priority, p_budget, p_seed_source);
    UPDATE jobs SET input_seed = p_input_seed WHERE id = (j->>'id')::bigint;
    RETURN j;
END $$;

-- The claim as in 013 (with "screen"), with the job's input seed last (NULL: no job, or a
-- job from before this migration).
DROP FUNCTION avo_claim(bigint, text, double precision);
CREATE FUNCTION avo_claim(p_worker bigint, p_target text, p_lease_s double precision)
RETURNS TABLE (id bigint, job_id bigint, candidate_id bigint, problem text, source text, attempts int,
               against_id bigint, against_source text, confidence double precision, screen boolean,
               job_seed bigint)
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
           c.purpose = 'search' AND c.against_id IS NOT NULL, j.input_seed
      FROM claimed c
      JOIN candidates cand ON cand.id = c.candidate_id
      JOIN sources s ON s.sha256 = cand.sha256
      LEFT JOIN candidates ag ON ag.id = c.against_id
      LEFT JOIN sources sa ON sa.sha256 = ag.sha256
      LEFT JOIN jobs j ON j.id = c.job_id;
END $$;
