/*
 * A deterministic impaired-link model: a pure decision engine. For every
 * packet offered to one link direction (numbered 0, 1, 2, ... in offer
 * order) it decides drop / duplicate / corrupt (which bits) / delay /
 * reorder (hold back until overtaken by D later packets) / mark CE. It owns
 * no queue and reads no clock: the device that carries the packets (the
 * loop fabric) applies the decision, and passes `now` in for time rules.
 *
 * Two kinds of rules, freely combined:
 *  - seeded random rules: probabilities in ppm, fixed delay plus uniform
 *    jitter;
 *  - scripted rules (struct ub__impair_rule): drop packet N, every k-th,
 *    a burst, a drop/pass cycle, a black hole from packet N or time T,
 *    corrupt / duplicate / delay / reorder / CE-mark packet N, and per-path
 *    (entropy value) drop or CE-mark probabilities, so load balancers can be
 *    shown to steer away from one bad path of a direction.
 *
 * Reproducibility: the random draws for packet N come from a stream forked
 * from (seed, salt, N) alone, so packet N's fate depends only on the seed,
 * its number, its length, `now` and the rules, never on what happened to
 * other packets. Equal seeds and equal offers give equal decisions.
 */
#ifndef UB_DEV_IMPAIR_H
#define UB_DEV_IMPAIR_H

#include <stdbool.h>
#include <stdint.h>

#include "core/rand.h"

#define UB_IMPAIR_MAX_RULES 64
#define UB_IMPAIR_MAX_DEPTH 64 /* largest reorder depth (overtaking packets) */
#define UB_IMPAIR_MAX_FLIPS 16 /* largest number of bits flipped in one packet */
#define UB_IMPAIR_MAX_DUPS  16 /* largest number of extra copies of one packet */
#define UB_IMPAIR_PPM       1000000u
/* Longest a reordered packet is held when reorder_timeout_ns is 0. */
#define UB_IMPAIR_DEFAULT_HOLD_NS 1000000ull

enum ub__impair_kind {
    UB_IMPAIR_NONE = 0,
    UB_IMPAIR_DROP_NTH,       /* a: packet number */
    UB_IMPAIR_DROP_EVERY,     /* a: k >= 1, b: offset: drops b+k-1, b+2k-1, ... */
    UB_IMPAIR_DROP_BURST,     /* drops [a, a+b) */
    UB_IMPAIR_DROP_CYCLE,     /* from c on: drop a, pass b, drop a, ... (a+b >= 1) */
    UB_IMPAIR_BLACKHOLE_PKT,  /* drops every packet from number a on */
    UB_IMPAIR_BLACKHOLE_TIME, /* drops every packet offered at now >= a (ns) */
    UB_IMPAIR_CORRUPT_NTH,    /* a: packet, b: bits to flip (>= 1) at random positions */
    UB_IMPAIR_CORRUPT_BIT,    /* a: packet, b: bit to flip (byte b/8, mask 1 << b%8) */
    UB_IMPAIR_DUP_NTH,        /* a: packet, b: extra copies (>= 1) */
    UB_IMPAIR_DELAY_NTH,      /* a: packet, b: extra delay, ns */
    UB_IMPAIR_REORDER_NTH,    /* a: packet, b: overtaken by up to b later packets (1..64) */
    UB_IMPAIR_CE_NTH,         /* a: packet: mark CE if it is ECN-capable */
    UB_IMPAIR_PATH_DROP,      /* a: path, b: ppm: drops packets sent on that path */
    UB_IMPAIR_PATH_CE,        /* a: path, b: ppm: CE-marks ECN-capable packets on that path */
    UB_IMPAIR_KIND_COUNT
};

struct ub__impair_rule {
    uint32_t kind; /* enum ub__impair_kind */
    uint64_t a, b, c;
};

/*
 * One direction's rules. All-zero means a perfect link. The last two fields
 * are for the carrier (how long a reordered packet may be held, whether
 * delays may reorder); the decision engine only stores them.
 */
