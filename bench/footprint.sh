#!/usr/bin/env bash
# bench/footprint.sh: what the path an answer waits on touches, in distinct 64-byte lines and
# 4 KiB pages of code and of data per turn. The path is bench/critpath.sh's (from the receive
# system call that returned the peer's message to the send of the answer, marked by the
# devices in a -DSOFTUB_CRITPATH=ON build); the trace is valgrind's lackey
# (--trace-mem=yes) over bench/lat_count, with bench/footprint_alloc.c preloaded to log the
# allocations, so that each data line is put down to the allocation holding it (the function
# that made it and its size) or to its mapping (the stack, the executable's data, a library).
# On a host whose system calls empty the TLB, a turn's cost follows these counts
# (docs/perf-journal.md, "Pages, polls and the repost", "Whose pages"). Prints the medians per
# turn, then the largest owners of code and data lines, and the functions the turn runs that
# cmake/hotpath.txt (the functions the build links together) lacks.
#
#   bench/footprint.sh                         udp://127.0.0.1:0?paths=1, N=300
#   TOP=40 bench/footprint.sh shm://0
# Environment: BUILD_DIR (build-critpath, shared with critpath.sh), N (round trips), TOP
# (owners listed, 20). Loopback only; the traced run is bounded by `timeout`.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib.sh"
BUILD=${BUILD_DIR:-$ROOT/build-critpath}
URI=${1:-udp://127.0.0.1:0?paths=1}
N=${N:-300} TOP=${TOP:-20}
scratch_dir footprint
critpath_build "$BUILD" footprint.sh lat_count footprint footprint_alloc

# The preload goes to valgrind's launcher too, which logs nothing it keeps: the traced program
# opens the log afresh.
FOOTPRINT_ALLOC_LOG="$WORK/alloc" LD_PRELOAD="$BUILD/bench/libfootprint_alloc.so" \
    timeout 600 valgrind --tool=lackey --trace-mem=yes --log-file="$WORK/trace" \
    "$BUILD/bench/lat_count" "$URI" "$N" >"$WORK/log" 2>&1 ||
    { echo "footprint.sh: the traced run failed:" >&2; tail -n 5 "$WORK/log" >&2; exit 1; }
echo "footprint: $URI, bench/lat_count $N round trips (both sides: two turns each)"
"$BUILD/bench/footprint" "$BUILD/bench/lat_count" "$WORK/trace" "$WORK/alloc" "$TOP" \
    "$ROOT/cmake/hotpath.txt"
