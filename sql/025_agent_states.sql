-- The agent operator's state changes as functions (issue 23, point 6): what
-- daemon/avod/agent*.c wrote as UPDATE/INSERT strings, so the agent step's
-- whole state machine reads here. Behaviour is that of the statements they
-- replace. The step's state in avod's memory (STARTING, SUPERVISING, TURN,
-- COMPACTING, TOOLS, ENDED) is drawn in daemon/avod/agent_internal.h; its
-- row only knows whether it runs and how it ended:
--
--   agent_steps.state
--
--   avo_agent_step_start ──▶ running ──avo_agent_step_end──▶ committed
--                              │  │                          ended
--                              │  │                          interrupted (avod stopping)
--                              │  └── avo_agent_recover ───▶ interrupted (a restart found it running)
--                              └── while running: avo_agent_step_turn (turns, tokens, cost, and
--                                  the job's totals), avo_agent_step_evaluated (evaluations,
--                                  repeats), avo_agent_record_call (its llm_calls rows; also late)
--
--   candidates.hold (the step's attempts, kept from the engine while it runs)
--
--   avo_agent_propose (sql/012) ──▶ hold ──avo_agent_release (the step's end)──▶ released
--                                     └────avo_agent_recover (a restart)──────▶ released
--   avo_agent_commit_request: the commit tool's accepted candidate, for the
--   engine's next pass (avo_job_apply applies the commit rule's verdict)
--
--   programs.state (the microbenchmark tool; sql/007)
--
--   avo_agent_program_queue ──▶ queued ──avo_claim_program──▶ running ──avo_complete_program──▶ done
--                                 │                              │
--                                 └──────────────┬───────────────┘
--                                                ▼
--                        failed: avo_agent_program_expire (the step stopped waiting),
--                                avo_agent_step_end (the step ended: outcome cancelled)

CREATE FUNCTION avo_agent_step_start(p_job bigint, p_island int) RETURNS bigint
LANGUAGE sql AS $$
    INSERT INTO agent_steps (job_id, island) VALUES (p_job, p_island) RETURNING id;
$$;

-- The step's end; nobody waits for its microbenchmarks any more.
CREATE FUNCTION avo_agent_step_end(p_step bigint, p_state text, p_reason text) RETURNS void
LANGUAGE sql AS $$
    UPDATE agent_steps SET state = p_state, reason = p_reason, ended_at = now() WHERE id = p_step;
    UPDATE programs SET state = 'failed', finished_at = now(),
           result = '{"outcome": "cancelled", "detail": "the step ended"}'
     WHERE step_id = p_step AND state IN ('queued', 'running');
$$;

-- The attempts of the island's step go to the engine: the committed one (if
-- any) under the rule, the others as the island's failed attempts.
CREATE FUNCTION avo_agent_release(p_job bigint, p_island int) RETURNS void
LANGUAGE sql AS $$
    UPDATE candidates SET hold = false WHERE job_id = p_job AND island = p_island AND hold;
$$;

-- Steps do not survive a restart (their conversation lived in avod): what
-- was running is interrupted and every held attempt goes to the engine.
CREATE FUNCTION avo_agent_recover() RETURNS void
LANGUAGE sql AS $$
    UPDATE agent_steps SET state = 'interrupted', reason = 'avod restarted', ended_at = now()
     WHERE state = 'running';
    UPDATE candidates SET hold = false WHERE hold;
$$;

-- An answer's totals, on the step and on the job.
CREATE FUNCTION avo_agent_step_turn(p_step bigint, p_job bigint, p_turns int, p_in bigint, p_out bigint,
                                    p_cost float8) RETURNS void
LANGUAGE sql AS $$
    UPDATE agent_steps SET turns = p_turns, in_tokens = in_tokens + p_in, out_tokens = out_tokens + p_out,
           cost_usd = cost_usd + p_cost
     WHERE id = p_step;
    UPDATE jobs SET tokens = tokens + p_in + p_out, cost_usd = cost_usd + p_cost WHERE id = p_job;
$$;

-- An evaluate call: a fresh evaluation, or a source the job had evaluated before.
CREATE FUNCTION avo_agent_step_evaluated(p_step bigint, p_fresh boolean) RETURNS void
LANGUAGE sql AS $$
    UPDATE agent_steps SET evaluations = evaluations + CASE WHEN p_fresh THEN 1 ELSE 0 END,
                           repeats = repeats + CASE WHEN p_fresh THEN 0 ELSE 1 END
     WHERE id = p_step;
$$;

-- One provider request's transcript row (late: answered after its step ended).
CREATE FUNCTION avo_agent_record_call(p_step bigint, p_job bigint, p_turn int, p_provider text, p_model text,
                                      p_request jsonb, p_response jsonb, p_stop text, p_error text, p_attempts int,
                                      p_latency_s float8, p_in bigint, p_out bigint, p_cached bigint,
                                      p_cost float8, p_late boolean) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO llm_calls (step_id, job_id, turn, provider, model, request, response, stop, error, attempts,
                           latency_s, in_tokens, out_tokens, cached_tokens, cost_usd, late)
    VALUES (p_step, p_job, p_turn, p_provider, p_model, p_request, p_response, p_stop, p_error, p_attempts,
            p_latency_s, p_in, p_out, p_cached, p_cost, p_late);
$$;

CREATE FUNCTION avo_agent_commit_request(p_candidate bigint, p_notes text) RETURNS void
LANGUAGE sql AS $$
    UPDATE candidates SET commit_requested = true, notes = p_notes WHERE id = p_candidate;
$$;

-- A microbenchmark for a worker of the job's target (p_step 0: none).
CREATE FUNCTION avo_agent_program_queue(p_job bigint, p_step bigint, p_target text, p_language text,
                                        p_source text) RETURNS bigint
LANGUAGE sql AS $$
    INSERT INTO programs (job_id, step_id, target, language, source)
    VALUES (p_job, NULLIF(p_step, 0), p_target, p_language, p_source) RETURNING id;
$$;

-- The step stopped waiting for its microbenchmark (PROGRAM_WAIT_S).
CREATE FUNCTION avo_agent_program_expire(p_program bigint) RETURNS void
LANGUAGE sql AS $$
    UPDATE programs SET state = 'failed', finished_at = now() WHERE id = p_program AND state IN ('queued', 'running');
$$;
