/*
 * Timers: a binary min-heap ordered by (deadline, arming sequence), so timers
 * that fall due at the same nanosecond always fire in the order they were
 * armed. Timers are embedded in their owners; the heap stores pointers.
 * Not thread-safe: one heap per engine.
 */
#ifndef UB_CORE_TIMER_H
#define UB_CORE_TIMER_H

#include <stdbool.h>
#include <stdint.h>

struct ub__timer;
typedef void ub__timer_fn(struct ub__timer *t, uint64_t now);

struct ub__timer {
    uint64_t deadline;
    uint64_t seq; /* tie-break: arming order */
    uint32_t idx; /* position in the heap, UB_TIMER_IDLE when not armed */
    ub__timer_fn *fn;
};
#define UB_TIMER_IDLE UINT32_MAX

struct ub__timers {
    struct ub__timer **heap;
    uint32_t n, cap;
    uint64_t seq;
    uint64_t now; /* the `now` of the expiry in progress */
    bool firing;
};

int ub__timers_init(struct ub__timers *ts, uint32_t cap_hint);
void ub__timers_fini(struct ub__timers *ts);

static inline void ub__timer_init(struct ub__timer *t, ub__timer_fn *fn)
{
    t->deadline = 0;
    t->seq = 0;
    t->idx = UB_TIMER_IDLE;
    t->fn = fn;
}

static inline bool ub__timer_armed(const struct ub__timer *t)
{
    return t->idx != UB_TIMER_IDLE;
}

/*
 * Arms t (re-arming moves it). A timer armed from a callback for a moment
 * already due fires in the next expiry at now + 1 ns, so one expiry call
 * always terminates. Fails only with UB_ENOMEM when the heap must grow.
 */
int ub__timer_arm(struct ub__timers *ts, struct ub__timer *t, uint64_t deadline);
/* Takes an armed t off the heap (ub__timer_cancel without the test). */
void ub__timer_remove(struct ub__timers *ts, struct ub__timer *t);
/* Inline: most cancels find the timer idle. */
static inline void ub__timer_cancel(struct ub__timers *ts, struct ub__timer *t)
{
    if (ub__timer_armed(t))
        ub__timer_remove(ts, t);
}

/* The earliest deadline, or UB_TIME_NEVER. */
uint64_t ub__timers_next(const struct ub__timers *ts);

/* Fires, in order, every timer due at or before now; returns how many fired. */
uint32_t ub__timers_expire(struct ub__timers *ts, uint64_t now);

#endif
