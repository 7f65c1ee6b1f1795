/*
 * Topology files (softub-sim --topo-file FILE; docs/simulator.md, "Topology files").
 * Plain text, one statement per line, `#` starts a comment:
 *
 *   builtin fattree k 4 [oversub N] [hosts N] [rate R] [delay D]   one of the built-in shapes
 *   builtin leafspine leaves N spines N hosts_per_leaf N ...       (fattree, leafspine,
 *   builtin dumbbell hosts N [bottleneck R] ...                     dumbbell, ring, torus; then
 *   builtin ring x N hosts_per_leaf N ...                           nothing else in the file)
 *   builtin torus x N y N hosts_per_leaf N ...
 *
 *   defaults [rate R] [delay D]            for the links that follow (100G, 1us if never said)
 *   switch NAME [NAME ...]                 switches, numbered in order after all the hosts
 *   host NAME [SWITCH [rate R] [delay D]]  a host, numbered in order; with SWITCH attached
 *   link A B [rate R] [delay D]            a link (two directions) between two nodes
 *
 * Rates: a number with an optional K, M, G or T suffix (decimal, bit/s): 100G, 2500M.
 * Delays: a number with a unit ps, ns, us or ms: 1us, 500ns. Names: up to 63 characters
 * without blanks, each declared once; a name may be used before its declaration. Every host
 * has exactly one link. Ports are numbered in link order, so a file written by
 * ub_sim_topo_write rebuilds the same fabric, port for port.
 */
#ifndef UB_SIM_TOPOFILE_H
#define UB_SIM_TOPOFILE_H

#include <stdio.h>

#include "sim/sim.h"
#include "sim/topo.h"

/*
 * Reads f: a graph is built into sim; a built-in shape is only read, into *cfg with *builtin
 * true, for ub_sim_topo_build (which checks its size first). 0 on success; UB_EINVAL with
 * *line set to the offending line (0: a problem with the whole file, e.g. a host without a
 * link), UB_ERANGE (a graph past the fabric limits), UB_ENOMEM.
 */
int ub_sim_topo_load(struct ub_sim *sim, FILE *f, const struct ub_sim_qcfg *q, uint32_t *line,
                     bool *builtin, struct ub_sim_topo_cfg *cfg);

/* Writes sim's fabric as an explicit graph: hosts h0.., switches s0.. (node - nhosts). */
int ub_sim_topo_write(const struct ub_sim *sim, FILE *f);

#endif
