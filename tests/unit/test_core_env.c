/* Environment switches: only "0" exactly turns a default-on feature off. */
#define _GNU_SOURCE /* setenv, unsetenv */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "core/env.h"

#define NAME "SOFTUB_TEST_ENV_SWITCH"

static void test_env_off(void **state)
{
    (void)state;
    assert_int_equal(unsetenv(NAME), 0);
    assert_false(ub__env_off(NAME));
    static const char *const on[] = {"", "1", "00", "0 ", "off", "no"};
    for (size_t i = 0; i < sizeof(on) / sizeof(on[0]); i++) {
        assert_int_equal(setenv(NAME, on[i], 1), 0);
        assert_false(ub__env_off(NAME));
    }
    assert_int_equal(setenv(NAME, "0", 1), 0);
    assert_true(ub__env_off(NAME));
    assert_int_equal(unsetenv(NAME), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_env_off)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
