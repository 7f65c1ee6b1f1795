/* Whether this build runs under AddressSanitizer: tests that count the process's own page
 * faults or scale with its speed adjust. */
#ifndef SOFTUB_TEST_SANITIZED_H
#define SOFTUB_TEST_SANITIZED_H

#if defined(__SANITIZE_ADDRESS__)
#define UB_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UB_TEST_SANITIZED 1
#endif
#endif
#ifndef UB_TEST_SANITIZED
#define UB_TEST_SANITIZED 0
#endif

#endif
