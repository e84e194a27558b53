#!/usr/bin/env bash
# The code's conventions that a reader relies on (issue 23, points 4 and 7).
# Needs no database and starts no process:
#  - names: every function a header of daemon/, proto/ or client/ declares
#    carries its file's prefix (daemon/worker/queue.h: avo_queue_*;
#    proto/avo_routes.h: avo_routes_*; client/table.h: avoctl_table_*);
#  - length: no function outside kernels/ (and the problem packages, which
#    are kernels too) is 100 lines or more, from the first line of its
#    signature to its closing brace;
#  - paths: no path buffer of a home-made size (4096, 4200, 4400 ...): a
#    path is PATH_MAX, joined by avo_paths_join;
#  - one copy each of mkdir -p, the atomic write and the list (daemon/common);
#  - every tracked shell script parses (bash -n).
# Each rule is first run on a small bad input of its own, so that a rule
# that cannot fail fails here.
source "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1

# ---- names -------------------------------------------------------------
# FILE...: "header: name (wants prefix)" for each declaration without its
# file's prefix; nothing when all agree.
bad_names() {
    local h b p n
    for h in "$@"; do
        b=$(basename "$h" .h)
        case $h in
        */client/* | client/*) p=avoctl_$b ;;
        *) case $b in avo_*) p=$b ;; *) p=avo_$b ;; esac ;;
        esac
        grep -oE '^[A-Za-z_][A-Za-z0-9_ *]*[ *]((avo|avoctl)_[a-z0-9_]+)\(' "$h" |
            grep -oE '(avo|avoctl)_[a-z0-9_]+\($' | tr -d '(' | sort -u |
            while read -r n; do
                case $n in "$p" | "$p"_*) ;; *) echo "$h: $n (wants ${p}_*)" ;; esac
            done
    done
}
mkdir -p "$T/names/daemon/worker" "$T/names/client"
printf 'int avo_worker_run(const void *o);\nint avo_queue_run(void);\n' >"$T/names/daemon/worker/queue.h"
printf 'void avoctl_table_free(void *t);\nsize_t avoctl_term_width(void *out);\n' >"$T/names/client/table.h"
out=$(bad_names "$T/names/daemon/worker/queue.h" "$T/names/client/table.h")
check "names: the rule finds a misnamed function (avo_worker_run in queue.h, avoctl_term_width in table.h)" \
    bash -c '[ "$(printf "%s\n" "$0" | grep -c "avo_worker_run\|avoctl_term_width")" = 2 ] && ! printf "%s\n" "$0" | grep -q "avo_queue_run\|avoctl_table_free"' "$out"
# shellcheck disable=SC2046
out=$(bad_names $(git ls-files 'daemon/*.h' 'proto/*.h' 'client/*.h' | grep -v '_internal\.h$'))
check "names: every function a header declares carries its file's prefix${out:+: $(echo "$out" | head -5 | tr '\n' ';')}" \
    test -z "$out"

# ---- length ------------------------------------------------------------
# Prints "lines file:line name" for each function definition (clang-format's
# layout: the opening brace of a function alone at column 0, or at the end
# of its signature's last line; the closing brace alone at column 0).
funclen() {
    awk '
    FNR == 1 { sig = 0; infn = 0 }
    {
        line = $0
        if (infn) {
            if (line ~ /^}/) { printf "%d %s:%d %s\n", FNR - start + 1, FILENAME, start, name; infn = 0 }
            next
        }
        if (line ~ /^[A-Za-z_]/ && line !~ /^(typedef|struct [A-Za-z_0-9]+ *\{|enum|union|#|static const|const)/ &&
            line ~ /\(/ && line !~ /;[ \t]*$/ && line !~ /=/) {
            sig = FNR; s = line; sub(/\(.*/, "", s); n = split(s, w, /[ \t*]+/); name = w[n]
            if (line ~ /\{[ \t]*$/) { start = sig; infn = 1; sig = 0 }
            next
        }
        if (sig && line ~ /^\{/) { start = sig; infn = 1; sig = 0; next }
        if (sig && line ~ /;[ \t]*$/ && line !~ /^[ \t]/) sig = 0
    }' "$@"
}
{
    printf 'static int\nshort_one(int a,\n          int b)\n{\n    return a + b;\n}\n\nint long_one(void)\n{\n'
    for _ in $(seq 1 97); do printf '    x();\n'; done
    printf '}\n\nvoid kr_style(void) {\n    y();\n}\n'
} >"$T/len.c"
got=$(funclen "$T/len.c" | tr '\n' ';')
check "length: the measure counts signature to brace ($got)" \
    test "$got" = "5 $T/len.c:2 short_one;100 $T/len.c:8 long_one;3 $T/len.c:109 kr_style;"
