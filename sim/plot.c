/* gnuplot PNGs of a run (see plot.h). */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <softub/errors.h>
#include "sim/plot.h"
#include "sim/stats.h"

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : (x > y);
}

static FILE *open_in(const char *dir, const char *name, char *path, size_t cap)
{
    snprintf(path, cap, "%s/%s", dir, name);
    return fopen(path, "w");
}

/* Sorted FCTs (us) with their cumulative fraction: "fct_us fraction" per line. */
static int write_cdf(const struct ub_sim *sim, const char *dir)
{
    char path[4096];
    FILE *f = open_in(dir, "fct_cdf.dat", path, sizeof(path));
    if (!f)
        return UB_EIO;
    uint64_t *v = malloc((sim->nflows + 1) * sizeof(*v));
    if (!v) {
        fclose(f);
        return UB_ENOMEM;
    }
    uint32_t n = 0;
    for (uint32_t i = 0; i < sim->nflows; i++)
        if (sim->flows[i].end != UB_SIM_NEVER)
            v[n++] = sim->flows[i].end - sim->flows[i].start;
    qsort(v, n, sizeof(*v), cmp_u64);
    char b[32];
    for (uint32_t i = 0; i < n; i++)
        fprintf(f, "%s %u.%06u\n", ub_sim_fmt_us(v[i], b), (i + 1) / n,
                (uint32_t)((uint64_t)(i + 1) * 1000000 / n % 1000000));
    free(v);
    return fclose(f) ? UB_EIO : 0;
}

/* a's port ranks before b's: a larger queue at a sample, then more bytes sent. */
static bool busier(const struct ub_sim *sim, const struct ub_sim_series *s, uint32_t a, uint32_t b)
{
    uint64_t qa = ub_sim_series_maxq(s, a), qb = ub_sim_series_maxq(s, b);
    if (qa != qb)
        return qa > qb;
    uint32_t n;
    const uint32_t *ports = ub_sim_series_ports(s, &n);
    return sim->ports[ports[a]].st.tx_bytes > sim->ports[ports[b]].st.tx_bytes;
}

/* Indices (into the series' ports) of the busiest ports that carried anything, busiest first. */
static uint32_t busiest(const struct ub_sim *sim, const struct ub_sim_series *s, uint32_t *pick)
{
    uint32_t n, k = 0;
    const uint32_t *ports = ub_sim_series_ports(s, &n);
    for (uint32_t i = 0; i < n; i++) {
        if (!ub_sim_series_maxq(s, i) && !sim->ports[ports[i]].st.tx_bytes)
            continue;
        uint32_t j;
        if (k < UB_SIM_PLOT_PORTS)
            j = k++;
        else if (busier(sim, s, i, pick[k - 1]))
            j = k - 1;
        else
            continue;
        while (j > 0 && busier(sim, s, i, pick[j - 1])) {
            pick[j] = pick[j - 1];
            j--;
        }
        pick[j] = i;
    }
    return k;
}

/* Samples averaged in the throughput plot: a packet-quantised rate would fill the plot. */
#define AVG_MAX 256

/*
 * The picked ports' rows of the series, one gnuplot data block each (blocks separated by two
 * blank lines, addressed with `index`): "time_us qbytes tx_mbps tx_mbps_avg", the last the mean
 * over the `avg` samples up to this one.
 */
