-- The candidate policy (issue 21, point 4; docs/evaluation.md, "Policy"):
-- a worker refuses a candidate whose source, kept intermediates or object
-- breaks a policy rule (undocumented PTX instructions, embedded binaries,
-- loading code at run time, including host files) as outcome
-- 'policy_violation', with the offending line in its detail and the finding
-- in result.policy. Like compile_error it is the candidate's verdict, not
-- the machine's: the evaluation is 'done' (never retried, counted among the
-- job's evaluations), its aggregate 0, never scored. avo_complete as in
-- 001 with the outcome added to the verdicts; outcomes are text, so no
-- type changes.
CREATE OR REPLACE FUNCTION avo_complete(p_eval bigint, p_worker bigint, p_outcome text,
                                        p_aggregate double precision, p_result jsonb)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE n int;
BEGIN
    UPDATE evaluations
       SET state = CASE WHEN p_outcome = 'ok' OR p_outcome IN
                        ('compile_error','crash','timeout','wrong_result','cheat_suspected','policy_violation')
                        THEN 'done' ELSE 'failed' END,
           outcome = p_outcome,
           -- never scored, whatever a worker sent
           aggregate = CASE WHEN p_outcome = 'policy_violation' THEN 0 ELSE p_aggregate END,
           result = p_result,
           finished_at = now(), lease_expires = NULL
     WHERE id = p_eval AND state = 'running' AND worker_id = p_worker;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n = 1;
END $$;
