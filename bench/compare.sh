#!/usr/bin/env bash
# bench/compare.sh: softub-perf side by side with the transports a user would pick instead,
# in one run, on this machine, over loopback (127.0.0.1) only:
#   raw UDP busy-poll ping-pong (bench/raw_udp_pingpong: the floor for anything over UDP),
#   UCX ucx_perftest over TCP and over shared memory,
#   libfabric fi_pingpong over tcp, udp;ofi_rxd and shm (rdm endpoints),
#   softub-perf over udp (its sockets; and its packet ring, ring=1, which needs CAP_NET_RAW)
#   and over shm.
# Prints one markdown table (8 B latency p50 and p99.9, 64 KiB and 1 MiB bandwidth, 8 B
# message rate) and the softub/peer ratios against the targets (docs/benchmarks.md).
#
#   bench/compare.sh            full run (five to ten minutes)
#   QUICK=1 bench/compare.sh    fewer iterations, one round (a smoke run, about a minute)
# Every transport runs ROUNDS times (5; QUICK: 1), the rounds one after another so that each
# transport's runs are spread over the whole run like the others', and the table shows each
# figure's median: on a shared machine single busy-poll runs differ by tens of per cent (a
# target's ratio moved 1.09-1.44 between three rounds of one run).
# Environment: BUILD_DIR (build-bench), OUT (also write the markdown there), RUN_TIMEOUT
# (seconds per server/client pair, 90), KEEP=1 (keep every tool's raw output), SOFTUB_MTU
# (softub udp datagram size, 9000 for loopback; 1452 is the device's real-network default),
# PGO (1: softub-perf built by bench/pgo.sh, profile-guided; 0: the plain Release build).
# Installs ucx-utils and libfabric-bin when missing
# (as root, or through sudo). Every run is bounded; servers are killed on exit.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib.sh"
TAG=compare
BUILD=${BUILD_DIR:-$ROOT/build-bench}
QUICK=${QUICK:-0}
OUT=${OUT:-}
T=${RUN_TIMEOUT:-90}
SOFTUB_MTU=${SOFTUB_MTU:-9000}
PGO=${PGO:-1}
WORK=$(mktemp -d /tmp/softub-compare.XXXXXX)
HOST=127.0.0.1
PORT_BASE=$((20000 + ($$ % 2000) * 10))
NEXT_PORT=$PORT_BASE

if [ "$QUICK" = 1 ]; then
    LAT_N=2000 BW64_N=500 BW1M_N=50 RATE_N=20000 FI_N=1000
    ROUNDS=${ROUNDS:-1}
else
    LAT_N=50000 BW64_N=10000 BW1M_N=1000 RATE_N=1000000 FI_N=20000
    ROUNDS=${ROUNDS:-5}
fi

pairs_init

# ---- dependencies ---------------------------------------------------------------------
need=()
command -v ucx_perftest >/dev/null || need+=(ucx-utils)
command -v fi_pingpong >/dev/null || need+=(libfabric-bin)
command -v cmake >/dev/null || need+=(cmake)
command -v ninja >/dev/null || need+=(ninja-build)
command -v ss >/dev/null || need+=(iproute2)
if [ "${#need[@]}" -gt 0 ]; then
    log "compare: installing ${need[*]}"
    install_pkgs "${need[@]}" || log "compare: continuing without ${need[*]}"
fi

# ---- build ------------------------------------------------------------------------------
log "compare: building softub-perf, raw_udp_pingpong, hiccups and c2c in $BUILD"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" --target softub-perf raw_udp_pingpong hiccups c2c turnstamp >/dev/null
PERF=$BUILD/softub-perf
if [ "$PGO" = 1 ]; then
    log "compare: softub-perf with profile-guided optimisation (bench/pgo.sh; PGO=0: without)"
    PERF=$(BUILD_DIR="$ROOT/build-pgo" bash "$ROOT/bench/pgo.sh")
fi
RAW=$BUILD/bench/raw_udp_pingpong

