/* test_quantity.c -- every Kubernetes quantity form, rounding, overflow and the
 * malformed inputs the parser must refuse with a message quoting the value.
 */
#include "tests/unit/harness.h"
#include "model/quantity.h"

#include <stdint.h>

static int64_t milli_of(const char *s, bool *ok) {
    char err[256] = "";
    int64_t m = -12345;
    *ok = model_quantity_parse_milli(s, &m, err, sizeof err) == 0;
    if (!*ok) printf("    (%s)\n", err);
    return m;
}

#define CHECK_MILLI(s, want)                                                            \
    do {                                                                                \
        bool ok_;                                                                       \
        int64_t m_ = milli_of(s, &ok_);                                                 \
        CHECK_MSG(ok_, "\"%s\" did not parse", s);                                      \
        CHECK_MSG(m_ == (int64_t)(want), "\"%s\" -> %lld milli, expected %lld", s,      \
                  (long long)m_, (long long)(want));                                    \
    } while (0)

#define CHECK_BAD(s, needle)                                                            \
    do {                                                                                \
        char err_[256] = "";                                                            \
        int64_t m_ = 0;                                                                 \
        CHECK_MSG(model_quantity_parse_milli(s, &m_, err_, sizeof err_) == -1,         \
                  "\"%s\" parsed as %lld", s, (long long)m_);                           \
        CHECK_CONTAINS(err_, needle);                                                   \
    } while (0)

TEST(quantity_plain_and_fraction) {
    CHECK_MILLI("0", 0);
    CHECK_MILLI("1", 1000);
    CHECK_MILLI("42", 42000);
    CHECK_MILLI("1.5", 1500);
    CHECK_MILLI("0.5", 500);
    CHECK_MILLI(".5", 500);
    CHECK_MILLI("1.", 1000);
    CHECK_MILLI("007", 7000);
    CHECK_MILLI("+3", 3000);
    CHECK_MILLI("-3", -3000);
    CHECK_MILLI("-0", 0);
    CHECK_MILLI("0.000", 0);
    CHECK_MILLI("1048576000", 1048576000000LL);
}

TEST(quantity_decimal_suffixes) {
    CHECK_MILLI("100m", 100);
    CHECK_MILLI("1500m", 1500);
    CHECK_MILLI("30k", 30000000);
    CHECK_MILLI("2M", 2000000000LL);
    CHECK_MILLI("1G", 1000000000000LL);
    CHECK_MILLI("1T", 1000000000000000LL);
    CHECK_MILLI("1P", 1000000000000000000LL);
    CHECK_MILLI("0.000001E", 1000000000000000LL);
    CHECK_MILLI("1000u", 1);
    CHECK_MILLI("1000000n", 1);
    CHECK_MILLI("2.5k", 2500000);
}

TEST(quantity_binary_suffixes) {
    CHECK_MILLI("1Ki", 1024000);
    CHECK_MILLI("64Mi", 67108864000LL);
    CHECK_MILLI("8Gi", 8589934592000LL);
    CHECK_MILLI("1000Mi", 1048576000000LL);
    CHECK_MILLI("1Ti", 1099511627776000LL);
    CHECK_MILLI("1Pi", 1125899906842624000LL);
    CHECK_MILLI("1.5Ki", 1536000);
    /* 2^60 / 1000 bytes = 1152921504606846.976, exactly 1152921504606846976 milli */
    CHECK_MILLI("0.001Ei", 1152921504606846976LL);
    /* 0.0001 Ki = 0.1024 = 102.4 milli, rounded up */
    CHECK_MILLI("0.0001Ki", 103);
}

TEST(quantity_exponents) {
    CHECK_MILLI("1e3", 1000000);
    CHECK_MILLI("1E3", 1000000);
    CHECK_MILLI("1e+3", 1000000);
    CHECK_MILLI("1e-3", 1);
    CHECK_MILLI("1.5e2", 150000);
    CHECK_MILLI("1e9", 1000000000000LL);
    CHECK_MILLI("1e0", 1000);
    CHECK_MILLI("0e999999999999", 0);
}

TEST(quantity_rounds_partial_milli_units_up) {
    CHECK_MILLI("1n", 1);
    CHECK_MILLI("1u", 1);
    CHECK_MILLI("1500u", 2);
    CHECK_MILLI("0.0001", 1);
    CHECK_MILLI("1e-4", 1);
    CHECK_MILLI("1e-99999999999", 1);
    CHECK_MILLI("0.1001", 101);
    /* away from zero, as Kubernetes rounds */
    CHECK_MILLI("-0.0001", -1);
}

TEST(quantity_overflow_is_an_error) {
    CHECK_MILLI("9223372036854775.807", INT64_MAX);
    CHECK_MILLI("-9223372036854775.807", -INT64_MAX);
    CHECK_BAD("9223372036854775.808", "too large");
    CHECK_BAD("9223372036854775.8071", "too large");
    CHECK_BAD("1e16", "too large");
    CHECK_BAD("1E", "too large");
    CHECK_BAD("5E", "too large");
    CHECK_BAD("1Ei", "too large");
    CHECK_BAD("99999999999999999999999", "too large");
    CHECK_BAD("1e999999999999999999999", "\"1e999999999999999999999\"");
}

