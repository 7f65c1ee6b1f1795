/* Logging levels and sinks, error strings, address formatting. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <softub/softub.h>
#include "core/addr.h"
#include "core/log.h"

struct capture {
    int n;
    enum ub__log_level last_level;
    char last[128];
};

static void sink(void *arg, enum ub__log_level level, const char *msg)
{
    struct capture *c = arg;
    c->n++;
    c->last_level = level;
    strncpy(c->last, msg, sizeof(c->last) - 1);
}

static void test_levels_and_sink(void **state)
{
    (void)state;
    struct capture cap = {0};
    struct ub__log log;
    ub__log_init(&log);
    log.sink = sink;
    log.arg = &cap;
    log.prefix = "ep0";
    UB_LOG(&log, UB_LOG_DEBUG, "hidden %d", 1);
    assert_int_equal(cap.n, 0);
    UB_LOG(&log, UB_LOG_WARN, "shown %d", 2);
    assert_int_equal(cap.n, 1);
    assert_int_equal(cap.last_level, UB_LOG_WARN);
    assert_string_equal(cap.last, "ep0: shown 2");
    log.level = UB_LOG_OFF;
    UB_LOG(&log, UB_LOG_ERROR, "off");
    assert_int_equal(cap.n, 1);
}

static void test_parse_and_env(void **state)
{
    (void)state;
    assert_int_equal(ub__log_parse_level("trace"), UB_LOG_TRACE);
    assert_int_equal(ub__log_parse_level("0"), UB_LOG_OFF);
    assert_int_equal(ub__log_parse_level("3"), UB_LOG_INFO);
    assert_int_equal(ub__log_parse_level("6"), -1);
    assert_int_equal(ub__log_parse_level("loud"), -1);
    assert_int_equal(ub__log_parse_level(NULL), -1);
    struct ub__log log;
    ub__log_init(&log);
    setenv("SOFTUB_LOG", "debug", 1);
    assert_int_equal(ub__log_from_env(&log), UB_LOG_DEBUG);
    setenv("SOFTUB_LOG", "nonsense", 1);
    assert_int_equal(ub__log_from_env(&log), UB_LOG_DEBUG); /* invalid values change nothing */
    unsetenv("SOFTUB_LOG");
}

static void test_strerror(void **state)
{
    (void)state;
    assert_string_equal(ub_strerror(UB_OK), "success");
    assert_string_equal(ub_strerror(UB_EINVAL), "invalid argument");
    assert_string_equal(ub_strerror(12345), "unknown error");
    assert_string_equal(ub_errname(UB_ETRUNC), "UB_ETRUNC");
    assert_null(ub_errname(-9999));
    /* Every code has a distinct name and description. */
    static const int codes[] = {
#define X(name, value, desc) value,
        UB_ERROR_LIST(X)
#undef X
    };
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
        assert_true(codes[i] <= 0);
        for (size_t j = 0; j < i; j++) {
            assert_int_not_equal(codes[i], codes[j]);
            assert_string_not_equal(ub_strerror(codes[i]), ub_strerror(codes[j]));
        }
    }
    assert_string_equal(ub_version(), UB_VERSION_STRING);
}

static void test_addr_format(void **state)
{
    (void)state;
    char buf[64];
    struct ub__addr a;
    ub__addr_loop(&a, 7);
    ub__addr_format(&a, buf, sizeof(buf));
    assert_string_equal(buf, "loop:7");
    memset(&a, 0, sizeof(a));
    a.family = UB_AF_INET;
    a.port = 4790;
    a.ip[0] = 127;
    a.ip[3] = 1;
    ub__addr_format(&a, buf, sizeof(buf));
    assert_string_equal(buf, "udp:127.0.0.1:4790");
    a.family = UB_AF_INET6;
    memset(a.ip, 0, 16);
    a.ip[15] = 1;
    ub__addr_format(&a, buf, sizeof(buf));
    assert_string_equal(buf, "udp:[0:0:0:0:0:0:0:1]:4790");
    assert_int_equal(ub__addr_format(&a, buf, 4), (int)strlen("udp:[0:0:0:0:0:0:0:1]:4790"));
    assert_string_equal(buf, "udp");
    struct ub__addr b = a;
    assert_true(ub__addr_eq(&a, &b));
    assert_int_equal(ub__addr_hash(&a, 1), ub__addr_hash(&b, 1));
    b.port++;
    assert_false(ub__addr_eq(&a, &b));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_levels_and_sink),
        cmocka_unit_test(test_parse_and_env),
        cmocka_unit_test(test_strerror),
        cmocka_unit_test(test_addr_format),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
