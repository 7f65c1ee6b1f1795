#!/bin/sh
# htsim validation (DESIGN.md section 6): one 2 MB flow across a k=16 fat tree (htsim 176.2 us)
. "$(dirname "$0")/common.sh"
run --topo fattree --k 16 --workload single --size 2000000 --paths 128 "$@"