# Result store: R[transport.metric] = the values of every round; get prints their median
# ("-" when none was measured; fi_pingpong's averages keep their "*").
declare -A R
put() { R["$1.$2"]="${R["$1.$2"]:-} $3"; }
get() {
    local v=${R["$1.$2"]:-}
    if [ -z "${v// /}" ]; then printf -- '-'; return; fi
    # shellcheck disable=SC2086 # one value per word
    printf '%s\n' $v | sort -g | awk '{ star = star || /\*$/; sub(/\*$/, ""); x[NR] = $1 + 0 }
        END { m = NR % 2 ? x[(NR + 1) / 2] : (x[NR / 2] + x[NR / 2 + 1]) / 2;
              printf "%s%s", m "", star ? "*" : "" }'
}
# All values of a figure, for the spread line under the table.
all() { printf '%s' "${R["$1.$2"]:-}" | sed 's/^ *//'; }
# Round-by-round ratios of two figures: their values paired in the order they were taken.
per_round() {
    paste -d' ' <(all "$1" "$2" | tr ' ' '\n') <(all "$3" "$4" | tr ' ' '\n') |
        awk '{ a = $1; b = $2; sub(/\*$/, "", a); sub(/\*$/, "", b);
               printf "%s%s", (NR > 1 ? " " : ""), (a == "" || b == "" || b + 0 == 0) ? "-" : sprintf("%.2f", a / b) }'
}

# A target's ratio: the median of the round-by-round ratios over the rounds in which both
# transports found the CPUs placed alike (c2c within 1.5x of each other), each pair having
# run minutes apart in one state of the host; with no such round, over every round. The
# ratio of two medians can pair one transport's near-CPU rounds with the other's far ones.
# Prints "ratio|what it is taken over".
paired() {
    paste -d' ' <(per_round "$1" "$2" "$3" "$4" | tr ' ' '\n') <(all "$1" c2c | tr ' ' '\n') \
        <(all "$3" c2c | tr ' ' '\n') | awk '
        function med(a, n,   i, j, t) {
            for (i = 2; i <= n; i++)
                for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
            return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
        }
        $1 != "-" && $1 != "" {
            every[++ne] = $1
            if ($2 + 0 > 0 && $3 + 0 > 0 && ++nm && ($2 > $3 ? $2 / $3 : $3 / $2) <= 1.5)
                alike[++na] = $1
        }
        END {
            if (na) printf "%.2f|%d of %d round(s), placement alike\n", med(alike, na), na, ne
            else if (ne) printf "%.2f|%d round(s), placement %s\n", med(every, ne), ne,
                nm ? "alike in none" : "not measured"
            else print "-|-"
        }'
}

# softub-perf / raw_udp_pingpong latency line: median is column 5, 99.9% column 9.
lat_cols() { awk '/^ *[0-9]/ {print $5, $9; exit}' "$1"; }
# softub-perf --window's line: the 99.9% of the last iterations only.
lat_window_p999() { awk '/^ # the last [0-9]+ iterations:/ { for (i = 1; i < NF; i++) if ($i == "99.9%") { print $(i + 1); exit } }' "$1"; }
bw_cols() { awk '/^ *[0-9]/ {print $4, $5; exit}' "$1"; }
# ucx_perftest -f prints one line: iterations, %ile latency, avg, overall, BW avg, BW overall
# (MiB/s), msg rate avg, overall (msg/s). Column $2 of it.
ucx_final() { awk -v c="$2" '/^ *[0-9]+ +[0-9.]+ +[0-9.]+/ {l = $0} END { if (l != "") { split(l, f, " "); print f[c] } }' "$1"; }
mib_to_mb() { awk -v v="$1" 'BEGIN { if (v == "") print "-"; else printf "%.1f", v * 1.048576 }'; }

