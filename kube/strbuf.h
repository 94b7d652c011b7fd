/* strbuf.h -- a growing text buffer for what the programs write by hand: API bodies and annotations, the
 * extender's filter and prioritize answers, /metrics and /readyz text. One implementation, so that every writer
 * treats a failed allocation the same way: it is sticky (every later append does nothing) and the writer checks
 * once, at the end, with kube_strbuf_finish.
 *
 *   kube_strbuf b = {0};
 *   kube_strbuf_lit(&b, "{\"name\":");
 *   kube_strbuf_json(&b, name);                 // a JSON string (kube/json.h)
 *   kube_strbuf_printf(&b, ",\"gpus\":%d}", n);
 *   char *text = kube_strbuf_finish(&b);        // NUL-terminated, the caller frees it; NULL if memory ran out
 *
 * The appends are inline: the extender writes a filter answer for 5,000 nodes through them.
 */
#ifndef KUBE_STRBUF_H
#define KUBE_STRBUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

typedef struct kube_strbuf {
    char *p;        /* NUL-terminated once anything was appended; NULL before */
    size_t len;     /* bytes written, without the NUL */
    size_t cap;     /* bytes allocated */
    bool oom;       /* an allocation failed: every later append does nothing */
} kube_strbuf;

/* Room for n more bytes and the NUL, doubling (at least 256 bytes); false, and oom set, when memory ran out. */
bool kube_strbuf_grow(kube_strbuf *b, size_t n);

/* Room for n more bytes and the NUL, exactly: for one large append whose size is known (no doubling past it). */
void kube_strbuf_reserve(kube_strbuf *b, size_t n);

/* Append n bytes of s. */
static inline void kube_strbuf_add(kube_strbuf *b, const char *s, size_t n) {
    if (b->oom || (b->len + n + 1 > b->cap && !kube_strbuf_grow(b, n))) return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

/* Append the string s. */
static inline void kube_strbuf_lit(kube_strbuf *b, const char *s) { kube_strbuf_add(b, s, strlen(s)); }

/* kube_strbuf_add with the buffer as void *, for kube_json_quote's callback. */
static inline void kube_strbuf_put(void *b, const char *s, size_t n) { kube_strbuf_add(b, s, n); }

/* Append s as a JSON string, quoted and escaped (kube/json.h). */
void kube_strbuf_json(kube_strbuf *b, const char *s);

/* Append printf's output; vprintf's. */
void kube_strbuf_printf(kube_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void kube_strbuf_vprintf(kube_strbuf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/* The text, which the caller frees; NULL (and the buffer freed) when memory ran out. An empty buffer gives "". The
 * buffer is empty again afterwards. */
char *kube_strbuf_finish(kube_strbuf *b);

/* Free the text and empty the buffer. */
void kube_strbuf_free(kube_strbuf *b);

#endif
