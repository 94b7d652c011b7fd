/* strbuf.c -- see strbuf.h. */
#include "kube/strbuf.h"

#include "kube/json.h"

#include <stdio.h>
#include <stdlib.h>

static bool resize(kube_strbuf *b, size_t cap) {
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

bool kube_strbuf_grow(kube_strbuf *b, size_t n) {
    if (b->oom) return false;
    size_t need = b->len + n + 1;
    if (need < n) return b->oom = true, false;   /* overflow */
    if (need <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) cap = cap * 2 > cap ? cap * 2 : need;
    return resize(b, cap);
}

void kube_strbuf_reserve(kube_strbuf *b, size_t n) {
    if (b->oom || b->len + n + 1 <= b->cap) return;
    resize(b, b->len + n + 1);
}

void kube_strbuf_json(kube_strbuf *b, const char *s) { kube_json_quote(kube_strbuf_put, b, s); }

void kube_strbuf_vprintf(kube_strbuf *b, const char *fmt, va_list ap) {
    if (b->oom) return;
    va_list again;
    va_copy(again, ap);
    int w = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
    if (w < 0) {                    /* an encoding error: the text would be wrong, so the whole is lost */
        b->oom = true;
    } else if (b->p && (size_t)w < b->cap - b->len) {
        b->len += (size_t)w;
    } else if (kube_strbuf_grow(b, (size_t)w)) {
        vsnprintf(b->p + b->len, b->cap - b->len, fmt, again);
        b->len += (size_t)w;
    }
    va_end(again);
}

void kube_strbuf_printf(kube_strbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    kube_strbuf_vprintf(b, fmt, ap);
    va_end(ap);
}

char *kube_strbuf_finish(kube_strbuf *b) {
    char *p = b->p;
    if (b->oom) {
        free(p);
        p = NULL;
    } else if (!p) {
        p = calloc(1, 1);
    }
    *b = (kube_strbuf){0};
    return p;
}

void kube_strbuf_free(kube_strbuf *b) {
    free(b->p);
    *b = (kube_strbuf){0};
}