# run_softub TRANSPORT DEVICE BW_TEST [OPTIONS OF BOTH SIDES...]: send_lat, BW_TEST at 64 KiB
# and 1 MiB, and with write_bw the 8-byte rate. The tagged row passes send_bw --tagged: what
# UCX's tag_lat and tag_bw measure, beside the targets' rows (send_lat and write_bw).
run_softub() {
    local tr=$1 dev=$2 bw=$3 v
    local P=("$PERF")
    local S=(--bind "$HOST" -p PORT --timeout 10000 "${@:4}")
    local C=(-p PORT --timeout 10000 -d "$dev" "${@:4}")
    if [ "$dev" = udp ]; then C+=(--mtu "$SOFTUB_MTU"); fi
    # --window: ucx_perftest takes its percentiles over its last 2 048 iterations (its timing
    # queue); softub's over the same span are what its p99.9 is compared with.
    if pair "$tr-lat" tcp "${P[@]}" send_lat "${S[@]}" -- "${P[@]}" send_lat "${C[@]}" -s 8 -n "$LAT_N" --warmup 1000 --window 2048 "$HOST"; then
        read -r a b < <(lat_cols "$WORK/$tr-lat.out") && put "$tr" p50 "$a" && put "$tr" p999 "$b"
        put "$tr" p999w "$(lat_window_p999 "$WORK/$tr-lat.out")"
    fi
    if pair "$tr-bw64" tcp "${P[@]}" "$bw" "${S[@]}" -- "${P[@]}" "$bw" "${C[@]}" -s 65536 -n "$BW64_N" "$HOST"; then
        read -r v _ < <(bw_cols "$WORK/$tr-bw64.out") && put "$tr" bw64 "$v"
    fi
    if pair "$tr-bw1m" tcp "${P[@]}" "$bw" "${S[@]}" -- "${P[@]}" "$bw" "${C[@]}" -s 1048576 -n "$BW1M_N" -t 32 "$HOST"; then
        read -r v _ < <(bw_cols "$WORK/$tr-bw1m.out") && put "$tr" bw1m "$v"
    fi
    if [ "$bw" = write_bw ] && pair "$tr-rate" tcp "${P[@]}" write_bw "${S[@]}" -- "${P[@]}" write_bw "${C[@]}" -s 8 -n "$RATE_N" -t 512 -l 32 "$HOST"; then
        read -r _ v < <(bw_cols "$WORK/$tr-rate.out") && put "$tr" rate "$v"
    fi
    return 0
}

run_raw() {
    if pair raw-lat udp "$RAW" -p PORT -n "$LAT_N" -w 1000 -- "$RAW" -p PORT -n "$LAT_N" -w 1000 "$HOST"; then
        read -r a b < <(lat_cols "$WORK/raw-lat.out") && put raw p50 "$a" && put raw p999 "$b"
    fi
    return 0
}

# Where a udp turn goes: the raw ping-pong and softub udp once more with bench/turnstamp
# preloaded; the client's medians (its own work, the send call, the receive that found the
# data) are kept for the lines under the table.
run_turns() {
    local L=(env "LD_PRELOAD=$BUILD/bench/libturnstamp.so")
    if pair raw-turn udp "${L[@]}" "$RAW" -p PORT -n "$LAT_N" -w 1000 -- "${L[@]}" "$RAW" -p PORT -n "$LAT_N" -w 1000 "$HOST"; then
        put raw turn "$(turn_cols "$WORK/raw-turn.err")"
    fi
    if pair softub-udp-turn tcp "$PERF" send_lat --bind "$HOST" -p PORT --timeout 10000 -- "${L[@]}" "$PERF" send_lat -p PORT --timeout 10000 -d udp --mtu "$SOFTUB_MTU" -s 8 -n "$LAT_N" --warmup 1000 "$HOST"; then
        put softub-udp turn "$(turn_cols "$WORK/softub-udp-turn.err")"
    fi
    return 0
}
# turnstamp's medians in microseconds: "user/send/receive/poll" (poll: a failing receive call
# and the poller's own work after it).
turn_cols() {
    awk '$1 == "turnstamp:" && $2 ~ /^(user|send|receive|empty|idle)$/ { v[$2] = $8 }
        END { if (length(v) == 5) printf "%.2f/%.2f/%.2f/%.2f", v["user"] / 1000, v["send"] / 1000,
                  v["receive"] / 1000, (v["empty"] + v["idle"]) / 1000 }' "$1"
}

