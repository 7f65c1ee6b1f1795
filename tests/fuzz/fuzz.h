/*
 * What every fuzz target shares: libFuzzer's entry point and CHECK, which traps (a crash the
 * fuzzer reports, in any build) when an invariant does not hold.
 */
#ifndef UB_TEST_FUZZ_H
#define UB_TEST_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)              \
    do {                      \
        if (!(c))             \
            __builtin_trap(); \
    } while (0)

#endif
