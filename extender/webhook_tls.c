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
#include "kube/client.h"
#include "extender/base/health.h"
#include "kube/log.h"

#define MWC_PATH "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/"
#define TRIES 4

int ext_webhook_tls_kube_request(void *kube, const char *method, const char *path, const char *body, int timeout_ms,
                                 char **resp, char *err, size_t errlen) {
    return kube_request(kube, method, path, body, timeout_ms, resp, err, errlen);
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

/* While the CA changes, the Secret also holds the CA it replaced (data ca-previous.crt) and when
 * it may leave the caBundle (this annotation, Unix seconds): replicas that have not re-read the
 * Secret yet still serve certificates of that CA. */
#define KEY_PREV_CA "ca-previous.crt"
#define ANN_PREV_UNTIL "tessera.io/ca-previous-until"
/* cert-manager names the Certificate that made a Secret in this annotation
 * (cert-manager pkg/apis/certmanager/v1/types.go, CertificateNameKey). */
#define ANN_CM_CERT "cert-manager.io/certificate-name"

typedef struct tls_secret {
    char *ca, *ca_key, *crt, *key;   /* decoded PEM, NULL when absent */
    char *prev_ca;                   /* the replaced CA during the overlap, else NULL */
    int64_t prev_until;              /* ANN_PREV_UNTIL */
    char rv[64];                     /* metadata.resourceVersion */
    char cm_cert[128];               /* ANN_CM_CERT, "" when absent */
} tls_secret;

static void secret_free(tls_secret *s) {
    free(s->ca);
    free(s->ca_key);
    free(s->crt);
    free(s->key);
    free(s->prev_ca);
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
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(o, "metadata");
    const cJSON *rv = cJSON_GetObjectItemCaseSensitive(meta, "resourceVersion");
    if (cJSON_IsString(rv)) snprintf(s->rv, sizeof s->rv, "%s", rv->valuestring);
    const cJSON *ann = cJSON_GetObjectItemCaseSensitive(meta, "annotations");
    const char *until = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ann, ANN_PREV_UNTIL));
    const char *cm = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ann, ANN_CM_CERT));
    if (cm) snprintf(s->cm_cert, sizeof s->cm_cert, "%s", cm);
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(o, "data");
    s->ca = data_key(data, "ca.crt");
    s->ca_key = data_key(data, "ca.key");
    s->crt = data_key(data, "tls.crt");
    s->key = data_key(data, "tls.key");
    s->prev_ca = data_key(data, KEY_PREV_CA);
    s->prev_until = until ? strtoll(until, NULL, 10) : 0;   /* unreadable: 0, dropped at once */
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
    if (s->prev_ca) {
        char until[32];
        snprintf(until, sizeof until, "%lld", (long long)s->prev_until);
        cJSON_AddStringToObject(cJSON_AddObjectToObject(m, "annotations"), ANN_PREV_UNTIL, until);
    }
    cJSON_AddStringToObject(o, "type", "kubernetes.io/tls");
    cJSON *d = cJSON_AddObjectToObject(o, "data");
    const char *keys[5] = {"ca.crt", "ca.key", "tls.crt", "tls.key", KEY_PREV_CA};
    const char *vals[5] = {s->ca, s->ca_key, s->crt, s->key, s->prev_ca};
    for (int i = 0; i < 5; i++) {
        if (!vals[i]) continue;
        char *b = ext_base64_encode(vals[i], strlen(vals[i]), NULL);
        if (b) cJSON_AddStringToObject(d, keys[i], b);
        free(b);
    }
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return text;
}

typedef enum { S_OK, S_CREATE, S_RENEW_SERVING, S_RENEW_ALL, S_DROP_PREV, S_EXTERNAL } secret_plan;

/* What a Secret we read needs at now. A Secret with certificates but no ca.key was made by
 * someone else (cert-manager, by hand): S_EXTERNAL, used as it is and never written. */
