/* Queue occupancy and throughput time series (see series.h). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <softub/errors.h>
#include "sim/series.h"
#include "sim/stats.h"

struct ub_sim_series {
    struct ub_sim_event ev;
    FILE *f;
    uint64_t interval;
    uint64_t samples;
    uint32_t n;
    uint32_t *ports;
    uint64_t *last_tx;
    uint64_t *maxq;
};

static void sample(struct ub_sim *sim, struct ub_sim_event *ev)
{
    struct ub_sim_series *s = UB_SIM_CONTAINER_OF(ev, struct ub_sim_series, ev);
    char b[32];
    const char *t = ub_sim_fmt_us(ub_sim_now(sim), b);
    for (uint32_t i = 0; i < s->n; i++) {
        const struct ub_sim_port *p = &sim->ports[s->ports[i]];
        uint64_t tx = p->st.tx_bytes - s->last_tx[i];
        s->last_tx[i] = p->st.tx_bytes;
        if (p->qbytes > s->maxq[i])
            s->maxq[i] = p->qbytes;
        /* bits / interval in Mbit/s: tx x 8 x 1e12 / interval / 1e6 */
        uint64_t mbps = tx * 8000000 / s->interval;
        fprintf(s->f, "%s,%u,%u,%u,%" PRIu64 ",%" PRIu64 ",%" PRIu64 "\n", t, s->ports[i], p->node,
                p->peer, p->qbytes, p->hbytes, mbps);
    }
    s->samples++;
    if (sim->flows_done < sim->nflows && !sim->stop)
        ub_sim_at(sim, ev, ub_sim_now(sim) + s->interval);
}

int ub_sim_series_start(struct ub_sim *sim, FILE *f, uint64_t interval, const uint32_t *ports,
                        uint32_t nports, struct ub_sim_series **out)
{
    if (!f || !interval || (nports && !ports))
        return UB_EINVAL;
    for (uint32_t i = 0; i < nports; i++)
        if (ports[i] >= sim->nports)
            return UB_EINVAL;
    struct ub_sim_series *s = calloc(1, sizeof(*s));
    if (!s)
        return UB_ENOMEM;
    size_t n = nports ? nports : 1;
    s->ports = malloc(n * sizeof(*s->ports));
    s->last_tx = calloc(n, sizeof(*s->last_tx));
    s->maxq = calloc(n, sizeof(*s->maxq));
    if (!s->ports || !s->last_tx || !s->maxq) {
        ub_sim_series_free(s);
        return UB_ENOMEM;
    }
    if (nports)
        memcpy(s->ports, ports, nports * sizeof(*ports));
    for (uint32_t i = 0; i < nports; i++)
        s->last_tx[i] = sim->ports[ports[i]].st.tx_bytes;
    s->n = nports;
    s->f = f;
    s->interval = interval;
    fprintf(f, "time_us,port,node,peer,qbytes,hbytes,tx_mbps\n");
    ub_sim_event_init(&s->ev, sample);
    ub_sim_at(sim, &s->ev, ub_sim_now(sim) + interval);
    *out = s;
    return 0;
}

void ub_sim_series_free(struct ub_sim_series *s)
{
    if (!s)
        return;
    free(s->ports);
    free(s->last_tx);
    free(s->maxq);
    free(s);
}

uint64_t ub_sim_series_samples(const struct ub_sim_series *s)
{
    return s->samples;
}

uint64_t ub_sim_series_maxq(const struct ub_sim_series *s, uint32_t i)
{
    return i < s->n ? s->maxq[i] : 0;
}

const uint32_t *ub_sim_series_ports(const struct ub_sim_series *s, uint32_t *n)
{
    *n = s->n;
    return s->ports;
}

uint32_t ub_sim_select_ports(const struct ub_sim *sim, const char *spec, uint32_t **out)
{
    uint32_t *v = malloc((sim->nports ? sim->nports : 1) * sizeof(*v));
    uint32_t n = 0;
    *out = NULL;
    if (!v)
        return 0;
    if (!strcmp(spec, "all") || !strcmp(spec, "hosts")) {
        bool hosts = !strcmp(spec, "hosts");
        for (uint32_t i = sim->nhosts; i < sim->nports; i++)
            if (!hosts || sim->ports[i].peer < sim->nhosts)
                v[n++] = i;
    } else {
        const char *c = spec;
        while (*c) {
            char *end;
            unsigned long x = strtoul(c, &end, 10);
            if (end == c || x >= sim->nports || n == sim->nports || (*end && *end != ',')) {
                free(v);
                return 0;
            }
            v[n++] = (uint32_t)x;
            c = *end ? end + 1 : end;
        }
    }
    if (!n) {
        free(v);
        return 0;
    }
    *out = v;
    return n;
}
