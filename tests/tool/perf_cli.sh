#!/usr/bin/env bash
# softub-perf over loopback, every subcommand, a few iterations each: checks that server and
# client agree and that the output has the documented columns (no timing assertions).
#   tests/tool/perf_cli.sh PATH/TO/softub-perf
set -euo pipefail

PERF=${1:?usage: perf_cli.sh PATH/TO/softub-perf}
WORK=$(mktemp -d /tmp/softub-perf-cli.XXXXXX)
SRV=""
# shellcheck disable=SC2317 # called through the trap
cleanup() {
    if [ -n "$SRV" ]; then kill "$SRV" 2>/dev/null || true; fi
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

fails=0

# start_server LOGFILE ARGS...: starts softub-perf ARGS on a port the kernel picks (-p 0) and
# sets SRV (its pid) and PORT from the line it prints once it listens. The server's output
# goes on to LOGFILE. A fixed port could be taken by any socket on the machine. The server is
# a background job writing into a FIFO, not a process substitution: bash 5.2's `wait` on a
# process substitution's pid now and then returns a status that is not the process's (about
# once in a thousand waits here), which failed a run that had passed.
start_server() {
    local log=$1 line fd fifo=$WORK/server.fifo
    shift
    rm -f "$fifo"
    mkfifo "$fifo"
    timeout 30 "$PERF" "$@" --bind 127.0.0.1 -p 0 --timeout "${SRV_TIMEOUT:-5000}" >"$fifo" 2>&1 &
    SRV=$!
    exec {fd}<"$fifo"
    rm -f "$fifo"
    PORT=""
    if IFS= read -r -t 10 -u "$fd" line; then
        echo "$line" >"$log"
        PORT=$(printf '%s\n' "$line" | sed -n 's/.*waiting on tcp:.*:\([0-9][0-9]*\)$/\1/p')
    fi
    cat <&"$fd" >>"$log" &
    LOGGER=$! # ends with the server's output: wait for it before reading the log
    exec {fd}<&-
    [ -n "$PORT" ]
}

# run NAME COLUMNS SERVER_ARGS... -- CLIENT_ARGS...
run() {
    local name=$1 cols=$2
    shift 2
    local srv=() cli=() in_cli=0 a
    for a in "$@"; do
        if [ "$a" = -- ]; then in_cli=1; continue; fi
        if [ $in_cli = 1 ]; then cli+=("$a"); else srv+=("$a"); fi
    done
    local rc=0
    : >"$WORK/$name.out"
    : >"$WORK/$name.err"
    if start_server "$WORK/$name.srv" "${srv[@]}"; then
        timeout 30 "$PERF" "${cli[@]}" -p "$PORT" --timeout 5000 127.0.0.1 \
            >"$WORK/$name.out" 2>"$WORK/$name.err" || rc=$?
    else
        rc=99 # the server never said where it listens
    fi
    wait "$SRV" || rc=$((rc ? rc : 100))
    wait "$LOGGER" || true
    SRV=""
    local lines bad
    lines=$(awk '/^ *[0-9]/' "$WORK/$name.out" | wc -l)
    bad=$(awk -v c="$cols" '/^ *[0-9]/ {
            if (NF != c) { n++; next }
            for (i = 1; i <= NF; i++) if ($i !~ /^[0-9]+(\.[0-9]+)?$/) { n++; next } }
          END { print n + 0 }' "$WORK/$name.out")
    # The transport footer of each side: what it sent, received and repaired (both sent), and
    # why it repaired and which congestion marks it saw.
    local foot re='^ # packets sent [1-9][0-9]*, received [1-9][0-9]*, retransmitted [0-9]+, dropped by the receive socket [0-9]+$'
    local re2='^ # retransmitted after RTOs [0-9]+ \(RTOs [0-9]+, [0-9]+ of them spurious\), fast [0-9]+, on NACKs [0-9]+, as probes [0-9]+; CE marks received [0-9]+, echoed to us [0-9]+$'
    foot=$(($(grep -cE "$re" "$WORK/$name.out") + $(grep -cE "$re" "$WORK/$name.srv")))
    foot=$((foot + $(grep -cE "$re2" "$WORK/$name.out") + $(grep -cE "$re2" "$WORK/$name.srv")))
    if [ "$rc" != 0 ] || [ "$lines" -lt 1 ] || [ "$bad" != 0 ] || [ "$foot" != 4 ]; then
        echo "FAIL $name (rc $rc, $lines result lines, $bad malformed, $foot footers)"
        sed 's/^/  out: /' "$WORK/$name.out"
        sed 's/^/  err: /' "$WORK/$name.err" "$WORK/$name.srv"
        fails=$((fails + 1))
    else
        echo "ok   $name"
    fi
}

for t in read_lat write_lat send_lat atomic_lat; do
    run "$t" 10 "$t" -- "$t" -n 20 --warmup 2
done
for t in read_bw write_bw send_bw atomic_bw; do
    run "$t" 5 "$t" -- "$t" -n 50 -s 4096
done
run sweep_lat 10 write_lat -- write_lat -a --max-size 64 -n 5 --warmup 1
run shm_send_lat 10 send_lat -- send_lat -d shm -n 20
run shm_write_bw 5 write_bw -- write_bw -d shm -n 50 -q 2 -l 4
run event_send_lat 10 send_lat -- send_lat -e -n 20
# one receive buffer: polled, it goes back at the next poll, before the next message can come
run one_buffer_send_lat 10 send_lat -- send_lat -r 1 -n 50
run shm_one_buffer 10 send_lat -- send_lat -d shm -r 1 -n 50
run bidir 5 write_bw -- write_bw -b -n 50 -s 1024
run no_inline 10 write_lat -- write_lat -I 0 -n 20
run spin 5 send_bw -- send_bw --spin -n 50 -s 1024
run duration 5 read_bw -- read_bw -D 1 -s 1024
# -Q: a record every 16 requests (post lists of 3 in a window of 40: some posts taken in part),
# every request counted once; a duration run's unsignalled tail is covered too
run cq_mod 5 write_bw -- write_bw -d shm -n 500 -Q 16 -t 40 -l 3
if ! awk '/^ *[0-9]/ { found = 1; if ($2 != 500) bad = 1 } END { exit !found || bad }' "$WORK/cq_mod.out"; then
    echo "FAIL cq_mod: not 500 requests counted"
    fails=$((fails + 1))
fi
run cq_mod_duration 5 write_bw -- write_bw -D 1 -s 64 -Q 100
# --tagged: tagged sends into tag-matching receive queues (the server takes it from the client)
run tagged_lat 10 send_lat -- send_lat --tagged -n 20
run shm_tagged_bw 5 send_bw -- send_bw -d shm --tagged -n 50 -s 1048576
# The udp device's system calls in both sides' footers of a udp run, none over shm.
re_udp='^ # udp system calls: sends [1-9][0-9]* \(GSO runs [0-9]+ of [0-9]+ packets\), receives [1-9][0-9]* \(GRO runs [0-9]+ of [0-9]+ packets\); ACKs sent [0-9]+$'
if [ "$(cat "$WORK/write_bw.out" "$WORK/write_bw.srv" | grep -cE "$re_udp")" != 2 ] ||
    grep -q 'udp system calls' "$WORK/shm_send_lat.out" "$WORK/shm_send_lat.srv"; then
    echo "FAIL udp_footer"
    fails=$((fails + 1))
else
    echo "ok   udp_footer"
fi
# -c: each side on CPUs of its own choosing (here: all it may use, as a list with ranges)
CPUS=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
run cpu 10 send_lat -c "$CPUS" -- send_lat -c "$CPUS" -n 10

# json_check NAME PATTERN TEST [OPTS...]: a server of TEST with OPTS and a --json client of
# it; the client's output must match PATTERN (grep).
json_check() {
    local name=$1 pattern=$2 json=""
    shift 2
    if start_server "$WORK/$name.srv" "$@"; then
        json=$(timeout 30 "$PERF" "$@" --json -n 10 -p "$PORT" --timeout 5000 127.0.0.1 || true)
    fi
    wait "$SRV" || true
    SRV=""
    if printf '%s' "$json" | grep -q "$pattern"; then
        echo "ok   $name"
    else
        echo "FAIL $name: $json"
        fails=$((fails + 1))
    fi
}

# --json: one object with a results array
json_check json '^{"tool":"softub-perf".*"results":\[{"bytes":8,.*"p99_99":[0-9.]*}\],"cpu_parted":[0-9]*,"transport":{"tx_pkts":[1-9][0-9]*,"rx_pkts":[0-9]*,"retransmits":[0-9]*,"rx_drops":[0-9]*,"retx_rto":[0-9]*,"retx_fast":[0-9]*,"retx_nack":[0-9]*,"retx_probe":[0-9]*,"rto_fired":[0-9]*,"rto_undone":[0-9]*,"rx_ce":[0-9]*,"acks_ecn_rx":[0-9]*,"tx_link":0,"rx_link":0,"udp_tx_calls":[1-9][0-9]*,"udp_gso_runs":[0-9]*,"udp_gso_pkts":[0-9]*,"udp_rx_calls":[1-9][0-9]*,"udp_gro_runs":[0-9]*,"udp_gro_pkts":[0-9]*,"acks_tx":[0-9]*,"cma_min":0,"cma_reqs":0,"cma_fallbacks":0,"cma_done":0,"cma_bytes":0}}$' atomic_lat
# over shm the packets go on the link path (no transport contexts), and the JSON says so
json_check json_shm '"retransmits":0,.*"tx_link":[1-9][0-9]*,"rx_link":[1-9][0-9]*,"udp_tx_calls":0,.*"acks_tx":0,"cma_min":[1-9][0-9]*,"cma_reqs":0,' send_lat -d shm
# --window: the last N iterations' statistics beside the whole run's
json_check json_window '"iterations":10,.*"window":{"iterations":4,"t_median":[0-9.]*,"p99":[0-9.]*,"p99_9":[0-9.]*}}\],' send_lat --window 4
# --huge: 4 MiB operations on buffers of transparent huge pages (a hint the kernel may ignore),
# each a single copy where the kernel lets the server reach the client
json_check json_huge '"huge":true,.*"results":\[{"bytes":4194304,.*"cma_min":[1-9][0-9]*,"cma_reqs":[0-9]*,"cma_fallbacks":0,' write_bw -d shm -s 4194304 --huge
# --cma-min: single copy from the size given (both sides), or never
json_check json_cma_min '"results":\[{"bytes":65536,.*"cma_min":65536,"cma_reqs":[0-9]*,"cma_fallbacks":0,' write_bw -d shm -s 65536 --cma-min 64K
json_check json_cma_off '"results":\[{"bytes":65536,.*"cma_min":0,"cma_reqs":0,' write_bw -d shm -s 65536 --cma-min off
json_check json_cq_mod '"post_list":1,"cq_mod":4,.*"results":\[{"bytes":8,"iterations":10,' write_bw -s 8 -Q 4
json_check json_tagged '"huge":false,"tagged":true,.*"results":\[{"bytes":8,"iterations":10,' send_bw -s 8 --tagged

# Bad values are refused before any connection, naming the option: --cma-min takes a size
# (not 0) or off; a size or count is never negative, saturated or wrapped by its suffix.
bad_value() {
    local name=$1 opt=$2 val=$3 err
    shift 3
    err=$(timeout 10 "$PERF" "$@" "$opt" "$val" -p 1 127.0.0.1 2>&1 >/dev/null) || true
    if [[ $err == "softub-perf: bad value for option $opt: $val"* ]]; then
        echo "ok   $name $opt $val"
    else
        echo "FAIL $name: $opt $val: $err"
        fails=$((fails + 1))
    fi
}
for bad in 0 4G1 some; do bad_value cma_min_bad --cma-min "$bad" write_bw -d shm; done
bad_value size_bad -s -1 write_lat
bad_value size_bad -s 17592186044416M write_lat
bad_value iters_bad -n 99999999999999999999 write_lat

# a mismatched test is refused by the server, and the client says so
if ! start_server "$WORK/mm.srv" read_lat; then
    echo "FAIL mismatch: the server did not start"
    fails=$((fails + 1))
elif timeout 30 "$PERF" write_lat -n 5 -p "$PORT" --timeout 5000 127.0.0.1 >/dev/null 2>"$WORK/mm.err"; then
    echo "FAIL mismatch: the client succeeded"
    fails=$((fails + 1))
elif grep -q "server runs read_lat" "$WORK/mm.err"; then
    echo "ok   mismatch"
else
    echo "FAIL mismatch: $(cat "$WORK/mm.err")"
    fails=$((fails + 1))
fi
wait "$SRV" || true
SRV=""

# A client stopped in the middle of a run (its control connection still open): the server
# gives up once nothing has come for its --timeout (here 400 ms; it looks at its packet count
# an eighth of that apart), not later.
dead_peer() {
    local cli t0 t1 ticks=0 i
    if ! SRV_TIMEOUT=400 start_server "$WORK/dead.srv" write_bw; then
        echo "FAIL dead_peer: the server did not start"
        fails=$((fails + 1))
        return
    fi
    "$PERF" write_bw -D 20 -s 1024 -p "$PORT" 127.0.0.1 >/dev/null 2>&1 & # ends by itself
    cli=$!
    # In the run once the client has used 0.2 s of CPU (it busy-polls; bounded: 20 s).
    for ((i = 0; i < 2000 && ticks < 20; i++)); do
        ticks=$(awk '{ print $14 }' "/proc/$cli/stat" 2>/dev/null || echo 0)
        read -r -t 0.01 <> <(:) || true
    done
    t0=$(date +%s%N)
    kill -STOP "$cli" 2>/dev/null || true
    local rc=0
    wait "$SRV" || rc=$?
    t1=$(date +%s%N)
    kill -9 "$cli" 2>/dev/null || true
    wait "$cli" 2>/dev/null || true
    wait "$LOGGER" || true
    SRV=""
    local ms=$(((t1 - t0) / 1000000))
    if [ "$rc" != 0 ] && grep -q "nothing received for 400 ms: giving up" "$WORK/dead.srv" &&
        [ "$ms" -lt 5000 ]; then
        echo "ok   dead_peer (gave up after $ms ms)"
    else
        echo "FAIL dead_peer: rc $rc after $ms ms; $(cat "$WORK/dead.srv")"
        fails=$((fails + 1))
    fi
}
dead_peer

if "$PERF" send_lat -c 0-x 127.0.0.1 >/dev/null 2>&1; then
    echo "FAIL: a malformed CPU list was accepted"
    fails=$((fails + 1))
fi

if "$PERF" write_bw --tagged 127.0.0.1 -p 1 >/dev/null 2>&1; then
    echo "FAIL: --tagged was accepted for a test without sends"
    fails=$((fails + 1))
fi

if "$PERF" bogus_test >/dev/null 2>&1; then
    echo "FAIL: an unknown test was accepted"
    fails=$((fails + 1))
fi

[ "$fails" = 0 ] && echo "all softub-perf checks passed"
exit "$fails"
