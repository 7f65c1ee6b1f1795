#!/usr/bin/env bash
# Installs the Debian packages softub needs to build and test, if any are missing.
# Idempotent and quiet when everything is present.
set -euo pipefail

packages=(
  cmake ninja-build pkg-config gcc clang libclang-rt-14-dev clang-format
  libcmocka-dev libssl-dev python3 iproute2 nftables gnuplot-nox valgrind
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "installing: ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
