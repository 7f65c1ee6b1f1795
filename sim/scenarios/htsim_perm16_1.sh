#!/bin/sh
# htsim validation (DESIGN.md section 6): permutation, 16 hosts (k=4), 2 MB, 1 path (htsim p50 341, max 528 us)
. "$(dirname "$0")/common.sh"
run --topo fattree --k 4 --workload perm --size 2000000 --paths 1 "$@"
