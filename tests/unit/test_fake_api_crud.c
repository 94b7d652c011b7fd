/* test_fake_api_crud.c -- the fake API server's object verbs, over HTTP through tessera's own client
 * (kube_request): pods created (generateName, 409, namespace mismatch) and deleted with the ConfigMaps they
 * own, JSON merge patches (null deletes, 415 for other patch types, a pod's spec and status kept), ConfigMap PUT
 * with a stale resourceVersion (409 Conflict), Secrets, MutatingWebhookConfigurations, and watchers seeing it all.
 * Each test body runs between env_init and env_free, so a failed CHECK still frees the server. */
#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>

#include "../support/fake_apiserver.h"
#include "kube/client.h"
#include "harness.h"

typedef struct env {
    fake_api *f;
    kube_client *k;
    char url[128];
} env;

static bool env_init(env *e) {
    memset(e, 0, sizeof *e);
    char err[256];
    if (!(e->f = fake_api_start(0, err, sizeof err))) return false;
    fake_api_url(e->f, e->url, sizeof e->url);
    kube_config kc;
    kube_config_defaults(&kc);
    snprintf(kc.api_url, sizeof kc.api_url, "%s", e->url);
    e->k = kube_new(&kc, err, sizeof err);
    return e->k != NULL;
}

static void env_free(env *e) {
    kube_free(e->k);
    fake_api_free(e->f);
}

#define RUN(body)                                                                       \
    do {                                                                                \
        env e_;                                                                         \
        if (env_init(&e_)) body(&e_);                                                   \
        else test_fail(__FILE__, __LINE__, "cannot start the fake API server");         \
        env_free(&e_);                                                                  \
    } while (0)

/* One request; the parsed answer (or NULL) in *out, the HTTP status returned. */
static int req(env *e, const char *method, const char *path, const char *body, cJSON **out) {
    char err[512], *resp = NULL;
    int code = kube_request(e->k, method, path, body, 2000, &resp, err, sizeof err);
    if (out) *out = resp ? cJSON_Parse(resp) : NULL;
    free(resp);
    return code;
}

/* o's string at "a.b.c" (no part may contain a dot), or NULL */
static const char *jstr(const cJSON *o, const char *path) {
    char buf[256], *save = NULL;
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = strtok_r(buf, ".", &save); p && o; p = strtok_r(NULL, ".", &save))
        o = cJSON_GetObjectItemCaseSensitive(o, p);
    return cJSON_IsString(o) ? o->valuestring : NULL;
}

/* o[a] or o[a][b] (keys with dots, like annotations, need this rather than jstr) */
static const cJSON *jget(const cJSON *o, const char *a, const char *b) {
    o = cJSON_GetObjectItemCaseSensitive(o, a);
    return b ? cJSON_GetObjectItemCaseSensitive(o, b) : o;
}

/* A request with an arbitrary Content-Type, which kube_request does not let one choose. */
static int raw_request(env *e, const char *method, const char *path, const char *ctype, const char *body) {
    CURL *h = curl_easy_init();
    if (!h) return -1;
    char url[512], hdr[128];
    snprintf(url, sizeof url, "%s%s", e->url, path);
    snprintf(hdr, sizeof hdr, "Content-Type: %s", ctype);
    struct curl_slist *hs = curl_slist_append(NULL, hdr);
    FILE *devnull = fopen("/dev/null", "w");
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hs);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, devnull);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)TEST_PATIENCE_MS);
    long code = -1;
    if (curl_easy_perform(h) == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    if (devnull) fclose(devnull);
    curl_slist_free_all(hs);
    curl_easy_cleanup(h);
    return (int)code;
}

typedef struct sbuf { char *p; size_t n; } sbuf;

