#!/bin/sh
# htsim validation (DESIGN.md section 6): incast 127->1, 2 MB each, k=8 fat tree (htsim p50 20794, max 21029 us)
. "$(dirname "$0")/common.sh"
run --topo fattree --k 8 --workload incast --incast 127 --size 2000000 --paths 128 "$@"
