-- Dead workers: an evaluation whose lease expired is requeued by avod's
-- rescuer with attempt+1 and exponential backoff with jitter, up to a
-- maximum of attempts, then failed with the reason. Both this UPDATE and
-- avo_complete re-check state and lease owner, so a rescue cannot overwrite
-- a finished evaluation and a late worker cannot overwrite a rescued one.

ALTER TABLE evaluations ADD COLUMN available_at timestamptz;

CREATE OR REPLACE FUNCTION avo_claim(p_worker bigint, p_target text, p_lease_s double precision)
RETURNS TABLE (id bigint, job_id bigint, candidate_id bigint, problem text, source text, attempts int)
LANGUAGE sql AS $$
    WITH next AS (
        SELECT e.id FROM evaluations e
         WHERE e.state = 'queued' AND e.target = p_target
           AND (e.available_at IS NULL OR e.available_at <= now())
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
$$;

CREATE FUNCTION avo_rescue(p_max_attempts int, p_backoff_s double precision) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE n_requeued int; n_failed int;
BEGIN
    WITH expired AS (
        SELECT id FROM evaluations
         WHERE state = 'running' AND lease_expires < now() AND attempts < p_max_attempts
         FOR UPDATE SKIP LOCKED
    )
    UPDATE evaluations e
       SET state = 'queued', worker_id = NULL, lease_expires = NULL,
           available_at = now() + make_interval(secs =>
               p_backoff_s * power(2, e.attempts - 1) * (0.5 + random()))
      FROM expired WHERE e.id = expired.id AND e.state = 'running';
    GET DIAGNOSTICS n_requeued = ROW_COUNT;
    IF n_requeued > 0 THEN
        PERFORM pg_notify('avo_work', 'rescued');
    END IF;

    WITH expired AS (
        SELECT id FROM evaluations
         WHERE state = 'running' AND lease_expires < now() AND attempts >= p_max_attempts
         FOR UPDATE SKIP LOCKED
    )
    UPDATE evaluations e
       SET state = 'failed', outcome = 'crash', aggregate = 0, lease_expires = NULL, finished_at = now(),
           result = jsonb_build_object('outcome', 'crash', 'aggregate', 0, 'configs', '[]'::jsonb,
                       'detail', format('the worker running it was lost %s times (lease expired)', e.attempts))
      FROM expired WHERE e.id = expired.id AND e.state = 'running';
    GET DIAGNOSTICS n_failed = ROW_COUNT;

    -- Workers that stopped heartbeating are gone.
    UPDATE workers SET state = 'gone'
     WHERE state <> 'gone' AND last_seen < now() - interval '2 minutes';
    RETURN n_requeued + n_failed;
END $$;
