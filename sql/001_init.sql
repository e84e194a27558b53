-- avo schema v1. Applied once by avod's migrator (inside one transaction,
-- under an advisory lock); recorded in avo_schema_version.

CREATE TABLE jobs (
    id            bigserial PRIMARY KEY,
    problem       text NOT NULL,
    operator      text NOT NULL,
    spec          jsonb NOT NULL,
    target        text NOT NULL DEFAULT 'cpu',
    priority      int NOT NULL DEFAULT 0,
    state         text NOT NULL DEFAULT 'queued'
                  CHECK (state IN ('queued','running','succeeded','failed','cancelled')),
    reason        text,
    eval_budget   int NOT NULL CHECK (eval_budget > 0),
    seed_candidate bigint,
    best_candidate bigint,
    created_at    timestamptz NOT NULL DEFAULT now(),
    started_at    timestamptz,
    finished_at   timestamptz
);
CREATE INDEX jobs_active ON jobs (id) WHERE state IN ('queued','running');

-- Sources are stored once, by content.
CREATE TABLE sources (
    sha256  text PRIMARY KEY,
    body    text NOT NULL
);

CREATE TABLE candidates (
    id          bigserial PRIMARY KEY,
    job_id      bigint NOT NULL REFERENCES jobs(id),
    sha256      text NOT NULL REFERENCES sources(sha256),
    parent_id   bigint REFERENCES candidates(id),
    operator    text NOT NULL,
    knobs       jsonb,
    committed   boolean NOT NULL DEFAULT false,
    outcome     text,
    aggregate   double precision,
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (job_id, sha256)
);
ALTER TABLE jobs ADD FOREIGN KEY (seed_candidate) REFERENCES candidates(id);
ALTER TABLE jobs ADD FOREIGN KEY (best_candidate) REFERENCES candidates(id);

CREATE TABLE workers (
    id          bigserial PRIMARY KEY,
    host        text NOT NULL,
    pid         int NOT NULL,
    target      text NOT NULL,
    devices     jsonb NOT NULL DEFAULT '[]',
    state       text NOT NULL DEFAULT 'idle'
                CHECK (state IN ('idle','busy','draining','unhealthy','gone')),
    started_at  timestamptz NOT NULL DEFAULT now(),
    last_seen   timestamptz NOT NULL DEFAULT now()
);

-- The work queue. One row per evaluation of one candidate on one target.
-- consumed: the evolution engine has applied the result to the lineage
-- (exactly once; see avo_job_apply).
CREATE TABLE evaluations (
    id            bigserial PRIMARY KEY,
    job_id        bigint NOT NULL REFERENCES jobs(id),
    candidate_id  bigint NOT NULL REFERENCES candidates(id),
    problem       text NOT NULL,
    target        text NOT NULL,
    priority      int NOT NULL DEFAULT 0,
    state         text NOT NULL DEFAULT 'queued'
                  CHECK (state IN ('queued','running','done','failed','cancelled')),
    attempts      int NOT NULL DEFAULT 0,
    worker_id     bigint REFERENCES workers(id),
    lease_expires timestamptz,
    outcome       text,
    aggregate     double precision,
    result        jsonb,
    consumed      boolean NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL DEFAULT now(),
    claimed_at    timestamptz,
    finished_at   timestamptz
) WITH (fillfactor = 80);
-- The claim query walks only queued rows, however many finished ones pile up.
CREATE INDEX evaluations_queued ON evaluations (target, priority DESC, id) WHERE state = 'queued';
CREATE INDEX evaluations_unconsumed ON evaluations (job_id, id)
    WHERE state IN ('done','failed') AND NOT consumed;
CREATE INDEX evaluations_job ON evaluations (job_id);

