# Shared helpers for integration tests: a throwaway state directory, real
# processes, TAP-style "ok - NAME" lines, and cleanup that always runs.
set -u
BUILD=${BUILD:-build}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN="$ROOT/$BUILD/bin"
export PATH="$BIN:$PATH"
unset AVO_DB AVO_CONFIG AVO_KERNELS

# Short path: unix socket paths are limited to 107 bytes. World-traversable,
# because as root the embedded PostgreSQL runs as an unprivileged user.
T=$(mktemp -d /tmp/avo-it.XXXXXX)
chmod 755 "$T"
export AVO_HOME="$T/home"
mkdir -p "$AVO_HOME"
PIDS=()
FAILS=0

ok() { echo "ok - $*"; }
notok() { echo "not ok - $*"; FAILS=$((FAILS + 1)); }
jqt() {  # jqt FILTER FILE...: jq -e, quiet: true when the filter holds
    # jq -e exits 0 on empty input (no value, nothing false), so a missing
    # or empty result file would pass every check: a value is required.
    local out
    out=$(jq -e "$@" 2>/dev/null) && [ -n "$out" ]
}
# The paired referee's verdict on OUTJSON, a case evaluated with an honest
# twin as its against (test_hostile.sh, test_nonroot.sh): the configs whose
# paired speed ratio (the twin's median time over the case's) is above
# MARGIN, or why there is no ratio; empty when the case was caught (not ok)
# or is within the margin everywhere.
paired_above() {  # OUTJSON MARGIN
    jq -r --argjson m "$2" '
        if .outcome != "ok" then empty
        elif (.paired.configs | type) != "array" then "no paired ratio (\(.paired.error // "none"))"
        else .paired.configs[] | select(.ratio > $m) | "\(.config) x\(.ratio * 10 | floor / 10) paired" end' \
        "$1" 2>/dev/null | tr '\n' ' ' | sed 's/ $//'
}
check() {  # check NAME CMD...: ok when CMD succeeds
    local name=$1; shift
    if "$@"; then ok "$name"; else notok "$name"; fi
}

start_avod() {  # extra args...
    avod "$@" >>"$T/avod.log" 2>&1 &
    AVOD_PID=$!
    PIDS+=("$AVOD_PID")
    for _ in $(seq 1 300); do
        avoctl health >/dev/null 2>&1 && return 0
        kill -0 "$AVOD_PID" 2>/dev/null || { echo "avod exited:"; tail -20 "$T/avod.log"; return 1; }
        sleep 0.1
    done
    echo "avod did not become healthy"; tail -20 "$T/avod.log"; return 1
}

start_worker() {  # extra args...
    avo-worker "$@" >>"$T/worker.log" 2>&1 &
    WORKER_PID=$!
    PIDS+=("$WORKER_PID")
}

start_fake_llm() {  # NAME FORMAT SCENARIO SEED_SOURCE COMMIT_ID [FAKE OPTIONS] -> port in PORT_<NAME>
    # The fake provider (tests/fakes/fake_llm.py) replaying a scripted
    # conversation (tests/fixtures/agent/make_script.py); log in $T/NAME.log,
    # what became of each request (headers, served, disconnected) in $T/NAME.events.
    python3 "$ROOT/tests/fixtures/agent/make_script.py" "$2" "$3" "$4" "$5" >"$T/$1.script.json"
    python3 "$ROOT/tests/fakes/fake_llm.py" --port 0 --script "$T/$1.script.json" --log "$T/$1.log" \
        --events "$T/$1.events" "${@:6}" \
        >"$T/$1.port" 2>"$T/$1.err" &
    PIDS+=($!)
    for _ in $(seq 1 100); do [ -s "$T/$1.port" ] && break; sleep 0.05; done
    eval "PORT_$1=$(head -1 "$T/$1.port")"
}

psql_avo() {  # SQL -> unaligned, tuples only
    psql -X -q -A -t -v ON_ERROR_STOP=1 "host=$AVO_HOME/pg/run dbname=avo user=avo" -c "$1"
}

stop_workers() {  # this test's workers only (descendants of this shell): other runs keep theirs
    local p a
    for p in $(pgrep -x avo-worker); do
        a=$p
        while [ -n "$a" ] && [ "$a" -gt 1 ] && [ "$a" != $$ ]; do
            a=$(ps -o ppid= -p "$a" 2>/dev/null | tr -d ' ')
        done
        [ "$a" = $$ ] && stop_pid "$p"
    done
    return 0
}

stop_pid() {  # pid [seconds]: SIGTERM, wait up to 30 s (or seconds), then SIGKILL
    local pid=$1 wait_s=${2:-30}
    kill -TERM "$pid" 2>/dev/null || return 0
    for _ in $(seq 1 $((wait_s * 10))); do kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null; return 0; }; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
    return 1
}

cleanup() {
    for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do stop_pid "$p"; done
    # an embedded server left by a killed avod
    if [ -f "$AVO_HOME/pg/data/postmaster.pid" ]; then
        pg_ctl_avo -m immediate stop >/dev/null 2>&1
    fi
    if [ "$FAILS" -gt 0 ]; then
        echo "--- avod.log"; tail -40 "$T/avod.log" 2>/dev/null
        echo "--- worker.log"; tail -40 "$T/worker.log" 2>/dev/null
    fi
    rm -rf "$T"
}
trap cleanup EXIT

# PostgreSQL's server programs, and a shell command run as the user the
# servers run as (postgres under root: the server refuses to run as root).
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
as_pg() { if [ "$(id -u)" -eq 0 ]; then su postgres -s /bin/sh -c "$*"; else sh -c "$*"; fi; }

pg_ctl_avo() {  # pg_ctl ARGS... on the embedded cluster, as the user that owns it
    as_pg "$PGBIN/pg_ctl -D $AVO_HOME/pg/data $*"
}

wait_for() {  # wait_for SECONDS 'SHELL CONDITION': re-evaluated every 0.1 s until true
    local n=$(($1 * 10))
    for _ in $(seq 1 "$n"); do eval "$2" && return 0; sleep 0.1; done
    return 1
}
