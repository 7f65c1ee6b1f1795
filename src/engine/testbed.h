/*
 * A deterministic test bed: N engines on one loop fabric under a manual
 * clock. Time jumps from one event (an engine timer, a packet becoming
 * deliverable) to the next, so a run of simulated seconds takes as long as
 * the work in it, and equal seeds replay exactly. Used by the unit tests of
 * every protocol layer and by softub-info's self-test.
 */
#ifndef UB_ENGINE_TESTBED_H
#define UB_ENGINE_TESTBED_H

#include <stdbool.h>
#include <stdint.h>

#include "dev/loop.h"
#include "engine/driver.h"
#include "engine/engine.h"

struct ub__tb_node {
    struct ub__engine eng;
    struct ub__dev *dev;
    struct ub__addr addr;
    struct ub__drive_stats drive;
};

struct ub__testbed {
    struct ub__loopnet *net;
    struct ub__tb_node *nodes;
    uint32_t n;
    uint64_t now;
    uint64_t steps;
};

/* Node i's engine gets eng_cfg with seed eng_cfg->seed + i. */
int ub__testbed_create(struct ub__testbed *tb, uint32_t nodes, const struct ub__loopnet_cfg *net,
                       const struct ub__engine_cfg *eng_cfg);
void ub__testbed_destroy(struct ub__testbed *tb);

/* Every node drives once at the current time; returns packets moved. */
int ub__testbed_step(struct ub__testbed *tb);

/*
 * Steps and jumps time until nothing is left to do (no packet pending
 * anywhere, no timer armed), or the next event lies past `until` (the clock
 * then stands at `until`), or max_steps rounds ran. Returns true when it
 * stopped because it was idle.
 */
bool ub__testbed_run(struct ub__testbed *tb, uint64_t until, uint64_t max_steps);

#endif
