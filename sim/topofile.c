/* Topology files: parse, build, write (see topofile.h). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <softub/errors.h>
#include "core/grow.h"
#include "core/num.h"
#include "sim/topofile.h"

#define NAME_MAX_LEN 63
#define MAX_TOK      16

struct pending {
    uint32_t a, b; /* name ids */
    uint64_t rate, delay;
    uint32_t line;
};

struct names {
    char **v;      /* by id */
    uint8_t *kind; /* 0 undeclared, 1 host, 2 switch */
    uint32_t *decl_line;
    uint32_t n, cap;
    uint32_t *slot; /* open addressing: id + 1, 0 empty */
    uint32_t nslot;
};

struct tf {
    struct names nm;
    struct pending *l;
    uint32_t nl, capl;
    uint32_t *hosts, nh, caph; /* name ids in declaration order */
    uint32_t *sws, ns, caps;
};

static uint64_t hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    while (*s)
        h = (h ^ (uint8_t)*s++) * 1099511628211ULL;
    return h;
}

static int rehash(struct names *nm, uint32_t nslot)
{
    uint32_t *s = calloc(nslot, sizeof(*s));
    if (!s)
        return UB_ENOMEM;
    for (uint32_t id = 0; id < nm->n; id++) {
        uint32_t i = (uint32_t)(hash(nm->v[id]) & (nslot - 1));
        while (s[i])
            i = (i + 1) & (nslot - 1);
        s[i] = id + 1;
    }
    free(nm->slot);
    nm->slot = s;
    nm->nslot = nslot;
    return 0;
}

/* The id of name, created (undeclared) if new; UB_SIM_NONE on allocation failure. */
static uint32_t intern(struct names *nm, const char *name)
{
    if (2 * (nm->n + 1) > nm->nslot && rehash(nm, nm->nslot ? nm->nslot * 2 : 256))
        return UB_SIM_NONE;
    uint32_t i = (uint32_t)(hash(name) & (nm->nslot - 1));
    while (nm->slot[i]) {
        if (!strcmp(nm->v[nm->slot[i] - 1], name))
            return nm->slot[i] - 1;
        i = (i + 1) & (nm->nslot - 1);
    }
    if (nm->n == nm->cap) { /* three arrays of one capacity: nm->cap moves with the last */
        uint32_t cap = nm->cap;
        char **v = ub__grow(nm->v, &cap, sizeof(*v), 64);
        if (!v)
            return UB_SIM_NONE;
        nm->v = v;
        cap = nm->cap;
        uint8_t *kind = ub__grow(nm->kind, &cap, sizeof(*kind), 64);
        if (!kind)
            return UB_SIM_NONE;
        nm->kind = kind;
        uint32_t *decl_line = ub__grow(nm->decl_line, &nm->cap, sizeof(*decl_line), 64);
        if (!decl_line)
            return UB_SIM_NONE;
        nm->decl_line = decl_line;
    }
    size_t len = strlen(name);
    char *copy = malloc(len + 1);
    if (!copy)
        return UB_SIM_NONE;
    memcpy(copy, name, len + 1);
    uint32_t id = nm->n++;
    nm->v[id] = copy;
    nm->kind[id] = 0;
    nm->decl_line[id] = 0;
    nm->slot[i] = id + 1;
    return id;
}

/* "100G", "2500M", "40000000000": bit/s; 0 if malformed. */
static uint64_t parse_rate(const char *s)
{
    const char *end;
    uint64_t v, mul = 1;
    if (!ub__num_u64(s, 10, &v, &end))
        return 0;
    if (*end == 'K' || *end == 'k')
        mul = 1000ULL, end++;
    else if (*end == 'M')
        mul = 1000000ULL, end++;
    else if (*end == 'G' || *end == 'g')
        mul = 1000000000ULL, end++;
    else if (*end == 'T')
        mul = 1000000000000ULL, end++;
    if (*end || v == 0 || v > UINT64_MAX / mul)
        return 0;
    return v * mul;
}

/* "1us", "500ns", "1500ps", "2ms": ps; UINT64_MAX if malformed. */
static uint64_t parse_delay(const char *s)
{
    const char *end;
    uint64_t v, mul;
    if (!ub__num_u64(s, 10, &v, &end))
        return UINT64_MAX;
    if (!strcmp(end, "ps"))
        mul = 1;
    else if (!strcmp(end, "ns"))
        mul = UB_SIM_PS_PER_NS;
    else if (!strcmp(end, "us"))
        mul = UB_SIM_PS_PER_US;
    else if (!strcmp(end, "ms"))
        mul = 1000 * UB_SIM_PS_PER_US;
    else
        return UINT64_MAX;
    return v > UINT64_MAX / mul / 2 ? UINT64_MAX : v * mul;
}

