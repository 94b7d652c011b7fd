/* certs.c -- GnuTLS behind certs.h: key generation, X.509 issuing, validity and checks.
 * Without GnuTLS the same API answers with an error that says what to do instead.
 */
#include "extender/certs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void ext_cert_pem_free(ext_cert_pem *p) {
    if (!p) return;
    free(p->cert);
    free(p->key);
    p->cert = p->key = NULL;
}

bool ext_certs_due(int64_t not_before, int64_t not_after, int64_t now) {
    if (not_after <= not_before) return true;
    return now >= not_before + (not_after - not_before) / 3 * 2;
}

#ifndef EXT_HAVE_GNUTLS

#define NO_GNUTLS "this tessera-extender was built without GnuTLS, so it cannot make or read certificates: " \
                  "pass --webhook-cert FILE and --webhook-key FILE (e.g. from cert-manager), or build with " \
                  "libgnutls28-dev installed"

bool ext_certs_available(void) { return false; }

int ext_certs_make_ca(const char *cn, int days, ext_cert_pem *out, char *err, size_t errlen) {
    snprintf(err, errlen, NO_GNUTLS);
    return -1;
}

int ext_certs_make_serving(const ext_cert_pem *ca, const char *const *dns, int ndns, int days, ext_cert_pem *out,
                           char *err, size_t errlen) {
    snprintf(err, errlen, NO_GNUTLS);
    return -1;
}

int ext_certs_validity(const char *cert_pem, int64_t *not_before, int64_t *not_after, char *err, size_t errlen) {
    snprintf(err, errlen, NO_GNUTLS);
    return -1;
}

int ext_certs_verify(const char *ca_pem, const char *cert_pem, const char *dns_name, int64_t now, char *err,
                     size_t errlen) {
    snprintf(err, errlen, NO_GNUTLS);
    return -1;
}

int ext_certs_key_matches(const char *cert_pem, const char *key_pem, char *err, size_t errlen) {
    snprintf(err, errlen, NO_GNUTLS);
    return -1;
}

#else

#include <gnutls/abstract.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

bool ext_certs_available(void) { return true; }

static int tls_fail(char *err, size_t errlen, const char *what, int rc) {
    snprintf(err, errlen, "%s: %s", what, gnutls_strerror(rc));
    return -1;
}

static char *datum_str(gnutls_datum_t *d) {
    char *s = malloc(d->size + 1);
    if (s) {
        memcpy(s, d->data, d->size);
        s[d->size] = 0;
    }
    gnutls_free(d->data);
    d->data = NULL;
    return s;
}

static int import_crt(gnutls_x509_crt_t *crt, const char *pem, char *err, size_t errlen) {
    int rc = gnutls_x509_crt_init(crt);
    if (rc < 0) return tls_fail(err, errlen, "certificate", rc);
    gnutls_datum_t d = {(unsigned char *)pem, pem ? (unsigned)strlen(pem) : 0};
    if (!pem || (rc = gnutls_x509_crt_import(*crt, &d, GNUTLS_X509_FMT_PEM)) < 0) {
        gnutls_x509_crt_deinit(*crt);
        *crt = NULL;
        return tls_fail(err, errlen, "not a PEM certificate", pem ? rc : GNUTLS_E_BASE64_DECODING_ERROR);
    }
    return 0;
}

static int import_key(gnutls_x509_privkey_t *key, const char *pem, char *err, size_t errlen) {
    int rc = gnutls_x509_privkey_init(key);
    if (rc < 0) return tls_fail(err, errlen, "key", rc);
    gnutls_datum_t d = {(unsigned char *)pem, pem ? (unsigned)strlen(pem) : 0};
    if (!pem || (rc = gnutls_x509_privkey_import2(*key, &d, GNUTLS_X509_FMT_PEM, NULL, GNUTLS_PKCS_PLAIN)) < 0) {
        gnutls_x509_privkey_deinit(*key);
        *key = NULL;
        return tls_fail(err, errlen, "not a PEM private key", pem ? rc : GNUTLS_E_BASE64_DECODING_ERROR);
    }
    return 0;
}

static int new_key(gnutls_x509_privkey_t *key, char *err, size_t errlen) {
    int rc = gnutls_x509_privkey_init(key);
    if (rc >= 0) rc = gnutls_x509_privkey_generate(*key, GNUTLS_PK_ECDSA, GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0);
    if (rc < 0) {
        gnutls_x509_privkey_deinit(*key);
        *key = NULL;
        return tls_fail(err, errlen, "generating an ECDSA P-256 key", rc);
    }
    return 0;
}

/* The fields every certificate here shares: v3, a random positive serial, validity, CN, key
 * and its subject key identifier. */