static size_t sbuf_write(char *d, size_t sz, size_t nm, void *u) {
    sbuf *b = u;
    char *q = realloc(b->p, b->n + sz * nm + 1);
    if (!q) return 0;
    memcpy(q + b->n, d, sz * nm);
    b->p = q;
    b->n += sz * nm;
    b->p[b->n] = 0;
    return sz * nm;
}

/* The pods watch from rv, until the server's timeoutSeconds=1 ends it: the event lines (malloc'd). */
static char *watch_pods_1s(env *e, long long rv) {
    CURL *h = curl_easy_init();
    char url[512];
    snprintf(url, sizeof url, "%s/api/v1/pods?watch=1&resourceVersion=%lld&timeoutSeconds=1", e->url, rv);
    sbuf b = {0};
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sbuf_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)TEST_PATIENCE_MS);
    curl_easy_perform(h);
    curl_easy_cleanup(h);
    return b.p;
}

#define POD(ns, name, extra)                                                                                   \
    "{\"metadata\":{\"name\":\"" name "\",\"namespace\":\"" ns "\"" extra "},\"spec\":{\"containers\":"         \
    "[{\"name\":\"c\",\"image\":\"busybox\"}]}}"

static void pod_create_and_delete(env *e) {
    long long rv0 = fake_api_rv(e->f);
    cJSON *o = NULL;
    /* generateName; the client's status is the server's to set */
    CHECK_INT(req(e, "POST", "/api/v1/namespaces/ns1/pods",
                  "{\"metadata\":{\"generateName\":\"web-\"},\"spec\":{\"containers\":[{\"name\":\"c\"}]},"
                  "\"status\":{\"phase\":\"Running\"}}", &o), 201);
    const char *name = jstr(o, "metadata.name");
    CHECK(name && strncmp(name, "web-", 4) == 0 && strlen(name) == 9);
    CHECK_STR(jstr(o, "metadata.namespace"), "ns1");
    CHECK(jstr(o, "metadata.uid") && jstr(o, "metadata.creationTimestamp") && jstr(o, "metadata.resourceVersion"));
    CHECK_STR(jstr(o, "status.phase"), "Pending");
    CHECK_STR(jstr(o, "kind"), "Pod");
    char gen[64];
    snprintf(gen, sizeof gen, "%s", name);
    cJSON_Delete(o);

    CHECK_INT(req(e, "POST", "/api/v1/namespaces/ns1/pods", POD("ns1", "a", ""), NULL), 201);
    CHECK_INT(req(e, "POST", "/api/v1/namespaces/ns1/pods", POD("ns1", "a", ""), &o), 409);
    CHECK_STR(jstr(o, "reason"), "AlreadyExists");
    CHECK_STR(jstr(o, "message"), "pods \"a\" already exists");
    CHECK_STR(jstr(o, "details.name"), "a");
    cJSON_Delete(o);
    CHECK_INT(req(e, "POST", "/api/v1/namespaces/ns1/pods", POD("other", "b", ""), &o), 400);
    CHECK_STR(jstr(o, "reason"), "BadRequest");
    cJSON_Delete(o);
    CHECK_INT(req(e, "POST", "/api/v1/namespaces/ns1/pods", "{\"metadata\":{}}", NULL), 422);
    CHECK_INT(req(e, "POST", "/api/v1/namespaces/ns1/pods", "not json", NULL), 400);
    /* the same name in another namespace is another pod; no namespace in the body takes the URL's */
    CHECK_INT(req(e, "POST", "/api/v1/namespaces/ns2/pods", "{\"metadata\":{\"name\":\"a\"}}", &o), 201);
    CHECK_STR(jstr(o, "metadata.namespace"), "ns2");
    cJSON_Delete(o);

    CHECK_INT(req(e, "GET", "/api/v1/namespaces/ns1/pods/a", NULL, NULL), 200);
    CHECK_INT(req(e, "DELETE", "/api/v1/namespaces/ns1/pods/a", NULL, &o), 200);
    CHECK_STR(jstr(o, "metadata.name"), "a");
    CHECK_STR(jstr(o, "kind"), "Pod");
    cJSON_Delete(o);
    CHECK_INT(req(e, "GET", "/api/v1/namespaces/ns1/pods/a", NULL, &o), 404);
    CHECK_STR(jstr(o, "reason"), "NotFound");
    CHECK_STR(jstr(o, "message"), "pods \"a\" not found");
    cJSON_Delete(o);
    CHECK_INT(req(e, "DELETE", "/api/v1/namespaces/ns1/pods/a", NULL, NULL), 404);
    char *other = fake_api_get(e->f, "pods", "ns2", "a");
    bool kept = other != NULL;
    free(other);
    CHECK(kept);
    CHECK_INT(fake_api_requests(e->f, "POST /api/v1/namespaces/ns1/pods"), 6);
    CHECK_INT(fake_api_requests(e->f, "DELETE /api/v1/namespaces/"), 2);

    /* watchers saw it: ADDED for each create, DELETED for the delete, in order */
    char *w = watch_pods_1s(e, rv0);
    CHECK(w != NULL);
    char *added = strstr(w, "\"type\":\"ADDED\""), *deleted = strstr(w, "\"type\":\"DELETED\"");
    bool ok = added && deleted && added < deleted && strstr(w, gen) && strstr(deleted, "\"name\":\"a\"");
    free(w);
    CHECK(ok);
}

