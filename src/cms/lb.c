/* Load balancers: single, oblivious, random, REPS, bitmap. */
#include "cms/lb.h"

#include <string.h>

#include "softub/errors.h"

#define REPS_EXPLORE       16u         /* random EVs after a freeze ends */
#define REPS_FREEZE_NS     10000000ULL /* 10 ms */
#define BITMAP_PEN_ECN     1u
#define BITMAP_PEN_NACK    4u
#define BITMAP_PEN_TIMEOUT 15u
#define BITMAP_PEN_MAX     15u

static uint16_t rand_ev(struct ub__lb *lb)
{
    return (uint16_t)ub__rng_below(&lb->rng, lb->p.ev_count);
}

/* ---- round robin over a fresh permutation each round (oblivious) --------- */
static bool pow2(uint16_t n)
{
    return (n & (n - 1)) == 0;
}

static void rr_init(struct ub__lb *lb, struct ub__lb_rr *rr)
{
    rr->idx = 0;
    rr->mix = rand_ev(lb);
}

static uint16_t rr_cur(const struct ub__lb *lb, const struct ub__lb_rr *rr)
{
    uint16_t n = lb->p.ev_count;
    if (pow2(n))
        return (uint16_t)((rr->idx ^ rr->mix) & (n - 1));
    return (uint16_t)((rr->idx + rr->mix) % n);
}

static void rr_advance(struct ub__lb *lb, struct ub__lb_rr *rr)
{
    if (++rr->idx == lb->p.ev_count) {
        rr->idx = 0;
        rr->mix = rand_ev(lb);
    }
}

static void obl_init(struct ub__lb *lb)
{
    rr_init(lb, &lb->u.rr);
}

static uint16_t obl_next(struct ub__lb *lb, uint64_t now)
{
    (void)now;
    uint16_t ev = rr_cur(lb, &lb->u.rr);
    rr_advance(lb, &lb->u.rr);
    return ev;
}

/* ---- single, random --------------------------------------------------------- */
static void nop_init(struct ub__lb *lb)
{
    (void)lb;
}

static uint16_t single_next(struct ub__lb *lb, uint64_t now)
{
    (void)now;
    return (uint16_t)(lb->p.single_ev % lb->p.ev_count);
}

static uint16_t random_next(struct ub__lb *lb, uint64_t now)
{
    (void)now;
    return rand_ev(lb);
}

/* ---- REPS ----------------------------------------------------------------- */
static void reps_add(struct ub__lb_reps *r, uint16_t ev)
{
    if (!r->valid[r->head] && r->fresh < UB_LB_REPS_SIZE)
        r->fresh++;
    r->ev[r->head] = ev;
    r->valid[r->head] = true;
    r->head = (uint8_t)((r->head + 1) % UB_LB_REPS_SIZE);
    if (r->count < UB_LB_REPS_SIZE)
        r->count++;
}

static void reps_feedback(struct ub__lb *lb, uint16_t ev, enum ub__lb_fb fb, uint64_t now)
{
    struct ub__lb_reps *r = &lb->u.reps;
    if (fb == UB_LB_FB_TIMEOUT && !r->frozen && r->explore == 0 && lb->p.trimming) {
        r->frozen = true;
        r->thaw_at = now + lb->p.reps_freeze_ns;
    }
    if (r->frozen && now > r->thaw_at) {
        memset(r, 0, sizeof *r); /* forget the cached EVs, then explore */
        r->explore = REPS_EXPLORE;
    }
    if (fb == UB_LB_FB_GOOD && ev < lb->p.ev_count)
        reps_add(r, ev);
}

static void reps_init(struct ub__lb *lb)
{
    memset(&lb->u.reps, 0, sizeof lb->u.reps);
}

static uint16_t reps_next(struct ub__lb *lb, uint64_t now)
{
    (void)now;
    struct ub__lb_reps *r = &lb->u.reps;
    if (r->explore) {
        r->explore--;
        return rand_ev(lb);
    }
    if (r->frozen) {
        if (r->count == 0)
            return rand_ev(lb);
        /* reuse the cached EVs in turn, whether or not already used */
        uint8_t i = r->frozen_head;
        if (r->valid[i]) {
            r->valid[i] = false;
            r->fresh--;
        }
        r->frozen_head = (uint8_t)((i + 1) % r->count);
        return r->ev[i];
    }
    if (r->fresh == 0)
        return rand_ev(lb);
    uint8_t i = (uint8_t)((r->head + UB_LB_REPS_SIZE - r->fresh) % UB_LB_REPS_SIZE);
    r->valid[i] = false;
    r->fresh--;
    return r->ev[i];
}

