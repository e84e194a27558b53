#!/usr/bin/env bash
# The code's layout is the one .clang-format describes (issue 23, point 9):
# `make format-check` runs clang-format --dry-run over daemon/, client/,
# proto/ and tests/unit/ and names every file that differs (fix with
# `make format`). Kernels, hostile cases and fixtures are self-contained
# and keep their own layout.
source "$(dirname "$0")/lib.sh"

check "clang-format is installed (make deps)" command -v clang-format
check "make format-check: every file is formatted as .clang-format says" \
    bash -c 'make -s -C "$0" format-check >"$1" 2>&1 || { cat "$1"; false; }' "$ROOT" "$T/format.out"
# The check must be able to fail: a copy of the tree with one file
# misformatted.
mkdir -p "$T/tree/daemon/common"
cp "$ROOT/Makefile" "$ROOT/.clang-format" "$T/tree/"
printf 'int avo_x(void){return  1;}\n' >"$T/tree/daemon/common/bad.c"
check "make format-check fails on a misformatted file, naming it" \
    bash -c '! make -s -C "$0" format-check >"$1" 2>&1 && grep -q "daemon/common/bad.c" "$1"' "$T/tree" "$T/bad.out"
[ "$FAILS" -eq 0 ]
