#!/usr/bin/env bash
# A network-namespace test through the public API (docs/testbed.md):
#   run_api.sh spread|loss|pathdown API_XFER TESTBED
# Builds a private bed (2 hosts x 4 links), picks the initiator's base port so its 8 UDP
# source ports cover all 4 links, runs api_xfer (8 MiB of WRITEs, read back and compared)
# and checks every link carried traffic. Exit 0 pass, 1 fail, 77 skipped (no root, no ip,
# no namespaces, no nft where needed): ctest reports that as skipped, not passed.
set -euo pipefail
case_=${1:?case}
xfer=${2:?api_xfer binary}
tb=${3:?netns-testbed.sh}
links=4
prefix="sa$$${case_:0:2}"
A="$prefix-h0"
dport=47040 # a multiple of 8, like any base

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || skip "needs root (network namespaces, veth, nft)"
command -v ip >/dev/null 2>&1 || skip "no ip command (Debian package iproute2)"
ip netns add "$prefix-probe" 2>/dev/null || skip "cannot create network namespaces here"
ip netns del "$prefix-probe"
case $case_ in
  loss | pathdown) command -v nft >/dev/null 2>&1 || skip "no nft (Debian package nftables)" ;;
  spread) ;;
  *) fail "unknown case $case_" ;;
esac
cleanup() { "$tb" down --prefix "$prefix" >/dev/null 2>&1 || true; }
trap cleanup EXIT
trap 'exit 1' INT TERM
up_opts=(--prefix "$prefix" --hosts 2 --paths "$links")
[ "$case_" = loss ] && up_opts+=(--loss 5)
"$tb" up "${up_opts[@]}" >/dev/null || fail "testbed up"

link_of() {
  ip -n "$A" route get 10.77.0.2 from 10.77.0.1 ipproto udp sport "$1" dport "$dport" |
    awk '{for (i = 1; i < NF; i++) if ($i == "dev") {sub(/^p/, "", $(i + 1)); print $(i + 1); exit}}'
}
base=""
for ((j = 0; j < 64; j++)); do
  b=$((21000 + 8 * j))
  declare -A seen=()
  for ((p = 0; p < 8; p++)); do seen[$(link_of $((b + p)))]=1; done
  if [ "${#seen[@]}" -eq "$links" ]; then base=$b; break; fi
  unset seen
done
[ -n "$base" ] || fail "no base port whose 8 source ports cover all $links links"

args=(--ns-a "$A" --ns-b "$prefix-h1" --a "10.77.0.1:$base" --b "10.77.0.2:$dport" --mb 8 --timeout 25)
[ "$case_" = pathdown ] &&
  args+=(--fail-at 30 --fail-cmd "'$tb' path-down --prefix '$prefix' --host 0 --path 1 --how drop")
before=$("$tb" counters --prefix "$prefix" | awk '$1 == 0 {print $4}')
rc=0
"$xfer" "${args[@]}" || rc=$?
after=$("$tb" counters --prefix "$prefix" | awk '$1 == 0 {print $4}')
[ "$rc" -eq 77 ] && skip "api_xfer could not enter the namespaces"
[ "$rc" -eq 0 ] || fail "api_xfer reported a failure (exit $rc)"
mapfile -t b4 <<<"$before"
mapfile -t af <<<"$after"
total=0
for ((k = 0; k < links; k++)); do total=$((total + af[k] - b4[k])); done
for ((k = 0; k < links; k++)); do
  bytes=$((af[k] - b4[k]))
  echo "link p$k: $bytes bytes from host 0"
  [ "$case_" = pathdown ] && [ "$k" = 1 ] && continue
  [ $((bytes * 100)) -ge $((total * 5)) ] || fail "link p$k carried $bytes of $total bytes (< 5 %)"
done
echo "PASS: $case_"
