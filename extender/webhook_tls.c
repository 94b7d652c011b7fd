/* webhook_tls.c -- the webhook's certificate Secret and caBundle, kept right from inside the
 * cluster; see webhook_tls.h. One pass is ext_webhook_tls_sync; the thread repeats it.
 */
#include "extender/webhook_tls.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cjson/cJSON.h>

#include "extender/base64.h"
#include "extender/kube.h"
#include "extender/health.h"
#include "extender/log.h"

#define MWC_PATH "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/"
#define TRIES 4

int ext_webhook_tls_kube_request(void *kube, const char *method, const char *path, const char *body, int timeout_ms,
                                 char **resp, char *err, size_t errlen) {
    return ext_kube_request(kube, method, path, body, timeout_ms, resp, err, errlen);
}

void ext_webhook_tls_config_defaults(ext_webhook_tls_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    const char *ns = getenv("POD_NAMESPACE");
    snprintf(cfg->secret_ns, sizeof cfg->secret_ns, "%s", ns && ns[0] ? ns : "tessera");
    snprintf(cfg->secret_name, sizeof cfg->secret_name, "tessera-webhook-tls");
    snprintf(cfg->webhook_config, sizeof cfg->webhook_config, "tessera");
    snprintf(cfg->service, sizeof cfg->service, "tessera-extender");
    cfg->check_interval_s = 600;
    cfg->retry_interval_s = 10;
}

int ext_webhook_tls_parse_secret(ext_webhook_tls_config *cfg, const char *ns_name, char *err, size_t errlen) {
    const char *slash = strchr(ns_name, '/');
    if (!slash || slash == ns_name || !slash[1] || strchr(slash + 1, '/') ||
        (size_t)(slash - ns_name) >= sizeof cfg->secret_ns || strlen(slash + 1) >= sizeof cfg->secret_name) {
        snprintf(err, errlen, "--webhook-secret %s: expected NAMESPACE/NAME", ns_name);
        return -1;
    }
    snprintf(cfg->secret_ns, sizeof cfg->secret_ns, "%.*s", (int)(slash - ns_name), ns_name);
    snprintf(cfg->secret_name, sizeof cfg->secret_name, "%s", slash + 1);
    return 0;
}

static const char *verb_of(const char *method) {
    return !strcmp(method, "GET") ? "get" : !strcmp(method, "POST") ? "create" : !strcmp(method, "PUT") ? "update"
         : !strcmp(method, "PATCH") ? "patch" : "delete";
}

/* The status behind the latest api_error on this thread, for health.h's reason label (the sync pass runs on
 * one thread; its result is a message). */
static _Thread_local int tls_last_code;

/* The API's answer outside 2xx (and 404 when absent is not expected) as a message. */
static void api_error(char *err, size_t errlen, int code, const char *method, const char *resource, const char *name,
                      const char *msg) {
    tls_last_code = code;
    if (code == 403)   /* where deploy/rbac.yaml grants it: the Secret in tessera's namespace, the configuration cluster-wide */
        snprintf(err, errlen, "forbidden: the service account may not %s %s %s (check the tessera-extender %s): %s",
                 verb_of(method), resource, name, !strcmp(resource, "secret") ? "Role" : "ClusterRole", msg);
    else if (code < 0)
        snprintf(err, errlen, "%s %s %s: API server not reachable: %s", verb_of(method), resource, name, msg);
    else
        snprintf(err, errlen, "%s %s %s: API server answered %d: %s", verb_of(method), resource, name, code, msg);
}

typedef struct tls_secret {
    char *ca, *ca_key, *crt, *key;   /* decoded PEM, NULL when absent */
    char rv[64];                     /* metadata.resourceVersion */
} tls_secret;

static void secret_free(tls_secret *s) {
    free(s->ca);
    free(s->ca_key);
    free(s->crt);
    free(s->key);
    memset(s, 0, sizeof *s);
}

static char *data_key(const cJSON *data, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(data, k);
    if (!cJSON_IsString(v) || !v->valuestring[0]) return NULL;
    return ext_base64_decode(v->valuestring, strlen(v->valuestring), NULL);
}

static int secret_parse(const char *json, tls_secret *s) {
    memset(s, 0, sizeof *s);
    cJSON *o = cJSON_Parse(json ? json : "");
    if (!o) return -1;
    const cJSON *rv = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "metadata"), "resourceVersion");
    if (cJSON_IsString(rv)) snprintf(s->rv, sizeof s->rv, "%s", rv->valuestring);
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(o, "data");
    s->ca = data_key(data, "ca.crt");
    s->ca_key = data_key(data, "ca.key");
    s->crt = data_key(data, "tls.crt");
    s->key = data_key(data, "tls.key");
    cJSON_Delete(o);
    return 0;
}

