# Shared by the htsim validation scenarios (sourced, not run).
# usage of a scenario: sim/scenarios/NAME.sh [ref|softub] [more softub-sim options]
#   ref     the reference transport (default)
#   softub  the full softub engine in every host (PDS with NSCC + REPS), headers-only
#           buffers (--virtual-payload: identical results, a quarter of the memory)
# SOFTUB_SIM names the binary (default build/sim/softub-sim).
# Fabric settings are softub-sim's defaults, which are htsim's (DESIGN.md section 5):
# 100 Gb/s, 1 us links, 4 KiB MTU, queue 1 BDP with trimming, ECN 0.2/0.8 BDP,
# min RTO 15 us + 6 queue drains.
SIM=${SOFTUB_SIM:-build/sim/softub-sim}
TP=${1:-ref}
[ $# -gt 0 ] && shift
case "$TP" in
ref) TPARGS="--transport ref" ;;
softub) TPARGS="--transport softub --virtual-payload" ;;
*)
    echo "usage: $0 [ref|softub] [softub-sim options]" >&2
    exit 2
    ;;
esac
run() {
    # shellcheck disable=SC2086
    exec "$SIM" $TPARGS --quiet "$@"
}
