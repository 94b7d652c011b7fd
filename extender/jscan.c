/* jscan.c -- see jscan.h. One pass, no allocation; recursion only for nesting, bounded. */
#include "extender/jscan.h"

#include <stdint.h>
#include <string.h>
#include <strings.h>

void jscan_init(jscan *s, const char *text, size_t len) {
    s->p = text;
    s->end = text + len;
    s->err = NULL;
    s->first = false;
}

static bool fail(jscan *s, const char *why) {
    if (!s->err) s->err = why;
    return false;
}

static void ws(jscan *s) {
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\n' || *s->p == '\r' || *s->p == '\t')) s->p++;
}

char jscan_peek(jscan *s) {
    if (s->err) return 0;
    ws(s);
    return s->p < s->end ? *s->p : 0;
}

bool jscan_at_end(jscan *s) {
    ws(s);
    return !s->err && s->p == s->end;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static bool hex4(jscan *s, const char *p, unsigned *out) {
    if (s->end - p < 4) return fail(s, "truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(p[i]);
        if (h < 0) return fail(s, "bad \\u escape");
        v = v * 16 + (unsigned)h;
    }
    *out = v;
    return true;
}

/* Whether any byte of w is '"', '\\' or a control character (< 0x20): the classic
 * "has a zero byte" and "has a byte less than n" bit tricks, eight bytes at a time. */
static inline bool word_special(uint64_t w) {
    const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
    uint64_t q = w ^ (ones * '"'), b = w ^ (ones * '\\');
    return (((q - ones) & ~q) | ((b - ones) & ~b) | ((w - ones * 0x20) & ~w)) & high;
}

/* Past a string whose opening quote is at s->p; the raw contents in *raw. Plain runs
 * are skipped a word at a time: strings are most of a Node object's bytes. */
static bool skip_string(jscan *s, jscan_span *raw) {
    const char *p = ++s->p;
    for (;;) {
        uint64_t w;
        while (s->end - p >= 8 && (memcpy(&w, p, 8), !word_special(w))) p += 8;
        if (p >= s->end) return fail(s, "unterminated string");
        unsigned char c = (unsigned char)*p;
        if (c == '"') break;
        if (c < 0x20) return fail(s, "control character in a string");
        if (c == '\\') {
            if (p + 1 >= s->end) return fail(s, "unterminated string");
            char e = p[1];
            if (e == 'u') {
                unsigned v;
                if (!hex4(s, p + 2, &v)) return false;
                p += 6;
                continue;
            }
            if (!strchr("\"\\/bfnrt", e) || !e) return fail(s, "bad escape in a string");
            p += 2;
            continue;
        }
        p++;
    }
    if (raw) *raw = (jscan_span){s->p, (size_t)(p - s->p)};
    s->p = p + 1;
    return true;
}

static bool digits(jscan *s) {
    const char *b = s->p;
    while (s->p < s->end && *s->p >= '0' && *s->p <= '9') s->p++;
    return s->p > b ? true : fail(s, "malformed number");
}

static bool skip_number(jscan *s) {
    if (*s->p == '-') s->p++;
    if (s->p < s->end && *s->p == '0') s->p++;
    else if (!digits(s)) return false;
    if (s->p < s->end && *s->p == '.') {
        s->p++;
        if (!digits(s)) return false;
    }
    if (s->p < s->end && (*s->p == 'e' || *s->p == 'E')) {
        s->p++;
        if (s->p < s->end && (*s->p == '+' || *s->p == '-')) s->p++;
        if (!digits(s)) return false;
    }
    return true;
}

static bool literal(jscan *s, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n) != 0) return fail(s, "unexpected token");
    s->p += n;
    return true;
}

static bool skip_value(jscan *s, int depth) {
    ws(s);
    if (s->p >= s->end) return fail(s, "truncated: a value is missing");
    if (depth > JSCAN_MAX_DEPTH) return fail(s, "nested too deeply");
    switch (*s->p) {
    case '"': return skip_string(s, NULL);
    case 't': return literal(s, "true");
    case 'f': return literal(s, "false");
    case 'n': return literal(s, "null");
    case '{': case '[': {
        char close = *s->p == '{' ? '}' : ']';
        bool obj = close == '}';
        s->p++;
        ws(s);
        if (s->p < s->end && *s->p == close) { s->p++; return true; }
        for (;;) {
            if (obj) {
                ws(s);
                if (s->p >= s->end || *s->p != '"') return fail(s, "expected a key");
                if (!skip_string(s, NULL)) return false;
                ws(s);
                if (s->p >= s->end || *s->p != ':') return fail(s, "expected ':'");
                s->p++;
            }
            if (!skip_value(s, depth + 1)) return false;
            ws(s);
            if (s->p >= s->end) return fail(s, "truncated: unclosed object or array");
            if (*s->p == close) { s->p++; return true; }
            if (*s->p != ',') return fail(s, "expected ',' or the end of an object or array");
            s->p++;
        }
    }
    default:
        if (*s->p == '-' || (*s->p >= '0' && *s->p <= '9')) return skip_number(s);
        return fail(s, "unexpected character");
    }
}