struct ub__impair_cfg {
    uint64_t seed;
    uint32_t drop_ppm;
    uint32_t dup_ppm; /* one extra copy */
    uint32_t corrupt_ppm;
    uint32_t corrupt_bits; /* bits flipped by a random corruption; 0 means 1 */
    uint32_t reorder_ppm;
    uint32_t reorder_depth;      /* a held packet is overtaken by 1..depth later ones; 0 means 1 */
    uint32_t ce_ppm;             /* CE-mark ECN-capable packets */
    uint64_t delay_ns;           /* added to every packet */
    uint64_t jitter_ns;          /* plus uniform in [0, jitter_ns] */
    uint64_t reorder_timeout_ns; /* a hold ends after this at the latest; 0: default */
    bool fifo;                   /* delays never reorder this direction's packets */
    uint32_t nrules;
    struct ub__impair_rule rules[UB_IMPAIR_MAX_RULES];
};

enum ub__impair_drop {
    UB_IMPAIR_PASS = 0,
    UB_IMPAIR_DROP_RANDOM,
    UB_IMPAIR_DROP_SCRIPT,
    UB_IMPAIR_DROP_BLACKHOLE,
};

/* The fate of one offered packet. A dropped packet has no other effect. */
struct ub__impair_decision {
    uint64_t index;    /* offer number since the rules were set */
    uint64_t delay_ns; /* extra one-way delay, jitter included */
    uint32_t drop;     /* enum ub__impair_drop */
    uint32_t dups;     /* extra (uncorrupted) copies */
    uint32_t hold;     /* reorder: overtaken by up to this many later packets; 0 none */
    uint32_t nflips;   /* distinct bit positions to flip, all < 8 * len */
    uint32_t flips[UB_IMPAIR_MAX_FLIPS];
    bool ce; /* mark CE (only meaningful for ECN-capable packets) */
};

struct ub__impair_stats {
    uint64_t offered;
    uint64_t dropped; /* = random + script + blackhole */
    uint64_t dropped_random;
    uint64_t dropped_script;
    uint64_t dropped_blackhole;
    uint64_t duplicated; /* extra copies decided */
    uint64_t corrupted;  /* packets with at least one flipped bit */
    uint64_t bits_flipped;
    uint64_t reordered; /* packets held back */
    uint64_t delayed;   /* packets with extra delay > 0 */
    uint64_t ce_marked; /* CE decisions */
};

struct ub__impair {
    struct ub__impair_cfg cfg;
    struct ub__rng base; /* never advanced: packet streams fork from it */
    uint64_t next;       /* number of the next offer */
    struct ub__impair_stats stats;
};

/* 0 if cfg is usable, UB_EINVAL / UB_ERANGE otherwise. */
int ub__impair_cfg_check(const struct ub__impair_cfg *cfg);

/* True when cfg can affect a packet (any probability, delay or rule). */
bool ub__impair_cfg_active(const struct ub__impair_cfg *cfg);

/* Appends a scripted rule; UB_EFULL when the table is full, UB_EINVAL for a bad kind. */
int ub__impair_add(struct ub__impair_cfg *cfg, enum ub__impair_kind kind, uint64_t a, uint64_t b,
                   uint64_t c);
/* One DROP_NTH rule per listed packet; all or nothing. */
int ub__impair_add_drop_list(struct ub__impair_cfg *cfg, const uint64_t *idx, uint32_t n);

/*
 * Starts a model with cfg (checked; numbering at 0, counters zeroed).
 * salt decorrelates directions that share a seed (the loop fabric passes a
 * value derived from its own seed and the direction; standalone use: 0).
 */
int ub__impair_init(struct ub__impair *im, const struct ub__impair_cfg *cfg, uint64_t salt);

/* Replaces the rules: numbering restarts at 0, counters keep accumulating. */
int ub__impair_set(struct ub__impair *im, const struct ub__impair_cfg *cfg, uint64_t salt);

/* Decides the fate of the next offered packet of len bytes, offered at now. */
void ub__impair_decide(struct ub__impair *im, uint64_t now, uint32_t len,
                       struct ub__impair_decision *d);
/*
 * The same for a packet sent on `path` (its entropy value, as the carrier
 * numbers it): the PATH_* rules apply to it. ub__impair_decide() is this with
 * UB_IMPAIR_ANY_PATH, which no PATH_* rule matches. The per-path draws come
 * from the packet's own stream after every other draw, so adding a PATH_*
 * rule never changes another rule's decisions.
 */
#define UB_IMPAIR_ANY_PATH UINT32_MAX
void ub__impair_decide_path(struct ub__impair *im, uint64_t now, uint32_t len, uint32_t path,
                            struct ub__impair_decision *d);

/* Flips d's bits in data[0..len) (positions beyond len are ignored). */
void ub__impair_flip(uint8_t *data, uint32_t len, const struct ub__impair_decision *d);

#endif
