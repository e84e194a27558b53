#!/usr/bin/env bash
# The source map in docs/architecture.md stays true (issue 23, points 2 and
# 9). Needs no database and starts no process:
#  - every .c and .cu file outside kernels/ and tests/ (tracked or new) is
#    named in it, and every file it names exists;
#  - the entry points each file's row lists are defined in that file;
#  - every function the call chains name is defined in the tree (C/CUDA at
#    column 0, or CREATE FUNCTION in sql/);
#  - every table sql/ or the migrator creates is in the table map, and the
#    map names no table that does not exist;
#  - every .c/.cu in daemon/, client/, proto/, bench/ and tests/unit/ begins
#    with a comment saying what it is for.
source "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1
DOC=docs/architecture.md

section() {  # TITLE: the lines under "### TITLE" up to the next heading
    awk -v h="### $1" '$0 == h {on = 1; next} on && /^##/ {exit} on' "$DOC"
}
sources() {  # the C and CUDA files of the tree: tracked, and new ones not ignored
    if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        git ls-files --cached --others --exclude-standard -- '*.c' '*.cu' | sort -u
    else
        find . -path ./build -prune -o \( -name '*.c' -o -name '*.cu' \) -print | sed 's|^\./||' | sort
    fi
}
defined_c() {  # NAME FILE...: a definition at column 0 (return type on the same line)
    local name=$1
    shift
    grep -qE "^[A-Za-z_][^;=]*[ *]$name\(" "$@" 2>/dev/null || grep -qE "^$name\(" "$@" 2>/dev/null
}
defined_anywhere() {  # NAME: in any C/CUDA source or as an SQL function
    # shellcheck disable=SC2046
    defined_c "$1" $(sources) || grep -qiE "FUNCTION[[:space:]]+$1[[:space:]]*\(" sql/*.sql
}

# 1. every C/CUDA file outside kernels/ and tests/ is named, in backquotes
missing=()
n=0
while IFS= read -r f; do
    case $f in kernels/* | tests/*) continue ;; esac
    n=$((n + 1))
    grep -qF "\`$f\`" "$DOC" || missing+=("$f")
done < <(sources)
for f in "${missing[@]}"; do echo "# not in $DOC: $f"; done
check "the source map names every .c/.cu file outside kernels/ and tests/ ($n files, ${#missing[@]} missing)" \
    [ "$n" -gt 50 -a ${#missing[@]} -eq 0 ]

# 2. every file the map's tables name exists
gone=()
while IFS= read -r f; do
    [ -e "$f" ] || gone+=("$f")
done < <(grep -E '^\| `' "$DOC" | grep -oE '`[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+\.(c|cu)`' | tr -d '`' | sort -u)
for f in "${gone[@]}"; do echo "# named in $DOC but not in the tree: $f"; done
check "every .c/.cu file the source map names exists (${#gone[@]} missing)" [ ${#gone[@]} -eq 0 ]

# 3. each row's entry points are defined in that row's files
bad=()
rows=0
while IFS= read -r row; do
    files=$(cut -d'|' -f2 <<<"$row" | grep -oE '`[A-Za-z0-9_./-]+\.(c|cu)`' | tr -d '`')
    [ -n "$files" ] || continue
    rows=$((rows + 1))
    for fn in $(awk -F'|' '{print $(NF - 1)}' <<<"$row" | grep -oE '`[A-Za-z_][A-Za-z0-9_]*`' | tr -d '`'); do
        # shellcheck disable=SC2086
        defined_c "$fn" $files || bad+=("$fn (row of $(tr '\n' ' ' <<<"$files"))")
    done
done < <(grep -E '^\| `[A-Za-z0-9_./-]+\.(c|cu)`' "$DOC")
for b in "${bad[@]}"; do echo "# entry point not defined where the map says: $b"; done
check "the entry points of each file's row are defined in that file ($rows rows, ${#bad[@]} wrong)" \
    [ "$rows" -gt 50 -a ${#bad[@]} -eq 0 ]

# 4. the call chains' functions exist
chains=$(section "Call chains")
names=$(grep -oE '`[A-Za-z_][A-Za-z0-9_]*\(\)`' <<<"$chains" | tr -d '`()' | sort -u)
nn=$(wc -w <<<"$names")
undefined=()
for fn in $names; do defined_anywhere "$fn" || undefined+=("$fn"); done
for f in "${undefined[@]}"; do echo "# a call chain names $f(), which nothing defines"; done
check "every function the call chains name is defined in the tree ($nn names, ${#undefined[@]} undefined)" \
    [ "$nn" -gt 60 -a ${#undefined[@]} -eq 0 ]
for chain in "A submission" "A claim" "An evaluation" "An agent step" "A watch stream"; do
    check "the call chains include: $chain" grep -qi "^\*\*.*$chain" <<<"$chains"
done

# 5. tables: what sql/ and the migrator create is in the map, and only that
tables=$( (grep -hoiE 'CREATE (UNLOGGED )?TABLE (IF NOT EXISTS )?[a-z_]+' sql/*.sql daemon/avod/migrate.c) |
    awk '{print $NF}' | sort -u)
map=$(section "Who writes each table")
mapped=$(grep -E '^\| `' <<<"$map" | cut -d'|' -f2 | grep -oE '`[a-z_]+`' | tr -d '`' | sort -u)
unmapped=$(comm -23 <(echo "$tables") <(echo "$mapped"))
phantom=$(comm -13 <(echo "$tables") <(echo "$mapped"))
for t in $unmapped; do echo "# table $t is not in the table map"; done
for t in $phantom; do echo "# the table map names $t, which nothing creates"; done
check "the table map covers every table ($(wc -w <<<"$tables") tables; unmapped: ${unmapped:-none}; phantom: ${phantom:-none})" \
    [ -n "$tables" -a -z "$unmapped" -a -z "$phantom" ]

# 6. every C/CUDA file of these folders starts with a comment
uncommented=()
m=0
while IFS= read -r f; do
    case $f in daemon/* | client/* | proto/* | bench/* | tests/unit/*) ;; *) continue ;; esac
    m=$((m + 1))
    first=$(head -n1 "$f")
    case $first in '/*'?* | '//'?*) ;; *) uncommented+=("$f") ;; esac
done < <(sources)
for f in "${uncommented[@]}"; do echo "# does not begin with a comment: $f"; done
check "every .c/.cu in daemon/, client/, proto/, bench/, tests/unit/ begins with a purpose comment ($m files, ${#uncommented[@]} without)" \
    [ "$m" -gt 50 -a ${#uncommented[@]} -eq 0 ]

[ "$FAILS" -eq 0 ]