TEST(quantity_malformed_is_an_error_quoting_the_value) {
    CHECK_BAD("", "empty");
    CHECK_BAD(" 1", "\" 1\" is not a quantity");
    CHECK_BAD("1 ", "\"1 \" is not a quantity");
    CHECK_BAD("1 Gi", "\"1 Gi\"");
    CHECK_BAD("1.2.3", "\"1.2.3\" is not a quantity");
    CHECK_BAD("5Kb", "\"5Kb\" is not a quantity");
    CHECK_BAD("--1", "\"--1\" is not a quantity");
    CHECK_BAD("+-1", "\"+-1\"");
    CHECK_BAD("abc", "\"abc\"");
    CHECK_BAD("1ki", "\"1ki\"");
    CHECK_BAD("1Kib", "\"1Kib\"");
    CHECK_BAD("1e", "\"1e\"");
    CHECK_BAD("1e+", "\"1e+\"");
    CHECK_BAD("1e3.5", "\"1e3.5\"");
    CHECK_BAD("e3", "\"e3\"");
    CHECK_BAD(".", "\".\"");
    CHECK_BAD("-", "\"-\"");
    CHECK_BAD("0x10", "\"0x10\"");
    CHECK_BAD("1mm", "\"1mm\"");

    char longq[200];
    memset(longq, '1', sizeof longq - 1);
    longq[sizeof longq - 1] = 0;
    CHECK_BAD(longq, "longer than 128");

    char err[64] = "";
    int64_t m;
    CHECK_INT(model_quantity_parse_milli(NULL, &m, err, sizeof err), -1);
    CHECK_CONTAINS(err, "missing");
    /* no room for a message is still an error, not a crash */
    CHECK_INT(model_quantity_parse_milli("x", &m, NULL, 0), -1);
}

TEST(quantity_parse_int_whole_non_negative) {
    char err[256] = "";
    int64_t v = -1;
    CHECK_INT(model_quantity_parse_int("2", &v, err, sizeof err), 0);
    CHECK_INT(v, 2);
    CHECK_INT(model_quantity_parse_int("2000m", &v, err, sizeof err), 0);
    CHECK_INT(v, 2);
    CHECK_INT(model_quantity_parse_int("1e3", &v, err, sizeof err), 0);
    CHECK_INT(v, 1000);
    CHECK_INT(model_quantity_parse_int("8Gi", &v, err, sizeof err), 0);
    CHECK_INT(v, 8589934592LL);
    CHECK_INT(model_quantity_parse_int("0", &v, err, sizeof err), 0);
    CHECK_INT(v, 0);

    CHECK_INT(model_quantity_parse_int("1500m", &v, err, sizeof err), -1);
    CHECK_CONTAINS(err, "\"1500m\" is not a whole number");
    CHECK_INT(model_quantity_parse_int("0.5", &v, err, sizeof err), -1);
    CHECK_CONTAINS(err, "is not a whole number");
    CHECK_INT(model_quantity_parse_int("-1", &v, err, sizeof err), -1);
    CHECK_CONTAINS(err, "\"-1\" must not be negative");
    CHECK_INT(model_quantity_parse_int("two", &v, err, sizeof err), -1);
    CHECK_CONTAINS(err, "\"two\" is not a quantity");
}

/* A quantity in another unit: bytes read as MiB (exp2 -20) for nvidia.com/gpumem, rounded up with
 * exact saying whether it was whole; exact arithmetic, no overflow, no negative values. */
TEST(quantity_parse_scaled_bytes_as_mib) {
    char err[256] = "";
    int64_t v = -1;
    bool exact = false;
    static const struct { const char *q; int64_t mib; bool exact; } cases[] = {
        {"20Gi", 20480, true},         {"1536Mi", 1536, true},   {"0.5Gi", 512, true},
        {"20971520Ki", 20480, true},   {"16384M", 15625, true},  /* 2^14 * 10^6 bytes */
        {"0Gi", 0, true},
        /* not whole: rounded up, not exact */
        {"20G", 19074, false},         /* 19073.486 MiB */
        {"1.5Mi", 2, false},           {"1", 1, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_MSG(model_quantity_parse_scaled(cases[i].q, -20, &v, &exact, err, sizeof err) == 0, "%s: %s", cases[i].q,
                  err);
        CHECK_MSG(v == cases[i].mib && exact == cases[i].exact, "%s: %lld MiB, exact %d", cases[i].q, (long long)v,
                  exact);
    }
    /* huge but representable, then too large */
    CHECK_INT(model_quantity_parse_scaled("8Ei", -20, &v, &exact, err, sizeof err), 0);
    CHECK_INT(v, 8LL << 40);
    CHECK_INT(model_quantity_parse_scaled("99999999999999999999Ei", -20, &v, &exact, err, sizeof err), -1);
    CHECK_CONTAINS(err, "is too large");
    /* scaling up; the sign and malformed input */
    CHECK_INT(model_quantity_parse_scaled("3", 10, &v, &exact, err, sizeof err), 0);
    CHECK_INT(v, 3072);
    CHECK_INT(model_quantity_parse_scaled("-1Gi", -20, &v, &exact, err, sizeof err), -1);
    CHECK_CONTAINS(err, "must not be negative");
    CHECK_INT(model_quantity_parse_scaled("20GB", -20, &v, &exact, err, sizeof err), -1);
    CHECK_CONTAINS(err, "is not a quantity");
    CHECK_INT(model_quantity_parse_scaled(NULL, -20, &v, &exact, NULL, 0), -1);
}