static void dns_names(const ext_webhook_tls_config *cfg, char names[3][256]) {
    snprintf(names[0], 256, "%s.%s.svc", cfg->service, cfg->secret_ns);
    snprintf(names[1], 256, "%s.%s.svc.cluster.local", cfg->service, cfg->secret_ns);
    snprintf(names[2], 256, "%s.%s", cfg->service, cfg->secret_ns);
}

static int issue_serving(const ext_webhook_tls_config *cfg, const ext_cert_pem *ca, ext_cert_pem *out, char *err,
                         size_t errlen) {
    char names[3][256];
    dns_names(cfg, names);
    const char *dns[3] = {names[0], names[1], names[2]};
    return ext_certs_make_serving(ca, dns, 3, EXT_CERTS_SERVING_DAYS, out, err, errlen);
}

/* The Secret's body for these PEMs; the resourceVersion when it is an update. */
static char *secret_body(const ext_webhook_tls_config *cfg, const tls_secret *s, const char *rv) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "apiVersion", "v1");
    cJSON_AddStringToObject(o, "kind", "Secret");
    cJSON *m = cJSON_AddObjectToObject(o, "metadata");
    cJSON_AddStringToObject(m, "name", cfg->secret_name);
    cJSON_AddStringToObject(m, "namespace", cfg->secret_ns);
    if (rv && rv[0]) cJSON_AddStringToObject(m, "resourceVersion", rv);
    cJSON *l = cJSON_AddObjectToObject(m, "labels");
    cJSON_AddStringToObject(l, "app.kubernetes.io/part-of", "tessera");
    cJSON_AddStringToObject(o, "type", "kubernetes.io/tls");
    cJSON *d = cJSON_AddObjectToObject(o, "data");
    const char *keys[4] = {"ca.crt", "ca.key", "tls.crt", "tls.key"};
    const char *vals[4] = {s->ca, s->ca_key, s->crt, s->key};
    for (int i = 0; i < 4; i++) {
        if (!vals[i]) continue;
        char *b = ext_base64_encode(vals[i], strlen(vals[i]), NULL);
        if (b) cJSON_AddStringToObject(d, keys[i], b);
        free(b);
    }
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return text;
}

typedef enum { S_OK, S_CREATE, S_RENEW_SERVING, S_RENEW_ALL } secret_plan;

/* What a Secret we read needs at now. */
static secret_plan plan_for(const ext_webhook_tls_config *cfg, const tls_secret *s, int64_t now, const char **why) {
    char names[3][256], e[256];
    dns_names(cfg, names);
    int64_t nb, na;
    if (!s->ca || !s->crt || !s->key) { *why = "it lacks ca.crt, tls.crt or tls.key"; return S_RENEW_ALL; }
    if (ext_certs_validity(s->ca, &nb, &na, e, sizeof e) < 0) { *why = "ca.crt cannot be read"; return S_RENEW_ALL; }
    bool ca_usable = s->ca_key && !ext_certs_due(nb, na, now) && ext_certs_key_matches(s->ca, s->ca_key, e, sizeof e) == 0;
    if (ext_certs_verify(s->ca, s->crt, names[0], nb > now ? nb : now, e, sizeof e) < 0 ||
        ext_certs_key_matches(s->crt, s->key, e, sizeof e) < 0) {
        *why = "tls.crt is not a certificate of ca.crt for the Service with tls.key as its key";
        return ca_usable ? S_RENEW_SERVING : S_RENEW_ALL;
    }
    if (ext_certs_validity(s->crt, &nb, &na, e, sizeof e) < 0) { *why = "tls.crt cannot be read"; return S_RENEW_ALL; }
    if (!ext_certs_due(nb, na, now) && now <= na) return S_OK;
    *why = "2/3 of the serving certificate's lifetime has passed";
    return ca_usable ? S_RENEW_SERVING : S_RENEW_ALL;
}

/* Makes s's certificates anew: serving only (same CA), or a new CA too. */
static int remake(const ext_webhook_tls_config *cfg, tls_secret *s, bool new_ca, char *err, size_t errlen) {
    ext_cert_pem ca = {s->ca, s->ca_key}, sv;
    ext_cert_pem made_ca = {0};
    if (new_ca) {
        if (ext_certs_make_ca("tessera-webhook-ca", EXT_CERTS_CA_DAYS, &made_ca, err, errlen) < 0) return -1;
        ca = made_ca;
    }
    if (issue_serving(cfg, &ca, &sv, err, errlen) < 0) {
        ext_cert_pem_free(&made_ca);
        return -1;
    }
    if (new_ca) {
        free(s->ca);
        free(s->ca_key);
        s->ca = made_ca.cert;
        s->ca_key = made_ca.key;
    }
    free(s->crt);
    free(s->key);
    s->crt = sv.cert;
    s->key = sv.key;
    return 0;
}