/* key value pairs from tok[i..n): rate and delay only. */
static int link_opts(char **tok, uint32_t i, uint32_t n, uint64_t *rate, uint64_t *delay)
{
    for (; i < n; i += 2) {
        if (i + 1 >= n)
            return UB_EINVAL;
        if (!strcmp(tok[i], "rate")) {
            if (!(*rate = parse_rate(tok[i + 1])))
                return UB_EINVAL;
        } else if (!strcmp(tok[i], "delay")) {
            if ((*delay = parse_delay(tok[i + 1])) == UINT64_MAX)
                return UB_EINVAL;
        } else {
            return UB_EINVAL;
        }
    }
    return 0;
}

static int u32_of(const char *s, uint32_t *out)
{
    uint64_t v;
    if (!ub__num_u64_all(s, 10, &v) || v > UINT32_MAX)
        return UB_EINVAL;
    *out = (uint32_t)v;
    return 0;
}

static int builtin(char **tok, uint32_t n, struct ub_sim_topo_cfg *c)
{
    memset(c, 0, sizeof(*c));
    if (n < 2)
        return UB_EINVAL;
    if (!strcmp(tok[1], "fattree"))
        c->kind = UB_SIM_TOPO_FATTREE;
    else if (!strcmp(tok[1], "leafspine"))
        c->kind = UB_SIM_TOPO_LEAFSPINE;
    else if (!strcmp(tok[1], "dumbbell"))
        c->kind = UB_SIM_TOPO_DUMBBELL;
    else if (!strcmp(tok[1], "ring"))
        c->kind = UB_SIM_TOPO_RING;
    else if (!strcmp(tok[1], "torus"))
        c->kind = UB_SIM_TOPO_TORUS;
    else
        return UB_EINVAL;
    for (uint32_t i = 2; i < n; i += 2) {
        if (i + 1 >= n)
            return UB_EINVAL;
        const char *k = tok[i], *v = tok[i + 1];
        int rc = 0;
        if (!strcmp(k, "k"))
            rc = u32_of(v, &c->k);
        else if (!strcmp(k, "oversub"))
            rc = u32_of(v, &c->oversub);
        else if (!strcmp(k, "hosts"))
            rc = u32_of(v, &c->hosts);
        else if (!strcmp(k, "leaves"))
            rc = u32_of(v, &c->leaves);
        else if (!strcmp(k, "spines"))
            rc = u32_of(v, &c->spines);
        else if (!strcmp(k, "hosts_per_leaf"))
            rc = u32_of(v, &c->hosts_per_leaf);
        else if (!strcmp(k, "x"))
            rc = u32_of(v, &c->x);
        else if (!strcmp(k, "y"))
            rc = u32_of(v, &c->y);
        else if (!strcmp(k, "rate"))
            rc = (c->rate = parse_rate(v)) ? 0 : UB_EINVAL;
        else if (!strcmp(k, "bottleneck"))
            rc = (c->bottleneck_rate = parse_rate(v)) ? 0 : UB_EINVAL;
        else if (!strcmp(k, "delay"))
            rc = (c->delay = parse_delay(v)) == UINT64_MAX ? UB_EINVAL : 0;
        else
            rc = UB_EINVAL;
        if (rc)
            return rc;
    }
    return 0;
}

/* Room for one more name id in a list of them (hosts, switches). */
static bool ids_grow(uint32_t **v, uint32_t *cap)
{
    uint32_t *x = ub__grow(*v, cap, sizeof(*x), 64);
    if (x)
        *v = x;
    return x != NULL;
}

static int declare(struct tf *t, const char *name, uint8_t kind, uint32_t line, uint32_t *id)
{
    if (strlen(name) > NAME_MAX_LEN)
        return UB_EINVAL;
    *id = intern(&t->nm, name);
    if (*id == UB_SIM_NONE)
        return UB_ENOMEM;
    if (t->nm.kind[*id])
        return UB_EINVAL; /* declared twice */
    t->nm.kind[*id] = kind;
    t->nm.decl_line[*id] = line;
    if (kind == 1) {
        if (t->nh == t->caph && !ids_grow(&t->hosts, &t->caph))
            return UB_ENOMEM;
        t->hosts[t->nh++] = *id;
    } else {
        if (t->ns == t->caps && !ids_grow(&t->sws, &t->caps))
            return UB_ENOMEM;
        t->sws[t->ns++] = *id;
    }
    return 0;
}

