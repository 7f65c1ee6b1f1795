#include <string.h>

#include <softub/errors.h>
#include "core/compiler.h"
#include "dev/impair.h"

/* Fixed draw slots per packet, so enabling one rule never shifts another's draws. */
enum { SLOT_DROP, SLOT_DUP, SLOT_CORRUPT, SLOT_REORDER, SLOT_DEPTH, SLOT_JITTER, SLOT_CE, SLOTS };

/* Uniform in [0, bound) from one 64-bit draw (bias below bound / 2^64). */
static uint64_t scale(uint64_t u, uint64_t bound)
{
    return (uint64_t)(((unsigned __int128)u * bound) >> 64);
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a + b < a ? UINT64_MAX : a + b;
}

static bool chance(uint64_t u, uint32_t ppm)
{
    return scale(u, UB_IMPAIR_PPM) < ppm;
}

int ub__impair_cfg_check(const struct ub__impair_cfg *cfg)
{
    if (!cfg)
        return UB_EINVAL;
    if (cfg->drop_ppm > UB_IMPAIR_PPM || cfg->dup_ppm > UB_IMPAIR_PPM ||
        cfg->corrupt_ppm > UB_IMPAIR_PPM || cfg->reorder_ppm > UB_IMPAIR_PPM ||
        cfg->ce_ppm > UB_IMPAIR_PPM)
        return UB_ERANGE;
    if (cfg->corrupt_bits > UB_IMPAIR_MAX_FLIPS || cfg->reorder_depth > UB_IMPAIR_MAX_DEPTH)
        return UB_ERANGE;
    if (cfg->nrules > UB_IMPAIR_MAX_RULES)
        return UB_ERANGE;
    for (uint32_t i = 0; i < cfg->nrules; i++) {
        const struct ub__impair_rule *r = &cfg->rules[i];
        switch (r->kind) {
        case UB_IMPAIR_DROP_EVERY:
            if (r->a == 0)
                return UB_EINVAL;
            break;
        case UB_IMPAIR_DROP_CYCLE:
            if (r->a + r->b == 0 || r->a + r->b < r->a)
                return UB_EINVAL;
            break;
        case UB_IMPAIR_CORRUPT_NTH:
            if (r->b == 0 || r->b > UB_IMPAIR_MAX_FLIPS)
                return UB_ERANGE;
            break;
        case UB_IMPAIR_DUP_NTH:
            if (r->b == 0 || r->b > UB_IMPAIR_MAX_DUPS)
                return UB_ERANGE;
            break;
        case UB_IMPAIR_REORDER_NTH:
            if (r->b == 0 || r->b > UB_IMPAIR_MAX_DEPTH)
                return UB_ERANGE;
            break;
        case UB_IMPAIR_DROP_NTH:
        case UB_IMPAIR_DROP_BURST:
        case UB_IMPAIR_BLACKHOLE_PKT:
        case UB_IMPAIR_BLACKHOLE_TIME:
        case UB_IMPAIR_CORRUPT_BIT:
        case UB_IMPAIR_DELAY_NTH:
        case UB_IMPAIR_CE_NTH:
            break;
        case UB_IMPAIR_PATH_DROP:
        case UB_IMPAIR_PATH_CE:
            if (r->b > UB_IMPAIR_PPM)
                return UB_ERANGE;
            break;
        default:
            return UB_EINVAL;
        }
    }
    return 0;
}

bool ub__impair_cfg_active(const struct ub__impair_cfg *cfg)
{
    return cfg && (cfg->drop_ppm || cfg->dup_ppm || cfg->corrupt_ppm || cfg->reorder_ppm ||
                   cfg->ce_ppm || cfg->delay_ns || cfg->jitter_ns || cfg->nrules);
}

int ub__impair_add(struct ub__impair_cfg *cfg, enum ub__impair_kind kind, uint64_t a, uint64_t b,
                   uint64_t c)
{
    if (kind <= UB_IMPAIR_NONE || kind >= UB_IMPAIR_KIND_COUNT)
        return UB_EINVAL;
    if (cfg->nrules >= UB_IMPAIR_MAX_RULES)
        return UB_EFULL;
    struct ub__impair_rule *r = &cfg->rules[cfg->nrules++];
    r->kind = (uint32_t)kind;
    r->a = a;
    r->b = b;
    r->c = c;
    return 0;
}

