#!/usr/bin/env bash
# One network-namespace integration test (docs/testbed.md):
#   run.sh spread|loss|pathdown|carrier|rate XFER TESTBED
# Builds a private test bed (2 hosts, 4 equal-cost links each, namespace names unique to
# this run), picks the sender's base port so its 8 UDP source ports cover all 4 links,
# runs XFER (netns_xfer: 20 000 reliable packets, 8 paths) and checks the link counters.
# Exit 0 pass, 1 fail, 77 skipped (not root, no ip, no namespaces, no nft where needed).
set -euo pipefail

case_=${1:?case}
xfer=${2:?netns_xfer binary}
tb=${3:?netns-testbed.sh}
links=4
packets=${SOFTUB_NETNS_PACKETS:-20000}
prefix="sn$$${case_:0:2}"
A="$prefix-h0"
B="$prefix-h1"
dport=47000
# shellcheck source-path=SCRIPTDIR source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

case $case_ in
  loss | pathdown) tools=(nft) ;;
  rate) tools=(tc) ;;
  spread | carrier) tools=() ;;
  *) fail "unknown case $case_" ;;
esac
netns_require "$prefix" "network namespaces, veth, tc, nft" "${tools[@]}"
netns_bed_trap "$tb" "$prefix"

up_opts=(--prefix "$prefix" --hosts 2 --paths "$links")
[ "$case_" = loss ] && up_opts+=(--loss 5)
"$tb" up "${up_opts[@]}" || fail "testbed up"
[ "$case_" = rate ] && "$tb" rate 50mbit --prefix "$prefix" --host 0 --path 2

# Sender base port: ports base..base+7 must hash onto all links (bounded search).
base=$(netns_base_port "$A" "$dport" 20000 "$links" 2)
[ -n "$base" ] || fail "no base port whose 8 source ports cover all $links links"
echo "sender base port $base: EV -> link" \
  "$(for ((p = 0; p < 8; p++)); do
    printf '%d->p%s ' "$p" "$(netns_link_of "$A" $((base + p)) "$dport")"
  done)"

args=(--ns-a "$A" --ns-b "$B" --a "10.77.0.1:$base" --b "10.77.0.2:$dport"
  --packets "$packets" --paths 8 --timeout 25)
# pathdown: link p1 black-holed in the router (nft); carrier: the router's end of p1 set down,
# so host A loses carrier on p1 but its multipath route keeps hashing onto it.
how=""
[ "$case_" = pathdown ] && how=drop
[ "$case_" = carrier ] && how=carrier
[ -z "$how" ] ||
  args+=(--fail-at 30 --fail-cmd "'$tb' path-down --prefix '$prefix' --host 0 --path 1 --how $how")

before=$("$tb" counters --prefix "$prefix" | grep -v '^#')
rc=0
"$xfer" "${args[@]}" || rc=$?
after=$("$tb" counters --prefix "$prefix" | grep -v '^#')
[ "$rc" -eq 77 ] && skip "netns_xfer could not enter the namespaces"

# Per-link bytes during the transfer: host A's tx (data) and host B's rx (data after the router).
echo "link bytes during the transfer (host side of each veth):"
echo "  link  A_tx_bytes  A_tx_pkts  B_rx_bytes  B_rx_pkts  B_tx_bytes(acks)"
declare -a atx apk brx bpk btx
while read -r h k _ tb_ tp rb rp; do
  if [ "$h" = 0 ]; then atx[k]=$tb_; apk[k]=$tp; else brx[k]=$rb; bpk[k]=$rp; btx[k]=$tb_; fi
done <<<"$after"
while read -r h k _ tb_ tp rb rp; do
  if [ "$h" = 0 ]; then
    atx[k]=$((atx[k] - tb_))
    apk[k]=$((apk[k] - tp))
  else
    brx[k]=$((brx[k] - rb))
    bpk[k]=$((bpk[k] - rp))
    btx[k]=$((btx[k] - tb_))
  fi
done <<<"$before"
total=0
for ((k = 0; k < links; k++)); do
  printf '  p%-3d  %10d  %9d  %10d  %9d  %10d\n' "$k" "${atx[k]}" "${apk[k]}" "${brx[k]}" \
    "${bpk[k]}" "${btx[k]}"
  total=$((total + atx[k]))
done
if [ "$case_" = loss ] || [ "$case_" = pathdown ]; then
  echo "router nft drops:"
  ip netns exec "$prefix-r" nft list table inet softub | grep -E 'counter packets [1-9]' |
    sed 's/^[[:space:]]*/  /' || echo "  (none)"
fi
[ "$rc" -eq 0 ] || fail "netns_xfer reported a failure (exit $rc)"

# (a) traffic spread: every link of host A carried at least 5 % of its bytes.
for ((k = 0; k < links; k++)); do
  if [ -n "$how" ] && [ "$k" = 1 ]; then continue; fi
  [ $((atx[k] * 100)) -ge $((total * 5)) ] ||
    fail "link p$k carried ${atx[k]} of $total bytes (< 5 %)"
done
case $case_ in
  loss)
    drops=$(ip netns exec "$prefix-r" nft list chain inet softub path_loss |
      awk '/counter packets/ {for (i = 1; i < NF; i++) if ($i == "packets") s += $(i + 1)} END {print s + 0}')
    [ "$drops" -gt 0 ] || fail "the loss rule dropped nothing"
    echo "loss rule dropped $drops packets"
    ;;
  pathdown)
    drops=$(ip netns exec "$prefix-r" nft list chain inet softub forward_hook | grep down_links |
      awk '/counter packets/ {for (i = 1; i < NF; i++) if ($i == "packets") s += $(i + 1)} END {print s + 0}')
    [ "$drops" -gt 0 ] || fail "the failed path black-holed nothing"
    echo "failed path p1 black-holed $drops packets"
    ;;
  carrier)
    st=$("$tb" counters --prefix "$prefix" | awk '$1 == 0 && $2 == 1 {print $3}')
    echo "host A link p1 operstate after the failure: $st"
    [ "$st" != up ] || fail "p1 still up after the failure"
    ;;
esac
echo "PASS: $case_"
