/*
 * Fuzz target: the UDP device spec parser. Invariants: it returns 0 or
 * UB_EINVAL; a failure leaves the configuration zeroed; a success is in
 * range, parses the same way twice, and re-formatted canonically parses to
 * the same configuration.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <arpa/inet.h>

#include <softub/errors.h>
#include "dev/udp.h"
#include "fuzz.h"

/* The canonical spelling of cfg (numeric scope, every option present). */
static void format_cfg(const struct ub__udp_cfg *c, char *buf, size_t len)
{
    char ip[INET6_ADDRSTRLEN];
    int v6 = c->local.family == UB_AF_INET6;
    CHECK(inet_ntop(v6 ? AF_INET6 : AF_INET, c->local.ip, ip, sizeof(ip)) != NULL);
    char scope[16] = "";
    if (c->local.scope_id)
        snprintf(scope, sizeof(scope), "%%%u", c->local.scope_id);
    snprintf(buf, len,
             "%s%s%s%s:%u?paths=%u&rcvbuf=%u&sndbuf=%u&dscp=%u&gso=%d&gro=%d&ecn=%d&connect=%d"
             "&ring=%d",
             v6 ? "[" : "", ip, scope, v6 ? "]" : "", c->local.port,
             c->num_paths ? c->num_paths : 8, c->rcvbuf, c->sndbuf, c->dscp, !c->no_gso, !c->no_gro,
             !c->no_ecn, !c->no_connect, c->ring);
    if (c->mtu) {
        size_t n = strlen(buf);
        snprintf(buf + n, len - n, "&mtu=%u", c->mtu);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char spec[UB_UDP_SPEC_MAX * 2 + 1];
    size_t n = size < sizeof(spec) - 1 ? size : sizeof(spec) - 1;
    memcpy(spec, data, n);
    spec[n] = '\0';

    struct ub__udp_cfg c, again;
    int rc = ub__udp_cfg_parse(spec, &c);
    CHECK(rc == 0 || rc == UB_EINVAL);
    if (rc) {
        struct ub__udp_cfg zero;
        memset(&zero, 0, sizeof(zero));
        CHECK(memcmp(&c, &zero, sizeof(c)) == 0);
        return 0;
    }
    CHECK(strlen(spec) <= UB_UDP_SPEC_MAX);
    CHECK(c.local.family == UB_AF_INET || c.local.family == UB_AF_INET6);
    CHECK(c.local.family == UB_AF_INET6 || c.local.scope_id == 0);
    CHECK(c.num_paths <= UB_UDP_MAX_PATHS);
    CHECK(c.mtu == 0 || (c.mtu >= UB_UDP_MIN_MTU && c.mtu <= UB_UDP_MAX_MTU));
    CHECK(c.rcvbuf <= UB_UDP_MAX_SOCKBUF && c.sndbuf <= UB_UDP_MAX_SOCKBUF);
    CHECK(c.dscp <= 63);

    CHECK(ub__udp_cfg_parse(spec, &again) == 0 && memcmp(&c, &again, sizeof(c)) == 0);

    char canon[UB_UDP_SPEC_MAX + 64];
    format_cfg(&c, canon, sizeof(canon));
    if (strlen(canon) <= UB_UDP_SPEC_MAX) {
        CHECK(ub__udp_cfg_parse(canon, &again) == 0);
        if (!c.num_paths)
            again.num_paths = 0; /* the default was spelled out */
        CHECK(memcmp(&c, &again, sizeof(c)) == 0);
    }
    return 0;
}
