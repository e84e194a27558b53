-- Per-team quotas and fair share (issue 22, "Quotas and fair share";
-- docs/operations.md, "Teams and quotas").
--
-- avod writes the quota file's lines and the fair-share half-life here at
-- start and on every reload (avo_quotas_set); workers read them in the claim,
-- so a quota holds on every worker without a message to it.
--
-- Usage is device time: what an evaluation held its device for, taken from
-- its result as avo_eval_cost computes it (the harness's wall time on a GPU;
-- compile plus harness time on a CPU worker), or the time it was claimed for
-- when a worker completed it without a result. It is charged to the team of
-- the evaluation's job by avo_complete, into one row per team (one UPDATE
-- per evaluation: the queue's throughput is docs/benchmarks.md's): a
-- decayed sum (Slurm's fair-share usage, halved every half-life), what the
-- claim order compares, and plain seconds of the current UTC day and ISO
-- week, what the quotas count.
-- Jobs without a team are charged, limited and ordered as one group, ''.

CREATE TABLE team_quotas (
    team            text PRIMARY KEY,     -- a team of avod's "teams", or '*': every team without a line
    jobs            int CHECK (jobs >= 0),                 -- running jobs at once
    gpu_s_day       double precision CHECK (gpu_s_day >= 0),  -- device-seconds per UTC day
    gpu_s_week      double precision CHECK (gpu_s_week >= 0), -- device-seconds per ISO week (from Monday, UTC)
    evals_in_flight int CHECK (evals_in_flight >= 0),      -- evaluations running at once
    share           double precision NOT NULL DEFAULT 1 CHECK (share > 0)
);

CREATE TABLE fair_share_config (
    one         boolean PRIMARY KEY DEFAULT true CHECK (one),
    half_life_s double precision NOT NULL DEFAULT 604800 CHECK (half_life_s > 0)
);
INSERT INTO fair_share_config DEFAULT VALUES;

CREATE TABLE team_usage (
    team      text PRIMARY KEY,
    decayed_s double precision NOT NULL,
    at        timestamptz NOT NULL,         -- when decayed_s was last brought up to date
    day       date NOT NULL,                -- the UTC day of day_s
    day_s     double precision NOT NULL,
    week      date NOT NULL,                -- the Monday of week_s
    week_s    double precision NOT NULL
);

-- The claim and the quotas look at running evaluations of a team; without
-- this they would scan the whole table at every claim.
CREATE INDEX evaluations_running ON evaluations (job_id) WHERE state = 'running';

-- The running configuration, replaced whole (a reload never leaves half of
-- an old file). p_quotas: [{team, jobs, gpu_s_day, gpu_s_week,
-- evals_in_flight, share}], absent limits are none.
CREATE FUNCTION avo_quotas_set(p_quotas jsonb, p_half_life_s double precision) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM team_quotas;
    INSERT INTO team_quotas (team, jobs, gpu_s_day, gpu_s_week, evals_in_flight, share)
    SELECT q.team, q.jobs, q.gpu_s_day, q.gpu_s_week, q.evals_in_flight, COALESCE(q.share, 1)
      FROM jsonb_to_recordset(COALESCE(p_quotas, '[]'::jsonb))
           AS q(team text, jobs int, gpu_s_day float8, gpu_s_week float8, evals_in_flight int, share float8);
    UPDATE fair_share_config SET half_life_s = p_half_life_s;
END $$;

-- A team's line, or the '*' line, or none.
CREATE FUNCTION avo_team_quota(p_team text) RETURNS team_quotas
LANGUAGE sql STABLE AS $$
    SELECT * FROM team_quotas WHERE team IN (p_team, '*') ORDER BY team = '*' LIMIT 1;
$$;

CREATE FUNCTION avo_utc_day() RETURNS date LANGUAGE sql STABLE AS $$ SELECT (now() AT TIME ZONE 'UTC')::date $$;
CREATE FUNCTION avo_utc_week() RETURNS date LANGUAGE sql STABLE AS $$
    SELECT date_trunc('week', (now() AT TIME ZONE 'UTC')::date)::date
$$;

-- An UPDATE first and an INSERT only for a team's first charge: cheaper
-- than INSERT ... ON CONFLICT on this hot path (one call per evaluation).
CREATE FUNCTION avo_team_charge(p_team text, p_s double precision) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE d date := (now() AT TIME ZONE 'UTC')::date; w date;
BEGIN
    IF p_s IS NULL OR p_s <= 0 THEN RETURN; END IF;
    w := date_trunc('week', d)::date;
    LOOP
        UPDATE team_usage u
           SET decayed_s = u.decayed_s * power(0.5, greatest(0, extract(epoch FROM now() - u.at))
                                                    / (SELECT half_life_s FROM fair_share_config)) + p_s,
               at = now(),
               day_s = CASE WHEN u.day = d THEN u.day_s + p_s ELSE p_s END, day = d,
               week_s = CASE WHEN u.week = w THEN u.week_s + p_s ELSE p_s END, week = w
         WHERE u.team = p_team;
        EXIT WHEN FOUND;
        BEGIN
            INSERT INTO team_usage (team, decayed_s, at, day, day_s, week, week_s)
            VALUES (p_team, p_s, now(), d, p_s, w, p_s);
            EXIT;
        EXCEPTION WHEN unique_violation THEN
            -- another charge inserted it first: update that row
        END;
    END LOOP;
END $$;

-- The completion as in 017, charging the evaluation's device time to its
-- job's team in the same transaction. Here rather than in a trigger on
-- evaluations: a row trigger on the queue's hottest UPDATE cost a fifth of
-- the queue's throughput (docs/benchmarks.md). Evaluations that leave
-- 'running' another way (a lost worker's, given back by the rescuer; a
-- cancelled one) are not charged.
CREATE OR REPLACE FUNCTION avo_complete(p_eval bigint, p_worker bigint, p_outcome text,
                                        p_aggregate double precision, p_result jsonb)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE r record; c float8;
BEGIN
    UPDATE evaluations
       SET state = CASE WHEN p_outcome = 'ok' OR p_outcome IN
                        ('compile_error','crash','timeout','wrong_result','cheat_suspected','policy_violation')
                        THEN 'done' ELSE 'failed' END,
           outcome = p_outcome,
           -- never scored, whatever a worker sent
           aggregate = CASE WHEN p_outcome = 'policy_violation' THEN 0 ELSE p_aggregate END,
           result = p_result,
           finished_at = now(), lease_expires = NULL
     WHERE id = p_eval AND state = 'running' AND worker_id = p_worker
    RETURNING job_id, target, claimed_at INTO r;
    IF NOT FOUND THEN RETURN false; END IF;
    IF p_result IS NOT NULL THEN
        SELECT CASE WHEN r.target = 'cpu' THEN k.cpu_s ELSE k.gpu_s END INTO c
          FROM avo_eval_cost(r.target, p_result) k;
    END IF;
    PERFORM avo_team_charge((SELECT COALESCE(j.team, '') FROM jobs j WHERE j.id = r.job_id),
                            COALESCE(c, greatest(0, extract(epoch FROM now() - r.claimed_at))));
    RETURN true;
END $$;

-- Running evaluations of a team, and the seconds they have run so far.
CREATE FUNCTION avo_team_running(p_team text, OUT n int, OUT seconds double precision)
LANGUAGE sql STABLE AS $$
    SELECT count(*)::int, COALESCE(sum(greatest(0, extract(epoch FROM now() - e.claimed_at))), 0)
      FROM evaluations e JOIN jobs j ON j.id = e.job_id
     WHERE e.state = 'running' AND COALESCE(j.team, '') = p_team;
$$;

-- Device-seconds charged to a team today and this week (UTC; completed
-- evaluations).
CREATE FUNCTION avo_team_used(p_team text, OUT today double precision, OUT week double precision)
LANGUAGE sql STABLE AS $$
    SELECT COALESCE((SELECT CASE WHEN u.day = avo_utc_day() THEN u.day_s ELSE 0 END FROM team_usage u
                      WHERE u.team = p_team), 0),
           COALESCE((SELECT CASE WHEN u.week = avo_utc_week() THEN u.week_s ELSE 0 END FROM team_usage u
                      WHERE u.team = p_team), 0);
$$;

-- The fair-share load: decayed usage, plus what running evaluations have
-- held so far (so a claim a moment after another sees it), over the share.
-- The team with the lowest load is served first (Slurm's fair-share factor
-- 2^(-usage/share) orders the same way).
CREATE FUNCTION avo_team_load(p_team text) RETURNS double precision
LANGUAGE sql STABLE AS $$
    SELECT (COALESCE((SELECT u.decayed_s * power(0.5, greatest(0, extract(epoch FROM now() - u.at))
                                                       / (SELECT half_life_s FROM fair_share_config))
                        FROM team_usage u WHERE u.team = p_team), 0)
            + (avo_team_running(p_team)).seconds)
           / COALESCE((avo_team_quota(p_team)).share, 1);
$$;

CREATE FUNCTION avo_fmt_s(v double precision) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN v = trunc(v) THEN trunc(v)::bigint::text ELSE round(v::numeric, 1)::text END;
$$;

-- Why a team's queued evaluations may not be claimed now, or NULL: the
-- first limit reached, with its figures (the job's state detail shows it).
-- Completed evaluations count toward the day and the week; running ones
-- are charged when they end, so a team can end over its limit by what was
-- in flight (docs/operations.md).
CREATE FUNCTION avo_team_blocked(p_team text) RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE q team_quotas; r record; used record;
BEGIN
    q := avo_team_quota(p_team);
    IF q.team IS NULL THEN RETURN NULL; END IF;
    IF q.evals_in_flight IS NOT NULL THEN
        r := avo_team_running(p_team);
        IF r.n >= q.evals_in_flight THEN
            RETURN format('evaluations in flight %s of %s', r.n, q.evals_in_flight);
        END IF;
    END IF;
    IF q.gpu_s_day IS NOT NULL OR q.gpu_s_week IS NOT NULL THEN
        used := avo_team_used(p_team);
        IF used.today >= q.gpu_s_day THEN
            RETURN format('GPU-seconds today %s of %s', avo_fmt_s(used.today), avo_fmt_s(q.gpu_s_day));
        END IF;
        IF used.week >= q.gpu_s_week THEN
            RETURN format('GPU-seconds this week %s of %s', avo_fmt_s(used.week), avo_fmt_s(q.gpu_s_week));
        END IF;
    END IF;
    RETURN NULL;
END $$;

-- Room for more running jobs of a team (NULL: no limit).
CREATE FUNCTION avo_team_job_room(p_team text) RETURNS int
LANGUAGE sql STABLE AS $$
    SELECT q.jobs - (SELECT count(*)::int FROM jobs WHERE state = 'running' AND COALESCE(team, '') = p_team)
      FROM (SELECT (avo_team_quota(p_team)).jobs) q;
$$;

-- Why a queued job has not started, or NULL.
CREATE FUNCTION avo_job_quota_wait(p_id bigint) RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE j jobs; t text; q team_quotas; room int; ahead int;
BEGIN
    SELECT * INTO j FROM jobs WHERE id = p_id;
    IF NOT FOUND OR j.state NOT IN ('queued', 'running') THEN RETURN NULL; END IF;
    t := COALESCE(j.team, '');
    IF j.state = 'queued' THEN
        q := avo_team_quota(t);
        room := avo_team_job_room(t);
        SELECT count(*) INTO ahead FROM jobs o
         WHERE o.state = 'queued' AND COALESCE(o.team, '') = t
           AND (o.priority > j.priority OR (o.priority = j.priority AND o.id < j.id));
        IF room IS NOT NULL AND ahead >= room THEN
            RETURN format('team quota (running jobs %s of %s)', q.jobs - room, q.jobs);
        END IF;
        RETURN NULL;
    END IF;
    IF EXISTS (SELECT 1 FROM evaluations WHERE job_id = p_id AND state = 'queued') THEN
        t := avo_team_blocked(t);
        RETURN CASE WHEN t IS NULL THEN NULL ELSE 'team quota (' || t || ')' END;
    END IF;
    RETURN NULL;
END $$;

-- The engine's pass: running jobs, and queued jobs as far as their team's
-- job limit has room (by priority, then age), highest priority first.
CREATE FUNCTION avo_engine_jobs() RETURNS json
LANGUAGE sql STABLE AS $$
    SELECT COALESCE(json_agg(x.id ORDER BY x.priority DESC, x.id), '[]')
      FROM (SELECT id, priority FROM jobs WHERE state = 'running'
            UNION ALL
            SELECT q.id, q.priority
              FROM (SELECT j.id, j.priority, COALESCE(j.team, '') AS t,
                           row_number() OVER (PARTITION BY COALESCE(j.team, '') ORDER BY j.priority DESC, j.id) AS rn
                      FROM jobs j WHERE j.state = 'queued') q
             WHERE avo_team_job_room(q.t) IS NULL OR q.rn <= avo_team_job_room(q.t)) x;
$$;

-- A start over the team's job limit is refused here too, so a second
-- engine pass or a race cannot run more than the limit.
ALTER FUNCTION avo_job_apply(bigint, jsonb) RENAME TO avo_job_apply_021;
CREATE FUNCTION avo_job_apply(p_id bigint, d jsonb) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE t text; room int;
BEGIN
    IF (d->>'start')::boolean THEN
        SELECT COALESCE(team, '') INTO t FROM jobs WHERE id = p_id AND state = 'queued';
        IF FOUND THEN
            -- one start at a time per team: the count below must see the last one
            PERFORM pg_advisory_xact_lock(hashtext('avo_team_start:' || t));
            room := avo_team_job_room(t);
            IF room IS NOT NULL AND room <= 0 THEN
                RAISE EXCEPTION 'team quota: team ''%'' has no room for another running job', t;
            END IF;
        END IF;
    END IF;
    RETURN avo_job_apply_021(p_id, d);
END $$;

-- One claim as in 018: among all queued evaluations (p_among 'all'), those
-- of the jobs p_jobs ('jobs'), or those of jobs that are no longer active
-- ('inactive': the compares and re-validations of finished jobs).
CREATE FUNCTION avo_claim_from(p_worker bigint, p_target text, p_lease_s double precision, p_tc jsonb,
                               p_among text, p_jobs bigint[])
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
           AND (e.toolchain IS NULL OR avo_toolchain_match(p_tc, e.toolchain))
           AND (e.on_worker IS NULL OR e.on_worker = p_worker)
           AND CASE p_among WHEN 'all' THEN true
                            WHEN 'jobs' THEN e.job_id = ANY (p_jobs)
                            ELSE NOT EXISTS (SELECT 1 FROM jobs a
                                              WHERE a.id = e.job_id AND a.state IN ('queued','running')) END
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

-- The claim across teams by fair share: the teams of the active jobs, the
-- lowest load first, each unless a quota stops it; within a team, priority
-- then age (avo_claim_from). Last, work of jobs that are no longer active
-- (compares and re-validations asked for after a job ended), which no
-- team's quota holds. Claims take one lock for the whole ordering, so two
-- workers claiming at once see each other's evaluation (in the load and
-- the evaluations in flight) instead of both taking the same team's. The
-- teams come from the active jobs (a few rows, the jobs_active index), not
-- from the queued evaluations, so a deep queue costs no more than before.
CREATE OR REPLACE FUNCTION avo_claim(p_worker bigint, p_target text, p_lease_s double precision)
RETURNS TABLE (id bigint, job_id bigint, candidate_id bigint, problem text, source text, attempts int,
               against_id bigint, against_source text, confidence double precision, screen boolean,
               job_seed bigint)
LANGUAGE plpgsql AS $$
DECLARE tc jsonb; t record; teams text[];
BEGIN
    SELECT w.toolchain INTO tc FROM workers w WHERE w.id = p_worker;
    SELECT array_agg(DISTINCT COALESCE(j.team, '')) INTO teams FROM jobs j WHERE j.state IN ('queued','running');
    -- One team and no limits (the common case): no order to keep and
    -- nothing to count, so no lock either: the claim of 018 over
    -- everything queued.
    IF COALESCE(cardinality(teams), 0) <= 1 AND NOT EXISTS (
           SELECT 1 FROM team_quotas q WHERE q.jobs IS NOT NULL OR q.evals_in_flight IS NOT NULL
                                          OR q.gpu_s_day IS NOT NULL OR q.gpu_s_week IS NOT NULL) THEN
        RETURN QUERY SELECT * FROM avo_claim_from(p_worker, p_target, p_lease_s, tc, 'all', NULL);
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('avo_claim'));
    FOR t IN
        SELECT COALESCE(j.team, '') AS team, array_agg(j.id) AS ids
          FROM jobs j WHERE j.state IN ('queued','running') GROUP BY 1
         ORDER BY avo_team_load(COALESCE(j.team, '')), 1
    LOOP
        CONTINUE WHEN avo_team_blocked(t.team) IS NOT NULL;
        RETURN QUERY SELECT * FROM avo_claim_from(p_worker, p_target, p_lease_s, tc, 'jobs', t.ids);
        IF FOUND THEN RETURN; END IF;
    END LOOP;
    RETURN QUERY SELECT * FROM avo_claim_from(p_worker, p_target, p_lease_s, tc, 'inactive', NULL);
