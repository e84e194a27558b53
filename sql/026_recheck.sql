-- Issue 20 (point 7, daemon side): a best that keeps failing as the
-- against is re-checked alone, and retired when it fails
-- (daemon/avod/evolve.c; docs/jobs.md, "When the best fails as the against").
--
-- Every proposal of an island is timed paired against the island's best,
-- and a failed pairing never commits. A best that fails whenever it runs
-- again (a race, a kernel right only by chance, one that can tell it is
-- the against) would leave its island's every later result "pairing
-- failed", for good. The engine counts an island's consecutive pairing
-- failures against its best (islands.pair_fails); at three it queues an
-- evaluation of the best alone (purpose 'recheck': no against, outside the
-- budget, its cost the job's). A recheck that ends with a verdict on the
-- candidate (state 'done') other than ok retires the best
-- (candidates.retired: why): every island that held it goes back to the
-- best it had been measured against, the job's best too; one the machine
-- failed (state 'failed': a lost worker, a package mismatch) keeps it. The pairing
-- failures alone never retire anything: a candidate can make its own
-- pairing fail.

ALTER TABLE evaluations DROP CONSTRAINT evaluations_purpose_check;
ALTER TABLE evaluations ADD CONSTRAINT evaluations_purpose_check
    CHECK (purpose IN ('search','final','compare','revalidate','recheck'));

ALTER TABLE islands ADD COLUMN pair_fails int NOT NULL DEFAULT 0 CHECK (pair_fails >= 0);

-- NULL: not retired; else why (its recheck's outcome and detail).
ALTER TABLE candidates ADD COLUMN retired text;

-- The snapshot as in 012, with each island's pairing failures, each tried
-- candidate's against (of its first search evaluation), commit,
-- retirement, rechecks that crashed or timed out and rechecks it passed
-- (state done: verdicts on it), the finished rechecks
-- not yet applied and the candidates being re-checked. Every subquery is
-- the job's own (evaluations_job): a snapshot costs the job, not the table.
ALTER FUNCTION avo_job_snapshot(bigint) RENAME TO avo_job_snapshot_025;
CREATE FUNCTION avo_job_snapshot(p_id bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT avo_job_snapshot_025(p_id) || jsonb_build_object(
        'islands', COALESCE((SELECT jsonb_agg(jsonb_build_object(
                        'idx', i.idx, 'head', i.head, 'best_candidate', i.best_candidate,
                        'best', i.best, 'commits', i.commits, 'stale', i.stale, 'level', i.level,
                        'migrations', i.migrations, 'pair_fails', i.pair_fails,
                        'inflight', (SELECT count(*) FROM evaluations e JOIN candidates c ON c.id = e.candidate_id
                                      WHERE e.job_id = p_id AND c.island = i.idx AND e.purpose = 'search'
                                        AND (e.state IN ('queued','running') OR (c.hold AND NOT e.consumed)))) ORDER BY i.idx)
                      FROM islands i WHERE i.job_id = p_id), '[]'::jsonb),
        'tried', COALESCE((SELECT jsonb_agg(jsonb_build_object(
                        'candidate', c.id, 'knobs', c.knobs, 'outcome', c.outcome,
                        'aggregate', c.aggregate, 'island', c.island, 'committed', c.committed,
                        'retired', c.retired IS NOT NULL, 'against', a.against_id,
                        'recheck_faults', COALESCE(f.faults, 0), 'rechecks_kept', COALESCE(f.kept, 0)) ORDER BY c.id)
                      FROM candidates c
                      LEFT JOIN (SELECT DISTINCT ON (candidate_id) candidate_id, against_id
                                   FROM evaluations WHERE job_id = p_id AND purpose = 'search'
                                  ORDER BY candidate_id, id) a ON a.candidate_id = c.id
                      LEFT JOIN (SELECT candidate_id,
                                        count(*) FILTER (WHERE outcome IN ('crash','timeout')) AS faults,
                                        count(*) FILTER (WHERE outcome = 'ok') AS kept
                                   FROM evaluations WHERE job_id = p_id AND purpose = 'recheck' AND consumed
                                    AND state = 'done'
                                  GROUP BY candidate_id) f ON f.candidate_id = c.id
                     WHERE c.job_id = p_id), '[]'::jsonb),
        'rechecked', COALESCE((SELECT jsonb_agg(jsonb_build_object(
                        'eval', e.id, 'candidate', e.candidate_id, 'state', e.state, 'outcome', e.outcome,
                        'aggregate', e.aggregate, 'detail', e.result->>'detail') ORDER BY e.id)
                      FROM evaluations e
                     WHERE e.job_id = p_id AND e.purpose = 'recheck' AND e.state IN ('done','failed')
                       AND NOT e.consumed), '[]'::jsonb),
        'rechecking', COALESCE((SELECT jsonb_agg(DISTINCT e.candidate_id)
                      FROM evaluations e
                     WHERE e.job_id = p_id AND e.purpose = 'recheck'
                       AND (e.state IN ('queued','running') OR NOT e.consumed)), '[]'::jsonb));
$$;

-- avo_job_apply as in 022, with the rechecks around it. First, under the
-- job's lock: each applied recheck consumed (its cost the job's) and, when
-- it retired its candidate, why; the job's best where a retirement moved
-- it ("best_candidate", the step's last word on it, so the results applied
-- next and a job_finished see it); the rechecks' events ("recheck_events"),
-- before the results judged after them. Then as in 022. Then each island's
-- pairing failures, and the rechecks the step queues ("recheck":
-- [{candidate, island}]) while the search runs (none once the final
-- measurement is under way, whose start cancels those still queued).
ALTER FUNCTION avo_job_apply(bigint, jsonb) RENAME TO avo_job_apply_025;
CREATE FUNCTION avo_job_apply(p_id bigint, d jsonb) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    x jsonb; n int; st text; fin jsonb; prio int; tgt text; prob text; gpu text;
BEGIN
    SELECT state INTO st FROM jobs WHERE id = p_id FOR UPDATE;
    IF NOT FOUND OR st NOT IN ('queued','running') THEN
        RETURN false;
    END IF;
    FOR x IN SELECT * FROM jsonb_array_elements(COALESCE(d->'rechecked', '[]'::jsonb)) LOOP
        UPDATE evaluations SET consumed = true
         WHERE id = (x->>'eval')::bigint AND job_id = p_id AND purpose = 'recheck'
           AND state IN ('done','failed') AND NOT consumed;
        GET DIAGNOSTICS n = ROW_COUNT;
        IF n <> 1 THEN
            RAISE EXCEPTION 'stale decision: recheck % already applied', x->>'eval';
        END IF;
        UPDATE jobs j SET gpu_seconds = j.gpu_seconds + k.gpu_s, cpu_seconds = j.cpu_seconds + k.cpu_s,
                          energy_j = j.energy_j + k.energy_j
          FROM evaluations e, LATERAL avo_eval_cost(e.target, e.result) k
         WHERE j.id = p_id AND e.id = (x->>'eval')::bigint;
        IF jsonb_typeof(x->'retired') = 'string' THEN
            UPDATE candidates SET retired = x->>'retired'
             WHERE id = (x->>'candidate')::bigint AND job_id = p_id;
        END IF;
    END LOOP;
    IF jsonb_typeof(d->'best_candidate') = 'number' THEN
        UPDATE jobs SET best_candidate = (d->>'best_candidate')::bigint WHERE id = p_id;
    END IF;
    FOR x IN SELECT * FROM jsonb_array_elements(COALESCE(d->'recheck_events', '[]'::jsonb)) LOOP
        PERFORM avo_event(p_id, x->>'kind', COALESCE(x->'data', '{}'::jsonb));
    END LOOP;
    IF NOT avo_job_apply_025(p_id, d) THEN
        RETURN false;
    END IF;
    FOR x IN SELECT * FROM jsonb_array_elements(COALESCE(d->'islands', '[]'::jsonb)) LOOP
        UPDATE islands SET pair_fails = COALESCE((x->>'pair_fails')::int, 0)
         WHERE job_id = p_id AND idx = (x->>'idx')::int;
    END LOOP;
    SELECT state, finishing, priority, target, problem, spec->>'gpu' INTO st, fin, prio, tgt, prob, gpu
      FROM jobs WHERE id = p_id;
    IF fin IS NOT NULL THEN
        UPDATE evaluations SET state = 'cancelled', finished_at = now()
         WHERE job_id = p_id AND state = 'queued' AND purpose = 'recheck';
    ELSIF st = 'running' THEN
        FOR x IN SELECT * FROM jsonb_array_elements(COALESCE(d->'recheck', '[]'::jsonb)) LOOP
            INSERT INTO evaluations (job_id, candidate_id, problem, target, priority, gpu_model, purpose)
            SELECT p_id, c.id, prob, tgt, prio, gpu, 'recheck'
              FROM candidates c WHERE c.id = (x->>'candidate')::bigint AND c.job_id = p_id;
        END LOOP;
    END IF;
    RETURN true;
END $$;

-- A candidate as in 019, saying whether it was retired and why
-- ("retired": null, or its recheck's outcome and detail).
ALTER FUNCTION avo_candidate_json(bigint, boolean) RENAME TO avo_candidate_json_025;
CREATE FUNCTION avo_candidate_json(p_id bigint, p_with_source boolean) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT c || jsonb_build_object('retired', (SELECT retired FROM candidates WHERE id = p_id))
      FROM avo_candidate_json_025(p_id, p_with_source) c;
$$;

-- The job as in 023, its counts by outcome of the search's evaluations
-- only (012 counted every consumed evaluation; rechecks are consumed too).
ALTER FUNCTION avo_job_json(bigint) RENAME TO avo_job_json_025;
CREATE FUNCTION avo_job_json(p_id bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN j->'evaluations' ? 'by_outcome' THEN
                jsonb_set(j, '{evaluations,by_outcome}', COALESCE((
                    SELECT jsonb_object_agg(o, n) FROM (
                        SELECT outcome o, count(*) n FROM evaluations
                         WHERE job_id = p_id AND consumed AND purpose = 'search' GROUP BY outcome) b), '{}'::jsonb))
           ELSE j END
      FROM avo_job_json_025(p_id) j;
$$;
