/* test_webhook_tls.c -- the webhook's certificate Secret and caBundle: first replica
 * creates, a losing replica (409) uses the winner's, renewal keeps the CA, a broken Secret
 * is replaced, every webhook's caBundle is set (PUT with resourceVersion, retried on 409),
 * a 403 names the verb and resource; against an in-memory API (the calls and their
 * concurrency rules), and once against tests/support/fake_apiserver when it serves Secrets
 * and MutatingWebhookConfigurations (skipped until it does).
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cjson/cJSON.h>

#include "ext_helpers.h"
#include "extender/base64.h"
#include "extender/certs.h"
#include "extender/http.h"
#include "kube/client.h"
#include "kube/log.h"
#include "extender/base/health.h"
#include "extender/webhook_tls.h"
#include "tests/support/fake_apiserver.h"

#define SECRET_PATH "/api/v1/namespaces/tessera/secrets/tessera-webhook-tls"
#define SECRETS_PATH "/api/v1/namespaces/tessera/secrets"
#define MWC "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/tessera"

/* An API with one Secret and one MutatingWebhookConfiguration, optimistic concurrency on
 * metadata.resourceVersion, and a few scripted faults. */
typedef struct mock {
    cJSON *secret, *mwc;   /* NULL: absent */
    long rv;
    cJSON *other_replica;  /* on the next POST: store this instead and answer 409 */
    int mwc_conflicts;     /* PUTs of the configuration answered 409 (after a concurrent change) */
    bool forbid_secret_get;
    int posts, secret_puts, mwc_puts;
    pthread_mutex_t mu;
} mock;

static void set_rv(mock *m, cJSON *o) {
    char rv[32];
    snprintf(rv, sizeof rv, "%ld", ++m->rv);
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(o, "metadata");
    if (!meta) meta = cJSON_AddObjectToObject(o, "metadata");
    cJSON_DeleteItemFromObjectCaseSensitive(meta, "resourceVersion");
    cJSON_AddStringToObject(meta, "resourceVersion", rv);
}

static const char *rv_of(const cJSON *o) {
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "metadata"),
                                                                 "resourceVersion"));
}

static int status(char *err, size_t errlen, int code, const char *msg) {
    snprintf(err, errlen, "%s", msg);
    return code;
}

static int mock_req(void *user, const char *method, const char *path, const char *body, int timeout_ms, char **resp,
                    char *err, size_t errlen) {
    mock *m = user;
    int code;
    pthread_mutex_lock(&m->mu);
    if (resp) *resp = NULL;
    cJSON **slot = !strcmp(path, SECRET_PATH) || !strcmp(path, SECRETS_PATH) ? &m->secret : !strcmp(path, MWC) ? &m->mwc : NULL;
    if (!slot) {
        code = status(err, errlen, 404, "no such path");
    } else if (!strcmp(method, "GET")) {
        if (slot == &m->secret && m->forbid_secret_get)
            code = status(err, errlen, 403, "secrets \"tessera-webhook-tls\" is forbidden: User \"system:serviceaccount:tessera:tessera-extender\" cannot get resource \"secrets\"");
        else if (!*slot) code = status(err, errlen, 404, "not found");
        else {
            code = 200;
            if (resp) *resp = cJSON_PrintUnformatted(*slot);
        }
    } else if (!strcmp(method, "POST")) {
        m->posts++;
        if (m->other_replica) {
            cJSON_Delete(m->secret);
            m->secret = m->other_replica;
            m->other_replica = NULL;
            set_rv(m, m->secret);
            code = status(err, errlen, 409, "secrets \"tessera-webhook-tls\" already exists");
        } else if (*slot) {
            code = status(err, errlen, 409, "already exists");
        } else {
            *slot = cJSON_Parse(body);
            set_rv(m, *slot);
            code = 201;
        }
    } else if (!strcmp(method, "PUT")) {
        cJSON *o = cJSON_Parse(body);
        if (slot == &m->secret) m->secret_puts++;
        else m->mwc_puts++;
        if (slot == &m->mwc && m->mwc_conflicts > 0) {
            m->mwc_conflicts--;
            set_rv(m, m->mwc);   /* someone else changed it meanwhile */
            cJSON_Delete(o);
            code = status(err, errlen, 409, "the object has been modified; please apply your changes to the latest version");
        } else if (!*slot) {
            cJSON_Delete(o);
            code = status(err, errlen, 404, "not found");
        } else if (!rv_of(o) || strcmp(rv_of(o), rv_of(*slot))) {
            cJSON_Delete(o);
            code = status(err, errlen, 409, "the object has been modified");
        } else {
            cJSON_Delete(*slot);
            *slot = o;
            set_rv(m, o);
            code = 200;
        }
    } else {
        code = status(err, errlen, 405, "method");
    }
    pthread_mutex_unlock(&m->mu);
    return code;
}