static secret_plan plan_for(const ext_webhook_tls_config *cfg, const tls_secret *s, int64_t now, const char **why) {
    char names[3][256], e[256];
    dns_names(cfg, names);
    int64_t nb, na;
    if (!s->ca_key) {
        if (s->ca || s->crt || s->key) return S_EXTERNAL;
        *why = "it is empty";
        return S_RENEW_ALL;
    }
    if (!s->ca || !s->crt || !s->key) { *why = "it lacks ca.crt, tls.crt or tls.key"; return S_RENEW_ALL; }
    if (ext_certs_validity(s->ca, &nb, &na, e, sizeof e) < 0) { *why = "ca.crt cannot be read"; return S_RENEW_ALL; }
    bool ca_usable = !ext_certs_due(nb, na, now) && ext_certs_key_matches(s->ca, s->ca_key, e, sizeof e) == 0;
    if (ext_certs_verify(s->ca, s->crt, names[0], nb > now ? nb : now, e, sizeof e) < 0 ||
        ext_certs_key_matches(s->crt, s->key, e, sizeof e) < 0) {
        *why = "tls.crt is not a certificate of ca.crt for the Service with tls.key as its key";
        return ca_usable ? S_RENEW_SERVING : S_RENEW_ALL;
    }
    if (ext_certs_validity(s->crt, &nb, &na, e, sizeof e) < 0) { *why = "tls.crt cannot be read"; return S_RENEW_ALL; }
    if (!ext_certs_due(nb, na, now) && now <= na) {
        if (!ca_usable) {
            *why = "2/3 of the CA's lifetime has passed, or ca.key does not match ca.crt";
            return S_RENEW_ALL;
        }
        if (s->prev_ca && now >= s->prev_until) {
            *why = "the overlap after the CA change is over: the previous CA leaves the caBundle";
            return S_DROP_PREV;
        }
        return S_OK;
    }
    *why = "2/3 of the serving certificate's lifetime has passed";
    return ca_usable ? S_RENEW_SERVING : S_RENEW_ALL;
}

/* How long the replaced CA stays in the caBundle: every replica re-reads the Secret within one
 * check interval (and then serves the new certificate); the second covers a replica whose check
 * failed meanwhile and is being retried. */
static int64_t overlap_s(const ext_webhook_tls_config *cfg) {
    return 2 * (int64_t)(cfg->check_interval_s > 0 ? cfg->check_interval_s : 600);
}

/* Makes s's certificates anew: serving only (same CA), or a new CA too; the CA it replaces, when
 * it still is a valid certificate, stays in the caBundle for overlap_s. */
