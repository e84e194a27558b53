#!/usr/bin/env bash
# avod as systemd runs it: the unit files verify (systemd-analyze verify, with
# ExecStart pointed at this build), the sysusers snippet parses, and avod
# started the way Type=notify starts it (NOTIFY_SOCKET, WATCHDOG_USEC) sends
# READY=1 once it listens, STATUS= with jobs/queue/workers, WATCHDOG=1 from
# its loop, RELOADING=1 + MONOTONIC_USEC and READY=1 around a SIGHUP reload
# (a bad configuration is refused and said so, the daemon keeps serving),
# STATUS=degraded: with the reason while the embedded PostgreSQL, killed,
# is started again, and STOPPING=1 on SIGTERM.
source "$(dirname "$0")/lib.sh"

# --- the unit files ------------------------------------------------------------
if command -v systemd-analyze >/dev/null; then
    mkdir -p "$T/units"
    for u in avod.service avo-worker@.service avo-nightly.service avo-nightly.timer; do
        sed "s#/usr/local/bin/#$BIN/#" "$ROOT/systemd/$u" >"$T/units/$u"
    done
    cp "$T/units/avo-worker@.service" "$T/units/avo-worker@0.service"
    out=$(cd "$T/units" && systemd-analyze verify avod.service avo-worker@0.service avo-nightly.service \
          avo-nightly.timer 2>&1)
    check "systemd-analyze verify passes on avod, avo-worker@0 and the nightly service and timer${out:+: $out}" \
        test -z "$out"
    check "the units are Type=notify with a watchdog and a reload, and hardened" \
        bash -c 'grep -q "^Type=notify" "$0" && grep -q "^WatchdogSec=" "$0" && grep -q "^ExecReload=" "$0" &&
                 grep -q "^ProtectSystem=strict" "$0" && grep -q "^NoNewPrivileges=yes" "$0" &&
                 grep -q "^ReadWritePaths=/var/lib/avo" "$0" && grep -q "^Environment=CUDA_VISIBLE_DEVICES=%i" "$1"' \
        "$ROOT/systemd/avod.service" "$ROOT/systemd/avo-worker@.service"
else
    notok "systemd-analyze is missing (make deps installs the systemd package)"
fi
if command -v systemd-sysusers >/dev/null; then
    out=$(systemd-sysusers --dry-run "$ROOT/systemd/avo.sysusers" 2>&1)
    check "the sysusers snippet creates user and group avo" \
        bash -c 'grep -q "group .avo." <<<"$0" && grep -q "user .avo." <<<"$0" && ! grep -qi "ignoring\|fail" <<<"$0"' "$out"
fi

# --- the notify protocol --------------------------------------------------------
# A listener on a datagram socket, as systemd's: one line per message
# (newlines inside a message shown as " | "), with a timestamp.
python3 - "$T/notify.sock" "$T/notify.log" <<'PY' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "a", buffering=1) as log:
    while True:
        msg = s.recv(65536).decode("utf-8", "replace")
        log.write("%.3f %s\n" % (time.monotonic(), msg.replace("\n", " | ")))
PY
PIDS+=($!)
for _ in $(seq 1 100); do [ -S "$T/notify.sock" ] && break; sleep 0.05; done
echo "log-level = info" >"$T/avod.conf"
NOTIFY_SOCKET="$T/notify.sock" WATCHDOG_USEC=1000000 start_avod --config "$T/avod.conf"
check "READY=1 once the API listens" grep -q "READY=1" "$T/notify.log"
check "STATUS= says how many jobs run, evaluations wait and workers live" \
    wait_for 20 "grep -Eq 'STATUS=[0-9]+ jobs running, [0-9]+ evaluations queued, [0-9]+ workers' '$T/notify.log'"
sleep 2
check "WATCHDOG=1 comes from the loop at half the watchdog interval (>= 3 in 2 s)" \
    test "$(grep -c "WATCHDOG=1" "$T/notify.log")" -ge 3

kill -HUP "$AVOD_PID"
check "SIGHUP: RELOADING=1 with MONOTONIC_USEC, then READY=1 and what was reloaded" \
    wait_for 10 "grep -q 'RELOADING=1 | STATUS=reloading the configuration | MONOTONIC_USEC=[0-9]' '$T/notify.log' &&
                 grep -q 'READY=1 | STATUS=reloaded: log level info, 0 LLM providers' '$T/notify.log'"
echo "log-level = debug" >"$T/avod.conf"
echo "providers = $T/providers.json" >>"$T/avod.conf"
echo '[{"name": "p", "kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"}]' >"$T/providers.json"
kill -HUP "$AVOD_PID"
check "a reload applies the new log level and providers" \
    wait_for 10 "grep -q 'STATUS=reloaded: log level debug, 1 LLM providers' '$T/notify.log'"
echo '[{"name": "p", "kind": "smoke-signals"}]' >"$T/providers.json"
kill -HUP "$AVOD_PID"
check "a bad configuration is refused, says why in STATUS and the log, and changes nothing" \
    wait_for 10 "grep -q 'STATUS=last reload failed: .*kind' '$T/notify.log' && grep -q 'reload failed' '$T/avod.log'"
check "avod keeps serving after the failed reload" avoctl health
echo '{"problem": "cpu/sgemm", "operator": "agent", "agent": {"provider": "p"}, "budget": {"evaluations": 1}}' >"$T/agent-job.json"
check "the providers of the last good reload stay in force (an agent job naming one is accepted)" \
    bash -c 'avoctl --json submit "$0" | jq -e ".id > 0" | grep -qx true' "$T/agent-job.json"
# The embedded PostgreSQL killed: STATUS says avod is degraded, and why,
# until avod has started it again.
PM=$(head -1 "$AVO_HOME/pg/data/postmaster.pid")
kill -9 "$PM"
check "the postmaster killed: STATUS=degraded: with the reason" \
    wait_for 30 "grep -q 'STATUS=degraded: embedded PostgreSQL died (postmaster pid $PM gone)' '$T/notify.log'"
check "STATUS counts jobs again once avod has restarted the server" \
    wait_for 60 "sed -n '/STATUS=degraded/,\$p' '$T/notify.log' | grep -Eq 'STATUS=[0-9]+ jobs running'"
kill -TERM "$AVOD_PID"
wait_for 60 "! kill -0 $AVOD_PID 2>/dev/null"
check "SIGTERM: STOPPING=1" grep -q "STOPPING=1" "$T/notify.log"
[ "$FAILS" -eq 0 ]