sources() {  # C and CUDA outside kernels/, hostile cases and problem packages
    local f d
    git ls-files '*.c' '*.cu' | grep -vE '^(kernels|tests/hostile)/' | while read -r f; do
        d=$(dirname "$f")
        [ -e "$d/problem.json" ] || echo "$f"
    done
}
# shellcheck disable=SC2046
long=$(funclen $(sources) | sort -rn | awk '$1 >= 100')
check "length: every function outside kernels/ is under 100 lines${long:+ (not: $(echo "$long" | head -8 | tr '\n' ';'))}" \
    test -z "$long"
longest=$(funclen $(sources) | sort -rn | head -1)
echo "# longest: $longest"

# ---- paths and one copy of each helper ----------------------------------
odd=$(git ls-files 'daemon/*.[ch]' 'proto/*.[ch]' 'client/*.[ch]' |
    xargs grep -nE 'char [a-z_]*(path|dir|file|tmp|root|scratch)[a-z_]*\[[0-9]{4}\]' | head -8)
check "paths: no path buffer of a home-made size${odd:+ ($(echo "$odd" | tr '\n' ';'))}" test -z "$odd"
printf 'char path[4400];\n' >"$T/odd.c"
check "paths: the rule finds one (char path[4400])" grep -qE 'char [a-z_]*(path|dir|file|tmp|root|scratch)[a-z_]*\[[0-9]{4}\]' "$T/odd.c"
copies() {  # PATTERN: files of daemon/, proto/, client/ defining it
    git ls-files 'daemon/*.c' 'proto/*.c' 'client/*.c' | xargs grep -lE "$1" | tr '\n' ' '
}
m=$(copies '^[a-z].*mkdir[a-z_]*\(const char \*')
check "helpers: one mkdir -p, in daemon/common/avo_file.c (found in: $m)" test "$m" = "daemon/common/avo_file.c "
a=$(git ls-files 'daemon/*.c' 'proto/*.c' 'client/*.c' | xargs grep -lE 'rename\([a-z_]*tmp' | tr '\n' ' ')
check "helpers: one atomic write (rename of a temporary), in daemon/common/avo_file.c (found in: $a)" \
    test "$a" = "daemon/common/avo_file.c "
l=$(git ls-files 'daemon/*.[ch]' 'proto/*.[ch]' 'client/*.[ch]' | xargs grep -lE '\*next;' | grep -v 'avo_list\.h$' | tr '\n' ' ')
check "helpers: no hand-written linked list outside daemon/common/avo_list.h (found in: ${l:-none})" test -z "$l"

# ---- shell scripts parse ---------------------------------------------------
# A script only a GPU machine or a benchmark runs is read by no CI test
# otherwise (bench/paired/cpu.sh once broke on an apostrophe in a jq string).
cat >"$T/quote.sh" <<'EOF'
jq -r '"the checker's waits"' f
EOF
check "scripts: the parse check finds an unbalanced quote" bash -c '! bash -n "$0" 2>/dev/null' "$T/quote.sh"
bad=$(git ls-files '*.sh' | while read -r f; do bash -n "$f" 2>/dev/null || echo "$f"; done | tr '\n' ' ')
check "scripts: every tracked shell script parses (bash -n)${bad:+ (not: $bad)}" test -z "$bad"
[ "$FAILS" -eq 0 ]