static void mock_init(mock *m, bool with_mwc) {
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
    if (with_mwc) {
        m->mwc = cJSON_Parse("{\"apiVersion\":\"admissionregistration.k8s.io/v1\",\"kind\":\"MutatingWebhookConfiguration\","
                             "\"metadata\":{\"name\":\"tessera\"},\"webhooks\":["
                             "{\"name\":\"pods.tessera.io\",\"clientConfig\":{\"service\":{\"name\":\"tessera-extender\","
                             "\"namespace\":\"tessera\",\"path\":\"/webhook/mutate\",\"port\":443}},\"failurePolicy\":\"Fail\"},"
                             "{\"name\":\"pods-any.tessera.io\",\"clientConfig\":{\"service\":{\"name\":\"tessera-extender\","
                             "\"namespace\":\"tessera\",\"path\":\"/webhook/mutate\"},\"caBundle\":\"b2xk\"}}]}");
        set_rv(m, m->mwc);
    }
}

static void mock_free(mock *m) {
    cJSON_Delete(m->secret);
    cJSON_Delete(m->mwc);
    cJSON_Delete(m->other_replica);
    pthread_mutex_destroy(&m->mu);
}

static char *secret_key(const cJSON *secret, const char *k) {
    const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(secret, "data"), k));
    return v ? ext_base64_decode(v, strlen(v), NULL) : NULL;
}

/* Every webhook's caBundle is base64(ca). */
static bool bundles_are(const cJSON *mwc, const char *ca) {
    char *want = ext_base64_encode(ca, strlen(ca), NULL);
    bool ok = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(mwc, "webhooks")) == 2;
    const cJSON *w;
    cJSON_ArrayForEach(w, cJSON_GetObjectItemCaseSensitive(mwc, "webhooks")) {
        const char *b = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(w, "clientConfig"),
                                                                              "caBundle"));
        if (!b || strcmp(b, want)) ok = false;
    }
    free(want);
    return ok;
}

static ext_webhook_tls_config tls_cfg(void) {
    ext_webhook_tls_config c;
    ext_webhook_tls_config_defaults(&c);
    snprintf(c.secret_ns, sizeof c.secret_ns, "tessera");
    return c;
}

TEST(webhook_tls_first_replica_creates_secret_and_sets_ca_bundle) {
    if (!ext_certs_available()) return;
    mock m;
    mock_init(&m, true);
    ext_webhook_tls_config c = tls_cfg();
    ext_cert_pem sv;
    char *ca = NULL, err[1024] = "";
    int64_t now = (int64_t)time(NULL);
    int rc = ext_webhook_tls_sync(&c, mock_req, &m, now, &sv, &ca, err, sizeof err);
    char *s_ca = secret_key(m.secret, "ca.crt"), *s_crt = secret_key(m.secret, "tls.crt"), *s_key = secret_key(m.secret, "tls.key");
    char verr[512] = "";
    bool verifies = rc == 0 && ext_certs_verify(ca, sv.cert, "tessera-extender.tessera.svc", now, verr, sizeof verr) == 0 &&
                    ext_certs_key_matches(sv.cert, sv.key, verr, sizeof verr) == 0;
    bool same = rc == 0 && s_ca && s_crt && s_key && !strcmp(s_ca, ca) && !strcmp(s_crt, sv.cert) && !strcmp(s_key, sv.key);
    bool tls_type = !strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m.secret, "type")), "kubernetes.io/tls");
    bool bundles = rc == 0 && bundles_are(m.mwc, ca);
    /* a second pass (another replica, or the 10-minute check) changes nothing */
    int puts_before = m.secret_puts + m.mwc_puts, posts_before = m.posts;
    ext_cert_pem sv2;
    int rc2 = ext_webhook_tls_sync(&c, mock_req, &m, now + 600, &sv2, NULL, err, sizeof err);
    bool unchanged = rc2 == 0 && !strcmp(sv2.cert, sv.cert) && m.secret_puts + m.mwc_puts == puts_before && m.posts == posts_before;
    free(s_ca);
    free(s_crt);
    free(s_key);
    free(ca);
    ext_cert_pem_free(&sv);
    ext_cert_pem_free(&sv2);
    int posts = m.posts, mwc_puts = m.mwc_puts;
    mock_free(&m);
    CHECK_MSG(rc == 0, "%s", err);
    CHECK_INT(posts, 1);
    CHECK_INT(mwc_puts, 1);
    CHECK_MSG(verifies, "%s", verr);
    CHECK(same);
    CHECK(tls_type);
    CHECK(bundles);
    CHECK(unchanged);
}