CREATE TABLE events (
    id          bigserial PRIMARY KEY,
    job_id      bigint REFERENCES jobs(id),
    kind        text NOT NULL,
    data        jsonb NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_job ON events (job_id, id);

-- Wake-ups. NOTIFY payloads are deduplicated per transaction, so a batch of
-- inserts costs one notification per channel and payload.
CREATE FUNCTION avo_notify_work() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('avo_work', NEW.target);
    RETURN NULL;
END $$;
CREATE TRIGGER evaluations_work AFTER INSERT ON evaluations
    FOR EACH ROW EXECUTE FUNCTION avo_notify_work();

CREATE FUNCTION avo_notify_done() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state IN ('done','failed') AND OLD.state IS DISTINCT FROM NEW.state THEN
        PERFORM pg_notify('avo_eval_done', NEW.job_id::text);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER evaluations_done AFTER UPDATE OF state ON evaluations
    FOR EACH ROW EXECUTE FUNCTION avo_notify_done();

CREATE FUNCTION avo_notify_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('avo_events', NEW.job_id::text);
    RETURN NULL;
END $$;
CREATE TRIGGER events_notify AFTER INSERT ON events
    FOR EACH ROW EXECUTE FUNCTION avo_notify_event();

CREATE FUNCTION avo_event(p_job bigint, p_kind text, p_data jsonb) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO events (job_id, kind, data) VALUES (p_job, p_kind, p_data);
$$;

-- Claim: the CTE is a fence, so exactly the locked rows are updated.
CREATE FUNCTION avo_claim(p_worker bigint, p_target text, p_lease_s double precision)
RETURNS TABLE (id bigint, job_id bigint, candidate_id bigint, problem text, source text, attempts int)
LANGUAGE sql AS $$
    WITH next AS (
        SELECT e.id FROM evaluations e
         WHERE e.state = 'queued' AND e.target = p_target
         ORDER BY e.priority DESC, e.id
         LIMIT 1
         FOR UPDATE SKIP LOCKED
    ), claimed AS (
        UPDATE evaluations e
           SET state = 'running', worker_id = p_worker, attempts = e.attempts + 1,
               claimed_at = now(), lease_expires = now() + make_interval(secs => p_lease_s)
          FROM next WHERE e.id = next.id
        RETURNING e.id, e.job_id, e.candidate_id, e.problem, e.attempts
    )
    SELECT c.id, c.job_id, c.candidate_id, c.problem, s.body, c.attempts
      FROM claimed c
      JOIN candidates cand ON cand.id = c.candidate_id
      JOIN sources s ON s.sha256 = cand.sha256;
$$;

-- Completion re-checks state and lease owner: a late worker cannot overwrite
-- an evaluation that was rescued, cancelled or finished by someone else.
CREATE FUNCTION avo_complete(p_eval bigint, p_worker bigint, p_outcome text,
                             p_aggregate double precision, p_result jsonb)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE n int;
BEGIN
    UPDATE evaluations
       SET state = CASE WHEN p_outcome = 'ok' OR p_outcome IN
                        ('compile_error','crash','timeout','wrong_result','cheat_suspected')
                        THEN 'done' ELSE 'failed' END,
           outcome = p_outcome, aggregate = p_aggregate, result = p_result,
           finished_at = now(), lease_expires = NULL
     WHERE id = p_eval AND state = 'running' AND worker_id = p_worker;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n = 1;
END $$;

CREATE TABLE avo_meta (key text PRIMARY KEY, value text);

-- ---------------------------------------------------------------------------
-- Read models for the API: JSON assembled where the data lives.

CREATE FUNCTION avo_candidate_json(p_id bigint, p_with_source boolean) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'id', c.id, 'sha256', c.sha256, 'parent', c.parent_id, 'operator', c.operator,
        'knobs', c.knobs, 'committed', c.committed, 'outcome', c.outcome,
        'aggregate', c.aggregate,
        'unit', e.result->>'unit',
        'scores', COALESCE((SELECT jsonb_agg(jsonb_build_object('config', x->>'name',
                                                               'score', (x->>'score')::float8))
                            FROM jsonb_array_elements(e.result->'configs') x), '[]'::jsonb),
        'detail', e.result->>'detail',
        'evaluation', e.id)
        || CASE WHEN p_with_source THEN jsonb_build_object('source', s.body) ELSE '{}'::jsonb END
      FROM candidates c
      JOIN sources s ON s.sha256 = c.sha256
      LEFT JOIN LATERAL (SELECT * FROM evaluations ev WHERE ev.candidate_id = c.id
                          AND ev.state = 'done' ORDER BY ev.id DESC LIMIT 1) e ON true
     WHERE c.id = p_id;
$$;