int ub__impair_add_drop_list(struct ub__impair_cfg *cfg, const uint64_t *idx, uint32_t n)
{
    if (n > UB_IMPAIR_MAX_RULES - cfg->nrules)
        return UB_EFULL;
    for (uint32_t i = 0; i < n; i++)
        ub__impair_add(cfg, UB_IMPAIR_DROP_NTH, idx[i], 0, 0);
    return 0;
}

static void impair_load(struct ub__impair *im, const struct ub__impair_cfg *cfg, uint64_t salt)
{
    struct ub__rng root;
    im->cfg = *cfg;
    ub__rng_seed(&root, cfg->seed);
    ub__rng_fork(&im->base, &root, salt);
    im->next = 0;
}

int ub__impair_init(struct ub__impair *im, const struct ub__impair_cfg *cfg, uint64_t salt)
{
    int rc = ub__impair_cfg_check(cfg);
    if (rc)
        return rc;
    memset(im, 0, sizeof(*im));
    impair_load(im, cfg, salt);
    return 0;
}

int ub__impair_set(struct ub__impair *im, const struct ub__impair_cfg *cfg, uint64_t salt)
{
    int rc = ub__impair_cfg_check(cfg);
    if (rc)
        return rc;
    impair_load(im, cfg, salt);
    return 0;
}

static bool has_flip(const struct ub__impair_decision *d, uint32_t bit)
{
    for (uint32_t i = 0; i < d->nflips; i++)
        if (d->flips[i] == bit)
            return true;
    return false;
}

/* Adds up to n distinct random bit positions below nbits. */
static void add_random_flips(struct ub__impair_decision *d, struct ub__rng *r, uint64_t n,
                             uint64_t nbits)
{
    for (uint64_t k = 0; k < n && d->nflips < UB_IMPAIR_MAX_FLIPS && d->nflips < nbits; k++) {
        uint32_t bit;
        /* nflips < nbits, so a free position exists; rejection ends quickly in practice. */
        do
            bit = (uint32_t)ub__rng_below(r, nbits);
        while (has_flip(d, bit));
        d->flips[d->nflips++] = bit;
    }
}

void ub__impair_decide(struct ub__impair *im, uint64_t now, uint32_t len,
                       struct ub__impair_decision *d)
{
    ub__impair_decide_path(im, now, len, UB_IMPAIR_ANY_PATH, d);
}

/* A uniform draw for per-path rule k of a packet, independent of the packet's other draws. */
static uint64_t path_draw(uint64_t u, uint32_t k)
{
    return ub__mix64(u ^ (0x7061746800000000ull + k)); /* "path" */
}

void ub__impair_decide_path(struct ub__impair *im, uint64_t now, uint32_t len, uint32_t path,
                            struct ub__impair_decision *d)
{
    const struct ub__impair_cfg *cfg = &im->cfg;
    uint64_t i = im->next++;
    uint64_t nbits = (uint64_t)len * 8;
    struct ub__rng r;
    uint64_t u[SLOTS];

    memset(d, 0, sizeof(*d));
    d->index = i;
    im->stats.offered++;

    ub__rng_fork(&r, &im->base, i);
    for (int s = 0; s < SLOTS; s++)
        u[s] = ub__rng_next(&r);

