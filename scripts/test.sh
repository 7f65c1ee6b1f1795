#!/usr/bin/env bash
# The test command: installs what is missing, builds with the strict warning set
# as errors, and runs the whole suite through ctest.
# Environment: BUILD_DIR (default build), SOFTUB_SANITIZE=ON for ASan+UBSan, CC.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh

build=${BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DSOFTUB_WERROR=ON \
      -DSOFTUB_SANITIZE="${SOFTUB_SANITIZE:-OFF}" >/dev/null
cmake --build "$build"
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" "$@"