static int remake(const ext_webhook_tls_config *cfg, tls_secret *s, bool new_ca, int64_t now, char *err,
                  size_t errlen) {
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
        int64_t nb, na;
        char e[256];
        free(s->prev_ca);
        s->prev_ca = NULL;
        if (s->ca && ext_certs_validity(s->ca, &nb, &na, e, sizeof e) == 0 && now < na) {
            s->prev_ca = s->ca;
            s->prev_until = now + overlap_s(cfg);
        } else {
            free(s->ca);
        }
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

/* Sets clientConfig.caBundle of every webhook of the configuration. Whether it holds ca_pem now
 * (also when the configuration does not exist: then nothing calls the webhook). */
static bool set_ca_bundle(const ext_webhook_tls_config *cfg, ext_webhook_tls_request_fn req, void *user,
                          const char *ca_pem) {
    char path[512], err[512];
    snprintf(path, sizeof path, MWC_PATH "%s", cfg->webhook_config);
    char *b64 = ext_base64_encode(ca_pem, strlen(ca_pem), NULL);
    if (!b64) return false;
    bool ok = false;
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
            ok = code == 404;
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
            ok = true;
            ext_health_ok(EXT_DEP_WEBHOOK_CONFIG);
            break;
        }
        err[0] = 0;
        code = body ? req(user, "PUT", path, body, 0, NULL, err, sizeof err) : -1;
        free(body);
        if (code == 200) {
            kube_log(KUBE_LOG_INFO, "webhook-tls=ca-bundle-set config=%s", cfg->webhook_config);
            ok = true;
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
    return ok;
}

/* A Secret tessera did not make (no ca.key): served as it is if tls.crt and tls.key belong
 * together; when due, a warning naming who must renew it. 0, or -1 with err. */
static int check_external(const tls_secret *s, const char *name, int64_t now, char *err, size_t errlen) {
    char e[256], who[256];
    if (s->cm_cert[0]) snprintf(who, sizeof who, "cert-manager (Certificate %s)", s->cm_cert);
    else snprintf(who, sizeof who, "whoever made it (cert-manager, a script, by hand)");
    int64_t nb, na;
    if (!s->crt || !s->key || ext_certs_key_matches(s->crt, s->key, e, sizeof e) < 0 ||
        ext_certs_validity(s->crt, &nb, &na, e, sizeof e) < 0) {
        snprintf(err, errlen, "secret %s has no ca.key, so tessera did not make it and leaves it alone, but its tls.crt "
                 "and tls.key cannot be served (%s): fix it through %s, or delete it and tessera makes its own",
                 name, s->crt && s->key ? e : "one of them is missing", who);
        return -1;
    }
    if (now > na)
        kube_log(KUBE_LOG_WARN, "webhook-tls=external-expired secret=%s renew_by=\"%s\" message=\"tls.crt expired; tessera "
                 "does not renew a Secret without ca.key: renew it there, or delete the Secret and tessera makes its own\"",
                 name, who);
    else if (ext_certs_due(nb, na, now))
        kube_log(KUBE_LOG_WARN, "webhook-tls=external-due secret=%s renew_by=\"%s\" expires_in_s=%lld message=\"2/3 of "
                 "tls.crt's lifetime has passed; tessera does not renew a Secret without ca.key: renew it there\"",
                 name, who, (long long)(na - now));
    if (!s->ca)
        kube_log(KUBE_LOG_WARN, "webhook-tls=external-no-ca secret=%s message=\"no ca.crt: the caBundle is left as it is; "
                 "%s must set it\"", name, who);
    return 0;
}

/* The caBundle for s at now: ca.crt, and the previous CA while the overlap lasts. */
static char *bundle_of(const tls_secret *s, int64_t now) {
    if (!s->ca) return NULL;
    bool prev = s->prev_ca && now < s->prev_until;
    size_t a = strlen(s->ca), b = prev ? strlen(s->prev_ca) : 0;
    char *out = malloc(a + b + 2);
    if (!out) return NULL;
    memcpy(out, s->ca, a);
    if (prev) {
        if (a && s->ca[a - 1] != '\n') out[a++] = '\n';
        memcpy(out + a, s->prev_ca, b);
    }
    out[a + b] = 0;
    return out;
}

/* ext_webhook_tls_sync; *bundle_ok: the configuration's caBundle holds the Secret's CA (or there
 * is no configuration to set), so serving the returned certificate is safe. */
static int tls_sync(const ext_webhook_tls_config *cfg, ext_webhook_tls_request_fn req, void *user, int64_t now,
                    ext_cert_pem *serving, char **ca_pem, bool *bundle_ok, char *err, size_t errlen) {
    memset(serving, 0, sizeof *serving);
    if (ca_pem) *ca_pem = NULL;
    *bundle_ok = false;
    char path[512], name[256], aerr[512];
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/secrets/%s", cfg->secret_ns, cfg->secret_name);
    snprintf(name, sizeof name, "%s/%s", cfg->secret_ns, cfg->secret_name);
    tls_secret s = {0};
    bool got = false;
    for (int t = 0; t < TRIES && !got; t++) {
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
        if (plan == S_EXTERNAL) {
            if (check_external(&s, name, now, err, errlen) < 0) {
                secret_free(&s);
                return -1;
            }
            got = true;
            break;
        }
        if (plan == S_OK) {
            got = true;
            break;
        }
        if (plan == S_DROP_PREV) {
            free(s.prev_ca);
            s.prev_ca = NULL;
        } else if (remake(cfg, &s, plan != S_RENEW_SERVING, now, err, errlen) < 0) {
            secret_free(&s);
            return -1;
        }
        if (s.prev_ca && now >= s.prev_until) {   /* a serving renewal after the overlap drops it too */
            free(s.prev_ca);
            s.prev_ca = NULL;
        }
        bool create = plan == S_CREATE;
        char *body = secret_body(cfg, &s, create ? NULL : s.rv);
        char cpath[512];
        snprintf(cpath, sizeof cpath, "/api/v1/namespaces/%s/secrets", cfg->secret_ns);
        aerr[0] = 0;
        code = body ? req(user, create ? "POST" : "PUT", create ? cpath : path, body, 0, NULL, aerr, sizeof aerr) : -1;
        free(body);
        if (code == 200 || code == 201) {
            kube_log(KUBE_LOG_INFO, "webhook-tls=%s secret=%s why=\"%s\"%s", create ? "created" : plan == S_RENEW_SERVING
                     ? "renewed" : plan == S_DROP_PREV ? "previous-ca-dropped" : "replaced", name, why,
                     plan == S_RENEW_ALL && s.prev_ca ? " previous_ca=kept-in-ca-bundle" : "");
            got = true;
            break;
        }
        secret_free(&s);
        if (code == 409) continue;   /* another replica created or renewed it: read what it wrote */
        api_error(err, errlen, code, create ? "POST" : "PUT", "secret", name, aerr);
        return -1;
    }
    if (!got) {
        secret_free(&s);
        snprintf(err, errlen, "secret %s: kept changing under us (%d attempts)", name, TRIES);
        return -1;
    }
    char *bundle = bundle_of(&s, now);
    *bundle_ok = !cfg->webhook_config[0] || !bundle;   /* nothing to set, or nothing to set it to (logged) */
    if (cfg->webhook_config[0] && bundle) *bundle_ok = set_ca_bundle(cfg, req, user, bundle);
    serving->cert = s.crt;
    serving->key = s.key;
    s.crt = s.key = NULL;
    if (ca_pem) *ca_pem = bundle;
    else free(bundle);
    secret_free(&s);
    return 0;
}

int ext_webhook_tls_sync(const ext_webhook_tls_config *cfg, ext_webhook_tls_request_fn req, void *user, int64_t now,
                         ext_cert_pem *serving, char **ca_pem, char *err, size_t errlen) {
    bool bundle_ok;
    return tls_sync(cfg, req, user, now, serving, ca_pem, &bundle_ok, err, errlen);
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
    bool bundle_ok;
    tls_last_code = 0;
    if (tls_sync(&t->cfg, t->req, t->req_user, (int64_t)time(NULL), &pem, NULL, &bundle_ok, err, sizeof err) < 0) {
        /* health.h logs it at warn once, then rate-limited; each retry at debug */
        kube_log(KUBE_LOG_DEBUG, "webhook-tls=error secret=%s/%s error=\"%s\" retry_s=%d", t->cfg.secret_ns,
                 t->cfg.secret_name, err, t->cfg.retry_interval_s);
        ext_health_fail(EXT_DEP_WEBHOOK_SECRET, tls_last_code,
                        tls_last_code ? ext_health_reason_of(tls_last_code) : EXT_REASON_TLS, err);
        return t->cfg.retry_interval_s;
    }
    ext_health_ok(EXT_DEP_WEBHOOK_SECRET);
    int wait_s = t->cfg.check_interval_s;
    if (t->last_cert && strcmp(t->last_cert, pem.cert) && !bundle_ok) {
        /* The API server may not trust the new certificate's CA yet: keep serving the one it
         * trusts until the caBundle could be set. */
        kube_log(KUBE_LOG_WARN, "webhook-tls=new-cert-held secret=%s/%s retry_s=%d message=\"the caBundle could not be set, "
                 "so the current certificate is served until it is\"", t->cfg.secret_ns, t->cfg.secret_name,
                 t->cfg.retry_interval_s);
        wait_s = t->cfg.retry_interval_s;
    } else if (!t->last_cert || strcmp(t->last_cert, pem.cert)) {
        free(t->last_cert);
        t->last_cert = NULL;
        if (t->on_pem(t->pem_user, &pem) == 0) {
            t->last_cert = pem.cert;
            pem.cert = NULL;
        } else {
            wait_s = t->cfg.retry_interval_s;   /* not taken: hand it over again soon */
        }
    }
    ext_cert_pem_free(&pem);
    return wait_s;
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

struct ext_webhook_listener {
    ext_http_config cfg;
    ext_http *h;
    pthread_mutex_t mu;
};

ext_webhook_listener *ext_webhook_listener_new(const ext_http_config *cfg) {
    ext_webhook_listener *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    l->cfg = *cfg;
    l->cfg.webhook_only = true;
    l->cfg.tls_cert_file = l->cfg.tls_key_file = l->cfg.tls_client_ca_file = NULL;
    pthread_mutex_init(&l->mu, NULL);
    return l;
}

int ext_webhook_listener_on_pem(void *listener, const ext_cert_pem *serving) {
    ext_webhook_listener *l = listener;
    char err[512] = "";
    pthread_mutex_lock(&l->mu);
    /* The new certificate needs the same port, so the old server goes first (its in-flight
     * reviews finish); if the new one cannot start, the replica serves no webhook until a retry
     * works, and says so on /readyz. */
    ext_http_stop(l->h);
    l->cfg.tls_cert_pem = serving->cert;
    l->cfg.tls_key_pem = serving->key;
    l->h = ext_http_start(&l->cfg, err, sizeof err);
    l->cfg.tls_cert_pem = l->cfg.tls_key_pem = NULL;
    int rc = 0;
    if (l->h) {
        kube_log(KUBE_LOG_INFO, "event=serving-webhook listen=%s port=%d cert=secret", l->cfg.listen, ext_http_port(l->h));
        ext_health_ok(EXT_DEP_WEBHOOK_LISTEN);
    } else {
        char down[768];   /* /readyz shows it (health.h: the webhook's listener blocks readiness) */
        snprintf(down, sizeof down, "the webhook's TLS listener on %s is down: %s (retried)", l->cfg.listen, err);
        ext_health_fail(EXT_DEP_WEBHOOK_LISTEN, 0, EXT_REASON_LISTEN, down);   /* logs it at warn */
        rc = -1;
    }
    pthread_mutex_unlock(&l->mu);
    return rc;
}

int ext_webhook_listener_port(ext_webhook_listener *l) {
    pthread_mutex_lock(&l->mu);
    int port = ext_http_port(l->h);
    pthread_mutex_unlock(&l->mu);
    return port;
}

void ext_webhook_listener_free(ext_webhook_listener *l) {
    if (!l) return;
    ext_http_stop(l->h);
    pthread_mutex_destroy(&l->mu);
    free(l);
}