CREATE FUNCTION avo_job_json(p_id bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'id', j.id, 'problem', j.problem, 'operator', j.operator, 'target', j.target,
        'state', j.state, 'reason', j.reason, 'priority', j.priority, 'spec', j.spec,
        'created_at', j.created_at, 'started_at', j.started_at, 'finished_at', j.finished_at,
        'evaluations', (SELECT jsonb_build_object(
                            'budget', j.eval_budget,
                            'queued', count(*) FILTER (WHERE state = 'queued'),
                            'running', count(*) FILTER (WHERE state = 'running'),
                            'done', count(*) FILTER (WHERE state IN ('done','failed')),
                            'cancelled', count(*) FILTER (WHERE state = 'cancelled'),
                            'ok', count(*) FILTER (WHERE outcome = 'ok'))
                          FROM evaluations WHERE job_id = j.id),
        'unit', (SELECT e.result->>'unit' FROM evaluations e
                  WHERE e.job_id = j.id AND e.result ? 'unit' LIMIT 1),
        'seed', (SELECT jsonb_build_object('candidate', c.id, 'aggregate', c.aggregate,
                                           'outcome', c.outcome)
                   FROM candidates c WHERE c.id = j.seed_candidate),
        'best', (SELECT jsonb_build_object('candidate', c.id, 'aggregate', c.aggregate)
                   FROM candidates c WHERE c.id = j.best_candidate),
        'speedup', (SELECT CASE WHEN s.aggregate > 0 THEN b.aggregate / s.aggregate END
                      FROM candidates s, candidates b
                     WHERE s.id = j.seed_candidate AND b.id = j.best_candidate))
      FROM jobs j WHERE j.id = p_id;
$$;

CREATE FUNCTION avo_job_submit(p_spec jsonb, p_problem text, p_operator text, p_target text,
                               p_priority int, p_budget int) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE jid bigint;
BEGIN
    INSERT INTO jobs (problem, operator, spec, target, priority, eval_budget)
    VALUES (p_problem, p_operator, p_spec, p_target, p_priority, p_budget)
    RETURNING id INTO jid;
    PERFORM avo_event(jid, 'job_submitted',
                      jsonb_build_object('problem', p_problem, 'operator', p_operator,
                                         'budget', p_budget));
    PERFORM pg_notify('avo_jobs', jid::text);
    RETURN avo_job_json(jid);
END $$;

-- Cancelling takes effect at once for queued work; a worker running one of
-- the job's evaluations sees state 'cancelled' at its next heartbeat.
CREATE FUNCTION avo_job_cancel(p_id bigint) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE st text;
BEGIN
    SELECT state INTO st FROM jobs WHERE id = p_id FOR UPDATE;
    IF NOT FOUND THEN RETURN 'not_found'; END IF;
    IF st NOT IN ('queued','running') THEN RETURN 'finished'; END IF;
    UPDATE jobs SET state = 'cancelled', reason = 'cancelled by request', finished_at = now()
     WHERE id = p_id;
    UPDATE evaluations SET state = 'cancelled', finished_at = now()
     WHERE job_id = p_id AND state IN ('queued','running');
    PERFORM avo_event(p_id, 'job_finished', avo_job_finish_data(p_id));
    RETURN 'ok';
END $$;

