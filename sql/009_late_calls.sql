-- Issue 19: a provider call whose answer comes after its step ended (it was
-- already arriving when the step ended, so it was read rather than aborted)
-- is billed all the same. It is recorded and counted like any other, and
-- flagged late, so the transcript tells it from the step's own turns.

ALTER TABLE llm_calls ADD COLUMN late boolean NOT NULL DEFAULT false;

CREATE OR REPLACE FUNCTION avo_job_transcript(p_job bigint, p_step int) RETURNS jsonb
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
                              'cached_tokens', c.cached_tokens, 'cost_usd', c.cost_usd,
                              'late', c.late) ORDER BY c.id)
                           FROM llm_calls c WHERE c.step_id = n.id), '[]'::jsonb)) ORDER BY n.num)
              FROM (SELECT s.*, row_number() OVER (ORDER BY s.id) AS num
                      FROM agent_steps s WHERE s.job_id = p_job) n
             WHERE p_step IS NULL OR n.num = p_step), '[]'::jsonb),
            'tokens', (SELECT tokens FROM jobs WHERE id = p_job),
            'cost_usd', (SELECT cost_usd FROM jobs WHERE id = p_job))
    END;
$$;
