#include <stdbool.h>
#include <stdlib.h>

#include <softub/errors.h>
#include "core/compiler.h"
#include "core/grow.h"
#include "sim/topo.h"

struct links {
    struct ub_sim_link_spec *v;
    uint32_t n, cap;
};

static int add(struct links *l, uint32_t a, uint32_t b, uint64_t rate, uint64_t delay)
{
    if (l->n == l->cap) {
        struct ub_sim_link_spec *v = ub__grow(l->v, &l->cap, sizeof(*v), 1024);
        if (!v)
            return UB_ENOMEM;
        l->v = v;
    }
    l->v[l->n++] = (struct ub_sim_link_spec){.a = a, .b = b, .rate = rate, .delay = delay};
    return 0;
}

/* Whether a shape of these sizes stays within the simulator's limits: computed in 64 bits
 * (the parameters come from a command line or a file) before a single link is generated. */
static bool fits(uint64_t hosts, uint64_t switches, uint64_t links)
{
    return hosts + switches <= UB_SIM_MAX_NODES && links <= UB_SIM_MAX_LINKS;
}

/* Switch numbering: edges pod by pod, then aggregations pod by pod, then cores. */
static int fattree(const struct ub_sim_topo_cfg *c, struct links *l, uint32_t *nh, uint32_t *ns)
{
    uint64_t os = c->oversub ? c->oversub : 1;
    uint32_t k = c->k;
    if (!k) {
        for (k = 2; (uint64_t)k * k * k / 4 * os < c->hosts; k += 2)
            ;
    }
    if (k < 2 || k % 2 || k > 256)
        return UB_EINVAL;
    uint32_t half = k / 2, edges = k * half, aggs = k * half, cores = half * half;
    uint64_t hpe = os * half, full = edges * hpe;
    uint32_t H = c->hosts && c->hosts < full ? c->hosts : (uint32_t)UB_MIN(full, UINT32_MAX);
    if (!fits(H, (uint64_t)edges + aggs + cores, H + 2ull * k * half * half))
        return UB_ERANGE;
    uint32_t E0 = H, A0 = H + edges, C0 = H + edges + aggs;
    int rc = 0;
    for (uint32_t h = 0; h < H && !rc; h++)
        rc = add(l, h, E0 + (uint32_t)(h / hpe), c->rate, c->delay);
    for (uint32_t p = 0; p < k && !rc; p++)
        for (uint32_t e = 0; e < half && !rc; e++)
            for (uint32_t a = 0; a < half && !rc; a++)
                rc = add(l, E0 + p * half + e, A0 + p * half + a, c->rate, c->delay);
    for (uint32_t p = 0; p < k && !rc; p++)
        for (uint32_t a = 0; a < half && !rc; a++)
            for (uint32_t j = 0; j < half && !rc; j++)
                rc = add(l, A0 + p * half + a, C0 + a * half + j, c->rate, c->delay);
    *nh = H;
    *ns = edges + aggs + cores;
    return rc;
}

static int leafspine(const struct ub_sim_topo_cfg *c, struct links *l, uint32_t *nh, uint32_t *ns)
{
    uint32_t L = c->leaves, S = c->spines, hpl = c->hosts_per_leaf;
    if (!L || !S || !hpl)
        return UB_EINVAL;
    if (!fits((uint64_t)L * hpl, (uint64_t)L + S, (uint64_t)L * hpl + (uint64_t)L * S))
        return UB_ERANGE;
    uint32_t H = L * hpl;
    int rc = 0;
    for (uint32_t h = 0; h < H && !rc; h++)
        rc = add(l, h, H + h / hpl, c->rate, c->delay);
    for (uint32_t i = 0; i < L && !rc; i++)
        for (uint32_t s = 0; s < S && !rc; s++)
            rc = add(l, H + i, H + L + s, c->rate, c->delay);
    *nh = H;
    *ns = L + S;
    return rc;
}

/* Hosts 0..n-1 on the left switch, n..2n-1 on the right. */
static int dumbbell(const struct ub_sim_topo_cfg *c, struct links *l, uint32_t *nh, uint32_t *ns)
{
    uint32_t n = c->hosts ? c->hosts : 1;
    if (!fits(2ull * n, 2, 2ull * n + 1))
        return UB_ERANGE;
    uint32_t H = 2 * n;
    int rc = 0;
    for (uint32_t h = 0; h < H && !rc; h++)
        rc = add(l, h, H + (h < n ? 0u : 1u), c->rate, c->delay);
    if (!rc)
        rc = add(l, H, H + 1, c->bottleneck_rate ? c->bottleneck_rate : c->rate, c->delay);
    *nh = H;
    *ns = 2;
    return rc;
}

