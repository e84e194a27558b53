#!/usr/bin/env bash
# avod's optional TCP listener: every request needs a bearer token from the
# token file, anything else gets 401 unauthorized; tokens rotate on reload
# and never reach the log; avoctl talks to it with --url/--token-file; a
# token file others can read, or a listener without one, is refused at
# start. The unix socket stays as it was (0660, no token).
source "$(dirname "$0")/lib.sh"

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
TOK=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
TOK2=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf '# avod API tokens\n%s\n' "$TOK" >"$T/tokens"
chmod 600 "$T/tokens"

# Refused configurations first (avod exits 2 with the reason).
out=$(avod --listen "127.0.0.1:$PORT" 2>&1); rc=$?
check "--listen without a token file is refused at start ($rc)" \
    bash -c '[ "$1" = 2 ] && grep -q "needs --token-file" <<<"$0"' "$out" "$rc"
cp "$T/tokens" "$T/open-tokens"; chmod 644 "$T/open-tokens"
out=$(avod --listen "127.0.0.1:$PORT" --token-file "$T/open-tokens" 2>&1); rc=$?
check "a token file others can read is refused ($rc)" \
    bash -c '[ "$1" = 2 ] && grep -q "not readable by others" <<<"$0"' "$out" "$rc"

check "avod starts with a TCP listener" start_avod --listen "127.0.0.1:$PORT" --token-file "$T/tokens"
U="http://127.0.0.1:$PORT"
status() { curl -s -o "$T/body" -w '%{http_code}' "$@"; }
check "no token: 401 unauthorized with WWW-Authenticate" \
    bash -c '[ "$(curl -s -D "$0.h" -o "$0.b" -w "%{http_code}" "$1/v1/health")" = 401 ] &&
             jq -e ".error.code == \"unauthorized\"" "$0.b" | grep -qx true && grep -qi "^WWW-Authenticate: Bearer" "$0.h"' "$T/r1" "$U"
check "a wrong token, or another scheme: 401" \
    bash -c '[ "$(curl -s -o /dev/null -w "%{http_code}" -H "Authorization: Bearer nottherighttoken00" "$0/v1/health")" = 401 ] &&
             [ "$(curl -s -o /dev/null -w "%{http_code}" -u "avo:$1" "$0/v1/health")" = 401 ] &&
             [ "$(curl -s -o /dev/null -w "%{http_code}" -X POST -d "{}" "$0/v1/jobs")" = 401 ]' "$U" "$TOK"
check "the right token: 200" \
    test "$(status -H "Authorization: Bearer $TOK" "$U/v1/health")" = 200
check "the unix socket needs no token and is 0660" \
    bash -c 'avoctl health >/dev/null && [ "$(stat -c %a "$AVO_HOME/avod.sock")" = 660 ]'

check "avoctl --url/--token-file: health" avoctl --url "$U" --token-file "$T/tokens" health
start_worker
JOB=$(avoctl --json --url "$U" --token-file "$T/tokens" submit --problem cpu/sgemm --evaluations 2 | jq -r .id)
check "avoctl over TCP: submit and watch the event stream to the end" \
    bash -c 'AVO_URL="$1" AVO_TOKEN_FILE="$2" timeout 300 avoctl watch "$0" >/dev/null' "$JOB" "$U" "$T/tokens"
check "avoctl --url without a token file is a usage error naming it" \
    bash -c 'out=$(avoctl --url "$0" health 2>&1); [ $? = 2 ] && grep -q "token-file" <<<"$out"' "$U"

# Rotation: old and new together, then only the new one.
printf '%s\n%s\n' "$TOK2" "$TOK" >"$T/tokens"
kill -HUP "$AVOD_PID"
check "after a reload with two tokens both work" \
    wait_for 10 "[ \$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer $TOK2' '$U/v1/health') = 200 ] &&
                 [ \$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer $TOK' '$U/v1/health') = 200 ]"
printf '%s\n' "$TOK2" >"$T/tokens"
kill -HUP "$AVOD_PID"
check "after the old token is removed and avod reloaded, it is refused" \
    wait_for 10 "[ \$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer $TOK' '$U/v1/health') = 401 ]"
check "no token ever reaches avod's log" bash -c '! grep -q "$1\|$2" "$0"' "$T/avod.log" "$TOK" "$TOK2"

# A start that fails after the loop began (this port is the running avod's):
# the same shutdown as after a signal, every handle closed, exit 1.
mkdir -p "$T/home2"
out=$(timeout 60 avod --home "$T/home2" --db "$(cat "$AVO_HOME/avod.dsn")" --listen "127.0.0.1:$PORT" \
      --token-file "$T/tokens" 2>&1); rc=$?
check "a listener that cannot start: exit 1 naming the cause, no handle leaked, socket removed ($rc)" \
    bash -c '[ "$1" = 1 ] && grep -q "avod: cannot listen on 127.0.0.1:$2: Address already in use" <<<"$0" &&
             ! grep -q "leaked\|did not close" <<<"$0" && [ ! -e "$3/avod.sock" ]' "$out" "$rc" "$PORT" "$T/home2"
stop_workers
stop_pid "$AVOD_PID"
check "after SIGTERM avod says stopped, with no handle leaked" \
    bash -c 'grep -q "stopped" "$0" && ! grep -q "leaked\|did not close" "$0"' "$T/avod.log"
[ "$FAILS" -eq 0 ]
