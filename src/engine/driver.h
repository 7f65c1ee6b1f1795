/*
 * Drives one engine over one device: the glue every driver repeats, kept in
 * one place. It reads no clock: `now` is the caller's.
 */
#ifndef UB_ENGINE_DRIVER_H
#define UB_ENGINE_DRIVER_H

#include <stdint.h>

#include "dev/dev.h"
#include "engine/engine.h"

#define UB_DRIVE_BATCH 64
/* Packets handed to the device at once: a udp device sorts them by socket, and over several
 * paths a larger window is fewer send calls of longer GSO runs (docs/perf-journal.md,
 * "Bursts": eight paths over veth +7.5 %). */
#define UB_DRIVE_TX_BATCH 256

struct ub__drive_stats {
    uint64_t rounds;
    uint64_t rx_batches, tx_batches;
    uint64_t tx_refused; /* datagrams the device did not accept (full) */
    uint64_t tx_dropped; /* of those, dropped like a NIC would (not shm: those are sent again) */
    uint64_t dev_errors;
};

/*
 * One round at `now`: receive what the device has (in batches), run due
 * timers, hand the engine's output to the device (in batches). Returns the
 * number of packets moved in either direction (device errors are counted
 * in st and do not stop the round).
 */
int ub__drive_once(struct ub__engine *e, struct ub__dev *dev, uint64_t now,
                   struct ub__drive_stats *st);

/*
 * The two halves of a round, for a driver that runs its own layer in between (the API
 * context: responses created from what was just received leave in the same send batch as the
 * ACKs): receive what the device has into the engine; hand the engine's output to the device.
 * ub__drive_once is recv, the due timers, send. Both return the packets moved.
 */
int ub__drive_recv(struct ub__engine *e, struct ub__dev *dev, uint64_t now,
                   struct ub__drive_stats *st);
/*
 * ub__drive_recv for a caller whose own receive of up to UB_DRIVE_BATCH packets into batch
 * (an array of UB_DRIVE_BATCH) returned n, with no yield's leftovers and no one-datagram
 * first receive pending (ub__engine_rx_later false, rx_one_first unset): the rest of the
 * same round.
 */
int ub__drive_recv_from(struct ub__engine *e, struct ub__dev *dev, uint64_t now,
                        struct ub__drive_stats *st, struct ub__pkt **batch, int n);
int ub__drive_send(struct ub__engine *e, struct ub__dev *dev, uint64_t now,
                   struct ub__drive_stats *st);

#endif
