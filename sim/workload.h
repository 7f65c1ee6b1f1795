/* Workloads: they add flows to a simulation before ub_sim_start. */
#ifndef UB_SIM_WORKLOAD_H
#define UB_SIM_WORKLOAD_H

#include <stdio.h>

#include "sim/sim.h"

/* Every host sends `size` bytes to another; a random derangement from the sim's seed. */
int ub_sim_wl_permutation(struct ub_sim *sim, uint64_t size, uint64_t start);
/* n senders (the hosts after dst, wrapping) each send `size` bytes to dst. */
int ub_sim_wl_incast(struct ub_sim *sim, uint32_t n, uint32_t dst, uint64_t size, uint64_t start);

/* n receivers (the hosts after src, wrapping) each get `size` bytes from src. */
int ub_sim_wl_outcast(struct ub_sim *sim, uint32_t n, uint32_t src, uint64_t size, uint64_t start);
/* Host i sends `size` bytes to host (i + stride) mod N. */
int ub_sim_wl_shift(struct ub_sim *sim, uint32_t stride, uint64_t size, uint64_t start);
/* Every host sends `size` bytes to every other host at once. */
int ub_sim_wl_alltoall(struct ub_sim *sim, uint64_t size, uint64_t start);
/*
 * Ring allreduce of `size` bytes over all hosts: 2 (N - 1) steps (reduce-scatter, then
 * all-gather); in each, host i sends a chunk of size / N to host i + 1, once the chunk it
 * needs from host i - 1 in the step before has arrived (a flow dependency).
 */
int ub_sim_wl_allreduce(struct ub_sim *sim, uint64_t size, uint64_t start);

/*
 * htsim's connection matrix: "Nodes N", "Connections M", then one line per
 * flow "src->dst [id K] start T size S [prio P]", T in microseconds (decimal
 * fractions kept to the picosecond), S in bytes; '#' lines are comments.
 * Triggers and failures are not supported yet (UB_ENOTSUP). On a parse
 * error, *line gets the offending line number.
 */
int ub_sim_wl_load_cm(struct ub_sim *sim, FILE *f, uint32_t *line);

#endif