/* Sets clientConfig.caBundle of every webhook of the configuration. */
static void set_ca_bundle(const ext_webhook_tls_config *cfg, ext_webhook_tls_request_fn req, void *user,
                          const char *ca_pem) {
    char path[512], err[512];
    snprintf(path, sizeof path, MWC_PATH "%s", cfg->webhook_config);
    char *b64 = ext_base64_encode(ca_pem, strlen(ca_pem), NULL);
    if (!b64) return;
    for (int t = 0; t < TRIES; t++) {
        char *resp = NULL;
        err[0] = 0;
        int code = req(user, "GET", path, NULL, 0, &resp, err, sizeof err);
        if (code != 200) {
            char msg[700];
            if (code == 404)
                snprintf(msg, sizeof msg, "MutatingWebhookConfiguration %s not found: the webhook is not registered "
                         "(kubectl apply -k deploy/), so its caBundle cannot be set", cfg->webhook_config);
            else
                api_error(msg, sizeof msg, code, "GET", "mutatingwebhookconfigurations", cfg->webhook_config, err);
            ext_health_fail(EXT_DEP_WEBHOOK_CONFIG, code, ext_health_reason_of(code), msg);   /* logs at warn */
            free(resp);
            break;
        }
        cJSON *o = cJSON_Parse(resp);
        free(resp);
        bool changed = false;
        cJSON *w;
        cJSON_ArrayForEach(w, cJSON_GetObjectItemCaseSensitive(o, "webhooks")) {
            cJSON *cc = cJSON_GetObjectItemCaseSensitive(w, "clientConfig");
            if (!cJSON_IsObject(cc)) {
                cJSON_DeleteItemFromObjectCaseSensitive(w, "clientConfig");
                cc = cJSON_AddObjectToObject(w, "clientConfig");
            }
            const cJSON *cur = cJSON_GetObjectItemCaseSensitive(cc, "caBundle");
            if (cJSON_IsString(cur) && !strcmp(cur->valuestring, b64)) continue;
            cJSON_DeleteItemFromObjectCaseSensitive(cc, "caBundle");
            cJSON_AddStringToObject(cc, "caBundle", b64);
            changed = true;
        }
        char *body = changed ? cJSON_PrintUnformatted(o) : NULL;
        cJSON_Delete(o);
        if (!changed) {
            ext_health_ok(EXT_DEP_WEBHOOK_CONFIG);
            break;
        }
        err[0] = 0;
        code = body ? req(user, "PUT", path, body, 0, NULL, err, sizeof err) : -1;
        free(body);
        if (code == 200) {
            ext_log(EXT_LOG_INFO, "webhook-tls=ca-bundle-set config=%s", cfg->webhook_config);
            ext_health_ok(EXT_DEP_WEBHOOK_CONFIG);
            break;
        }
        if (code == 409) continue;   /* changed under us: read it again */
        char msg[700];
        api_error(msg, sizeof msg, code, "PUT", "mutatingwebhookconfigurations", cfg->webhook_config, err);
        ext_health_fail(EXT_DEP_WEBHOOK_CONFIG, code, ext_health_reason_of(code), msg);
        break;
    }
    free(b64);
}

int ext_webhook_tls_sync(const ext_webhook_tls_config *cfg, ext_webhook_tls_request_fn req, void *user, int64_t now,
                         ext_cert_pem *serving, char **ca_pem, char *err, size_t errlen) {
    memset(serving, 0, sizeof *serving);
    if (ca_pem) *ca_pem = NULL;
    char path[512], name[256], aerr[512];
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/secrets/%s", cfg->secret_ns, cfg->secret_name);
    snprintf(name, sizeof name, "%s/%s", cfg->secret_ns, cfg->secret_name);
    tls_secret s = {0};
    for (int t = 0; t < TRIES; t++) {
        char *resp = NULL;
        aerr[0] = 0;
        int code = req(user, "GET", path, NULL, 0, &resp, aerr, sizeof aerr);
        secret_plan plan;
        const char *why = "there is none";
        if (code == 200) {
            secret_parse(resp, &s);
            plan = plan_for(cfg, &s, now, &why);
        } else if (code == 404) {
            plan = S_CREATE;
        } else {
            api_error(err, errlen, code, "GET", "secret", name, aerr);
            free(resp);
            return -1;
        }
        free(resp);
        if (plan == S_OK) break;
        if (remake(cfg, &s, plan != S_RENEW_SERVING, err, errlen) < 0) {
            secret_free(&s);
            return -1;
        }
        bool create = plan == S_CREATE;
        char *body = secret_body(cfg, &s, create ? NULL : s.rv);
        char cpath[512];
        snprintf(cpath, sizeof cpath, "/api/v1/namespaces/%s/secrets", cfg->secret_ns);
        aerr[0] = 0;
        code = body ? req(user, create ? "POST" : "PUT", create ? cpath : path, body, 0, NULL, aerr, sizeof aerr) : -1;
        free(body);
        if (code == 200 || code == 201) {
            ext_log(EXT_LOG_INFO, "webhook-tls=%s secret=%s why=\"%s\"", create ? "created" : plan == S_RENEW_SERVING
                    ? "renewed" : "replaced", name, why);
            break;
        }
        secret_free(&s);
        if (code == 409) continue;   /* another replica created or renewed it: read what it wrote */
        api_error(err, errlen, code, create ? "POST" : "PUT", "secret", name, aerr);
        return -1;
    }
    if (!s.crt || !s.key || !s.ca) {
        secret_free(&s);
        snprintf(err, errlen, "secret %s: kept changing under us (%d attempts)", name, TRIES);
        return -1;
    }
    if (cfg->webhook_config[0]) set_ca_bundle(cfg, req, user, s.ca);
    serving->cert = s.crt;
    serving->key = s.key;
    if (ca_pem) *ca_pem = s.ca;
    else free(s.ca);
    free(s.ca_key);
    return 0;
}

