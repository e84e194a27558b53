#!/usr/bin/env bash
# Workers on other hosts (issue 5): a PostgreSQL server reachable over TCP
# with SCRAM password authentication, avod beside it, and one worker in each
# of two network namespaces (separate network stacks: the workers reach the
# database only through their veth link, as docs/operations-cluster.md sets
# it up). Where namespaces are not permitted (not root, no iproute2), the same
# checks run with the workers as separate processes over TCP on loopback
# (AVO_TEST_NO_NETNS=1 forces that). Last, the Slurm batch script
# (contrib/slurm) starts one worker per allocated GPU and drains them on
# SIGTERM; without Slurm here, it runs as the batch step would on one node,
# with CPU workers standing in for the GPU ones.
source "$(dirname "$0")/lib.sh"
K="$T/kernels"
mkdir -p "$K"
ln -s "$ROOT/kernels/cpu" "$K/cpu"
PORT=$((20000 + $$ % 20000))
SUF=$(($$ % 100000))
# Per-run subnets (10.10i.NET.0/24 for node i), so that links a crashed
# earlier run left behind cannot capture this run's replies.
NET=$((SUF % 250))
NODES=(1 2)

netns_ok() {
    [ "$(id -u)" -eq 0 ] && command -v ip >/dev/null &&
        ip netns add "avo-probe-$SUF" 2>/dev/null && ip netns del "avo-probe-$SUF"
}
if [ -z "${AVO_TEST_NO_NETNS:-}" ] && netns_ok; then MODE=netns; else MODE=loopback; fi
echo "# mode: $MODE"

teardown_net() {
    for i in "${NODES[@]}"; do ip netns del "avo-n$i-$SUF" 2>/dev/null; done
    as_pg "$PGBIN/pg_ctl -D $T/db -m immediate stop" >/dev/null 2>&1
}
trap 'teardown_net; [ "$FAILS" -gt 0 ] && tail -n 20 "$T/dbsock/db.log" "$T/bad.log"; cleanup' EXIT

# The database host: a stock PostgreSQL, password (SCRAM) required over TCP.
mkdir -p "$T/dbsock" "$T/db"
chmod 700 "$T/db"
echo "db-secret-$SUF" >"$T/pw"
[ "$(id -u)" -eq 0 ] && chown postgres "$T/dbsock" "$T/db" "$T/pw"
as_pg "$PGBIN/initdb -D $T/db -U avo --pwfile=$T/pw --auth-local=trust --auth-host=scram-sha-256 -E UTF8 --locale=C" >/dev/null
if [ "$MODE" = netns ]; then
    LISTEN=""
    for i in "${NODES[@]}"; do
        ip netns add "avo-n$i-$SUF"
        ip link add "avh$i-$SUF" type veth peer name "avn$i-$SUF"
        ip link set "avn$i-$SUF" netns "avo-n$i-$SUF"
        ip addr add "10.10$i.$NET.1/24" dev "avh$i-$SUF"
        ip link set "avh$i-$SUF" up
        ip -n "avo-n$i-$SUF" addr add "10.10$i.$NET.2/24" dev "avn$i-$SUF"
        ip -n "avo-n$i-$SUF" link set "avn$i-$SUF" up
        ip -n "avo-n$i-$SUF" link set lo up
        LISTEN="$LISTEN${LISTEN:+,}10.10$i.$NET.1"
    done
    echo "host avo avo 10.0.0.0/8 scram-sha-256" >>"$T/db/pg_hba.conf"
else
    LISTEN=127.0.0.1
fi
check "the database server starts, listening on TCP ($LISTEN:$PORT)" \
    as_pg "$PGBIN/pg_ctl -D $T/db -l $T/dbsock/db.log -w -o \"-c listen_addresses='$LISTEN' -p $PORT -k $T/dbsock\" start >/dev/null"
[ "$FAILS" -eq 0 ] || exit 0
psql -X -q "host=$T/dbsock port=$PORT dbname=postgres user=avo" -c "CREATE DATABASE avo" >/dev/null

# avod on the database host, over the local socket.
check "avod starts on the external database" start_avod --db "host=$T/dbsock port=$PORT dbname=avo user=avo" --kernels "$K"
[ "$FAILS" -eq 0 ] || exit 0
psql_ext() { psql -X -q -A -t -v ON_ERROR_STOP=1 "host=$T/dbsock port=$PORT dbname=avo user=avo" -c "$1"; }

# Each worker host: its own state directory and a password file readable by
# its owner only (libpq refuses a group- or world-readable one).
host_run() {  # host_run NODE CMD...: the command on that worker host
    local i=$1; shift
    if [ "$MODE" = netns ]; then ip netns exec "avo-n$i-$SUF" "$@"; else "$@"; fi
}
host_spawn() {  # host_spawn NODE CMD... &: as host_run, but the background job IS the command
    # (exec), so $! names the worker itself and killing it leaves no orphan behind
    local i=$1; shift
    if [ "$MODE" = netns ]; then exec ip netns exec "avo-n$i-$SUF" "$@"; else exec "$@"; fi
}
db_addr() { if [ "$MODE" = netns ]; then echo "10.10$1.$NET.1"; else echo 127.0.0.1; fi; }
for i in "${NODES[@]}"; do
    mkdir -p "$T/node$i"
    echo "*:$PORT:avo:avo:db-secret-$SUF" >"$T/node$i/pgpass"
    chmod 600 "$T/node$i/pgpass"