TEST(fake_api_pods_are_created_and_deleted) { RUN(pod_create_and_delete); }

static void owned_configmaps_go(env *e) {
    cJSON *o = NULL;
    CHECK_INT(req(e, "POST", "/api/v1/namespaces/ns1/pods", POD("ns1", "share", ""), &o), 201);
    char uid[128], cm[512];
    snprintf(uid, sizeof uid, "%s", jstr(o, "metadata.uid"));
    cJSON_Delete(o);
    snprintf(cm, sizeof cm,
             "{\"metadata\":{\"name\":\"tessera-gpu-1\",\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"Pod\","
             "\"name\":\"share\",\"uid\":\"%s\",\"blockOwnerDeletion\":false}]},\"data\":{\"A\":\"1\"}}", uid);
    CHECK_INT(req(e, "POST", "/api/v1/namespaces/ns1/configmaps", cm, &o), 201);
    CHECK_STR(jstr(o, "kind"), "ConfigMap");
    CHECK_STR(jstr(o, "data.A"), "1");
    cJSON_Delete(o);
    CHECK_INT(req(e, "POST", "/api/v1/namespaces/ns1/configmaps", cm, &o), 409);
    CHECK_STR(jstr(o, "reason"), "AlreadyExists");
    cJSON_Delete(o);
    CHECK_INT(req(e, "POST", "/api/v1/namespaces/ns1/configmaps", "{\"metadata\":{\"name\":\"keep\"}}", NULL), 201);
    CHECK_INT(req(e, "GET", "/api/v1/namespaces/ns1/configmaps/tessera-gpu-1", NULL, NULL), 200);

    CHECK_INT(req(e, "DELETE", "/api/v1/namespaces/ns1/pods/share", NULL, NULL), 200);
    CHECK_INT(req(e, "GET", "/api/v1/namespaces/ns1/configmaps/tessera-gpu-1", NULL, &o), 404);
    CHECK_STR(jstr(o, "message"), "configmaps \"tessera-gpu-1\" not found");
    cJSON_Delete(o);
    CHECK_INT(req(e, "GET", "/api/v1/namespaces/ns1/configmaps/keep", NULL, NULL), 200);
    /* a ConfigMap's DELETE answers a Status naming it */
    CHECK_INT(req(e, "DELETE", "/api/v1/namespaces/ns1/configmaps/keep", NULL, &o), 200);
    CHECK_STR(jstr(o, "status"), "Success");
    CHECK_STR(jstr(o, "details.name"), "keep");
    CHECK_STR(jstr(o, "details.kind"), "configmaps");
    cJSON_Delete(o);
    char *list = fake_api_list(e->f, "configmaps");
    CHECK_STR(list, "[]");
    free(list);
}