bool jscan_skip(jscan *s, jscan_span *out) {
    if (s->err) return false;
    ws(s);
    const char *b = s->p;
    if (!skip_value(s, 0)) return false;
    if (out) *out = (jscan_span){b, (size_t)(s->p - b)};
    return true;
}

static bool begin(jscan *s, char open) {
    if (jscan_peek(s) != open) return fail(s, open == '{' ? "expected an object" : "expected an array");
    s->p++;
    s->first = true;
    return true;
}

bool jscan_object_begin(jscan *s) { return begin(s, '{'); }
bool jscan_array_begin(jscan *s) { return begin(s, '['); }

/* Before the next member: 1 there is one, 0 the container closed, -1 error. */
static int next(jscan *s, char close) {
    if (s->err) return -1;
    ws(s);
    if (s->p >= s->end) return fail(s, "truncated: unclosed object or array"), -1;
    if (*s->p == close) {
        s->p++;
        s->first = false;
        return 0;
    }
    if (!s->first) {
        if (*s->p != ',') return fail(s, "expected ',' or the end of an object or array"), -1;
        s->p++;
        ws(s);
    }
    s->first = false;
    return 1;
}

int jscan_object_next(jscan *s, jscan_span *key) {
    int r = next(s, '}');
    if (r <= 0) return r;
    if (s->p >= s->end || *s->p != '"') return fail(s, "expected a key"), -1;
    if (!skip_string(s, key)) return -1;
    ws(s);
    if (s->p >= s->end || *s->p != ':') return fail(s, "expected ':'"), -1;
    s->p++;
    return 1;
}

int jscan_array_next(jscan *s) {
    int r = next(s, ']');
    if (r == 1 && s->p >= s->end) return fail(s, "truncated: a value is missing"), -1;
    return r;
}

bool jscan_null(jscan *s) {
    if (jscan_peek(s) != 'n') return false;
    return literal(s, "null");
}

static size_t utf8(unsigned cp, char *o) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | cp >> 6); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12);
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18);
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

long jscan_string(jscan *s, char *out, size_t cap) {
    if (jscan_peek(s) != '"') return fail(s, "expected a string"), -1;
    jscan_span raw;
    if (!skip_string(s, &raw)) return -1;
    /* Decoding never lengthens a string, so one check covers the writes below; the
     * escapes were validated by skip_string. */
    if (raw.len + 1 > cap) return fail(s, "string too long"), -1;
    size_t o = 0;
    for (const char *p = raw.p, *e = raw.p + raw.len; p < e;) {
        if (*p != '\\') {
            const char *bs = memchr(p, '\\', (size_t)(e - p));
            size_t run = (size_t)((bs ? bs : e) - p);
            memcpy(out + o, p, run);
            o += run;
            p += run;
            continue;
        }
        char c = p[1];
        p += 2;
        if (c != 'u') {
            static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
            out[o++] = to[strchr(from, c) - from];
            continue;
        }
        unsigned cp;
        hex4(s, p, &cp);
        p += 4;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            unsigned lo;
            if (e - p < 6 || p[0] != '\\' || p[1] != 'u' || !hex4(s, p + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF)
                return fail(s, "unpaired surrogate in a string"), -1;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            p += 6;
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return fail(s, "unpaired surrogate in a string"), -1;
        } else if (cp == 0) {
            return fail(s, "NUL in a string"), -1;
        }
        o += utf8(cp, out + o);
    }
    out[o] = 0;
    return (long)o;
}

bool jscan_key_is(jscan_span key, const char *name) {
    size_t n = strlen(name);
    return key.len == n && strncasecmp(key.p, name, n) == 0 && !memchr(key.p, '\\', key.len);
}
