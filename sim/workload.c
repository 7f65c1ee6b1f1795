#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include <softub/errors.h>
#include "core/num.h"
#include "sim/workload.h"

int ub_sim_wl_permutation(struct ub_sim *sim, uint64_t size, uint64_t start)
{
    uint32_t n = sim->nhosts;
    if (n < 2)
        return UB_EINVAL;
    uint32_t *d = malloc(n * sizeof(*d));
    if (!d)
        return UB_ENOMEM;
    struct ub__rng r;
    ub__rng_fork(&r, &sim->rng, 0x7065726dULL);
    for (uint32_t i = 0; i < n; i++)
        d[i] = i;
    for (uint32_t i = n - 1; i > 0; i--) {
        uint32_t j = (uint32_t)ub__rng_below(&r, (uint64_t)i + 1);
        uint32_t t = d[i];
        d[i] = d[j];
        d[j] = t;
    }
    /* Nobody sends to itself: swapping a fixed point with its neighbour removes it for good. */
    for (uint32_t i = 0; i < n; i++) {
        if (d[i] == i) {
            uint32_t j = (i + 1) % n;
            uint32_t t = d[i];
            d[i] = d[j];
            d[j] = t;
        }
    }
    int rc = 0;
    for (uint32_t i = 0; i < n && rc >= 0; i++)
        rc = ub_sim_add_flow(sim, 0, i, d[i], size, start);
    free(d);
    return rc < 0 ? rc : 0;
}

