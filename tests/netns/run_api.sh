#!/usr/bin/env bash
# A network-namespace test through the public API (docs/testbed.md):
#   run_api.sh spread|loss|pathdown|ring API_XFER TESTBED
# Builds a private bed (2 hosts x 4 links), picks the initiator's base port so its 8 UDP
# source ports cover all 4 links, runs api_xfer (8 MiB of WRITEs, read back and compared)
# and checks every link carried traffic. ring: loss with both devices reading small datagrams
# from the packet ring (ring=1: ACKs, responses and READ requests over four veth links).
# Exit 0 pass, 1 fail, 77 skipped (no root, no ip,
# no namespaces, no nft where needed): ctest reports that as skipped, not passed.
set -euo pipefail
case_=${1:?case}
xfer=${2:?api_xfer binary}
tb=${3:?netns-testbed.sh}
links=4
prefix="sa$$${case_:0:2}"
A="$prefix-h0"
dport=47040 # a multiple of 8, like any base
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

case $case_ in
  loss | pathdown | ring) tools=(nft) ;;
  spread) tools=() ;;
  *) fail "unknown case $case_" ;;
esac
netns_require "$prefix" "network namespaces, veth, nft" "${tools[@]}"
netns_bed_trap "$tb" "$prefix"
up_opts=(--prefix "$prefix" --hosts 2 --paths "$links")
[ "$case_" = loss ] || [ "$case_" = ring ] && up_opts+=(--loss 5)
"$tb" up "${up_opts[@]}" >/dev/null || fail "testbed up"

base=$(netns_base_port "$A" "$dport" 21000 "$links" 2)
[ -n "$base" ] || fail "no base port whose 8 source ports cover all $links links"
echo "initiator base port $base: EV -> link" \
  "$(for ((p = 0; p < 8; p++)); do
    printf '%d->p%s ' "$p" "$(netns_link_of "$A" $((base + p)) "$dport")"
  done)"

args=(--ns-a "$A" --ns-b "$prefix-h1" --a "10.77.0.1:$base" --b "10.77.0.2:$dport" --mb 8 --timeout 25)
[ "$case_" = ring ] && args+=(--opts ring=1)
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
