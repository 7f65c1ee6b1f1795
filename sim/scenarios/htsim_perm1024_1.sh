#!/bin/sh
# htsim validation (DESIGN.md section 6): permutation, 1024 hosts (k=16), 2 MB, 1 path (htsim p50 385, p99 756, max 890 us)
. "$(dirname "$0")/common.sh"
run --topo fattree --k 16 --workload perm --size 2000000 --paths 1 "$@"
