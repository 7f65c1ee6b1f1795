/* Output: per-flow FCT CSV, a summary, per-port counters. All integer, all deterministic. */
#ifndef UB_SIM_STATS_H
#define UB_SIM_STATS_H

#include <stdio.h>

#include "sim/sim.h"

struct ub_sim_summary {
    uint32_t flows, done;
    uint64_t min, mean, p50, p99, max;        /* FCT of completed flows, ps */
    uint64_t sd_mean, sd_p50, sd_p99, sd_max; /* slowdown x 1000 (FCT / ideal) */
};

int ub_sim_summarize(const struct ub_sim *sim, struct ub_sim_summary *s);
/* id,src,dst,size,start_us,end_us,fct_us,ideal_us,slowdown; unfinished flows have empty end. */
void ub_sim_write_fct_csv(const struct ub_sim *sim, FILE *f);
void ub_sim_print_summary(const struct ub_sim *sim, const struct ub_sim_summary *s, FILE *f);
/* One line per switch port that saw traffic. */
void ub_sim_write_port_csv(const struct ub_sim *sim, FILE *f);
/* ps as microseconds with six decimals, into buf (at least 32 bytes). */
const char *ub_sim_fmt_us(uint64_t ps, char *buf);

#endif