/* Hosts first (hpl per switch, switch by switch), then switch i at node H + i; the switches
 * have links more among themselves. */
static int hosts_on_switches(const struct ub_sim_topo_cfg *c, struct links *l, uint64_t ns,
                             uint64_t more, uint32_t *nh)
{
    uint64_t hpl = c->hosts_per_leaf ? c->hosts_per_leaf : 1;
    if (!fits(ns * hpl, ns, ns * hpl + more))
        return UB_ERANGE;
    uint32_t H = (uint32_t)(ns * hpl);
    int rc = 0;
    for (uint32_t h = 0; h < H && !rc; h++)
        rc = add(l, h, H + (uint32_t)(h / hpl), c->rate, c->delay);
    *nh = H;
    return rc;
}

/* Switch i links to i + 1 (mod x): x >= 3. */
static int ring(const struct ub_sim_topo_cfg *c, struct links *l, uint32_t *nh, uint32_t *ns)
{
    uint32_t X = c->x;
    if (X < 3)
        return UB_EINVAL;
    int rc = hosts_on_switches(c, l, X, X, nh);
    for (uint32_t i = 0; i < X && !rc; i++)
        rc = add(l, *nh + i, *nh + (i + 1) % X, c->rate, c->delay);
    *ns = X;
    return rc;
}

/* Switch (i, j) = i + j * x links to (i + 1, j) and (i, j + 1), wrapping: x, y >= 3. */
static int torus(const struct ub_sim_topo_cfg *c, struct links *l, uint32_t *nh, uint32_t *ns)
{
    uint32_t X = c->x, Y = c->y;
    if (X < 3 || Y < 3)
        return UB_EINVAL;
    int rc = hosts_on_switches(c, l, (uint64_t)X * Y, 2ull * X * Y, nh);
    uint32_t H = *nh;
    for (uint32_t j = 0; j < Y && !rc; j++)
        for (uint32_t i = 0; i < X && !rc; i++) {
            rc = add(l, H + i + j * X, H + (i + 1) % X + j * X, c->rate, c->delay);
            if (!rc)
                rc = add(l, H + i + j * X, H + i + ((j + 1) % Y) * X, c->rate, c->delay);
        }
    *ns = X * Y;
    return rc;
}

int ub_sim_topo_build(struct ub_sim *sim, const struct ub_sim_topo_cfg *cfg,
                      const struct ub_sim_qcfg *q)
{
    struct ub_sim_topo_cfg c = *cfg;
    if (!c.rate)
        c.rate = 100000000000ULL;
    if (!c.delay)
        c.delay = UB_SIM_PS_PER_US;
    struct links l = {0};
    uint32_t nh = 0, ns = 0;
    int rc;
    switch (c.kind) {
    case UB_SIM_TOPO_FATTREE:
        rc = fattree(&c, &l, &nh, &ns);
        break;
    case UB_SIM_TOPO_LEAFSPINE:
        rc = leafspine(&c, &l, &nh, &ns);
        break;
    case UB_SIM_TOPO_DUMBBELL:
        rc = dumbbell(&c, &l, &nh, &ns);
        break;
    case UB_SIM_TOPO_RING:
        rc = ring(&c, &l, &nh, &ns);
        break;
    case UB_SIM_TOPO_TORUS:
        rc = torus(&c, &l, &nh, &ns);
        break;
    default:
        rc = UB_EINVAL;
    }
    if (!rc)
        rc = ub_sim_build(sim, nh, ns, l.v, l.n, q);
    free(l.v);
    return rc;
}

const char *ub_sim_topo_name(enum ub_sim_topo_kind kind)
{
    switch (kind) {
    case UB_SIM_TOPO_FATTREE:
        return "fattree";
    case UB_SIM_TOPO_LEAFSPINE:
        return "leafspine";
    case UB_SIM_TOPO_DUMBBELL:
        return "dumbbell";
    case UB_SIM_TOPO_RING:
        return "ring";
    case UB_SIM_TOPO_TORUS:
        return "torus";
    case UB_SIM_TOPO_FILE:
        return "file";
    }
    return "?";
}