TEST(webhook_tls_losing_replica_uses_the_winners_secret) {
    if (!ext_certs_available()) return;
    mock winner, m;
    mock_init(&winner, false);
    mock_init(&m, true);
    ext_webhook_tls_config c = tls_cfg();
    ext_cert_pem w, sv;
    char err[1024] = "";
    int64_t now = (int64_t)time(NULL);
    CHECK_MSG(ext_webhook_tls_sync(&c, mock_req, &winner, now, &w, NULL, err, sizeof err) == 0, "%s", err);
    m.other_replica = cJSON_Duplicate(winner.secret, 1);
    int rc = ext_webhook_tls_sync(&c, mock_req, &m, now, &sv, NULL, err, sizeof err);
    bool same = rc == 0 && !strcmp(sv.cert, w.cert) && !strcmp(sv.key, w.key);
    int posts = m.posts, puts = m.secret_puts;
    ext_cert_pem_free(&w);
    ext_cert_pem_free(&sv);
    mock_free(&winner);
    mock_free(&m);
    CHECK_MSG(rc == 0, "%s", err);
    CHECK_INT(posts, 1);
    CHECK_INT(puts, 0);
    CHECK(same);
}

TEST(webhook_tls_renewal_keeps_the_ca) {
    if (!ext_certs_available()) return;
    mock m;
    mock_init(&m, true);
    ext_webhook_tls_config c = tls_cfg();
    ext_cert_pem sv1, sv2, sv3;
    char *ca1 = NULL, *ca2 = NULL, err[1024] = "";
    int64_t now = (int64_t)time(NULL);
    CHECK_MSG(ext_webhook_tls_sync(&c, mock_req, &m, now, &sv1, &ca1, err, sizeof err) == 0, "%s", err);
    int mwc_puts = m.mwc_puts;
    /* 244 days on: 2/3 of a year has passed */
    int rc = ext_webhook_tls_sync(&c, mock_req, &m, now + 244LL * 86400, &sv2, &ca2, err, sizeof err);
    bool renewed = rc == 0 && strcmp(sv1.cert, sv2.cert) != 0 && !strcmp(ca1, ca2);
    char verr[512] = "";
    bool verifies = rc == 0 && ext_certs_verify(ca1, sv2.cert, "tessera-extender.tessera.svc.cluster.local", now, verr,
                                                sizeof verr) == 0;
    int secret_puts = m.secret_puts, mwc_puts_after = m.mwc_puts;
    /* and today, the renewed one is kept */
    int rc3 = ext_webhook_tls_sync(&c, mock_req, &m, now, &sv3, NULL, err, sizeof err);
    bool kept = rc3 == 0 && !strcmp(sv3.cert, sv2.cert) && m.secret_puts == secret_puts;
    free(ca1);
    free(ca2);
    ext_cert_pem_free(&sv1);
    ext_cert_pem_free(&sv2);
    ext_cert_pem_free(&sv3);
    mock_free(&m);
    CHECK_MSG(rc == 0, "%s", err);
    CHECK(renewed);
    CHECK_MSG(verifies, "%s", verr);
    CHECK_INT(secret_puts, 1);
    CHECK_INT(mwc_puts_after, mwc_puts);   /* same CA: the caBundle is already right */
    CHECK(kept);
}

TEST(webhook_tls_broken_secret_is_replaced) {
    if (!ext_certs_available()) return;
    mock m;
    mock_init(&m, false);
    /* tessera's own (it has ca.key), but nothing in it can be read */
    m.secret = cJSON_Parse("{\"metadata\":{\"name\":\"tessera-webhook-tls\",\"namespace\":\"tessera\"},"
                           "\"data\":{\"ca.key\":\"bm9wZQ==\",\"tls.crt\":\"bm9wZQ==\"}}");
    set_rv(&m, m.secret);
    ext_webhook_tls_config c = tls_cfg();
    ext_cert_pem sv;
    char *ca = NULL, err[1024] = "";
    int64_t now = (int64_t)time(NULL);
    int rc = ext_webhook_tls_sync(&c, mock_req, &m, now, &sv, &ca, err, sizeof err);
    char verr[256] = "";
    bool ok = rc == 0 && ext_certs_verify(ca, sv.cert, "tessera-extender.tessera", now, verr, sizeof verr) == 0;
    int puts = m.secret_puts;
    free(ca);
    if (rc == 0) ext_cert_pem_free(&sv);
    mock_free(&m);
    CHECK_MSG(rc == 0, "%s", err);
    CHECK_INT(puts, 1);
    CHECK_MSG(ok, "%s", verr);
}

