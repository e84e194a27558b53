-- The agent operator (issue 7): a step's attempts are held back from the
-- engine until the step ends (the agent, not the engine, decides which one
-- it submits for commit), token and cost accounting, the steps, and every
-- provider call as a transcript.

ALTER TABLE candidates
    ADD COLUMN hold boolean NOT NULL DEFAULT false,             -- an attempt of a running agent step
    ADD COLUMN commit_requested boolean NOT NULL DEFAULT false;  -- the agent's commit (the rule still applies)
ALTER TABLE jobs
    ADD COLUMN tokens bigint NOT NULL DEFAULT 0,
    ADD COLUMN cost_usd float8 NOT NULL DEFAULT 0;

CREATE TABLE agent_steps (
    id          bigserial PRIMARY KEY,
    job_id      bigint NOT NULL REFERENCES jobs (id),
    island      int NOT NULL DEFAULT 0,
    state       text NOT NULL DEFAULT 'running'
                CHECK (state IN ('running', 'committed', 'ended', 'interrupted')),
    reason      text,
    turns       int NOT NULL DEFAULT 0,
    evaluations int NOT NULL DEFAULT 0,
    repeats     int NOT NULL DEFAULT 0,      -- evaluate calls on a source the job had evaluated before
    in_tokens   bigint NOT NULL DEFAULT 0,
    out_tokens  bigint NOT NULL DEFAULT 0,
    cost_usd    float8 NOT NULL DEFAULT 0,
    started_at  timestamptz NOT NULL DEFAULT now(),
    ended_at    timestamptz
);
CREATE INDEX agent_steps_job ON agent_steps (job_id, id);

-- One row per provider request: the messages this turn added (the neutral
-- form of llm.h; the API key is never part of it), the answer, tokens,
-- latency and cost.
CREATE TABLE llm_calls (
    id            bigserial PRIMARY KEY,
    step_id       bigint NOT NULL REFERENCES agent_steps (id),
    job_id        bigint NOT NULL REFERENCES jobs (id),
    turn          int NOT NULL,
    provider      text NOT NULL,
    model         text NOT NULL,
    request       jsonb NOT NULL,
    response      jsonb,
    stop          text,
    error         text,
    attempts      int NOT NULL DEFAULT 1,
    latency_s     float8 NOT NULL DEFAULT 0,
    in_tokens     bigint NOT NULL DEFAULT 0,
    out_tokens    bigint NOT NULL DEFAULT 0,
    cached_tokens bigint NOT NULL DEFAULT 0,
    cost_usd      float8 NOT NULL DEFAULT 0,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX llm_calls_step ON llm_calls (step_id, id);

-- An agent's attempt: source, candidate (held, parented on the version the
-- step started from, with the diff against it) and its evaluation, in one
-- statement. The same source twice in a
-- job is not evaluated again: the existing candidate comes back with
-- fresh = false.
CREATE FUNCTION avo_agent_propose(p_job bigint, p_island int, p_parent bigint, p_sha text, p_source text,
                                  p_diff text)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    cid bigint; eid bigint; j jobs%ROWTYPE;
BEGIN
    SELECT * INTO j FROM jobs WHERE id = p_job FOR UPDATE;
    IF NOT FOUND OR j.state <> 'running' THEN
        RETURN jsonb_build_object('error', 'the job is not running');
    END IF;
    SELECT c.id, (SELECT max(e.id) FROM evaluations e WHERE e.candidate_id = c.id)
      INTO cid, eid FROM candidates c WHERE c.job_id = p_job AND c.sha256 = p_sha;
    IF FOUND THEN
        RETURN jsonb_build_object('candidate', cid, 'evaluation', eid, 'fresh', false);
    END IF;
    IF (SELECT count(*) FROM evaluations WHERE job_id = p_job) >= j.eval_budget THEN
        RETURN jsonb_build_object('error', 'the job''s evaluation budget is spent');
    END IF;
    INSERT INTO sources (sha256, body) VALUES (p_sha, p_source) ON CONFLICT (sha256) DO NOTHING;
    INSERT INTO candidates (job_id, sha256, parent_id, operator, island, hold, diff)
    VALUES (p_job, p_sha, p_parent, 'agent', p_island, true, p_diff) RETURNING id INTO cid;
    INSERT INTO evaluations (job_id, candidate_id, problem, target, priority, gpu_model)
    VALUES (p_job, cid, j.problem, j.target, j.priority, j.spec->>'gpu') RETURNING id INTO eid;
    RETURN jsonb_build_object('candidate', cid, 'evaluation', eid, 'fresh', true);
END $$;

