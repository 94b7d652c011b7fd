/* text.c -- printf-safe text for kube-scheduler and Events (text.h). */
#include "extender/base/text.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

size_t ext_text_printf_safe(char *out, size_t outlen, const char *in) {
    static const char spaced[] = " " EXT_TEXT_PERCENT;
    size_t n = 0;   /* the whole text's length so far; bytes below outlen - 1 are written */
    const char *s = in ? in : "";
    for (const char *p = s; *p; p++) {
        /* "25%" -> "25 percent": a space unless one is there already */
        bool spc = *p == '%' && p > s && p[-1] != ' ';
        const char *piece = *p == '%' ? spaced + !spc : p;
        size_t len = *p == '%' ? strlen(piece) : 1;
        for (size_t i = 0; i < len; i++, n++)
            if (outlen && n < outlen - 1) out[n] = piece[i];
    }
    if (outlen) out[n < outlen - 1 ? n : outlen - 1] = 0;
    return n;
}

char *ext_text_printf_safe_dup(const char *in) {
    size_t n = ext_text_printf_safe(NULL, 0, in);
    char *s = malloc(n + 1);
    if (s) ext_text_printf_safe(s, n + 1, in);
    return s;
}