static int base_crt(gnutls_x509_crt_t crt, gnutls_x509_privkey_t key, const char *cn, time_t from, time_t to) {
    unsigned char serial[16];
    int rc = gnutls_rnd(GNUTLS_RND_NONCE, serial, sizeof serial);
    serial[0] &= 0x7f;   /* DER INTEGER: positive */
    serial[0] |= 0x01;   /* and without a leading zero byte */
    if (rc >= 0) rc = gnutls_x509_crt_set_version(crt, 3);
    if (rc >= 0) rc = gnutls_x509_crt_set_serial(crt, serial, sizeof serial);
    if (rc >= 0) rc = gnutls_x509_crt_set_activation_time(crt, from);
    if (rc >= 0) rc = gnutls_x509_crt_set_expiration_time(crt, to);
    if (rc >= 0) rc = gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, cn, (unsigned)strlen(cn));
    if (rc >= 0) rc = gnutls_x509_crt_set_key(crt, key);
    unsigned char id[64];
    size_t idlen = sizeof id;
    if (rc >= 0) rc = gnutls_x509_crt_get_key_id(crt, GNUTLS_KEYID_USE_SHA1, id, &idlen);
    if (rc >= 0) rc = gnutls_x509_crt_set_subject_key_id(crt, id, idlen);
    return rc;
}

static int export_pair(gnutls_x509_crt_t crt, gnutls_x509_privkey_t key, ext_cert_pem *out, char *err,
                       size_t errlen) {
    gnutls_datum_t c = {0}, k = {0};
    int rc = gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_PEM, &c);
    if (rc >= 0) rc = gnutls_x509_privkey_export2_pkcs8(key, GNUTLS_X509_FMT_PEM, NULL, GNUTLS_PKCS_PLAIN, &k);
    if (rc < 0) {
        gnutls_free(c.data);
        gnutls_free(k.data);
        return tls_fail(err, errlen, "exporting PEM", rc);
    }
    out->cert = datum_str(&c);
    out->key = datum_str(&k);
    if (!out->cert || !out->key) {
        ext_cert_pem_free(out);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

int ext_certs_make_ca(const char *cn, int days, ext_cert_pem *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    gnutls_x509_privkey_t key = NULL;
    gnutls_x509_crt_t crt = NULL;
    if (new_key(&key, err, errlen) < 0) return -1;
    int rc = gnutls_x509_crt_init(&crt);
    time_t now = time(NULL);
    if (rc >= 0) rc = base_crt(crt, key, cn, now - 300, now + (time_t)days * 86400);
    if (rc >= 0) rc = gnutls_x509_crt_set_basic_constraints(crt, 1, 0);
    if (rc >= 0) rc = gnutls_x509_crt_set_key_usage(crt, GNUTLS_KEY_KEY_CERT_SIGN | GNUTLS_KEY_CRL_SIGN |
                                                              GNUTLS_KEY_DIGITAL_SIGNATURE);
    if (rc >= 0) rc = gnutls_x509_crt_sign2(crt, crt, key, GNUTLS_DIG_SHA256, 0);
    int ret = rc < 0 ? tls_fail(err, errlen, "making the CA certificate", rc) : export_pair(crt, key, out, err, errlen);
    gnutls_x509_crt_deinit(crt);
    gnutls_x509_privkey_deinit(key);
    return ret;
}

int ext_certs_make_serving(const ext_cert_pem *ca, const char *const *dns, int ndns, int days, ext_cert_pem *out,
                           char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (ndns < 1) {
        snprintf(err, errlen, "a serving certificate needs at least one DNS name");
        return -1;
    }
    gnutls_x509_crt_t cacrt = NULL, crt = NULL;
    gnutls_x509_privkey_t cakey = NULL, key = NULL;
    int ret = -1;
    if (import_crt(&cacrt, ca->cert, err, errlen) < 0) return -1;
    if (import_key(&cakey, ca->key, err, errlen) < 0) goto out;
    if (new_key(&key, err, errlen) < 0) goto out;
    time_t now = time(NULL), to = now + (time_t)days * 86400, ca_to = gnutls_x509_crt_get_expiration_time(cacrt);
    if (ca_to > 0 && to > ca_to) to = ca_to;
    unsigned char akid[64];
    size_t akidlen = sizeof akid;
    int rc = gnutls_x509_crt_init(&crt);
    if (rc >= 0) rc = base_crt(crt, key, dns[0], now - 300, to);
    if (rc >= 0) rc = gnutls_x509_crt_set_basic_constraints(crt, 0, -1);
    if (rc >= 0) rc = gnutls_x509_crt_set_key_usage(crt, GNUTLS_KEY_DIGITAL_SIGNATURE | GNUTLS_KEY_KEY_ENCIPHERMENT);
    if (rc >= 0) rc = gnutls_x509_crt_set_key_purpose_oid(crt, GNUTLS_KP_TLS_WWW_SERVER, 0);
    for (int i = 0; rc >= 0 && i < ndns; i++)
        rc = gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_DNSNAME, dns[i], (unsigned)strlen(dns[i]),
                                                  GNUTLS_FSAN_APPEND);
    if (rc >= 0 && gnutls_x509_crt_get_subject_key_id(cacrt, akid, &akidlen, NULL) >= 0)
        rc = gnutls_x509_crt_set_authority_key_id(crt, akid, akidlen);
    if (rc >= 0) rc = gnutls_x509_crt_sign2(crt, cacrt, cakey, GNUTLS_DIG_SHA256, 0);
    ret = rc < 0 ? tls_fail(err, errlen, "making the serving certificate", rc) : export_pair(crt, key, out, err, errlen);
out:
    gnutls_x509_crt_deinit(cacrt);
    gnutls_x509_crt_deinit(crt);
    gnutls_x509_privkey_deinit(cakey);
    gnutls_x509_privkey_deinit(key);
    return ret;
}

