#!/usr/bin/env bash
# bench/pgo.sh: builds softub-perf with profile-guided optimisation (GCC): an instrumented
# build runs a short training over loopback (the runs bench/compare.sh measures: 8-byte
# ping-pongs, message rate and bandwidth over udp and shm, and the other latency tests), then
# the same build directory is rebuilt with the profile. GCC then lays out the hot paths
# together and the cold code apart, and inlines and arranges branches by what ran
# (docs/perf-journal.md, "Profile-guided builds"). Both builds are link-time optimised
# (CMAKE_INTERPROCEDURAL_OPTIMIZATION), so GCC also inlines the small calls between the
# message path's files. An application's own build of the library goes the same way:
# cmake -DSOFTUB_PGO=gen (and -DCMAKE_INTERPROCEDURAL_OPTIMIZATION=ON), run its workload,
# cmake -DSOFTUB_PGO=use.
#
#   bench/pgo.sh            prints the path of the optimised softub-perf
# Environment: BUILD_DIR (build-pgo). Every run is bounded by `timeout`; loopback only.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib.sh"
BUILD=${BUILD_DIR:-$ROOT/build-pgo}
DATA=$BUILD/pgo-data
LOG=$(mktemp /tmp/softub-pgo.XXXXXX)
cleanup() {
    jobs -p | xargs -r kill 2>/dev/null || true
    wait 2>/dev/null || true
    rm -f "$LOG"
}
trap cleanup EXIT

configure() {
    cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSOFTUB_PGO="$1" \
        -DSOFTUB_PGO_DIR="$DATA" \
        -DCMAKE_INTERPROCEDURAL_OPTIMIZATION=ON >/dev/null
    cmake --build "$BUILD" --target softub-perf >/dev/null
}

# One server/client pair: TEST, then the client's options. The server takes a free port
# (-p 0) and prints it once it listens.
SRV_OPTS=() # more options of the server's
train() {
    local test=$1 rc=0
    shift
    perf_server /dev/null 30 timeout 60 "$BUILD/softub-perf" "$test" --bind 127.0.0.1 -p 0 \
        --timeout 20000 "${SRV_OPTS[@]}"
    # A run that fails only leaves its paths out of the profile: said, not fatal.
    [ -n "$SRV_PORT" ] || { echo "pgo.sh: warning: the $test server did not start" >&2; return 0; }
    timeout 60 "$BUILD/softub-perf" "$test" "$@" -p "$SRV_PORT" --timeout 20000 127.0.0.1 \
        >"$LOG" 2>&1 || rc=$?
    wait
    if [ $rc != 0 ]; then
        echo "pgo.sh: warning: training run $test $* failed ($rc)" >&2
        tail -n 5 "$LOG" >&2
    fi
}

rm -rf "$DATA"
echo "pgo.sh: instrumented build in $BUILD" >&2
configure gen
echo "pgo.sh: training over loopback" >&2
for dev in udp shm; do
    d=(-d "$dev")
    [ "$dev" = udp ] && d+=(--mtu 9000) # as compare.sh runs it
    train send_lat "${d[@]}" -s 8 -n 20000
    train write_bw "${d[@]}" -s 8 -n 200000 -t 512 -l 32
    train write_bw "${d[@]}" -s 65536 -n 2000
    train write_bw "${d[@]}" -s 1048576 -n 300 -t 32
    train send_bw "${d[@]}" -s 8 -n 100000 -b
done
# The packet ring's ping-pong (both sides; it needs CAP_NET_RAW, else the run only warns).
SRV_OPTS=(--udp-opts ring=1)
train send_lat -d udp --mtu 9000 --udp-opts ring=1 -s 8 -n 20000
SRV_OPTS=()
train write_lat -d udp -s 8 -n 5000
train read_lat -d udp -s 8 -n 5000
train atomic_lat -d udp -n 5000
echo "pgo.sh: optimised build" >&2
configure use
echo "$BUILD/softub-perf"
