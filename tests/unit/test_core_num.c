/* core/num.h: digits only, in the base asked, nothing past 64 bits; where the digits end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/num.h"

static void test_whole(void **state)
{
    (void)state;
    uint64_t v = 7;
    assert_true(ub__num_u64_all("0", 10, &v));
    assert_int_equal(v, 0);
    assert_true(ub__num_u64_all("18446744073709551615", 10, &v));
    assert_int_equal(v, UINT64_MAX);
    assert_true(ub__num_u64_all("0x10", 0, &v));
    assert_int_equal(v, 16);
    assert_true(ub__num_u64_all("0X1f", 0, &v));
    assert_int_equal(v, 31);
    assert_true(ub__num_u64_all("010", 10, &v));
    assert_int_equal(v, 10);
    assert_true(ub__num_u64_all("010", 0, &v)); /* not octal */
    assert_int_equal(v, 10);
    assert_true(ub__num_u64_all("08", 0, &v)); /* C's base 0 stops at the 8 */
    assert_int_equal(v, 8);
    v = 7;                                                         /* refusals leave *v alone */
    assert_false(ub__num_u64_all("18446744073709551616", 10, &v)); /* past 64 bits */
    assert_false(ub__num_u64_all("-1", 10, &v));
    assert_false(ub__num_u64_all("+1", 10, &v));
    assert_false(ub__num_u64_all(" 1", 10, &v));
    assert_false(ub__num_u64_all("", 10, &v));
    assert_false(ub__num_u64_all("1 ", 10, &v));
    assert_false(ub__num_u64_all("0x10", 10, &v));
    assert_false(ub__num_u64_all("12abc", 0, &v));
    assert_false(ub__num_u64_all("0x", 0, &v));
    assert_int_equal(v, 7);
}

static void test_prefix(void **state)
{
    (void)state;
    uint64_t v = 0;
    const char *rest = NULL;
    const char *s = "64K";
    assert_true(ub__num_u64(s, 0, &v, &rest));
    assert_int_equal(v, 64);
    assert_ptr_equal(rest, s + 2);
    assert_false(ub__num_u64("K", 0, &v, &rest));
    assert_false(ub__num_u64("99999999999999999999M", 0, &v, &rest));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole),
        cmocka_unit_test(test_prefix),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
