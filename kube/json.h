/* json.h -- JSON text the programs write by hand rather than through cJSON (the extender's filter answers, which
 * cJSON's allocation per item would slow; the node agent's holdings record): a string's quoted form, the same
 * bytes everywhere.
 */
#ifndef KUBE_JSON_H
#define KUBE_JSON_H

#include <stddef.h>
#include <stdio.h>

/* s as a JSON string, quotes included, through add(user, bytes, n): quotes, backslashes and control characters
 * escaped ("\u000a" for a newline), the rest (UTF-8, which the caller has checked) as it is. Inline, so a caller's
 * static add is inlined into it: the filter answers write thousands of names. */
static inline void kube_json_quote(void (*add)(void *user, const char *s, size_t n), void *user, const char *s) {
    add(user, "\"", 1);
    const char *run = s;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        add(user, run, (size_t)(s - run));
        char esc[8];
        int n = c == '"' || c == '\\' ? snprintf(esc, sizeof esc, "\\%c", c) : snprintf(esc, sizeof esc, "\\u%04x", c);
        add(user, esc, (size_t)n);
        run = s + 1;
    }
    add(user, run, (size_t)(s - run));
    add(user, "\"", 1);
}

#endif
