#!/usr/bin/env bash
# Owners, teams and permissions (issue 22, points 1 and 2; docs/operations.md,
# "Teams and quotas"). Real unix users created here talk to avod's socket
# (SO_PEERCRED names them; unix groups are their teams), two tokens of
# different teams talk to its TCP listener. A job's owner may cancel it, a
# teammate may, another team gets 403 naming the rule, an admin (unix group
# or admin token) may, and a cancel by someone else leaves an "audit" event
# in the job's stream. list --mine/--team/--label filter; name and labels are
# kept; read-access = team hides other teams' jobs. Bad token files (an
# unknown team, a malformed line) are refused at start naming file and line;
# a reload with one keeps the old configuration and says why.
source "$(dirname "$0")/lib.sh"

if [ "$(id -u)" -ne 0 ]; then
    ok "# SKIP not root: this test creates unix users"
    exit 0
fi
for t in useradd userdel groupadd groupdel runuser; do
    command -v "$t" >/dev/null || { ok "# SKIP $t not found"; exit 0; }
done

# Names of this run only (other runs may be creating theirs at the same time).
S=$(head -c 3 /dev/urandom | od -An -tx1 | tr -d ' \n')
TA="tml$S"; TB="tinf$S"; SG="avos$S"; AG="avoadm$S"
UA="avoa$S"; UB="avob$S"; UC="avoc$S"; UD="avod$S"
USERS=(); GROUPS_MADE=()
teams_cleanup() {
    for u in "${USERS[@]}"; do userdel "$u" 2>/dev/null; done
    for g in "${GROUPS_MADE[@]}"; do groupdel "$g" 2>/dev/null; done
    cleanup
}
trap teams_cleanup EXIT
trap "exit 143" TERM INT
for g in "$TA" "$TB" "$SG" "$AG"; do groupadd "$g" && GROUPS_MADE+=("$g"); done
mkuser() {  # NAME GROUPS
    useradd -M -N -g "$SG" -G "$2" -s /usr/sbin/nologin "$1" && USERS+=("$1")
}
mkuser "$UA" "$TA"      # alice, team A
mkuser "$UB" "$TA"      # bob, alice's teammate
mkuser "$UC" "$TB"      # carol, team B
mkuser "$UD" "$AG"      # dave, admin group, no team
as() {  # USER avoctl ARGS...
    local u=$1; shift
    runuser -u "$u" -- env AVO_HOME="$AVO_HOME" "$BIN/avoctl" "$@"
}

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
U="http://127.0.0.1:$PORT"
tok() { head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
KA=$(tok); KB=$(tok); KADM=$(tok); KLEG=$(tok)
printf '# test tokens\n%s principal=tina team=%s\n%s principal=tom team=%s\n%s principal=ops admin\n%s\n' \
    "$KA" "$TA" "$KB" "$TB" "$KADM" "$KLEG" >"$T/tokens"
chmod 600 "$T/tokens"
printf 'teams = %s,%s\nadmin-group = %s\nsocket-group = %s\nread-access = all\n' "$TA" "$TB" "$AG" "$SG" \
    >"$T/avod.conf"

# ---- bad token files: refused at start, naming the file and the line
printf '%s principal=tina team=%s\n# two\n%s principal=tom team=nosuchteam\n' "$KA" "$TA" "$KB" >"$T/bad1"
printf '%s principal=tina team=%s\n%s principal=tom colour=blue\n' "$KA" "$TA" "$KB" >"$T/bad2"
printf '%s principal=tina team=%s\n%s team=%s\n' "$KA" "$TA" "$KB" "$TB" >"$T/bad3"
chmod 600 "$T"/bad?
out=$(timeout 30 avod --config "$T/avod.conf" --listen "127.0.0.1:$PORT" --token-file "$T/bad1" 2>&1); rc=$?
check "a token file with an unknown team is refused at start naming file and line ($rc: $out)" \
    bash -c '[ "$1" = 2 ] && grep -q "token file $2 line 3: unknown team .nosuchteam." <<<"$0"' "$out" "$rc" "$T/bad1"
out=$(timeout 30 avod --config "$T/avod.conf" --listen "127.0.0.1:$PORT" --token-file "$T/bad2" 2>&1); rc=$?
check "a malformed token line is refused at start naming file and line ($rc: $out)" \
    bash -c '[ "$1" = 2 ] && grep -q "token file $2 line 2: unknown attribute .colour." <<<"$0"' "$out" "$rc" "$T/bad2"
out=$(timeout 30 avod --config "$T/avod.conf" --listen "127.0.0.1:$PORT" --token-file "$T/bad3" 2>&1); rc=$?
check "team= without principal= is refused at start ($rc: $out)" \
    bash -c '[ "$1" = 2 ] && grep -q "line 2: team= needs principal=NAME" <<<"$0"' "$out" "$rc"
check "no token reaches the refusals" bash -c '! grep -q "$1\|$2" <<<"$0"' "$out" "$KA" "$KB"

check "avod starts with teams, an admin group, a socket group and tokens" \
    start_avod --config "$T/avod.conf" --listen "127.0.0.1:$PORT" --token-file "$T/tokens"
check "the socket belongs to the socket group" test "$(stat -c %G "$AVO_HOME/avod.sock")" = "$SG"

# ---- identity
as "$UA" --json whoami >"$T/wa.json"
check "whoami over the socket: the unix user and its team ($(cat "$T/wa.json" | tr -d '\n '))" \
    jqt --arg u "$UA" --arg t "$TA" '.name == $u and .team == $t and .admin == false and .via == "unix"' "$T/wa.json"
as "$UD" --json whoami >"$T/wd.json"
check "a member of the admin group is an admin" jqt --arg u "$UD" '.name == $u and .team == null and .admin' "$T/wd.json"
printf '%s principal=tina team=%s\n' "$KA" "$TA" >"$T/ka"; chmod 600 "$T/ka"
avoctl --json --url "$U" --token-file "$T/ka" whoami >"$T/wk.json"
check "whoami over TCP: the token's principal and team" \
    jqt --arg t "$TA" '.name == "tina" and .team == $t and .admin == false and .via == "token"' "$T/wk.json"
curl -s -H "Authorization: Bearer $KLEG" "$U/v1/whoami" >"$T/wl.json"
check "a bare token line is the principal anonymous (legacy)" jqt '.name == "anonymous" and .team == null' "$T/wl.json"

submit_as() {  # USER [flags] -> job id
    local u=$1; shift
    as "$u" --json submit --problem cpu/sgemm --evaluations 2 "$@" | jq -r .id
}
J1=$(submit_as "$UA" --name "first try" --label "exp=a1,size=big")
as "$UA" --json status "$J1" >"$T/j1.json"
check "a job records owner, team, name and labels ($J1)" \
    jqt --arg u "$UA" --arg t "$TA" '.owner == $u and .team == $t and .name == "first try" and .labels == {"exp": "a1", "size": "big"}' "$T/j1.json"
as "$UA" status "$J1" >"$T/j1.txt"
check "status shows them" bash -c 'grep -q "^owner *$1" "$0" && grep -q "^team *$2" "$0" && grep -q "^labels *exp=a1,size=big" "$0" && grep -q "^name *first try" "$0"' "$T/j1.txt" "$UA" "$TA"
out=$(as "$UA" submit --problem cpu/sgemm --evaluations 2 --label "Bad Key=1" 2>&1); rc=$?
check "a bad label key is a usage error naming it ($rc)" bash -c '[ "$1" = 2 ] && grep -q "label" <<<"$0"' "$out" "$rc"
printf '{"problem": "cpu/sgemm", "budget": {"evaluations": 2}, "labels": {"k": 5}}' >"$T/badlabel.json"
out=$(as "$UA" submit "$T/badlabel.json" 2>&1)
check "avod refuses a label value that is not a string, naming it" grep -q "labels.k: a label value is a string" <<<"$out"

# ---- permissions
out=$(as "$UC" cancel "$J1" 2>&1); rc=$?
check "another team's user may not cancel: refused naming the rule ($rc: $out)" \
    bash -c '[ "$1" != 0 ] && grep -q "forbidden" <<<"$0" && grep -q "allowed to its owner ($2), members of its team ($3) and admins" <<<"$0"' \
    "$out" "$rc" "$UA" "$TA"
code=$(curl -s -o "$T/403.json" -w '%{http_code}' -X POST -H "Authorization: Bearer $KB" "$U/v1/jobs/$J1/cancel")
check "over TCP a token of another team gets 403 forbidden, rule owner_team_or_admin ($code)" \
    bash -c '[ "$0" = 403 ] && jq -e ".error.code == \"forbidden\" and .error.rule == \"owner_team_or_admin\" and (.error.message | test(\"you are tom\"))" "$1" >/dev/null' "$code" "$T/403.json"
check "the refused job still runs or waits" jqt '.state == "queued" or .state == "running"' <(as "$UA" --json status "$J1")
check "a teammate may cancel" as "$UB" cancel "$J1"
ev() {  # JOB -> the job's events, one JSON per line
    curl -s --max-time 20 --unix-socket "$AVO_HOME/avod.sock" "http://avod/v1/jobs/$1/events" | sed -n 's/^data: //p'
}
ev "$J1" >"$T/ev1"
check "a cancel by a teammate leaves an audit event naming who and the rule" \
    jqt -s --arg b "$UB" --arg o "$UA" 'map(select(.kind == "audit")) | length == 1 and .[0].data.action == "cancel" and .[0].data.by == $b and .[0].data.owner == $o and .[0].data.rule == "team"' "$T/ev1"
J2=$(submit_as "$UA")
check "the owner may cancel" as "$UA" cancel "$J2"
ev "$J2" >"$T/ev2"
check "the owner's own cancel is no audit event" \
    bash -c 'grep -q "job_finished" "$0" && ! grep -q "\"kind\": *\"audit\"" "$0"' "$T/ev2"
J3=$(submit_as "$UA")
check "a member of the admin group may cancel anyone's job" as "$UD" cancel "$J3"
ev "$J3" >"$T/ev3"
check "... with an audit event, rule admin" \
    jqt -s --arg b "$UD" 'map(select(.kind == "audit")) | .[0].data.by == $b and .[0].data.rule == "admin"' "$T/ev3"
J4=$(curl -s -H "Authorization: Bearer $KB" -X POST -d '{"problem":"cpu/sgemm","budget":{"evaluations":2},"labels":{"exp":"b"}}' "$U/v1/jobs" | jq -r .id)
code=$(curl -s -o "$T/403b.json" -w '%{http_code}' -X POST -H "Authorization: Bearer $KA" "$U/v1/jobs/$J4/cancel")
check "tom's job (team B): tina (team A) gets 403 ($code)" test "$code" = 403
out=$(as "$UA" cancel "$J4" 2>&1)
check "... and so does a unix user of team A" grep -q "forbidden" <<<"$out"
code=$(curl -s -o "$T/adm.json" -w '%{http_code}' -X POST -H "Authorization: Bearer $KADM" "$U/v1/jobs/$J4/cancel")
check "an admin token may cancel it ($code)" test "$code" = 200
ev "$J4" >"$T/ev4"
check "... with an audit event by ops, rule admin" \
    jqt -s 'map(select(.kind == "audit")) | .[0].data.by == "ops" and .[0].data.owner == "tom" and .[0].data.rule == "admin"' "$T/ev4"
J5=$(curl -s -H "Authorization: Bearer $KA" -X POST -d '{"problem":"cpu/sgemm","budget":{"evaluations":2}}' "$U/v1/jobs" | jq -r .id)
check "a unix user of team A may cancel the job of a token of team A" as "$UB" cancel "$J5"
C1=$(psql_avo "SELECT seed_candidate FROM jobs WHERE id = $J1")
out=$(as "$UC" profile "$C1" 2>&1)
check "a profile of another team's candidate is a change: refused naming the rule ($out)" \
    bash -c 'grep -q "candidate $1: changing a job is allowed to its owner" <<<"$0" && grep -q forbidden <<<"$0"' "$out" "$C1"
PRE=$(psql_avo "INSERT INTO jobs (problem, operator, spec, eval_budget) VALUES ('cpu/sgemm', 'tune', '{}', 1) RETURNING id")
check "a job from before owners (no owner) may be cancelled by anyone" as "$UC" cancel "$PRE"

# ---- listing
as "$UA" --json list --mine >"$T/mine.json"
check "list --mine: only mine ($(jq -c '[.jobs[].id]' "$T/mine.json"))" \
    jqt --arg u "$UA" --argjson a "[$J3,$J2,$J1]" '[.jobs[].id] == $a and all(.jobs[]; .owner == $u)' "$T/mine.json"
as "$UC" --json list --team "$TB" >"$T/teamb.json"
check "list --team" jqt --argjson a "[$J4]" '[.jobs[].id] == $a' "$T/teamb.json"
as "$UC" --json list --label exp=a1 >"$T/label.json"
check "list --label" jqt --argjson a "[$J1]" '[.jobs[].id] == $a' "$T/label.json"
as "$UA" list --mine >"$T/mine.txt"
check "the table shows OWNER (owner/team) and NAME" \
    bash -c 'head -1 "$0" | grep -q "OWNER *NAME" && grep -q "$1/$2 *first try" "$0"' "$T/mine.txt" "$UA" "$TA"

PR=$(as "$UA" --json profile "$C1" | jq -r '.id // .profile // empty')

# ---- read access = team, reloaded with SIGHUP
sed -i 's/^read-access = all/read-access = team/' "$T/avod.conf"
kill -HUP "$AVOD_PID"
check "after a reload with read-access = team another team may not read a job (403, rule read_access)" \
    wait_for 10 "curl -s -H 'Authorization: Bearer $KB' '$U/v1/jobs/$J1' | jq -e '.error.code == \"forbidden\" and .error.rule == \"read_access\"' >/dev/null"
check "... a teammate may" jqt --argjson j "$J1" '.id == $j' <(as "$UB" --json status "$J1")
code=$(curl -s -o "$T/pr403.json" -w '%{http_code}' -H "Authorization: Bearer $KB" "$U/v1/profiles/$PR")
check "... another team may not read one of the job's profiles (profile $PR: $code)" \
    bash -c '[ "$0" = 403 ] && jq -e ".error.rule == \"read_access\" and (.error.message | test(\"^profile $1: \"))" "$2" >/dev/null' \
    "$code" "$PR" "$T/pr403.json"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $KA" "$U/v1/profiles/$PR")
check "... a teammate's token may ($code)" test "$code" = 200
as "$UC" --json list >"$T/listc.json"
check "... and list shows another team only its own and unowned jobs" \
    jqt --argjson a "[$PRE,$J4]" '[.jobs[].id] == $a' "$T/listc.json"
out=$(as "$UC" fork "$C1" --evaluations 2 2>&1)
check "... a fork of an unreadable job's candidate is refused naming the rule ($out)" \
    bash -c 'grep -q "candidate $1: read-access=team: reading a job is allowed" <<<"$0" && grep -q forbidden <<<"$0"' "$out" "$C1"
out=$(as "$UC" submit --problem cpu/sgemm --seed-candidate "$C1" --evaluations 2 2>&1)
check "... and so is a submission seeded from it, by avod's own check ($out)" \
    bash -c 'grep -q "seed.candidate: candidate $1: read-access=team" <<<"$0" && grep -q forbidden <<<"$0"' "$out" "$C1"
JF=$(as "$UB" --json fork "$C1" --evaluations 2 | jq -r .id)
check "... a teammate's fork is a new job owned by the teammate" \
    jqt --arg b "$UB" --argjson c "$C1" '.owner == $b and .spec.seed.candidate == $c' <(as "$UB" --json status "$JF")
as "$UB" cancel "$JF" >/dev/null
check "... an admin reads everything" jqt --argjson j "$J1" '.id == $j' <(as "$UD" --json status "$J1")
# GET /v1/events (avoctl events) under the same rule, per event
seen() {  # FILE J_SEEN J_NOT: events of J_SEEN and none of J_NOT, in a file of JSON events
    jq -s -e --argjson a "$2" --argjson b "$3" 'any(.[]; .job == $a) and all(.[]; .job != $b)' "$1" >/dev/null
}
as "$UC" --json events --last 10000 >"$T/eventsc.json"
check "... events (GET /v1/events) shows another team its own and unowned jobs' events, none of this team's" \
    seen "$T/eventsc.json" "$J4" "$J1"
as "$UB" --json events --last 10000 >"$T/eventsb.json"
check "... and a teammate the team's" jqt -s --argjson j1 "$J1" 'any(.[]; .job == $j1)' "$T/eventsb.json"
curl -s -N -H "Authorization: Bearer $KB" "$U/v1/events?last=10000&follow=false" | sed -n 's/^data: //p' >"$T/eventskb.json"
check "... over TCP too: a token of the other team gets none of this team's events" seen "$T/eventskb.json" "$J4" "$J1"

# ---- a reload with a bad token file keeps the old configuration
printf '%s principal=tina team=%s\n%s principal=tom team=gone\n' "$KA" "$TA" "$KB" >"$T/tokens"
kill -HUP "$AVOD_PID"
check "a reload with an unknown team is refused in the log, naming the line" \
    wait_for 10 "grep -q 'reload failed, the running configuration stays: token file $T/tokens line 2: unknown team .gone.' '$T/avod.log'"
check "... and the old tokens still work" \
    bash -c '[ "$(curl -s -o /dev/null -w "%{http_code}" -H "Authorization: Bearer $0" "$1/v1/whoami")" = 200 ]' "$KADM" "$U"
check "no token ever reaches avod's log" bash -c '! grep -q "$1\|$2\|$3" "$0"' "$T/avod.log" "$KA" "$KB" "$KADM"
[ "$FAILS" -eq 0 ]
