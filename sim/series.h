/*
 * Time series: every `interval` of simulated time, one CSV row per sampled
 * port with its queue occupancy and the throughput it sent since the last
 * sample. Sampling is an ordinary event that only reads state, so a run with
 * series produces the same packets, FCTs and counters as one without; the rows
 * are integers and as deterministic as the run.
 *
 * time_us,port,node,peer,qbytes,hbytes,tx_mbps
 *   qbytes: data queue bytes, hbytes: header/control queue bytes at the
 *   sample; tx_mbps: bits serialized in (time - interval, time] / interval.
 */
#ifndef UB_SIM_SERIES_H
#define UB_SIM_SERIES_H

#include <stdio.h>

#include "sim/sim.h"

struct ub_sim_series;

/*
 * Samples `ports` (indices into sim->ports) every `interval` ps from now on, until every flow
 * has completed (one last row set at that sample), writing to f (not closed here). The series
 * must be freed after the last ub_sim_run, before or after ub_sim_fini.
 */
int ub_sim_series_start(struct ub_sim *sim, FILE *f, uint64_t interval, const uint32_t *ports,
                        uint32_t nports, struct ub_sim_series **out);
void ub_sim_series_free(struct ub_sim_series *s);

/* Samples taken so far, and the largest data queue (bytes) seen at a sample on ports[i]. */
uint64_t ub_sim_series_samples(const struct ub_sim_series *s);
uint64_t ub_sim_series_maxq(const struct ub_sim_series *s, uint32_t i);
/* The sampled ports, in the order given. */
const uint32_t *ub_sim_series_ports(const struct ub_sim_series *s, uint32_t *n);

/*
 * Port selections. "hosts": every switch port facing a host (the last hops, where incasts
 * queue), "all": every switch port, else a comma-separated list of port indices. Returns the
 * count (0 on a bad spec) and a malloc'd array in *out.
 */
uint32_t ub_sim_select_ports(const struct ub_sim *sim, const char *spec, uint32_t **out);

#endif