END $$;

-- Every team that has used a device or has a quota line: what `avoctl
-- teams` and GET /v1/teams show.
CREATE FUNCTION avo_teams_json() RETURNS jsonb
LANGUAGE sql STABLE AS $$
    WITH names AS (SELECT team FROM team_usage UNION SELECT team FROM team_quotas WHERE team <> '*'
                   UNION SELECT DISTINCT COALESCE(team, '') FROM jobs WHERE state IN ('queued', 'running'))
    SELECT jsonb_build_object(
        'half_life_s', (SELECT half_life_s FROM fair_share_config),
        'teams', COALESCE(jsonb_agg(jsonb_build_object(
            'team', n.team,
            'quota', (SELECT to_jsonb(q) - 'team' FROM team_quotas q WHERE q.team = (avo_team_quota(n.team)).team),
            'quota_line', (avo_team_quota(n.team)).team,
            'load', avo_team_load(n.team),
            'used_today_s', (avo_team_used(n.team)).today,
            'used_week_s', (avo_team_used(n.team)).week,
            'running', (avo_team_running(n.team)).n,
            'jobs_running', (SELECT count(*) FROM jobs WHERE state = 'running' AND COALESCE(team, '') = n.team),
            'jobs_queued', (SELECT count(*) FROM jobs WHERE state = 'queued' AND COALESCE(team, '') = n.team),
            'blocked', avo_team_blocked(n.team)) ORDER BY n.team), '[]'::jsonb))
      FROM names n;
$$;
