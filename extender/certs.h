/* certs.h -- the webhook's certificates, made with GnuTLS: a self-signed CA, a serving
 * certificate it signs for the Service's DNS names, and when one is due for renewal. Keys
 * are ECDSA P-256, signatures SHA-256, everything PEM text (keys PKCS#8, unencrypted).
 *
 * Compiled only with EXT_HAVE_GNUTLS; without it every function that makes or reads a
 * certificate returns -1 saying to pass --webhook-cert/--webhook-key or to build with GnuTLS.
 */
#ifndef EXT_CERTS_H
#define EXT_CERTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EXT_CERTS_CA_DAYS 3650
#define EXT_CERTS_SERVING_DAYS 365

typedef struct ext_cert_pem {
    char *cert;   /* malloc'd PEM */
    char *key;    /* malloc'd PEM; NULL when only a certificate is meant */
} ext_cert_pem;

void ext_cert_pem_free(ext_cert_pem *p);

/* Whether this build can make certificates. */
bool ext_certs_available(void);

/* A self-signed CA named cn, valid from now (minus 5 minutes of clock skew) for days. */
int ext_certs_make_ca(const char *cn, int days, ext_cert_pem *out, char *err, size_t errlen);

/* A serving certificate for dns[0..ndns) (the first is also the CN), signed by the CA,
 * valid for days (never past the CA's own expiry). */
int ext_certs_make_serving(const ext_cert_pem *ca, const char *const *dns, int ndns, int days, ext_cert_pem *out,
                           char *err, size_t errlen);

/* notBefore / notAfter of a PEM certificate (the first in the text), in Unix seconds. */
int ext_certs_validity(const char *cert_pem, int64_t *not_before, int64_t *not_after, char *err, size_t errlen);

/* Due for renewal: 2/3 of the lifetime [not_before, not_after] has passed at now. */
bool ext_certs_due(int64_t not_before, int64_t not_after, int64_t now);

/* Whether a CA of ca_pem (one PEM certificate or several, as in a caBundle) signed cert_pem,
 * the certificate is within its validity at now, and it names dns_name (NULL: any name). 0, or
 * -1 with what is wrong. */
int ext_certs_verify(const char *ca_pem, const char *cert_pem, const char *dns_name, int64_t now, char *err,
                     size_t errlen);

/* Whether key_pem is the private key of cert_pem. 0, or -1 with err. */
int ext_certs_key_matches(const char *cert_pem, const char *key_pem, char *err, size_t errlen);

#endif
