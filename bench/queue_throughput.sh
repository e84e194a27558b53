#!/usr/bin/env bash
# Queue benchmark (issue 5): no-op evaluations through avo_claim +
# avo_complete with 1, 4 and 16 worker processes, on a throwaway PostgreSQL
# with avo's migrations applied (stock settings: fsync and synchronous
# commit on, as the embedded server runs).
#   bench/queue_throughput.sh            drain 20000 and paced 1000/s runs
#   EVALS=50000 RATE=2000 WORKERS="1 4 16" HISTORY=1000000 bench/queue_throughput.sh
# Last, HISTORY finished evaluations (default 1,000,000) are added and the
# one-worker drain is run again: finished rows must not slow the claim.
# Prints one JSON line per run (bench/queue_bench.c says what each field is).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH=$ROOT/${BUILD:-build}/bench/queue_bench
EVALS=${EVALS:-20000}
RATE=${RATE:-1000}
PACED=${PACED:-5000}
WORKERS=${WORKERS:-"1 4 16"}
HISTORY=${HISTORY:-1000000}
[ -x "$BENCH" ] || { echo "queue_throughput: $BENCH missing (make all)" >&2; exit 2; }
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$PGBIN/initdb" ] || { echo "queue_throughput: no PostgreSQL server binaries (make deps)" >&2; exit 2; }

T=$(mktemp -d /tmp/avo-qb.XXXXXX)
chmod 755 "$T"
as_pg() { if [ "$(id -u)" -eq 0 ]; then su postgres -s /bin/sh -c "$*"; else sh -c "$*"; fi; }
[ "$(id -u)" -eq 0 ] && chown postgres "$T"
stop() { as_pg "$PGBIN/pg_ctl -D $T/data -m immediate stop" >/dev/null 2>&1 || true; rm -rf "$T"; }
trap stop EXIT
as_pg "$PGBIN/initdb -D $T/data -U avo -A trust -E UTF8 --locale=C" >/dev/null
as_pg "$PGBIN/pg_ctl -D $T/data -l $T/pg.log -w -o \"-c listen_addresses='' -k $T -c max_connections=100\" start" >/dev/null
DSN="host=$T dbname=postgres user=avo"
for f in "$ROOT"/sql/[0-9]*.sql; do
    psql -X -q -v ON_ERROR_STOP=1 "$DSN" -f "$f" >/dev/null
done

echo "# $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), PostgreSQL $("$PGBIN/postgres" --version | awk '{print $3}'), load $(cut -d' ' -f1-3 /proc/loadavg)"
for w in $WORKERS; do
    "$BENCH" --db "$DSN" --workers "$w" --evals "$EVALS"
done
for w in $WORKERS; do
    "$BENCH" --db "$DSN" --workers "$w" --evals "$PACED" --rate "$RATE"
done
# The fallback without NOTIFY: wake-ups only by polling (200 ms).
"$BENCH" --db "$DSN" --workers 4 --evals "$((PACED / 5))" --rate "$RATE" --no-notify --poll-ms 200

# Table hygiene: a long history of finished evaluations, then the same drain.
if [ "$HISTORY" -gt 0 ]; then
    psql -X -q -v ON_ERROR_STOP=1 "$DSN" >/dev/null <<SQL
INSERT INTO evaluations (job_id, candidate_id, problem, target, state, attempts, outcome, aggregate,
                         result, consumed, claimed_at, finished_at)
SELECT j.id, c.id, 'bench/noop', 'cpu', 'done', 1, 'ok', 1, '{}', true, now(), now()
  FROM (SELECT id FROM jobs ORDER BY id LIMIT 1) j, (SELECT id FROM candidates ORDER BY id LIMIT 1) c,
       generate_series(1, $HISTORY);
VACUUM ANALYZE evaluations;
SQL
    echo "# with $(psql -X -A -t "$DSN" -c "SELECT count(*) FROM evaluations") evaluations in the table:"
    "$BENCH" --db "$DSN" --workers 1 --evals "$EVALS"
fi
