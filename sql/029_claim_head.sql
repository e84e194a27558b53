-- Which queued evaluations a worker may claim, in one place: the claim
-- (sql/022_quotas.sql's avo_claim_from) and the preference for a worker's
-- resident jobs (sql/028_claim_affinity.sql) ask the same question.
-- 028 decided on "the queue's head" (its priority and its wait) over every
-- queued evaluation of the target, including those this worker can never
-- take: pinned to another GPU model, bound to another worker, backing off,
-- or wanting another toolchain. One such evaluation a minute old, or of a
-- higher priority, switched the preference off for every worker of the
-- target (on a host of H100s and H200s, an H200's backlog made the H100
-- workers' kept checkers start afresh). The head is now the first
-- evaluation this worker may claim (tests/unit/test_claim_affinity.c,
-- test_head_is_what_the_worker_may_claim).
CREATE FUNCTION avo_claimable(e evaluations, p_worker bigint, p_tc jsonb)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT (e.available_at IS NULL OR e.available_at <= now())
       AND (e.gpu_model IS NULL OR EXISTS (
              SELECT 1 FROM workers w, jsonb_array_elements(w.devices) d
               WHERE w.id = p_worker AND d->>'kind' = 'gpu'
                 AND strpos(lower(d->>'name'), lower(e.gpu_model)) > 0))
       AND (e.toolchain IS NULL OR avo_toolchain_match(p_tc, e.toolchain))
       AND (e.on_worker IS NULL OR e.on_worker = p_worker)
$$;

CREATE OR REPLACE FUNCTION avo_claim_from(p_worker bigint, p_target text, p_lease_s double precision, p_tc jsonb,
                                          p_among text, p_jobs bigint[])
RETURNS TABLE (id bigint, job_id bigint, candidate_id bigint, problem text, source text, attempts int,
               against_id bigint, against_source text, confidence double precision, screen boolean,
               job_seed bigint)
LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY
    WITH next AS (
        SELECT e.id FROM evaluations e
         WHERE e.state = 'queued' AND e.target = p_target AND avo_claimable(e, p_worker, p_tc)
           AND CASE p_among WHEN 'all' THEN true
                            WHEN 'jobs' THEN e.job_id = ANY (p_jobs)
                            ELSE NOT EXISTS (SELECT 1 FROM jobs a
                                              WHERE a.id = e.job_id AND a.state IN ('queued','running')) END
         ORDER BY e.priority DESC, e.id
         LIMIT 1
         FOR UPDATE SKIP LOCKED
    ), claimed AS (
        UPDATE evaluations e
           SET state = 'running', worker_id = p_worker, attempts = e.attempts + 1,
               claimed_at = now(), lease_expires = now() + make_interval(secs => p_lease_s)
          FROM next WHERE e.id = next.id
        RETURNING e.id, e.job_id, e.candidate_id, e.problem, e.attempts, e.against_id, e.confidence, e.purpose
    )
    SELECT c.id, c.job_id, c.candidate_id, c.problem, s.body, c.attempts, c.against_id, sa.body,
           COALESCE(c.confidence, (j.spec->'commit'->>'confidence')::float8, 0.95),
           c.purpose = 'search' AND c.against_id IS NOT NULL, j.input_seed
      FROM claimed c
      JOIN candidates cand ON cand.id = c.candidate_id
      JOIN sources s ON s.sha256 = cand.sha256
      LEFT JOIN candidates ag ON ag.id = c.against_id
      LEFT JOIN sources sa ON sa.sha256 = ag.sha256
      LEFT JOIN jobs j ON j.id = c.job_id;
END $$;

CREATE OR REPLACE FUNCTION avo_claim_prefer(p_worker bigint, p_target text, p_lease_s double precision, p_tc jsonb,
                                            p_among text, p_jobs bigint[], p_resident bigint[])
RETURNS TABLE (id bigint, job_id bigint, candidate_id bigint, problem text, source text, attempts int,
               against_id bigint, against_source text, confidence double precision, screen boolean,
               job_seed bigint)
LANGUAGE plpgsql AS $$
DECLARE mine bigint[]; head_prio int; head_at timestamptz; mine_prio int;
BEGIN
    IF p_among <> 'inactive' AND COALESCE(cardinality(p_resident), 0) > 0 THEN
        mine := CASE p_among WHEN 'jobs' THEN ARRAY(SELECT unnest(p_resident) INTERSECT SELECT unnest(p_jobs))
                             ELSE p_resident END;
        SELECT e.priority, e.created_at INTO head_prio, head_at FROM evaluations e
         WHERE e.state = 'queued' AND e.target = p_target AND avo_claimable(e, p_worker, p_tc)
           AND (p_among = 'all' OR e.job_id = ANY (p_jobs))
         ORDER BY e.priority DESC, e.id LIMIT 1;
        SELECT max(e.priority) INTO mine_prio FROM evaluations e
         WHERE e.state = 'queued' AND e.target = p_target AND e.job_id = ANY (mine)
           AND avo_claimable(e, p_worker, p_tc);
        IF cardinality(mine) > 0 AND head_at > now() - interval '60 seconds' AND mine_prio >= head_prio THEN
            RETURN QUERY SELECT * FROM avo_claim_from(p_worker, p_target, p_lease_s, p_tc, 'jobs', mine);
            IF FOUND THEN RETURN; END IF;
        END IF;
    END IF;
    RETURN QUERY SELECT * FROM avo_claim_from(p_worker, p_target, p_lease_s, p_tc, p_among, p_jobs);
END $$;
