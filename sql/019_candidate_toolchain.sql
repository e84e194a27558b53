-- Issue 21, point 3 (the campaign option) and `avoctl show`: a candidate
-- says which toolchain produced its result. "toolchain" is the versions of
-- the search evaluation the candidate's scores come from (the latest done
-- one, as in 013), "unrecorded" for a result from before 018, null for a
-- candidate never evaluated. `avoctl campaign run` compares it, for the
-- previous night's bests, with the live workers' toolchains
-- (docs/jobs.md, "Re-validation").
ALTER FUNCTION avo_candidate_json(bigint, boolean) RENAME TO avo_candidate_json_018;
CREATE FUNCTION avo_candidate_json(p_id bigint, p_with_source boolean) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT c || jsonb_build_object('toolchain', (
               SELECT avo_result_toolchain(e.result) FROM evaluations e
                WHERE e.candidate_id = p_id AND e.state = 'done' AND e.purpose = 'search'
                ORDER BY e.id DESC LIMIT 1))
      FROM avo_candidate_json_018(p_id, p_with_source) c;
$$;