TEST(fake_api_deleting_a_pod_collects_its_configmaps) { RUN(owned_configmaps_go); }

static void merge_patch(env *e) {
    cJSON *o = NULL;
    CHECK_INT(req(e, "POST", "/api/v1/namespaces/ns1/pods",
                  POD("ns1", "p", ",\"labels\":{\"a\":\"1\",\"b\":\"2\"}"), &o), 201);
    long long rv = atoll(jstr(o, "metadata.resourceVersion"));
    cJSON_Delete(o);
    long long rv0 = fake_api_rv(e->f);
    const char *path = "/api/v1/namespaces/ns1/pods/p";
    CHECK_INT(req(e, "PATCH", path,
                  "{\"metadata\":{\"labels\":{\"a\":null,\"c\":\"3\"},\"annotations\":{\"tessera.io/gpu-uuid\":"
                  "\"GPU-1\"}},\"status\":{\"phase\":\"Running\"}}", &o), 200);
    CHECK(atoll(jstr(o, "metadata.resourceVersion")) > rv);
    CHECK(!cJSON_GetObjectItemCaseSensitive(jget(o, "metadata", "labels"), "a"));
    CHECK_STR(jstr(o, "metadata.labels.b"), "2");
    CHECK_STR(jstr(o, "metadata.labels.c"), "3");
    CHECK_STR(cJSON_GetStringValue(jget(jget(o, "metadata", "annotations"), "tessera.io/gpu-uuid", NULL)), "GPU-1");
    CHECK_STR(jstr(o, "status.phase"), "Pending"); /* status belongs to the status subresource */
    cJSON_Delete(o);
    char *w = watch_pods_1s(e, rv0);
    bool modified = w && strstr(w, "\"type\":\"MODIFIED\"") && strstr(w, "GPU-1");
    free(w);
    CHECK(modified);

    /* a pod's spec does not change; a stale resourceVersion or another uid is a failed precondition */
    CHECK_INT(req(e, "PATCH", path, "{\"spec\":{\"nodeName\":\"n1\"}}", &o), 422);
    CHECK_STR(jstr(o, "reason"), "Invalid");
    cJSON_Delete(o);
    CHECK_INT(req(e, "PATCH", path, "{\"metadata\":{\"resourceVersion\":\"1\",\"labels\":{\"x\":\"y\"}}}", &o), 409);
    CHECK_STR(jstr(o, "reason"), "Conflict");
    cJSON_Delete(o);
    CHECK_INT(req(e, "PATCH", path, "{\"metadata\":{\"uid\":\"someone-else\"}}", NULL), 409);
    CHECK_INT(req(e, "PATCH", path, "{\"metadata\":{\"name\":\"q\"}}", NULL), 400);
    CHECK_INT(req(e, "PATCH", path, "[1,2]", NULL), 400);
    CHECK_INT(req(e, "PATCH", path, "{not json", NULL), 400);
    CHECK_INT(req(e, "PATCH", "/api/v1/namespaces/ns1/pods/absent", "{}", &o), 404);
    CHECK_STR(jstr(o, "reason"), "NotFound");
    cJSON_Delete(o);
    CHECK_INT(raw_request(e, "PATCH", path, "application/json-patch+json", "[]"), 415);
    CHECK_INT(raw_request(e, "PATCH", path, "application/strategic-merge-patch+json", "{}"), 415);
    CHECK_INT(raw_request(e, "PATCH", path, "application/merge-patch+json; charset=utf-8", "{}"), 200);
    /* PUT is not a pod verb here */
    CHECK_INT(req(e, "PUT", path, POD("ns1", "p", ""), NULL), 405);

    /* the C API's patch is the controller's: status included, identity kept */
    CHECK(fake_api_patch(e->f, "pods", "ns1", "p", "{\"status\":{\"phase\":\"Running\"},\"metadata\":{\"uid\":\"x\"}}") > 0);
    CHECK(fake_api_patch(e->f, "pods", "ns1", "absent", "{}") < 0);
    char *s = fake_api_get(e->f, "pods", "ns1", "p");
    o = cJSON_Parse(s);
    free(s);
    CHECK_STR(jstr(o, "status.phase"), "Running");
    CHECK(strcmp(jstr(o, "metadata.uid"), "x") != 0);
    cJSON_Delete(o);
    CHECK_INT(fake_api_requests(e->f, "PATCH /api/v1/namespaces/ns1/pods/p"), 10);
}

