# bench/lib.sh: what the bench scripts share (sourced, not run).

# perf_server LOG WAIT CMD...: starts a softub-perf server (CMD, with -p 0) and reads its
# output until it says which port it listens on (at most WAIT seconds); the rest of its
# output goes to LOG in the background. Sets SRV_PORT ("" if it never said) and SRV_PID.
# Lines that are not the port's (valgrind's "==" ones, say) are skipped. The server is a
# background job writing into a FIFO (bash's `wait` on a process substitution is not
# reliable: tests/tool/perf_cli.sh).
perf_server() {
    local log=$1 wait=$2 fd line fifo
    shift 2
    fifo=$(mktemp -u "${TMPDIR:-/tmp}/softub-srv.XXXXXX")
    mkfifo "$fifo"
    "$@" >"$fifo" 2>&1 &
    SRV_PID=$!
    exec {fd}<"$fifo"
    rm -f "$fifo"
    SRV_PORT=""
    while IFS= read -r -t "$wait" -u "$fd" line; do
        SRV_PORT=$(printf '%s\n' "$line" | sed -n 's/.*waiting on tcp:.*:\([0-9][0-9]*\)$/\1/p')
        [ -n "$SRV_PORT" ] && break
    done
    cat <&"$fd" >"$log" &
    exec {fd}<&-
}

# critpath_build BUILD WHO TARGET...: the Release build with the devices' path marks
# (-DSOFTUB_CRITPATH=ON, which needs valgrind's headers) in BUILD, TARGETs built; WHO names
# the script in its complaint when valgrind is missing. Needs ROOT.
critpath_build() {
    local build=$1 who=$2
    shift 2
    command -v valgrind >/dev/null || { echo "$who: needs valgrind" >&2; exit 1; }
    cmake -S "$ROOT" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSOFTUB_CRITPATH=ON >/dev/null
    cmake --build "$build" --target "$@" >/dev/null
}

# scratch_dir NAME: a directory in WORK, removed when the script exits.
scratch_dir() {
    WORK=$(mktemp -d "/tmp/softub-$1.XXXXXX")
    trap 'rm -rf "$WORK"' EXIT
}

# ---- server/client pairs (compare.sh, sweep.sh) -----------------------------------------
# The caller sets TAG (its name in messages), WORK (outputs), T (seconds per pair) and
# NEXT_PORT (the first port to use), then calls pairs_init.

log() { printf '%s\n' "$*" >&2; }

# pairs_init: no servers yet; at exit the ones left are killed and WORK is removed (KEEP=1
# keeps it).
pairs_init() {
    SERVER_PIDS=()
    trap pairs_cleanup EXIT
}
pairs_cleanup() {
    local p
    for p in "${SERVER_PIDS[@]}"; do
        kill "$p" 2>/dev/null || true
    done
    wait 2>/dev/null || true
    if [ "${KEEP:-0}" = 1 ]; then log "$TAG: outputs kept in $WORK"; else rm -rf "$WORK"; fi
}

# install_pkgs PKG...: Debian packages, as root or through sudo.
install_pkgs() {
    local sudo=()
    if [ "$(id -u)" != 0 ]; then
        if command -v sudo >/dev/null; then sudo=(sudo); else
            log "$TAG: not root and no sudo: cannot install $*"
            return 1
        fi
    fi
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@" >&2 ||
        { "${sudo[@]}" apt-get update >&2 && "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
            apt-get install -y --no-install-recommends "$@" >&2; }
}

# Waits (bounded: 10 s) until something listens on port (tcp or udp).
wait_port() {
    local port=$1 proto=$2 i
    for ((i = 0; i < 200; i++)); do
        if ss -Hln"${proto:0:1}" "sport = :$port" 2>/dev/null | grep -q .; then
            return 0
        fi
        sleep 0.05
    done
    return 1
}

# pair NAME PROTO SERVER_CMD... -- CLIENT_CMD...   (the word PORT is replaced by a fresh port)
# The client's stdout goes to $WORK/NAME.out; returns non-zero if the pair failed.
pair() {
    local name=$1 proto=$2
    shift 2
    local port=$NEXT_PORT
    NEXT_PORT=$((NEXT_PORT + 1))
    local srv=() cli=() in_cli=0 a
    for a in "$@"; do
        if [ "$a" = -- ]; then in_cli=1; continue; fi
        a=${a//PORT/$port}
        if [ $in_cli = 1 ]; then cli+=("$a"); else srv+=("$a"); fi
    done
    timeout "$T" "${srv[@]}" >"$WORK/$name.srv" 2>&1 &
    local spid=$!
    SERVER_PIDS+=("$spid")
    if ! wait_port "$port" "$proto"; then
        log "$TAG: $name: server did not come up"
        kill "$spid" 2>/dev/null || true
        return 1
    fi
    local rc=0
    timeout "$T" "${cli[@]}" >"$WORK/$name.out" 2>"$WORK/$name.err" || rc=$?
    if [ $rc != 0 ]; then
        log "$TAG: $name: client failed ($rc): $(tail -n 2 "$WORK/$name.err" | tr '\n' ' ')"
    fi
    sleep 0.2
    kill "$spid" 2>/dev/null || true
    wait "$spid" 2>/dev/null || true
    return $rc
}