CREATE OR REPLACE FUNCTION avo_job_snapshot(p_id bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'id', j.id, 'state', j.state, 'problem', j.problem, 'operator', j.operator,
        'spec', j.spec, 'budget', j.eval_budget, 'target', j.target,
        'seed_candidate', j.seed_candidate, 'best_candidate', j.best_candidate,
        'best_aggregate', (SELECT aggregate FROM candidates WHERE id = j.best_candidate),
        'seed_aggregate', (SELECT aggregate FROM candidates WHERE id = j.seed_candidate),
        'seed_source', (SELECT body FROM sources WHERE sha256 = j.spec->'seed'->>'sha256'),
        'elapsed_s', EXTRACT(EPOCH FROM now() - COALESCE(j.started_at, now())),
        'gpu_seconds', j.gpu_seconds, 'cpu_seconds', j.cpu_seconds, 'energy_j', j.energy_j,
        'commits', j.commits, 'stale', j.stale,
        'total', (SELECT count(*) FROM evaluations WHERE job_id = j.id),
        'tokens', j.tokens, 'cost_usd', j.cost_usd,
        'inflight', (SELECT count(*) FROM evaluations e JOIN candidates c ON c.id = e.candidate_id
                      WHERE e.job_id = j.id AND (e.state IN ('queued','running') OR (c.hold AND NOT e.consumed))),
        'islands', COALESCE((SELECT jsonb_agg(jsonb_build_object(
                        'idx', i.idx, 'head', i.head, 'best_candidate', i.best_candidate,
                        'best', i.best, 'commits', i.commits, 'stale', i.stale, 'level', i.level,
                        'migrations', i.migrations,
                        'inflight', (SELECT count(*) FROM evaluations e JOIN candidates c ON c.id = e.candidate_id
                                      WHERE e.job_id = j.id AND c.island = i.idx
                                        AND (e.state IN ('queued','running') OR (c.hold AND NOT e.consumed)))) ORDER BY i.idx)
                      FROM islands i WHERE i.job_id = j.id), '[]'::jsonb),
        'finished', COALESCE((SELECT jsonb_agg(jsonb_build_object(
                        'eval', e.id, 'candidate', e.candidate_id, 'parent', c.parent_id,
                        'island', c.island, 'outcome', e.outcome, 'aggregate', e.aggregate,
                        'detail', e.result->>'detail', 'knobs', c.knobs,
                        'operator', c.operator, 'commit_requested', c.commit_requested,
                        'gpu_s', k.gpu_s, 'cpu_s', k.cpu_s, 'energy_j', k.energy_j) ORDER BY e.id)
                      FROM evaluations e JOIN candidates c ON c.id = e.candidate_id,
                           LATERAL avo_eval_cost(e.target, e.result) k
                     WHERE e.job_id = j.id AND e.state IN ('done','failed') AND NOT e.consumed AND NOT c.hold),
                     '[]'::jsonb),
        'tried', COALESCE((SELECT jsonb_agg(jsonb_build_object(
                        'candidate', c.id, 'knobs', c.knobs, 'outcome', c.outcome,
                        'aggregate', c.aggregate, 'island', c.island) ORDER BY c.id)
                      FROM candidates c WHERE c.job_id = j.id), '[]'::jsonb))
      FROM jobs j WHERE j.id = p_id;
$$;

-- A job's agent steps with every provider call, for `avoctl transcript`:
-- p_step = the step's number within the job (1, 2, ...), NULL = all. NULL
-- when the job does not exist.
CREATE FUNCTION avo_job_transcript(p_job bigint, p_step int) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM jobs WHERE id = p_job) THEN NULL ELSE
        jsonb_build_object('job', p_job, 'steps', COALESCE((
            SELECT jsonb_agg(jsonb_build_object(
                'step', n.num, 'id', n.id, 'island', n.island, 'state', n.state, 'reason', n.reason,
                'turns', n.turns, 'evaluations', n.evaluations, 'in_tokens', n.in_tokens,
                'out_tokens', n.out_tokens, 'cost_usd', n.cost_usd, 'started_at', n.started_at,
                'ended_at', n.ended_at,
                'calls', COALESCE((SELECT jsonb_agg(jsonb_build_object(
                              'turn', c.turn, 'provider', c.provider, 'model', c.model,
                              'request', c.request, 'response', c.response, 'stop', c.stop,
                              'error', c.error, 'attempts', c.attempts, 'latency_s', c.latency_s,
                              'in_tokens', c.in_tokens, 'out_tokens', c.out_tokens,
                              'cached_tokens', c.cached_tokens, 'cost_usd', c.cost_usd) ORDER BY c.id)
                           FROM llm_calls c WHERE c.step_id = n.id), '[]'::jsonb)) ORDER BY n.num)
              FROM (SELECT s.*, row_number() OVER (ORDER BY s.id) AS num
                      FROM agent_steps s WHERE s.job_id = p_job) n
             WHERE p_step IS NULL OR n.num = p_step), '[]'::jsonb),
            'tokens', (SELECT tokens FROM jobs WHERE id = p_job),
            'cost_usd', (SELECT cost_usd FROM jobs WHERE id = p_job))
    END;
$$;
