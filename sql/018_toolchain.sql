-- Issue 21, points 2 and 3: the toolchain in every result, jobs pinned to a
-- toolchain, and re-validation of committed versions on the current one
-- (docs/jobs.md "Toolchain", docs/evaluation.md "The toolchain record" and
-- "Re-validation").
--
-- A worker probes its toolchain once at start (daemon/worker/toolchain.c)
-- and stores it on its row: {"versions": {KEY: TEXT}, "cc": {...}, ...}.
-- "versions" is the flat, normalised part that matching and grouping read:
-- nvcc, cc, driver, cuda_driver, cuda_runtime and avo as dotted numbers,
-- gpu and cpu as model names, gpu_uuid; a key the worker does not have
-- (no GPU, no nvcc) is absent. Every result the worker stores carries the
-- same object (plus the clocks its evaluation saw) as result->'toolchain'.
ALTER TABLE workers ADD COLUMN toolchain jsonb
    CHECK (toolchain IS NULL OR jsonb_typeof(toolchain->'versions') = 'object');

-- What an evaluation needs of its worker's toolchain: the job's spec
-- "toolchain" (canonical constraints, proto/avo_toolchain.c), copied at
-- insertion by the trigger below, so the claim reads one column of the row
-- it walks, as it does gpu_model; '{}' for no constraint where the job has
-- one (a re-validation runs on the toolchain of now). on_worker: only that
-- worker claims it (avoctl revalidate --on WORKER).
ALTER TABLE evaluations
    ADD COLUMN toolchain jsonb CHECK (toolchain IS NULL OR jsonb_typeof(toolchain) = 'object'),
    ADD COLUMN on_worker bigint;

