#!/usr/bin/env bash
# `make install` (PREFIX, DESTDIR) puts the binaries, sql/, kernels/, docs and
# the systemd files in their places, with the units' paths set to PREFIX; the
# installed avod runs its migrations from the installed sql/ and serves the
# installed kernels/, and an installed worker evaluates a job. Then
# `make uninstall` takes it all away again.
source "$(dirname "$0")/lib.sh"

R="$T/root"
P=/opt/avo
make -s -C "$ROOT" BUILD="$BUILD" install DESTDIR="$R" PREFIX="$P" >"$T/install.log" 2>&1
check "make install DESTDIR=... PREFIX=$P succeeds" test $? -eq 0
check "binaries in bin/, migrations and problem packages in share/avo/, docs in share/doc/avo/" \
    bash -c 'for b in avod avo-worker avo-harness avoctl; do test -x "$0/bin/$b" || exit 1; done &&
             test "$(ls "$0"/share/avo/sql/*.sql | wc -l)" = "$(ls "$1"/sql/*.sql | wc -l)" &&
             test -f "$0/share/avo/kernels/cpu/sgemm/problem.json" && test -f "$0/share/doc/avo/operations.md" &&
             test -f "$0/share/doc/avo/README.md"' "$R$P" "$ROOT"
check "the units start the installed binaries; sysusers and tmpfiles snippets are in lib/" \
    bash -c 'for u in avod.service avo-worker@.service avo-nightly.service; do
                 exe=$(sed -n "s/^ExecStart=\([^ ]*\).*/\1/p" "$0/lib/systemd/system/$u")
                 case $exe in '"$P"'/bin/*) test -x "$1$exe" || exit 1;; *) exit 1;; esac
             done && test -f "$0/lib/sysusers.d/avo.conf" && test -f "$0/lib/tmpfiles.d/avo.conf"' "$R$P" "$R"
check "avoctl's man page and bash/zsh completion scripts are installed, generated from its command table" \
    bash -c 'grep -q "^\.TH AVOCTL 1" "$0/share/man/man1/avoctl.1" &&
             grep -q "complete -o default -F _avoctl avoctl" "$0/share/bash-completion/completions/avoctl" &&
             grep -q "^#compdef avoctl" "$0/share/zsh/site-functions/_avoctl" &&
             "$0/bin/avoctl" man | cmp -s - "$0/share/man/man1/avoctl.1"' "$R$P"
check "the installed man page renders with man -l and lists every command" \
    bash -c 'out=$(MANWIDTH=100 man -l "$0/share/man/man1/avoctl.1" 2>&1) &&
             for c in submit watch list status completion man; do grep -q "^   $c\$" <<<"$out" || exit 1; done' "$R$P"
check "the installed bash completion loads and completes commands and flags" \
    bash -c 'source "$0/share/bash-completion/completions/avoctl" && complete -p avoctl >/dev/null &&
             COMP_WORDS=(avoctl wat); COMP_CWORD=1; _avoctl; [ "${COMPREPLY[*]}" = watch ] &&
             COMP_WORDS=(avoctl submit --evalu); COMP_CWORD=2; _avoctl; [ "${COMPREPLY[*]}" = --evaluations ]' "$R$P"

# The installed daemon and worker, nothing from the build tree on PATH.
export PATH="$R$P/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
check "the installed avod starts (embedded PostgreSQL)" start_avod
applied=$(psql_avo "SELECT count(*) FROM avo_schema_version")
check "it migrated from the installed sql/ ($applied migrations) and serves the installed kernels/" \
    bash -c 'grep -q "kernels $0/share/avo/kernels" "$1" && test "$2" = "$(ls "$0"/share/avo/sql/*.sql | wc -l)"' \
    "$R$P" "$T/avod.log" "$applied"
start_worker
JOB=$(avoctl --json submit --problem cpu/sgemm --evaluations 2 | jq -r .id)
timeout 300 avoctl watch "$JOB" >"$T/watch.out" 2>&1
check "an installed worker evaluates a job to its end" \
    test "$(psql_avo "SELECT state FROM jobs WHERE id = $JOB")" = succeeded
# A downgrade: the database knows a migration this avod does not.
psql_avo "INSERT INTO avo_schema_version (version, name) VALUES (999, '999_future.sql')" >/dev/null
stop_workers
stop_pid "$AVOD_PID"
timeout 120 avod >"$T/avod-old.log" 2>&1
rc=$?
check "an avod older than its database's schema refuses to start, naming both versions (exit $rc)" \
    bash -c '[ "$1" = 1 ] && grep -q "schema is at version 999, newer than this avod knows ($2," "$0"' \
    "$T/avod-old.log" "$rc" "$(ls "$ROOT"/sql/*.sql | tail -1 | sed "s#.*/0*##; s#_.*##")"
make -s -C "$ROOT" BUILD="$BUILD" uninstall DESTDIR="$R" PREFIX="$P" >>"$T/install.log" 2>&1
check "make uninstall leaves no file behind" test -z "$(find "$R" -type f | head -3)"
[ "$FAILS" -eq 0 ]