    /* Drops first: a dropped packet has no other fate. */
    uint32_t drop = UB_IMPAIR_PASS;
    uint64_t script_dups = 0, script_delay = 0, script_bits = 0;
    uint32_t script_hold = 0;
    bool script_ce = false;
    for (uint32_t k = 0; k < cfg->nrules; k++) {
        const struct ub__impair_rule *ru = &cfg->rules[k];
        switch (ru->kind) {
        case UB_IMPAIR_BLACKHOLE_PKT:
            if (i >= ru->a)
                drop = UB_IMPAIR_DROP_BLACKHOLE;
            break;
        case UB_IMPAIR_BLACKHOLE_TIME:
            if (now >= ru->a)
                drop = UB_IMPAIR_DROP_BLACKHOLE;
            break;
        case UB_IMPAIR_DROP_NTH:
            if (i == ru->a && drop == UB_IMPAIR_PASS)
                drop = UB_IMPAIR_DROP_SCRIPT;
            break;
        case UB_IMPAIR_DROP_EVERY:
            if (i >= ru->b && (i - ru->b) % ru->a == ru->a - 1 && drop == UB_IMPAIR_PASS)
                drop = UB_IMPAIR_DROP_SCRIPT;
            break;
        case UB_IMPAIR_DROP_BURST:
            if (i >= ru->a && i - ru->a < ru->b && drop == UB_IMPAIR_PASS)
                drop = UB_IMPAIR_DROP_SCRIPT;
            break;
        case UB_IMPAIR_DROP_CYCLE:
            if (i >= ru->c && (i - ru->c) % (ru->a + ru->b) < ru->a && drop == UB_IMPAIR_PASS)
                drop = UB_IMPAIR_DROP_SCRIPT;
            break;
        case UB_IMPAIR_CORRUPT_NTH:
            if (i == ru->a)
                script_bits += ru->b;
            break;
        case UB_IMPAIR_CORRUPT_BIT:
            /* Explicit positions go first so random ones avoid them. */
            if (i == ru->a && ru->b < nbits && d->nflips < UB_IMPAIR_MAX_FLIPS &&
                !has_flip(d, (uint32_t)ru->b))
                d->flips[d->nflips++] = (uint32_t)ru->b;
            break;
        case UB_IMPAIR_DUP_NTH:
            if (i == ru->a)
                script_dups += ru->b;
            break;
        case UB_IMPAIR_DELAY_NTH:
            if (i == ru->a)
                script_delay = sat_add(script_delay, ru->b);
            break;
        case UB_IMPAIR_REORDER_NTH:
            if (i == ru->a)
                script_hold = (uint32_t)UB_MAX(script_hold, ru->b);
            break;
        case UB_IMPAIR_CE_NTH:
            if (i == ru->a)
                script_ce = true;
            break;
        case UB_IMPAIR_PATH_DROP:
            if (path == ru->a && drop == UB_IMPAIR_PASS &&
                chance(path_draw(u[SLOT_DROP], k), (uint32_t)ru->b))
                drop = UB_IMPAIR_DROP_SCRIPT;
            break;
        case UB_IMPAIR_PATH_CE:
            if (path == ru->a && chance(path_draw(u[SLOT_CE], k), (uint32_t)ru->b))
                script_ce = true;
            break;
        default:
            break;
        }
    }
    if (drop == UB_IMPAIR_PASS && chance(u[SLOT_DROP], cfg->drop_ppm))
        drop = UB_IMPAIR_DROP_RANDOM;
    if (drop != UB_IMPAIR_PASS) {
        memset(d, 0, sizeof(*d));
        d->index = i;
        d->drop = drop;
        im->stats.dropped++;
        if (drop == UB_IMPAIR_DROP_RANDOM)
            im->stats.dropped_random++;
        else if (drop == UB_IMPAIR_DROP_SCRIPT)
            im->stats.dropped_script++;
        else
            im->stats.dropped_blackhole++;
        return;
    }

    uint64_t dups = script_dups + (chance(u[SLOT_DUP], cfg->dup_ppm) ? 1 : 0);
    d->dups = (uint32_t)UB_MIN(dups, (uint64_t)UB_IMPAIR_MAX_DUPS);

    uint64_t bits = script_bits;
    if (chance(u[SLOT_CORRUPT], cfg->corrupt_ppm))
        bits += cfg->corrupt_bits ? cfg->corrupt_bits : 1;
    add_random_flips(d, &r, bits, nbits);

    uint32_t hold = script_hold;
    if (chance(u[SLOT_REORDER], cfg->reorder_ppm)) {
        uint64_t depth = cfg->reorder_depth ? cfg->reorder_depth : 1;
        hold = (uint32_t)UB_MAX((uint64_t)hold, 1 + scale(u[SLOT_DEPTH], depth));
    }
    d->hold = hold;

    uint64_t delay = sat_add(cfg->delay_ns, script_delay);
    if (cfg->jitter_ns)
        delay = sat_add(delay, cfg->jitter_ns == UINT64_MAX
                                   ? u[SLOT_JITTER]
                                   : scale(u[SLOT_JITTER], cfg->jitter_ns + 1));
    d->delay_ns = delay;

    d->ce = script_ce || chance(u[SLOT_CE], cfg->ce_ppm);

    im->stats.duplicated += d->dups;
    if (d->nflips) {
        im->stats.corrupted++;
        im->stats.bits_flipped += d->nflips;
    }
    if (d->hold)
        im->stats.reordered++;
    if (d->delay_ns)
        im->stats.delayed++;
    if (d->ce)
        im->stats.ce_marked++;
}

void ub__impair_flip(uint8_t *data, uint32_t len, const struct ub__impair_decision *d)
{
    for (uint32_t k = 0; k < d->nflips; k++) {
        uint32_t bit = d->flips[k];
        if (bit / 8 < len)
            data[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
}
