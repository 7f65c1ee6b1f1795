#include "wire/bundle.h"

#include <string.h>

#include <softub/errors.h>

static inline size_t rd16(const uint8_t *p)
{
    return (size_t)p[0] << 8 | p[1];
}

int ub__bundle_check(const uint8_t *buf, size_t len)
{
    if (!buf || !ub__bundle_is(buf, len))
        return UB_EBADMSG;
    size_t off = UB_BUNDLE_HDR;
    int n = 0;
    while (off < len) {
        if (len - off < UB_BUNDLE_REC_HDR)
            return UB_ETRUNC;
        size_t r = rd16(buf + off);
        off += UB_BUNDLE_REC_HDR;
        if (r == 0)
            return UB_EBADMSG;
        if (r > len - off)
            return UB_ETRUNC;
        if (buf[off] == UB_BUNDLE_MARK)
            return UB_EBADMSG; /* nesting would let one datagram multiply without bound */
        off += r;
        n++;
    }
    return n ? n : UB_EBADMSG;
}