/* A Secret as a test or another tool writes it: the given PEMs (NULL: key absent) and annotations. */
static cJSON *make_secret(const char *ca, const char *ca_key, const char *crt, const char *key, const char *ann_json) {
    cJSON *o = cJSON_Parse("{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"type\":\"kubernetes.io/tls\","
                           "\"metadata\":{\"name\":\"tessera-webhook-tls\",\"namespace\":\"tessera\"}}");
    if (ann_json) cJSON_AddItemToObject(cJSON_GetObjectItemCaseSensitive(o, "metadata"), "annotations", cJSON_Parse(ann_json));
    cJSON *d = cJSON_AddObjectToObject(o, "data");
    const char *k[4] = {"ca.crt", "ca.key", "tls.crt", "tls.key"}, *v[4] = {ca, ca_key, crt, key};
    for (int i = 0; i < 4; i++) {
        if (!v[i]) continue;
        char *b = ext_base64_encode(v[i], strlen(v[i]), NULL);
        cJSON_AddStringToObject(d, k[i], b);
        free(b);
    }
    return o;
}

static const char *const SVC_DNS[3] = {"tessera-extender.tessera.svc", "tessera-extender.tessera.svc.cluster.local",
                                       "tessera-extender.tessera"};

/* The caBundle of the configuration's first webhook, decoded (both are set alike). */
static char *mwc_bundle(const mock *m) {
    const char *b = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(
        cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(m->mwc, "webhooks"), 0), "clientConfig"), "caBundle"));
    return b ? ext_base64_decode(b, strlen(b), NULL) : NULL;
}

/* Whether the API server (trusting the caBundle as it is now) accepts what each replica serves. */
static bool all_trusted(const mock *m, char *const serving[2], int64_t now, char *why, size_t whylen) {
    char *bundle = mwc_bundle(m);
    bool ok = bundle != NULL;
    if (!ok) snprintf(why, whylen, "no caBundle");
    for (int r = 0; ok && r < 2; r++) {
        char e[512] = "";
        if (serving[r] && ext_certs_verify(bundle, serving[r], SVC_DNS[0], now, e, sizeof e) < 0) {
            snprintf(why, whylen, "replica %c's certificate is not trusted: %s", 'A' + r, e);
            ok = false;
        }
    }
    free(bundle);
    return ok;
}

/* Review finding 5: two replicas (A and B) share the Secret and the configuration; A replaces
 * the CA (the old one is due) while B still serves a certificate of the old CA. After every
 * pass, both certificates in service verify against the caBundle; the old CA leaves the bundle
 * only after 2 check intervals, when B has long re-read the Secret. */
