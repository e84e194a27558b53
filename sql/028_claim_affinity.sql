-- A worker claims the evaluations of the jobs it holds resident state for
-- first (issue 24: every GPU busy; issue 20, point 9). A GPU worker keeps a
-- checker per job (avo-worker --serve, --serve-slots of them, the least
-- recently used replaced) and the references of each job's warm-up sets
-- (the reference cache): an evaluation of another job pays a checker's
-- start and a reference upload. With plain queue order and more jobs than
-- slots on a worker (a campaign of 2N jobs over N GPUs), most claims were
-- of a job it held nothing for.
--
-- avo_claim(worker, target, lease, p_resident): p_resident, the jobs the
-- worker holds state for (NULL or empty: none), is preferred when
--   - one of them has a queued evaluation this worker may claim, of a
--     priority no lower than the queue's head (the first queued evaluation
--     of the target by priority, then age), and
--   - that head has waited less than 60 s: work no
--     worker holds state for is never left longer than that; after it the
--     plain order (priority, age) claims again, and the worker that takes
--     it then holds that job.
-- Teams keep their order (the fair share picks the team first; affinity
-- chooses among that team's jobs). The three-argument form claims as
-- before (NULL resident).
CREATE FUNCTION avo_claim_prefer(p_worker bigint, p_target text, p_lease_s double precision, p_tc jsonb,
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
         WHERE e.state = 'queued' AND e.target = p_target
           AND (p_among = 'all' OR e.job_id = ANY (p_jobs))
         ORDER BY e.priority DESC, e.id LIMIT 1;
        SELECT max(e.priority) INTO mine_prio FROM evaluations e
         WHERE e.state = 'queued' AND e.target = p_target AND e.job_id = ANY (mine);
        IF cardinality(mine) > 0 AND head_at > now() - interval '60 seconds' AND mine_prio >= head_prio THEN
            RETURN QUERY SELECT * FROM avo_claim_from(p_worker, p_target, p_lease_s, p_tc, 'jobs', mine);
            IF FOUND THEN RETURN; END IF;
        END IF;
    END IF;
    RETURN QUERY SELECT * FROM avo_claim_from(p_worker, p_target, p_lease_s, p_tc, p_among, p_jobs);
END $$;

CREATE FUNCTION avo_claim(p_worker bigint, p_target text, p_lease_s double precision, p_resident bigint[])
RETURNS TABLE (id bigint, job_id bigint, candidate_id bigint, problem text, source text, attempts int,
               against_id bigint, against_source text, confidence double precision, screen boolean,
               job_seed bigint)
LANGUAGE plpgsql AS $$
DECLARE tc jsonb; t record; teams text[];
BEGIN
    SELECT w.toolchain INTO tc FROM workers w WHERE w.id = p_worker;
    SELECT array_agg(DISTINCT COALESCE(j.team, '')) INTO teams FROM jobs j WHERE j.state IN ('queued','running');
    -- One team and no limits (the common case): no order to keep and
    -- nothing to count, so no lock either (sql/022_quotas.sql).
    IF COALESCE(cardinality(teams), 0) <= 1 AND NOT EXISTS (
           SELECT 1 FROM team_quotas q WHERE q.jobs IS NOT NULL OR q.evals_in_flight IS NOT NULL
                                          OR q.gpu_s_day IS NOT NULL OR q.gpu_s_week IS NOT NULL) THEN
        RETURN QUERY SELECT * FROM avo_claim_prefer(p_worker, p_target, p_lease_s, tc, 'all', NULL, p_resident);
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('avo_claim'));
    FOR t IN
        SELECT COALESCE(j.team, '') AS team, array_agg(j.id) AS ids
          FROM jobs j WHERE j.state IN ('queued','running') GROUP BY 1
         ORDER BY avo_team_load(COALESCE(j.team, '')), 1
    LOOP
        CONTINUE WHEN avo_team_blocked(t.team) IS NOT NULL;
        RETURN QUERY SELECT * FROM avo_claim_prefer(p_worker, p_target, p_lease_s, tc, 'jobs', t.ids, p_resident);
        IF FOUND THEN RETURN; END IF;
    END LOOP;
    RETURN QUERY SELECT * FROM avo_claim_from(p_worker, p_target, p_lease_s, tc, 'inactive', NULL);
END $$;

CREATE OR REPLACE FUNCTION avo_claim(p_worker bigint, p_target text, p_lease_s double precision)
RETURNS TABLE (id bigint, job_id bigint, candidate_id bigint, problem text, source text, attempts int,
               against_id bigint, against_source text, confidence double precision, screen boolean,
               job_seed bigint)
LANGUAGE sql AS $$
    SELECT * FROM avo_claim(p_worker, p_target, p_lease_s, NULL::bigint[]);
$$;
