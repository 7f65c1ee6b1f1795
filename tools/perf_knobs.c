/*
 * Congestion control and load balancing for softub-perf. The public context attributes
 * do not carry them yet, so this reaches into the transport of a freshly opened context
 * (nothing sent yet: no PDC has chosen its algorithms) through the internal headers.
 * The one place softub-perf depends on internals; remove it once ub_context_attr has
 * the knobs.
 */
#include <string.h>

#include "perf.h"
#include "pds/pds_int.h"
#include "ses/ses.h"

int perf_set_cc_lb(ub_context *ctx, const char *cc, const char *lb)
{
    struct ub__pds *pds = ctx->eng.pds;
    if (!pds)
        return UB_ENOTSUP;
    if (cc && cc[0]) {
        const struct ub__cc_algo *a = ub__cc_algo_find(cc);
        if (!a || a == &ub__cc_rccc)
            return UB_EINVAL;
        pds->cfg.cc_algo = a->name;
        pds->cc_algo = a == &ub__cc_none ? NULL : a;
    }
    if (lb && lb[0]) {
        const struct ub__lb_algo *l = ub__lb_algo_find(lb);
        if (!l)
            return UB_EINVAL;
        pds->cfg.lb_algo = l->name;
        pds->lb_algo = l;
    }
    return 0;
}
