#!/usr/bin/env bash
# Congestion control and load balancing through real engines (--transport softub) at the
# scale of the htsim figures of DESIGN.md section 6: NSCC vs none vs DCQCN (vs C-AQM), the
# balancers on a permutation and with a degraded core link, and the 16 -> 1 C-AQM incast.
# Results and explanations: docs/algorithms.md, "Measured".
# Usage: sim/scenarios/cc_compare.sh [path/to/softub-sim]   (default build/sim/softub-sim)
set -euo pipefail
S=${1:-build/sim/softub-sim}
[ -x "$S" ] || { echo "no softub-sim at $S (pass its path)"; exit 2; }
run() { # label, args...
  local label=$1
  shift
  local out
  out=$("$S" --transport softub --quiet "$@" 2>/dev/null) || true
  printf '%-34s %s | %s | %s\n' "$label" "$(grep '^fct_us' <<<"$out")" \
    "$(grep -o 'max_queue_bytes [0-9]*' <<<"$out")" "$(grep -o 'retx [0-9]*' <<<"$out" | head -1)"
}
K4=(--topo fattree --k 4)
echo "== congestion control (k=4 fat tree, 100 Gb/s, 1 us links, 4 KiB MTU, trimming)"
for cc in nscc none dcqcn caqm; do
  sw=() # C-AQM: the switches mark I/C/hint (--caqm), PDS carries them end to end
  [ "$cc" = caqm ] && sw=(--caqm)
  run "single 2 MB, cc $cc" "${K4[@]}" --workload single --size 2000000 --paths 128 --pds-cc "$cc" \
    "${sw[@]}"
  run "incast 15->1 2 MB, cc $cc" "${K4[@]}" --workload incast --incast 15 --size 2000000 \
    --paths 128 --pds-cc "$cc" "${sw[@]}"
  run "perm 16 hosts 128 paths, cc $cc" "${K4[@]}" --workload perm --size 2000000 --paths 128 \
    --pds-cc "$cc" "${sw[@]}"
  run "perm 16 hosts 1 path, cc $cc" "${K4[@]}" --workload perm --size 2000000 --paths 1 \
    --pds-cc "$cc" "${sw[@]}"
done
echo "== load balancing, permutation, 128 hosts (k=8), 1 MB, NSCC"
for lb in single oblivious reps bitmap; do
  p=128
  [ "$lb" = single ] && p=1
  run "perm k=8 lb $lb" --topo fattree --k 8 --workload perm --size 1000000 --paths "$p" --pds-lb "$lb"
done
echo "== degraded core link: agg 24 <-> core 32 at 10 Gb/s from t=0 (k=4, perm 2 MB, NSCC)"
for lb in oblivious reps bitmap single; do
  tmp=$(mktemp)
  run "degraded, lb $lb" "${K4[@]}" --workload perm --size 2000000 --paths 128 --pds-lb "$lb" \
    --degrade-link 0 24 32 10 --ports "$tmp"
  awk -F, '($2==24 && $3==32) || ($2==32 && $3==24) {b += $6} END {print "    bytes over the degraded link: " b}' "$tmp"
  rm -f "$tmp"
done
echo "== 16 -> 1 incast, queue vs 2 BDP = 349920 B (k=6; no-trim: 5 BDP queues that drop)"
for trim in trim no-trim; do
  for cc in none nscc caqm; do
    extra=()
    [ "$cc" = caqm ] && extra=(--caqm)
    [ "$trim" = no-trim ] && extra+=(--no-trim)
    run "incast 16->1 2 MB k=6 $trim, cc $cc" --topo fattree --k 6 --workload incast --incast 16 \
      --size 2000000 --paths 128 --pds-cc "$cc" "${extra[@]}"
  done
done
