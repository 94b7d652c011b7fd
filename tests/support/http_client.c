/* http_client.c -- http_client.h on libcurl's easy interface. */
#include "tests/support/http_client.h"

#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>

size_t http_body_collect(char *data, size_t size, size_t n, void *body) {
    http_body *b = body;
    char *np = realloc(b->p, b->len + size * n + 1);
    if (!np) return 0;
    b->p = np;
    memcpy(b->p + b->len, data, size * n);
    b->len += size * n;
    b->p[b->len] = 0;
    return size * n;
}

char *http_call(const char *url, const char *json_body, long timeout_s, long *code) {
    CURL *c = curl_easy_init();
    http_body b = {0};
    struct curl_slist *h = json_body ? curl_slist_append(NULL, "Content-Type: application/json") : NULL;
    *code = 0;
    if (!c) return NULL;
    curl_easy_setopt(c, CURLOPT_URL, url);
    if (json_body) {
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, json_body);
    }
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, http_body_collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, timeout_s);
    if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, code);
    curl_easy_cleanup(c);
    curl_slist_free_all(h);
    return b.p;
}
