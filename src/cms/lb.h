/*
 * Load balancing (CMS). Internal.
 *
 * Chooses the entropy value (EV) of every packet: the UDP source-port index of
 * the UDP device or the path index of the simulator, in [0, ev_count). A
 * named const vtable with its state embedded in `struct ub__lb`; one per PDC
 * (or per pair of endpoints: the owner decides). ROD must use "single".
 * Feedback comes back per EV from ACKs, NACKs and timeouts. Deterministic:
 * the only randomness is the balancer's own PRNG, seeded by the owner.
 *
 * Algorithms: "single", "oblivious" (round-robin over a fresh random
 * permutation each round), "random", "reps", "bitmap". docs/algorithms.md.
 */
#ifndef UB_CMS_LB_H
#define UB_CMS_LB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/rand.h"

#define UB_LB_MAX_EVS    256u    /* bitmap balancer: penalties for this many EVs */
#define UB_LB_EV_UNKNOWN 0xffffu /* a timeout whose EV the owner did not keep */
#define UB_LB_REPS_SIZE  8u

struct ub__lb_params {
    uint16_t ev_count;  /* number of EVs (paths); 1.. (bitmap: ..UB_LB_MAX_EVS) */
    uint16_t single_ev; /* "single": the EV to use (taken modulo ev_count) */
    bool trimming;      /* the fabric trims (REPS freezes only then) */
    uint64_t seed;
    uint64_t reps_freeze_ns; /* REPS: how long a freeze lasts; 0 = 10 ms */
    /* Bytes of new packets one EV carries before the balancer chooses again (a burst); up
     * to one packet's size: every packet is a choice. docs/algorithms.md, "Bursts". */
    uint32_t burst;
};

struct ub__lb_reps {
    uint16_t ev[UB_LB_REPS_SIZE];
    bool valid[UB_LB_REPS_SIZE];
    uint8_t head;  /* next slot written */
    uint8_t count; /* slots ever written (saturates at the size) */
    uint8_t fresh; /* valid entries: the last `fresh` written */
    uint8_t frozen_head;
    uint8_t explore; /* random EVs still to send after a freeze */
    bool frozen;
    uint64_t thaw_at;
    /* "reps-loss" (softub extension): per-EV loss penalty, as bitmap's (NACK 4, TIMEOUT 15) */
    uint8_t penalty[UB_LB_MAX_EVS];
};

struct ub__lb_rr {
    uint16_t idx; /* position in this round */
    uint16_t mix; /* this round's permutation key */
};

struct ub__lb_bitmap {
    struct ub__lb_rr rr;
    uint8_t penalty[UB_LB_MAX_EVS];
};

struct ub__lb_algo;

/* What an event says about the path of an EV (htsim's PATH_GOOD/ECN/NACK/TIMEOUT). */
enum ub__lb_fb { UB_LB_FB_GOOD, UB_LB_FB_ECN, UB_LB_FB_NACK, UB_LB_FB_TIMEOUT };

struct ub__lb {
    const struct ub__lb_algo *algo;
    struct ub__lb_params p;
    uint16_t burst_ev;   /* the EV of the current burst ... */
    uint32_t burst_left; /* ... and the bytes it still takes */
    struct ub__rng rng;
    union {
        struct ub__lb_rr rr;
        struct ub__lb_reps reps;
        struct ub__lb_bitmap bm;
    } u;
};

struct ub__lb_algo {
    const char *name;
    void (*init)(struct ub__lb *lb);
    uint16_t (*next_ev)(struct ub__lb *lb, uint64_t now);
    /* Path feedback, already classified; NULL for the feedback-blind balancers. */
    void (*feedback)(struct ub__lb *lb, uint16_t ev, enum ub__lb_fb fb, uint64_t now);
};

extern const struct ub__lb_algo ub__lb_single, ub__lb_oblivious, ub__lb_random, ub__lb_reps,
    ub__lb_bitmap, ub__lb_reps_loss;

