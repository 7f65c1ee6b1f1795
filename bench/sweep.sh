#!/usr/bin/env bash
# bench/sweep.sh: softub-perf and UCX's ucx_perftest side by side over a range of message
# sizes, in one run, over loopback (127.0.0.1) only: the half round trip of a message
# (softub send_lat, UCX tag_lat: p50) and the bandwidth of a stream (softub write_bw, UCX
# tag_bw), over shared memory (UCX posix,cma) and over udp (UCX tcp). compare.sh judges
# the targets at 8 B, 64 KiB and 1 MiB; this shows the shape in between, where protocol
# switches (packets, rendezvous, single copy) sit. Prints two markdown tables with the
# softub/UCX ratios and, with gnuplot, draws lat.png and bw.png into PLOT_DIR.
#
#   bench/sweep.sh                      8 B .. 4 MiB, shm and udp (three to five minutes)
#   SIZES="4096 65536" DEVICES=shm bench/sweep.sh
# Environment: BUILD_DIR (build-bench), PGO (1: softub-perf from bench/pgo.sh), SIZES,
# DEVICES (shm udp), LAT_N (5000) and BW_N (200000) iterations at most (fewer for large
# sizes: about 256 MiB a latency run, 4 GiB a bandwidth run; a short bandwidth run of small
# messages measures mostly its start), SOFTUB_MTU (udp, 9000), PERF_OPTS (more softub-perf
# client options, split on spaces: "--cma-min 16K" compares single copy's threshold),
# RUN_TIMEOUT (seconds per pair, 90), OUT (also write the tables there), PLOT_DIR
# (/tmp/softub-sweep), KEEP=1 (keep the tools' outputs). Installs ucx-utils and gnuplot-nox
# when missing (as root, or through sudo). Every run is bounded; servers are killed on exit.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib.sh"
TAG=sweep
BUILD=${BUILD_DIR:-$ROOT/build-bench}
SIZES=${SIZES:-8 64 512 4096 16384 65536 262144 1048576 4194304}
DEVICES=${DEVICES:-shm udp}
LAT_N=${LAT_N:-5000}
BW_N=${BW_N:-200000}
SOFTUB_MTU=${SOFTUB_MTU:-9000}
T=${RUN_TIMEOUT:-90}
OUT=${OUT:-}
PLOT_DIR=${PLOT_DIR:-/tmp/softub-sweep}
HOST=127.0.0.1
WORK=$(mktemp -d /tmp/softub-sweep.XXXXXX)
NEXT_PORT=$((22000 + ($$ % 2000) * 10))
pairs_init

need=()
command -v ucx_perftest >/dev/null || need+=(ucx-utils)
command -v gnuplot >/dev/null || need+=(gnuplot-nox)
command -v ss >/dev/null || need+=(iproute2)
if [ "${#need[@]}" -gt 0 ]; then
    log "sweep: installing ${need[*]}"
    install_pkgs "${need[@]}" || log "sweep: continuing without ${need[*]}"
fi
command -v ucx_perftest >/dev/null || { log "sweep: needs ucx_perftest"; exit 1; }

cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" --target softub-perf >/dev/null
PERF=$BUILD/softub-perf
if [ "${PGO:-1}" = 1 ]; then
    PERF=$(BUILD_DIR="$ROOT/build-pgo" bash "$ROOT/bench/pgo.sh")
fi

# Iterations for size s: at most max, at least 100, about budget bytes in all.
iters() { awk -v s="$1" -v max="$2" -v b="$3" 'BEGIN { n = int(b / s); if (n > max) n = max;
    if (n < 100) n = 100; print n }'; }
# ucx_perftest -f's one line: column 2 (latency, the -R percentile) or 5 (MiB/s).
ucx_col() { awk -v c="$2" '/^ *[0-9]+ +[0-9.]+ +[0-9.]+/ {l = $0} END { if (l != "") { split(l, f, " "); print f[c] } }' "$1"; }

