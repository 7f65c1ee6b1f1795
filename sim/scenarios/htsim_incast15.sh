#!/bin/sh
# htsim validation (DESIGN.md section 6): incast 15->1, 2 MB each, k=4 fat tree (htsim p50 2244, max 2479 us)
. "$(dirname "$0")/common.sh"
run --topo fattree --k 4 --workload incast --incast 15 --size 2000000 --paths 128 "$@"
