#!/usr/bin/env bash
# bench/critpath.sh: user-space instructions on the path an answer waits on: from the moment
# a device finds the peer's message (the receive system call returned it, a shm slot holds
# it) to the moment it hands over the answer (the send system call, the slot write). Built
# with -DSOFTUB_CRITPATH=ON the devices switch callgrind's collection on and off there
# (src/dev/critpath.h), and bench/lat_count plays a SEND ping-pong between two contexts in
# one thread under callgrind; work done after the send (while a real peer would be
# computing: the ACK left behind, timers, empty polls) is not counted. Runs N and 3N round
# trips; the difference over 4N turns is the cost of one turn without set-up. Prints that,
# with what callgrind's cache and branch simulation says of the same turn: first-level
# instruction-cache misses (about one per 64-byte line of code the turn runs: the kernel's
# system calls between two turns evict most of it on a real CPU, and its code is not
# simulated), data-cache misses and mispredicted branches; then the largest inclusive
# costs per turn.
#
#   bench/critpath.sh [URI]        udp://127.0.0.1:0?paths=1 (default), shm://0
# Environment: BUILD_DIR (build-critpath), N (1000), TOP (25 functions). Loopback only.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib.sh"
BUILD=${BUILD_DIR:-$ROOT/build-critpath}
N=${N:-1000}
TOP=${TOP:-25}
URI=${1:-udp://127.0.0.1:0?paths=1}
scratch_dir critpath
critpath_build "$BUILD" critpath.sh lat_count

# round trips [empty polls after them, counted too] -> the collected events: Ir Dr Dw I1mr D1mr
# D1mw ILmr DLmr DLmw Bc Bcm Bi Bim
run() {
    local tag=$1${2:+e$2}
    timeout 600 valgrind --tool=callgrind --collect-atstart=no --cache-sim=yes --branch-sim=yes \
        ${2:+--toggle-collect=empty_polls} --callgrind-out-file="$WORK/cg.$tag" \
        "$BUILD/bench/lat_count" "$URI" "$1" ${2:-} >"$WORK/log.$tag" 2>&1
    sed -n 's/.*Collected : \([0-9 ]*\)$/\1/p' "$WORK/log.$tag" | tail -1
}
a=($(run "$N"))
b=($(run $((3 * N))))
turns=$((4 * N))
ev() { echo $(((${b[$1]:-0} - ${a[$1]:-0}) / turns)); } # one event's count per turn
per=$(ev 0)
echo "critpath: $URI: $per instructions per turn (receive -> send), $turns turns"
echo "critpath: simulated per turn: $(ev 3) I1 misses, $(($(ev 4) + $(ev 5))) D1 misses, $(($(ev 10) + $(ev 12))) mispredicted branches"
# A waiting side's poll that finds nothing: its length is how late, at worst, it sees the
# answer. EMPTY such polls after the round trips, against none.
EMPTY=${EMPTY:-2000}
c=($(run "$N" "$EMPTY"))
echo "critpath: $URI: $(((${c[0]:-0} - ${a[0]:-0}) / EMPTY)) instructions per empty poll"
# A turn is thousands of instructions: nothing collected means the marks did not switch.
if [ "$per" -lt 100 ]; then
    echo "critpath.sh: nothing collected; valgrind said:" >&2
    tail -n 5 "$WORK/log.$N" >&2
    exit 1
fi
# awk reads to the end: leaving early would kill callgrind_annotate with SIGPIPE, and
# pipefail would make that the script's status.
callgrind_annotate --inclusive=yes --show=Ir "$WORK/cg.$((3 * N))" 2>/dev/null |
    awk -v t=$((6 * N)) -v top="$TOP" '
        /file:function/ { go = 1; next }
        go && k < top && /^ *[0-9,]+ / {
            n = $1; gsub(",", "", n); f = $0; sub(/^ *[0-9,]+ \([ 0-9.]+%\) +/, "", f)
            sub(/ \[.*$/, "", f); sub(/^.*:/, "", f)
            if (f ~ /^(main|wait_recv|\(below main\)|__libc_start_main.*|0x.*)$/ || seen[f]++) next
            printf "%8.0f  %s\n", n / t, f
            k++
        }'
