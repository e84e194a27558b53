-- A job pins its problem package (issue 21, point 1; docs/jobs.md,
-- "Pinned problems"). At submission avod hashes the package as it is on
-- disk (daemon/common/avo_package.h: problem.json and every file it
-- names, read through links) and stores here:
--   problem_hash   the package hash (sha256 over the manifest)
--   problem_files  the manifest {"FILE": "sha256", ...}
--   problem_json   problem.json's text: the engine and the agent load the
--                  problem from it, never from the disk again
--   seed_text      the text of the package seed the job uses (spec.seed.name,
--                  or the default): what its first candidate and every tune
--                  candidate are rendered from
-- A restart of avod reads them back; a later edit of the package on disk
-- reaches new jobs only. Workers get problem_hash and problem_files with
-- their claim (the worker selects them beside avo_claim's row) and refuse,
-- as outcome 'package_mismatch', an evaluation whose problem.json,
-- reference or baseline on disk is not the pinned one. Jobs from before
-- this migration have none of them (NULL): they keep reading the package
-- from disk, as they did.
ALTER TABLE jobs
    ADD COLUMN problem_hash text CHECK (problem_hash IS NULL OR problem_hash ~ '^[0-9a-f]{64}$'),
    ADD COLUMN problem_files jsonb CHECK (problem_files IS NULL OR jsonb_typeof(problem_files) = 'object'),
    ADD COLUMN problem_json text,
    ADD COLUMN seed_text text;

-- The submission with the pin: {"hash", "files", "problem_json",
-- "seed_text"}, all four required; the 8-argument form stays (it pins
-- nothing).
CREATE FUNCTION avo_job_submit(p_spec jsonb, p_problem text, p_operator text, p_target text,
                               p_priority int, p_budget int, p_seed_source text, p_input_seed bigint,
                               p_pin jsonb)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE j jsonb; jid bigint;
BEGIN
    IF p_pin IS NULL OR jsonb_typeof(p_pin->'hash') <> 'string' OR jsonb_typeof(p_pin->'files') <> 'object'
       OR jsonb_typeof(p_pin->'problem_json') <> 'string' OR jsonb_typeof(p_pin->'seed_text') <> 'string' THEN
        RAISE EXCEPTION 'pin: needs hash, files, problem_json and seed_text';
    END IF;
    j := avo_job_submit(p_spec, p_problem, p_operator, p_target, p_priority, p_budget, p_seed_source,
                        p_input_seed);
    jid := (j->>'id')::bigint;
    UPDATE jobs SET problem_hash = p_pin->>'hash', problem_files = p_pin->'files',
                    problem_json = p_pin->>'problem_json', seed_text = p_pin->>'seed_text'
     WHERE id = jid;
    RETURN avo_job_json(jid);
END $$;

-- The job as in 012, with its package hash ("problem_hash": null for a job
-- from before this migration). The texts stay out of it: GET
-- /v1/jobs/{id}/problem/diff shows them against the disk.
ALTER FUNCTION avo_job_json(bigint) RENAME TO avo_job_json_015;
CREATE FUNCTION avo_job_json(p_id bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT avo_job_json_015(j.id) || jsonb_build_object('problem_hash', j.problem_hash)
      FROM jobs j WHERE j.id = p_id;
$$;

-- What `avoctl problem diff JOB` compares with the disk (NULL: no such job).
CREATE FUNCTION avo_job_pin(p_id bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('job', j.id, 'problem', j.problem, 'seed_name', j.spec->'seed'->>'name',
                              'hash', j.problem_hash, 'files', j.problem_files,
                              'problem_json', j.problem_json, 'seed_text', j.seed_text)
      FROM jobs j WHERE j.id = p_id;
$$;

-- A candidate as in 013, with the detail of its search evaluation when that
-- one failed rather than ran (state 'failed': a package_mismatch refusal, a
-- worker lost too often): 013 reads only 'done' evaluations, so `avoctl
-- show` had no reason to print for such a candidate.
ALTER FUNCTION avo_candidate_json(bigint, boolean) RENAME TO avo_candidate_json_015;
CREATE FUNCTION avo_candidate_json(p_id bigint, p_with_source boolean) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT c || COALESCE((SELECT jsonb_build_object('detail', e.result->>'detail', 'evaluation', e.id)
                            FROM evaluations e
                           WHERE e.candidate_id = p_id AND e.purpose = 'search' AND e.state = 'failed'
                             AND e.id > COALESCE((c->>'evaluation')::bigint, 0)
                           ORDER BY e.id DESC LIMIT 1), '{}'::jsonb)
      FROM avo_candidate_json_015(p_id, p_with_source) c;
$$;