static int write_port_blocks(const char *dir, const char *series_csv, const uint32_t *ports,
                             uint32_t k, uint32_t avg)
{
    char path[4096];
    FILE *in = fopen(series_csv, "r");
    if (!in)
        return UB_EIO;
    FILE *out = open_in(dir, "ports.dat", path, sizeof(path));
    if (!out) {
        fclose(in);
        return UB_EIO;
    }
    char line[256];
    unsigned long long ring[AVG_MAX];
    for (uint32_t i = 0; i < k; i++) {
        rewind(in);
        fprintf(out, "%s# port %u\n", i ? "\n\n" : "", ports[i]);
        unsigned long long sum = 0;
        uint32_t seen = 0;
        while (fgets(line, sizeof(line), in)) {
            char t[32];
            unsigned port, node, peer;
            unsigned long long q, h, mbps;
            if (sscanf(line, "%31[^,],%u,%u,%u,%llu,%llu,%llu", t, &port, &node, &peer, &q, &h,
                       &mbps) == 7 &&
                port == ports[i]) {
                if (seen >= avg)
                    sum -= ring[seen % avg];
                ring[seen % avg] = mbps;
                sum += mbps;
                seen++;
                fprintf(out, "%s %llu %llu %llu\n", t, q, mbps, sum / (seen < avg ? seen : avg));
            }
        }
    }
    fclose(in);
    return fclose(out) ? UB_EIO : 0;
}

int ub_sim_plot(const struct ub_sim *sim, const char *dir, const char *series_csv,
                const struct ub_sim_series *s, const char *title)
{
    int rc = write_cdf(sim, dir);
    if (rc)
        return rc;
    char path[4096];
    FILE *g = open_in(dir, "plot.gp", path, sizeof(path));
    if (!g)
        return UB_EIO;
    fprintf(g,
            "# softub-sim plots; rerun with: cd %s && gnuplot plot.gp\n"
            "set terminal pngcairo size 1000,600 font 'sans,11'\n"
            "set grid\nset key outside right top\n",
            dir);
    fprintf(g,
            "set output 'fct_cdf.png'\nset title \"%s: flow completion times\"\n"
            "set xlabel 'FCT (us)'\nset ylabel 'fraction of flows'\nset yrange [0:1]\n"
            "plot 'fct_cdf.dat' using 1:2 with steps lw 2 title 'CDF'\n"
            "set yrange [*:*]\n",
            title);
    uint32_t pick[UB_SIM_PLOT_PORTS], picked[UB_SIM_PLOT_PORTS];
    uint32_t k = s ? busiest(sim, s, pick) : 0;
    uint32_t n = 0;
    const uint32_t *ports = s ? ub_sim_series_ports(s, &n) : NULL;
    for (uint32_t i = 0; i < k; i++)
        picked[i] = ports[pick[i]];
    uint64_t samples = s ? ub_sim_series_samples(s) : 0;
    uint32_t avg = samples / 200 > AVG_MAX ? AVG_MAX
                   : samples / 200         ? (uint32_t)(samples / 200)
                                           : 1;
    if (k && series_csv && write_port_blocks(dir, series_csv, picked, k, avg) != 0) {
        fclose(g);
        return UB_EIO;
    }
    if (k && series_csv) {
        char tput[96];
        snprintf(tput, sizeof(tput), "sent (Gbit/s, mean of %u samples)", avg);
        const char *what[2][4] = {
            {"queue.png", "queue occupancy", "data queue (KB)", "($2/1000.0)"},
            {"throughput.png", "throughput", tput, "($4/1000.0)"},
        };
        for (uint32_t w = 0; w < 2; w++) {
            fprintf(g,
                    "set output '%s'\nset title \"%s: %s, the %u busiest of %u sampled "
                    "ports\"\nset xlabel 'time (us)'\nset ylabel '%s'\nplot ",
                    what[w][0], title, what[w][1], k, n, what[w][2]);
            for (uint32_t i = 0; i < k; i++) {
                uint32_t p = picked[i];
                fprintf(g,
                        "%s'ports.dat' index %u using 1:%s with lines lw 2 "
                        "title 'port %u (node %u -> %u)'",
                        i ? ", \\\n     " : "", i, what[w][3], p, sim->ports[p].node,
                        sim->ports[p].peer);
            }
            fprintf(g, "\n");
        }
    }
    if (fclose(g))
        return UB_EIO;
    char cmd[8192];
    snprintf(cmd, sizeof(cmd), "cd '%s' && gnuplot plot.gp", dir);
    int st = system(cmd);
    if (st != 0) {
        fprintf(stderr, "softub-sim: gnuplot failed (status %d): %s\n", st, cmd);
        return UB_EIO;
    }
    return 0;
}
