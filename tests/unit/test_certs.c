/* test_certs.c -- the webhook's certificates: a generated CA verifies the serving
 * certificate for each Service name (and no other), keys belong to their certificates,
 * lifetimes are as promised and the renewal decision falls at 2/3 of the lifetime.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ext_helpers.h"
#include "extender/certs.h"

static const char *const svc_dns[] = {"tessera-extender.tessera.svc", "tessera-extender.tessera.svc.cluster.local",
                                      "tessera-extender.tessera"};

TEST(certs_renewal_decision_at_two_thirds) {
    CHECK(!ext_certs_due(1000, 1300, 1000));
    CHECK(!ext_certs_due(1000, 1300, 1199));
    CHECK(ext_certs_due(1000, 1300, 1200));
    CHECK(ext_certs_due(1000, 1300, 5000));
    CHECK(ext_certs_due(1000, 1000, 900));   /* no lifetime at all */
}

TEST(certs_generated_ca_verifies_serving_certificate) {
    if (!ext_certs_available()) {
        char err[512];
        ext_cert_pem ca;
        CHECK(ext_certs_make_ca("x", 1, &ca, err, sizeof err) < 0);
        CHECK_CONTAINS(err, "--webhook-cert");
        printf("    skipped: built without GnuTLS\n");
        return;
    }
    ext_cert_pem ca = {0}, sv = {0}, other = {0};
    char err[512] = "";
    int64_t now = (int64_t)time(NULL);
    CHECK_MSG(ext_certs_make_ca("tessera-webhook-ca", EXT_CERTS_CA_DAYS, &ca, err, sizeof err) == 0, "%s", err);
    CHECK_MSG(ext_certs_make_serving(&ca, svc_dns, 3, EXT_CERTS_SERVING_DAYS, &sv, err, sizeof err) == 0, "%s", err);
    CHECK_MSG(ext_certs_make_ca("someone-else", 30, &other, err, sizeof err) == 0, "%s", err);
    CHECK(strstr(ca.cert, "BEGIN CERTIFICATE") && strstr(sv.key, "PRIVATE KEY"));
    for (int i = 0; i < 3; i++)
        CHECK_MSG(ext_certs_verify(ca.cert, sv.cert, svc_dns[i], now, err, sizeof err) == 0, "%s: %s", svc_dns[i], err);
    CHECK(ext_certs_verify(ca.cert, sv.cert, "evil.example.com", now, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "does not name");
    CHECK(ext_certs_verify(other.cert, sv.cert, svc_dns[0], now, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "does not verify");
    CHECK(ext_certs_verify(ca.cert, sv.cert, svc_dns[0], now + 400LL * 86400, err, sizeof err) < 0);   /* expired */
    CHECK_MSG(ext_certs_key_matches(sv.cert, sv.key, err, sizeof err) == 0, "%s", err);
    CHECK(ext_certs_key_matches(sv.cert, ca.key, err, sizeof err) < 0);
    int64_t nb, na;
    CHECK_MSG(ext_certs_validity(ca.cert, &nb, &na, err, sizeof err) == 0, "%s", err);
    CHECK(llabs((long long)(na - nb) - (long long)EXT_CERTS_CA_DAYS * 86400 - 300) < 5);
    CHECK(!ext_certs_due(nb, na, now));
    CHECK_MSG(ext_certs_validity(sv.cert, &nb, &na, err, sizeof err) == 0, "%s", err);
    CHECK(llabs((long long)(na - nb) - 365LL * 86400 - 300) < 5);
    CHECK(nb <= now && now - nb < 400);
    CHECK(!ext_certs_due(nb, na, now));
    CHECK(!ext_certs_due(nb, na, now + 240LL * 86400));
    CHECK(ext_certs_due(nb, na, now + 244LL * 86400));
    ext_cert_pem_free(&ca);
    ext_cert_pem_free(&sv);
    ext_cert_pem_free(&other);
}

/* A serving certificate never outlives its CA. */
TEST(certs_serving_certificate_capped_at_ca_expiry) {
    if (!ext_certs_available()) return;
    ext_cert_pem ca = {0}, sv = {0};
    char err[512] = "";
    CHECK_MSG(ext_certs_make_ca("short-ca", 2, &ca, err, sizeof err) == 0, "%s", err);
    CHECK_MSG(ext_certs_make_serving(&ca, svc_dns, 1, 365, &sv, err, sizeof err) == 0, "%s", err);
    int64_t cnb, cna, nb, na;
    CHECK(ext_certs_validity(ca.cert, &cnb, &cna, err, sizeof err) == 0);
    CHECK(ext_certs_validity(sv.cert, &nb, &na, err, sizeof err) == 0);
    CHECK(na <= cna);
    ext_cert_pem_free(&ca);
    ext_cert_pem_free(&sv);
}

TEST(certs_garbage_pem_is_an_error) {
    if (!ext_certs_available()) return;
    char err[512] = "";
    int64_t nb, na;
    CHECK(ext_certs_validity("-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n", &nb, &na, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "certificate");
    ext_cert_pem bad = {.cert = "x", .key = "y"}, out;
    CHECK(ext_certs_make_serving(&bad, svc_dns, 1, 1, &out, err, sizeof err) < 0);
}

/* A caBundle with two CAs (as during a CA change) verifies certificates of either, and no other. */
TEST(certs_verify_against_a_bundle_of_two_cas) {
    if (!ext_certs_available()) return;
    ext_cert_pem a, b, c, sa, sb, sc;
    char err[512] = "";
    CHECK(ext_certs_make_ca("ca-a", 30, &a, err, sizeof err) == 0);
    CHECK(ext_certs_make_ca("ca-b", 30, &b, err, sizeof err) == 0);
    CHECK(ext_certs_make_ca("ca-c", 30, &c, err, sizeof err) == 0);
    CHECK(ext_certs_make_serving(&a, svc_dns, 3, 10, &sa, err, sizeof err) == 0);
    CHECK(ext_certs_make_serving(&b, svc_dns, 3, 10, &sb, err, sizeof err) == 0);
    CHECK(ext_certs_make_serving(&c, svc_dns, 3, 10, &sc, err, sizeof err) == 0);
    size_t la = strlen(a.cert), lb = strlen(b.cert);
    char *bundle = malloc(la + lb + 1);
    memcpy(bundle, a.cert, la);
    memcpy(bundle + la, b.cert, lb + 1);
    int64_t now = (int64_t)time(NULL);
    char ea[256] = "", eb[256] = "", ec[256] = "";
    int ra = ext_certs_verify(bundle, sa.cert, svc_dns[0], now, ea, sizeof ea);
    int rb = ext_certs_verify(bundle, sb.cert, svc_dns[0], now, eb, sizeof eb);
    int rc = ext_certs_verify(bundle, sc.cert, svc_dns[0], now, ec, sizeof ec);
    int rb_alone = ext_certs_verify(a.cert, sb.cert, svc_dns[0], now, eb, sizeof eb);
    free(bundle);
    ext_cert_pem *all[6] = {&a, &b, &c, &sa, &sb, &sc};
    for (int i = 0; i < 6; i++) ext_cert_pem_free(all[i]);
    CHECK_MSG(ra == 0, "%s", ea);
    CHECK_MSG(rb == 0, "%s", eb);
    CHECK_INT(rc, -1);
    CHECK_CONTAINS(ec, "does not verify");
    CHECK_INT(rb_alone, -1);
}