TEST(fake_api_merge_patch_follows_rfc7386_and_the_pod_strategy) { RUN(merge_patch); }

static void configmap_put(env *e) {
    const char *path = "/api/v1/namespaces/ns1/configmaps/cm";
    cJSON *o = NULL;
    CHECK_INT(req(e, "PUT", path, "{\"metadata\":{\"name\":\"cm\"}}", &o), 404);
    CHECK_STR(jstr(o, "reason"), "NotFound");
    cJSON_Delete(o);
    CHECK_INT(req(e, "POST", "/api/v1/namespaces/ns1/configmaps", "{\"metadata\":{\"name\":\"cm\"},\"data\":{\"k\":\"1\"}}", &o), 201);
    char rv1[32], uid[64], body[512];
    snprintf(rv1, sizeof rv1, "%s", jstr(o, "metadata.resourceVersion"));
    snprintf(uid, sizeof uid, "%s", jstr(o, "metadata.uid"));
    cJSON_Delete(o);

    snprintf(body, sizeof body, "{\"metadata\":{\"name\":\"cm\",\"resourceVersion\":\"%s\"},\"data\":{\"k\":\"2\"}}", rv1);
    CHECK_INT(req(e, "PUT", path, body, &o), 200);
    CHECK_STR(jstr(o, "data.k"), "2");
    CHECK_STR(jstr(o, "metadata.uid"), uid);
    CHECK(strcmp(jstr(o, "metadata.resourceVersion"), rv1) != 0);
    cJSON_Delete(o);
    /* the same resourceVersion again is stale now */
    snprintf(body, sizeof body, "{\"metadata\":{\"name\":\"cm\",\"resourceVersion\":\"%s\"},\"data\":{\"k\":\"3\"}}", rv1);
    CHECK_INT(req(e, "PUT", path, body, &o), 409);
    CHECK_STR(jstr(o, "reason"), "Conflict");
    CHECK_CONTAINS(jstr(o, "message"), "Operation cannot be fulfilled on configmaps \"cm\"");
    cJSON_Delete(o);
    /* without a resourceVersion the update is unconditional */
    CHECK_INT(req(e, "PUT", path, "{\"metadata\":{\"name\":\"cm\"},\"data\":{\"k\":\"4\"}}", NULL), 200);
    CHECK_INT(req(e, "PUT", path, "{\"metadata\":{\"name\":\"other\"}}", NULL), 400);
    CHECK_INT(req(e, "PATCH", path, "{\"data\":{\"k\":null,\"j\":\"5\"}}", &o), 200);
    CHECK(!cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "data"), "k"));
    CHECK_STR(jstr(o, "data.j"), "5");
    cJSON_Delete(o);

    /* injection and counting work on the new verbs too */
    fake_api_inject(e->f, "PUT /api/v1/namespaces/ns1/configmaps", 500, 1);
    CHECK_INT(req(e, "PUT", path, "{\"metadata\":{\"name\":\"cm\"}}", NULL), 500);
    CHECK_INT(req(e, "PUT", path, "{\"metadata\":{\"name\":\"cm\"}}", NULL), 200);
    CHECK_INT(fake_api_requests(e->f, "PUT /api/v1/namespaces/ns1/configmaps/cm"), 7);
}

