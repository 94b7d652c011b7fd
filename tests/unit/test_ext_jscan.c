/* test_ext_jscan.c -- the scanner filter and prioritize read their bodies with: it must
 * accept exactly what is JSON (checked against cJSON on real kube-scheduler bodies and
 * every truncation of them), decode strings as JSON defines, and find the spans it is
 * asked for. */
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>

#include "ext_helpers.h"
#include "extender/jscan.h"
#include "harness.h"

static bool valid(const char *t, size_t n) {
    jscan s;
    jscan_init(&s, t, n);
    return jscan_skip(&s, NULL) && jscan_at_end(&s);
}

/* The captured bodies, whole and cut at every length: jscan and cJSON agree. */
TEST(ext_jscan_agrees_with_cjson_on_captured_bodies_and_their_truncations) {
    static const char *files[] = {"extender-samples/node-list/01-filter.request.raw.json",
                                  "extender-samples/node-cache/02-prioritize.request.raw.json",
                                  "extender-samples/node-list/04-preempt.request.raw.json"};
    for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
        size_t len;
        char *t = test_fixture(files[f], &len);
        CHECK_MSG(valid(t, len), "%s rejected", files[f]);
        for (size_t cut = 0; cut < len; cut++) {
            cJSON *c = cJSON_ParseWithLength(t, cut);
            bool cj = c != NULL;
            cJSON_Delete(c);
            if (valid(t, cut) != cj) {
                free(t);
                CHECK_MSG(false, "%s cut at %zu: jscan %s, cJSON %s", files[f], cut, cj ? "rejects" : "accepts",
                          cj ? "accepts" : "rejects");
            }
        }
        free(t);
    }
}

