/*
 * The event queue: a 4-ary min-heap of (time, seq, event) entries. Entries
 * carry their keys, so sifting compares and moves 24-byte records inside one
 * array and never dereferences an event; cancellation and re-arming are lazy
 * (see struct ub_sim_event), which keeps the heap free of back-pointers.
 */
#include <stdlib.h>

#include <softub/errors.h>
#include "core/grow.h"
#include "sim/sim.h"

int ub_sim_evq_init(struct ub_sim_evq *q, uint32_t cap_hint)
{
    q->n = 0;
    q->cap = cap_hint < 64 ? 64 : cap_hint;
    q->seq = q->now = q->fired = q->orphans = 0;
    q->h = malloc((size_t)q->cap * sizeof(*q->h));
    return q->h ? 0 : UB_ENOMEM;
}

void ub_sim_evq_fini(struct ub_sim_evq *q)
{
    free(q->h);
    q->h = NULL;
    q->n = q->cap = 0;
}

static inline bool ent_less(const struct ub_sim_heap_ent *a, const struct ub_sim_heap_ent *b)
{
    return a->time < b->time || (a->time == b->time && a->seq < b->seq);
}

static void heap_push(struct ub_sim_evq *q, uint64_t t, struct ub_sim_event *ev)
{
    if (q->n == q->cap) {
        /* Growth is amortised and bounded by the number of live events, not packets. */
        struct ub_sim_heap_ent *h = ub__grow(q->h, &q->cap, sizeof(*h), 64);
        if (!h)
            abort();
        q->h = h;
    }
    struct ub_sim_heap_ent e = {.time = t, .seq = q->seq++, .ev = ev};
    ev->qtime = t;
    ev->seq = e.seq;
    uint32_t i = q->n++;
    while (i > 0) {
        uint32_t parent = (i - 1) >> 2;
        if (!ent_less(&e, &q->h[parent]))
            break;
        q->h[i] = q->h[parent];
        i = parent;
    }
    q->h[i] = e;
}

static inline uint32_t min_child(const struct ub_sim_heap_ent *h, uint32_t c, uint32_t n)
{
    if (c + 3 < n) {
        /* Full family: a tournament, so the comparisons do not depend on each other. */
        uint32_t a = ent_less(&h[c + 1], &h[c]) ? c + 1 : c;
        uint32_t b = ent_less(&h[c + 3], &h[c + 2]) ? c + 3 : c + 2;
        return ent_less(&h[b], &h[a]) ? b : a;
    }
    uint32_t best = c;
    for (uint32_t j = c + 1; j < n; j++)
        if (ent_less(&h[j], &h[best]))
            best = j;
    return best;
}

/*
 * Bottom-up deletion: walk the hole down to a leaf along the smaller
 * children, then sift the last entry up from there. The last entry belongs
 * near the bottom, so this saves most comparisons against it.
 */
static void heap_pop(struct ub_sim_evq *q)
{
    struct ub_sim_heap_ent e = q->h[--q->n];
    uint32_t n = q->n, i = 0;
    if (n == 0)
        return;
    struct ub_sim_heap_ent *h = q->h;
    for (;;) {
        uint32_t c = 4 * i + 1;
        if (c >= n)
            break;
        uint32_t best = min_child(h, c, n);
        h[i] = h[best];
        i = best;
    }
    while (i > 0) {
        uint32_t parent = (i - 1) >> 2;
        if (!ent_less(&e, &h[parent]))
            break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = e;
}

void ub_sim_at(struct ub_sim *sim, struct ub_sim_event *ev, uint64_t t)
{
    if (t < sim->evq.now)
        t = sim->evq.now;
    if (ev->armed && ev->qtime <= t) {
        ev->time = t; /* the live entry re-queues itself when it pops */
        return;
    }
    ev->time = t;
    ev->armed = true;
    heap_push(&sim->evq, t, ev);
}

void ub_sim_cancel(struct ub_sim_event *ev)
{
    ev->armed = false;
}

uint64_t ub_sim_evq_peek(const struct ub_sim_evq *q)
{
    return q->n ? q->h[0].time : UB_SIM_NEVER;
}

bool ub_sim_run(struct ub_sim *sim, uint64_t until)
{
    struct ub_sim_evq *q = &sim->evq;
    while (q->n) {
        struct ub_sim_heap_ent e = q->h[0];
        if (e.time > until)
            break;
        heap_pop(q);
        struct ub_sim_event *ev = e.ev;
        if (!ev->armed || ev->seq != e.seq) {
            q->orphans++;
            continue;
        }
        if (ev->time > e.time) {
            heap_push(q, ev->time, ev);
            continue;
        }
        q->now = e.time;
        ev->armed = false;
        q->fired++;
        ev->fn(sim, ev);
        if (sim->stop)
            return true;
    }
    if (q->n == 0)
        return true;
    if (until != UB_SIM_NEVER && q->now < until)
        q->now = until;
    return false;
}