TEST(webhook_tls_ca_rotation_two_replicas_always_trusted) {
    if (!ext_certs_available()) return;
    ext_cert_pem ca_old, sv_old;
    char err[1024] = "", why[1024] = "";
    /* a CA made to last a day: at T0 + 16 h, 2/3 of its life has passed */
    CHECK_MSG(ext_certs_make_ca("old-ca", 1, &ca_old, err, sizeof err) == 0, "%s", err);
    CHECK_MSG(ext_certs_make_serving(&ca_old, SVC_DNS, 3, 1, &sv_old, err, sizeof err) == 0, "%s", err);
    mock m;
    mock_init(&m, true);
    m.secret = make_secret(ca_old.cert, ca_old.key, sv_old.cert, sv_old.key, NULL);
    set_rv(&m, m.secret);
    ext_webhook_tls_config c = tls_cfg();   /* check_interval_s 600 */
    int64_t t0 = (int64_t)time(NULL), t1 = t0 + 16 * 3600, ov = 2 * (int64_t)c.check_interval_s;
    char *serving[2] = {NULL, NULL};   /* what A and B serve */
    bool trusted[5];
    ext_cert_pem p;
    /* T0: both start on the old CA */
    for (int r = 0; r < 2; r++) {
        CHECK_MSG(ext_webhook_tls_sync(&c, mock_req, &m, t0, &p, NULL, err, sizeof err) == 0, "%s", err);
        serving[r] = p.cert;
        free(p.key);
    }
    trusted[0] = all_trusted(&m, serving, t0, why, sizeof why);
    bool started_old = !strcmp(serving[0], sv_old.cert) && !strcmp(serving[1], sv_old.cert);
    /* T1: A finds the CA due and replaces it; B has not looked yet */
    CHECK_MSG(ext_webhook_tls_sync(&c, mock_req, &m, t1, &p, NULL, err, sizeof err) == 0, "%s", err);
    free(serving[0]);
    serving[0] = p.cert;
    free(p.key);
    char *prev = secret_key(m.secret, "ca-previous.crt"), *ca_new = secret_key(m.secret, "ca.crt");
    const char *until = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(m.secret, "metadata"), "annotations"), "tessera.io/ca-previous-until"));
    bool rotated = strcmp(serving[0], sv_old.cert) != 0 && ca_new && strcmp(ca_new, ca_old.cert) != 0;
    bool prev_kept = prev && !strcmp(prev, ca_old.cert) && until && strtoll(until, NULL, 10) == t1 + ov;
    if (!trusted[0]) goto out;
    trusted[1] = all_trusted(&m, serving, t1, why, sizeof why);
    if (!trusted[1]) goto out;
    /* T1 + one interval: B re-reads and serves the new certificate; A's check changes nothing */
    int puts_before = m.secret_puts;
    CHECK_MSG(ext_webhook_tls_sync(&c, mock_req, &m, t1 + c.check_interval_s, &p, NULL, err, sizeof err) == 0, "%s", err);
    free(serving[1]);
    serving[1] = p.cert;
    free(p.key);
    trusted[2] = all_trusted(&m, serving, t1 + c.check_interval_s, why, sizeof why);
    CHECK_MSG(ext_webhook_tls_sync(&c, mock_req, &m, t1 + c.check_interval_s + 1, &p, NULL, err, sizeof err) == 0, "%s", err);
    bool same = !strcmp(p.cert, serving[0]) && !strcmp(serving[0], serving[1]) && m.secret_puts == puts_before;
    ext_cert_pem_free(&p);
    if (!trusted[2]) goto out;
    /* after the overlap: the old CA is dropped from the Secret and the caBundle */
    CHECK_MSG(ext_webhook_tls_sync(&c, mock_req, &m, t1 + ov, &p, NULL, err, sizeof err) == 0, "%s", err);
    ext_cert_pem_free(&p);
    trusted[3] = all_trusted(&m, serving, t1 + ov, why, sizeof why);
    char *gone = secret_key(m.secret, "ca-previous.crt"), *bundle = mwc_bundle(&m), e[256];
    bool dropped = !gone && bundle && !strcmp(bundle, ca_new);
    /* and the old certificate is no longer trusted: the overlap, not luck, kept B working */
    trusted[4] = ext_certs_verify(bundle, sv_old.cert, SVC_DNS[0], t1 + ov, e, sizeof e) < 0;
    free(gone);
    free(bundle);
    CHECK(started_old);
    CHECK(rotated);
    CHECK_MSG(prev_kept, "ca-previous.crt %s, until %s (want %lld)", prev ? "set" : "missing", until ? until : "-",
              (long long)(t1 + ov));
    CHECK(same);
    CHECK_MSG(trusted[3], "%s", why);
    CHECK(dropped);
    CHECK(trusted[4]);
out:
    CHECK_MSG(trusted[0], "%s", why);
    CHECK_MSG(trusted[1], "%s", why);
    CHECK_MSG(trusted[2], "%s", why);
    free(prev);
    free(ca_new);
    free(serving[0]);
    free(serving[1]);
    ext_cert_pem_free(&ca_old);
    ext_cert_pem_free(&sv_old);
    mock_free(&m);
}

/* stderr (the extender's log) into a file while f runs, at level warn; the text, malloc'd. */
static char *capture_warnings(void (*f)(void *), void *arg) {
    char path[] = "/tmp/tessera-test-log-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return strdup("");
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    kube_log_level lv = kube_log_get_level();
    kube_log_set_level(KUBE_LOG_WARN);
    f(arg);
    kube_log_set_level(lv);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char *text = calloc(1, 65536);
    if (text && lseek(fd, 0, SEEK_SET) == 0) {
        ssize_t n = read(fd, text, 65535);
        if (n > 0) text[n] = 0;
    }
    close(fd);
    unlink(path);
    return text;
}

typedef struct ext_run { mock *m; int64_t now; int rc; ext_cert_pem sv; char *ca; char err[1024]; } ext_run;
static void run_sync(void *arg) {
    ext_run *r = arg;
    ext_webhook_tls_config c = tls_cfg();
    r->rc = ext_webhook_tls_sync(&c, mock_req, r->m, r->now, &r->sv, &r->ca, r->err, sizeof r->err);
}

/* Review finding 5: a Secret without ca.key (cert-manager's, or made by hand) is served as it is
 * and never written, also when it is due for renewal: then a warning names who must renew it. */
