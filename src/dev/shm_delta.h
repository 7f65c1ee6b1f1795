/*
 * Small datagrams on a shm lane, delta-encoded (src/dev/shm.c; docs/device-shm.md, "Small
 * datagrams").
 *
 * A consumer polls a slot's first cache line; every further line of a datagram is another
 * transfer between the two CPUs' caches after it, on the latency path. An 8-byte SEND is 88
 * bytes of headers and payload, the slot's header 16 more: two lines. Consecutive datagrams
 * of one size on one lane differ in a few 8-byte words (the order and message sequence
 * numbers, the payload), so the producer writes only the words that changed since the last
 * datagram of that size on the lane, and a mask of which; the consumer keeps the same
 * context per lane and rebuilds the datagram. A lane delivers every slot once and in order,
 * which is all this needs: no acknowledgement, no resynchronisation. A context starts empty
 * on both sides (a new producer's first datagram of each size goes whole), and a datagram
 * that does not fit the first line encoded goes whole, resetting its context.
 *
 * Sizes from UB_SHM_DELTA_MIN (shorter ones fit the first line as they are) to
 * UB_SHM_DELTA_MAX (a 16-bit word mask); UB_SHM_DELTA_CTXS contexts per lane, chosen by the
 * size in words, so a lane's requests and its responses keep separate ones.
 */
#ifndef UB_DEV_SHM_DELTA_H
#define UB_DEV_SHM_DELTA_H

#include <stdbool.h>
#include <stdint.h>

#define UB_SHM_DELTA_LINE  64u /* the cache line a consumer polls */
#define UB_SHM_DELTA_BODY  48u /* what follows the slot's 16-byte header in that line */
#define UB_SHM_DELTA_MIN   (UB_SHM_DELTA_BODY + 1u)
#define UB_SHM_DELTA_MAX   128u
#define UB_SHM_DELTA_WORDS (UB_SHM_DELTA_MAX / 8u)
#define UB_SHM_DELTA_CTXS  4u

struct ub__shm_delta_ctx {
    uint64_t w[UB_SHM_DELTA_WORDS]; /* the last datagram, zero after its length */
    uint32_t len;                   /* its length; 0: none yet */
};

/* One direction of one lane: the producer's copy and the consumer's stay equal. */
struct ub__shm_delta {
    struct ub__shm_delta_ctx c[UB_SHM_DELTA_CTXS];
};

/* Whether a datagram of len bytes takes part (its context is updated, encoded or not). */
static inline bool ub__shm_delta_fits(uint32_t len)
{
    return len >= UB_SHM_DELTA_MIN && len <= UB_SHM_DELTA_MAX;
}

/* The context a datagram of len bytes uses. */
static inline uint32_t ub__shm_delta_index(uint32_t len)
{
    return ((len + 7u) / 8u) % UB_SHM_DELTA_CTXS;
}

/*
 * Producer: data (len bytes, ub__shm_delta_fits) becomes its context's new state. Returns the
 * bytes of the encoded body written to out (at most UB_SHM_DELTA_BODY) with *mask the words
 * they are, or 0 when the datagram goes whole (no context of its size yet, or too many
 * changed words). out must have room for len rounded up to 8 bytes: it may be written that
 * far either way.
 */
uint32_t ub__shm_delta_encode(struct ub__shm_delta *d, const uint8_t *data, uint32_t len,
                              uint8_t *out, uint16_t *mask);

/* Consumer: a datagram of len bytes (ub__shm_delta_fits) arrived whole. */
void ub__shm_delta_note(struct ub__shm_delta *d, const uint8_t *data, uint32_t len);

/*
 * Consumer: rebuilds a datagram of len bytes from its body (the mask's words, in order; the
 * body has UB_SHM_DELTA_BODY bytes readable) into out, which has out_room bytes (it may be
 * written up to UB_SHM_DELTA_MAX of them). UB_EBADMSG, nothing changed, when the slot cannot
 * be one the producer wrote: no context of that length, a mask beyond the datagram's words or
 * more words than the body holds.
 */
int ub__shm_delta_decode(struct ub__shm_delta *d, uint32_t len, uint16_t mask, const uint8_t *body,
                         uint8_t *out, uint32_t out_room);

#endif