int ub_sim_wl_incast(struct ub_sim *sim, uint32_t n, uint32_t dst, uint64_t size, uint64_t start)
{
    if (dst >= sim->nhosts || n == 0 || n >= sim->nhosts)
        return UB_EINVAL;
    for (uint32_t i = 0; i < n; i++) {
        int rc = ub_sim_add_flow(sim, 0, (dst + 1 + i) % sim->nhosts, dst, size, start);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int ub_sim_wl_outcast(struct ub_sim *sim, uint32_t n, uint32_t src, uint64_t size, uint64_t start)
{
    if (src >= sim->nhosts || n == 0 || n >= sim->nhosts)
        return UB_EINVAL;
    for (uint32_t i = 0; i < n; i++) {
        int rc = ub_sim_add_flow(sim, 0, src, (src + 1 + i) % sim->nhosts, size, start);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int ub_sim_wl_shift(struct ub_sim *sim, uint32_t stride, uint64_t size, uint64_t start)
{
    uint32_t n = sim->nhosts;
    if (n < 2 || stride % n == 0)
        return UB_EINVAL;
    for (uint32_t i = 0; i < n; i++) {
        int rc = ub_sim_add_flow(sim, 0, i, (uint32_t)((i + (uint64_t)stride) % n), size, start);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int ub_sim_wl_alltoall(struct ub_sim *sim, uint64_t size, uint64_t start)
{
    uint32_t n = sim->nhosts;
    if (n < 2)
        return UB_EINVAL;
    /* Each host starts with a different peer, so the first packets do not all hit one host. */
    for (uint32_t k = 1; k < n; k++)
        for (uint32_t i = 0; i < n; i++) {
            int rc = ub_sim_add_flow(sim, 0, i, (i + k) % n, size, start);
            if (rc < 0)
                return rc;
        }
    return 0;
}

int ub_sim_wl_allreduce(struct ub_sim *sim, uint64_t size, uint64_t start)
{
    uint32_t n = sim->nhosts;
    if (n < 2)
        return UB_EINVAL;
    uint64_t chunk = (size + n - 1) / n;
    uint32_t base = sim->nflows;
    for (uint32_t step = 0; step < 2 * (n - 1); step++)
        for (uint32_t i = 0; i < n; i++) {
            int rc = ub_sim_add_flow(sim, 0, i, (i + 1) % n, chunk, start);
            if (rc < 0)
                return rc;
            /* Step s from host i waits for step s - 1 into host i (from host i - 1). */
            if (step)
                sim->flows[rc].dep = base + (step - 1) * n + (i + n - 1) % n;
        }
    return 0;
}

/* Decimal microseconds to picoseconds, without floating point. */
static bool parse_us(const char *s, uint64_t *ps)
{
    uint64_t whole = 0, frac = 0, scale = UB_SIM_PS_PER_US;
    if (!isdigit((unsigned char)*s) && *s != '.')
        return false;
    for (; isdigit((unsigned char)*s); s++) {
        if (whole > UINT64_MAX / 10 / UB_SIM_PS_PER_US)
            return false;
        whole = whole * 10 + (uint64_t)(*s - '0');
    }
    if (*s == '.') {
        for (s++; isdigit((unsigned char)*s); s++) {
            if (scale > 1) {
                scale /= 10;
                frac += (uint64_t)(*s - '0') * scale;
            }
        }
    }
    if (*s)
        return false;
    *ps = whole * UB_SIM_PS_PER_US + frac;
    return true;
}

/* The next whitespace-separated token of *s (NUL-terminated in place), or NULL. */
static char *next_tok(char **s)
{
    char *p = *s;
    while (*p && isspace((unsigned char)*p))
        p++;
    if (!*p)
        return NULL;
    char *t = p;
    while (*p && !isspace((unsigned char)*p))
        p++;
    if (*p)
        *p++ = '\0';
    *s = p;
    return t;
}

static int parse_flow(struct ub_sim *sim, char *tok, char **save)
{
    char *arrow = strstr(tok, "->");
    uint64_t src, dst, id = 0, start = UB_SIM_NEVER, size = UB_SIM_NEVER, prio;
    *arrow = '\0';
    if (!ub__num_u64_all(tok, 10, &src) || !ub__num_u64_all(arrow + 2, 10, &dst))
        return UB_EBADMSG;
    char *k;
    while ((k = next_tok(save)) != NULL) {
        char *v = next_tok(save);
        if (!strcmp(k, "addon") || !strcmp(k, "trigger") || !strcmp(k, "send_done_trigger") ||
            !strcmp(k, "recv_done_trigger"))
            return UB_ENOTSUP;
        if (!v)
            return UB_EBADMSG;
        bool ok;
        if (!strcmp(k, "id"))
            ok = ub__num_u64_all(v, 10, &id) && id > 0 && id <= UINT32_MAX;
        else if (!strcmp(k, "start"))
            ok = parse_us(v, &start);
        else if (!strcmp(k, "size"))
            ok = ub__num_u64_all(v, 10, &size);
        else if (!strcmp(k, "prio"))
            ok = ub__num_u64_all(v, 10, &prio);
        else
            ok = false;
        if (!ok)
            return UB_EBADMSG;
    }
    if (start == UB_SIM_NEVER || size == UB_SIM_NEVER || src >= sim->nhosts || dst >= sim->nhosts)
        return UB_EBADMSG;
    int rc = ub_sim_add_flow(sim, (uint32_t)id, (uint32_t)src, (uint32_t)dst, size, start);
    return rc < 0 ? rc : 0;
}

int ub_sim_wl_load_cm(struct ub_sim *sim, FILE *f, uint32_t *line)
{
    char *buf = NULL;
    size_t cap = 0;
    uint64_t nodes = 0, conns = 0, count = 0, v;
    uint32_t ln = 0;
    int rc = 0;
    int got;
    while ((got = ub_sim_text_line(f, &buf, &cap)) != 0) {
        ln++;
        if (got < 0) {
            rc = UB_EBADMSG;
            break;
        }
        char *save = buf;
        char *tok = next_tok(&save);
        if (!tok || tok[0] == '#')
            continue;
        if (strstr(tok, "->")) {
            rc = parse_flow(sim, tok, &save);
            count++;
        } else if (!strcmp(tok, "Nodes") || !strcmp(tok, "Connections") ||
                   !strcmp(tok, "Triggers") || !strcmp(tok, "Failures")) {
            char *val = next_tok(&save);
            if (!val || !ub__num_u64_all(val, 10, &v))
                rc = UB_EBADMSG;
            else if (tok[0] == 'N')
                nodes = v;
            else if (tok[0] == 'C')
                conns = v;
            else if (v)
                rc = UB_ENOTSUP;
        } else if (!strcmp(tok, "trigger") || !strcmp(tok, "failure")) {
            rc = UB_ENOTSUP;
        } else {
            rc = UB_EBADMSG;
        }
        if (rc)
            break;
    }
    free(buf);
    if (!rc && (nodes > sim->nhosts || count != conns))
        rc = UB_EBADMSG;
    if (line)
        *line = rc ? ln : 0;
    return rc;
}
