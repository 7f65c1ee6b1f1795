# bench/lib.sh: what the bench scripts share (sourced, not run).

# perf_server LOG WAIT CMD...: starts a softub-perf server (CMD, with -p 0) and reads its
# output until it says which port it listens on (at most WAIT seconds); the rest of its
# output goes to LOG in the background. Sets SRV_PORT ("" if it never said) and SRV_PID.
# Lines that are not the port's (valgrind's "==" ones, say) are skipped.
perf_server() {
    local log=$1 wait=$2 fd line
    shift 2
    exec {fd}< <("$@" 2>&1)
    SRV_PID=$!
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
