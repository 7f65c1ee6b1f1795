/* Topology builders: each produces a link list and hands it to ub_sim_build. */
#ifndef UB_SIM_TOPO_H
#define UB_SIM_TOPO_H

#include "sim/sim.h"

enum ub_sim_topo_kind {
    UB_SIM_TOPO_FATTREE,   /* 3-tier k-ary fat tree: k^3/4 hosts at oversub 1 */
    UB_SIM_TOPO_LEAFSPINE, /* 2 tiers: every leaf to every spine */
    UB_SIM_TOPO_DUMBBELL,  /* hosts on two switches joined by one bottleneck link */
    UB_SIM_TOPO_RING,      /* x switches in a ring, hosts_per_leaf hosts each */
    UB_SIM_TOPO_TORUS,     /* x by y switches, each joined to its 4 wrap-around neighbours */
    UB_SIM_TOPO_FILE,      /* a graph from a topology file (sim/topofile.h) */
};

struct ub_sim_topo_cfg {
    enum ub_sim_topo_kind kind;
    uint32_t k;       /* fat tree arity (even); 0: the smallest that fits `hosts` */
    uint32_t oversub; /* fat tree: hosts per edge switch = oversub x k/2 (default 1) */
    uint32_t hosts;   /* fat tree: first `hosts` hosts only (0: all); dumbbell: per side */
    uint32_t leaves, spines, hosts_per_leaf; /* leaf-spine; ring and torus: hosts per switch */
    uint32_t x, y;                           /* ring (x) and torus (x by y) dimensions */
    uint64_t rate;                           /* bit/s of every link (default 100 Gb/s) */
    uint64_t delay;                          /* ps per link (default 1 us) */
    uint64_t bottleneck_rate;                /* dumbbell's middle link (default `rate`) */
};

int ub_sim_topo_build(struct ub_sim *sim, const struct ub_sim_topo_cfg *cfg,
                      const struct ub_sim_qcfg *q);
const char *ub_sim_topo_name(enum ub_sim_topo_kind kind);

#endif
