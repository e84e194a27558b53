-- Owners, teams, names and labels of jobs (issue 22, "Identity" and
-- "Permissions"; docs/operations.md, "Teams and quotas"). avod names the
-- principal that submitted a job (a unix user on its socket, a token's
-- principal on TCP) and that principal's team; a job from before this
-- migration has neither (owner NULL: any principal may change it, as
-- anyone could before). name and labels come from the job spec.
ALTER TABLE jobs
    ADD COLUMN owner text,
    ADD COLUMN team text,
    ADD COLUMN name text,
    ADD COLUMN labels jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(labels) = 'object');
CREATE INDEX jobs_owner ON jobs (owner, id);
CREATE INDEX jobs_team ON jobs (team, id);
CREATE INDEX jobs_labels ON jobs USING gin (labels);

-- The submission with its owner and team: the 9-argument form (016), then
-- who and what it is called, from the same transaction.
CREATE FUNCTION avo_job_submit(p_spec jsonb, p_problem text, p_operator text, p_target text,
                               p_priority int, p_budget int, p_seed_source text, p_input_seed bigint,
                               p_pin jsonb, p_owner text, p_team text)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE j jsonb; jid bigint;
BEGIN
    IF p_owner IS NULL OR p_owner = '' THEN
        RAISE EXCEPTION 'owner: required';
    END IF;
    j := avo_job_submit(p_spec, p_problem, p_operator, p_target, p_priority, p_budget, p_seed_source,
                        p_input_seed, p_pin);
    jid := (j->>'id')::bigint;
    UPDATE jobs SET owner = p_owner, team = NULLIF(p_team, ''), name = p_spec->>'name',
                    labels = COALESCE(p_spec->'labels', '{}')
     WHERE id = jid;
    RETURN avo_job_json(jid);
END $$;

-- The job as in 016, with who owns it and what it is called.
ALTER FUNCTION avo_job_json(bigint) RENAME TO avo_job_json_020;
CREATE FUNCTION avo_job_json(p_id bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT avo_job_json_020(j.id) || jsonb_build_object('owner', j.owner, 'team', j.team, 'name', j.name,
                                                        'labels', j.labels)
      FROM jobs j WHERE j.id = p_id;
$$;

-- A cancel on someone's behalf (avod checked the rule first: owner, team or
-- admin). When the one cancelling is not the owner, an "audit" event goes
-- into the job's stream before its job_finished, so a reader of the stream
-- sees who did it and by which rule. Returns what avo_job_cancel returns.
CREATE FUNCTION avo_job_cancel_as(p_id bigint, p_by text, p_by_team text, p_rule text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE st text; own text; tm text;
BEGIN
    SELECT state, owner, team INTO st, own, tm FROM jobs WHERE id = p_id FOR UPDATE;
    IF NOT FOUND THEN RETURN 'not_found'; END IF;
    IF st NOT IN ('queued','running') THEN RETURN 'finished'; END IF;
    IF own IS DISTINCT FROM p_by THEN
        PERFORM avo_event(p_id, 'audit', jsonb_build_object('action', 'cancel', 'by', p_by,
                                                            'by_team', NULLIF(p_by_team, ''), 'owner', own,
                                                            'team', tm, 'rule', p_rule));
    END IF;
    RETURN avo_job_cancel(p_id);
END $$;
