/* The softub extension header codec: the encoder's error path (the codec itself is inline in
 * wire/ext.h). Layout: docs/wire-format.md section 6. */
#include "wire/ext.h"

int ub__ext_invalid(const struct ub__ext *h)
{
    if (h->version > 15 || h->next_hdr > 15 || h->exec_order > 3)
        return UB_EOVERFLOW;
    if (h->version > UB_EXT_VERSION_COMPAT_MAX || h->next_hdr > UB_PDS_NH_RSP_DATA_SMALL ||
        h->exec_order > UB_EXT_EO_SO)
        return UB_EINVAL;
    if (h->tail_len > UB_EXT_MAX_SIZE - UB_EXT_SIZE)
        return UB_EOVERFLOW;
    if ((h->tail_len % UB_EXT_HLEN_UNIT) || (h->tail_len && !h->tail) ||
        (h->version == UB_EXT_VERSION && h->tail_len))
        return UB_EINVAL;
    return 0;
}
