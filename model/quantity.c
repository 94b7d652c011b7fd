/* quantity.c -- Kubernetes resource quantities into int64 milli-units.
 *
 * Exact decimal arithmetic on the digits (no floating point), so "0.1", "1e-3" and
 * "1.5Gi" come out exactly and anything too large is an error rather than UB.
 */
#include "model/quantity.h"

#include <stdio.h>
#include <string.h>

/* Real quantities are short; the cap keeps the digit buffer on the stack. */
#define QTY_MAX_LEN 128
/* A binary suffix multiplies by up to 2^60, which adds at most 19 decimal digits; a
 * negative scale (model_quantity_parse_scaled) halves at most 60 times, one digit each. */
#define QTY_DIGITS (QTY_MAX_LEN + 64)
/* Exponents beyond this are clamped: the value overflows or rounds to one milli-unit
 * either way, and clamping keeps the exponent arithmetic itself from overflowing. */
#define QTY_EXP_CLAMP 100000

static void qty_err(char *err, size_t errlen, const char *s, const char *rule) {
    if (err && errlen) snprintf(err, errlen, "\"%.*s\" %s", QTY_MAX_LEN, s, rule);
}

/* The suffix's power of ten and power of two; false if it is none of the known forms. */
static bool qty_suffix(const char *suf, long *exp10, int *exp2) {
    static const struct { const char *name; int exp10, exp2; } table[] = {
        {"", 0, 0},    {"Ki", 0, 10}, {"Mi", 0, 20}, {"Gi", 0, 30}, {"Ti", 0, 40}, {"Pi", 0, 50},
        {"Ei", 0, 60}, {"n", -9, 0},  {"u", -6, 0},  {"m", -3, 0},  {"k", 3, 0},   {"M", 6, 0},
        {"G", 9, 0},   {"T", 12, 0},  {"P", 15, 0},  {"E", 18, 0},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strcmp(suf, table[i].name) == 0) {
            *exp10 = table[i].exp10;
            *exp2 = table[i].exp2;
            return true;
        }
    }
    /* exponent form: e<int> or E<int>, with an optional sign */
    if (suf[0] != 'e' && suf[0] != 'E') return false;
    const char *p = suf + 1;
    bool neg = false;
    if (*p == '+' || *p == '-') neg = *p++ == '-';
    if (*p < '0' || *p > '9') return false;
    long e = 0;
    for (; *p >= '0' && *p <= '9'; p++)
        if (e < QTY_EXP_CLAMP) e = e * 10 + (*p - '0');
    if (*p) return false;
    *exp10 = neg ? -e : e;
    *exp2 = 0;
    return true;
}

/* The quantity s times 10^shift10 * 2^shift2, as a magnitude rounded up to a whole number
 * (away from zero, as Kubernetes rounds), its sign, and whether anything was rounded. shift2 may
 * be negative: halving is multiplying by 5 and moving the point, so it stays exact. */
