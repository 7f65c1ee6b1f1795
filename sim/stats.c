#include <inttypes.h>
#include <stdlib.h>

#include <softub/errors.h>
#include "sim/stats.h"

const char *ub_sim_fmt_us(uint64_t ps, char *buf)
{
    snprintf(buf, 32, "%" PRIu64 ".%06" PRIu64, ps / UB_SIM_PS_PER_US, ps % UB_SIM_PS_PER_US);
    return buf;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : (x > y);
}

/* Nearest rank: the smallest value with at least pct percent of the samples at or below it. */
static uint64_t pctl(const uint64_t *v, uint32_t n, uint32_t pct)
{
    uint64_t rank = ((uint64_t)n * pct + 99) / 100;
    return v[rank ? rank - 1 : 0];
}

int ub_sim_summarize(const struct ub_sim *sim, struct ub_sim_summary *s)
{
    *s = (struct ub_sim_summary){.flows = sim->nflows};
    uint64_t *fct = malloc((sim->nflows + 1) * sizeof(*fct));
    uint64_t *sd = malloc((sim->nflows + 1) * sizeof(*sd));
    if (!fct || !sd) {
        free(fct);
        free(sd);
        return UB_ENOMEM;
    }
    uint32_t n = 0;
    uint64_t sum = 0, sdsum = 0;
    for (uint32_t i = 0; i < sim->nflows; i++) {
        const struct ub_sim_flow *f = &sim->flows[i];
        if (f->end == UB_SIM_NEVER)
            continue;
        fct[n] = f->end - f->start;
        sd[n] = f->ideal ? fct[n] * 1000 / f->ideal : 0;
        sum += fct[n];
        sdsum += sd[n];
        n++;
    }
    s->done = n;
    if (n) {
        qsort(fct, n, sizeof(*fct), cmp_u64);
        qsort(sd, n, sizeof(*sd), cmp_u64);
        s->min = fct[0];
        s->mean = sum / n;
        s->p50 = pctl(fct, n, 50);
        s->p99 = pctl(fct, n, 99);
        s->max = fct[n - 1];
        s->sd_mean = sdsum / n;
        s->sd_p50 = pctl(sd, n, 50);
        s->sd_p99 = pctl(sd, n, 99);
        s->sd_max = sd[n - 1];
    }
    free(fct);
    free(sd);
    return 0;
}

void ub_sim_write_fct_csv(const struct ub_sim *sim, FILE *f)
{
    char a[32], b[32], c[32], d[32];
    fprintf(f, "id,src,dst,size,start_us,end_us,fct_us,ideal_us,slowdown\n");
    for (uint32_t i = 0; i < sim->nflows; i++) {
        const struct ub_sim_flow *fl = &sim->flows[i];
        if (fl->end == UB_SIM_NEVER) {
            fprintf(f, "%" PRIu32 ",%" PRIu32 ",%" PRIu32 ",%" PRIu64 ",%s,,,%s,\n", fl->id,
                    fl->src, fl->dst, fl->size, ub_sim_fmt_us(fl->start, a),
                    ub_sim_fmt_us(fl->ideal, d));
            continue;
        }
        uint64_t fct = fl->end - fl->start;
        uint64_t sd = fl->ideal ? fct * 10000 / fl->ideal : 0;
        fprintf(f,
                "%" PRIu32 ",%" PRIu32 ",%" PRIu32 ",%" PRIu64 ",%s,%s,%s,%s,%" PRIu64 ".%04" PRIu64
                "\n",
                fl->id, fl->src, fl->dst, fl->size, ub_sim_fmt_us(fl->start, a),
                ub_sim_fmt_us(fl->end, b), ub_sim_fmt_us(fct, c), ub_sim_fmt_us(fl->ideal, d),
                sd / 10000, sd % 10000);
    }
}

void ub_sim_print_summary(const struct ub_sim *sim, const struct ub_sim_summary *s, FILE *f)
{
    char a[32], b[32], c[32], d[32], e[32];
    const struct ub_sim_counters *k = &sim->ctr;
    uint64_t maxq = 0;
    for (uint32_t i = 0; i < sim->nports; i++)
        if (sim->ports[i].st.max_qbytes > maxq)
            maxq = sim->ports[i].st.max_qbytes;
    fprintf(f, "flows %" PRIu32 " completed %" PRIu32 "\n", s->flows, s->done);
    fprintf(f, "fct_us min %s mean %s p50 %s p99 %s max %s\n", ub_sim_fmt_us(s->min, a),
            ub_sim_fmt_us(s->mean, b), ub_sim_fmt_us(s->p50, c), ub_sim_fmt_us(s->p99, d),
            ub_sim_fmt_us(s->max, e));
    fprintf(f,
            "slowdown mean %" PRIu64 ".%03" PRIu64 " p50 %" PRIu64 ".%03" PRIu64 " p99 %" PRIu64
            ".%03" PRIu64 " max %" PRIu64 ".%03" PRIu64 "\n",
            s->sd_mean / 1000, s->sd_mean % 1000, s->sd_p50 / 1000, s->sd_p50 % 1000,
            s->sd_p99 / 1000, s->sd_p99 % 1000, s->sd_max / 1000, s->sd_max % 1000);
    fprintf(f,
            "packets injected %" PRIu64 " delivered %" PRIu64 " (trimmed %" PRIu64
            ") in_network %" PRIu64 "\n",
            k->injected, k->delivered, k->delivered_trimmed, ub_sim_in_network(sim));
    fprintf(f,
            "drops queue %" PRIu64 " failed_link %" PRIu64 " corrupt %" PRIu64 " no_route %" PRIu64
            "\n",
            k->drops, k->fail_drops, k->corrupt_drops, k->noroute_drops);
    fprintf(f, "trims %" PRIu64 " ecn_marks %" PRIu64 " max_queue_bytes %" PRIu64 "\n", k->trims,
            k->marks, maxq);
    fprintf(f, "sim_time_us %s events %" PRIu64 "\n", ub_sim_fmt_us(ub_sim_now(sim), a),
            sim->evq.fired);
}

void ub_sim_write_port_csv(const struct ub_sim *sim, FILE *f)
{
    fprintf(f, "port,node,peer,enq,deq,tx_bytes,drops,trims,marks,fail_drops,corrupt,"
               "max_qbytes,queued\n");
    for (uint32_t i = 0; i < sim->nports; i++) {
        const struct ub_sim_port *p = &sim->ports[i];
        const struct ub_sim_port_stats *st = &p->st;
        if (!st->enq && !st->drops && !st->fail_drops)
            continue;
        fprintf(f,
                "%" PRIu32 ",%" PRIu32 ",%" PRIu32 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
                ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu32 "\n",
                i, p->node, p->peer, st->enq, st->deq, st->tx_bytes, st->drops, st->trims,
                st->marks, st->fail_drops, st->corrupt, st->max_qbytes, p->q.n + p->hq.n);
    }
}
