#!/usr/bin/env bash
# A multipath test network in Linux network namespaces (see docs/testbed.md).
#
#   scripts/netns-testbed.sh up [--hosts N] [--paths K] [--rate RATE] [--loss PCT]
#                               [--hash-seed S] [--prefix NAME]
#   scripts/netns-testbed.sh down|status|counters [--prefix NAME]
#   scripts/netns-testbed.sh loss PCT [--host I --path K]      (PCT 0 clears)
#   scripts/netns-testbed.sh rate RATE|none [--host I --path K]
#   scripts/netns-testbed.sh path-down --host I --path K [--how drop|carrier|link]
#   scripts/netns-testbed.sh path-up   --host I --path K
#   scripts/netns-testbed.sh which-path --host I --to J --sport S --dport D
#
# N host namespaces PREFIX-h0..PREFIX-h<N-1>, each joined to one router namespace
# PREFIX-r by K veth pairs (host side "p<k>", router side "h<i>p<k>"). Host i's address
# is 10.77.0.<i+1>/32 on its loopback; link k of host i is 10.78.<i>.<4k>/30 (router .4k+1,
# host .4k+2). Both the hosts and the router route with K-way equal-cost multipath and
# L4 hashing (fib_multipath_hash_policy=1), so UDP flows that differ only in their source
# port take different links. Only these private prefixes, only inside namespaces made here.
set -euo pipefail

prog=${0##*/}
prefix=softub
hosts=2
paths=4
rate=""
loss=0
hash_seed=1
host=""
path=""
to=""
sport=""
dport=""
how=drop

die() {
  echo "$prog: $*" >&2
  exit 2
}

usage() {
  sed -n '2,19s/^# \{0,1\}//p' "$0"
  exit "${1:-0}"
}

need_uint() { # name value max
  [[ $2 =~ ^[0-9]+$ ]] || die "$1 must be a number, got '$2'"
  ((10#$2 <= $3)) || die "$1 must be at most $3"
}

[ $# -ge 1 ] || usage 2
cmd=$1
shift
case $cmd in -h | --help | help) usage 0 ;; esac
args=()
while [ $# -gt 0 ]; do
  case $1 in
    --prefix) prefix=${2:?}; shift 2 ;;
    --hosts) hosts=${2:?}; shift 2 ;;
    --paths) paths=${2:?}; shift 2 ;;
    --rate) rate=${2:?}; shift 2 ;;
    --loss) loss=${2:?}; shift 2 ;;
    --hash-seed) hash_seed=${2:?}; shift 2 ;;
    --host) host=${2:?}; shift 2 ;;
    --path) path=${2:?}; shift 2 ;;
    --to) to=${2:?}; shift 2 ;;
    --sport) sport=${2:?}; shift 2 ;;
    --dport) dport=${2:?}; shift 2 ;;
    --how) how=${2:?}; shift 2 ;;
    -h | --help) usage 0 ;;
    -*) die "unknown option $1" ;;
    *) args+=("$1"); shift ;;
  esac
done
[[ $prefix =~ ^[A-Za-z0-9_.]{1,20}$ ]] || die "--prefix: 1..20 of [A-Za-z0-9_.]"
need_uint --hosts "$hosts" 16
need_uint --paths "$paths" 16
((hosts >= 2 && paths >= 1)) || die "need --hosts >= 2 and --paths >= 1"
need_uint --hash-seed "$hash_seed" 4294967295

rtr="$prefix-r"
hns() { echo "$prefix-h$1"; }
host_ip() { echo "10.77.0.$(($1 + 1))"; }
rtr_ip() { echo "10.78.$1.$((4 * $2 + 1))"; }
hlink_ip() { echo "10.78.$1.$((4 * $2 + 2))"; }

ns_exists() { ip netns list 2>/dev/null | awk '{print $1}' | grep -qx -- "$1"; }
our_namespaces() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E -- "^$prefix-(r|h[0-9]+)\$" || true; }

# Hosts and paths of the running bed, from the namespaces and links that exist.
discover() {
  ns_exists "$rtr" || die "no testbed '$prefix' (run: $prog up --prefix $prefix)"
  hosts=0
  while ns_exists "$(hns "$hosts")"; do hosts=$((hosts + 1)); done
  paths=0
  while ip -n "$(hns 0)" link show "p$paths" >/dev/null 2>&1; do paths=$((paths + 1)); done
}

