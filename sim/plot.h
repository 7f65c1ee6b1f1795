/*
 * PNG plots through gnuplot (softub-sim --plot DIR): the FCT CDF, the queue
 * occupancy and the throughput over time of the busiest sampled ports. Writes
 * DIR/fct_cdf.dat, DIR/ports.dat and DIR/plot.gp (plain gnuplot, rerunnable by hand), then
 * runs `gnuplot plot.gp` in DIR: fct_cdf.png, queue.png, throughput.png.
 */
#ifndef UB_SIM_PLOT_H
#define UB_SIM_PLOT_H

#include "sim/series.h"
#include "sim/sim.h"

/* Ports drawn in the queue and throughput plots (the largest queues at a sample). */
#define UB_SIM_PLOT_PORTS 6

/*
 * series_csv: the file the series wrote (closed, a path openable from here), s: that series
 * (may be NULL: no time plots). Writes DIR/ports.dat: the busiest ports' rows as data blocks.
 * Returns 0, or UB_EIO if a file cannot be written or gnuplot fails (its exit status is reported on
 * stderr).
 */
int ub_sim_plot(const struct ub_sim *sim, const char *dir, const char *series_csv,
                const struct ub_sim_series *s, const char *title);

#endif