done
echo "*:$PORT:avo:avo:wrong-password" >"$T/node1/badpass"
chmod 600 "$T/node1/badpass"

if [ "$MODE" = netns ]; then
    check "a worker host cannot reach the database host's loopback (separate network stacks)" \
        bash -c "! ip netns exec avo-n1-$SUF psql -X -q 'host=127.0.0.1 port=$PORT dbname=avo user=avo connect_timeout=2' -c 'SELECT 1' >/dev/null 2>&1"
fi

# A wrong password is refused with a message that says so.
host_spawn 1 "$BIN/avo-worker" --db "host=$(db_addr 1) port=$PORT dbname=avo user=avo passfile=$T/node1/badpass" \
    --kernels "$K" --home "$T/node1" >"$T/bad.log" 2>&1 &
BAD=$!
PIDS+=("$BAD")
wait_for 20 'grep -q "password authentication failed" "$T/bad.log"'
check "a worker with the wrong password is refused, and says why" grep -q "password authentication failed" "$T/bad.log"
check "the refused worker never registered" test "$(psql_ext "SELECT count(*) FROM workers")" = 0
{ kill -KILL "$BAD"; wait "$BAD"; } 2>/dev/null

for i in "${NODES[@]}"; do
    host_spawn "$i" "$BIN/avo-worker" --db "host=$(db_addr "$i") port=$PORT dbname=avo user=avo passfile=$T/node$i/pgpass" \
        --kernels "$K" --home "$T/node$i" >>"$T/worker.log" 2>&1 &
    PIDS+=("$!")
done
wait_for 30 '[ "$(psql_ext "SELECT count(*) FROM workers WHERE state = '"'idle'"'")" = 2 ]'
check "both workers registered over TCP" test "$(psql_ext "SELECT count(*) FROM workers")" = 2
if [ "$MODE" = netns ]; then
    check "their connections come from the worker hosts' addresses" \
        test "$(psql_ext "SELECT string_agg(DISTINCT host(client_addr), ',' ORDER BY host(client_addr)) FROM pg_stat_activity WHERE client_addr IS NOT NULL")" = "10.101.$NET.2,10.102.$NET.2"
fi
refused_without_password() {
    ! PGPASSWORD= host_run 1 psql -X -q "host=$(db_addr 1) port=$PORT dbname=avo user=avo passfile=/dev/null connect_timeout=3" \
        -c 'SELECT 1' 2>"$T/nopw.err" && grep -q "password" "$T/nopw.err"
}
check "a connection from a worker host without a password is refused" refused_without_password

JOB=$(avoctl --json submit --problem cpu/sgemm --evaluations 6 --islands 2 | jq -r .id)
timeout 600 avoctl watch "$JOB" >/dev/null 2>&1
check "a job submitted to avod is evaluated by the remote workers and succeeds" \
    test "$(psql_ext "SELECT state FROM jobs WHERE id = $JOB")" = succeeded
check "every evaluation stored once" \
    test "$(psql_ext "SELECT count(*) FILTER (WHERE state = 'done' AND attempts = 1) FROM evaluations WHERE job_id = $JOB AND purpose = 'search'")" = 6
check "both worker hosts took evaluations" \
    test "$(psql_ext "SELECT count(DISTINCT worker_id) FROM evaluations WHERE job_id = $JOB")" = 2

# The Slurm script, as Slurm would run it on one node with GPUs 0 and 2.
stop_workers
before=$(psql_ext "SELECT count(*) FROM workers")
SLURM_JOB_ID=4242 SLURM_NNODES=1 SLURM_JOB_GPUS=0,2 AVO_BIN="$BIN" AVO_KERNELS="$K" AVO_WORKER_TARGET=cpu \
    AVO_DB="host=$T/dbsock port=$PORT dbname=avo user=avo" "$ROOT/contrib/slurm/avo-workers.sbatch" >"$T/slurm.out" 2>&1 &
SB=$!
PIDS+=("$SB")
wait_for 30 '[ "$(psql_ext "SELECT count(*) FROM workers WHERE state = '"'idle'"'")" = 2 ]'
check "the Slurm script starts one worker per allocated GPU" \
    test "$(psql_ext "SELECT count(*) FROM workers WHERE state = 'idle'")" = 2
check "each worker gets its own GPU (CUDA_VISIBLE_DEVICES and --gpu)" \
    bash -c "grep -q 'on GPU 0' '$T/slurm.out' && grep -q 'on GPU 2' '$T/slurm.out'"
kill -TERM "$SB"
wait_for 30 '! kill -0 $SB 2>/dev/null'
check "SIGTERM to the batch script drains its workers and it exits" bash -c "! kill -0 $SB 2>/dev/null"
check "the registry shows them gone" \
    test "$(psql_ext "SELECT count(*) FROM workers WHERE state = 'gone'")" = "$((before + 2))"
[ "$FAILS" -eq 0 ]
