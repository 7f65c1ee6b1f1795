/* For the PDS tests that drive PDS directly: a packet it can carry and a receiver can parse. */
#ifndef UB_TEST_PDS_SEND8_H
#define UB_TEST_PDS_SEND8_H

#include <string.h>

#include "core/pktbuf.h"
#include "wire/cursor.h"
#include "wire/ses.h"

/* A SEND of `bytes` zeros behind its SES standard header, from pool. */
static inline struct ub__pkt *t_send_pkt(struct ub__pktpool *pool, uint32_t bytes)
{
    struct ub__pkt *p = ub__pkt_alloc(pool);
    assert_non_null(p);
    struct ub__ses_std h = {
        .opcode = UB_SES_OP_SEND, .flags = UB_SES_F_SOM | UB_SES_F_EOM, .request_length = bytes};
    struct ub__wcur w;
    ub__wcur_init(&w, ub__pkt_put(p, UB_SES_STD_SIZE), UB_SES_STD_SIZE);
    assert_int_equal(ub__ses_std_encode(&h, &w), 0);
    memset(ub__pkt_put(p, bytes), 0, bytes);
    return p;
}

/* An 8-byte SEND (zeros). */
static inline struct ub__pkt *t_send8_pkt(struct ub__pktpool *pool)
{
    return t_send_pkt(pool, 8);
}

#endif