TEST(webhook_tls_secret_without_ca_key_is_left_alone) {
    if (!ext_certs_available()) return;
    ext_cert_pem ca, sv;
    char err[1024] = "";
    CHECK_MSG(ext_certs_make_ca("their-ca", 365, &ca, err, sizeof err) == 0, "%s", err);
    CHECK_MSG(ext_certs_make_serving(&ca, SVC_DNS, 3, 90, &sv, err, sizeof err) == 0, "%s", err);
    mock m;
    mock_init(&m, true);
    m.secret = make_secret(ca.cert, NULL, sv.cert, sv.key, "{\"cert-manager.io/certificate-name\":\"tessera-webhook\"}");
    set_rv(&m, m.secret);
    char *before = cJSON_PrintUnformatted(m.secret);
    int64_t now = (int64_t)time(NULL);
    ext_run fresh = {.m = &m, .now = now}, due = {.m = &m, .now = now + 70LL * 86400};   /* 70 of 90 days */
    char *log_fresh = capture_warnings(run_sync, &fresh), *log_due = capture_warnings(run_sync, &due);
    char *after = cJSON_PrintUnformatted(m.secret), *bundle = mwc_bundle(&m);
    bool served = fresh.rc == 0 && due.rc == 0 && !strcmp(fresh.sv.cert, sv.cert) && !strcmp(due.sv.cert, sv.cert) &&
                  !strcmp(due.sv.key, sv.key);
    bool untouched = !strcmp(before, after) && m.posts == 0 && m.secret_puts == 0;
    bool bundle_is_theirs = bundle && !strcmp(bundle, ca.cert);
    bool quiet_when_fresh = !strstr(log_fresh, "external-due");
    bool names_renewer = strstr(log_due, "level=warn") && strstr(log_due, "external-due") &&
                         strstr(log_due, "cert-manager (Certificate tessera-webhook)");
    /* one without ca.key whose key does not match: an error, and still not written */
    ext_cert_pem other;
    CHECK_MSG(ext_certs_make_serving(&ca, SVC_DNS, 3, 90, &other, err, sizeof err) == 0, "%s", err);
    cJSON_Delete(m.secret);
    m.secret = make_secret(ca.cert, NULL, sv.cert, other.key, NULL);
    set_rv(&m, m.secret);
    ext_run bad = {.m = &m, .now = now};
    run_sync(&bad);
    int writes = m.posts + m.secret_puts;
    for (ext_run *r = &fresh; r; r = r == &fresh ? &due : NULL)
        if (r->rc == 0) {
            ext_cert_pem_free(&r->sv);
            free(r->ca);
        }
    free(before);
    free(after);
    free(bundle);
    ext_cert_pem_free(&ca);
    ext_cert_pem_free(&sv);
    ext_cert_pem_free(&other);
    mock_free(&m);
    CHECK_MSG(fresh.rc == 0, "%s", fresh.err);
    CHECK_MSG(due.rc == 0, "%s", due.err);
    CHECK(served);
    CHECK(untouched);
    CHECK(bundle_is_theirs);
    CHECK_MSG(quiet_when_fresh, "%s", log_fresh);
    CHECK_MSG(names_renewer, "log: %s", log_due);
    CHECK_INT(bad.rc, -1);
    CHECK_CONTAINS(bad.err, "has no ca.key");
    CHECK_CONTAINS(bad.err, "delete it and tessera makes its own");
    CHECK_INT(writes, 0);
    free(log_fresh);
    free(log_due);
}

TEST(webhook_tls_ca_bundle_put_retried_on_conflict_and_missing_config_tolerated) {
    if (!ext_certs_available()) return;
    mock m;
    mock_init(&m, true);
    m.mwc_conflicts = 2;
    ext_webhook_tls_config c = tls_cfg();
    ext_cert_pem sv;
    char *ca = NULL, err[1024] = "";
    int rc = ext_webhook_tls_sync(&c, mock_req, &m, (int64_t)time(NULL), &sv, &ca, err, sizeof err);
    bool bundles = rc == 0 && bundles_are(m.mwc, ca);
    int puts = m.mwc_puts;
    free(ca);
    ext_cert_pem_free(&sv);
    mock_free(&m);
    CHECK_MSG(rc == 0, "%s", err);
    CHECK_INT(puts, 3);
    CHECK(bundles);
    /* no configuration registered: the Secret is still made, the pass succeeds (warn only) */
    mock_init(&m, false);
    rc = ext_webhook_tls_sync(&c, mock_req, &m, (int64_t)time(NULL), &sv, NULL, err, sizeof err);
    bool made = m.secret != NULL;
    ext_cert_pem_free(&sv);
    mock_free(&m);
    CHECK_MSG(rc == 0, "%s", err);
    CHECK(made);
}

TEST(webhook_tls_forbidden_names_verb_and_resource) {
    mock m;
    mock_init(&m, true);
    m.forbid_secret_get = true;
    ext_webhook_tls_config c = tls_cfg();
    ext_cert_pem sv;
    char err[1024] = "";
    int rc = ext_webhook_tls_sync(&c, mock_req, &m, (int64_t)time(NULL), &sv, NULL, err, sizeof err);
    mock_free(&m);
    CHECK_INT(rc, -1);
    CHECK_CONTAINS(err, "may not get secret tessera/tessera-webhook-tls");
    CHECK_CONTAINS(err, "cannot get resource");
}

