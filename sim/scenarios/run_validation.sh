#!/bin/sh
# Runs the htsim validation scenarios with the reference transport and with the softub engine,
# and writes a Markdown table (softub-sim beside htsim's figures from DESIGN.md section 6) into
# docs/simulator.md between the "validation:begin" and "validation:end" markers.
# usage: sim/scenarios/run_validation.sh [--all] [--no-docs]
#   --all      also the 8192-host permutation (minutes, GBs: run by hand)
#   --no-docs  print the table only
# SOFTUB_SIM names the binary (default build/sim/softub-sim). Wall and peak RSS come from
# /usr/bin/time; FCTs are deterministic, wall times depend on the machine and its load.
set -e
DIR=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$DIR/../.." && pwd)
export SOFTUB_SIM="${SOFTUB_SIM:-$ROOT/build/sim/softub-sim}"
ALL=0
DOCS=1
for a in "$@"; do
    case "$a" in
    --all) ALL=1 ;;
    --no-docs) DOCS=0 ;;
    *)
        echo "usage: $0 [--all] [--no-docs]" >&2
        exit 2
        ;;
    esac
done
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# name | description | htsim FCTs | htsim wall, memory
cat >"$TMP/cases" <<'CASES'
single|one 2 MB flow (k=16)|176.2 us (ideal about 176)|0.01 s
incast15|incast 15->1, 2 MB (k=4)|p50 2244, max 2479 us|0.05 s
incast127|incast 127->1, 2 MB (k=8)|p50 20794, max 21029 us|0.95 s, 12 MB
perm16_128|permutation 16 hosts, 128 paths|max 194 us|0.05 s
perm16_1|permutation 16 hosts, 1 path|p50 341, max 528 us|0.07 s
perm1024_128|permutation 1024 hosts, 128 paths|p50 194.4, p99 199.5, max 200.5 us|18.3 s, 145 MB
perm1024_1|permutation 1024 hosts, 1 path|p50 385, p99 756, max 890 us|19.1 s, 94 MB
perm8192_128|permutation 8192 hosts, 128 paths|p50 196.8, p99 202.2, max 205.7 us|270 s, 2.5 GB
CASES

# One run: prints "p50, p99, max us (completed/flows)|wall s (user cpu s), peak RSS MB".
one() {
    /usr/bin/time -f '%e %U %M' -o "$TMP/time" "$DIR/htsim_$1.sh" "$2" >"$TMP/out" 2>/dev/null || true
    awk -v t="$(cat "$TMP/time" | tail -1)" '
        /^flows / { done = $4; n = $2 }
        /^fct_us / { p50 = $7; p99 = $9; mx = $11 }
        /^trims / { trims = $2 }
        END {
            split(t, w, " ");
            f = sprintf("p50 %.1f, p99 %.1f, max %.1f us", p50, p99, mx);
            if (done != n) f = f sprintf(" (%s/%s done)", done, n);
            if (trims > 0) f = f sprintf(", %d trims", trims);
            printf "%s|%.2f s (cpu %.2f s), %.0f MB\n", f, w[1], w[2], w[3] / 1024;
        }' "$TMP/out"
}

{
    echo "| scenario | htsim (NSCC) | htsim wall, memory | softub-sim ref transport | wall, RSS | softub-sim softub engine (PDS NSCC + REPS) | wall, RSS |"
    echo "|---|---|---|---|---|---|---|"
    while IFS='|' read -r name desc hfct hwall; do
        [ "$name" = perm8192_128 ] && [ $ALL = 0 ] && continue
        echo "running $name" >&2
        r=$(one "$name" ref)
        s=$(one "$name" softub)
        echo "| $desc | $hfct | $hwall | ${r%%|*} | ${r#*|} | ${s%%|*} | ${s#*|} |"
    done <"$TMP/cases"
} >"$TMP/table"

cat "$TMP/table"
if [ $DOCS = 1 ]; then
    DOC="$ROOT/docs/simulator.md"
    awk -v tf="$TMP/table" '
        /<!-- validation:begin -->/ { print; while ((getline l < tf) > 0) print l; skip = 1; next }
        /<!-- validation:end -->/ { skip = 0 }
        !skip { print }' "$DOC" >"$TMP/doc"
    cp "$TMP/doc" "$DOC"
    echo "table written to $DOC" >&2
fi