need_host_path() {
  if [ -z "$host" ] || [ -z "$path" ]; then die "$cmd needs --host I --path K"; fi
  need_uint --host "$host" $((hosts - 1))
  need_uint --path "$path" $((paths - 1))
}

sysctl_ns() { # ns key value; a missing key (older kernel) is not an error
  ip netns exec "$1" sysctl -qw "$2=$3" >/dev/null 2>&1 || [ ! -e "/proc/sys/${2//.//}" ] ||
    die "sysctl $2=$3 failed in $1"
}

ns_setup() { # ns: loopback up, multipath hashing on L4, no reverse-path filter
  ip netns add "$1"
  ip -n "$1" link set lo up
  sysctl_ns "$1" net.ipv4.fib_multipath_hash_policy 1
  sysctl_ns "$1" net.ipv4.fib_multipath_hash_seed "$hash_seed"
  sysctl_ns "$1" net.ipv4.conf.all.rp_filter 0
  sysctl_ns "$1" net.ipv4.conf.default.rp_filter 0
  sysctl_ns "$1" net.ipv6.conf.all.disable_ipv6 1
}

have_nft() { command -v nft >/dev/null 2>&1; }

# nft: table inet softub in the router. forward_hook drops everything from or to a link in
# the set down_links (path-down --how drop: one element, applied atomically), then jumps to
# path_loss (random loss rules).
nft_table() {
  have_nft || die "nft not found (Debian package: nftables)"
  ip netns exec "$rtr" nft list table inet softub >/dev/null 2>&1 && return 0
  ip netns exec "$rtr" nft -f - <<'EOF'
table inet softub {
  set down_links { type ifname; }
  chain path_loss { }
  chain forward_hook {
    type filter hook forward priority 0; policy accept;
    iifname @down_links counter drop
    oifname @down_links counter drop
    jump path_loss
  }
}
EOF
}

set_rate() { # ns dev rate|none
  ip netns exec "$1" tc qdisc del dev "$2" root >/dev/null 2>&1 || true
  [ "$3" = none ] && return 0
  # Burst: at least 16 KB (ten full frames), latency bound 50 ms of queue.
  ip netns exec "$1" tc qdisc add dev "$2" root tbf rate "$3" burst 16kb latency 50ms
}

