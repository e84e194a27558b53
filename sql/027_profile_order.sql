-- Profiles nobody waits for go after the evaluations, and a new best's
-- profile is skipped once the candidate is no island's best (issue 20:
-- the GPU's time). A campaign on an H100 (2026-12-07, docs/benchmarks.md)
-- spent 29 s of its 142 on six 'new_best' profiles claimed before queued
-- evaluations, four of them of candidates a later best had replaced.
--
-- avo_claim_profile(worker, target, lease, p_background):
--   p_background false: only the profiles someone waits for ('agent',
--     'user'), which the worker claims before an evaluation;
--   p_background true: any, the waited-for first, which the worker claims
--     when no evaluation is queued for it. Before it claims, a queued
--     'new_best' profile whose candidate is no longer any island's best is
--     closed 'done' with the outcome 'superseded' (no counters; the
--     island's later best has a profile of its own queued).
-- The three-argument form (workers before this) claims as before.
CREATE OR REPLACE FUNCTION avo_claim_profile(p_worker bigint, p_target text, p_lease_s double precision,
                                             p_background boolean)
RETURNS TABLE (id bigint, job_id bigint, candidate_id bigint, problem text, config text, source text, attempts int)
LANGUAGE plpgsql AS $$
DECLARE tc jsonb;
BEGIN
    UPDATE profiles SET state = 'failed', finished_at = now(), lease_expires = NULL,
           result = '{"outcome": "crash", "detail": "its worker was lost twice while profiling it"}'
     WHERE profiles.state = 'running' AND profiles.lease_expires < now() AND profiles.attempts >= 2;
    IF p_background THEN
        UPDATE profiles q SET state = 'done', finished_at = now(),
               result = jsonb_build_object('outcome', 'superseded', 'mode', 'profile', 'aggregate', NULL,
                   'configs', '[]'::jsonb,
                   'detail', format('not profiled: candidate %s was no longer an island''s best when a worker '
                                    'was free for it (a new best''s profile waits for the queued evaluations; '
                                    'the later best has its own)', q.candidate_id))
         WHERE q.state = 'queued' AND q.why = 'new_best' AND q.target = p_target
           AND NOT EXISTS (SELECT 1 FROM islands i WHERE i.job_id = q.job_id AND i.best_candidate = q.candidate_id);
    END IF;
    SELECT w.toolchain INTO tc FROM workers w WHERE w.id = p_worker;
    RETURN QUERY
    WITH next AS (
        SELECT q.id FROM profiles q LEFT JOIN jobs j ON j.id = q.job_id
         WHERE q.target = p_target
           AND (q.state = 'queued' OR (q.state = 'running' AND q.lease_expires < now()))
           AND (p_background OR q.why <> 'new_best')
           AND (j.spec->'toolchain' IS NULL OR avo_toolchain_match(tc, j.spec->'toolchain'))
         ORDER BY (q.why = 'new_best'), q.id LIMIT 1 FOR UPDATE OF q SKIP LOCKED
    ), claimed AS (
        UPDATE profiles p
           SET state = 'running', worker_id = p_worker, claimed_at = now(), attempts = p.attempts + 1,
               lease_expires = now() + make_interval(secs => p_lease_s)
          FROM next WHERE p.id = next.id
        RETURNING p.id, p.job_id, p.candidate_id, p.problem, p.config, p.attempts
    )
    SELECT c.id, c.job_id, c.candidate_id, c.problem, c.config, s.body, c.attempts
      FROM claimed c
      JOIN candidates cand ON cand.id = c.candidate_id
      JOIN sources s ON s.sha256 = cand.sha256;
END $$;

CREATE OR REPLACE FUNCTION avo_claim_profile(p_worker bigint, p_target text, p_lease_s double precision)
RETURNS TABLE (id bigint, job_id bigint, candidate_id bigint, problem text, config text, source text, attempts int)
LANGUAGE sql AS $$
    SELECT * FROM avo_claim_profile(p_worker, p_target, p_lease_s, true);
$$;

-- A request for a candidate's profile (sql/011) that finds its queued
-- 'new_best' task takes it over: someone now waits for it, so it goes
-- before the evaluations and is never skipped as superseded. The row is
-- locked first, so a background claim closing it meanwhile makes the
-- request find it no longer queued (and queue its own) rather than return
-- a task that will never run. A superseded task is not reused as the
-- agent's finished profile (it has no counters).
CREATE OR REPLACE FUNCTION avo_profile_request(p_candidate bigint, p_config text, p_why text)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    pid bigint;
BEGIN
    SELECT p.id INTO pid FROM profiles p
     WHERE p.candidate_id = p_candidate AND p.config IS NOT DISTINCT FROM p_config
       AND (p.state IN ('queued', 'running')
            OR (p_why = 'agent' AND p.state = 'done' AND p.result->>'outcome' IS DISTINCT FROM 'superseded'))
     ORDER BY p.id DESC LIMIT 1 FOR UPDATE;
    IF pid IS NOT NULL THEN
        UPDATE profiles SET why = p_why WHERE profiles.id = pid AND profiles.why = 'new_best'
                                          AND profiles.state = 'queued';
        RETURN pid;
    END IF;
    INSERT INTO profiles (job_id, candidate_id, config, why, problem, target)
    SELECT c.job_id, c.id, p_config, p_why, j.problem, j.target
      FROM candidates c JOIN jobs j ON j.id = c.job_id
     WHERE c.id = p_candidate
    RETURNING id INTO pid;
    RETURN pid;
END $$;

-- A candidate becomes an island's best again (a retired best's island
-- goes back to an earlier version, docs/jobs.md; a migration): its task
-- is queued again when the one it had was closed superseded, and not when
-- a request took its task over (no second task for the same counters).
CREATE OR REPLACE FUNCTION avo_profile_new_best() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.best_candidate IS NOT NULL
       AND (TG_OP = 'INSERT' OR OLD.best_candidate IS DISTINCT FROM NEW.best_candidate)
       AND NOT EXISTS (SELECT 1 FROM profiles p
                        WHERE p.candidate_id = NEW.best_candidate
                          AND (p.why = 'new_best' OR p.config IS NULL)
                          AND p.result->>'outcome' IS DISTINCT FROM 'superseded') THEN
        INSERT INTO profiles (job_id, candidate_id, why, problem, target)
        SELECT NEW.job_id, NEW.best_candidate, 'new_best', j.problem, j.target
          FROM jobs j WHERE j.id = NEW.job_id;
    END IF;
    RETURN NULL;
END $$;
