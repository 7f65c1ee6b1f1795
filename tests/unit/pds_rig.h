/*
 * One PDS instance on its own (no engine, no device), for tests that move packets between
 * instances by hand: its timers, packet pool (64 buffers of 4 KiB + headroom), seeded PRNG,
 * and the upcalls of the test. Embed it first in the test's rig and pass that as arg.
 */
#ifndef UB_TEST_PDS_RIG_H
#define UB_TEST_PDS_RIG_H

#include <string.h>

#include "core/pktbuf.h"
#include "core/rand.h"
#include "core/timer.h"
#include "pds/pds.h"

struct pds_rig {
    struct ub__timers timers;
    struct ub__pktpool pool;
    struct ub__rng rng;
    struct ub__pds *pds;
};

static inline void pds_rig_open(struct pds_rig *r, const struct ub__pds_cfg *cfg, uint64_t seed,
                                const struct ub__pds_upcalls *up, void *arg)
{
    assert_int_equal(ub__timers_init(&r->timers, 16), 0);
    assert_int_equal(ub__pktpool_init(&r->pool, 64, 4096 + 64, 64), 0);
    ub__rng_seed(&r->rng, seed);
    assert_int_equal(ub__pds_create(&r->pds, cfg, &r->timers, &r->pool, &r->rng, NULL), 0);
    ub__pds_set_upcalls(r->pds, up, arg);
}

static inline void pds_rig_close(struct pds_rig *r)
{
    ub__pds_destroy(r->pds, 0);
    ub__pktpool_fini(&r->pool);
    ub__timers_fini(&r->timers);
}

#endif