/*
 * ---- REPS with loss memory ("reps-loss", a softub extension) -------------------
 * REPS learns only from good ACKs; where the slow path drops without marking (a rate limiter,
 * no ECN, no trimming) every ACK that still returns from it recycles its EV, and a fresh random
 * draw picks it again. Here a NACK (sender-inferred loss) or a timeout on an EV penalises it
 * (NACK 4, TIMEOUT 15, saturating at 15, as bitmap) and drops its cached copies; a good ACK of a
 * penalised EV pays one unit instead of caching it; a random draw (cache empty, or exploring)
 * that lands on a penalised EV pays one unit and draws again, at most REPSL_DRAWS times.
 */
#define REPSL_DRAWS 8

static void repsl_feedback(struct ub__lb *lb, uint16_t ev, enum ub__lb_fb fb, uint64_t now)
{
    struct ub__lb_reps *r = &lb->u.reps;
    if (ev < lb->p.ev_count && (fb == UB_LB_FB_NACK || fb == UB_LB_FB_TIMEOUT)) {
        unsigned p = r->penalty[ev] + (fb == UB_LB_FB_NACK ? BITMAP_PEN_NACK : BITMAP_PEN_TIMEOUT);
        r->penalty[ev] = (uint8_t)(p > BITMAP_PEN_MAX ? BITMAP_PEN_MAX : p);
        for (uint8_t i = 0; i < UB_LB_REPS_SIZE; i++)
            if (r->valid[i] && r->ev[i] == ev)
                r->valid[i] = false; /* no longer offered */
        /* `fresh` counts the newest entries, all valid: keep the run up to the first hole */
        uint8_t f = 0;
        while (f < UB_LB_REPS_SIZE &&
               r->valid[(r->head + UB_LB_REPS_SIZE - 1 - f) % UB_LB_REPS_SIZE])
            f++;
        for (uint8_t j = f; j < UB_LB_REPS_SIZE; j++) /* older ones: dropped as well */
            r->valid[(r->head + UB_LB_REPS_SIZE - 1 - j) % UB_LB_REPS_SIZE] = false;
        r->fresh = f;
    }
    if (fb == UB_LB_FB_GOOD && ev < lb->p.ev_count && r->penalty[ev]) {
        r->penalty[ev]--;
        return;
    }
    uint8_t pen[UB_LB_MAX_EVS];
    bool keep = r->frozen && now > r->thaw_at; /* reps_feedback forgets everything then */
    if (keep)
        memcpy(pen, r->penalty, sizeof pen);
    reps_feedback(lb, ev, fb, now);
    if (keep)
        memcpy(r->penalty, pen, sizeof pen);
}

static uint16_t repsl_rand(struct ub__lb *lb)
{
    struct ub__lb_reps *r = &lb->u.reps;
    uint16_t ev = rand_ev(lb);
    for (unsigned n = 0; n < REPSL_DRAWS && r->penalty[ev]; n++) {
        r->penalty[ev]--;
        ev = rand_ev(lb);
    }
    return ev;
}

static uint16_t repsl_next(struct ub__lb *lb, uint64_t now)
{
    struct ub__lb_reps *r = &lb->u.reps;
    if (r->explore || (!r->frozen && r->fresh == 0) || (r->frozen && r->count == 0)) {
        if (r->explore)
            r->explore--;
        return repsl_rand(lb);
    }
    return reps_next(lb, now);
}

/* ---- bitmap ----------------------------------------------------------------- */
static void bm_init(struct ub__lb *lb)
{
    memset(lb->u.bm.penalty, 0, sizeof lb->u.bm.penalty);
    rr_init(lb, &lb->u.bm.rr);
}

static void bm_feedback(struct ub__lb *lb, uint16_t ev, enum ub__lb_fb fb, uint64_t now)
{
    (void)now;
    static const uint8_t pen[] = {0, BITMAP_PEN_ECN, BITMAP_PEN_NACK, BITMAP_PEN_TIMEOUT};
    if (ev >= lb->p.ev_count)
        return;
    unsigned p = lb->u.bm.penalty[ev] + pen[fb];
    lb->u.bm.penalty[ev] = (uint8_t)(p > BITMAP_PEN_MAX ? BITMAP_PEN_MAX : p);
}

