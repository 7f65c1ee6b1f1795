#!/usr/bin/env bash
# The main job: builds softub and runs its demonstration on embedded defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake -S . -B build -G Ninja >/dev/null
cmake --build build >/dev/null
exec build/softub-info --selftest "$@"
