#!/usr/bin/env bash
# avod under load and abuse: 200 clients follow a running job's event stream
# at once, one more holds a stream open without reading a byte, others send
# malformed JSON, wrong types, oversize bodies and unknown routes; meanwhile
# the job runs to its end, every stream sees job_finished, other clients are
# answered promptly, and avod is still there afterwards.
source "$(dirname "$0")/lib.sh"

N=${AVO_LOAD_STREAMS:-200}
check "avod starts" start_avod
start_worker
JOB=$(avoctl --json submit --problem cpu/sgemm --evaluations 6 | jq -r .id)
S="$AVO_HOME/avod.sock"
mkdir -p "$T/streams"
pids=()
for i in $(seq 1 "$N"); do
    curl -s -N --max-time 300 --unix-socket "$S" "http://avod/v1/jobs/$JOB/events" >"$T/streams/$i" 2>/dev/null &
    pids+=($!)
done
# A client that opens a stream and never reads: its socket buffer fills;
# avod must not wait on it.
python3 - "$S" "$JOB" <<'PY' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect(sys.argv[1])
s.sendall(f"GET /v1/jobs/{sys.argv[2]}/events HTTP/1.1\r\nHost: avod\r\n\r\n".encode())
time.sleep(600)
PY
PIDS+=($!)
# Abuse beside it, through the same socket.
api() { curl -s -o /dev/null -w '%{http_code}' --unix-socket "$S" "$@"; }
codes=""
for _ in 1 2 3; do
    codes+="$(api -X POST -d '{"problem": ' http://avod/v1/jobs) "
    codes+="$(api -X POST -d '{"problem": 7}' http://avod/v1/jobs) "
    codes+="$(api -X POST --data-binary @<(head -c 2000000 /dev/zero | tr '\0' 'x') http://avod/v1/jobs) "
    codes+="$(api http://avod/v1/../../etc/passwd) "
    codes+="$(api "http://avod/v1/jobs?limit=abc") "
done
check "abuse is answered with client errors, never 5xx: $codes" \
    bash -c 'for c in $0; do case $c in 4??) ;; *) exit 1;; esac; done' "$codes"
t0=$(date +%s.%N)
avoctl health >/dev/null
t1=$(date +%s.%N)
check "with $N streams open, another client is answered at once ($(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}') s)" \
    awk -v a="$t0" -v b="$t1" 'BEGIN{exit !(b - a < 5)}'
wait_for 300 "[ \"\$(psql_avo \"SELECT state FROM jobs WHERE id = $JOB\")\" = succeeded ]"
check "the job ran to its end meanwhile" test "$(psql_avo "SELECT state FROM jobs WHERE id = $JOB")" = succeeded
for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
got=$(grep -l "event: job_finished" "$T"/streams/* | wc -l)
check "every one of the $N streams received every event through job_finished ($got)" \
    bash -c '[ "$1" = "$2" ] && n=$(grep -c "^event:" "$0"/streams/1) && for f in "$0"/streams/*; do
                 [ "$(grep -c "^event:" "$f")" = "$n" ] || exit 1; done' "$T" "$got" "$N"
check "avod is alive and serving afterwards" avoctl health
[ "$FAILS" -eq 0 ]
