/*
 * Switches and routing. Every host hangs off one switch (its leaf). For each
 * leaf a BFS over the switch graph gives hop distances; a switch's next hops
 * toward a leaf are the neighbours one hop closer. Next-hop sets repeat a lot
 * (in a fat tree an aggregation switch has k/2 + 1 distinct ones), so each
 * switch keeps a deduplicated list of groups and a [switch][leaf] table of
 * group indices: 2.6 MB for an 8192-host fat tree.
 *
 * ECMP picks a member by a hash of (src, dst, entropy value) salted per
 * switch; a dead member is skipped by probing the next one, so a failed
 * link diverts only the packets that hashed onto it.
 *
 * Up/down routing (Autonet): a BFS from a root switch orders the switches by
 * (level, index); a link is "up" toward the smaller key. A legal route takes
 * up links, then down links, never up after down, so channel dependencies
 * cannot form a cycle and a lossless fabric cannot deadlock. Each switch
 * keeps two next-hop sets per leaf: the shortest legal routes while the
 * packet may still go up (phase 0), and the shortest down-only routes once it
 * has taken a down link (phase 1, flagged UB_SIM_PF_DOWN in the packet).
 */
#include <stdlib.h>
#include <string.h>

#include <softub/errors.h>
#include "core/grow.h"
#include "sim/link.h"
#include "sim/sim.h"

#define DIST_INF UINT16_MAX

static uint32_t *alloc_u32(size_t n, uint32_t fill)
{
    uint32_t *a = malloc((n ? n : 1) * sizeof(*a));
    if (a)
        for (size_t i = 0; i < n; i++)
            a[i] = fill;
    return a;
}

void ub_sim_routes_fini(struct ub_sim_routes *rt)
{
    free(rt->leaf_of);
    free(rt->leaf_sw);
    free(rt->host_leaf);
    free(rt->host_port);
    free(rt->grp);
    free(rt->groups);
    free(rt->gports);
    free(rt->salt);
    free(rt->is_down);
    memset(rt, 0, sizeof(*rt));
}

static void bfs(const struct ub_sim *sim, uint32_t from, uint16_t *dist, uint32_t *queue)
{
    uint32_t S = sim->nswitches, H = sim->nhosts;
    for (uint32_t i = 0; i < S; i++)
        dist[i] = DIST_INF;
    uint32_t qh = 0, qt = 0;
    dist[from] = 0;
    queue[qt++] = from;
    while (qh < qt) {
        uint32_t s = queue[qh++];
        const struct ub_sim_node *nd = &sim->nodes[H + s];
        for (uint32_t i = 0; i < nd->nports; i++) {
            uint32_t peer = sim->ports[nd->port_base + i].peer;
            if (peer < H)
                continue;
            peer -= H;
            if (dist[peer] == DIST_INF) {
                dist[peer] = (uint16_t)(dist[s] + 1);
                queue[qt++] = peer;
            }
        }
    }
}

struct grow {
    void *p;
    uint32_t n, cap;
};

static int grow_push(struct grow *g, const void *item, size_t size)
{
    if (g->n == g->cap) {
        void *p = ub__grow(g->p, &g->cap, size, 256);
        if (!p)
            return UB_ENOMEM;
        g->p = p;
    }
    memcpy((char *)g->p + g->n * size, item, size);
    g->n++;
    return 0;
}

static int updown_dists(struct ub_sim *sim, uint16_t *dist, uint32_t *queue, uint64_t **keyp);

