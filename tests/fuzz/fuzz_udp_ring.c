/*
 * Fuzz target: the udp packet ring's frame parser (src/dev/udp_ring.c), IPv4 and IPv6. The first
 * byte chooses whether the kernel vouched for the checksum and how much longer than the capture the
 * datagram claims to be; the rest is the frame from its IP header. Invariants: the result is a
 * datagram, a note or UB_EBADMSG; a datagram's payload lies within the capture, after a whole IP
 * and UDP header, and is at most the ring's bound; the same frame parses the same way twice.
 */
#define _GNU_SOURCE /* udp_int.h: sendmmsg, recvmmsg */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <softub/errors.h>
#include "dev/udp.h"
#include "dev/udp_int.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 4096)
        return 0;
    bool csum_known = data[0] & 1;
    uint32_t cap = (uint32_t)size - 1, len = cap + (data[0] >> 1);
    struct ub__udp_ring_dgram d, again;
    memset(&d, 0, sizeof(d));
    memset(&again, 0, sizeof(again));
    int rc = ub__udp_ring_parse(data + 1, cap, len, csum_known, 3, &d);
    CHECK(rc == 1 || rc == 0 || rc == UB_EBADMSG);
    CHECK(ub__udp_ring_parse(data + 1, cap, len, csum_known, 3, &again) == rc);
    if (rc != 1)
        return 0;
    CHECK(memcmp(&d, &again, sizeof(d)) == 0);
    CHECK(d.off >= 28 && d.off + d.len <= cap && d.len <= UB_UDP_RING_SMALL);
    CHECK(len == cap && d.ecn <= 3);
    CHECK(d.src.family == UB_AF_INET6 ? d.off == 48 && (d.src.scope_id == 0 || d.src.scope_id == 3)
                                      : d.src.family == UB_AF_INET && d.src.scope_id == 0);
    return 0;
}
