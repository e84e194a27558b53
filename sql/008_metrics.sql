-- GET /metrics: the Prometheus text exposition format (version 0.0.4),
-- computed from the tables in one snapshot. Counters count rows that are
-- never deleted, so they only grow; gauges are current states. Every state
-- a CHECK constraint allows is listed, with 0 where there is none, so a
-- series never disappears.

-- A label value with \, " and newline escaped as the format requires.
CREATE OR REPLACE FUNCTION avo_prom_label(v text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT replace(replace(replace(COALESCE(v, ''), E'\\', E'\\\\'), '"', E'\\"'), E'\n', E'\\n');
$$;

CREATE OR REPLACE FUNCTION avo_metrics() RETURNS text LANGUAGE sql STABLE AS $$
WITH
job_states AS (
    SELECT s.state, (SELECT count(*) FROM jobs j WHERE j.state = s.state) n
      FROM unnest(ARRAY['queued','running','succeeded','failed','cancelled']) s(state)),
queue AS (
    SELECT target, count(*) n FROM evaluations WHERE state = 'queued' GROUP BY target),
running AS (
    SELECT target, count(*) n FROM evaluations WHERE state = 'running' GROUP BY target),
outcomes AS (
    SELECT COALESCE(outcome, state) outcome, count(*) n FROM evaluations
     WHERE state IN ('done','failed','cancelled') GROUP BY 1),
durations AS (
    SELECT extract(epoch FROM finished_at - claimed_at) d FROM evaluations
     WHERE state IN ('done','failed') AND claimed_at IS NOT NULL AND finished_at IS NOT NULL),
buckets AS (
    SELECT le, (SELECT count(*) FROM durations WHERE d <= le) n
      FROM unnest(ARRAY[1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600]::float8[]) le),
worker_states AS (
    SELECT s.state, (SELECT count(*) FROM workers w WHERE w.state = s.state) n
      FROM unnest(ARRAY['idle','busy','draining','unhealthy','gone']) s(state)),
llm AS (
    SELECT provider, sum(in_tokens) tin, sum(out_tokens) tout, sum(cached_tokens) tcached, sum(cost_usd) cost,
           count(*) FILTER (WHERE error IS NULL) ok, count(*) FILTER (WHERE error IS NOT NULL) err
      FROM llm_calls GROUP BY provider),
prog AS (
    SELECT s.state, (SELECT count(*) FROM programs p WHERE p.state = s.state) n
      FROM unnest(ARRAY['queued','running','done','failed']) s(state))
SELECT concat_ws(E'\n',
    '# HELP avo_up Whether avod answered this scrape from its database (1).',
    '# TYPE avo_up gauge',
    'avo_up 1',
    '# HELP avo_jobs Jobs by state.',
    '# TYPE avo_jobs gauge',
    (SELECT string_agg(format('avo_jobs{state="%s"} %s', state, n), E'\n' ORDER BY state) FROM job_states),
    '# HELP avo_queue_depth Evaluations waiting for a worker, by target (the capability a worker must have).',
    '# TYPE avo_queue_depth gauge',
    (SELECT string_agg(format('avo_queue_depth{target="%s"} %s', avo_prom_label(target), n), E'\n' ORDER BY target)
       FROM queue),
    '# HELP avo_evaluations_running Evaluations claimed by a worker, by target.',
    '# TYPE avo_evaluations_running gauge',
    (SELECT string_agg(format('avo_evaluations_running{target="%s"} %s', avo_prom_label(target), n), E'\n'
                       ORDER BY target) FROM running),
    '# HELP avo_evaluations_total Finished evaluations by outcome.',
    '# TYPE avo_evaluations_total counter',
    (SELECT string_agg(format('avo_evaluations_total{outcome="%s"} %s', avo_prom_label(outcome), n), E'\n'
                       ORDER BY outcome) FROM outcomes),
    '# HELP avo_evaluation_duration_seconds Time from claim to result of finished evaluations.',
    '# TYPE avo_evaluation_duration_seconds histogram',
    (SELECT string_agg(format('avo_evaluation_duration_seconds_bucket{le="%s"} %s', le, n), E'\n' ORDER BY le)
       FROM buckets),
    format('avo_evaluation_duration_seconds_bucket{le="+Inf"} %s', (SELECT count(*) FROM durations)),
    format('avo_evaluation_duration_seconds_sum %s', (SELECT COALESCE(sum(d), 0) FROM durations)),
    format('avo_evaluation_duration_seconds_count %s', (SELECT count(*) FROM durations)),
    '# HELP avo_workers Registered workers by state.',
    '# TYPE avo_workers gauge',
    (SELECT string_agg(format('avo_workers{state="%s"} %s', state, n), E'\n' ORDER BY state) FROM worker_states),
    '# HELP avo_gpu_energy_joules_total GPU energy of applied evaluations (NVML), all jobs.',
    '# TYPE avo_gpu_energy_joules_total counter',
    format('avo_gpu_energy_joules_total %s', (SELECT COALESCE(sum(energy_j), 0) FROM jobs)),
    '# HELP avo_gpu_seconds_total GPU time of applied evaluations, all jobs.',
    '# TYPE avo_gpu_seconds_total counter',
    format('avo_gpu_seconds_total %s', (SELECT COALESCE(sum(gpu_seconds), 0) FROM jobs)),
    '# HELP avo_llm_tokens_total LLM tokens of agent steps by provider and kind (input includes cached).',
    '# TYPE avo_llm_tokens_total counter',
    (SELECT string_agg(format('avo_llm_tokens_total{provider="%1$s",kind="input"} %2$s' || E'\n' ||
                              'avo_llm_tokens_total{provider="%1$s",kind="output"} %3$s' || E'\n' ||
                              'avo_llm_tokens_total{provider="%1$s",kind="cached_input"} %4$s',
                              avo_prom_label(provider), tin, tout, tcached), E'\n' ORDER BY provider) FROM llm),
    '# HELP avo_llm_cost_usd_total LLM cost of agent steps by provider, at the configured prices.',
    '# TYPE avo_llm_cost_usd_total counter',
    (SELECT string_agg(format('avo_llm_cost_usd_total{provider="%s"} %s', avo_prom_label(provider), cost), E'\n'
                       ORDER BY provider) FROM llm),
    '# HELP avo_llm_requests_total LLM requests by provider and result.',
    '# TYPE avo_llm_requests_total counter',
    (SELECT string_agg(format('avo_llm_requests_total{provider="%1$s",result="ok"} %2$s' || E'\n' ||
                              'avo_llm_requests_total{provider="%1$s",result="error"} %3$s',
                              avo_prom_label(provider), ok, err), E'\n' ORDER BY provider) FROM llm),
    '# HELP avo_programs Agent microbenchmarks by state.',
    '# TYPE avo_programs gauge',
    (SELECT string_agg(format('avo_programs{state="%s"} %s', state, n), E'\n' ORDER BY state) FROM prog)
) || E'\n';
$$;
