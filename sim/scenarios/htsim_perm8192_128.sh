#!/bin/sh
# htsim validation (DESIGN.md section 6): permutation, 8192 hosts (k=32), 2 MB, 128 paths (htsim p50 196.8, p99 202.2, max 205.7 us; 270 s, 2.5 GB)
. "$(dirname "$0")/common.sh"
run --topo fattree --k 32 --workload perm --size 2000000 --paths 128 "$@"
