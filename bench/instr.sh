#!/usr/bin/env bash
# bench/instr.sh: user-space instructions per operation of softub-perf, each side in turn
# under valgrind's callgrind while its peer runs natively. Instruction counts do not depend
# on the machine's load (wall-clock figures on a shared 2-CPU host do), so this is the
# figure to compare two builds by. Each side runs twice, with N and 2N operations; the
# difference divided by N is the cost of one operation without set-up and tear-down.
#
#   bench/instr.sh [TEST] [softub-perf client options...]
#   bench/instr.sh                                  send_lat -s 8 over udp (the default)
#   bench/instr.sh send_lat -d shm -s 8
#   bench/instr.sh write_bw -s 8 -t 512 -l 32       the message-rate run
# Environment: BUILD_DIR (build-bench), N (operations, 2000), KEEP=1 keeps the callgrind
# files (callgrind_annotate them for the per-function split). Loopback only; every run is
# bounded by `timeout`.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib.sh"
BUILD=${BUILD_DIR:-$ROOT/build-bench}
N=${N:-2000}
TEST=${1:-send_lat}
[ $# -gt 0 ] && shift
OPTS=("$@")
[ ${#OPTS[@]} -gt 0 ] || OPTS=(-s 8)
WORK=$(mktemp -d /tmp/softub-instr.XXXXXX)
cleanup() {
    jobs -p | xargs -r kill 2>/dev/null || true
    wait 2>/dev/null || true
    if [ "${KEEP:-0}" = 1 ]; then echo "callgrind files kept in $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

command -v valgrind >/dev/null || { echo "instr.sh: needs valgrind" >&2; exit 1; }
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" --target softub-perf >/dev/null
PERF=$BUILD/softub-perf

# One pair; WHO (client|server) runs under callgrind. Prints that side's total Ir.
run_pair() {
    local who=$1 n=$2 rc=0
    local srv=("$PERF" "$TEST" --bind 127.0.0.1 -p 0 --timeout 60000)
    local cli=("$PERF" "$TEST" "${OPTS[@]}" -n "$n" --timeout 60000)
    local out=$WORK/callgrind.$TEST.$who.$n
    local cg=(valgrind --tool=callgrind --callgrind-out-file="$out")
    if [ "$who" = server ]; then srv=("${cg[@]}" "${srv[@]}"); else cli=("${cg[@]}" "${cli[@]}"); fi
    perf_server "$WORK/server.log" 60 timeout 300 "${srv[@]}"
    [ -n "$SRV_PORT" ] || { echo "instr.sh: the server did not start" >&2; return 1; }
    timeout 300 "${cli[@]}" -p "$SRV_PORT" 127.0.0.1 >"$WORK/client.log" 2>&1 || rc=$?
    wait "$SRV_PID" || rc=$((rc ? rc : 1))
    if [ $rc != 0 ]; then
        echo "instr.sh: $who run failed ($rc):" >&2
        tail -n 5 "$WORK/client.log" "$WORK/server.log" >&2
        return 1
    fi
    # callgrind writes "totals: <Ir>" (or "summary:") at the end of its output file
    awk '/^(totals|summary):/ {print $2; exit}' "$out"
}

echo "softub-perf $TEST ${OPTS[*]}: user instructions per operation (callgrind Ir, ($((2 * N)) ops - $N ops) / $N)"
# The side under callgrind also counts the polls it makes while its native peer is off the
# CPU: few on an idle machine, most of the figure on a busy one (bench/lat_count, both sides
# in one thread, has no such term).
load=$(cut -d' ' -f1 /proc/loadavg)
if awk -v l="$load" 'BEGIN { exit !(l > 1) }'; then
    echo "warning: load average $load: the figures below include polls while the peer waits for a CPU"
fi
for who in client server; do
    a=$(run_pair "$who" "$N")
    b=$(run_pair "$who" $((2 * N)))
    awk -v w="$who" -v a="$a" -v b="$b" -v n="$N" \
        'BEGIN { printf "%-7s %8.0f  (totals %d and %d)\n", w, (b - a) / n, a, b }'
done
