#!/bin/sh
# Goodput against loss rate for PDS's retransmission modes; prints the Markdown table that
# docs/pds.md shows. Usage: scripts/pds_goodput.sh [packets per cell] [seed]
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$here/build-bench}
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --target pds_goodput >/dev/null
exec "$build/bench/pds_goodput" "${1:-20000}" "${2:-1}"