int ub_sim_routes_build(struct ub_sim *sim)
{
    struct ub_sim_routes *rt = &sim->rt;
    uint32_t H = sim->nhosts, S = sim->nswitches;
    enum ub_sim_routing kind = rt->kind;
    uint32_t root = rt->root;
    ub_sim_routes_fini(rt);
    rt->kind = kind;
    rt->root = root;
    rt->nphase = kind == UB_SIM_ROUTE_UPDOWN ? 2 : 1;
    if (kind == UB_SIM_ROUTE_UPDOWN && root >= S)
        return UB_EINVAL;
    rt->leaf_of = alloc_u32(S, UB_SIM_NONE);
    rt->host_leaf = alloc_u32(H, UB_SIM_NONE);
    rt->host_port = alloc_u32(H, UB_SIM_NONE);
    rt->salt = malloc((S ? S : 1) * sizeof(*rt->salt));
    if (!rt->leaf_of || !rt->host_leaf || !rt->host_port || !rt->salt)
        return UB_ENOMEM;
    struct ub__rng r;
    ub__rng_fork(&r, &sim->rng, 0x726f757465ULL);
    for (uint32_t s = 0; s < S; s++)
        rt->salt[s] = ub__rng_next(&r);
    for (uint32_t s = 0; s < S; s++) {
        const struct ub_sim_node *nd = &sim->nodes[H + s];
        for (uint32_t i = 0; i < nd->nports; i++) {
            uint32_t peer = sim->ports[nd->port_base + i].peer;
            if (peer >= H)
                continue;
            rt->host_leaf[peer] = s;
            rt->host_port[peer] = nd->port_base + i;
            if (rt->leaf_of[s] == UB_SIM_NONE)
                rt->leaf_of[s] = rt->nleaves++;
        }
    }
    for (uint32_t h = 0; h < H; h++)
        if (rt->host_leaf[h] == UB_SIM_NONE)
            return UB_EINVAL;
    uint32_t L = rt->nleaves, P = rt->nphase;
    rt->leaf_sw = alloc_u32(L, 0);
    rt->grp = alloc_u32((size_t)S * L * P, UB_SIM_NONE);
    uint16_t *dist = malloc((size_t)L * S * P * sizeof(*dist) + 1);
    uint32_t *queue = alloc_u32(S, 0);
    uint32_t *tmp = alloc_u32(65536, 0);
    uint64_t *key = NULL;
    struct grow groups = {0}, gports = {0};
    int rc = UB_ENOMEM;
    if (!rt->leaf_sw || !rt->grp || !dist || !queue || !tmp)
        goto out;
    for (uint32_t s = 0; s < S; s++)
        if (rt->leaf_of[s] != UB_SIM_NONE)
            rt->leaf_sw[rt->leaf_of[s]] = s;
    if (P == 1) {
        for (uint32_t l = 0; l < L; l++)
            bfs(sim, rt->leaf_sw[l], dist + (size_t)l * S, queue);
    } else if ((rc = updown_dists(sim, dist, queue, &key)) != 0) {
        goto out;
    }
    rc = UB_ENOMEM;

    for (uint32_t s = 0; s < S; s++) {
        const struct ub_sim_node *nd = &sim->nodes[H + s];
        uint32_t first_group = groups.n;
        for (uint32_t lp = 0; lp < L * P; lp++) {
            uint32_t l = lp / P, phase = lp % P;
            const uint16_t *d = dist + (size_t)l * S * P; /* up/down: [any, down-only] */
            const uint16_t *dd = P == 2 ? d + S : d;
            const uint16_t *want = phase ? dd : d;
            if (rt->leaf_sw[l] == s || want[s] == DIST_INF)
                continue;
            uint32_t n = 0;
            for (uint32_t i = 0; i < nd->nports && n < 65536; i++) {
                uint32_t peer = sim->ports[nd->port_base + i].peer;
                if (peer < H)
                    continue;
                peer -= H;
                bool ok;
                if (P == 1)
                    ok = d[peer] + 1 == d[s];
                else if (key[peer] < key[s]) /* up: only while up is still allowed */
                    ok = !phase && d[peer] + 1 == d[s];
                else
                    ok = dd[peer] + 1 == want[s];
                if (ok)
                    tmp[n++] = nd->port_base + i;
            }
            uint32_t g;
            for (g = first_group; g < groups.n; g++) {
                const struct ub_sim_group *gr = (const struct ub_sim_group *)groups.p + g;
                if (gr->n == n &&
                    !memcmp((const uint32_t *)gports.p + gr->off, tmp, n * sizeof(*tmp)))
                    break;
            }
            if (g == groups.n) {
                struct ub_sim_group gr = {.off = gports.n, .n = n};
                if (grow_push(&groups, &gr, sizeof(gr)))
                    goto out;
                for (uint32_t i = 0; i < n; i++)
                    if (grow_push(&gports, &tmp[i], sizeof(*tmp)))
                        goto out;
            }
            rt->grp[(size_t)s * L * P + lp] = g;
        }
    }
    rt->groups = groups.p;
    rt->ngroups = groups.n;
    rt->gports = gports.p;
    groups.p = gports.p = NULL;
    rc = 0;
out:
    free(key);
    free(groups.p);
    free(gports.p);
    free(dist);
    free(queue);
    free(tmp);
    return rc;
}

