-- The knowledge base the agent operator searches (issue 7): documents cut
-- into chunks with PostgreSQL full-text search, and committed candidates
-- (their notes and diffs) searchable as past cases.

CREATE TABLE kb_documents (
    id         bigserial PRIMARY KEY,
    name       text NOT NULL,            -- the file name it was added as
    sha256     text NOT NULL UNIQUE,     -- of its text: the same text is stored once
    kind       text NOT NULL CHECK (kind IN ('markdown', 'text', 'source')),
    bytes      int NOT NULL,
    added_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE kb_chunks (
    id       bigserial PRIMARY KEY,
    doc_id   bigint NOT NULL REFERENCES kb_documents (id) ON DELETE CASCADE,
    seq      int NOT NULL,
    heading  text NOT NULL DEFAULT '',   -- the section path ("TMA > Boxes") or ""
    body     text NOT NULL,
    -- headings weigh more than body text in the ranking
    tsv      tsvector GENERATED ALWAYS AS (
                 setweight(to_tsvector('english', heading), 'A') ||
                 setweight(to_tsvector('english', body), 'B')) STORED,
    UNIQUE (doc_id, seq)
);
CREATE INDEX kb_chunks_tsv ON kb_chunks USING gin (tsv);

-- Past cases: what a committed candidate's notes and diff say. The search
-- below uses this very expression, so the index serves it.
CREATE INDEX candidates_case_tsv ON candidates
    USING gin (to_tsvector('english', COALESCE(notes, '') || ' ' || COALESCE(diff, '')))
    WHERE committed;

-- Add a document with its chunks ([{"heading", "body"}], cut by avod).
-- The same text again is not stored twice: the existing document is
-- returned with added = false.
CREATE FUNCTION avo_kb_add(p_name text, p_sha text, p_kind text, p_bytes int, p_chunks jsonb)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    did bigint;
BEGIN
    INSERT INTO kb_documents (name, sha256, kind, bytes) VALUES (p_name, p_sha, p_kind, p_bytes)
        ON CONFLICT (sha256) DO NOTHING RETURNING id INTO did;
    IF did IS NULL THEN
        SELECT id INTO did FROM kb_documents WHERE sha256 = p_sha;
        RETURN jsonb_build_object('id', did, 'added', false, 'name',
                                  (SELECT name FROM kb_documents WHERE id = did),
                                  'chunks', (SELECT count(*) FROM kb_chunks WHERE doc_id = did));
    END IF;
    INSERT INTO kb_chunks (doc_id, seq, heading, body)
    SELECT did, (c.ord - 1)::int, COALESCE(c.x->>'heading', ''), c.x->>'body'
      FROM jsonb_array_elements(p_chunks) WITH ORDINALITY AS c(x, ord);
    RETURN jsonb_build_object('id', did, 'added', true, 'name', p_name,
                              'chunks', jsonb_array_length(p_chunks));
END $$;

-- Ranked hits for a query in web-search syntax ("wgmma swizzle",
-- "\"bank conflict\" -ampere"): document chunks and past cases together,
-- each with a highlighted snippet (<<match>>).
CREATE FUNCTION avo_kb_search(p_query text, p_limit int) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    WITH q AS (SELECT websearch_to_tsquery('english', p_query) AS q),
    hits AS (
        SELECT 'document' AS kind, k.id AS id, NULL::bigint AS job, d.name AS source, k.heading AS title,
               ts_rank_cd(k.tsv, q.q) AS rank,
               ts_headline('english', k.body, q.q,
                           'StartSel=<<, StopSel=>>, MaxWords=40, MinWords=15, MaxFragments=2') AS snippet
          FROM kb_chunks k JOIN kb_documents d ON d.id = k.doc_id, q
         WHERE k.tsv @@ q.q
        UNION ALL
        SELECT 'case', c.id, c.job_id, j.problem,
               'candidate ' || c.id || ' of job ' || c.job_id || ' (' || j.problem || ')',
               ts_rank_cd(to_tsvector('english', COALESCE(c.notes, '') || ' ' || COALESCE(c.diff, '')), q.q),
               ts_headline('english', COALESCE(c.notes, '') || E'\n' || COALESCE(c.diff, ''), q.q,
                           'StartSel=<<, StopSel=>>, MaxWords=40, MinWords=15, MaxFragments=2')
          FROM candidates c JOIN jobs j ON j.id = c.job_id, q
         WHERE c.committed
           AND to_tsvector('english', COALESCE(c.notes, '') || ' ' || COALESCE(c.diff, '')) @@ q.q)
    SELECT jsonb_build_object('query', p_query, 'hits', COALESCE(jsonb_agg(jsonb_build_object(
               'kind', kind, 'id', id, 'job', job, 'source', source, 'title', title,
               'rank', round(rank::numeric, 4), 'snippet', snippet) ORDER BY rank DESC, id), '[]'::jsonb))
      FROM (SELECT * FROM hits ORDER BY rank DESC, id LIMIT p_limit) h;
$$;

CREATE FUNCTION avo_kb_chunk_json(p_id bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('id', k.id, 'document', d.id, 'source', d.name, 'seq', k.seq,
                              'of', (SELECT count(*) FROM kb_chunks WHERE doc_id = d.id),
                              'title', k.heading, 'body', k.body)
      FROM kb_chunks k JOIN kb_documents d ON d.id = k.doc_id WHERE k.id = p_id;
$$;

CREATE FUNCTION avo_kb_list() RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('documents', COALESCE(jsonb_agg(jsonb_build_object(
               'id', d.id, 'name', d.name, 'kind', d.kind, 'bytes', d.bytes, 'added_at', d.added_at,
               'chunks', (SELECT count(*) FROM kb_chunks WHERE doc_id = d.id)) ORDER BY d.id), '[]'::jsonb))
      FROM kb_documents d;
$$;
