#!/usr/bin/env bash
# bench/ab.sh: two softub-perf builds side by side, for a change's effect on latency or
# bandwidth. The host moves a ping-pong's p50 by a microsecond or more between minutes
# (docs/benchmarks.md, "Where the host puts the CPUs"), far more than most changes do, so
# the builds run in alternating pairs, the order swapped every pair, and the verdict is how
# often and by how much B came out lower (a latency test's p50) or higher (a bandwidth
# test's average MB/s) within its pair. With bench/libturnstamp.so built, each latency run
# also reports the client's median user / send / receive parts of a turn and its period of
# polling while it waits (a failing receive call and its own work to the next one;
# bench/turnstamp.c).
#
#   bench/ab.sh PERF_A PERF_B [client options...]      default: send_lat -d udp -s 8
# Environment: PAIRS (8), N (iterations per run: 20000 for latency tests, 1000 for
# bandwidth ones), ENV_A / ENV_B (extra environment of each side's runs, e.g.
# ENV_B=SOFTUB_FAST=0 with PERF_B=PERF_A), ARGS_A / ARGS_B (extra softub-perf options of
# each side's server and client, e.g. ARGS_A="--mtu 9000" ARGS_B="--mtu 65000" with one
# binary), TURNSTAMP (the library; empty: none). Loopback only; every run is bounded by
# `timeout`.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib.sh"
[ $# -ge 2 ] || { sed -n '2,17p' "$0" >&2; exit 2; }
A=$1 B=$2
shift 2
[ -x "$A" ] && [ -x "$B" ] || { echo "ab.sh: $A or $B is not an executable" >&2; exit 2; }
OPTS=("$@")
[ ${#OPTS[@]} -gt 0 ] || OPTS=(send_lat -d udp -s 8)
PAIRS=${PAIRS:-8}
TEST=${OPTS[0]}
BW=0
case $TEST in *_bw) BW=1 ;; esac
if [ $BW = 1 ]; then
    N=${N:-1000} TS="" UNIT="MB/s"
else
    N=${N:-20000} TS=${TURNSTAMP-$ROOT/build-bench/bench/libturnstamp.so} UNIT="p50"
fi
[ -f "$TS" ] || TS=""

# One run of PERF with environment ENVS and extra options ARGS (split on blanks): "figure user
# send receive poll" (the figure: a latency line's p50 or a bandwidth line's average MB/s; poll:
# the median failing receive call plus the median own work after one; the last four "-"
# without turnstamp).
run() {
    local perf=$1 envs=$2 args out
    read -r -a args <<<"$3"
    perf_server /dev/null 30 env $envs timeout 120 "$perf" "$TEST" "${args[@]}" \
        --bind 127.0.0.1 -p 0 --timeout 20000
    [ -n "$SRV_PORT" ] || { echo "ab.sh: the server did not start" >&2; return 1; }
    out=$(env $envs ${TS:+LD_PRELOAD=$TS} timeout 120 "$perf" "${OPTS[@]}" "${args[@]}" \
        -n "$N" --timeout 20000 -p "$SRV_PORT" 127.0.0.1 2>&1) ||
        { echo "ab.sh: a run failed" >&2; return 1; }
    wait "$SRV_PID" || true
    printf '%s\n' "$out" | awk '
        $1 ~ /^[0-9]+$/ && NF >= 10 && !p { p = $5 }
        $1 ~ /^[0-9]+$/ && NF == 5 && !p { p = $4 }
        $1 == "turnstamp:" && $2 == "user" { u = $8 }
        $1 == "turnstamp:" && $2 == "send" { s = $8 }
        $1 == "turnstamp:" && $2 == "receive" { r = $8 }
        $1 == "turnstamp:" && $2 == "empty" { e = $8 }
        $1 == "turnstamp:" && $2 == "idle" { i = $8 }
        END { printf "%s %s %s %s %s\n", p, u ? u : "-", s ? s : "-", r ? r : "-", e && i ? e + i : "-" }'
}

echo "ab.sh: A = $A ${ENV_A:-} ${ARGS_A:-}, B = $B ${ENV_B:-} ${ARGS_B:-}; ${OPTS[*]} -n $N, $PAIRS pairs"
printf 'pair  first  %9s  %9s  %8s   (user/send/receive/poll ns: A | B)\n' "A $UNIT" "B $UNIT" "B-A"
res=()
for i in $(seq 1 "$PAIRS"); do
    if [ $((i % 2)) = 1 ]; then
        a=$(run "$A" "${ENV_A:-}" "${ARGS_A:-}") b=$(run "$B" "${ENV_B:-}" "${ARGS_B:-}") first=A
    else
        b=$(run "$B" "${ENV_B:-}" "${ARGS_B:-}") a=$(run "$A" "${ENV_A:-}" "${ARGS_A:-}") first=B
    fi
    read -r pa ua sa ra oa <<<"$a"
    read -r pb ub sb rb ob <<<"$b"
    d=$(awk -v a="$pa" -v b="$pb" 'BEGIN { printf "%+.2f", b - a }')
    printf '%4d  %5s  %9s  %9s  %8s   (%s/%s/%s/%s | %s/%s/%s/%s)\n' \
        "$i" "$first" "$pa" "$pb" "$d" "$ua" "$sa" "$ra" "$oa" "$ub" "$sb" "$rb" "$ob"
    res+=("$d $ua $ub")
done
# The mean difference with its standard error (pairs differ by the host's minute far more
# than by most changes: a mean within two standard errors of 0 is no difference), and the
# same for the user part, which the host moves much less.
printf '%s\n' "${res[@]}" | awk -v bw="$BW" '
    function se(sum, sq, k) { return k > 1 ? sqrt((sq - sum * sum / k) / (k - 1) / k) : 0 }
    { n++; s += $1; q += $1 * $1; if ($1 < 0) lo++; else if ($1 > 0) hi++
      if ($2 != "-" && $3 != "-") { k++; d = ($3 - $2) / 1000; us += d; uq += d * d } }
    END {
        if (bw)
            printf "B higher in %d of %d pairs, lower in %d; mean B-A %+.1f MB/s (standard error %.1f)\n",
                hi, n, lo, s / n, se(s, q, n)
        else
            printf "B lower in %d of %d pairs, higher in %d; mean B-A %+.3f us (standard error %.3f)\n",
                lo, n, hi, s / n, se(s, q, n)
        if (k) printf "user part: mean B-A %+.3f us (standard error %.3f)\n", us / k, se(us, uq, k)
    }'