struct ext_webhook_tls {
    ext_webhook_tls_config cfg;
    ext_webhook_tls_request_fn req;
    void *req_user;
    ext_webhook_tls_on_pem on_pem;
    void *pem_user;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    char *last_cert;   /* the PEM last handed to on_pem */
};

/* One pass; the seconds to wait before the next. */
static int tls_pass(ext_webhook_tls *t) {
    ext_cert_pem pem;
    char err[1024];
    tls_last_code = 0;
    if (ext_webhook_tls_sync(&t->cfg, t->req, t->req_user, (int64_t)time(NULL), &pem, NULL, err, sizeof err) < 0) {
        /* health.h logs it at warn once, then rate-limited; each retry at debug */
        ext_log(EXT_LOG_DEBUG, "webhook-tls=error secret=%s/%s error=\"%s\" retry_s=%d", t->cfg.secret_ns,
                t->cfg.secret_name, err, t->cfg.retry_interval_s);
        ext_health_fail(EXT_DEP_WEBHOOK_SECRET, tls_last_code,
                        tls_last_code ? ext_health_reason_of(tls_last_code) : EXT_REASON_TLS, err);
        return t->cfg.retry_interval_s;
    }
    ext_health_ok(EXT_DEP_WEBHOOK_SECRET);
    if (!t->last_cert || strcmp(t->last_cert, pem.cert)) {
        t->on_pem(t->pem_user, &pem);
        free(t->last_cert);
        t->last_cert = pem.cert;
        pem.cert = NULL;
    }
    ext_cert_pem_free(&pem);
    return t->cfg.check_interval_s;
}

static void *tls_thread(void *arg) {
    ext_webhook_tls *t = arg;
    int wait_s = tls_pass(t);
    pthread_mutex_lock(&t->mu);
    while (!t->stop) {
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += wait_s;
        int rc = 0;
        while (!t->stop && rc == 0) rc = pthread_cond_timedwait(&t->cv, &t->mu, &dl);
        if (t->stop) break;
        pthread_mutex_unlock(&t->mu);
        wait_s = tls_pass(t);
        pthread_mutex_lock(&t->mu);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

ext_webhook_tls *ext_webhook_tls_start(const ext_webhook_tls_config *cfg, ext_webhook_tls_request_fn req,
                                       void *req_user, ext_webhook_tls_on_pem on_pem, void *pem_user, char *err,
                                       size_t errlen) {
    if (!ext_certs_available()) {
        ext_cert_pem dummy;
        ext_certs_make_ca("x", 1, &dummy, err, errlen);   /* fills err with what to do instead */
        return NULL;
    }
    ext_webhook_tls *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    t->cfg = *cfg;
    if (t->cfg.check_interval_s <= 0) t->cfg.check_interval_s = 600;
    if (t->cfg.retry_interval_s <= 0) t->cfg.retry_interval_s = 10;
    t->req = req;
    t->req_user = req_user;
    t->on_pem = on_pem;
    t->pem_user = pem_user;
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    if (pthread_create(&t->th, NULL, tls_thread, t) != 0) {
        snprintf(err, errlen, "cannot start the webhook certificate thread");
        pthread_mutex_destroy(&t->mu);
        pthread_cond_destroy(&t->cv);
        free(t);
        return NULL;
    }
    return t;
}

void ext_webhook_tls_stop(ext_webhook_tls *t) {
    if (!t) return;
    pthread_mutex_lock(&t->mu);
    t->stop = true;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
    pthread_join(t->th, NULL);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    free(t->last_cert);
    free(t);
}
