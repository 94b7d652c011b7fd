/* test_kube_strbuf.c -- kube/strbuf.h, the text buffer the node agent's holdings record, the extender's filter
 * answers and /metrics are written into: what goes in comes out whole and in order past every growth, JSON strings
 * come out quoted, and a failed allocation loses the whole text rather than a part of it. */
#include "harness.h"

#include "kube/strbuf.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

TEST(kube_strbuf_keeps_every_byte_in_order_across_growth) {
    kube_strbuf b = {0};
    char want[20000];
    size_t n = 0;
    for (int i = 0; i < 2000; i++) {   /* 256 bytes at first, doubled many times on the way */
        char piece[16];
        int w = snprintf(piece, sizeof piece, "%d,", i);
        if (i % 2) kube_strbuf_add(&b, piece, (size_t)w);
        else kube_strbuf_printf(&b, "%d,", i);
        memcpy(want + n, piece, (size_t)w);
        n += (size_t)w;
    }
    want[n] = '\0';
    CHECK_INT((long long)b.len, (long long)n);
    char *text = kube_strbuf_finish(&b);
    CHECK(text != NULL);
    CHECK_STR(text, want);
    CHECK(b.p == NULL && b.len == 0 && !b.oom);   /* finished: empty again */
    free(text);
}

TEST(kube_strbuf_printf_longer_than_the_room_left) {
    kube_strbuf b = {0};
    kube_strbuf_lit(&b, "x");
    char big[5000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    kube_strbuf_printf(&b, "[%s]", big);   /* more than the first 256 bytes and more than one doubling */
    CHECK_INT((long long)b.len, 1 + 1 + 4999 + 1);
    CHECK(b.p[0] == 'x' && b.p[1] == '[' && b.p[2 + 4999] == ']' && b.p[b.len] == '\0');
    kube_strbuf_free(&b);
    CHECK(b.p == NULL);
}

TEST(kube_strbuf_json_quotes_and_escapes) {
    kube_strbuf b = {0};
    kube_strbuf_json(&b, "a\"b\\c\nd\x01 é");
    char *text = kube_strbuf_finish(&b);
    CHECK_STR(text, "\"a\\\"b\\\\c\\u000ad\\u0001 é\"");
    free(text);
}

TEST(kube_strbuf_empty_finishes_as_an_empty_string) {
    kube_strbuf b = {0};
    char *text = kube_strbuf_finish(&b);
    CHECK(text != NULL);
    CHECK_STR(text, "");
    free(text);
}

TEST(kube_strbuf_failed_allocation_loses_the_whole_text) {
    kube_strbuf b = {0};
    kube_strbuf_lit(&b, "{\"kept\":");
    CHECK(!kube_strbuf_grow(&b, SIZE_MAX));   /* no size fits: as if realloc had failed */
    CHECK(b.oom);
    kube_strbuf_lit(&b, "1}");                  /* sticky: nothing more is written */
    kube_strbuf_printf(&b, "%d", 2);
    CHECK_INT((long long)b.len, 8);
    CHECK(kube_strbuf_finish(&b) == NULL);      /* and the writer learns it once, at the end */
    CHECK(b.p == NULL && !b.oom);
}
