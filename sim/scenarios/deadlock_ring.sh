#!/bin/sh
# The lossless deadlock demonstration (docs/simulator.md, "Lossless fabrics"):
# shortest-path routing on a ring deadlocks under PFC (exit status 4), up/down does not.
# usage: sim/scenarios/deadlock_ring.sh [path/to/softub-sim] [pfc|cbfc]
SIM=${1:-build/sim/softub-sim}
FC=${2:-pfc}
set -x
"$SIM" --topo ring --x 5 --hosts-per-leaf 2 --workload shift --stride 4 --fc "$FC" --routing ecmp --quiet
echo "exit $? (4 = deadlock detected)"
"$SIM" --topo ring --x 5 --hosts-per-leaf 2 --workload shift --stride 4 --fc "$FC" --routing updown --quiet
echo "exit $? (0 = every flow completed)"
