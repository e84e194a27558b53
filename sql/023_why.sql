-- Say why (issue 22, point 4; docs/api.md "Job detail" and "All events").
-- A job's state detail, a line that says what the job waits for or does
-- right now, computed where the data lives so status, list and watch show
-- the same words; what each worker is doing; and the events of every job
-- in one stream.

-- Workers that would claim work of a target, GPU model pin and toolchain
-- pin now: idle or busy (not draining, unhealthy or gone) and seen within
-- the rescuer's 2 minutes, as avo_toolchain_live (sql/018) counts them.
CREATE FUNCTION avo_live_workers(p_target text, p_gpu text, p_toolchain jsonb) RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT count(*) FROM workers w
     WHERE w.state IN ('idle', 'busy') AND w.last_seen > now() - interval '2 minutes' AND w.target = p_target
       AND (p_gpu IS NULL OR p_gpu = '' OR EXISTS (
              SELECT 1 FROM jsonb_array_elements(w.devices) d
               WHERE d->>'kind' = 'gpu' AND strpos(lower(d->>'name'), lower(p_gpu)) > 0))
       AND (p_toolchain IS NULL OR p_toolchain = '{}'::jsonb OR avo_toolchain_match(w.toolchain, p_toolchain));
$$;

-- What the job needs of a worker, as people read it: "sm_90 / H200",
-- "cpu / toolchain {"cc": ">=12"}".
CREATE FUNCTION avo_job_needs(p_target text, p_spec jsonb) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT p_target
           || CASE WHEN COALESCE(p_spec->>'gpu', '') <> '' THEN ' / ' || (p_spec->>'gpu') ELSE '' END
           || CASE WHEN p_spec->'toolchain' IS NOT NULL AND p_spec->'toolchain' <> '{}'::jsonb
                   THEN ' / toolchain ' || (p_spec->'toolchain')::text ELSE '' END;
$$;

-- How a worker is named in a detail: "worker 3 (gpu-node-1)".
CREATE FUNCTION avo_worker_label(p_id bigint) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT format('worker %s (%s)', w.id, w.host) FROM workers w WHERE w.id = p_id;
$$;

-- The detail of a job that is queued or running; NULL for a finished job
-- (its state and reason say it all). The first reason that holds wins:
-- what runs now, then what waits and why, then the operator's own work.
CREATE FUNCTION avo_job_detail(p_id bigint) RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
    j jobs%ROWTYPE;
    r record;
    n_running bigint;
    n_queued bigint;
    extra text := '';
    q text;
BEGIN
    SELECT * INTO j FROM jobs WHERE id = p_id;
    IF NOT FOUND OR j.state NOT IN ('queued', 'running') THEN
        RETURN NULL;
    END IF;

    -- Held back by its team's quota (sql/022): said before anything else,
    -- 'waiting: team quota (GPU-seconds today 3600 of 3600)'.
    q := avo_job_quota_wait(p_id);
    IF q IS NOT NULL THEN
        RETURN 'waiting: ' || q;
    END IF;

    -- An evaluation on a worker: the oldest one running, and how many more.
    SELECT count(*) INTO n_running FROM evaluations e WHERE e.job_id = p_id AND e.state = 'running';
    IF n_running > 0 THEN
        SELECT e.id, e.worker_id, e.claimed_at INTO r FROM evaluations e
         WHERE e.job_id = p_id AND e.state = 'running' ORDER BY e.claimed_at, e.id LIMIT 1;
        IF n_running > 1 THEN
            extra := format(' (+%s more running)', n_running - 1);
        END IF;
        RETURN format('running: evaluation %s on %s for %s s%s', r.id,
                      COALESCE(avo_worker_label(r.worker_id), 'a worker'),
                      GREATEST(0, floor(extract(epoch FROM now() - r.claimed_at)))::bigint, extra);
    END IF;
    -- A profile or a microbenchmark of the job on a worker.
    SELECT 'profile' AS what, p.id, p.worker_id, p.claimed_at INTO r FROM profiles p
     WHERE p.job_id = p_id AND p.state = 'running' ORDER BY p.claimed_at, p.id LIMIT 1;
    IF NOT FOUND THEN
        SELECT 'microbenchmark' AS what, p.id, p.worker_id, p.claimed_at INTO r FROM programs p
         WHERE p.job_id = p_id AND p.state = 'running' ORDER BY p.claimed_at, p.id LIMIT 1;
    END IF;
    IF FOUND THEN
        RETURN format('running: %s %s on %s for %s s', r.what, r.id, COALESCE(avo_worker_label(r.worker_id), 'a worker'),
                      GREATEST(0, floor(extract(epoch FROM now() - r.claimed_at)))::bigint);
    END IF;

    -- Work waiting in the queue: either nobody could take it, or everybody is busy.
    SELECT concat_ws(', ',
               CASE WHEN ne = 1 THEN '1 evaluation' WHEN ne > 1 THEN ne || ' evaluations' END,
               CASE WHEN np = 1 THEN '1 profile' WHEN np > 1 THEN np || ' profiles' END,
               CASE WHEN nm = 1 THEN '1 microbenchmark' WHEN nm > 1 THEN nm || ' microbenchmarks' END),
           ne + np + nm
      INTO extra, n_queued
      FROM (SELECT (SELECT count(*) FROM evaluations e WHERE e.job_id = p_id AND e.state = 'queued') AS ne,
                   (SELECT count(*) FROM profiles p WHERE p.job_id = p_id AND p.state = 'queued') AS np,
                   (SELECT count(*) FROM programs p WHERE p.job_id = p_id AND p.state = 'queued') AS nm) c;
    IF (n_queued > 0 OR j.state = 'queued')
       AND avo_live_workers(j.target, j.spec->>'gpu', j.spec->'toolchain') = 0 THEN
        RETURN 'queued: no live worker for ' || avo_job_needs(j.target, j.spec);
    END IF;
    IF n_queued > 0 THEN
        RETURN format('running: %s queued, waiting for a free worker', extra);
    END IF;

    -- The operator's own work: an agent step talking to its provider.
    SELECT s.island, s.turns, s.started_at INTO r FROM agent_steps s
     WHERE s.job_id = p_id AND s.state = 'running' ORDER BY s.id DESC LIMIT 1;
    IF FOUND THEN
        RETURN format('running: agent step on island %s (turn %s, %s s)', r.island, r.turns,
                      GREATEST(0, floor(extract(epoch FROM now() - r.started_at)))::bigint);
    END IF;
    IF j.state = 'queued' THEN
        RETURN 'queued: waiting for avod to start it';
    END IF;
    RETURN 'running: between steps';