TEST(webhook_tls_parse_secret_flag) {
    ext_webhook_tls_config c = tls_cfg();
    char err[256];
    CHECK(ext_webhook_tls_parse_secret(&c, "gpu/webhook-certs", err, sizeof err) == 0);
    CHECK_STR(c.secret_ns, "gpu");
    CHECK_STR(c.secret_name, "webhook-certs");
    CHECK(ext_webhook_tls_parse_secret(&c, "nons", err, sizeof err) < 0);
    CHECK(ext_webhook_tls_parse_secret(&c, "/x", err, sizeof err) < 0);
    CHECK(ext_webhook_tls_parse_secret(&c, "a/b/c", err, sizeof err) < 0);
    CHECK_CONTAINS(err, "NAMESPACE/NAME");
}

/* The background check hands the first certificate to the listener's restart hook. */
typedef struct pem_seen { pthread_mutex_t mu; int calls; char *cert; } pem_seen;

static int on_pem(void *user, const ext_cert_pem *pem) {
    pem_seen *s = user;
    pthread_mutex_lock(&s->mu);
    s->calls++;
    free(s->cert);
    s->cert = strdup(pem->cert);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

TEST(webhook_tls_background_check_delivers_the_certificate) {
    if (!ext_certs_available()) return;
    mock m;
    mock_init(&m, true);
    ext_webhook_tls_config c = tls_cfg();
    pem_seen seen = {.calls = 0};
    pthread_mutex_init(&seen.mu, NULL);
    char err[512] = "";
    ext_webhook_tls *t = ext_webhook_tls_start(&c, mock_req, &m, on_pem, &seen, err, sizeof err);
    CHECK_MSG(t != NULL, "%s", err);
    int calls = 0;
    WAIT_FOR(({
        pthread_mutex_lock(&seen.mu);
        calls = seen.calls;
        pthread_mutex_unlock(&seen.mu);
        calls > 0;
    }));
    ext_webhook_tls_stop(t);
    char *crt = secret_key(m.secret, "tls.crt");
    bool same = crt && seen.cert && !strcmp(crt, seen.cert);
    free(crt);
    free(seen.cert);
    pthread_mutex_destroy(&seen.mu);
    mock_free(&m);
    CHECK_INT(calls, 1);
    CHECK(same);
}

/* A TCP socket listening on a free 127.0.0.1 port (the port in *port), or -1. */
static int hold_port(int *port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 4) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &al) < 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    *port = ntohs(a.sin_port);
    return fd;
}

static size_t keep_body(char *d, size_t sz, size_t n, void *u) {
    char *b = u;
    size_t have = strlen(b), add = sz * n;
    if (have + add < 1024) {
        memcpy(b + have, d, add);
        b[have + add] = 0;
    }
    return sz * n;
}

/* GET url: the status (-1 when nothing answered) and the body's first KiB. */
static long get(const char *url, bool tls, char body[1024]) {
    body[0] = 0;
    CURL *c = curl_easy_init();
    long code = -1;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)TEST_PATIENCE_MS);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, keep_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
    if (tls) {   /* the test's own CA: trust is checked by ext_certs_verify elsewhere */
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(c);
    return code;
}

/* Review finding 4: the webhook's listener cannot start (its port is taken). The certificate
 * check hands the certificate over again every retry_interval_s, /readyz (the health registry's
 * webhook-listen dependency) says why meanwhile, and once the port is free the listener serves and /readyz is 200.
 * Serial: between the test freeing its port and the listener's retry taking it, a test beside it could be given
 * that port. */