run_ucx() {
    local tr=$1 tls=$2 v
    local U=(env "UCX_TLS=$tls" UCX_NET_DEVICES=lo UCX_WARN_UNUSED_ENV_VARS=n ucx_perftest)
    command -v ucx_perftest >/dev/null || return 0
    if pair "$tr-lat" tcp "${U[@]}" -p PORT -- "${U[@]}" -p PORT -t tag_lat -s 8 -n "$LAT_N" -R 50 -f "$HOST"; then
        put "$tr" p50 "$(ucx_final "$WORK/$tr-lat.out" 2)"
    fi
    if pair "$tr-lat999" tcp "${U[@]}" -p PORT -- "${U[@]}" -p PORT -t tag_lat -s 8 -n "$LAT_N" -R 99.9 -f "$HOST"; then
        put "$tr" p999 "$(ucx_final "$WORK/$tr-lat999.out" 2)"
    fi
    if pair "$tr-bw64" tcp "${U[@]}" -p PORT -- "${U[@]}" -p PORT -t tag_bw -s 65536 -n "$BW64_N" -f "$HOST"; then
        put "$tr" bw64 "$(mib_to_mb "$(ucx_final "$WORK/$tr-bw64.out" 5)")"
    fi
    if pair "$tr-bw1m" tcp "${U[@]}" -p PORT -- "${U[@]}" -p PORT -t tag_bw -s 1048576 -n "$BW1M_N" -f "$HOST"; then
        put "$tr" bw1m "$(mib_to_mb "$(ucx_final "$WORK/$tr-bw1m.out" 5)")"
    fi
    if pair "$tr-rate" tcp "${U[@]}" -p PORT -- "${U[@]}" -p PORT -t tag_bw -s 8 -n "$RATE_N" -f "$HOST"; then
        v=$(ucx_final "$WORK/$tr-rate.out" 8)
        if [ -n "$v" ]; then put "$tr" rate "$(awk -v v="$v" 'BEGIN { printf "%.3f", v / 1e6 }')"; fi
    fi
    return 0
}

run_fi() {
    local tr=$1 prov=$2
    command -v fi_pingpong >/dev/null || return 0
    if pair "$tr-lat" tcp fi_pingpong -B PORT -p "$prov" -e rdm -S 8 -I "$FI_N" -- \
        fi_pingpong -P PORT -p "$prov" -e rdm -S 8 -I "$FI_N" "$HOST"; then
        # usec/xfer: the average half round trip (fi_pingpong has no percentiles)
        put "$tr" p50 "$(awk '/^8 / {print $7 "*"; exit}' "$WORK/$tr-lat.out")"
    fi
    return 0
}

# ---- the run ----------------------------------------------------------------------------
START_LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
log "compare: load average at start: $START_LOAD (others' processes skew busy-poll results)"
# The host's own interruptions of a busy CPU: what the p99.9 column mostly shows.
HICCUPS=$("$BUILD/bench/hiccups" 1 | awk -F': ' '/^mean per CPU/ {print $2}')
# Where the host has put the two CPUs right now (a cache line's round trip between them):
# a virtual machine's CPUs move between cores that share a cache and cores that do not, and
# every loopback transfer crosses between them (docs/benchmarks.md, "Bulk over udp").
place() { put "$1" c2c "$("$BUILD/bench/c2c" 2>/dev/null | awk '/ns per/ {print $6}')"; }
for ((round = 1; round <= ROUNDS; round++)); do
    log "compare: round $round of $ROUNDS"
    log "compare: raw UDP";        place raw;        run_raw
    log "compare: softub udp";     place softub-udp; run_softub softub-udp udp write_bw
    # The packet ring (docs/device-udp.md) needs CAP_NET_RAW: without it the row stays empty.
    log "compare: softub udp, packet ring"; place softub-ring; run_softub softub-ring udp write_bw --udp-opts ring=1
    log "compare: UCX tcp";        place ucx-tcp;    run_ucx ucx-tcp tcp
    log "compare: fi tcp";         place fi-tcp;     run_fi fi-tcp tcp
    log "compare: fi udp;ofi_rxd"; place fi-rxd;     run_fi fi-rxd "udp;ofi_rxd"
    log "compare: softub shm";     place softub-shm; run_softub softub-shm shm write_bw
    log "compare: softub shm, tagged"; place softub-shm-tag; run_softub softub-shm-tag shm send_bw --tagged
    log "compare: UCX shm";        place ucx-shm;    run_ucx ucx-shm "posix,cma,self"
    log "compare: fi shm";         place fi-shm;     run_fi fi-shm shm
