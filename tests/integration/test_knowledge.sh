#!/usr/bin/env bash
# The knowledge base (issue 7), through avoctl and the API: the starter
# documents are added and cut into chunks, the same text is stored once,
# full-text search ranks and highlights, a chunk is read back whole,
# committed candidates are searchable as past cases, and bad input is
# refused with the file or field named.
source "$(dirname "$0")/lib.sh"
api() {  # METHOD PATH [BODY]: the daemon's JSON answer
    curl -s --unix-socket "$AVO_HOME/avod.sock" -X "$1" ${3:+-d "$3"} "http://avod$2"
}
q() { psql_avo "$1"; }

check "avod starts" start_avod
KB="$ROOT/docs/knowledge"
avoctl kb add "$KB"/*.md >"$T/add.out" 2>&1
rc=$?
cat "$T/add.out"
NDOCS=$(ls "$KB"/*.md | wc -l)
check "avoctl kb add takes every starter document (exit 0)" \
    bash -c '[ "$0" = 0 ] && [ "$(grep -c "^added " "$1")" = "$2" ]' "$rc" "$T/add.out" "$NDOCS"
check "the documents are cut into chunks, markdown sections titled by their heading path" \
    test "$(q "SELECT count(*) FROM kb_chunks k JOIN kb_documents d ON d.id = k.doc_id WHERE d.name = 'hopper-tma.md' AND k.heading = 'Hopper TMA: the tensor memory accelerator > Tensor maps'")" = 1
check "every chunk is at most about the chunk size" \
    test "$(q "SELECT max(length(body)) <= 1900 FROM kb_chunks")" = t
avoctl kb add "$KB/hopper-tma.md" >"$T/again.out" 2>&1
check "the same text again is stored once (and says so)" \
    bash -c 'grep -q "already in the knowledge base as document" "$0" && [ "$1" = 1 ]' "$T/again.out" \
    "$(q "SELECT count(*) FROM kb_documents WHERE name = 'hopper-tma.md'")"

# Search: ranked, highlighted, headings weigh more.
api GET "/v1/kb/search?q=swizzle%20descriptor&limit=3" >"$T/s1.json"
check "a search ranks hits and highlights the words" \
    bash -c 'jq -e ".hits | length >= 1 and length <= 3" "$0" | grep -qx true && jq -r ".hits[0].snippet" "$0" | grep -qi "<<swizzle>>\|<<descriptor>>"' "$T/s1.json"
check "the best hit for 'mbarrier expect_tx parity' is the TMA note on completion" \
    test "$(api GET "/v1/kb/search?q=mbarrier%20parity%20expect_tx" | jq -r '.hits[0].title')" = "Hopper TMA: the tensor memory accelerator > Completion on mbarriers"
avoctl kb search online softmax rescale --limit 2 >"$T/s2.out"
check "avoctl kb search prints ranked hits with snippets" \
    bash -c 'grep -q "^\[chunk [0-9]*\] online-softmax.md - " "$0" && grep -q "<<" "$0"' "$T/s2.out"
ID=$(api GET "/v1/kb/search?q=register%20reallocation%20setmaxnreg" | jq -r '.hits[0].id')
avoctl kb show "$ID" >"$T/show.out"
check "avoctl kb show prints the whole chunk, titled by its section" \
    bash -c 'grep -q "^chunk $1 of hopper-wgmma.md ([0-9]* of [0-9]*): Hopper tensor cores: wgmma > Register reallocation" "$0" &&
             grep -q "setmaxnreg.inc/dec.sync.aligned.u32" "$0"' "$T/show.out" "$ID"
avoctl kb search quantum chromodynamics >"$T/none.out"
check "a search without hits says so (exit 0)" grep -q "no hits for 'quantum chromodynamics'" "$T/none.out"
avoctl kb list >"$T/list.out"
check "avoctl kb list shows the documents" test "$(grep -c '\.md' "$T/list.out")" = "$NDOCS"

# Past cases: a committed candidate's notes are searchable. sgemm's seed is
# naive at its default knobs (~2 vs ~50 GFLOP/s), so tune's first
# proposals beat it and are committed.
start_worker
JOB=$(avoctl --json submit --problem cpu/sgemm --evaluations 6 | jq -r .id)
timeout 300 avoctl watch "$JOB" >/dev/null 2>&1
CASE=$(q "SELECT id FROM candidates WHERE job_id = $JOB AND committed AND notes LIKE 'tune:%' ORDER BY id LIMIT 1")
NOTES=$(q "SELECT notes FROM candidates WHERE id = ${CASE:-0}")
check "a committed candidate is found as a past case by the words of its notes" \
    bash -c 'curl -s --unix-socket "$AVO_HOME/avod.sock" -G --data-urlencode "q=$1" --data "limit=100" "http://avod/v1/kb/search" |
             jq -e --argjson c "$0" "any(.hits[]; .kind == \"case\" and .id == \$c)" | grep -qx true' "${CASE:-0}" "$NOTES"

# Bad input: each refused with the file or field named, nothing stored.
printf '' >"$T/empty.md"
printf 'a\0b' >"$T/nul.txt"
printf '\xff\xfe bad' >"$T/latin.txt"
head -c 600000 /dev/zero | tr '\0' 'x' >"$T/big.txt"
BEFORE=$(q "SELECT count(*) FROM kb_documents")
avoctl kb add "$T/empty.md" "$T/nul.txt" "$T/latin.txt" "$T/big.txt" "$T/missing.md" >"$T/bad.out" 2>&1
rc=$?
cat "$T/bad.out"
check "bad files are refused, each named with its reason, exit 1" \
    bash -c '[ "$0" = 1 ] && grep -q "empty.md: the file is empty" "$1" && grep -q "nul.txt: contains NUL bytes" "$1" &&
             grep -q "latin.txt: not UTF-8 text" "$1" && grep -q "big.txt: larger than 512 KiB" "$1" &&
             grep -q "missing.md: No such file or directory" "$1"' "$rc" "$T/bad.out"
check "nothing was stored for them" test "$(q "SELECT count(*) FROM kb_documents")" = "$BEFORE"
out=$(api POST /v1/kb '{"name": "x.md", "text": "# only a heading\n\n## and another\n"}')
check "a document with nothing but headings is refused by avod" grep -q "x.md: nothing but headings" <<<"$out"
out=$(api POST /v1/kb '{"text": "hello"}')
check "a document without a name is refused" grep -q "name: a non-empty string" <<<"$out"
out=$(api GET "/v1/kb/search?q=")
check "an empty query is refused" grep -q "q: the words to search for" <<<"$out"
out=$(api GET "/v1/kb/search?q=tma&limit=0")
check "a bad limit is refused" grep -q "limit: '0' is not in 1..100" <<<"$out"
out=$(api GET /v1/kb/999999)
check "a missing chunk is a 404 that names it" test "$(jq -r .error.message <<<"$out")" = "no knowledge-base chunk 999999"
avoctl kb frobnicate >"$T/verb.out" 2>&1
check "an unknown kb command is a usage error (exit 2)" \
    bash -c '[ "$?" = 0 ]; grep -q "unknown kb command .frobnicate. (add, search, show, list)" "$0"' "$T/verb.out"
check "avod still serves" avoctl health

[ "$FAILS" -eq 0 ]
