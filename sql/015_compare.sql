-- Issue 20, point 8: a paired comparison of two stored candidates as a
-- queued task (POST /v1/compare; docs/evaluation.md, "Compare tasks").
-- It is an evaluation with purpose 'compare': the candidate timed paired
-- against the against in one harness process, exactly as a job's final
-- measurement, claimed by any worker of the candidate's job's target. It
-- belongs to the candidate's job only because evaluations.job_id is NOT
-- NULL: it is never consumed (the engine applies nothing from it; the
-- job's counts by outcome count consumed evaluations only), the read
-- models of the search and of the final measurement filter on purpose, the
-- completion wake-up below ignores it, and nothing here writes a job, an
-- island or a candidate. What it costs is no job's. Nightly campaigns use
-- it to decide regressions (client/campaign.c).

ALTER TABLE evaluations DROP CONSTRAINT evaluations_purpose_check;
ALTER TABLE evaluations ADD CONSTRAINT evaluations_purpose_check
    CHECK (purpose IN ('search','final','compare'));

-- The confidence of the paired interval when it is not the job's
-- commit.confidence (a compare's own; NULL otherwise).
ALTER TABLE evaluations
    ADD COLUMN confidence double precision CHECK (confidence > 0 AND confidence < 1);

-- The claim as in 014 (013's screen, then the job's seed), the
-- evaluation's own confidence first. A compare is never screened.
CREATE OR REPLACE FUNCTION avo_claim(p_worker bigint, p_target text, p_lease_s double precision)
RETURNS TABLE (id bigint, job_id bigint, candidate_id bigint, problem text, source text, attempts int,
               against_id bigint, against_source text, confidence double precision, screen boolean,
               job_seed bigint)
LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY
    WITH next AS (
        SELECT e.id FROM evaluations e
         WHERE e.state = 'queued' AND e.target = p_target
           AND (e.available_at IS NULL OR e.available_at <= now())
           AND (e.gpu_model IS NULL OR EXISTS (
                  SELECT 1 FROM workers w, jsonb_array_elements(w.devices) d
                   WHERE w.id = p_worker AND d->>'kind' = 'gpu'
                     AND strpos(lower(d->>'name'), lower(e.gpu_model)) > 0))
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

-- The completion wake-up as in 003, blind to compares: a finished compare
-- is never consumed, so counted among "results waiting to be applied" it
-- would hold back every later wake-up of its job (avod would see the job's
-- results only on its periodic tick), and there is nothing in it for the
-- engine to apply.
CREATE OR REPLACE FUNCTION avo_notify_done() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state IN ('done','failed') AND OLD.state IS DISTINCT FROM NEW.state AND NEW.purpose <> 'compare'
       AND NOT EXISTS (SELECT 1 FROM evaluations e
                        WHERE e.job_id = NEW.job_id AND e.state IN ('done','failed')
                          AND NOT e.consumed AND e.id <> NEW.id AND e.purpose <> 'compare') THEN
        PERFORM pg_notify('avo_eval_done', NEW.job_id::text);
    END IF;
    RETURN NULL;
END $$;

-- One compare as the API shows it; NULL when p_id is no compare.
CREATE OR REPLACE FUNCTION avo_compare_json(p_id bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'id', e.id, 'candidate', e.candidate_id, 'against', e.against_id,
        'job', e.job_id, 'against_job', ag.job_id, 'problem', e.problem, 'target', e.target,
        'confidence', e.confidence, 'state', e.state, 'attempts', e.attempts, 'worker', e.worker_id,
        'outcome', e.outcome, 'aggregate', e.aggregate, 'unit', e.result->>'unit',
        'detail', e.result->>'detail', 'paired', e.result->'paired',
        'created_at', e.created_at, 'claimed_at', e.claimed_at, 'finished_at', e.finished_at)
      FROM evaluations e LEFT JOIN candidates ag ON ag.id = e.against_id
     WHERE e.id = p_id AND e.purpose = 'compare';
$$;

-- Queue a compare of p_candidate against p_against at p_confidence: both
-- stored candidates of one problem and one target. Answers the compare
-- ({"compare": ...}; one queued or running for the same pair and
-- confidence is returned instead of a second) or {"status", "code",
-- "message"} naming the field at fault.
CREATE OR REPLACE FUNCTION avo_compare_request(p_candidate bigint, p_against bigint, p_confidence double precision)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    a record; b record; eid bigint;
BEGIN
    SELECT c.id, j.id AS job, j.problem, j.target, j.priority, j.spec->>'gpu' AS gpu
      INTO a FROM candidates c JOIN jobs j ON j.id = c.job_id WHERE c.id = p_candidate;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('status', 404, 'code', 'not_found',
                                  'message', format('candidate: no candidate %s', p_candidate));
    END IF;
    SELECT c.id, j.id AS job, j.problem, j.target
      INTO b FROM candidates c JOIN jobs j ON j.id = c.job_id WHERE c.id = p_against;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('status', 404, 'code', 'not_found',
                                  'message', format('against: no candidate %s', p_against));
    END IF;
    IF a.problem <> b.problem THEN
        RETURN jsonb_build_object('status', 400, 'code', 'bad_request', 'message',
            format('against: candidate %s is of problem %s and candidate %s of %s; a paired comparison needs one problem',
                   p_against, b.problem, p_candidate, a.problem));
    END IF;
    IF a.target <> b.target THEN
        RETURN jsonb_build_object('status', 400, 'code', 'bad_request', 'message',
            format('against: candidate %s is of a job on target %s and candidate %s on %s; a paired comparison runs on one target',
                   p_against, b.target, p_candidate, a.target));
    END IF;
    SELECT e.id INTO eid FROM evaluations e
     WHERE e.purpose = 'compare' AND e.candidate_id = p_candidate AND e.against_id = p_against
       AND e.confidence = p_confidence AND e.state IN ('queued','running')
     ORDER BY e.id LIMIT 1;
    IF eid IS NULL THEN
        INSERT INTO evaluations (job_id, candidate_id, problem, target, priority, gpu_model, against_id,
                                 purpose, confidence)
        VALUES (a.job, p_candidate, a.problem, a.target, a.priority, a.gpu, p_against, 'compare',
                p_confidence)
        RETURNING id INTO eid;
    END IF;
    RETURN jsonb_build_object('compare', avo_compare_json(eid));
END $$;