int ext_certs_validity(const char *cert_pem, int64_t *not_before, int64_t *not_after, char *err, size_t errlen) {
    gnutls_x509_crt_t crt;
    if (import_crt(&crt, cert_pem, err, errlen) < 0) return -1;
    *not_before = (int64_t)gnutls_x509_crt_get_activation_time(crt);
    *not_after = (int64_t)gnutls_x509_crt_get_expiration_time(crt);
    gnutls_x509_crt_deinit(crt);
    if (*not_before < 0 || *not_after < 0) {
        snprintf(err, errlen, "the certificate's validity cannot be read");
        return -1;
    }
    return 0;
}

int ext_certs_verify(const char *ca_pem, const char *cert_pem, const char *dns_name, int64_t now, char *err,
                     size_t errlen) {
    /* Every CA of the bundle (a caBundle holds two while the CA changes). */
    gnutls_x509_crt_t *cas = NULL, crt = NULL;
    unsigned ncas = 0;
    gnutls_datum_t d = {(unsigned char *)ca_pem, ca_pem ? (unsigned)strlen(ca_pem) : 0};
    int rc = ca_pem ? gnutls_x509_crt_list_import2(&cas, &ncas, &d, GNUTLS_X509_FMT_PEM, 0) : GNUTLS_E_BASE64_DECODING_ERROR;
    if (rc < 0 || ncas == 0) return tls_fail(err, errlen, "not a PEM CA certificate", rc < 0 ? rc : GNUTLS_E_BASE64_DECODING_ERROR);
    if (import_crt(&crt, cert_pem, err, errlen) < 0) {
        for (unsigned i = 0; i < ncas; i++) gnutls_x509_crt_deinit(cas[i]);
        gnutls_free(cas);
        return -1;
    }
    unsigned status = 0;
    int ret = 0;
    /* Times are checked below against the caller's clock. */
    rc = gnutls_x509_crt_verify(crt, cas, ncas, GNUTLS_VERIFY_DISABLE_TIME_CHECKS | GNUTLS_VERIFY_DISABLE_TRUSTED_TIME_CHECKS,
                                &status);
    time_t nb = gnutls_x509_crt_get_activation_time(crt), na = gnutls_x509_crt_get_expiration_time(crt);
    if (rc < 0 || status) {
        gnutls_datum_t why = {0};
        if (rc >= 0 && gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &why, 0) >= 0) {
            snprintf(err, errlen, "the certificate does not verify against the CA: %s", why.data);
            gnutls_free(why.data);
        } else {
            snprintf(err, errlen, "the certificate does not verify against the CA: %s", gnutls_strerror(rc));
        }
        ret = -1;
    } else if (now < (int64_t)nb || now > (int64_t)na) {
        snprintf(err, errlen, "the certificate is not valid now (valid %lld..%lld, now %lld)", (long long)nb,
                 (long long)na, (long long)now);
        ret = -1;
    } else if (dns_name && !gnutls_x509_crt_check_hostname(crt, dns_name)) {
        snprintf(err, errlen, "the certificate does not name %s", dns_name);
        ret = -1;
    }
    for (unsigned i = 0; i < ncas; i++) gnutls_x509_crt_deinit(cas[i]);
    gnutls_free(cas);
    gnutls_x509_crt_deinit(crt);
    return ret;
}

int ext_certs_key_matches(const char *cert_pem, const char *key_pem, char *err, size_t errlen) {
    gnutls_x509_crt_t crt = NULL;
    gnutls_x509_privkey_t key = NULL;
    if (import_crt(&crt, cert_pem, err, errlen) < 0) return -1;
    if (import_key(&key, key_pem, err, errlen) < 0) {
        gnutls_x509_crt_deinit(crt);
        return -1;
    }
    unsigned char a[64], b[64];
    size_t al = sizeof a, bl = sizeof b;
    int ret = 0;
    if (gnutls_x509_crt_get_key_id(crt, GNUTLS_KEYID_USE_SHA256, a, &al) < 0 ||
        gnutls_x509_privkey_get_key_id(key, GNUTLS_KEYID_USE_SHA256, b, &bl) < 0 || al != bl || memcmp(a, b, al)) {
        snprintf(err, errlen, "the private key does not belong to the certificate");
        ret = -1;
    }
    gnutls_x509_crt_deinit(crt);
    gnutls_x509_privkey_deinit(key);
    return ret;
}

#endif