done
log "compare: where a udp turn goes (bench/turnstamp)"; run_turns
# The same path in instructions (load-proof; a Release build with the marks, not the PGO one).
CRIT=""
if command -v valgrind >/dev/null && [ -f /usr/include/valgrind/callgrind.h ]; then
    log "compare: the answer's path in instructions (bench/critpath.sh)"
    CRIT=$(bash "$ROOT/bench/critpath.sh" "udp://$HOST:0?paths=1&mtu=$SOFTUB_MTU" 2>/dev/null |
        awk '/instructions per turn/ && !n++ {print $3}')
fi
END_LOAD=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- the table --------------------------------------------------------------------------
ratio() { # a / b with 2 decimals, or "-"
    awk -v a="${1%\*}" -v b="${2%\*}" 'BEGIN {
        if (a == "" || b == "" || a == "-" || b == "-" || b + 0 == 0) print "-";
        else printf "%.2f", a / b }'
}
verdict() { # value op target
    awk -v v="$1" -v op="$2" -v t="$3" 'BEGIN {
        if (v == "-" || v == "") { print "not measured"; exit }
        ok = (op == "<=") ? (v + 0 <= t + 0) : (v + 0 >= t + 0);
        print ok ? "met" : "NOT met" }'
}

table() {
    local cpu
    cpu=$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)
    echo "Machine: $(nproc) CPUs ($cpu), Linux $(uname -r), $(date -u +%Y-%m-%dT%H:%MZ);"
    echo "load average $START_LOAD at start, $END_LOAD at end. Loopback 127.0.0.1 only; softub udp MTU $SOFTUB_MTU."
    echo "A busy CPU lost to the host (bench/hiccups, 1 s, mean per CPU): gaps ${HICCUPS:-not measured}."
    echo "softub $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo '?')$([ "$PGO" = 1 ] && echo ' (profile-guided build, bench/pgo.sh)'), UCX $(ucx_info -v 2>/dev/null | awk '/Version/ {print $3; exit}'), libfabric $(fi_info --version 2>/dev/null | awk '/libfabric:/ {print $2; exit}')"
    echo
    echo "| transport | 8 B lat p50 (us) | 8 B lat p99.9 (us) | 64 KiB BW (MB/s) | 1 MiB BW (MB/s) | 8 B rate (Mpps) |"
    echo "|---|---:|---:|---:|---:|---:|"
    local tr
    for tr in raw softub-udp softub-ring ucx-tcp fi-tcp fi-rxd softub-shm softub-shm-tag ucx-shm fi-shm; do
        local label=$tr
        case $tr in
        raw) label="raw UDP ping-pong (floor)" ;;
        softub-udp) label="**softub udp**" ;;
        softub-ring) label="**softub udp, packet ring** (ring=1)" ;;
        ucx-tcp) label="UCX tcp" ;;
        fi-tcp) label="fi_pingpong tcp" ;;
        fi-rxd) label="fi_pingpong udp;ofi_rxd" ;;
        softub-shm) label="**softub shm**" ;;
        softub-shm-tag) label="**softub shm, tagged** (--tagged)" ;;
        ucx-shm) label="UCX shm (posix,cma)" ;;
        fi-shm) label="fi_pingpong shm" ;;
        esac
        echo "| $label | $(get "$tr" p50) | $(get "$tr" p999) | $(get "$tr" bw64) | $(get "$tr" bw1m) | $(get "$tr" rate) |"
    done
    echo
    echo "Latency is half a round trip (softub send_lat, UCX tag_lat, raw ping-pong; * = fi_pingpong's"
    echo "average, it has no percentiles). Bandwidth: softub write_bw, UCX tag_bw (MiB/s converted"
    echo "to MB/s). Rate: softub write_bw 8 B with post lists of 32, UCX tag_bw 8 B. The tagged"
    echo "row is softub send_lat and send_bw --tagged: tagged sends, as UCX's tag_lat and tag_bw."
    echo "A sample spanning one of the host's gaps is late by it: with r gaps/s per CPU, a ping-pong"
    echo "of round trip d has about 2 r d of its samples hit, so p99.9 shows the gaps once 2 r d"
    echo "passes 0.1 % (at 400/s: round trips above 1.25 us). ucx_perftest's percentiles cover only"
    echo "its last 2 048 iterations (the 4th largest of them is its p99.9): against UCX, softub's"
    echo "p99.9 is taken over its own last 2 048 (udp $(get softub-udp p999w), packet ring $(get softub-ring p999w), shm $(get softub-shm p999w) us)."
    echo "Each figure is the median of $ROUNDS round(s); the rounds' values of the targets' figures:"
    local f
    for f in "raw p50" "softub-udp p50" "softub-ring p50" "ucx-tcp p50" "softub-udp bw1m" \
        "softub-ring bw1m" "ucx-tcp bw1m" "softub-udp rate" "softub-shm p50" "ucx-shm p50" "softub-shm bw1m" "ucx-shm bw1m"; do
        # shellcheck disable=SC2086 # two words: transport, metric
        echo "- ${f/ /.}: $(all $f)"
    done
    echo "CPU placement before each transport's runs, per round (bench/c2c: ns per cache-line"
    echo "round trip between the two CPUs; figures are comparable where these are alike):"
    local t
    for t in raw softub-udp softub-ring ucx-tcp fi-tcp fi-rxd softub-shm softub-shm-tag ucx-shm fi-shm; do
        echo "- $t: $(all "$t" c2c)"
    done
    echo "The targets' ratios round by round (each round's runs are minutes apart, not more):"
    echo "- udp p50 / raw: $(per_round softub-udp p50 raw p50)"
    echo "- udp p50 / UCX tcp: $(per_round softub-udp p50 ucx-tcp p50)"
    echo "- udp 1 MiB / UCX tcp: $(per_round softub-udp bw1m ucx-tcp bw1m)"
    echo "- udp packet ring p50 / raw: $(per_round softub-ring p50 raw p50)"
    echo "- udp packet ring p50 / UCX tcp: $(per_round softub-ring p50 ucx-tcp p50)"
    echo "- shm p50 / UCX shm: $(per_round softub-shm p50 ucx-shm p50)"
    echo "- shm 1 MiB / UCX shm: $(per_round softub-shm bw1m ucx-shm bw1m)"
    echo "Where a udp turn goes (bench/turnstamp, one more run each, the client's medians in us:"
    echo "its own work from the answer's arrival to its next send / the send call / the receive"
    echo "call that found the answer / a poll while it waits: a receive call that found nothing"
    echo "and its own work up to the next):"
    echo "- raw UDP: $(all raw turn)"
    echo "- softub udp: $(all softub-udp turn)"
    echo "- softub udp, the same path in instructions (bench/critpath.sh, Release build): ${CRIT:-not measured}"
    echo
    echo "| ratio | value | target | verdict | taken over |"
    echo "|---|---:|---:|---|---|"
    local r basis
    IFS='|' read -r r basis <<<"$(paired softub-udp p50 raw p50)"
    echo "| udp 8 B p50 / raw UDP | $r | <= 1.2 | $(verdict "$r" "<=" 1.2) | $basis |"
    r=$(ratio "$(get softub-udp p999)" "$(get raw p999)")
    echo "| udp 8 B p99.9 / raw UDP | $r | - | - | the medians |"
    IFS='|' read -r r basis <<<"$(paired softub-udp p50 ucx-tcp p50)"
    echo "| udp 8 B p50 / UCX tcp | $r | <= 0.6 | $(verdict "$r" "<=" 0.6) | $basis |"
    IFS='|' read -r r basis <<<"$(paired softub-ring p50 raw p50)"
    echo "| udp packet ring 8 B p50 / raw UDP | $r | <= 1.2 | $(verdict "$r" "<=" 1.2) | $basis |"
    IFS='|' read -r r basis <<<"$(paired softub-ring p50 ucx-tcp p50)"
    echo "| udp packet ring 8 B p50 / UCX tcp | $r | <= 0.6 | $(verdict "$r" "<=" 0.6) | $basis |"
    IFS='|' read -r r basis <<<"$(paired softub-ring bw1m ucx-tcp bw1m)"
    echo "| udp packet ring 1 MiB BW / UCX tcp | $r | >= 1.2 | $(verdict "$r" ">=" 1.2) | $basis |"
    r=$(get softub-ring rate)
    echo "| udp packet ring 8 B rate (Mpps) | $r | >= 2 | $(verdict "$r" ">=" 2) | the median |"
    r=$(ratio "$(get raw p50)" "$(get ucx-tcp p50)")
    echo "| raw UDP p50 / UCX tcp (the least any transport over UDP sockets can reach) | $r | - | - | the medians |"
    r=$(ratio "$(get softub-udp p999w)" "$(get ucx-tcp p999)")
    echo "| udp 8 B p99.9 / UCX tcp | $r | - | - | the medians, each over its last 2 048 iterations |"
    r=$(ratio "$(get softub-udp p50)" "$(get fi-tcp p50)")
    echo "| udp 8 B p50 / fi tcp (avg) | $r | - | - | the medians |"
    r=$(ratio "$(get softub-udp p50)" "$(get fi-rxd p50)")
    echo "| udp 8 B p50 / fi udp;ofi_rxd (avg) | $r | - | - | the medians |"
    r=$(ratio "$(get softub-udp bw64)" "$(get ucx-tcp bw64)")
    echo "| udp 64 KiB BW / UCX tcp | $r | - | - | the medians |"
    IFS='|' read -r r basis <<<"$(paired softub-udp bw1m ucx-tcp bw1m)"
    echo "| udp 1 MiB BW / UCX tcp | $r | >= 1.2 | $(verdict "$r" ">=" 1.2) | $basis |"
    r=$(get softub-udp rate)
    echo "| udp 8 B rate (Mpps, one core, batching) | $r | >= 2 | $(verdict "$r" ">=" 2) | the median |"
    r=$(ratio "$(get softub-udp rate)" "$(get ucx-tcp rate)")
    echo "| udp 8 B rate / UCX tcp | $r | - | - | the medians |"
    IFS='|' read -r r basis <<<"$(paired softub-shm p50 ucx-shm p50)"
    echo "| shm 8 B p50 / UCX shm | $r | <= 1.5 | $(verdict "$r" "<=" 1.5) | $basis |"
    r=$(ratio "$(get softub-shm p999w)" "$(get ucx-shm p999)")
    echo "| shm 8 B p99.9 / UCX shm | $r | - | - | the medians, each over its last 2 048 iterations |"
    r=$(ratio "$(get softub-shm p50)" "$(get fi-shm p50)")
    echo "| shm 8 B p50 / fi shm (avg) | $r | - | - | the medians |"
    r=$(ratio "$(get softub-shm bw64)" "$(get ucx-shm bw64)")
    echo "| shm 64 KiB BW / UCX shm | $r | - | - | the medians |"
    IFS='|' read -r r basis <<<"$(paired softub-shm bw1m ucx-shm bw1m)"
    echo "| shm 1 MiB BW / UCX shm | $r | >= 0.8 | $(verdict "$r" ">=" 0.8) | $basis |"
    r=$(ratio "$(get softub-shm rate)" "$(get ucx-shm rate)")
    echo "| shm 8 B rate / UCX shm | $r | - | - | the medians |"
    r=$(ratio "$(get softub-shm-tag p50)" "$(get ucx-shm p50)")
    echo "| shm tagged 8 B p50 / UCX shm (both tagged) | $r | - | - | the medians |"
    r=$(ratio "$(get softub-shm-tag bw1m)" "$(get ucx-shm bw1m)")
    echo "| shm tagged 1 MiB BW / UCX shm (both tagged) | $r | - | - | the medians |"
}

table | tee "${OUT:-/dev/null}"