/*
 * Up/down distances per leaf into dist[l][0..S) (legal up*down* routes) and
 * dist[l][S..2S) (down-only routes); *keyp gets the (level, index) order.
 */
static int updown_dists(struct ub_sim *sim, uint16_t *dist, uint32_t *queue, uint64_t **keyp)
{
    struct ub_sim_routes *rt = &sim->rt;
    uint32_t H = sim->nhosts, S = sim->nswitches, L = rt->nleaves;
    uint16_t *level = malloc(S * sizeof(*level));
    uint64_t *key = malloc(S * sizeof(*key));
    uint32_t *order = alloc_u32(S, 0);
    rt->is_down = calloc(sim->nports, 1);
    if (!level || !key || !order || !rt->is_down) {
        free(level);
        free(key);
        free(order);
        return UB_ENOMEM;
    }
    bfs(sim, rt->root, level, queue);
    int rc = 0;
    for (uint32_t s = 0; s < S; s++) {
        if (level[s] == DIST_INF)
            rc = UB_EINVAL; /* a switch the root cannot reach */
        key[s] = (uint64_t)level[s] * S + s;
    }
    /* BFS order from the root is ascending key order. */
    memcpy(order, queue, S * sizeof(*order));
    for (uint32_t s = 0; s < S && !rc; s++) {
        const struct ub_sim_node *nd = &sim->nodes[H + s];
        for (uint32_t i = 0; i < nd->nports; i++) {
            uint32_t peer = sim->ports[nd->port_base + i].peer;
            if (peer >= H && key[peer - H] > key[s])
                rt->is_down[nd->port_base + i] = 1;
        }
    }
    for (uint32_t l = 0; l < L && !rc; l++) {
        uint16_t *any = dist + (size_t)l * 2 * S, *down = any + S;
        for (uint32_t s = 0; s < S; s++)
            down[s] = DIST_INF;
        /* Down-only distances: walk from the leaf up the down links in reverse. */
        uint32_t qh = 0, qt = 0;
        down[rt->leaf_sw[l]] = 0;
        queue[qt++] = rt->leaf_sw[l];
        while (qh < qt) {
            uint32_t x = queue[qh++];
            const struct ub_sim_node *nd = &sim->nodes[H + x];
            for (uint32_t i = 0; i < nd->nports; i++) {
                uint32_t y = sim->ports[nd->port_base + i].peer;
                if (y < H)
                    continue;
                y -= H;
                if (key[y] < key[x] && down[y] == DIST_INF) {
                    down[y] = (uint16_t)(down[x] + 1);
                    queue[qt++] = y;
                }
            }
        }
        /* Up then down: every up neighbour has a smaller key, so is settled first. */
        for (uint32_t k = 0; k < S; k++) {
            uint32_t s = order[k];
            uint32_t best = down[s];
            const struct ub_sim_node *nd = &sim->nodes[H + s];
            for (uint32_t i = 0; i < nd->nports; i++) {
                uint32_t y = sim->ports[nd->port_base + i].peer;
                if (y >= H && key[y - H] < key[s] && any[y - H] != DIST_INF &&
                    any[y - H] + 1u < best)
                    best = any[y - H] + 1u;
            }
            any[s] = (uint16_t)best;
        }
    }
    free(level);
    free(order);
    if (rc) {
        free(key);
        return rc;
    }
    *keyp = key;
    return 0;
}

