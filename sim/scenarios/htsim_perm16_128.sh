#!/bin/sh
# htsim validation (DESIGN.md section 6): permutation, 16 hosts (k=4), 2 MB, 128 paths (htsim max 194 us)
. "$(dirname "$0")/common.sh"
run --topo fattree --k 4 --workload perm --size 2000000 --paths 128 "$@"