static int add_link(struct tf *t, const char *a, const char *b, uint64_t rate, uint64_t delay,
                    uint32_t line)
{
    if (strlen(a) > NAME_MAX_LEN || strlen(b) > NAME_MAX_LEN)
        return UB_EINVAL;
    uint32_t ia = intern(&t->nm, a), ib = intern(&t->nm, b);
    if (ia == UB_SIM_NONE || ib == UB_SIM_NONE)
        return UB_ENOMEM;
    if (t->nl == t->capl) {
        struct pending *l = ub__grow(t->l, &t->capl, sizeof(*l), 64);
        if (!l)
            return UB_ENOMEM;
        t->l = l;
    }
    t->l[t->nl++] = (struct pending){.a = ia, .b = ib, .rate = rate, .delay = delay, .line = line};
    return 0;
}

/* One statement; tok[0..n) non-empty. */
static int statement(struct tf *t, char **tok, uint32_t n, uint32_t line, uint64_t *drate,
                     uint64_t *ddelay)
{
    if (!strcmp(tok[0], "defaults"))
        return link_opts(tok, 1, n, drate, ddelay);
    if (!strcmp(tok[0], "switch")) {
        if (n < 2)
            return UB_EINVAL;
        for (uint32_t i = 1; i < n; i++) {
            uint32_t id;
            int rc = declare(t, tok[i], 2, line, &id);
            if (rc)
                return rc;
        }
        return 0;
    }
    if (!strcmp(tok[0], "host")) {
        if (n < 2)
            return UB_EINVAL;
        uint32_t id;
        int rc = declare(t, tok[1], 1, line, &id);
        if (rc || n == 2)
            return rc;
        uint64_t rate = *drate, delay = *ddelay;
        rc = link_opts(tok, 3, n, &rate, &delay);
        return rc ? rc : add_link(t, tok[1], tok[2], rate, delay, line);
    }
    if (!strcmp(tok[0], "link")) {
        if (n < 3)
            return UB_EINVAL;
        uint64_t rate = *drate, delay = *ddelay;
        int rc = link_opts(tok, 3, n, &rate, &delay);
        return rc ? rc : add_link(t, tok[1], tok[2], rate, delay, line);
    }
    return UB_EINVAL;
}

static void tf_free(struct tf *t)
{
    for (uint32_t i = 0; i < t->nm.n; i++)
        free(t->nm.v[i]);
    free(t->nm.v);
    free(t->nm.kind);
    free(t->nm.decl_line);
    free(t->nm.slot);
    free(t->l);
    free(t->hosts);
    free(t->sws);
}

/* Resolves names to nodes and builds. */
static int finish(struct ub_sim *sim, struct tf *t, const struct ub_sim_qcfg *q, uint32_t *line)
{
    uint32_t *node = malloc((t->nm.n ? t->nm.n : 1) * sizeof(*node));
    uint32_t *deg = calloc(t->nh ? t->nh : 1, sizeof(*deg));
    struct ub_sim_link_spec *ls = malloc((t->nl ? t->nl : 1) * sizeof(*ls));
    int rc = node && deg && ls ? 0 : UB_ENOMEM;
    for (uint32_t i = 0; !rc && i < t->nh; i++)
        node[t->hosts[i]] = i;
    for (uint32_t i = 0; !rc && i < t->ns; i++)
        node[t->sws[i]] = t->nh + i;
    for (uint32_t i = 0; !rc && i < t->nl; i++) {
        const struct pending *p = &t->l[i];
        if (!t->nm.kind[p->a] || !t->nm.kind[p->b] || p->a == p->b ||
            (t->nm.kind[p->a] == 1 && t->nm.kind[p->b] == 1)) {
            *line = p->line; /* an undeclared name, a loop or a host-to-host link */
            rc = UB_EINVAL;
            break;
        }
        ls[i] = (struct ub_sim_link_spec){
            .a = node[p->a], .b = node[p->b], .rate = p->rate, .delay = p->delay};
        uint32_t h = ls[i].a < t->nh ? ls[i].a : ls[i].b;
        if (h < t->nh && ++deg[h] > 1) {
            *line = p->line; /* a host's second link */
            rc = UB_EINVAL;
        }
    }
    for (uint32_t i = 0; !rc && i < t->nh; i++)
        if (!deg[i]) {
            *line = t->nm.decl_line[t->hosts[i]]; /* a host without a link */
            rc = UB_EINVAL;
        }
    if (!rc && !t->nh) {
        *line = 0;
        rc = UB_EINVAL;
    }
    if (!rc)
        rc = ub_sim_build(sim, t->nh, t->ns, ls, t->nl, q);
    free(node);
    free(deg);
    free(ls);
    return rc;
}

