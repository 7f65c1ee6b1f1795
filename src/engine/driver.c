#include "engine/driver.h"

#include "core/compiler.h"

/* Notes whether a receive that took anything yielded: the last four, newest in bit 0. */
static void note_yield(struct ub__engine *e, bool yielded)
{
    e->rx_ylog = (uint8_t)(((unsigned)e->rx_ylog << 1 | (yielded ? 1u : 0u)) & 15u);
}

/* The device's receives, the first of which took n (a negative error, 0 or more) of at most
 * max into batch; moved: what the round took before (a yield's leftovers). */
static UB_ALWAYS_INLINE int recv_batches(struct ub__engine *e, struct ub__dev *dev, uint64_t now,
                                         struct ub__drive_stats *st, struct ub__pkt **batch,
                                         uint32_t max, int n, int moved)
{
    bool yielded = false;
    int batched = 0;
    for (;; max = UB_DRIVE_BATCH, n = ub__dev_recv(dev, batch, max, &e->pool)) {
        if (n < 0) {
            /* Still run timers and send: sending is what returns buffers to an empty pool. */
            st->dev_errors++;
            return moved;
        }
        if (n == 0)
            break;
        st->rx_batches++;
        yielded = ub__engine_input(e, batch, (uint32_t)n, now);
        moved += n;
        if (max == 1) {
            e->stats.rx_alone++;
            if (yielded) { /* the backlog behind it is unknown: the next receive looks */
                e->rx_small = false;
                note_yield(e, true);
                return moved;
            }
            continue;
        }
        batched += n;
        if (yielded || (uint32_t)n < max)
            break;
    }
    if (moved)
        note_yield(e, yielded);
    e->rx_small = batched <= UB_ENGINE_YIELD_REST;
    return moved;
}

int ub__drive_recv(struct ub__engine *e, struct ub__dev *dev, uint64_t now,
                   struct ub__drive_stats *st)
{
    struct ub__pkt *batch[UB_DRIVE_BATCH];
    int moved = 0;
    if (ub__engine_rx_later(e)) { /* what a yield left: before anything newer */
        moved = (int)ub__ring_count(&e->rx_later);
        if (ub__engine_input_later(e, now)) {
            note_yield(e, true);
            return moved;
        }
    }
    /* Alone: see engine.h. A batch takes the device's backlog: whether it was small. */
    uint32_t max = e->rx_one_first && e->rx_small && e->rx_ylog ? 1 : UB_DRIVE_BATCH;
    return recv_batches(e, dev, now, st, batch, max, ub__dev_recv(dev, batch, max, &e->pool),
                        moved);
}

int ub__drive_recv_from(struct ub__engine *e, struct ub__dev *dev, uint64_t now,
                        struct ub__drive_stats *st, struct ub__pkt **batch, int n)
{
    return recv_batches(e, dev, now, st, batch, UB_DRIVE_BATCH, n, 0);
}

/* Hands batch[0, n) to the device; returns how many it took. What it did not take is with
 * the engine again (shm: a full lane, sent again next time) or dropped. */
static UB_ALWAYS_INLINE uint32_t hand_out(struct ub__engine *e, struct ub__dev *dev,
                                          struct ub__pkt **batch, uint32_t n,
                                          struct ub__drive_stats *st)
{
    st->tx_batches++;
    int sent = ub__dev_send(dev, batch, n);
    if (sent < 0) { /* not a full lane: nothing to hold back for */
        st->dev_errors++;
        for (uint32_t i = 0; i < n; i++)
            ub__pkt_free(batch[i]);
        st->tx_refused += n;
        st->tx_dropped += n;
        return 0;
    }
    if ((uint32_t)sent < n) {
        st->tx_refused += n - (uint32_t)sent;
        st->tx_dropped += ub__engine_requeue(e, batch + sent, n - (uint32_t)sent);
    }
    return (uint32_t)sent;
}

int ub__drive_send(struct ub__engine *e, struct ub__dev *dev, uint64_t now,
                   struct ub__drive_stats *st)
{
    /* ub__engine_pending, asking PDS also whether its output is one link-path packet. */
    bool queued = ub__engine_queued(e);
    int pds = ub__pds_output(e->pds);
    /* Nothing to hand out (an idle poll): ub__engine_output would return 0. */
    if (!queued && pds == UB_PDS_OUT_NONE)
        return 0;
    struct ub__pkt *batch[UB_DRIVE_TX_BATCH];
    /* A ping-pong's answer over shm, alone: without the rounds of ub__engine_output (which
     * also keeps a parked peer's packets back). */
    if (!queued && pds == UB_PDS_OUT_LINK_ONE && !e->held_parked &&
        (batch[0] = ub__engine_output_link_one(e, now)))
        return (int)hand_out(e, dev, batch, 1, st);
    int moved = 0;
    for (;;) {
        uint32_t n = ub__engine_output(e, batch, UB_DRIVE_TX_BATCH, now);
        if (n == 0)
            break;
        uint32_t sent = hand_out(e, dev, batch, n, st);
        moved += (int)sent;
        if (sent < n || n < UB_DRIVE_TX_BATCH)
            break; /* the device is full (try again next round), or the engine is empty */
    }
    return moved;
}

int ub__drive_once(struct ub__engine *e, struct ub__dev *dev, uint64_t now,
                   struct ub__drive_stats *st)
{
    st->rounds++;
    int moved = ub__drive_recv(e, dev, now, st);
    if (ub__engine_next_deadline(e) <= now)
        ub__engine_expire(e, now);
    return moved + ub__drive_send(e, dev, now, st);
}