TEST_SERIAL(webhook_tls_listener_that_fails_to_start_is_retried_and_readyz_says_why) {
    if (!ext_certs_available()) return;
    int port = 0, fd = hold_port(&port);
    CHECK(fd >= 0);
    mock m;
    mock_init(&m, true);
    ext_webhook_tls_config c = tls_cfg();
    c.retry_interval_s = 1;
    ext_webhook_config wc;
    ext_webhook_config_defaults(&wc);
    ext_state_config sc = {.standalone = true};
    ext_state *st = ext_state_new(&sc);
    ext_verbs v;
    ext_verbs_init(&v, st, NULL, NULL, NULL);
    ext_http_config hc = {.conn_timeout_s = 2, .verbs = &v, .webhook = &wc};
    snprintf(hc.listen, sizeof hc.listen, "127.0.0.1:%d", port);
    ext_webhook_listener *l = ext_webhook_listener_new(&hc);
    /* the ops server with /readyz on the health registry, as main.c wires it */
    ext_health_reset();
    ext_health_register(EXT_DEP_WEBHOOK_LISTEN);
    ext_http_config oc = {.conn_timeout_s = 2, .verbs = &v, .ops_only = true, .health = true};
    snprintf(oc.listen, sizeof oc.listen, "127.0.0.1:0");
    char err[512] = "", url[128], body[1024], why[512] = "";
    ext_http *ops = ext_http_start(&oc, err, sizeof err);
    CHECK_MSG(ops != NULL, "%s", err);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/readyz", ext_http_port(ops));
    long before = get(url, false, body);   /* no certificate yet: nothing is down */
    ext_webhook_tls *t = ext_webhook_tls_start(&c, mock_req, &m, ext_webhook_listener_on_pem, l, err, sizeof err);
    CHECK_MSG(t != NULL, "%s", err);
    bool down = WAIT_FOR(!ext_health_ready(why, sizeof why));
    long while_down = get(url, false, body);
    bool says = strstr(body, "webhook's TLS listener") && strstr(body, hc.listen) && strstr(body, "address in use");
    char down_body[1024];
    snprintf(down_body, sizeof down_body, "%s", body);
    close(fd);   /* the port is free: the next retry (within 1 s) takes it */
    bool up = WAIT_FOR(ext_webhook_listener_port(l) == port);
    long after = get(url, false, body);
    char hz[128];
    snprintf(hz, sizeof hz, "https://127.0.0.1:%d/healthz", port);
    long webhook_health = get(hz, true, body);
    ext_webhook_tls_stop(t);
    ext_webhook_listener_free(l);
    ext_http_stop(ops);
    ext_state_free(st);
    mock_free(&m);
    ext_health_reset();
    CHECK_INT(before, 200);
    CHECK_MSG(down, "the listener never reported the taken port");
    CHECK_INT(while_down, 503);
    CHECK_MSG(says, "/readyz said: %s", down_body);
    CHECK_MSG(up, "the listener was not retried after the port came free");
    CHECK_INT(after, 200);
    CHECK_INT(webhook_health, 200);
}

/* The same against the fake API server over HTTP (Secrets, MutatingWebhookConfigurations). */
TEST(webhook_tls_against_fake_apiserver) {
    if (!ext_certs_available()) return;
    char err[1024] = "", url[128];
    fake_api *f = fake_api_start(0, err, sizeof err);
    CHECK_MSG(f != NULL, "%s", err);
    long long put = fake_api_put(f, "mutatingwebhookconfigurations",
                                 "{\"metadata\":{\"name\":\"tessera\"},\"webhooks\":[{\"name\":\"pods.tessera.io\","
                                 "\"clientConfig\":{\"service\":{\"name\":\"tessera-extender\",\"namespace\":\"tessera\"}}}]}");
    if (put < 0) fake_api_free(f);
    CHECK_MSG(put >= 0, "the fake API server refused a MutatingWebhookConfiguration");
    fake_api_url(f, url, sizeof url);
    kube_config kc;
    kube_config_defaults(&kc);
    snprintf(kc.api_url, sizeof kc.api_url, "%s", url);
    kube_client *k = kube_new(&kc, err, sizeof err);
    CHECK_MSG(k != NULL, "%s", err);
    ext_webhook_tls_config c = tls_cfg();
    ext_cert_pem sv;
    char *ca = NULL;
    int rc = ext_webhook_tls_sync(&c, ext_webhook_tls_kube_request, k, (int64_t)time(NULL), &sv, &ca, err, sizeof err);
    char *secret = fake_api_get(f, "secrets", "tessera", "tessera-webhook-tls");
    char *mwc = fake_api_get(f, "mutatingwebhookconfigurations", NULL, "tessera");
    cJSON *so = secret ? cJSON_Parse(secret) : NULL, *mo = mwc ? cJSON_Parse(mwc) : NULL;
    char *s_crt = so ? secret_key(so, "tls.crt") : NULL;
    char *b64 = ca ? ext_base64_encode(ca, strlen(ca), NULL) : NULL;
    const char *bundle = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(mo, "webhooks"), 0), "clientConfig"),
        "caBundle"));
    bool secret_ok = rc == 0 && s_crt && !strcmp(s_crt, sv.cert);
    bool bundle_ok = bundle && b64 && !strcmp(bundle, b64);
    free(s_crt);
    free(b64);
    cJSON_Delete(so);
    cJSON_Delete(mo);
    free(secret);
    free(mwc);
    free(ca);
    if (rc == 0) ext_cert_pem_free(&sv);
    kube_free(k);
    fake_api_free(f);
    CHECK_MSG(rc == 0, "%s", err);
    CHECK(secret_ok);
    CHECK(bundle_ok);
}