CREATE FUNCTION avo_job_finish_data(p_id bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('state', j->'state', 'reason', j->'reason', 'best', j->'best',
                              'seed', j->'seed', 'speedup', j->'speedup', 'unit', j->'unit',
                              'evaluations', j->'evaluations')
      FROM avo_job_json(p_id) j;
$$;

-- ---------------------------------------------------------------------------
-- The evolution engine's two steps. avod reads a snapshot, decides in C
-- (commit rule, operator proposals), and applies the decision in one
-- transaction. Every consumed evaluation is re-checked as unconsumed, so a
-- decision made from a stale snapshot (two daemons, a crash between the
-- steps) aborts whole instead of applying a result twice.

CREATE FUNCTION avo_job_snapshot(p_id bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'id', j.id, 'state', j.state, 'problem', j.problem, 'operator', j.operator,
        'spec', j.spec, 'budget', j.eval_budget,
        'seed_candidate', j.seed_candidate, 'best_candidate', j.best_candidate,
        'best_aggregate', (SELECT aggregate FROM candidates WHERE id = j.best_candidate),
        'seed_aggregate', (SELECT aggregate FROM candidates WHERE id = j.seed_candidate),
        'elapsed_s', EXTRACT(EPOCH FROM now() - COALESCE(j.started_at, now())),
        'total', (SELECT count(*) FROM evaluations WHERE job_id = j.id),
        'inflight', (SELECT count(*) FROM evaluations
                      WHERE job_id = j.id AND state IN ('queued','running')),
        'finished', COALESCE((SELECT jsonb_agg(jsonb_build_object(
                        'eval', e.id, 'candidate', e.candidate_id, 'parent', c.parent_id,
                        'outcome', e.outcome, 'aggregate', e.aggregate,
                        'detail', e.result->>'detail', 'knobs', c.knobs) ORDER BY e.id)
                      FROM evaluations e JOIN candidates c ON c.id = e.candidate_id
                     WHERE e.job_id = j.id AND e.state IN ('done','failed') AND NOT e.consumed),
                     '[]'::jsonb),
        'tried', COALESCE((SELECT jsonb_agg(jsonb_build_object(
                        'candidate', c.id, 'knobs', c.knobs, 'outcome', c.outcome,
                        'aggregate', c.aggregate) ORDER BY c.id)
                      FROM candidates c WHERE c.job_id = j.id), '[]'::jsonb))
      FROM jobs j WHERE j.id = p_id;
$$;

CREATE FUNCTION avo_job_apply(p_id bigint, d jsonb) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    st text; x jsonb; n int; cid bigint; prio int; tgt text; prob text;
BEGIN
    SELECT state, priority, target, problem INTO st, prio, tgt, prob
      FROM jobs WHERE id = p_id FOR UPDATE;
    IF NOT FOUND OR st NOT IN ('queued','running') THEN RETURN false; END IF;

    IF (d->>'start')::boolean THEN
        UPDATE jobs SET state = 'running', started_at = now() WHERE id = p_id;
        PERFORM avo_event(p_id, 'job_started', '{}'::jsonb);
    END IF;

    FOR x IN SELECT * FROM jsonb_array_elements(COALESCE(d->'consume', '[]'::jsonb)) LOOP
        UPDATE evaluations SET consumed = true
         WHERE id = (x->>'eval')::bigint AND job_id = p_id
           AND state IN ('done','failed') AND NOT consumed;
        GET DIAGNOSTICS n = ROW_COUNT;
        IF n <> 1 THEN
            RAISE EXCEPTION 'stale decision: evaluation % already consumed', x->>'eval';
        END IF;
        UPDATE candidates SET outcome = x->>'outcome', aggregate = (x->>'aggregate')::float8,
                              committed = (x->>'commit')::boolean
         WHERE id = (x->>'candidate')::bigint;
        PERFORM avo_event(p_id, 'evaluation_finished', jsonb_build_object(
            'candidate', x->'candidate', 'outcome', x->'outcome', 'aggregate', x->'aggregate',
            'detail', x->'detail', 'knobs', x->'knobs'));
        IF (x->>'commit')::boolean THEN
            PERFORM avo_event(p_id, 'committed', jsonb_build_object(
                'candidate', x->'candidate', 'parent', x->'parent', 'aggregate', x->'aggregate'));
        END IF;
        IF (x->>'new_best')::boolean THEN
            UPDATE jobs SET best_candidate = (x->>'candidate')::bigint WHERE id = p_id;
            PERFORM avo_event(p_id, 'new_best', jsonb_build_object(
                'candidate', x->'candidate', 'aggregate', x->'aggregate', 'speedup', x->'speedup'));
        END IF;
    END LOOP;

    FOR x IN SELECT * FROM jsonb_array_elements(COALESCE(d->'propose', '[]'::jsonb)) LOOP
        INSERT INTO sources (sha256, body) VALUES (x->>'sha256', x->>'source')
            ON CONFLICT (sha256) DO NOTHING;
        INSERT INTO candidates (job_id, sha256, parent_id, operator, knobs)
        VALUES (p_id, x->>'sha256', (x->>'parent')::bigint, x->>'operator', x->'knobs')
            ON CONFLICT (job_id, sha256) DO NOTHING
        RETURNING id INTO cid;
        IF cid IS NULL THEN CONTINUE; END IF;
        IF (x->>'seed')::boolean THEN
            UPDATE jobs SET seed_candidate = cid WHERE id = p_id;
        END IF;
        INSERT INTO evaluations (job_id, candidate_id, problem, target, priority)
        VALUES (p_id, cid, prob, tgt, prio);
    END LOOP;

    IF d ? 'finish' AND d->'finish' IS NOT NULL AND jsonb_typeof(d->'finish') = 'object' THEN
        UPDATE jobs SET state = d->'finish'->>'state', reason = d->'finish'->>'reason',
                        finished_at = now()
         WHERE id = p_id;
        UPDATE evaluations SET state = 'cancelled', finished_at = now()
         WHERE job_id = p_id AND state = 'queued';
        PERFORM avo_event(p_id, 'job_finished', avo_job_finish_data(p_id));
    END IF;
    RETURN true;
END $$;
