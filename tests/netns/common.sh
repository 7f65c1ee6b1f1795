# shellcheck shell=bash
# Shared by the namespace test runners (run.sh, run_api.sh, cc_ratelimit.sh); sourced, not run.
# Exit codes: 1 fail, 77 skipped (ctest's SKIP_RETURN_CODE).

skip() {
  echo "SKIP: $*"
  exit 77
}
fail() {
  echo "FAIL: $*"
  exit 1
}

# netns_require PREFIX WHY [TOOL...]: skips unless root, with ip and each TOOL, and able to
# create a network namespace (PREFIX-probe, removed again). WHY: what root is needed for.
netns_require() {
  local prefix=$1 why=$2 tool
  shift 2
  [ "$(id -u)" -eq 0 ] || skip "needs root ($why)"
  for tool in ip "$@"; do
    case $tool in
      nft) command -v nft >/dev/null 2>&1 || skip "no nft (Debian package nftables)" ;;
      ip) command -v ip >/dev/null 2>&1 || skip "no ip command (Debian package iproute2)" ;;
      *) command -v "$tool" >/dev/null 2>&1 || skip "no $tool (Debian package iproute2)" ;;
    esac
  done
  ip netns add "$prefix-probe" 2>/dev/null || skip "cannot create network namespaces here"
  ip netns del "$prefix-probe"
}

# netns_bed_trap TESTBED PREFIX: takes the bed PREFIX down on any exit; INT or TERM exit 1.
netns_bed_trap() {
  netns_tb=$1
  netns_prefix=$2
  trap netns_bed_down EXIT
  trap 'exit 1' INT TERM
}
netns_bed_down() { "$netns_tb" down --prefix "$netns_prefix" >/dev/null 2>&1 || true; }

# netns_link_of NS SPORT DPORT: the link (its number) that host NS (10.77.0.1) routes a UDP
# datagram from SPORT to 10.77.0.2:DPORT onto (the kernel's own multipath L4 hash).
netns_link_of() {
  ip -n "$1" route get 10.77.0.2 from 10.77.0.1 ipproto udp sport "$2" dport "$3" |
    awk '{for (i = 1; i < NF; i++) if ($i == "dev") {sub(/^p/, "", $(i + 1)); print $(i + 1); exit}}'
}

# netns_base_port NS DPORT FIRST LINKS [MIN]: prints the first base port FIRST + 8 j (j < 64)
# whose 8 source ports base..base+7 hash onto all LINKS links, each link taking at least MIN
# of them (default 1); if no base gives every link MIN, the first that covers them all; prints
# nothing if none does. MIN 2 keeps one EV that an adaptive balancer happens to use little
# from being a link's whole share (a 5 % per-link check would then fail by chance).
netns_base_port() {
  local ns=$1 dport=$2 first=$3 links=$4 min=${5:-1} j p b k least cover=""
  local -A count
  for ((j = 0; j < 64; j++)); do
    b=$((first + 8 * j))
    count=()
    for ((p = 0; p < 8; p++)); do
      k=$(netns_link_of "$ns" $((b + p)) "$dport")
      count[$k]=$((${count[$k]:-0} + 1))
    done
    [ "${#count[@]}" -eq "$links" ] || continue
    least=8
    for k in "${!count[@]}"; do ((count[$k] < least)) && least=${count[$k]}; done
    if ((least >= min)); then
      echo "$b"
      return
    fi
    [ -n "$cover" ] || cover=$b
  done
  [ -z "$cover" ] || echo "$cover"
}