set_loss() { # pct [host path]
  need_uint loss "$1" 100
  nft_table
  ip netns exec "$rtr" nft flush chain inet softub path_loss
  [ "$1" -eq 0 ] && return 0
  if [ $# -eq 3 ]; then
    local l="h$2p$3"
    ip netns exec "$rtr" nft add rule inet softub path_loss iifname "$l" numgen random mod 100 '<' "$1" counter drop
    ip netns exec "$rtr" nft add rule inet softub path_loss oifname "$l" numgen random mod 100 '<' "$1" counter drop
  else
    ip netns exec "$rtr" nft add rule inet softub path_loss numgen random mod 100 '<' "$1" counter drop
  fi
}

do_up() {
  if ns_exists "$rtr"; then
    echo "$prog: testbed '$prefix' already up; rebuilding" >&2
    do_down
  fi
  [ -z "$rate" ] || [[ $rate =~ ^[0-9]+([kmg]?bit|[kmg]?bps)$ ]] || die "--rate like 100mbit"
  need_uint --loss "$loss" 100
  # A failure half-way leaves nothing behind.
  trap 'do_down >/dev/null 2>&1' EXIT
  ns_setup "$rtr"
  sysctl_ns "$rtr" net.ipv4.ip_forward 1
  local i k r
  for ((i = 0; i < hosts; i++)); do
    local h
    h=$(hns "$i")
    ns_setup "$h"
    ip -n "$h" addr add "$(host_ip "$i")/32" dev lo
    local hop=() rhop=()
    for ((k = 0; k < paths; k++)); do
      # Made inside the namespaces: no name ever exists in the caller's namespace.
      ip -n "$h" link add "p$k" type veth peer name "h${i}p$k" netns "$rtr"
      ip -n "$h" addr add "$(hlink_ip "$i" "$k")/30" dev "p$k"
      ip -n "$rtr" addr add "$(rtr_ip "$i" "$k")/30" dev "h${i}p$k"
      ip -n "$h" link set "p$k" up
      ip -n "$rtr" link set "h${i}p$k" up
      hop+=(nexthop via "$(rtr_ip "$i" "$k")" dev "p$k" weight 1)
      rhop+=(nexthop via "$(hlink_ip "$i" "$k")" dev "h${i}p$k" weight 1)
      if [ -n "$rate" ]; then
        set_rate "$h" "p$k" "$rate"
        set_rate "$rtr" "h${i}p$k" "$rate"
      fi
    done
    ip -n "$h" route add 10.77.0.0/24 src "$(host_ip "$i")" "${hop[@]}"
    ip -n "$rtr" route add "$(host_ip "$i")/32" "${rhop[@]}"
  done
  if have_nft; then
    nft_table
    [ "$loss" -eq 0 ] || set_loss "$loss"
  elif [ "$loss" -ne 0 ]; then
    die "--loss needs nft (Debian package: nftables)"
  fi
  # Every host must route to every other (and, when ping is installed, reach it: bounded).
  for ((i = 0; i < hosts; i++)); do
    for ((r = 0; r < hosts; r++)); do
      [ "$i" -eq "$r" ] && continue
      ip -n "$(hns "$i")" route get "$(host_ip "$r")" from "$(host_ip "$i")" >/dev/null ||
        die "host $i has no route to host $r"
      if ! command -v ping >/dev/null 2>&1 || [ "$loss" -ne 0 ]; then continue; fi
      local ok=0 try
      for try in 1 2 3 4 5; do
        if ip netns exec "$(hns "$i")" ping -c1 -W1 -I "$(host_ip "$i")" "$(host_ip "$r")" \
          >/dev/null 2>&1; then
          ok=1
          break
        fi
        [ "$try" -lt 5 ] && sleep 0.2
      done
      [ "$ok" -eq 1 ] || die "host $i cannot reach host $r"
    done
  done
  trap - EXIT
  local what="$hosts hosts x $paths paths${rate:+, $rate per path}"
  [ "$loss" -eq 0 ] || what="$what, loss $loss %"
  echo "testbed '$prefix': $what"
  for ((i = 0; i < hosts; i++)); do
    echo "  host $i: namespace $(hns "$i")  address $(host_ip "$i")  links p0..p$((paths - 1))"
  done
  echo "  router: namespace $rtr  links h<i>p<k>"
}

do_down() {
  local ns n=0
  for ns in $(our_namespaces); do
    # Deleting a namespace deletes its veths (and their peers) and its nft tables.
    ip netns del "$ns" 2>/dev/null || true
    n=$((n + 1))
  done
  [ "$n" -eq 0 ] || echo "testbed '$prefix': removed $n namespaces"
}

stat_of() { # ns dev counter
  ip netns exec "$1" cat "/sys/class/net/$2/statistics/$3"
}

do_counters() {
  discover
  local i k h
  echo "# host path state tx_bytes tx_packets rx_bytes rx_packets (host side of each link)"
  for ((i = 0; i < hosts; i++)); do
    h=$(hns "$i")
    for ((k = 0; k < paths; k++)); do
      local st
      st=$(ip netns exec "$h" cat "/sys/class/net/p$k/operstate")
      echo "$i $k $st $(stat_of "$h" "p$k" tx_bytes) $(stat_of "$h" "p$k" tx_packets)" \
        "$(stat_of "$h" "p$k" rx_bytes) $(stat_of "$h" "p$k" rx_packets)"
    done
  done
}

do_status() {
  if ! ns_exists "$rtr"; then
    echo "testbed '$prefix': down"
    return 0
  fi
  discover
  echo "testbed '$prefix': up, $hosts hosts x $paths paths"
  local i
  for ((i = 0; i < hosts; i++)); do
    echo "  host $i: namespace $(hns "$i")  address $(host_ip "$i")"
  done
  echo "  routes of host 0:"
  ip -n "$(hns 0)" route show 10.77.0.0/24 | sed 's/^/    /'
  echo "  qdiscs (router side):"
  ip netns exec "$rtr" tc qdisc show | awk '$2 == "tbf" {print "    " $0}'
  if have_nft && ip netns exec "$rtr" nft list table inet softub >/dev/null 2>&1; then
    echo "  nft (router):"
    ip netns exec "$rtr" nft list table inet softub | sed 's/^/    /'
  fi
  do_counters
}

do_path() { # down|up
  # Quick (a test times the failure): no full discovery, one check of the link.
  if [ -z "$host" ] || [ -z "$path" ]; then die "$cmd needs --host I --path K"; fi
  [[ $host =~ ^[0-9]+$ && $path =~ ^[0-9]+$ ]] || die "--host and --path are numbers"
  local h l
  h=$(hns "$host")
  l="h${host}p$path"
  ip -n "$rtr" link show "$l" >/dev/null 2>&1 || die "no link $l in testbed '$prefix'"
  if [ "$1" = up ]; then
    ip -n "$h" link set "p$path" up
    ip -n "$rtr" link set "$l" up
    if have_nft; then
      ip netns exec "$rtr" nft delete element inet softub down_links "{ \"$l\" }" \
        >/dev/null 2>&1 || true
    fi
    return 0
  fi
  case $how in
    # Black hole the sender's routing cannot see: both directions dropped in the router.
    drop)
      have_nft || die "--how drop needs nft (Debian package: nftables)"
      ip netns exec "$rtr" nft add element inet softub down_links "{ \"$l\" }"
      ;;
    # Router end down: the host loses carrier but keeps its route (a black hole too).
    carrier) ip -n "$rtr" link set "$l" down ;;
    # Host end down: the kernel drops the nexthop and rehashes onto the others.
    link) ip -n "$h" link set "p$path" down ;;
    *) die "--how drop|carrier|link" ;;
  esac
}

