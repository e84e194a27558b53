-- Microbenchmarks: standalone programs an agent writes to probe the
-- hardware (latency, bandwidth, instruction throughput). They are not
-- candidates and never touch a lineage or a job's evaluation budget, so they
-- have their own small queue, claimed by the same workers (target as for
-- evaluations), ahead of evaluations: an agent waits on the answer.
CREATE TABLE programs (
    id            bigserial PRIMARY KEY,
    job_id        bigint NOT NULL REFERENCES jobs (id),
    step_id       bigint REFERENCES agent_steps (id),
    target        text NOT NULL,
    language      text NOT NULL CHECK (language IN ('c', 'cuda')),
    source        text NOT NULL,
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
CREATE INDEX programs_queued ON programs (target, id) WHERE state = 'queued';
CREATE INDEX programs_step ON programs (step_id);

-- The workers of a target wake on the same channel as for evaluations.
CREATE OR REPLACE FUNCTION avo_notify_program() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('avo_work', NEW.target);
    RETURN NULL;
END $$;
CREATE TRIGGER programs_notify AFTER INSERT ON programs FOR EACH ROW EXECUTE FUNCTION avo_notify_program();

-- One queued program for this worker's target, or none. A running program
-- whose lease ran out (its worker died) is queued again by the same claim,
-- once: a program that loses its worker twice is failed, not retried.
CREATE OR REPLACE FUNCTION avo_claim_program(p_worker bigint, p_target text, p_lease_s double precision)
RETURNS TABLE (id bigint, language text, source text)
LANGUAGE sql AS $$
    UPDATE programs SET state = 'failed', finished_at = now(), lease_expires = NULL,
           result = '{"outcome": "crash", "detail": "its worker was lost twice while running it"}'
     WHERE state = 'running' AND lease_expires < now() AND attempts >= 2;
    UPDATE programs p
       SET state = 'running', worker_id = p_worker, claimed_at = now(), attempts = p.attempts + 1,
           lease_expires = now() + make_interval(secs => p_lease_s)
      FROM (SELECT q.id FROM programs q
             WHERE q.target = p_target
               AND (q.state = 'queued' OR (q.state = 'running' AND q.lease_expires < now()))
             ORDER BY q.id LIMIT 1 FOR UPDATE SKIP LOCKED) next
     WHERE p.id = next.id
    RETURNING p.id, p.language, p.source;
$$;

-- Store a program's result; false when it is no longer this worker's.
CREATE OR REPLACE FUNCTION avo_complete_program(p_id bigint, p_worker bigint, p_result jsonb)
RETURNS boolean LANGUAGE sql AS $$
    WITH done AS (
        UPDATE programs SET state = 'done', result = p_result, finished_at = now(), lease_expires = NULL
         WHERE id = p_id AND worker_id = p_worker AND state = 'running'
        RETURNING 1)
    SELECT EXISTS (SELECT 1 FROM done);
$$;
