/* http_client.h -- the one small HTTP client of the tests and their fakes (libcurl): a GET or a JSON POST to
 * a URL on loopback, the answer as text. The fake kube-scheduler calls its extender with it, the deployed
 * harness the webhook and the probes, the tests the verbs (tests/unit/ext_proc.h). */
#ifndef HTTP_CLIENT_H
#define HTTP_CLIENT_H

#include <stddef.h>

/* A growing, NUL-terminated body; a CURLOPT_WRITEFUNCTION/WRITEDATA pair for tests that drive curl themselves. */
typedef struct http_body { char *p; size_t len; } http_body;
size_t http_body_collect(char *data, size_t size, size_t n, void *body);

/* GET url (json_body NULL), or POST json_body with Content-Type application/json; timeout_s bounds the whole
 * call. The answer's body (caller frees; NULL when none) whatever its status; *code the HTTP status, 0 when
 * nothing answered. */
char *http_call(const char *url, const char *json_body, long timeout_s, long *code);

#endif
