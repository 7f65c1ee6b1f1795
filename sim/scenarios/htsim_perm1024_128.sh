#!/bin/sh
# htsim validation (DESIGN.md section 6): permutation, 1024 hosts (k=16), 2 MB, 128 paths (htsim p50 194.4, p99 199.5, max 200.5 us)
. "$(dirname "$0")/common.sh"
run --topo fattree --k 16 --workload perm --size 2000000 --paths 128 "$@"