TEST(ext_jscan_rejects_what_is_not_json) {
    static const char *bad[] = {"", "{", "{\"a\":}", "{\"a\" 1}", "{,}", "[1,]", "{\"a\":1,}", "[1 2]", "\"\x01\"",
                                "\"\\q\"", "\"\\u12\"", "\"\\u12zz\"", "tru", "nul", "01", "-", "1.", "1e", ".5",
                                "{\"a\":1}}", "[]]", "{'a':1}", "[\"a\"", "\"abc", "{\"a\":1 \"b\":2}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK_MSG(!valid(bad[i], strlen(bad[i])), "accepted: %s", bad[i]);
    char deep[2 * JSCAN_MAX_DEPTH + 10];
    memset(deep, '[', JSCAN_MAX_DEPTH + 5);
    memset(deep + JSCAN_MAX_DEPTH + 5, ']', JSCAN_MAX_DEPTH + 5);
    CHECK(!valid(deep, sizeof deep));   /* nesting is bounded: no stack exhaustion from a body */
    static const char *good[] = {"0", "-0.5e+3", "[]", "{}", " [ 1 , {\"a\" : [null, true, false]} ] ", "\"\\u00e9\\/\""};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        CHECK_MSG(valid(good[i], strlen(good[i])), "rejected: %s", good[i]);
}

TEST(ext_jscan_decodes_strings) {
    const char *t = "[\"node-1\", \"a\\\"b\\\\c\\n\", \"\\u00e9\\ud83d\\ude00\", \"\\ud800\", \"\\u0000\"]";
    jscan s;
    jscan_init(&s, t, strlen(t));
    char out[64];
    CHECK(jscan_array_begin(&s));
    CHECK_INT(jscan_array_next(&s), 1);
    CHECK_INT(jscan_string(&s, out, sizeof out), 6);
    CHECK(!strcmp(out, "node-1"));
    CHECK_INT(jscan_array_next(&s), 1);
    CHECK(jscan_string(&s, out, sizeof out) == 6 && !strcmp(out, "a\"b\\c\n"));
    CHECK_INT(jscan_array_next(&s), 1);
    CHECK(jscan_string(&s, out, sizeof out) == 6 && !strcmp(out, "\xc3\xa9\xf0\x9f\x98\x80"));
    CHECK_INT(jscan_array_next(&s), 1);
    CHECK_INT(jscan_string(&s, out, sizeof out), -1);   /* a lone surrogate is not text */
    jscan_init(&s, "\"\\u0000\"", 8);
    CHECK_INT(jscan_string(&s, out, sizeof out), -1);   /* nor is NUL in a C string */
    jscan_init(&s, "\"long\"", 6);
    CHECK_INT(jscan_string(&s, out, 4), -1);            /* never past cap */
}

TEST(ext_jscan_objects_keys_and_spans) {
    const char *t = "{\"Pod\": {\"x\": [1, 2]}, \"nodenames\" : null, \"\\u0050od\": 3}";
    jscan s;
    jscan_init(&s, t, strlen(t));
    jscan_span k, v;
    CHECK(jscan_object_begin(&s));
    CHECK_INT(jscan_object_next(&s, &k), 1);
    CHECK(jscan_key_is(k, "pod"));
    CHECK(jscan_skip(&s, &v));
    CHECK(v.len == 13 && !memcmp(v.p, "{\"x\": [1, 2]}", 13));
    CHECK_INT(jscan_object_next(&s, &k), 1);
    CHECK(jscan_key_is(k, "NodeNames"));
    CHECK(jscan_null(&s));
    CHECK_INT(jscan_object_next(&s, &k), 1);
    CHECK(!jscan_key_is(k, "Pod"));   /* escaped keys never match */
    CHECK(jscan_skip(&s, NULL));
    CHECK_INT(jscan_object_next(&s, &k), 0);
    CHECK(jscan_at_end(&s));
}

/* Filter and prioritize on thousands of corrupted copies of real bodies (bytes flipped,
 * deleted, duplicated; cut short): every answer is 200 or 400 with a JSON body, and the
 * cache is untouched. Under `make asan` this is the scanner's out-of-bounds check. */

static uint64_t fz = 0x9E3779B97F4A7C15ull;
static size_t fz_next(size_t m) {
    fz ^= fz << 13;
    fz ^= fz >> 7;
    fz ^= fz << 17;
    return (size_t)(fz % m);
}

TEST(ext_jscan_corrupted_bodies_get_clean_answers) {
    static const char *files[] = {"extender-samples/node-list/01-filter.request.raw.json",
                                  "extender-samples/node-cache/01-filter.request.raw.json"};
    static const char junk[] = "{}[]\",:\\ n0-eu\x01\xff";
    ext_state *st = demo_state();
    ext_verbs v;
    ext_verbs_init(&v, st, NULL, NULL, NULL);
    int bad = 0, n400 = 0;
    char where[128] = "";
    for (size_t f = 0; f < 2 && !bad; f++) {
        size_t len;
        char *orig = test_fixture(files[f], &len);
        char *t = malloc(len + 64);
        for (int round = 0; round < 1500 && !bad; round++) {
            memcpy(t, orig, len);
            size_t n = len;
            for (int k = 0, edits = 1 + (int)fz_next(3); k < edits; k++) {
                size_t at = fz_next(n);
                switch (fz_next(4)) {
                case 0: t[at] = junk[fz_next(sizeof junk - 1)]; break;                      /* flip */
                case 1: memmove(t + at, t + at + 1, n - at - 1); n--; break;               /* delete */
                case 2: memmove(t + at + 1, t + at, n - at); n++; break;                   /* duplicate */
                default: n = at + 1; break;                                                /* truncate */
                }
            }
            verb_fn fns[2] = {ext_verb_filter, ext_verb_prioritize};
            for (int vb = 0; vb < 2; vb++) {
                ext_reply r = {0};
                fns[vb](&v, t, n, &r);
                cJSON *j = r.body ? cJSON_ParseWithLength(r.body, r.len) : NULL;
                if ((r.status != 200 && r.status != 400) || !j) {
                    bad = 1;
                    snprintf(where, sizeof where, "%s round %d verb %d: status %d", files[f], round, vb, r.status);
                }
                n400 += r.status == 400;
                cJSON_Delete(j);
                ext_reply_free(&r);
            }
        }
        free(t);
        free(orig);
    }
    ext_state_lock(st);
    ext_state_stats s;
    ext_state_get_stats(st, &s);
    ext_state_unlock(st);
    char why[256];
    bool consistent = all_nodes_consistent(st, why, sizeof why);
    ext_state_free(st);
    CHECK_MSG(!bad, "%s", where);
    CHECK(n400 > 1000);   /* most corruptions are caught, not silently accepted */
    CHECK_INT(s.bound + s.assumed + s.binding, 0);
    CHECK_MSG(consistent, "%s", why);
}