-- One version constraint against one version: the worker's version cut to
-- as many components as the constraint names, so "13.0" holds for 13.0.88,
-- ">=580" for 580.95.05 and "<13.1" for 13.0.88 (docs/jobs.md). A version
-- that is absent or not dotted numbers holds nothing. The constraint is
-- canonical (avod parsed it); anything else holds nothing either.
CREATE FUNCTION avo_version_holds(p_have text, p_want text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE m text[]; w numeric[]; h numeric[];
BEGIN
    m := regexp_match(p_want, '^(>=|<=|>|<)?([0-9]{1,9}(\.[0-9]{1,9}){0,3})$');
    IF m IS NULL OR p_have IS NULL OR p_have !~ '^[0-9]{1,18}(\.[0-9]{1,18})*$' THEN
        RETURN false;
    END IF;
    w := string_to_array(m[2], '.')::numeric[];
    h := (string_to_array(p_have, '.')::numeric[])[1:cardinality(w)];
    RETURN CASE COALESCE(m[1], '')
        WHEN '' THEN h = w WHEN '>=' THEN h >= w WHEN '<=' THEN h <= w
        WHEN '>' THEN h > w WHEN '<' THEN h < w END;
END $$;

-- Whether a worker's toolchain (p_have, the workers.toolchain object)
-- meets every constraint of p_want: each key's value a constraint or an
-- array of them, all of which hold. gpu and cpu are model names matched as
-- case-insensitive substrings; gpu_uuid (re-validation's --on GPU-...) is
-- matched exactly. NULL or {} wants nothing; a worker without a recorded
-- toolchain meets no constraint.
CREATE FUNCTION avo_toolchain_match(p_have jsonb, p_want jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT p_want IS NULL OR p_want = '{}'::jsonb OR (p_have IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM jsonb_each(p_want) k(key, val),
               LATERAL jsonb_array_elements_text(CASE jsonb_typeof(k.val) WHEN 'array' THEN k.val
                                                 ELSE jsonb_build_array(k.val) END) c(want)
         WHERE NOT COALESCE(CASE
                   WHEN k.key IN ('gpu', 'cpu')
                       THEN strpos(lower(p_have->'versions'->>k.key), lower(c.want)) > 0
                   WHEN k.key = 'gpu_uuid'
                       THEN lower(p_have->'versions'->>k.key) = lower(c.want)
                   ELSE avo_version_holds(p_have->'versions'->>k.key, c.want) END, false)));
$$;

-- The job's constraints onto each of its evaluations as they are inserted
-- (by avo_job_apply, the agent's evaluations, the final measurement, a
-- compare), so none of those functions has to be redefined and none can
-- forget. An evaluation inserted with its own (a re-validation's) keeps it.
CREATE FUNCTION avo_eval_toolchain() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.toolchain IS NULL THEN
        SELECT j.spec->'toolchain' INTO NEW.toolchain FROM jobs j WHERE j.id = NEW.job_id;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER evaluations_toolchain BEFORE INSERT ON evaluations
    FOR EACH ROW EXECUTE FUNCTION avo_eval_toolchain();

ALTER TABLE evaluations DROP CONSTRAINT evaluations_purpose_check;
ALTER TABLE evaluations ADD CONSTRAINT evaluations_purpose_check
    CHECK (purpose IN ('search','final','compare','revalidate'));

-- The claim as in 015, skipping what this worker may not take: a job
-- pinned to a toolchain the worker's does not meet, and an evaluation
-- bound to another worker. The worker's toolchain is read once per claim,
-- not per row walked; rows without a constraint (the common case) are
-- decided by the IS NULL test alone.
CREATE OR REPLACE FUNCTION avo_claim(p_worker bigint, p_target text, p_lease_s double precision)
RETURNS TABLE (id bigint, job_id bigint, candidate_id bigint, problem text, source text, attempts int,
               against_id bigint, against_source text, confidence double precision, screen boolean,
               job_seed bigint)
LANGUAGE plpgsql AS $$
DECLARE tc jsonb;
BEGIN
    SELECT w.toolchain INTO tc FROM workers w WHERE w.id = p_worker;
    RETURN QUERY
    WITH next AS (
        SELECT e.id FROM evaluations e
         WHERE e.state = 'queued' AND e.target = p_target
           AND (e.available_at IS NULL OR e.available_at <= now())
           AND (e.gpu_model IS NULL OR EXISTS (
                  SELECT 1 FROM workers w, jsonb_array_elements(w.devices) d
                   WHERE w.id = p_worker AND d->>'kind' = 'gpu'
                     AND strpos(lower(d->>'name'), lower(e.gpu_model)) > 0))
           AND (e.toolchain IS NULL OR avo_toolchain_match(tc, e.toolchain))
           AND (e.on_worker IS NULL OR e.on_worker = p_worker)
         ORDER BY e.priority DESC, e.id
         LIMIT 1
         FOR UPDATE SKIP LOCKED
    ), claimed AS (
        UPDATE evaluations e
           SET state = 'running', worker_id = p_worker, attempts = e.attempts + 1,
               claimed_at = now(), lease_expires = now() + make_interval(secs => p_lease_s)
          FROM next WHERE e.id = next.id
        RETURNING e.id, e.job_id, e.candidate_id, e.problem, e.attempts, e.against_id, e.confidence, e.purpose
    )
    SELECT c.id, c.job_id, c.candidate_id, c.problem, s.body, c.attempts, c.against_id, sa.body,
           COALESCE(c.confidence, (j.spec->'commit'->>'confidence')::float8, 0.95),
           c.purpose = 'search' AND c.against_id IS NOT NULL, j.input_seed
      FROM claimed c
      JOIN candidates cand ON cand.id = c.candidate_id
      JOIN sources s ON s.sha256 = cand.sha256
      LEFT JOIN candidates ag ON ag.id = c.against_id
      LEFT JOIN sources sa ON sa.sha256 = ag.sha256
      LEFT JOIN jobs j ON j.id = c.job_id;
END $$;

-- The completion wake-up as in 015, blind to re-validations as to compares:
-- neither is ever consumed by the engine.
CREATE OR REPLACE FUNCTION avo_notify_done() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state IN ('done','failed') AND OLD.state IS DISTINCT FROM NEW.state
       AND NEW.purpose NOT IN ('compare', 'revalidate')
       AND NOT EXISTS (SELECT 1 FROM evaluations e
                        WHERE e.job_id = NEW.job_id AND e.state IN ('done','failed')
                          AND NOT e.consumed AND e.id <> NEW.id AND e.purpose NOT IN ('compare', 'revalidate')) THEN
        PERFORM pg_notify('avo_eval_done', NEW.job_id::text);
    END IF;
    RETURN NULL;
END $$;

-- Live workers of p_target whose toolchain meets p_want (submission warns
-- when there are none: the job would wait for one). Live: not gone and
-- seen within the rescuer's 2 minutes.
CREATE FUNCTION avo_toolchain_live(p_want jsonb, p_target text) RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT count(*) FROM workers w
     WHERE w.state <> 'gone' AND w.last_seen > now() - interval '2 minutes' AND w.target = p_target
       AND avo_toolchain_match(w.toolchain, p_want);
$$;

-- What POST /v1/jobs adds to the job it answers: {"warnings": [...]} when
-- the spec pins a toolchain no live worker of its target meets, else {}.
CREATE FUNCTION avo_toolchain_warnings(p_spec jsonb, p_target text) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN p_spec->'toolchain' IS NULL OR p_spec->'toolchain' = '{}'::jsonb
                     OR avo_toolchain_live(p_spec->'toolchain', p_target) > 0 THEN '{}'::jsonb
           ELSE jsonb_build_object('warnings', jsonb_build_array(format(
               'toolchain: no live worker of target %s matches %s; the job waits until one does',
               p_target, p_spec->'toolchain'))) END;
$$;

-- A result's toolchain as the report and re-validation show it: the
-- versions and where it ran ("unrecorded" for results from before 018).
CREATE FUNCTION avo_result_toolchain(p_result jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
    SELECT COALESCE(p_result->'toolchain'->'versions', '"unrecorded"'::jsonb);
$$;

-- The report as in 013, with its evaluations grouped by the toolchain
-- that produced them (every purpose: search, final, compare, revalidate),
-- oldest toolchain first.
ALTER FUNCTION avo_job_report(bigint) RENAME TO avo_job_report_017;
CREATE FUNCTION avo_job_report(p_id bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    WITH ev AS (
        SELECT avo_result_toolchain(e.result) AS tc, e.purpose, e.outcome, e.aggregate, e.worker_id, e.finished_at
          FROM evaluations e WHERE e.job_id = p_id AND e.state IN ('done','failed')
    ), g AS (
        SELECT jsonb_build_object(
                   'toolchain', ev.tc, 'evaluations', count(*),
                   'ok', count(*) FILTER (WHERE ev.outcome = 'ok'),
                   'by_purpose', (SELECT jsonb_object_agg(x.purpose, x.n) FROM (
                                      SELECT e2.purpose, count(*) n FROM ev e2 WHERE e2.tc = ev.tc
                                       GROUP BY e2.purpose) x),
                   'best', max(ev.aggregate) FILTER (WHERE ev.outcome = 'ok'),
                   'workers', jsonb_agg(DISTINCT ev.worker_id),
                   'first', min(ev.finished_at), 'last', max(ev.finished_at)) AS o
          FROM ev GROUP BY ev.tc
    )
    SELECT avo_job_report_017(p_id)
           || jsonb_build_object('toolchains', COALESCE((SELECT jsonb_agg(o ORDER BY o->>'first') FROM g), '[]'::jsonb))
     WHERE EXISTS (SELECT 1 FROM jobs WHERE id = p_id);
$$;

-- ---- Re-validation (point 3) ----
-- A re-validation re-evaluates committed versions (all of a job's, or one
-- candidate) on whatever toolchain claims them now, and compares each new
-- result with the recorded one. Its evaluations have purpose 'revalidate':
-- unpaired, never consumed, never applied (like a compare, sql/015), with
-- toolchain '{}' (the job's pin does not hold them: the point is to measure
-- the new toolchain), the job's GPU model, and --on's worker or GPU.
CREATE TABLE revalidations (
    id           bigserial PRIMARY KEY,
    job_id       bigint NOT NULL REFERENCES jobs(id),
    candidate_id bigint REFERENCES candidates(id),       -- NULL: the job's committed candidates
    on_worker    bigint,
    on_gpu       text,
    why          text NOT NULL DEFAULT 'user' CHECK (why IN ('user', 'campaign')),
    created_at   timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE evaluations ADD COLUMN revalidation_id bigint REFERENCES revalidations(id);
CREATE INDEX evaluations_revalidation ON evaluations (revalidation_id) WHERE revalidation_id IS NOT NULL;

-- The recorded result a re-validation compares with: the candidate's
-- latest search evaluation that ended ok with a score.
CREATE FUNCTION avo_recorded_eval(p_candidate bigint) RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT e.id FROM evaluations e
     WHERE e.candidate_id = p_candidate AND e.purpose = 'search' AND e.state = 'done'
       AND e.outcome = 'ok' AND e.aggregate > 0
     ORDER BY e.id DESC LIMIT 1;
$$;

CREATE FUNCTION avo_revalidation_json(p_id bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    WITH ent AS (
        SELECT e.id, e.candidate_id, e.state, e.outcome, e.aggregate, e.result, e.worker_id,
               r.id AS rid, r.aggregate AS raggr, r.result AS rres, r.worker_id AS rworker,
               CASE WHEN e.state = 'done' AND e.outcome = 'ok' AND e.aggregate > 0 AND r.aggregate > 0
                    THEN e.aggregate / r.aggregate END AS ratio
          FROM evaluations e
          LEFT JOIN evaluations r ON r.id = avo_recorded_eval(e.candidate_id)
         WHERE e.revalidation_id = p_id
    )
    SELECT jsonb_build_object(
        'id', v.id, 'job', v.job_id, 'candidate', v.candidate_id, 'why', v.why,
        'on', CASE WHEN v.on_worker IS NOT NULL THEN jsonb_build_object('worker', v.on_worker)
                   WHEN v.on_gpu IS NOT NULL THEN jsonb_build_object('gpu', v.on_gpu) END,
        'created_at', v.created_at,
        'state', CASE WHEN NOT EXISTS (SELECT 1 FROM ent WHERE state IN ('queued', 'running')) THEN 'done'
                      WHEN EXISTS (SELECT 1 FROM ent WHERE state = 'running' OR state IN ('done','failed'))
                      THEN 'running' ELSE 'queued' END,
        'unit', (SELECT rres->>'unit' FROM ent WHERE rres ? 'unit' LIMIT 1),
        'entries', COALESCE((SELECT jsonb_agg(jsonb_build_object(
            'candidate', x.candidate_id, 'evaluation', x.id, 'state', x.state, 'outcome', x.outcome,
            'detail', x.result->>'detail', 'aggregate', x.aggregate, 'worker', x.worker_id,
            'toolchain', CASE WHEN x.state IN ('done','failed') THEN avo_result_toolchain(x.result) END,
            'recorded', jsonb_build_object('evaluation', x.rid, 'aggregate', x.raggr, 'worker', x.rworker,
                                           'toolchain', avo_result_toolchain(x.rres)),
            'changed', CASE WHEN x.state IN ('done','failed')
                            THEN avo_result_toolchain(x.result) IS DISTINCT FROM avo_result_toolchain(x.rres) END,
            'ratio', x.ratio,
            'configs', COALESCE((SELECT jsonb_agg(jsonb_build_object(
                            'config', n->>'name', 'score', (n->>'score')::float8,
                            'recorded', (o->>'score')::float8,
                            'ratio', CASE WHEN (o->>'score')::float8 > 0
                                          THEN (n->>'score')::float8 / (o->>'score')::float8 END))
                          FROM jsonb_array_elements(x.result->'configs') n
                          LEFT JOIN jsonb_array_elements(x.rres->'configs') o ON o->>'name' = n->>'name'),
                         '[]'::jsonb))
            ORDER BY x.candidate_id) FROM ent x), '[]'::jsonb),
        'summary', (SELECT jsonb_build_object(
                        'candidates', count(*), 'measured', count(ratio),
                        'geomean_ratio', exp(avg(ln(ratio))), 'min_ratio', min(ratio), 'max_ratio', max(ratio))
                      FROM ent))
      FROM revalidations v WHERE v.id = p_id;
$$;

-- Queue a re-validation: of p_candidate when given, else of p_job's
-- committed candidates; each needs a recorded result. p_on_worker or
-- p_on_gpu restrict who claims (a GPU text starting "GPU-" is a UUID,
-- anything else a model name). Answers {"revalidation": ...} or {"status",
-- "code", "message"} naming the field at fault.
CREATE FUNCTION avo_revalidate_request(p_job bigint, p_candidate bigint, p_on_worker bigint, p_on_gpu text,
                                       p_why text)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE j record; w record; rid bigint; want jsonb := '{}'::jsonb; n int;
BEGIN
    IF p_candidate IS NOT NULL THEN
        SELECT c.job_id INTO p_job FROM candidates c WHERE c.id = p_candidate;
        IF NOT FOUND THEN
            RETURN jsonb_build_object('status', 404, 'code', 'not_found',
                                      'message', format('candidate: no candidate %s', p_candidate));
        END IF;
        IF avo_recorded_eval(p_candidate) IS NULL THEN
            RETURN jsonb_build_object('status', 409, 'code', 'conflict', 'message',
                format('candidate: candidate %s has no recorded ok result to compare with', p_candidate));
        END IF;
    END IF;
    SELECT jb.id, jb.problem, jb.target, jb.priority, jb.spec->>'gpu' AS gpu INTO j FROM jobs jb WHERE jb.id = p_job;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('status', 404, 'code', 'not_found', 'message', format('job: no job %s', p_job));
    END IF;
    IF p_on_worker IS NOT NULL THEN
        SELECT wk.id, wk.target, wk.state INTO w FROM workers wk WHERE wk.id = p_on_worker;
        IF NOT FOUND OR w.state = 'gone' THEN
            RETURN jsonb_build_object('status', 400, 'code', 'bad_request', 'message',
                format('on: worker %s is %s', p_on_worker, CASE WHEN FOUND THEN 'gone' ELSE 'not registered' END));
        END IF;
        IF w.target <> j.target THEN
            RETURN jsonb_build_object('status', 400, 'code', 'bad_request', 'message',
                format('on: worker %s evaluates %s, job %s is on %s', p_on_worker, w.target, p_job, j.target));
        END IF;
    END IF;
    IF p_on_gpu IS NOT NULL THEN
        want := CASE WHEN p_on_gpu ILIKE 'GPU-%' THEN jsonb_build_object('gpu_uuid', p_on_gpu)
                     ELSE jsonb_build_object('gpu', p_on_gpu) END;
    END IF;
    SELECT count(*) INTO n FROM candidates c
     WHERE c.job_id = p_job AND (c.id = p_candidate OR (p_candidate IS NULL AND c.committed))
       AND avo_recorded_eval(c.id) IS NOT NULL;
    IF n = 0 THEN
        RETURN jsonb_build_object('status', 409, 'code', 'conflict', 'message',
            format('job: job %s has no committed candidate with a recorded ok result', p_job));
    END IF;
    INSERT INTO revalidations (job_id, candidate_id, on_worker, on_gpu, why)
    VALUES (p_job, p_candidate, p_on_worker, p_on_gpu, COALESCE(p_why, 'user')) RETURNING id INTO rid;
    INSERT INTO evaluations (job_id, candidate_id, problem, target, priority, gpu_model, purpose, toolchain,
                             on_worker, revalidation_id)
    SELECT p_job, c.id, j.problem, j.target, j.priority, j.gpu, 'revalidate', want, p_on_worker, rid
      FROM candidates c
     WHERE c.job_id = p_job AND (c.id = p_candidate OR (p_candidate IS NULL AND c.committed))
       AND avo_recorded_eval(c.id) IS NOT NULL
     ORDER BY c.id;
    RETURN jsonb_build_object('revalidation', avo_revalidation_json(rid));
END $$;