declare -A R # R[series.metric.size]
for dev in $DEVICES; do
    tls=tcp
    opts=(-d "$dev")
    if [ "$dev" = shm ]; then tls="posix,cma,self"; else opts+=(--mtu "$SOFTUB_MTU"); fi
    U=(env "UCX_TLS=$tls" UCX_NET_DEVICES=lo UCX_WARN_UNUSED_ENV_VARS=n ucx_perftest)
    for s in $SIZES; do
        ln=$(iters "$s" "$LAT_N" $((256 << 20)))
        bn=$(iters "$s" "$BW_N" $((4 << 30)))
        depth=()
        if [ "$s" -ge 262144 ]; then depth=(-t 32); fi # as compare.sh's 1 MiB runs
        log "sweep: $dev $s B"
        S=(--bind "$HOST" -p PORT --timeout 10000)
        C=(-p PORT --timeout 10000 "${opts[@]}" -s "$s" ${PERF_OPTS:-})
        if pair "s-$dev-lat-$s" tcp "$PERF" send_lat "${S[@]}" -- "$PERF" send_lat "${C[@]}" -n "$ln" "$HOST"; then
            R[softub-$dev.lat.$s]=$(awk '/^ *[0-9]/ {print $5; exit}' "$WORK/s-$dev-lat-$s.out")
        fi
        if pair "s-$dev-bw-$s" tcp "$PERF" write_bw "${S[@]}" -- "$PERF" write_bw "${C[@]}" -n "$bn" "${depth[@]}" "$HOST"; then
            R[softub-$dev.bw.$s]=$(awk '/^ *[0-9]/ {print $4; exit}' "$WORK/s-$dev-bw-$s.out")
        fi
        if pair "u-$dev-lat-$s" tcp "${U[@]}" -p PORT -- "${U[@]}" -p PORT -t tag_lat -s "$s" -n "$ln" -R 50 -f "$HOST"; then
            R[ucx-$dev.lat.$s]=$(ucx_col "$WORK/u-$dev-lat-$s.out" 2)
        fi
        if pair "u-$dev-bw-$s" tcp "${U[@]}" -p PORT -- "${U[@]}" -p PORT -t tag_bw -s "$s" -n "$bn" -f "$HOST"; then
            R[ucx-$dev.bw.$s]=$(awk -v v="$(ucx_col "$WORK/u-$dev-bw-$s.out" 5)" 'BEGIN { if (v != "") printf "%.1f", v * 1.048576 }')
        fi
    done
done

val() { printf '%s' "${R[$1]:--}"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || b + 0 == 0) print "-"; else printf "%.2f", a / b }'; }
human() { awk -v s="$1" 'BEGIN { if (s >= 1048576) printf "%g MiB", s / 1048576;
    else if (s >= 1024) printf "%g KiB", s / 1024; else printf "%d B", s }'; }
peer() { if [ "$1" = shm ]; then echo "UCX shm"; else echo "UCX tcp"; fi; }

# table METRIC TITLE UNIT
table() {
    local head="| size |" rule="|---:|" dev s row
    for dev in $DEVICES; do
        head+=" softub $dev | $(peer "$dev") | ratio |"
        rule+="---:|---:|---:|"
    done
    echo "$2 ($3; ratio: softub / UCX)"
    echo
    echo "$head"
    echo "$rule"
    for s in $SIZES; do
        row="| $(human "$s") |"
        for dev in $DEVICES; do
            a=$(val "softub-$dev.$1.$s") b=$(val "ucx-$dev.$1.$s")
            row+=" $a | $b | $(ratio "$a" "$b") |"
        done
        echo "$row"
    done
    echo
}

report() {
    local cpu
    cpu=$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)
    echo "Machine: $(nproc) CPUs ($cpu), Linux $(uname -r), $(date -u +%Y-%m-%dT%H:%MZ); loopback only."
    echo "softub $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?') ($([ "${PGO:-1}" = 1 ] && echo profile-guided || echo Release)${PERF_OPTS:+, softub-perf $PERF_OPTS}), UCX $(ucx_info -v 2>/dev/null | sed -n 's/^# Version //p' | head -1)"
    echo
    table lat "Half round trip of a message, p50: softub send_lat, UCX tag_lat" us
    table bw "Bandwidth: softub write_bw, UCX tag_bw" "MB/s"
}
if [ -n "$OUT" ]; then report | tee "$OUT"; else report; fi

# ---- plots --------------------------------------------------------------------------------
command -v gnuplot >/dev/null || exit 0
mkdir -p "$PLOT_DIR"
for m in lat bw; do
    for s in $SIZES; do
        line="$s"
        for dev in $DEVICES; do
            line+=" $(val "softub-$dev.$m.$s") $(val "ucx-$dev.$m.$s")"
        done
        echo "$line"
    done | sed 's/ - / NaN /g; s/ -$/ NaN/' >"$PLOT_DIR/$m.dat"
done
{
    echo "set terminal pngcairo size 1000,600"
    echo "set logscale xy; set grid; set key left top; set datafile missing 'NaN'"
    echo "set xlabel 'message size (bytes)'"
    for m in lat bw; do
        if [ $m = lat ]; then
            echo "set output '$PLOT_DIR/lat.png'; set ylabel 'half round trip, p50 (us)'"
        else
            echo "set output '$PLOT_DIR/bw.png'; set ylabel 'bandwidth (MB/s)'"
        fi
        plot="plot" col=2
        for dev in $DEVICES; do
            plot+=" '$PLOT_DIR/$m.dat' using 1:$col with linespoints title 'softub $dev',"
            plot+=" '$PLOT_DIR/$m.dat' using 1:$((col + 1)) with linespoints dashtype 2 title '$(peer "$dev")',"
            col=$((col + 2))
        done
        echo "${plot%,}"
    done
} >"$PLOT_DIR/plot.gp"
gnuplot "$PLOT_DIR/plot.gp" && log "sweep: plots in $PLOT_DIR (lat.png, bw.png; plot.gp redraws them)"
