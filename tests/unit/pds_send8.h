/* For the PDS tests that drive PDS directly: a packet it can carry and a receiver can parse. */
#ifndef UB_TEST_PDS_SEND8_H
#define UB_TEST_PDS_SEND8_H

#include <string.h>

#include "core/pktbuf.h"
#include "wire/cursor.h"
#include "wire/ses.h"

/* An 8-byte SEND (zeros) behind its SES standard header, from pool. */
static inline struct ub__pkt *t_send8_pkt(struct ub__pktpool *pool)
{
    struct ub__pkt *p = ub__pkt_alloc(pool);
    assert_non_null(p);
    struct ub__ses_std h = {
        .opcode = UB_SES_OP_SEND, .flags = UB_SES_F_SOM | UB_SES_F_EOM, .request_length = 8};
    struct ub__wcur w;
    ub__wcur_init(&w, ub__pkt_put(p, UB_SES_STD_SIZE), UB_SES_STD_SIZE);
    assert_int_equal(ub__ses_std_encode(&h, &w), 0);
    memset(ub__pkt_put(p, 8), 0, 8);
    return p;
}

#endif