int ub_sim_set_routing(struct ub_sim *sim, enum ub_sim_routing kind, uint32_t root)
{
    sim->rt.kind = kind;
    sim->rt.root = root;
    return ub_sim_routes_build(sim);
}

static inline uint32_t pick(const struct ub_sim *sim, uint32_t s, const struct ub_sim_pkt *p,
                            const struct ub_sim_group *gr)
{
    const uint32_t *gp = sim->rt.gports + gr->off;
    if (gr->n == 1)
        return sim->ports[gp[0]].up ? gp[0] : UB_SIM_NONE;
    uint64_t h = ub__mix64((((uint64_t)p->src << 32) | p->dst) ^
                           ((uint64_t)p->ev * 0x9e3779b97f4a7c15ULL) ^ sim->rt.salt[s]);
    uint32_t i = (uint32_t)(((h >> 32) * gr->n) >> 32);
    for (uint32_t j = 0; j < gr->n; j++) {
        uint32_t port = gp[(i + j) % gr->n];
        if (sim->ports[port].up)
            return port;
    }
    return UB_SIM_NONE;
}

void ub_sim_switch_input(struct ub_sim *sim, uint32_t node, struct ub_sim_pkt *p)
{
    const struct ub_sim_routes *rt = &sim->rt;
    uint32_t s = node - sim->nhosts;
    uint32_t leaf = rt->host_leaf[p->dst];
    uint32_t port;
    if (leaf == s) {
        port = rt->host_port[p->dst];
    } else {
        uint32_t phase = rt->nphase == 2 && (p->flags & UB_SIM_PF_DOWN);
        uint32_t g = rt->grp[((size_t)s * rt->nleaves + rt->leaf_of[leaf]) * rt->nphase + phase];
        port = g == UB_SIM_NONE ? UB_SIM_NONE : pick(sim, s, p, &rt->groups[g]);
        if (port != UB_SIM_NONE && rt->is_down && rt->is_down[port])
            p->flags |= UB_SIM_PF_DOWN;
    }
    if (port == UB_SIM_NONE) {
        sim->ctr.noroute_drops++;
        ub_sim_fc_release(sim, p);
        ub_sim_pkt_free(sim, p);
        return;
    }
    ub_sim_port_enqueue(sim, &sim->ports[port], p);
}

uint32_t ub_sim_path(const struct ub_sim *sim, uint32_t a, uint32_t b, uint32_t *ports,
                     uint32_t max)
{
    const struct ub_sim_routes *rt = &sim->rt;
    uint32_t n = 0, H = sim->nhosts;
    uint32_t port = a; /* the host's NIC port */
    uint32_t phase = 0;
    while (n < max) {
        ports[n++] = port;
        uint32_t node = sim->ports[port].peer;
        if (node < H)
            return node == b ? n : 0;
        uint32_t s = node - H, leaf = rt->host_leaf[b];
        if (s == leaf) {
            port = rt->host_port[b];
            continue;
        }
        uint32_t g = rt->grp[((size_t)s * rt->nleaves + rt->leaf_of[leaf]) * rt->nphase + phase];
        if (g == UB_SIM_NONE)
            return 0;
        port = rt->gports[rt->groups[g].off];
        if (rt->is_down && rt->is_down[port])
            phase = 1;
    }
    return 0;
}

uint32_t ub_sim_path_links(const struct ub_sim *sim, uint32_t a, uint32_t b)
{
    uint32_t ports[64];
    return ub_sim_path(sim, a, b, ports, 64);
}
