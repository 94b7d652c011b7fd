/* harness.h -- the unit-test harness: TEST() registers a test, CHECK*() fail it.
 *
 * Every test file includes this; tests register themselves at start-up, so adding a
 * test means writing it, nothing else. The runner (main.c) prints failures and ends
 * with the line "N passed, N failed".
 *
 * `make test` runs several tests at once, each in a process of its own (main.c, -j), so a test
 * shares the machine with others: it must not depend on the machine being idle or fast (wait on
 * events, wait.h), and keeps its files and ports to itself (mkstemp/mkdtemp, port 0). A test that
 * cannot share the machine (it takes a fixed port, or thousands of sockets at once) is declared
 * with TEST_SERIAL instead of TEST: it runs alone.
 */
#ifndef TEST_HARNESS_H
#define TEST_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "tests/support/wait.h"

typedef void (*test_fn)(void);
void test_register(const char *name, const char *file, test_fn fn);
void test_register_as(const char *name, const char *file, test_fn fn, bool serial);
void test_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
bool test_failed(void);

/* Read tests/fixtures/<rel> (or $TESSERA_FIXTURES/<rel>) into a NUL-terminated buffer
 * the caller frees; aborts the run if missing, since a missing fixture is a broken tree. */
char *test_fixture(const char *rel, size_t *len);

#define TEST(name)                                                                      \
    static void name(void);                                                             \
    __attribute__((constructor)) static void name##_register(void) {                    \
        test_register(#name, __FILE__, name);                                           \
    }                                                                                   \
    static void name(void)

/* A test that runs alone (see above). */
#define TEST_SERIAL(name)                                                               \
    static void name(void);                                                             \
    __attribute__((constructor)) static void name##_register(void) {                    \
        test_register_as(#name, __FILE__, name, true);                                  \
    }                                                                                   \
    static void name(void)

#define CHECK(cond)                                                                     \
    do {                                                                                \
        if (!(cond)) { test_fail(__FILE__, __LINE__, "CHECK(%s)", #cond); return; }     \
    } while (0)

#define CHECK_MSG(cond, ...)                                                            \
    do {                                                                                \
        if (!(cond)) { test_fail(__FILE__, __LINE__, __VA_ARGS__); return; }             \
    } while (0)

#define CHECK_INT(a, b)                                                                 \
    do {                                                                                \
        long long a_ = (long long)(a), b_ = (long long)(b);                             \
        if (a_ != b_) {                                                                 \
            test_fail(__FILE__, __LINE__, "%s == %lld, expected %s == %lld", #a, a_, #b, b_); \
            return;                                                                     \
        }                                                                               \
    } while (0)

#define CHECK_STR(a, b)                                                                 \
    do {                                                                                \
        const char *a_ = (a), *b_ = (b);                                                \
        if (!a_ || !b_ || strcmp(a_, b_) != 0) {                                        \
            test_fail(__FILE__, __LINE__, "%s == \"%s\", expected \"%s\"", #a,          \
                      a_ ? a_ : "(null)", b_ ? b_ : "(null)");                          \
            return;                                                                     \
        }                                                                               \
    } while (0)

/* The string contains the substring (for checking error messages name the field). */
#define CHECK_CONTAINS(hay, needle)                                                     \
    do {                                                                                \
        const char *h_ = (hay), *n_ = (needle);                                         \
        if (!h_ || !strstr(h_, n_)) {                                                   \
            test_fail(__FILE__, __LINE__, "\"%s\" does not contain \"%s\"",             \
                      h_ ? h_ : "(null)", n_);                                          \
            return;                                                                     \
        }                                                                               \
    } while (0)

#endif
