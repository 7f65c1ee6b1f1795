/*
 * Fuzz target: the shm device spec parser. Invariants: it returns 0 or UB_EINVAL; a failure
 * leaves the configuration zeroed; a success is in range, parses the same way twice, and
 * re-formatted canonically parses to the same configuration.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <softub/errors.h>
#include "dev/shm.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char spec[UB_SHM_SPEC_MAX * 2 + 1];
    size_t n = size < sizeof(spec) - 1 ? size : sizeof(spec) - 1;
    memcpy(spec, data, n);
    spec[n] = '\0';

    struct ub__shm_cfg c, again;
    int rc = ub__shm_cfg_parse(spec, &c);
    CHECK(rc == 0 || rc == UB_EINVAL);
    if (rc) {
        struct ub__shm_cfg zero;
        memset(&zero, 0, sizeof(zero));
        CHECK(memcmp(&c, &zero, sizeof(c)) == 0);
        return 0;
    }
    CHECK(strlen(spec) <= UB_SHM_SPEC_MAX);
    CHECK(c.lanes <= UB_SHM_MAX_LANES && c.max_peers <= UB_SHM_MAX_PEERS);
    CHECK(c.num_paths <= UB_SHM_MAX_PATHS);
    CHECK(!c.slots || (c.slots >= UB_SHM_MIN_SLOTS && c.slots <= UB_SHM_MAX_SLOTS &&
                       !(c.slots & (c.slots - 1))));
    CHECK(!c.mtu || (c.mtu >= UB_SHM_MIN_MTU && c.mtu <= UB_SHM_MAX_MTU));
    CHECK(c.dir == NULL);

    CHECK(ub__shm_cfg_parse(spec, &again) == 0 && memcmp(&c, &again, sizeof(c)) == 0);

    /* The canonical spelling: the id, then each option that was given, by name. */
    char canon[UB_SHM_SPEC_MAX + 64];
    int k = snprintf(canon, sizeof(canon), "shm://%u?wake=%d", c.id, !c.no_wake);
    const struct {
        const char *key;
        uint32_t v;
    } opt[] = {{"lanes", c.lanes},
               {"slots", c.slots},
               {"mtu", c.mtu},
               {"peers", c.max_peers},
               {"paths", c.num_paths}};
    for (size_t i = 0; i < sizeof(opt) / sizeof(opt[0]); i++)
        if (opt[i].v)
            k += snprintf(canon + k, sizeof(canon) - (size_t)k, "&%s=%u", opt[i].key, opt[i].v);
    CHECK(strlen(canon) <= UB_SHM_SPEC_MAX);
    CHECK(ub__shm_cfg_parse(canon, &again) == 0 && memcmp(&c, &again, sizeof(c)) == 0);
    return 0;
}
