-- Issue 23, point 6: the worker's own state changes, until now SQL strings
-- in daemon/worker/queue.c, as functions here, so that the queue's two state
-- machines (an evaluation's, a worker's) read whole in sql/. Behaviour
-- unchanged: each function is the statement the worker sent before.
--
-- An evaluation (evaluations.state; CHECK in sql/001):
--
--        INSERT: avo_job_apply, avo_agent_propose,
--                avo_compare_request, avo_revalidate_request
--                           |
--                           v
--     +---------------> queued --- avo_job_cancel; avo_job_apply (the --> cancelled
--     |                    |       search or the job ends: queued ones)      ^
--     | avo_rescue         | avo_claim                                        |
--     |  (lease expired,   |  (worker, lease, attempts + 1)                   |
--     |  attempts left:    v                                                  |
--     |  backoff)       running --- avo_job_cancel ---------------------------+
--     | avo_give_back    |  |  ^    (the worker's next heartbeat finds it gone)
--     |  (claimed ahead, |  +--+ avo_renew_leases: the lease extended (the
--     |  never started;  |       holder's running rows only)
--     |  attempts - 1)   |
--     +------------------+
--                        |
--        avo_complete ---+--- avo_rescue (lease expired, no attempt left)
--    (state and holder   |           |
--     re-checked)        v           v
--            done: the candidate's verdict         failed: outcome crash,
--              (ok, compile_error, crash, timeout,   "the worker running it
--              wrong_result, cheat_suspected,        was lost N times"
--              policy_violation)
--            failed: any other outcome
--              (package_mismatch, ...)
--
-- There is no 'lost' state: a lost worker's evaluation stays 'running' until
-- its lease lapses, then avo_rescue queues it again or fails it. done and
-- failed are final; avo_job_apply then sets consumed (applied exactly once).
--
-- A worker (workers.state; CHECK in sql/001):
--
--   avo_worker_register (INSERT) --> idle <--------------------------+
--                                     |                               |
--                    avo_worker_set_state 'busy' (an evaluation,      | avo_worker_set_state 'idle'
--                    a profile or a microbenchmark begins)            | (it ends; or the canary
--                                     v                               |  passes again)
--                                    busy ----------------------------+
--                                     |  \
--   avo_worker_set_state 'unhealthy'  |   \ avo_worker_set_state 'draining' (SIGTERM:
--   (the GPU failed the canary after  |    \ the work in hand is finished, nothing new
--    a crash or a timeout)            v     v claimed)
--                               unhealthy  draining
--                                     \     /
--      avo_worker_set_state 'gone' (the worker stops); avo_rescue
--      (no heartbeat for 2 minutes, from any state)
--                                       v
--                                     gone
--
-- Transitions are not enforced here, as they were not in the C: a worker
-- that avo_rescue marked gone while its database was away is 'idle' or
-- 'busy' again at its next avo_worker_set_state. avo_worker_seen and
-- avo_worker_set_state refresh last_seen, which is what avo_rescue reads.

-- A worker's registration at its first connection: its row, in state idle.
CREATE FUNCTION avo_worker_register(p_host text, p_pid int, p_target text, p_devices jsonb, p_toolchain jsonb)
RETURNS bigint LANGUAGE sql AS $$
    INSERT INTO workers (host, pid, target, devices, toolchain)
    VALUES (p_host, p_pid, p_target, p_devices, p_toolchain)
    RETURNING id;
$$;

-- idle, busy, draining, unhealthy or gone (the table's CHECK refuses any
-- other), and alive now.
CREATE FUNCTION avo_worker_set_state(p_worker bigint, p_state text) RETURNS void
LANGUAGE sql AS $$
    UPDATE workers SET state = p_state, last_seen = now() WHERE id = p_worker;
$$;

-- The worker's heartbeat in the registry (idle, or while a task runs):
-- avo_rescue marks a worker gone two minutes after the last one.
CREATE FUNCTION avo_worker_seen(p_worker bigint) RETURNS void
LANGUAGE sql AS $$
    UPDATE workers SET last_seen = now() WHERE id = p_worker;
$$;

-- The leases a worker holds: the evaluation it runs and those it claimed
-- ahead (prefetch), renewed for p_lease_s more seconds. Only rows still
-- running under this worker: one cancelled, rescued or claimed by another
-- worker meanwhile is left alone and not returned, which is how the
-- heartbeat learns that the evaluation in hand is no longer its own.
-- Returns the ids renewed.
CREATE FUNCTION avo_renew_leases(p_evals bigint[], p_worker bigint, p_lease_s double precision)
RETURNS SETOF bigint LANGUAGE sql AS $$
    UPDATE evaluations SET lease_expires = now() + make_interval(secs => p_lease_s)
     WHERE id = ANY(p_evals) AND worker_id = p_worker AND state = 'running'
    RETURNING id;
$$;

-- A claim taken ahead and never started, given back by a stopping worker:
-- queued again at once, without the attempt its claim counted. False when
-- it was no longer this worker's (rescued, cancelled or finished meanwhile).
CREATE FUNCTION avo_give_back(p_eval bigint, p_worker bigint) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE evaluations SET state = 'queued', worker_id = NULL, lease_expires = NULL, attempts = attempts - 1
     WHERE id = p_eval AND worker_id = p_worker AND state = 'running';
    RETURN FOUND;
END $$;