do_which_path() {
  discover
  if [ -z "$host" ] || [ -z "$to" ] || [ -z "$sport" ] || [ -z "$dport" ]; then
    die "which-path needs --host I --to J --sport S --dport D"
  fi
  need_uint --host "$host" $((hosts - 1))
  need_uint --to "$to" $((hosts - 1))
  need_uint --sport "$sport" 65535
  need_uint --dport "$dport" 65535
  ip -n "$(hns "$host")" route get "$(host_ip "$to")" from "$(host_ip "$host")" \
    ipproto udp sport "$sport" dport "$dport" | awk '{for (i = 1; i < NF; i++) if ($i == "dev") {sub(/^p/, "", $(i + 1)); print $(i + 1); exit}}'
}

[ "$(id -u)" -eq 0 ] || [ "$cmd" = down ] || [ "$cmd" = status ] ||
  die "needs root (or CAP_NET_ADMIN and CAP_SYS_ADMIN)"
command -v ip >/dev/null 2>&1 || die "ip not found (Debian package: iproute2)"

case $cmd in
  up) do_up ;;
  down) do_down ;;
  status) do_status ;;
  counters) do_counters ;;
  loss)
    [ ${#args[@]} -eq 1 ] || die "loss PCT [--host I --path K]"
    discover
    if [ -n "$host$path" ]; then
      need_host_path
      set_loss "${args[0]}" "$host" "$path"
    else
      set_loss "${args[0]}"
    fi
    ;;
  rate)
    [ ${#args[@]} -eq 1 ] || die "rate RATE|none [--host I --path K]"
    [ "${args[0]}" = none ] || [[ ${args[0]} =~ ^[0-9]+([kmg]?bit|[kmg]?bps)$ ]] ||
      die "rate like 100mbit, or none"
    discover
    if [ -n "$host$path" ]; then
      need_host_path
      set_rate "$(hns "$host")" "p$path" "${args[0]}"
      set_rate "$rtr" "h${host}p$path" "${args[0]}"
    else
      for ((i = 0; i < hosts; i++)); do
        for ((k = 0; k < paths; k++)); do
          set_rate "$(hns "$i")" "p$k" "${args[0]}"
          set_rate "$rtr" "h${i}p$k" "${args[0]}"
        done
      done
    fi
    ;;
  path-down) do_path down ;;
  path-up) do_path up ;;
  which-path) do_which_path ;;
  *) die "unknown command '$cmd' (up, down, status, counters, loss, rate, path-down, path-up, which-path)" ;;
esac