static int qty_parse(const char *s, long shift10, int shift2, uint64_t *mag, bool *neg, bool *rounded, char *err,
                     size_t errlen) {
    if (!s) {
        if (err && errlen) snprintf(err, errlen, "quantity is missing");
        return -1;
    }
    if (!*s) {
        qty_err(err, errlen, s, "is not a quantity: it is empty");
        return -1;
    }
    if (strlen(s) > QTY_MAX_LEN) {
        qty_err(err, errlen, s, "is not a quantity: longer than 128 characters");
        return -1;
    }

    const char *p = s;
    *neg = false;
    if (*p == '+' || *p == '-') *neg = *p++ == '-';

    /* digits[] holds the significant digits most significant first; the value is
     * digits * 10^exp10 * 2^exp2. */
    char digits[QTY_DIGITS];
    int nd = 0, seen = 0;
    long exp10 = 0;
    for (; *p >= '0' && *p <= '9'; p++, seen++)
        if (nd || *p != '0') digits[nd++] = (char)(*p - '0');
    if (*p == '.') {
        for (p++; *p >= '0' && *p <= '9'; p++, seen++) {
            if (nd || *p != '0') digits[nd++] = (char)(*p - '0');
            exp10--;
        }
    }
    if (!seen) {
        qty_err(err, errlen, s, "is not a quantity: expected digits, e.g. \"2\", \"100m\" or \"8Gi\"");
        return -1;
    }
    long sexp10;
    int exp2;
    if (!qty_suffix(p, &sexp10, &exp2)) {
        qty_err(err, errlen, s,
                "is not a quantity: expected a number with one suffix of Ki Mi Gi Ti Pi Ei, "
                "n u m k M G T P E, or an exponent such as e3");
        return -1;
    }
    exp10 += sexp10 + shift10;
    exp2 += shift2;

    *mag = 0;
    *rounded = false;
    if (nd == 0) return 0;
    /* Multiply by 2^exp2 by doubling the decimal digits in place; divide by halving them
     * (times 5, one place to the right). Each step adds at most one digit. */
    for (; exp2 != 0; exp2 += exp2 > 0 ? -1 : 1) {
        int f = exp2 > 0 ? 2 : 5, carry = 0;
        for (int i = nd - 1; i >= 0; i--) {
            int d = digits[i] * f + carry;
            digits[i] = (char)(d % 10);
            carry = d / 10;
        }
        if (carry) {
            memmove(digits + 1, digits, (size_t)nd);
            digits[0] = (char)carry;
            nd++;
        }
        if (exp2 < 0) exp10--;
    }

    /* The first nd + exp10 digits are the whole part; any non-zero digit after them is
     * a partial unit, which rounds up. */
    long nint = nd + exp10;
    if (nint > 19) {
        qty_err(err, errlen, s, shift10 == 3 && shift2 == 0 ? "is too large (overflows a 64-bit count of milli-units)"
                                                           : "is too large (overflows a 64-bit count)");
        return -1;
    }
    uint64_t v = 0;
    /* At most 19 digits: below 10^19, which fits in uint64_t. */
    for (long i = 0; i < nint; i++) v = v * 10 + (uint64_t)(i < nd ? digits[i] : 0);
    for (long i = nint < 0 ? 0 : nint; i < nd; i++)
        if (digits[i]) *rounded = true;
    if (*rounded) v++;
    *mag = v;
    return 0;
}

int model_quantity_parse_milli(const char *s, int64_t *milli, char *err, size_t errlen) {
    uint64_t v;
    bool neg, rounded;
    if (qty_parse(s, 3, 0, &v, &neg, &rounded, err, errlen) != 0) return -1;
    if (v > (uint64_t)INT64_MAX) {
        qty_err(err, errlen, s, "is too large (overflows a 64-bit count of milli-units)");
        return -1;
    }
    *milli = neg ? -(int64_t)v : (int64_t)v;
    return 0;
}

int model_quantity_parse_scaled(const char *s, int exp2, int64_t *value, bool *exact, char *err, size_t errlen) {
    uint64_t v;
    bool neg, rounded;
    if (qty_parse(s, 0, exp2, &v, &neg, &rounded, err, errlen) != 0) return -1;
    if (neg && (v || rounded)) {
        qty_err(err, errlen, s, "must not be negative");
        return -1;
    }
    if (v > (uint64_t)INT64_MAX) {
        qty_err(err, errlen, s, "is too large (overflows a 64-bit count)");
        return -1;
    }
    *value = (int64_t)v;
    *exact = !rounded;
    return 0;
}

int model_quantity_parse_int(const char *s, int64_t *value, char *err, size_t errlen) {
    int64_t m;
    if (model_quantity_parse_milli(s, &m, err, errlen) != 0) return -1;
    if (m < 0) {
        qty_err(err, errlen, s, "must not be negative");
        return -1;
    }
    if (m % 1000) {
        qty_err(err, errlen, s, "is not a whole number");
        return -1;
    }
    *value = m / 1000;
    return 0;
}