TEST(fake_api_configmap_put_conflicts_on_a_stale_resource_version) { RUN(configmap_put); }

static void secrets_and_webhooks(env *e) {
    cJSON *o = NULL;
    CHECK_INT(req(e, "POST", "/api/v1/namespaces/tessera/secrets",
                  "{\"metadata\":{\"name\":\"tls\",\"namespace\":\"tessera\"},\"data\":{\"ca.crt\":\"Q0E=\"}}", NULL), 201);
    CHECK_INT(req(e, "POST", "/api/v1/namespaces/tessera/secrets", "{\"metadata\":{\"name\":\"tls\"}}", &o), 409);
    CHECK_STR(jstr(o, "reason"), "AlreadyExists");
    CHECK_STR(jstr(o, "message"), "secrets \"tls\" already exists");
    cJSON_Delete(o);
    CHECK_INT(req(e, "GET", "/api/v1/namespaces/tessera/secrets/tls", NULL, &o), 200);
    CHECK_STR(jstr(o, "kind"), "Secret");
    CHECK_STR(cJSON_GetStringValue(jget(o, "data", "ca.crt")), "Q0E=");
    cJSON_Delete(o);
    CHECK_INT(req(e, "PATCH", "/api/v1/namespaces/tessera/secrets/tls", "{\"data\":{\"tls.key\":\"S0VZ\"}}", NULL), 200);
    char *s = fake_api_get(e->f, "secrets", "tessera", "tls");
    CHECK(s && strstr(s, "S0VZ") && strstr(s, "Q0E="));
    free(s);

    /* cluster-scoped: put by the test, patched by the client (caBundle inside the webhooks array: a merge
     * patch replaces arrays whole) */
    CHECK(fake_api_put(e->f, "mutatingwebhookconfigurations",
                       "{\"metadata\":{\"name\":\"tessera\"},\"webhooks\":[{\"name\":\"w.tessera.io\","
                       "\"clientConfig\":{\"caBundle\":\"\"}}]}") > 0);
    const char *path = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/tessera";
    CHECK_INT(req(e, "GET", path, NULL, &o), 200);
    CHECK_STR(jstr(o, "kind"), "MutatingWebhookConfiguration");
    CHECK(jstr(o, "metadata.namespace") == NULL);
    cJSON_Delete(o);
    CHECK_INT(req(e, "PATCH", path, "{\"webhooks\":[{\"name\":\"w.tessera.io\",\"clientConfig\":{\"caBundle\":\"Q0E=\"}}]}",
                  NULL), 200);
    s = fake_api_get(e->f, "mutatingwebhookconfigurations", NULL, "tessera");
    CHECK(s && strstr(s, "\"caBundle\":\"Q0E=\""));
    free(s);
    CHECK_INT(req(e, "PUT", path, "{\"metadata\":{\"name\":\"tessera\",\"resourceVersion\":\"1\"}}", &o), 409);
    CHECK_STR(jstr(o, "details.group"), "admissionregistration.k8s.io");
    cJSON_Delete(o);
    CHECK_INT(req(e, "GET", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/none", NULL, &o), 404);
    CHECK_STR(jstr(o, "message"), "mutatingwebhookconfigurations.admissionregistration.k8s.io \"none\" not found");
    cJSON_Delete(o);
    CHECK_INT(fake_api_delete(e->f, "mutatingwebhookconfigurations", NULL, "tessera"), 0);
    CHECK_INT(fake_api_delete(e->f, "secrets", "tessera", "tls"), 0);
    CHECK_INT(fake_api_delete(e->f, "secrets", "tessera", "tls"), -1);
}

TEST(fake_api_secrets_and_webhook_configurations) { RUN(secrets_and_webhooks); }
