-- Profile tasks (sql/011) held to what their job pinned, as evaluations are
-- (issue 21): a worker claims a job's profile only where its toolchain
-- meets the job's constraints (sql/018's avo_toolchain_match, the worker's
-- record read once per claim), and the worker compares the package on disk
-- with the job's pin before running it (daemon/worker/queue.c reads
-- jobs.problem_hash and problem_files beside the claim).
CREATE OR REPLACE FUNCTION avo_claim_profile(p_worker bigint, p_target text, p_lease_s double precision)
RETURNS TABLE (id bigint, job_id bigint, candidate_id bigint, problem text, config text, source text, attempts int)
LANGUAGE plpgsql AS $$
DECLARE tc jsonb;
BEGIN
    UPDATE profiles SET state = 'failed', finished_at = now(), lease_expires = NULL,
           result = '{"outcome": "crash", "detail": "its worker was lost twice while profiling it"}'
     WHERE profiles.state = 'running' AND profiles.lease_expires < now() AND profiles.attempts >= 2;
    SELECT w.toolchain INTO tc FROM workers w WHERE w.id = p_worker;
    RETURN QUERY
    WITH next AS (
        SELECT q.id FROM profiles q LEFT JOIN jobs j ON j.id = q.job_id
         WHERE q.target = p_target
           AND (q.state = 'queued' OR (q.state = 'running' AND q.lease_expires < now()))
           AND (j.spec->'toolchain' IS NULL OR avo_toolchain_match(tc, j.spec->'toolchain'))
         ORDER BY q.id LIMIT 1 FOR UPDATE OF q SKIP LOCKED
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
