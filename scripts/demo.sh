#!/usr/bin/env bash
# The main job: builds softub and runs softub-demo, two processes over loopback UDP and
# then shared memory, every operation verified, with a latency/bandwidth table.
#   scripts/demo.sh [--quick] [--device udp|shm|both] [-v]
#   scripts/demo.sh --selftest [...]     the engine self-test over loop links (softub-info)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake -S . -B build -G Ninja >/dev/null
cmake --build build >/dev/null
if [ "${1:-}" = --selftest ]; then
  shift
  exec build/softub-info --selftest "$@"
fi
exec build/softub-demo "$@"