const struct ub__lb_algo *ub__lb_algo_find(const char *name);
const struct ub__lb_algo *ub__lb_algo_at(size_t i);

/* UB_EINVAL if algo is NULL, ev_count is 0, or too large for the bitmap. */
int ub__lb_init(struct ub__lb *lb, const struct ub__lb_algo *algo,
                const struct ub__lb_params *params);

/*
 * The EV of the next packet (new or retransmitted). Inline, as every packet asks; with one EV
 * (one path, shm) there is nothing to choose, and its ACKs below nothing to learn from.
 */
static inline uint16_t ub__lb_next_ev(struct ub__lb *lb, uint64_t now)
{
    return lb->p.ev_count == 1 ? 0 : lb->algo->next_ev(lb, now);
}
/* Bad news (a mark, a NACK, a congested trim, a timeout) about ev: a burst on it ends. */
static inline void ub__lb_burst_bad(struct ub__lb *lb, uint16_t ev)
{
    if (ev == lb->burst_ev)
        lb->burst_left = 0;
}
/*
 * The EV of a new packet of len bytes: the current burst's while it has room for len, else
 * the balancer's next, which starts a burst (*chosen: it did). A burst is p.burst bytes, but
 * at most an ev_count-th of flight (the bytes in flight before it): at least ev_count choices
 * stay outstanding, as per-packet choices with a window of ev_count packets, so a balancer
 * that learns from them (REPS) keeps as many paths in use, and a flow with little in flight
 * (whose sender has CPU to spare) is sprayed nearly packet by packet. Retransmissions ask
 * ub__lb_next_ev: they go wherever the balancer says, outside any burst.
 */
static inline uint16_t ub__lb_next_ev_new(struct ub__lb *lb, uint32_t len, uint64_t flight,
                                          bool *chosen, uint64_t now)
{
    *chosen = lb->burst_left < len;
    if (!*chosen) {
        lb->burst_left -= len;
        return lb->burst_ev;
    }
    uint16_t ev = ub__lb_next_ev(lb, now);
    uint64_t b = flight / lb->p.ev_count;
    if (b > lb->p.burst)
        b = lb->p.burst;
    lb->burst_ev = ev;
    lb->burst_left = b > len ? (uint32_t)(b - len) : 0;
    return ev;
}
/*
 * An ACK for a packet sent on ev; ecn: it was CE-marked; chosen: the balancer chose its EV
 * (ub__lb_next_ev_new's *chosen; a retransmission's always is). A balancer hears of a good
 * path once per choice, as if a burst were one packet: REPS recycles an EV for each time it
 * handed it out, not for every packet of its bursts, which would pin it to the first EV it
 * tried. A congested one it hears of always, and the burst on that EV ends. Inline, as every
 * ACKed packet says.
 */
static inline void ub__lb_on_ack(struct ub__lb *lb, uint16_t ev, bool ecn, bool chosen,
                                 uint64_t now)
{
    if (lb->p.ev_count == 1) /* one path: nothing to learn, no burst to end */
        return;
    if (ecn)
        ub__lb_burst_bad(lb, ev);
    if (lb->algo->feedback && (chosen || ecn))
        lb->algo->feedback(lb, ev, ecn ? UB_LB_FB_ECN : UB_LB_FB_GOOD, now);
}
/* A congestion NACK (not a trim) for a packet sent on ev. */
void ub__lb_on_nack(struct ub__lb *lb, uint16_t ev, uint64_t now);
/* A trim NACK; last_hop: trimmed at the receiver's downlink (the path was fine). */
void ub__lb_on_trim(struct ub__lb *lb, uint16_t ev, bool last_hop, bool ecn, uint64_t now);
/* A retransmission timeout; ev may be UB_LB_EV_UNKNOWN. */
void ub__lb_on_timeout(struct ub__lb *lb, uint16_t ev, uint64_t now);

#endif