static uint16_t bm_next(struct ub__lb *lb, uint64_t now)
{
    (void)now;
    struct ub__lb_bitmap *b = &lb->u.bm;
    uint16_t ev = rr_cur(lb, &b->rr);
    bool first = true;
    for (uint32_t n = 0; b->penalty[ev] > 0; n++) {
        if (first)
            b->penalty[ev]--; /* decay: one visit pays one unit */
        first = false;
        if (n >= lb->p.ev_count)
            break; /* everything is penalised: use it anyway */
        rr_advance(lb, &b->rr);
        ev = rr_cur(lb, &b->rr);
    }
    rr_advance(lb, &b->rr);
    return ev;
}

/* ---- the vtables ----------------------------------------------------------- */
const struct ub__lb_algo ub__lb_single = {
    .name = "single", .init = nop_init, .next_ev = single_next};
const struct ub__lb_algo ub__lb_oblivious = {
    .name = "oblivious", .init = obl_init, .next_ev = obl_next};
const struct ub__lb_algo ub__lb_random = {
    .name = "random", .init = nop_init, .next_ev = random_next};
const struct ub__lb_algo ub__lb_reps = {
    .name = "reps", .init = reps_init, .next_ev = reps_next, .feedback = reps_feedback};
const struct ub__lb_algo ub__lb_reps_loss = {
    .name = "reps-loss", .init = reps_init, .next_ev = repsl_next, .feedback = repsl_feedback};
const struct ub__lb_algo ub__lb_bitmap = {
    .name = "bitmap", .init = bm_init, .next_ev = bm_next, .feedback = bm_feedback};

static const struct ub__lb_algo *const lb_algos[] = {
    &ub__lb_single, &ub__lb_oblivious, &ub__lb_random,
    &ub__lb_reps,   &ub__lb_bitmap,    &ub__lb_reps_loss,
};

const struct ub__lb_algo *ub__lb_algo_find(const char *name)
{
    if (name == NULL)
        return NULL;
    for (size_t i = 0; i < sizeof lb_algos / sizeof lb_algos[0]; i++)
        if (strcmp(lb_algos[i]->name, name) == 0)
            return lb_algos[i];
    return NULL;
}

const struct ub__lb_algo *ub__lb_algo_at(size_t i)
{
    return i < sizeof lb_algos / sizeof lb_algos[0] ? lb_algos[i] : NULL;
}

int ub__lb_init(struct ub__lb *lb, const struct ub__lb_algo *algo,
                const struct ub__lb_params *params)
{
    if (lb == NULL || algo == NULL || params == NULL || params->ev_count == 0)
        return UB_EINVAL;
    if ((algo == &ub__lb_bitmap || algo == &ub__lb_reps_loss) && params->ev_count > UB_LB_MAX_EVS)
        return UB_EINVAL;
    memset(lb, 0, sizeof *lb);
    lb->algo = algo;
    lb->p = *params;
    if (lb->p.reps_freeze_ns == 0)
        lb->p.reps_freeze_ns = REPS_FREEZE_NS;
    ub__rng_seed(&lb->rng, params->seed);
    algo->init(lb);
    return 0;
}

/* Path feedback other than a clean ACK; a bad word on the burst's EV ends the burst. */
static void feedback(struct ub__lb *lb, uint16_t ev, enum ub__lb_fb fb, uint64_t now)
{
    if (fb != UB_LB_FB_GOOD)
        ub__lb_burst_bad(lb, ev);
    if (lb->algo->feedback)
        lb->algo->feedback(lb, ev, fb, now);
}

void ub__lb_on_nack(struct ub__lb *lb, uint16_t ev, uint64_t now)
{
    feedback(lb, ev, UB_LB_FB_NACK, now);
}

void ub__lb_on_trim(struct ub__lb *lb, uint16_t ev, bool last_hop, bool ecn, uint64_t now)
{
    feedback(lb, ev, last_hop ? (ecn ? UB_LB_FB_ECN : UB_LB_FB_GOOD) : UB_LB_FB_NACK, now);
}

void ub__lb_on_timeout(struct ub__lb *lb, uint16_t ev, uint64_t now)
{
    feedback(lb, ev, UB_LB_FB_TIMEOUT, now);
}
