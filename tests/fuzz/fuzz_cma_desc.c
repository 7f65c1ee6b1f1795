/*
 * Fuzz target: the single-copy descriptor a request carries (ub__tgt_cma_parse): where in its
 * process the initiator's data lies, which the target then copies from or into. The input:
 * byte 0 picks the request's opcode, bytes 1-8 its length, the rest is the descriptor.
 * Invariants: the parse returns OK or a refusal code and leaves nothing allocated on
 * refusal; an accepted descriptor is one of WRITE, READ or SEND, names 1..UB_SES_CMA_MAX_SEG
 * segments, each as the descriptor says, none wrapping around the address space, whose
 * lengths add up to the request's length exactly.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ses/ses_tgt.h"
#include "fuzz.h"

static uint64_t be(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint8_t ops[] = {UB_SES_OP_WRITE, UB_SES_OP_READ, UB_SES_OP_SEND,
                                  UB_SES_OP_FETCHING_ATOMIC};
    if (size < 9 || size - 9 > UINT32_MAX)
        return 0;
    struct ub__rxmsg m;
    memset(&m, 0, sizeof(m));
    m.op = ops[data[0] % sizeof(ops)];
    /* Mostly lengths a descriptor's segments can add up to: the sum of the first ones. */
    m.len = be(data + 1, 8);
    const uint8_t *p = data + 9;
    uint32_t n = (uint32_t)(size - 9);
    if (data[0] & 0x80 && n >= UB_SES_CMA_HDR) {
        uint64_t sum = 0;
        for (uint32_t off = UB_SES_CMA_HDR; off + UB_SES_CMA_SEG <= n; off += UB_SES_CMA_SEG)
            sum += be(p + off + 8, 8);
        m.len = sum;
    }
    uint8_t rc = ub__tgt_cma_parse(NULL, &m, p, n);
    if (rc != UB_SES_RC_OK) {
        CHECK(rc == UB_SES_RC_UNSUPPORTED_OP || rc == UB_SES_RC_UNSUPPORTED_SIZE ||
              rc == UB_SES_RC_HOST_UNSUCCESS_CMPL);
        CHECK(m.cma_seg == NULL && m.cma_nseg == 0);
        return 0;
    }
    CHECK(m.op == UB_SES_OP_WRITE || m.op == UB_SES_OP_READ || m.op == UB_SES_OP_SEND);
    CHECK(m.cma_nseg >= 1 && m.cma_nseg <= UB_SES_CMA_MAX_SEG);
    CHECK(m.cma_nseg == be(p + 8, 2) && m.cma_until == be(p, 8));
    CHECK(n >= UB_SES_CMA_HDR + m.cma_nseg * UB_SES_CMA_SEG);
    uint64_t total = 0;
    for (uint32_t i = 0; i < m.cma_nseg; i++) {
        const uint8_t *q = p + UB_SES_CMA_HDR + i * UB_SES_CMA_SEG;
        uint64_t a = m.cma_seg[2 * i], l = m.cma_seg[2 * i + 1];
        CHECK(a == be(q, 8) && l == be(q + 8, 8));
        CHECK(a + l >= a && l <= UB_SES_MAX_MSG);
        total += l;
    }
    CHECK(total == m.len);
    free(m.cma_seg);
    return 0;
}
