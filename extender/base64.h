/* base64.h -- standard base64 (RFC 4648, with padding), for what Kubernetes carries that
 * way: an AdmissionReview's JSON Patch, a Secret's data, a webhook's caBundle. Small and
 * plain C, so the webhook does not depend on GnuTLS being there.
 */
#ifndef EXT_BASE64_H
#define EXT_BASE64_H

#include <stddef.h>

/* malloc'd, NUL-terminated encoding of len bytes (*outlen its length; outlen may be NULL);
 * NULL when out of memory. */
char *ext_base64_encode(const void *data, size_t len, size_t *outlen);

/* malloc'd decoding, NUL-terminated (so text decodes into a C string), *outlen its length
 * (may be NULL). Whitespace is skipped; padding is optional. NULL on a character outside the
 * alphabet, a truncated group, or out of memory. */
char *ext_base64_decode(const char *text, size_t len, size_t *outlen);

#endif