END $$;

-- The job as in 021, with its detail.
ALTER FUNCTION avo_job_json(bigint) RENAME TO avo_job_json_022;
CREATE FUNCTION avo_job_json(p_id bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT avo_job_json_022(p_id) || jsonb_build_object('detail', avo_job_detail(p_id))
     WHERE EXISTS (SELECT 1 FROM jobs WHERE id = p_id);
$$;

-- What a worker is doing: its running evaluation, profile or microbenchmark
-- (NULL when it has none), with the job, the candidate and the seconds since
-- the claim. GET /v1/workers adds it to each worker as "current".
CREATE FUNCTION avo_worker_current(p_id bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('kind', x.kind, 'id', x.id, 'job', x.job_id, 'candidate', x.candidate_id,
                              'since', x.claimed_at,
                              'elapsed_s', GREATEST(0, floor(extract(epoch FROM now() - x.claimed_at)))::bigint)
      FROM (SELECT 'evaluation' AS kind, e.id, e.job_id, e.candidate_id, e.claimed_at FROM evaluations e
             WHERE e.worker_id = p_id AND e.state = 'running'
            UNION ALL
            SELECT 'profile', p.id, p.job_id, p.candidate_id, p.claimed_at FROM profiles p
             WHERE p.worker_id = p_id AND p.state = 'running'
            UNION ALL
            SELECT 'microbenchmark', p.id, p.job_id, NULL, p.claimed_at FROM programs p
             WHERE p.worker_id = p_id AND p.state = 'running') x
     ORDER BY x.claimed_at DESC NULLS LAST LIMIT 1;
$$;
CREATE INDEX evaluations_running_worker ON evaluations (worker_id) WHERE state = 'running';

-- What POST /v1/jobs adds to the job it answers, as in 018, and also when
-- no live worker serves the job's target and GPU model pin at all (the
-- toolchain's own warning, when it has a pin, says more and is kept).
CREATE OR REPLACE FUNCTION avo_toolchain_warnings(p_spec jsonb, p_target text) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN p_spec->'toolchain' IS NOT NULL AND p_spec->'toolchain' <> '{}'::jsonb
             AND avo_toolchain_live(p_spec->'toolchain', p_target) = 0 THEN jsonb_build_object('warnings',
             jsonb_build_array(format(
               'toolchain: no live worker of target %s matches %s; the job waits until one does',
               p_target, p_spec->'toolchain')))
        WHEN avo_live_workers(p_target, p_spec->>'gpu', p_spec->'toolchain') = 0 THEN jsonb_build_object('warnings',
             jsonb_build_array(format('no live worker for %s; the job waits until one starts',
                                      avo_job_needs(p_target, p_spec))))
        ELSE '{}'::jsonb END;
$$;

-- Agent steps in the job's event stream: a step starts (agent.c inserts
-- its row) and ends (agent.c, or avod's restart, sets its state). Triggers,
-- so no path that starts or ends a step can forget the event.
CREATE FUNCTION avo_agent_step_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM avo_event(NEW.job_id, 'agent_step_started', jsonb_build_object('step', NEW.id, 'island', NEW.island));
    ELSIF OLD.state = 'running' AND NEW.state <> 'running' THEN
        PERFORM avo_event(NEW.job_id, 'agent_step_ended', jsonb_build_object(
            'step', NEW.id, 'island', NEW.island, 'state', NEW.state, 'reason', NEW.reason, 'turns', NEW.turns,
            'evaluations', NEW.evaluations,
            'seconds', round(extract(epoch FROM COALESCE(NEW.ended_at, now()) - NEW.started_at)::numeric, 1)));
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER agent_steps_events AFTER INSERT OR UPDATE OF state ON agent_steps
    FOR EACH ROW EXECUTE FUNCTION avo_agent_step_event();
