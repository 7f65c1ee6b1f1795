/* Work requests the API tests build, over loop fabrics and real devices alike. */
#ifndef UB_TEST_WR_UTIL_H
#define UB_TEST_WR_UTIL_H

#include <stdint.h>
#include <string.h>

#include <softub/softub.h>

/* A signalled RMA request (op: WRITE, READ) of sg's bytes at raddr of ts. */
static inline struct ub_wr t_rma(enum ub_opcode op, struct ub_sge *sg, ub_tseg *ts, uint64_t raddr)
{
    struct ub_wr wr;
    memset(&wr, 0, sizeof(wr));
    wr.opcode = op;
    wr.flags = UB_WR_COMPLETE;
    wr.sge = sg;
    wr.num_sge = sg ? 1 : 0;
    wr.u.rma.tseg = ts;
    wr.u.rma.addr = raddr;
    return wr;
}

#endif