int ub_sim_topo_load(struct ub_sim *sim, FILE *f, const struct ub_sim_qcfg *q, uint32_t *line,
                     bool *is_builtin, struct ub_sim_topo_cfg *cfg)
{
    struct tf t;
    memset(&t, 0, sizeof(t));
    uint64_t drate = 100000000000ULL, ddelay = UB_SIM_PS_PER_US;
    char *buf = NULL;
    size_t cap = 0;
    uint32_t ln = 0;
    bool have_builtin = false, have_graph = false;
    int rc = 0;
    *line = 0;
    *is_builtin = false;
    int got;
    while (!rc && (got = ub_sim_text_line(f, &buf, &cap)) != 0) {
        ln++;
        if (got < 0) {
            rc = UB_EINVAL;
            break;
        }
        char *hash_at = strchr(buf, '#');
        if (hash_at)
            *hash_at = '\0';
        char *tok[MAX_TOK];
        uint32_t n = 0;
        for (char *s = strtok(buf, " \t\r\n"); s; s = strtok(NULL, " \t\r\n")) {
            if (n == MAX_TOK) {
                rc = UB_EINVAL;
                break;
            }
            tok[n++] = s;
        }
        if (rc || !n)
            continue;
        if (!strcmp(tok[0], "builtin")) {
            if (have_builtin || have_graph)
                rc = UB_EINVAL;
            else
                rc = builtin(tok, n, cfg);
            have_builtin = true;
        } else {
            if (have_builtin)
                rc = UB_EINVAL;
            else
                rc = statement(&t, tok, n, ln, &drate, &ddelay);
            have_graph = true;
        }
    }
    if (rc)
        *line = ln;
    else if (have_builtin)
        *is_builtin = true; /* the caller builds it, as a shape given any other way */
    else
        rc = finish(sim, &t, q, line);
    tf_free(&t);
    free(buf);
    return rc;
}

static void node_name(const struct ub_sim *sim, uint32_t n, char *buf)
{
    if (n < sim->nhosts)
        snprintf(buf, 32, "h%u", n);
    else
        snprintf(buf, 32, "s%u", n - sim->nhosts);
}

static void fmt_rate(uint64_t r, char *buf)
{
    if (r % 1000000000ULL == 0)
        snprintf(buf, 32, "%" PRIu64 "G", (uint64_t)(r / 1000000000U));
    else if (r % 1000000ULL == 0)
        snprintf(buf, 32, "%" PRIu64 "M", (uint64_t)(r / 1000000U));
    else
        snprintf(buf, 32, "%" PRIu64, r);
}

static void fmt_delay(uint64_t d, char *buf)
{
    if (d % UB_SIM_PS_PER_US == 0)
        snprintf(buf, 32, "%" PRIu64 "us", d / UB_SIM_PS_PER_US);
    else if (d % UB_SIM_PS_PER_NS == 0)
        snprintf(buf, 32, "%" PRIu64 "ns", d / UB_SIM_PS_PER_NS);
    else
        snprintf(buf, 32, "%" PRIu64 "ps", d);
}

/*
 * Links in an order that numbers every node's ports as they are now: a link goes out when it is
 * the next unwritten port at both its ends (such an order exists: the one the fabric was built
 * from).
 */
int ub_sim_topo_write(const struct ub_sim *sim, FILE *f)
{
    uint32_t *cur = malloc((sim->nnodes ? sim->nnodes : 1) * sizeof(*cur));
    uint32_t *stack = malloc(((size_t)sim->nnodes + sim->nports + 1) * sizeof(*stack));
    if (!cur || !stack) {
        free(cur);
        free(stack);
        return UB_ENOMEM;
    }
    fprintf(f, "# softub-sim topology: %u hosts, %u switches, %u links\n", sim->nhosts,
            sim->nswitches, sim->nports / 2);
    for (uint32_t h = 0; h < sim->nhosts; h++)
        fprintf(f, "host h%u\n", h);
    for (uint32_t s = 0; s < sim->nswitches; s++)
        fprintf(f, "switch s%u\n", s);
    uint32_t sp = 0;
    for (uint32_t n = 0; n < sim->nnodes; n++) {
        cur[n] = 0;
        stack[sp++] = n;
    }
    uint64_t written = 0;
    char a[32], b[32], r[32], d[32];
    while (sp) {
        uint32_t n = stack[--sp];
        const struct ub_sim_node *nd = &sim->nodes[n];
        if (cur[n] >= nd->nports)
            continue;
        uint32_t i = nd->port_base + cur[n];
        const struct ub_sim_port *p = &sim->ports[i];
        const struct ub_sim_node *pn = &sim->nodes[p->peer];
        if (p->rev != pn->port_base + cur[p->peer])
            continue; /* the peer writes it when its turn comes */
        node_name(sim, p->node, a);
        node_name(sim, p->peer, b);
        fmt_rate(p->rate, r);
        fmt_delay(p->delay, d);
        fprintf(f, "link %s %s rate %s delay %s\n", a, b, r, d);
        written++;
        cur[n]++;
        cur[p->peer]++;
        stack[sp++] = p->peer;
        stack[sp++] = n;
    }
    free(cur);
    free(stack);
    return written * 2 == sim->nports ? 0 : UB_EINVAL;
}
