#include <stdlib.h>

#include <softub/errors.h>
#include "core/clock.h"
#include "core/grow.h"
#include "core/timer.h"

static inline bool before(const struct ub__timer *a, const struct ub__timer *b)
{
    return a->deadline < b->deadline || (a->deadline == b->deadline && a->seq < b->seq);
}

static inline void place(struct ub__timers *ts, uint32_t i, struct ub__timer *t)
{
    ts->heap[i] = t;
    t->idx = i;
}

static void sift_up(struct ub__timers *ts, uint32_t i)
{
    struct ub__timer *t = ts->heap[i];
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (!before(t, ts->heap[parent]))
            break;
        place(ts, i, ts->heap[parent]);
        i = parent;
    }
    place(ts, i, t);
}

static void sift_down(struct ub__timers *ts, uint32_t i)
{
    struct ub__timer *t = ts->heap[i];
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= ts->n)
            break;
        if (c + 1 < ts->n && before(ts->heap[c + 1], ts->heap[c]))
            c++;
        if (!before(ts->heap[c], t))
            break;
        place(ts, i, ts->heap[c]);
        i = c;
    }
    place(ts, i, t);
}

int ub__timers_init(struct ub__timers *ts, uint32_t cap_hint)
{
    ts->n = 0;
    ts->seq = 0;
    ts->now = 0;
    ts->firing = false;
    ts->cap = cap_hint ? cap_hint : 16;
    ts->heap = calloc(ts->cap, sizeof(*ts->heap));
    return ts->heap ? 0 : UB_ENOMEM;
}

void ub__timers_fini(struct ub__timers *ts)
{
    for (uint32_t i = 0; i < ts->n; i++)
        ts->heap[i]->idx = UB_TIMER_IDLE;
    free(ts->heap);
    ts->heap = 0;
    ts->n = ts->cap = 0;
}

static void remove_at(struct ub__timers *ts, uint32_t i)
{
    struct ub__timer *t = ts->heap[i];
    struct ub__timer *last = ts->heap[--ts->n];
    t->idx = UB_TIMER_IDLE;
    if (i == ts->n)
        return;
    place(ts, i, last);
    if (i > 0 && before(last, ts->heap[(i - 1) / 2]))
        sift_up(ts, i);
    else
        sift_down(ts, i);
}

int ub__timer_arm(struct ub__timers *ts, struct ub__timer *t, uint64_t deadline)
{
    if (ts->firing && deadline <= ts->now)
        deadline = ts->now + 1;
    if (ub__timer_armed(t))
        remove_at(ts, t->idx);
    if (ts->n == ts->cap) {
        struct ub__timer **h = ub__grow(ts->heap, &ts->cap, sizeof(*h), 16);
        if (!h)
            return UB_ENOMEM;
        ts->heap = h;
    }
    t->deadline = deadline;
    t->seq = ts->seq++;
    place(ts, ts->n++, t);
    sift_up(ts, t->idx);
    return 0;
}

void ub__timer_remove(struct ub__timers *ts, struct ub__timer *t)
{
    remove_at(ts, t->idx);
}

uint64_t ub__timers_next(const struct ub__timers *ts)
{
    return ts->n ? ts->heap[0]->deadline : UB_TIME_NEVER;
}

uint32_t ub__timers_expire(struct ub__timers *ts, uint64_t now)
{
    uint32_t fired = 0;
    ts->firing = true;
    ts->now = now;
    while (ts->n && ts->heap[0]->deadline <= now) {
        struct ub__timer *t = ts->heap[0];
        remove_at(ts, 0);
        fired++;
        t->fn(t, now);
    }
    ts->firing = false;
    return fired;
}
