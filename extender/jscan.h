/* jscan.h -- a forward-only, validating scanner over JSON text, for the large parts of
 * ExtenderArgs: NodeNames (up to 5,000 strings) and Nodes.items (1,000 full Node objects,
 * megabytes). It finds where each value starts and ends without building a tree, so
 * filter neither allocates per member nor prints the Node objects back: it echoes their
 * original text. Small parts (the Pod) are handed to cJSON by span.
 *
 * Everything it skips is checked as RFC 8259 JSON (balanced containers, closed strings,
 * legal escapes, numbers and literals), nesting at most JSCAN_MAX_DEPTH deep, so a
 * malformed or truncated body fails here as it would in cJSON.
 *
 *   jscan s; jscan_init(&s, body, len);
 *   jscan_span key; if (!jscan_object_begin(&s)) ...
 *   while (jscan_object_next(&s, &key) > 0) { ... jscan_skip(&s, NULL) or read the value ... }
 */
#ifndef EXT_JSCAN_H
#define EXT_JSCAN_H

#include <stdbool.h>
#include <stddef.h>

#define JSCAN_MAX_DEPTH 256

typedef struct jscan {
    const char *p, *end;
    const char *err;        /* set on the first error; every call then fails */
    bool first;             /* the container just begun has returned no member yet (iteration
                             * is strictly nested, so one flag serves every level) */
} jscan;

typedef struct jscan_span { const char *p; size_t len; } jscan_span;

void jscan_init(jscan *s, const char *text, size_t len);

/* The next value's first character ('{', '[', '"', 'n', ...) after whitespace, or 0 at
 * the end of the text. */
char jscan_peek(jscan *s);

/* Skip one value; its text (without surrounding whitespace) in *out if not NULL. */
bool jscan_skip(jscan *s, jscan_span *out);

/* Objects: begin consumes '{'; next returns 1 with the key's raw text (between the
 * quotes, escapes undecoded) and consumes the ':' -- the caller then reads or skips the
 * value --, 0 after the closing '}', -1 on error. Arrays alike, without keys. */
bool jscan_object_begin(jscan *s);
int jscan_object_next(jscan *s, jscan_span *key);
bool jscan_array_begin(jscan *s);
int jscan_array_next(jscan *s);

/* Consume "null"; false (nothing consumed) if the next value is not null. */
bool jscan_null(jscan *s);

/* Decode a string value into out (NUL-terminated UTF-8, at most cap bytes including the
 * NUL); the number of bytes written without the NUL, -1 on error (not a string, bad
 * escape, too long). A decoded string is never longer than its JSON text. */
long jscan_string(jscan *s, char *out, size_t cap);

/* Whether a raw key equals name, ASCII case-insensitively (as Go's encoding/json matches
 * keys); keys with escapes never match. */
bool jscan_key_is(jscan_span key, const char *name);

/* Whether only whitespace is left. */
bool jscan_at_end(jscan *s);

#endif
