#!/usr/bin/env bash
# Logging to the journal. systemd tells a service its stderr is the journal
# through JOURNAL_STREAM (device:inode of that stream); avod and the workers
# then send entries over the journal's native protocol with structured
# fields. Here a stand-in journal listens on /run/systemd/journal/socket
# (only where no real journald does: as root in a container), decodes the
# native protocol, and the test reads one job's story by JOB_ID, the
# worker's entries by EVALUATION_ID/CANDIDATE_ID/WORKER, and the priorities.
source "$(dirname "$0")/lib.sh"

SOCK=/run/systemd/journal/socket
if [ "$(id -u)" != 0 ]; then
    echo "# skipped: the stand-in journal needs root to listen on $SOCK"
    exit 0
fi
if [ -S "$SOCK" ]; then
    echo "# skipped: a journal already listens on $SOCK; not replacing it"
    exit 0
fi
mkdir -p /run/systemd/journal
trap 'rm -f "$SOCK"; cleanup' EXIT
python3 - "$SOCK" "$T/journal.jsonl" <<'PY' &
import json, socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
out = open(sys.argv[2], "a", buffering=1)
while True:
    d = s.recv(1 << 20)
    e, i = {}, 0
    while i < len(d):
        nl = d.index(b"\n", i)
        line = d[i:nl]
        if b"=" in line:            # KEY=value
            k, v = line.split(b"=", 1)
            i = nl + 1
        else:                        # KEY\n<u64 LE length><value>\n
            k = line
            n = struct.unpack("<Q", d[nl + 1:nl + 9])[0]
            v = d[nl + 9:nl + 9 + n]
            i = nl + 9 + n + 1
        e[k.decode()] = v.decode("utf-8", "replace")
    out.write(json.dumps(e) + "\n")
PY
PIDS+=($!)
for _ in $(seq 1 100); do [ -S "$SOCK" ] && break; sleep 0.05; done

# The stderr files stand for the journal's stream: their device:inode.
touch "$T/avod.log" "$T/worker.log"
JOURNAL_STREAM=$(stat -c '%d:%i' "$T/avod.log") start_avod
check "avod starts with its stderr named as the journal stream" avoctl health
JOURNAL_STREAM=$(stat -c '%d:%i' "$T/worker.log") start_worker
JOB=$(avoctl --json submit --problem cpu/sgemm --evaluations 2 | jq -r .id)
timeout 300 avoctl watch "$JOB" >"$T/watch.out" 2>&1
sleep 1
J="$T/journal.jsonl"
story=$(jq -r --arg j "$JOB" 'select(.JOB_ID == $j) | .SYSLOG_IDENTIFIER + " " + .MESSAGE' "$J")
echo "$story" | sed 's/^/# /' | cut -c1-160 | head -12
check "JOB_ID=$JOB gives the job's story from avod: submitted, started, evaluated, committed, finished" \
    bash -c 'for k in job_submitted job_started candidate_evaluated committed job_finished; do
                 grep -q "^avod job: job $1: $k" <<<"$0" || { echo "missing $k"; exit 1; }; done' "$story" "$JOB"
check "and the worker's entries, with EVALUATION_ID, CANDIDATE_ID and WORKER" \
    test "$(jq -r --arg j "$JOB" 'select(.JOB_ID == $j and .SYSLOG_IDENTIFIER == "avo-worker" and (.EVALUATION_ID | length > 0) and (.CANDIDATE_ID | length > 0) and (.WORKER | length > 0)) | .MESSAGE' "$J" | grep -c "evaluation")" -ge 4
check "committed events name their candidate (CANDIDATE_ID)" \
    test "$(jq -r --arg j "$JOB" 'select(.JOB_ID == $j and (.MESSAGE | test("committed")) and (.CANDIDATE_ID | length > 0)) | .CANDIDATE_ID' "$J" | wc -l)" -ge 1
check "priorities follow the levels (info = 6) and every entry names its subsystem" \
    bash -c 'jq -se "all(.[]; (.PRIORITY | tonumber) <= 7 and (.AVO_SUBSYSTEM | length > 0)) and any(.[]; .PRIORITY == \"6\")" "$0" >/dev/null' "$J"
check "nothing was written to stderr meanwhile (no double logging)" \
    bash -c '! grep -q " info " "$0" && ! grep -q " info " "$1"' "$T/avod.log" "$T/worker.log"
[ "$FAILS" -eq 0 ]
