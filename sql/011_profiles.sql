-- Hardware counters as their own queued task (issue 20, point 5;
-- docs/evaluation.md, "Counters"). An evaluation no longer runs the CUPTI
-- pass (seconds of kernel replay per configuration); a profile runs the
-- candidate's checked calls and then the counters, with no timing and no
-- score, for three reasons: the candidate became an island's best
-- ('new_best', queued here in the database, in the transaction that
-- applied it), the agent's profile tool ('agent'), or a person
-- (`avoctl profile`, 'user'). Claimed by the workers of the job's target,
-- between evaluations, like microbenchmarks (sql/007_programs.sql).
CREATE TABLE profiles (
    id            bigserial PRIMARY KEY,
    job_id        bigint NOT NULL REFERENCES jobs (id),
    candidate_id  bigint NOT NULL REFERENCES candidates (id),
    config        text,                 -- one configuration, or NULL: those counters.configs lists
    why           text NOT NULL CHECK (why IN ('new_best', 'agent', 'user')),
    problem       text NOT NULL,
    target        text NOT NULL,
    state         text NOT NULL DEFAULT 'queued'
                  CHECK (state IN ('queued', 'running', 'done', 'failed')),
    worker_id     bigint REFERENCES workers (id),
    attempts      int NOT NULL DEFAULT 0,
    lease_expires timestamptz,
    result        jsonb,
    created_at    timestamptz NOT NULL DEFAULT now(),
    claimed_at    timestamptz,
    finished_at   timestamptz
);
CREATE INDEX profiles_queued ON profiles (target, id) WHERE state = 'queued';
CREATE INDEX profiles_candidate ON profiles (candidate_id, id);

-- The workers of a target wake on the same channel as for evaluations.
CREATE OR REPLACE FUNCTION avo_notify_profile() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('avo_work', NEW.target);
    RETURN NULL;
END $$;
CREATE TRIGGER profiles_notify AFTER INSERT ON profiles FOR EACH ROW EXECUTE FUNCTION avo_notify_profile();

-- A profile of a candidate, or the one already asked for: a queued or
-- running profile of the same candidate and configuration is returned
-- instead of a second one, and so (for the agent, which wants counters, not
-- a fresh run) is a finished one. NULL when there is no such candidate.
-- The configuration is checked by avod against the problem's (the
-- database does not read problem files).
CREATE OR REPLACE FUNCTION avo_profile_request(p_candidate bigint, p_config text, p_why text)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    pid bigint;
BEGIN
    SELECT p.id INTO pid FROM profiles p
     WHERE p.candidate_id = p_candidate AND p.config IS NOT DISTINCT FROM p_config
       AND (p.state IN ('queued', 'running') OR (p_why = 'agent' AND p.state = 'done'))
     ORDER BY p.id DESC LIMIT 1;
    IF pid IS NOT NULL THEN
        RETURN pid;
    END IF;
    INSERT INTO profiles (job_id, candidate_id, config, why, problem, target)
    SELECT c.job_id, c.id, p_config, p_why, j.problem, j.target
      FROM candidates c JOIN jobs j ON j.id = c.job_id
     WHERE c.id = p_candidate
    RETURNING id INTO pid;
    RETURN pid;
END $$;

-- A candidate that becomes an island's best is profiled once: the islands
-- row changes in the transaction that applies the result (avo_job_apply),
-- so the task is queued exactly when the change is committed, and a
-- candidate profiled for that reason before (another island adopting it,
-- a migration) is not profiled again.
CREATE OR REPLACE FUNCTION avo_profile_new_best() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.best_candidate IS NOT NULL
       AND (TG_OP = 'INSERT' OR OLD.best_candidate IS DISTINCT FROM NEW.best_candidate)
       AND NOT EXISTS (SELECT 1 FROM profiles p
                        WHERE p.candidate_id = NEW.best_candidate AND p.why = 'new_best') THEN
        INSERT INTO profiles (job_id, candidate_id, why, problem, target)
        SELECT NEW.job_id, NEW.best_candidate, 'new_best', j.problem, j.target
          FROM jobs j WHERE j.id = NEW.job_id;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER islands_profile_new_best AFTER INSERT OR UPDATE OF best_candidate ON islands
    FOR EACH ROW EXECUTE FUNCTION avo_profile_new_best();

-- One queued profile for this worker's target, or none, with the
-- candidate's source. A running profile whose lease ran out (its worker
-- died) is queued again by the same claim, once: one that loses its worker
-- twice is failed, not retried (as programs are).
CREATE OR REPLACE FUNCTION avo_claim_profile(p_worker bigint, p_target text, p_lease_s double precision)
RETURNS TABLE (id bigint, job_id bigint, candidate_id bigint, problem text, config text, source text, attempts int)
LANGUAGE sql AS $$
    UPDATE profiles SET state = 'failed', finished_at = now(), lease_expires = NULL,
           result = '{"outcome": "crash", "detail": "its worker was lost twice while profiling it"}'
     WHERE state = 'running' AND lease_expires < now() AND attempts >= 2;
    WITH next AS (
        SELECT q.id FROM profiles q
         WHERE q.target = p_target
           AND (q.state = 'queued' OR (q.state = 'running' AND q.lease_expires < now()))
         ORDER BY q.id LIMIT 1 FOR UPDATE SKIP LOCKED
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
$$;

-- Renew a running profile's lease; false when it is no longer this worker's.
CREATE OR REPLACE FUNCTION avo_renew_profile(p_id bigint, p_worker bigint, p_lease_s double precision)
RETURNS boolean LANGUAGE sql AS $$
    WITH renewed AS (
        UPDATE profiles SET lease_expires = now() + make_interval(secs => p_lease_s)
         WHERE id = p_id AND worker_id = p_worker AND state = 'running'
        RETURNING 1)
    SELECT EXISTS (SELECT 1 FROM renewed);
$$;

-- Store a profile's result: done when the candidate passed its checked
-- calls (the counters are in it, or why they are unavailable), failed
-- otherwise (the result says why). False when it is no longer this worker's.
CREATE OR REPLACE FUNCTION avo_complete_profile(p_id bigint, p_worker bigint, p_result jsonb)
RETURNS boolean LANGUAGE sql AS $$
    WITH done AS (
        UPDATE profiles
           SET state = CASE WHEN p_result->>'outcome' = 'ok' THEN 'done' ELSE 'failed' END,
               result = p_result, finished_at = now(), lease_expires = NULL
         WHERE id = p_id AND worker_id = p_worker AND state = 'running'
        RETURNING 1)
    SELECT EXISTS (SELECT 1 FROM done);
$$;

-- One profile as the API shows it; NULL when there is none. Volatile, not
-- stable: avod calls it on the id avo_profile_request returns in the same
-- statement, and a stable function would not see the row just inserted.
CREATE OR REPLACE FUNCTION avo_profile_json(p_id bigint) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_object(
        'id', p.id, 'job', p.job_id, 'candidate', p.candidate_id, 'config', p.config, 'why', p.why,
        'problem', p.problem, 'target', p.target, 'state', p.state, 'attempts', p.attempts,
        'worker', p.worker_id, 'result', p.result, 'created_at', p.created_at,
        'claimed_at', p.claimed_at, 'finished_at', p.finished_at)
      FROM profiles p WHERE p.id = p_id;
$$;

-- A candidate's latest profile (whatever its state), or NULL.
CREATE OR REPLACE FUNCTION avo_candidate_profile(p_candidate bigint) RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT avo_profile_json(max(p.id)) FROM profiles p WHERE p.candidate_id = p_candidate;
$$;
