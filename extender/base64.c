/* base64.c -- RFC 4648 base64 with padding; see base64.h. */
#include "extender/base64.h"

#include <stdint.h>
#include <stdlib.h>

static const char b64_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *ext_base64_encode(const void *data, size_t len, size_t *outlen) {
    const unsigned char *in = data;
    size_t n = (len + 2) / 3 * 4;
    char *out = malloc(n + 1), *o = out;
    if (!out) return NULL;
    size_t i = 0;
    for (; i + 2 < len; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        *o++ = b64_alphabet[v >> 18 & 63];
        *o++ = b64_alphabet[v >> 12 & 63];
        *o++ = b64_alphabet[v >> 6 & 63];
        *o++ = b64_alphabet[v & 63];
    }
    if (i < len) {
        uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < len ? (uint32_t)in[i + 1] << 8 : 0);
        *o++ = b64_alphabet[v >> 18 & 63];
        *o++ = b64_alphabet[v >> 12 & 63];
        *o++ = i + 1 < len ? b64_alphabet[v >> 6 & 63] : '=';
        *o++ = '=';
    }
    *o = 0;
    if (outlen) *outlen = n;
    return out;
}

static int b64_value(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

char *ext_base64_decode(const char *text, size_t len, size_t *outlen) {
    char *out = malloc(len / 4 * 3 + 4), *o = out;
    if (!out) return NULL;
    uint32_t acc = 0;
    int bits = 0, pad = 0;
    size_t digits = 0;
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
        if (c == '=') { pad++; continue; }
        int v = b64_value(c);
        if (v < 0 || pad) goto bad;       /* a digit after padding is not base64 either */
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        digits++;
        if (bits >= 8) {
            bits -= 8;
            *o++ = (char)(acc >> bits & 0xff);
        }
    }
    if (digits % 4 == 1 || pad > 2) goto bad;   /* one digit of a group cannot hold a byte */
    *o = 0;
    if (outlen) *outlen = (size_t)(o - out);
    return out;
bad:
    free(out);
    return NULL;
}
