/* test_webhook.c -- the mutating admission webhook's contract (AdmissionReview v1 in, JSON
 * Patch out): the patch is decoded and applied here, and the result read back with
 * model_request_from_pod; replays, re-invocations, pods it must not touch, every malformed
 * review, every refusal; then the webhook served over HTTP on the main listener and over
 * TLS with a certificate made by certs.c.
 */
#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cjson/cJSON.h>

#include "ext_helpers.h"
#include "ext_proc.h"
#include "tests/support/json_patch.h"
#include "extender/base64.h"
#include "extender/certs.h"
#include "extender/http.h"
#include "extender/webhook.h"
#include "model/charge.h"
#include "model/request.h"

/* ' for " in inline JSON, to keep it readable. */
static char *dq(const char *sq) {
    char *s = strdup(sq);
    for (char *p = s; *p; p++)
        if (*p == '\'') *p = '"';
    return s;
}

/* An AdmissionReview v1 of `kind` (Pod) with operation op for the pod (single-quoted JSON). */
static char *review(const char *uid, const char *op, const char *kind, const char *pod_sq) {
    char *pod = dq(pod_sq);
    size_t n = strlen(pod) + 1024;
    char *s = malloc(n);
    snprintf(s, n,
             "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"%s\","
             "\"kind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":\"%s\"},"
             "\"resource\":{\"group\":\"\",\"version\":\"v1\",\"resource\":\"pods\"},\"namespace\":\"ml\","
             "\"operation\":\"%s\",\"object\":%s}}",
             uid, kind, op, pod);
    free(pod);
    return s;
}

#define FRACTION_POD \
    "{'apiVersion':'v1','kind':'Pod','metadata':{'name':'half','namespace':'ml'," \
    "'annotations':{'tessera.io/gpu-fraction':'0.5'}},'spec':{'schedulerName':'tessera-scheduler'," \
    "'initContainers':[{'name':'init','image':'busybox'}]," \
    "'containers':[{'name':'main','image':'cuda','resources':{'requests':{'cpu':'1'}}}," \
    "{'name':'side','image':'busybox','envFrom':[{'secretRef':{'name':'creds'}}]}]}}"

#define SHIM_IMAGE "registry.example/tessera-extender:1.2.3"

static ext_webhook_config cfg_with(ext_delivery_mode d) {
    ext_webhook_config c;
    ext_webhook_config_defaults(&c);
    c.delivery = d;
    snprintf(c.image, sizeof c.image, SHIM_IMAGE);
    return c;
}

/* Calls the webhook; the parsed reply (caller frees), status in *status. */
static cJSON *mutate(const ext_webhook_config *c, const char *body, int *status, char **raw) {
    ext_reply r;
    ext_webhook_mutate(c, body, strlen(body), &r);
    *status = r.status;
    cJSON *o = r.body ? cJSON_Parse(r.body) : NULL;
    if (raw) *raw = r.body ? strdup(r.body) : NULL;
    ext_reply_free(&r);
    return o;
}

static const cJSON *resp_of(const cJSON *o) { return cJSON_GetObjectItemCaseSensitive(o, "response"); }

/* The decoded patch of a reply (NULL when there is none). */
static cJSON *patch_of(const cJSON *reply) {
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(resp_of(reply), "patch");
    if (!cJSON_IsString(p)) return NULL;
    char *txt = ext_base64_decode(p->valuestring, strlen(p->valuestring), NULL);
    cJSON *ops = txt ? cJSON_Parse(txt) : NULL;
    free(txt);
    return ops;
}

/* The pod of a review with the reply's patch applied (caller frees), NULL on failure. */
static cJSON *patched_pod(const char *pod_sq, const cJSON *reply) {
    char *s = dq(pod_sq);
    cJSON *pod = cJSON_Parse(s);
    free(s);
    cJSON *ops = patch_of(reply);
    if (ops && json_patch_apply(pod, ops) < 0) {
        cJSON_Delete(pod);
        pod = NULL;
    }
    cJSON_Delete(ops);
    return pod;
}

static bool has_cm_ref(const cJSON *ctr, const char *cm) {
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(ctr, "envFrom")) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(e, "configMapRef"), "name");
        if (cJSON_IsString(n) && !strcmp(n->valuestring, cm)) return true;
    }
    return false;
}

static const char *marker(const cJSON *ctr, const char *part) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(ctr, "resources"), part), "tessera.io/share");
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The replied pod as JSON text for the next review (single quotes not needed: no ' inside). */
static char *pod_text(const cJSON *pod) { return cJSON_PrintUnformatted(pod); }

TEST(webhook_fraction_pod_gets_delivery_envfrom_and_marker) {
    ext_webhook_config c = cfg_with(EXT_DELIVERY_RESERVATION);
    char *body = review("7F3A-UID-1", "CREATE", "Pod", FRACTION_POD);
    int st;
    cJSON *rep = mutate(&c, body, &st, NULL);
    free(body);
    CHECK_INT(st, 200);
    const cJSON *r = resp_of(rep);
    CHECK_STR(cJSON_GetObjectItemCaseSensitive(rep, "apiVersion")->valuestring, "admission.k8s.io/v1");
    CHECK_STR(cJSON_GetObjectItemCaseSensitive(rep, "kind")->valuestring, "AdmissionReview");
    CHECK_STR(cJSON_GetObjectItemCaseSensitive(r, "uid")->valuestring, "7F3A-UID-1");
    CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "allowed")));
    CHECK_STR(cJSON_GetObjectItemCaseSensitive(r, "patchType")->valuestring, "JSONPatch");
    cJSON *pod = patched_pod(FRACTION_POD, rep);
    cJSON_Delete(rep);
    CHECK(pod != NULL);
    const char *cm = "tessera-gpu-7f3a-uid-1";
    const cJSON *ann = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "metadata"), "annotations");
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(ann, "tessera.io/delivery");
    bool ann_ok = cJSON_IsString(d) && !strcmp(d->valuestring, cm);
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(pod, "spec");
    const cJSON *ctrs = cJSON_GetObjectItemCaseSensitive(spec, "containers");
    const cJSON *inits = cJSON_GetObjectItemCaseSensitive(spec, "initContainers");
    /* initContainers[0] is tessera-cuda-shim now (webhook_share_gets_the_interposer): the pod's own is [1] */
    bool env_ok = has_cm_ref(cJSON_GetArrayItem(ctrs, 0), cm) && has_cm_ref(cJSON_GetArrayItem(ctrs, 1), cm) &&
                  has_cm_ref(cJSON_GetArrayItem(inits, 1), cm) && !has_cm_ref(cJSON_GetArrayItem(inits, 0), cm);
    /* the side car's own envFrom is kept, the ConfigMap appended after it */
    const cJSON *side_ef = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(ctrs, 1), "envFrom");
    bool kept = cJSON_GetArraySize(side_ef) == 2 && cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(side_ef, 0), "secretRef");
    const char *mreq = marker(cJSON_GetArrayItem(ctrs, 0), "requests"), *mlim = marker(cJSON_GetArrayItem(ctrs, 0), "limits");
    bool marker_ok = mreq && mlim && !strcmp(mreq, "1") && !strcmp(mlim, "1");
    bool side_marker = marker(cJSON_GetArrayItem(ctrs, 1), "requests") != NULL;
    const cJSON *cpu = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(ctrs, 0), "resources"), "requests"), "cpu");
    bool cpu_kept = cJSON_IsString(cpu) && !strcmp(cpu->valuestring, "1");
    bool no_rc = !cJSON_GetObjectItemCaseSensitive(spec, "runtimeClassName");
    model_request mr;
    char err[256] = "";
    int prc = model_request_from_pod(pod, &mr, err, sizeof err);
    cJSON_Delete(pod);
    CHECK(ann_ok);
    CHECK(env_ok);
    CHECK(kept);
    CHECK(marker_ok);
    CHECK(!side_marker);
    CHECK(cpu_kept);
    CHECK(no_rc);
    CHECK_MSG(prc == 0, "%s", err);
    CHECK_INT(mr.kind, MODEL_REQ_FRACTION);
    CHECK_INT(mr.memory_permille, 500);
}

TEST(webhook_replay_is_byte_identical_and_mutated_pod_gets_no_patch) {
    ext_webhook_config c = cfg_with(EXT_DELIVERY_RESERVATION);
    snprintf(c.runtime_class, sizeof c.runtime_class, "nvidia");
    char *body = review("uid-replay", "CREATE", "Pod", FRACTION_POD);
    int s1, s2, s3;
    char *raw1 = NULL, *raw2 = NULL, *raw3 = NULL;
    cJSON *r1 = mutate(&c, body, &s1, &raw1);
    cJSON *r2 = mutate(&c, body, &s2, &raw2);
    free(body);
    /* the apiserver re-invokes the webhook on the mutated pod (reinvocationPolicy) with another uid */
    cJSON *pod = patched_pod(FRACTION_POD, r1);
    char *ptxt = pod ? pod_text(pod) : strdup("{}");
    body = review("uid-other", "CREATE", "Pod", ptxt);
    cJSON *r3 = mutate(&c, body, &s3, &raw3);
    const char *rc = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "spec"),
                                                                           "runtimeClassName"));
    bool rc_ok = rc && !strcmp(rc, "nvidia");
    bool same = raw1 && raw2 && !strcmp(raw1, raw2);
    bool no_patch = r3 && !cJSON_GetObjectItemCaseSensitive(resp_of(r3), "patch") &&
                    !cJSON_GetObjectItemCaseSensitive(resp_of(r3), "patchType") &&
                    cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(resp_of(r3), "allowed"));
    free(body);
    free(ptxt);
    free(raw1);
    free(raw2);
    free(raw3);
    cJSON_Delete(pod);
    cJSON_Delete(r1);
    cJSON_Delete(r2);
    cJSON_Delete(r3);
    CHECK_INT(s1, 200);
    CHECK_INT(s2, 200);
    CHECK_INT(s3, 200);
    CHECK(same);
    CHECK(rc_ok);
    CHECK(no_patch);
}

/* A delivery annotation the pod came with that this webhook did not just issue was copied from another pod
 * (a Deployment template made from `kubectl get pod -o yaml`): it names that pod's ConfigMap, which would
 * hand this pod that pod's GPU. It is replaced by this admission's name, in the annotation and in every
 * container's envFrom, so no container keeps a reference to the other pod's ConfigMap. */
TEST(webhook_copied_delivery_annotation_is_replaced) {
    ext_webhook_config c = cfg_with(EXT_DELIVERY_RESERVATION);
    const char *pod_sq = "{'metadata':{'name':'p','annotations':{'tessera.io/delivery':'tessera-gpu-of-another-pod',"
                         "'gpu-memory':'4096'}},'spec':{'schedulerName':'tessera-scheduler','initContainers':[{'name':'i',"
                         "'envFrom':[{'configMapRef':{'name':'tessera-gpu-of-another-pod'}}]}],'containers':[{'name':'c',"
                         "'envFrom':[{'secretRef':{'name':'s'}},{'configMapRef':{'name':'tessera-gpu-of-another-pod'}}]}]}}";
    char *body = review("U2-copy", "CREATE", "Pod", pod_sq);
    int st;
    cJSON *rep = mutate(&c, body, &st, NULL);
    free(body);
    cJSON *pod = patched_pod(pod_sq, rep);
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(pod, "spec");
    const cJSON *ctr = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(spec, "containers"), 0);
    const cJSON *init = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(spec, "initContainers"), 1);
    const char *ann = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "metadata"), "annotations"), "tessera.io/delivery"));
    char annv[128];
    snprintf(annv, sizeof annv, "%s", ann ? ann : "");
    bool refs = pod && has_cm_ref(ctr, "tessera-gpu-u2-copy") && has_cm_ref(init, "tessera-gpu-u2-copy");
    bool no_old = pod && !has_cm_ref(ctr, "tessera-gpu-of-another-pod") && !has_cm_ref(init, "tessera-gpu-of-another-pod");
    int nref = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(ctr, "envFrom"));
    /* The pod as patched, admitted again (reinvocation, another request uid): kept, no patch. */
    char *ptxt = pod ? pod_text(pod) : strdup("{}");
    body = review("u2-again", "CREATE", "Pod", ptxt);
    int st2;
    cJSON *rep2 = mutate(&c, body, &st2, NULL);
    bool no_patch = rep2 && !cJSON_GetObjectItemCaseSensitive(resp_of(rep2), "patch");
    free(body);
    free(ptxt);
    cJSON_Delete(rep2);
    cJSON_Delete(pod);
    cJSON_Delete(rep);
    CHECK_INT(st, 200);
    CHECK_STR(annv, "tessera-gpu-u2-copy");
    CHECK(refs);
    CHECK(no_old);
    CHECK_INT(nref, 2);   /* the secret's and ours: the old reference was renamed, not added to */
    CHECK_INT(st2, 200);
    CHECK(no_patch);
}

/* Delivery none: only the marker (it still makes kube-scheduler call the extender). */
TEST(webhook_delivery_none_adds_only_the_marker_and_accounting) {
    ext_webhook_config c = cfg_with(EXT_DELIVERY_NONE);
    char *body = review("u3", "CREATE", "Pod", FRACTION_POD);
    int st;
    cJSON *rep = mutate(&c, body, &st, NULL);
    free(body);
    cJSON *ops = patch_of(rep);
    char *t = ops ? cJSON_PrintUnformatted(ops) : NULL;
    /* the marker and the accounting resources (README, Quotas) in requests, and limits made of them */
    bool only_marker = t && cJSON_GetArraySize(ops) == 4 && strstr(t, "/spec/containers/0/resources/requests/tessera.io~1share") &&
                       strstr(t, "/spec/containers/0/resources/requests/tessera.io~1gpu-milli") &&
                       strstr(t, "/spec/containers/0/resources/requests/tessera.io~1gpu-memory-mib") &&
                       strstr(t, "\"/spec/containers/0/resources/limits\"") && !strstr(t, "envFrom") && !strstr(t, "delivery");
    free(t);
    cJSON_Delete(ops);
    cJSON_Delete(rep);
    CHECK_INT(st, 200);
    CHECK_MSG(only_marker, "patch is not just the marker");
}

static bool untouched(const ext_webhook_config *c, const char *op, const char *kind, const char *pod_sq) {
    char *body = review("u-untouched", op, kind, pod_sq);
    int st;
    cJSON *rep = mutate(c, body, &st, NULL);
    free(body);
    const cJSON *r = resp_of(rep);
    bool ok = st == 200 && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "allowed")) &&
              !cJSON_GetObjectItemCaseSensitive(r, "patch") &&
              !strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "uid")), "u-untouched");
    cJSON_Delete(rep);
    return ok;
}

TEST(webhook_leaves_cpu_and_foreign_pods_untouched) {
    ext_webhook_config c = cfg_with(EXT_DELIVERY_RESERVATION);
#define POD1(anns, res) \
    "{'metadata':{'name':'p','annotations':{" anns "}},'spec':{'schedulerName':'tessera-scheduler'," \
    "'containers':[{'name':'c','resources':{'limits':{" res "}}}]}}"
    CHECK_MSG(untouched(&c, "CREATE", "Pod", POD1("", "'cpu':'2'")), "CPU only");
    const char *whole_other = "{'metadata':{'name':'p'},'spec':{'schedulerName':'default-scheduler',"
                              "'containers':[{'name':'c','resources':{'limits':{'nvidia.com/gpu':'1'}}}]}}";
    CHECK_MSG(untouched(&c, "CREATE", "Pod", whole_other), "another scheduler's whole-GPU pod");
    CHECK_MSG(untouched(&c, "UPDATE", "Pod", FRACTION_POD), "UPDATE");
    CHECK_MSG(untouched(&c, "CREATE", "Deployment", FRACTION_POD), "not a pod");
    const char *other = "{'metadata':{'name':'p','annotations':{'tessera.io/gpu-fraction':'0.5'}},"
                        "'spec':{'schedulerName':'default-scheduler','containers':[{'name':'c'}]}}";
    CHECK_MSG(untouched(&c, "CREATE", "Pod", other), "other scheduler");
    const char *nosched = "{'metadata':{'name':'p','annotations':{'tessera.io/gpu-fraction':'0.5'}},"
                          "'spec':{'containers':[{'name':'c'}]}}";
    CHECK_MSG(untouched(&c, "CREATE", "Pod", nosched), "no schedulerName");
    /* --scheduler-name replaces the default */
    ext_webhook_config c2 = c;
    char err[128];
    CHECK(ext_webhook_config_add_scheduler(&c2, "gpu-scheduler", err, sizeof err) == 0);
    CHECK_MSG(untouched(&c2, "CREATE", "Pod", FRACTION_POD), "tessera-scheduler is not configured any more");
    const char *theirs = "{'metadata':{'name':'p','annotations':{'tessera.io/gpu-fraction':'0.5'}},"
                         "'spec':{'schedulerName':'gpu-scheduler','containers':[{'name':'c'}]}}";
    CHECK_MSG(!untouched(&c2, "CREATE", "Pod", theirs), "the configured scheduler's pod gets a patch");
}

static void check_400(const char *body, size_t len, const char *needle, size_t max_body) {
    ext_webhook_config c = cfg_with(EXT_DELIVERY_RESERVATION);
    c.max_body = max_body;
    ext_reply r;
    ext_webhook_mutate(&c, body, len, &r);
    cJSON *o = r.body ? cJSON_Parse(r.body) : NULL;
    const char *msg = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "Error"));
    int st = r.status;
    char copy[600];
    snprintf(copy, sizeof copy, "%s", msg ? msg : "(no Error)");
    cJSON_Delete(o);
    ext_reply_free(&r);
    CHECK_MSG(st == 400, "status %d for %.80s", st, body);
    CHECK_CONTAINS(copy, needle);
}

TEST(webhook_malformed_reviews_are_400_with_a_message) {
    char *full = review("u", "CREATE", "Pod", FRACTION_POD);
    check_400(full, strlen(full) / 2, "malformed JSON", 0);          /* truncated */
    check_400(full, strlen(full), "larger than the limit", 100);      /* oversize */
    free(full);
    check_400("[]", 2, "not an AdmissionReview", 0);
    check_400("{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\"}", 61, "request", 0);
    const char *nouid = "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":"
                        "{\"kind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":\"Pod\"},\"operation\":\"CREATE\",\"object\":{}}}";
    check_400(nouid, strlen(nouid), "request.uid", 0);
    const char *numuid = "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":7}}";
    check_400(numuid, strlen(numuid), "request.uid", 0);
    const char *v1beta1 = "{\"apiVersion\":\"admission.k8s.io/v1beta1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u\"}}";
    check_400(v1beta1, strlen(v1beta1), "admissionReviewVersions", 0);
    char *notobj = review("u", "CREATE", "Pod", "'a pod'");
    check_400(notobj, strlen(notobj), "request.object", 0);
    free(notobj);
    char *arr = review("u", "CREATE", "Pod", "[1]");
    check_400(arr, strlen(arr), "request.object", 0);
    free(arr);
    const char *noop = "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u\","
                       "\"kind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":\"Pod\"},\"operation\":3}}";
    check_400(noop, strlen(noop), "request.operation", 0);
    check_400("", 0, "malformed JSON", 0);
}

static char *denial(const ext_webhook_config *c, const char *pod_sq, int *status) {
    char *body = review("u-deny", "CREATE", "Pod", pod_sq);
    cJSON *rep = mutate(c, body, status, NULL);
    free(body);
    const cJSON *r = resp_of(rep);
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(r, "status");
    char *msg = NULL;
    if (cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(r, "allowed")) &&
        cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(st, "code")) == 400 &&
        !cJSON_GetObjectItemCaseSensitive(r, "patch") &&
        !strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "uid")), "u-deny"))
        msg = strdup(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(st, "message")));
    cJSON_Delete(rep);
    return msg;
}

TEST(webhook_refuses_mps_fraction_under_reservation_delivery) {
    ext_webhook_config c = cfg_with(EXT_DELIVERY_RESERVATION);
    const char *pod = "{'metadata':{'name':'p','annotations':{'tessera.io/gpu-fraction':'0.25','tessera.io/isolation':'mps'}},"
                      "'spec':{'schedulerName':'tessera-scheduler','containers':[{'name':'c'}]}}";
    int st;
    char *msg = denial(&c, pod, &st);
    ext_webhook_config none = cfg_with(EXT_DELIVERY_NONE);
    bool ok_none = !untouched(&none, "CREATE", "Pod", pod);   /* patched (marker), not refused */
    int st2;
    char *msg2 = denial(&none, pod, &st2);
    CHECK_INT(st, 200);
    CHECK_MSG(msg != NULL, "not refused");
    CHECK_CONTAINS(msg, "nvidia.com/gpu.shared");
    CHECK_CONTAINS(msg, "--soft-share-delivery=none");
    CHECK_CONTAINS(msg, "MPS");
    CHECK_CONTAINS(msg, "tessera.io/compute-sharing: mps");   /* what the pod probably meant */
    free(msg);
    CHECK(ok_none);
    CHECK(msg2 == NULL);
}

/* The pod the API server stores after the webhook's patch of a review of pod_sq with request uid (caller
 * deletes), NULL when refused or not applicable. */
static cJSON *admit(const ext_webhook_config *c, const char *uid, const char *pod_sq) {
    char *body = review(uid, "CREATE", "Pod", pod_sq);
    int st;
    cJSON *rep = mutate(c, body, &st, NULL);
    free(body);
    cJSON *pod = st == 200 ? patched_pod(pod_sq, rep) : NULL;
    cJSON_Delete(rep);
    return pod;
}

/* ------------------------------------------------------------------ the interposer (issue 27) */

static const cJSON *ctr_named(const cJSON *spec, const char *list, const char *name) {
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(spec, list)) {
        const char *n = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "name"));
        if (n && !strcmp(n, name)) return c;
    }
    return NULL;
}

/* The container's mount at path: "name|subPath|ro" ("" when none). */
static void mount_at(const cJSON *ctr, const char *path, char *buf, size_t len) {
    buf[0] = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(ctr, "volumeMounts")) {
        const char *mp = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "mountPath"));
        if (!mp || strcmp(mp, path)) continue;
        const char *sp = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "subPath"));
        snprintf(buf, len, "%s|%s|%s", cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "name")), sp ? sp : "",
                 cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "readOnly")) ? "ro" : "rw");
    }
}

static const char *sc_str(const cJSON *ctr, const char *a, const char *b) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(ctr, "securityContext"), a);
    if (b) v = cJSON_GetObjectItemCaseSensitive(v, b);
    return cJSON_IsString(v) ? v->valuestring : "";
}
static int sc_flag(const cJSON *ctr, const char *a) {   /* 1 true, 0 false, -1 absent */
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(ctr, "securityContext"), a);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : -1;
}

/* Every soft share gets the interposer (round4.md, "What the webhook adds"): the emptyDir, tessera-cuda-shim
 * FIRST among the init containers (tessera's image, the installer's command, restricted-clean, 10m/16Mi, no
 * envFrom and no preload of its own, the only one that mounts /opt/tessera read-write), and on every other
 * container and init container the volume at /opt/tessera and its ld.so.preload at /etc/ld.so.preload, both
 * READ-ONLY (no process of the pod may replace the library for the others), the ledger's own emptyDir
 * read-write at /opt/tessera/state and the pod's delivery ConfigMap read-only at /opt/tessera/config. */
TEST(webhook_share_gets_the_interposer) {
    ext_webhook_config c = cfg_with(EXT_DELIVERY_RESERVATION);
    cJSON *pod = admit(&c, "uid-shim", FRACTION_POD);
    CHECK(pod != NULL);
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(pod, "spec");
    const cJSON *inits = cJSON_GetObjectItemCaseSensitive(spec, "initContainers");
    const cJSON *shim = cJSON_GetArrayItem(inits, 0);
    char first[64], cmd[256] = "", vol[128] = "", vstate[128] = "", vconf[128] = "", m[5][128], sm[2][128];
    snprintf(first, sizeof first, "%s", cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(shim, "name")));
    const cJSON *a;
    cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(shim, "command"))
        snprintf(cmd + strlen(cmd), sizeof cmd - strlen(cmd), "%s%s", cmd[0] ? " " : "", a->valuestring);
    const cJSON *v;
    cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(spec, "volumes"))
        if (!strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(v, "name")), "tessera-cuda"))
            snprintf(vol, sizeof vol, "%s", cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(v, "emptyDir")) &&
                                            cJSON_GetArraySize(v) == 2 ? "emptyDir" : "other");
    cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(spec, "volumes")) {
        const char *vn = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(v, "name"));
        char *t = cJSON_PrintUnformatted(v);
        if (!strcmp(vn, "tessera-cuda-state")) snprintf(vstate, sizeof vstate, "%s", t);
        if (!strcmp(vn, "tessera-cuda-config")) snprintf(vconf, sizeof vconf, "%s", t);
        free(t);
    }
    mount_at(shim, "/opt/tessera/state", sm[0], sizeof sm[0]);
    mount_at(shim, "/opt/tessera/config", sm[1], sizeof sm[1]);
    mount_at(shim, "/opt/tessera", m[0], sizeof m[0]);
    mount_at(shim, "/etc/ld.so.preload", m[1], sizeof m[1]);
    const char *img = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(shim, "image"));
    char image[128];
    snprintf(image, sizeof image, "%s", img ? img : "");
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(shim, "resources");
    char *restext = cJSON_PrintUnformatted(res);
    bool no_env = !cJSON_GetObjectItemCaseSensitive(shim, "envFrom") && !cJSON_GetObjectItemCaseSensitive(shim, "env");
    /* restricted-clean (Pod Security "restricted": runAsNonRoot, no escalation, drop ALL, RuntimeDefault) */
    const cJSON *drop = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(shim, "securityContext"), "capabilities"), "drop");
    bool restricted = sc_flag(shim, "runAsNonRoot") == 1 && sc_flag(shim, "allowPrivilegeEscalation") == 0 &&
                      sc_flag(shim, "readOnlyRootFilesystem") == 1 && cJSON_GetArraySize(drop) == 1 &&
                      !strcmp(cJSON_GetArrayItem(drop, 0)->valuestring, "ALL") &&
                      !strcmp(sc_str(shim, "seccompProfile", "type"), "RuntimeDefault") &&
                      cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(
                          cJSON_GetObjectItemCaseSensitive(shim, "securityContext"), "runAsUser")) == 65532;
    /* every other container: both mounts */
    const cJSON *others[3] = {ctr_named(spec, "initContainers", "init"), ctr_named(spec, "containers", "main"),
                              ctr_named(spec, "containers", "side")};
    bool all = true;
    for (int i = 0; i < 3; i++) {
        mount_at(others[i], "/opt/tessera", m[2], sizeof m[2]);
        mount_at(others[i], "/etc/ld.so.preload", m[3], sizeof m[3]);
        all &= !strcmp(m[2], "tessera-cuda||ro") && !strcmp(m[3], "tessera-cuda|ld.so.preload|ro");
        mount_at(others[i], "/opt/tessera/state", m[2], sizeof m[2]);
        mount_at(others[i], "/opt/tessera/config", m[3], sizeof m[3]);
        all &= !strcmp(m[2], "tessera-cuda-state||rw") && !strcmp(m[3], "tessera-cuda-config||ro");
    }
    int ninit = cJSON_GetArraySize(inits);
    cJSON_Delete(pod);
    CHECK_STR(first, "tessera-cuda-shim");
    CHECK_INT(ninit, 2);
    CHECK_STR(image, SHIM_IMAGE);
    CHECK_STR(cmd, "/usr/local/bin/tessera-reserve --install-shim /opt/tessera");
    CHECK_STR(vol, "emptyDir");
    CHECK_STR(vstate, "{\"name\":\"tessera-cuda-state\",\"emptyDir\":{}}");
    CHECK_STR(vconf, "{\"name\":\"tessera-cuda-config\",\"configMap\":{\"name\":\"tessera-gpu-uid-shim\"}}");
    CHECK_STR(m[0], "tessera-cuda||rw");   /* the installer writes it; nobody else does */
    CHECK_STR(sm[0], "");
    CHECK_STR(sm[1], "");
    CHECK_STR(m[1], "");   /* the installer itself runs without the preload */
    CHECK_STR(restext, "{\"requests\":{\"cpu\":\"10m\",\"memory\":\"16Mi\"},\"limits\":{\"cpu\":\"10m\",\"memory\":\"16Mi\"}}");
    free(restext);
    CHECK(no_env);
    CHECK(restricted);
    CHECK(all);
}

/* A tessera-cuda-shim the pod already has that is not first (another webhook put an init container before it)
 * or not what tessera makes (an older image, copied with `kubectl get pod -o yaml`; an env added by hand) is
 * removed and made again, first; the result is admitted again with no patch. */
TEST(webhook_shim_container_not_first_or_not_ours_is_made_again_first) {
    ext_webhook_config c = cfg_with(EXT_DELIVERY_RESERVATION);
    static const char *const stale[] = {
        /* second, otherwise exactly tessera's */
        "{'name':'tessera-cuda-shim','image':'" SHIM_IMAGE "','command':['/usr/local/bin/tessera-reserve',"
        "'--install-shim','/opt/tessera'],'volumeMounts':[{'name':'tessera-cuda','mountPath':'/opt/tessera'}],"
        "'resources':{'requests':{'cpu':'10m','memory':'16Mi'},'limits':{'cpu':'10m','memory':'16Mi'}},"
        "'securityContext':{'runAsNonRoot':true,'runAsUser':65532,'allowPrivilegeEscalation':false,"
        "'capabilities':{'drop':['ALL']},'seccompProfile':{'type':'RuntimeDefault'},'readOnlyRootFilesystem':true},"
        "'terminationMessagePolicy':'FallbackToLogsOnError'}",
        /* an older image */
        "{'name':'tessera-cuda-shim','image':'registry.example/tessera-extender:0.9','command':['x']}",
    };
    for (int k = 0; k < 2; k++) {
        char pod_sq[2048];
        snprintf(pod_sq, sizeof pod_sq,
                 "{'metadata':{'name':'p','annotations':{'tessera.io/gpu-fraction':'0.5'}},'spec':{'schedulerName':"
                 "'tessera-scheduler','initContainers':[{'name':'first'},%s],'containers':[{'name':'c'}]}}", stale[k]);
        cJSON *pod = admit(&c, "uid-stale", pod_sq);
        CHECK_MSG(pod != NULL, "case %d: the patch does not apply", k);
        const cJSON *inits = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "spec"), "initContainers");
        int n = cJSON_GetArraySize(inits), shims = 0;
        const cJSON *x;
        cJSON_ArrayForEach(x, inits) shims += !strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(x, "name")),
                                                      "tessera-cuda-shim");
        const cJSON *s0 = cJSON_GetArrayItem(inits, 0);
        bool first_ok = !strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(s0, "name")), "tessera-cuda-shim") &&
                        !strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(s0, "image")), SHIM_IMAGE);
        char mp[128];
        mount_at(cJSON_GetArrayItem(inits, 1), "/etc/ld.so.preload", mp, sizeof mp);
        char *ptxt = pod_text(pod);
        int st;
        char *body = review("uid-stale-2", "CREATE", "Pod", ptxt);
        cJSON *rep = mutate(&c, body, &st, NULL);
        bool no_patch = rep && !cJSON_GetObjectItemCaseSensitive(resp_of(rep), "patch");
        free(body);
        free(ptxt);
        cJSON_Delete(rep);
        cJSON_Delete(pod);
        CHECK_INT(n, 2);
        CHECK_INT(shims, 1);
        CHECK_MSG(first_ok, "case %d: tessera-cuda-shim is not first with tessera's image", k);
        CHECK_STR(mp, "tessera-cuda|ld.so.preload|ro");   /* the pod's own init container, now second */
        CHECK_MSG(no_patch, "case %d: the mutated pod gets a patch again", k);
    }
}

/* env beats envFrom: a variable the ConfigMap delivers and the enforcement reads, set by a container itself,
 * would override the share's device or limits. The hints a program may tune are not refused. */
TEST(webhook_refuses_env_that_overrides_what_enforces_the_share) {
    ext_webhook_config c = cfg_with(EXT_DELIVERY_RESERVATION);
    static const struct { const char *var; bool refused; } cases[] = {
        {"NVIDIA_VISIBLE_DEVICES", true}, {"TESSERA_GPU_MEMORY_MIB", true}, {"TESSERA_GPU_UUID", true},
        {"TESSERA_ENFORCEMENT", true}, {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", true},
        {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", true}, {"CUDA_MPS_PIPE_DIRECTORY", true},
        {"CUDA_DEVICE_MEMORY_LIMIT", true}, {"CUDA_DEVICE_SM_LIMIT", true},
        {"XLA_PYTHON_CLIENT_MEM_FRACTION", false}, {"TF_FORCE_GPU_ALLOW_GROWTH", false},
        {"NVIDIA_DRIVER_CAPABILITIES", false}, {"CUDA_VISIBLE_DEVICES", false}, {"LD_PRELOAD", false}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char pod[512];
        snprintf(pod, sizeof pod, "{'metadata':{'name':'p','annotations':{'tessera.io/gpu-fraction':'0.5'}},"
                                  "'spec':{'schedulerName':'tessera-scheduler','initContainers':[{'name':'prep',"
                                  "'env':[{'name':'%s','value':'x'}]}],'containers':[{'name':'main'}]}}", cases[i].var);
        int st;
        char *msg = denial(&c, pod, &st);
        if (!cases[i].refused) {
            CHECK_MSG(msg == NULL, "%s refused: %s", cases[i].var, msg);
            continue;
        }
        CHECK_MSG(msg != NULL, "%s not refused", cases[i].var);
        CHECK_CONTAINS(msg, "init container \"prep\"");
        CHECK_CONTAINS(msg, cases[i].var);
        free(msg);
    }
    /* Delivery none: tessera delivers nothing, so nothing is overridden. */
    ext_webhook_config none = cfg_with(EXT_DELIVERY_NONE);
    int st;
    char *msg = denial(&none, "{'metadata':{'name':'p','annotations':{'tessera.io/gpu-fraction':'0.5'}},'spec':{"
                              "'schedulerName':'tessera-scheduler','containers':[{'name':'m','env':[{'name':"
                              "'CUDA_DEVICE_MEMORY_LIMIT','value':'1g'}]}]}}", &st);
    CHECK(msg == NULL);
}

static bool image_answer(void *user, char *buf, size_t len, char *why, size_t whylen) {
    const char *img = user;
    if (!img) {
        snprintf(why, whylen, "cannot read pod tessera/tessera-scheduler-0 to learn the tessera-reserve image (API status 503)");
        return false;
    }
    snprintf(buf, len, "%s", img);
    return true;
}

/* A share is admitted only with its interposer, whose image is tessera's own: until tessera knows it, soft
 * shares are refused with why (the API server's client retries); other GPU pods are not affected. Once known,
 * that image is what the shim container runs. */
TEST(webhook_refuses_soft_shares_until_its_own_image_is_known) {
    ext_webhook_config c = cfg_with(EXT_DELIVERY_RESERVATION);
    c.image_fn = image_answer;
    c.image_user = NULL;
    int st;
    char *msg = denial(&c, FRACTION_POD, &st);
    CHECK_MSG(msg != NULL, "admitted without knowing the shim's image");
    CHECK_CONTAINS(msg, "tessera-cuda-shim");
    CHECK_CONTAINS(msg, "API status 503");
    CHECK_CONTAINS(msg, "try again");
    free(msg);
    char *whole = denial(&c, "{'metadata':{'name':'w'},'spec':{'schedulerName':'tessera-scheduler','containers':[{"
                             "'name':'c','resources':{'limits':{'nvidia.com/gpu':'1'}}}]}}", &st);
    CHECK(whole == NULL);
    c.image_user = (void *)"registry.example/own:7";
    cJSON *pod = admit(&c, "uid-img", FRACTION_POD);
    const cJSON *shim = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "spec"),
                                                                            "initContainers"), 0);
    char img[64];
    snprintf(img, sizeof img, "%s", cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(shim, "image")));
    cJSON_Delete(pod);
    CHECK_STR(img, "registry.example/own:7");
}

/* What tessera adds must not silently change what the pod has: a volume of tessera's name that is something
 * else, or another mount at one of tessera's paths, is refused with a message that names it. */
TEST(webhook_refuses_what_would_collide_with_the_interposer) {
    ext_webhook_config c = cfg_with(EXT_DELIVERY_RESERVATION);
    int st;
    char *msg = denial(&c, "{'metadata':{'name':'p','annotations':{'tessera.io/gpu-fraction':'0.5'}},'spec':{"
                           "'schedulerName':'tessera-scheduler','volumes':[{'name':'tessera-cuda','hostPath':{'path':'/x'}}],"
                           "'containers':[{'name':'m'}]}}", &st);
    CHECK_MSG(msg != NULL, "a foreign tessera-cuda volume was not refused");
    CHECK_CONTAINS(msg, "\"tessera-cuda\"");
    free(msg);
    msg = denial(&c, "{'metadata':{'name':'p','annotations':{'tessera.io/gpu-fraction':'0.5'}},'spec':{"
                     "'schedulerName':'tessera-scheduler','volumes':[{'name':'mine','emptyDir':{}}],"
                     "'containers':[{'name':'m','volumeMounts':[{'name':'mine','mountPath':'/etc/ld.so.preload'}]}]}}", &st);
    CHECK_MSG(msg != NULL, "a foreign mount at /etc/ld.so.preload was not refused");
    CHECK_CONTAINS(msg, "container \"m\"");
    CHECK_CONTAINS(msg, "/etc/ld.so.preload");
    free(msg);
    /* a time-sliced share may keep its own /dev/shm (only MPS clients need the daemon's) */
    msg = denial(&c, "{'metadata':{'name':'p','annotations':{'tessera.io/gpu-fraction':'0.5'}},'spec':{"
                     "'schedulerName':'tessera-scheduler','volumes':[{'name':'shm','emptyDir':{'medium':'Memory'}}],"
                     "'containers':[{'name':'m','volumeMounts':[{'name':'shm','mountPath':'/dev/shm'}]}]}}", &st);
    CHECK_MSG(msg == NULL, "refused: %s", msg);
}

/* Drop from a container's volumeMounts the mount at path; make the one at rw_path read-write. */
static void old_layout_mounts(cJSON *ctr) {
    cJSON *mounts = cJSON_GetObjectItemCaseSensitive(ctr, "volumeMounts");
    for (int k = cJSON_GetArraySize(mounts) - 1; k >= 0; k--) {
        cJSON *m = cJSON_GetArrayItem(mounts, k);
        const char *mp = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "mountPath"));
        if (!strcmp(mp, "/opt/tessera/state") || !strcmp(mp, "/opt/tessera/config")) cJSON_DeleteItemFromArray(mounts, k);
        else if (!strcmp(mp, "/opt/tessera")) cJSON_DeleteItemFromObject(m, "readOnly");
    }
}

/* A pod that an older tessera admitted (its containers mount /opt/tessera read-write, no ledger emptyDir, no
 * ConfigMap volume), reviewed again, is mended: /opt/tessera becomes read-only, the two volumes and their mounts
 * are added, and the result is admitted again with no patch. A template copied from another share pod keeps that
 * pod's ConfigMap in its tessera-cuda-config volume: replaced by this pod's own, as its envFrom is. */
TEST(webhook_mends_a_writable_opt_tessera_and_a_copied_config_volume) {
    ext_webhook_config c = cfg_with(EXT_DELIVERY_RESERVATION);
    cJSON *pod = admit(&c, "uid-old", FRACTION_POD);
    CHECK(pod != NULL);
    cJSON *spec = cJSON_GetObjectItemCaseSensitive(pod, "spec");
    cJSON *vols = cJSON_GetObjectItemCaseSensitive(spec, "volumes");
    for (int k = cJSON_GetArraySize(vols) - 1; k >= 0; k--) {
        const char *vn = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(vols, k), "name"));
        if (strcmp(vn, "tessera-cuda") != 0) cJSON_DeleteItemFromArray(vols, k);
    }
    cJSON *ctr;
    cJSON_ArrayForEach(ctr, cJSON_GetObjectItemCaseSensitive(spec, "containers")) old_layout_mounts(ctr);
    old_layout_mounts((cJSON *)ctr_named(spec, "initContainers", "init"));
    char *old = pod_text(pod);
    cJSON_Delete(pod);
    cJSON *mended = admit(&c, "uid-old", old);
    free(old);
    CHECK(mended != NULL);
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(mended, "spec");
    char m[4][128];
    mount_at(ctr_named(ms, "containers", "main"), "/opt/tessera", m[0], sizeof m[0]);
    mount_at(ctr_named(ms, "initContainers", "init"), "/opt/tessera", m[1], sizeof m[1]);
    mount_at(ctr_named(ms, "containers", "main"), "/opt/tessera/state", m[2], sizeof m[2]);
    mount_at(ctr_named(ms, "containers", "main"), "/opt/tessera/config", m[3], sizeof m[3]);
    int nmain = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(ctr_named(ms, "containers", "main"), "volumeMounts"));
    char *mtext = pod_text(mended);
    int st;
    char *body = review("uid-old-again", "CREATE", "Pod", mtext);
    cJSON *rep = mutate(&c, body, &st, NULL);
    free(body);
    bool no_patch = rep && !cJSON_GetObjectItemCaseSensitive(resp_of(rep), "patch");
    cJSON_Delete(rep);
    CHECK_STR(m[0], "tessera-cuda||ro");
    CHECK_STR(m[1], "tessera-cuda||ro");
    CHECK_STR(m[2], "tessera-cuda-state||rw");
    CHECK_STR(m[3], "tessera-cuda-config||ro");
    CHECK_INT(nmain, 4);   /* replaced in place, not added twice */
    CHECK_MSG(no_patch, "the mended pod gets a patch again");

    /* the same pod as a template for another one: it names another pod's ConfigMap (one this webhook did not
     * issue lately) in its annotation, envFrom and ConfigMap volume */
    char copied[8192] = "";
    for (const char *p = mtext, *hit; *p; p = hit + strlen("tessera-gpu-uid-old")) {
        hit = strstr(p, "tessera-gpu-uid-old");
        if (!hit) hit = p + strlen(p);
        snprintf(copied + strlen(copied), sizeof copied - strlen(copied), "%.*s%s", (int)(hit - p), p,
                 *hit ? "tessera-gpu-elsewhere" : "");
        if (!*hit) break;
    }
    free(mtext);
    CHECK(strstr(copied, "tessera-gpu-elsewhere") != NULL);
    cJSON *copy = admit(&c, "uid-copy", copied);
    cJSON_Delete(mended);
    CHECK(copy != NULL);
    char cmname[128] = "";
    const cJSON *v;
    cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(copy, "spec"), "volumes"))
        if (!strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(v, "name")), "tessera-cuda-config"))
            snprintf(cmname, sizeof cmname, "%s", cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                                                      cJSON_GetObjectItemCaseSensitive(v, "configMap"), "name")));
    int nvols = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(copy, "spec"), "volumes"));
    cJSON_Delete(copy);
    CHECK_STR(cmname, "tessera-gpu-uid-copy");
    CHECK_INT(nvols, 3);
}

/* The ledger's and the limits' volumes and mount points are tessera's too: another volume of those names, or a
 * mount of the pod's own at /opt/tessera/state or /opt/tessera/config, or anywhere else beneath the read-only
 * /opt/tessera, is refused with a message naming it. */
TEST(webhook_refuses_what_would_collide_with_the_ledger_or_the_limits) {
    ext_webhook_config c = cfg_with(EXT_DELIVERY_RESERVATION);
    int st;
    static const struct { const char *vols, *mounts, *want; } cases[] = {
        {"{'name':'tessera-cuda-state','hostPath':{'path':'/x'}}", "", "\"tessera-cuda-state\""},
        {"{'name':'tessera-cuda-config','emptyDir':{}}", "", "\"tessera-cuda-config\""},
        {"{'name':'mine','emptyDir':{}}", "{'name':'mine','mountPath':'/opt/tessera/state'}", "/opt/tessera/state"},
        {"{'name':'mine','emptyDir':{}}", "{'name':'mine','mountPath':'/opt/tessera/config'}", "/opt/tessera/config"},
        /* beneath the read-only /opt/tessera no mount point can be made */
        {"{'name':'mine','emptyDir':{}}", "{'name':'mine','mountPath':'/opt/tessera/models'}",
         "mounts a volume at /opt/tessera/models, inside /opt/tessera, which tessera mounts read-only"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char pod[1024];
        snprintf(pod, sizeof pod, "{'metadata':{'name':'p','annotations':{'tessera.io/gpu-fraction':'0.5'}},'spec':{"
                 "'schedulerName':'tessera-scheduler','volumes':[%s],'containers':[{'name':'m','volumeMounts':[%s]}]}}",
                 cases[i].vols, cases[i].mounts);
        char *msg = denial(&c, pod, &st);
        CHECK_MSG(msg != NULL, "case %zu not refused", i);
        CHECK_CONTAINS(msg, cases[i].want);
        free(msg);
    }
}

/* ------------------------------------------------------------------ MPS shares */

#define MPS_POD \
    "{'metadata':{'name':'mps','namespace':'ml','annotations':{'tessera.io/gpu-fraction':'0.25'," \
    "'tessera.io/compute-sharing':'mps'}},'spec':{'schedulerName':'tessera-scheduler'," \
    "'securityContext':{'runAsUser':1000}," \
    "'initContainers':[{'name':'prep','image':'busybox'}],'containers':[{'name':'main','image':'cuda'}]}}"

typedef struct ns_answer { const char *level; int rc; int calls; char asked[64]; } ns_answer;

static int ns_level(void *user, const char *ns, char *level, size_t len, char *why, size_t whylen) {
    ns_answer *a = user;
    a->calls++;
    snprintf(a->asked, sizeof a->asked, "%s", ns);
    if (a->rc < 0) {
        snprintf(why, whylen, "403: tessera-extender may not get namespaces");
        return -1;
    }
    snprintf(level, len, "%s", a->level);
    return 0;
}

/* An MPS share is its GPU's MPS daemon's client: besides the interposer, every container but the shim mounts the
 * node's /run/tessera/mps (at the same path) and its shm (at /dev/shm), as hostPath volumes of type Directory; a
 * time-sliced share gets neither. The namespace is read (the review's), and the mutated pod gets no patch again. */
TEST(webhook_mps_share_gets_its_daemons_directories) {
    ext_webhook_config c = cfg_with(EXT_DELIVERY_RESERVATION);
    ns_answer a = {.level = "privileged"};
    c.ns_level_fn = ns_level;
    c.ns_level_user = &a;
    cJSON *pod = admit(&c, "uid-mps", MPS_POD);
    CHECK(pod != NULL);
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(pod, "spec");
    char vols[512] = "";
    const cJSON *v;
    cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(spec, "volumes")) {
        const cJSON *hp = cJSON_GetObjectItemCaseSensitive(v, "hostPath"), *cm = cJSON_GetObjectItemCaseSensitive(v, "configMap");
        snprintf(vols + strlen(vols), sizeof vols - strlen(vols), "%s=%s:%s;",
                 cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(v, "name")),
                 hp ? cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(hp, "path")) : cm ? "configMap" : "emptyDir",
                 hp ? cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(hp, "type"))
                 : cm ? cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cm, "name")) : "");
    }
    char m[4][128];
    const cJSON *main_c = ctr_named(spec, "containers", "main"), *prep = ctr_named(spec, "initContainers", "prep");
    const cJSON *shim = ctr_named(spec, "initContainers", "tessera-cuda-shim");
    mount_at(main_c, "/run/tessera/mps", m[0], sizeof m[0]);
    mount_at(prep, "/dev/shm", m[1], sizeof m[1]);
    mount_at(shim, "/run/tessera/mps", m[2], sizeof m[2]);
    mount_at(main_c, "/etc/ld.so.preload", m[3], sizeof m[3]);
    char *ptxt = pod_text(pod);
    cJSON_Delete(pod);
    char *body = review("uid-mps-again", "CREATE", "Pod", ptxt);
    free(ptxt);
    int st;
    cJSON *rep = mutate(&c, body, &st, NULL);
    free(body);
    bool no_patch = rep && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(resp_of(rep), "allowed")) &&
                    !cJSON_GetObjectItemCaseSensitive(resp_of(rep), "patch");
    cJSON_Delete(rep);
    CHECK_STR(vols, "tessera-cuda=emptyDir:;tessera-cuda-state=emptyDir:;tessera-cuda-config=configMap:tessera-gpu-uid-mps;"
                    "tessera-mps=/run/tessera/mps:Directory;tessera-mps-shm=/run/tessera/mps/shm:Directory;");
    CHECK_STR(m[0], "tessera-mps||rw");
    CHECK_STR(m[1], "tessera-mps-shm||rw");
    CHECK_STR(m[2], "");
    CHECK_STR(m[3], "tessera-cuda|ld.so.preload|ro");
    CHECK_STR(a.asked, "ml");
    CHECK(no_patch);
    /* a time-sliced share: no MPS volume, and its namespace is not read */
    a.calls = 0;
    cJSON *ts = admit(&c, "uid-ts", FRACTION_POD);
    char *tst = ts ? pod_text(ts) : NULL;
    bool none = tst && !strstr(tst, "tessera-mps") && !strstr(tst, "/dev/shm");
    free(tst);
    cJSON_Delete(ts);
    CHECK(none);
    CHECK_INT(a.calls, 0);
}

/* hostPath is forbidden by Pod Security baseline and restricted: the webhook says so itself, naming the namespace,
 * its level and what to do. A namespace it cannot read is admitted with a warning (the API server's own Pod
 * Security admission still decides); one without the label (the cluster's default) or privileged is admitted. */
TEST(webhook_mps_share_is_refused_where_pod_security_forbids_hostpath) {
    ext_webhook_config c = cfg_with(EXT_DELIVERY_RESERVATION);
    ns_answer a = {0};
    c.ns_level_fn = ns_level;
    c.ns_level_user = &a;
    static const char *const forbid[] = {"baseline", "restricted"};
    for (int i = 0; i < 2; i++) {
        a.level = forbid[i];
        int st;
        char *msg = denial(&c, MPS_POD, &st);
        CHECK_MSG(msg != NULL, "an MPS share admitted in a %s namespace", forbid[i]);
        CHECK_CONTAINS(msg, "namespace ml enforces Pod Security");
        CHECK_CONTAINS(msg, forbid[i]);
        CHECK_CONTAINS(msg, "hostPath");
        CHECK_CONTAINS(msg, "privileged");
        free(msg);
    }
    static const char *const allow[] = {"privileged", ""};
    for (int i = 0; i < 2; i++) {
        a.level = allow[i];
        int st;
        char *msg = denial(&c, MPS_POD, &st);
        CHECK_MSG(msg == NULL, "refused with level \"%s\": %s", allow[i], msg);
    }
    a.rc = -1;
    char *body = review("uid-ns-unknown", "CREATE", "Pod", MPS_POD);
    int st;
    cJSON *rep = mutate(&c, body, &st, NULL);
    free(body);
    const cJSON *w = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(resp_of(rep), "warnings"), 0);
    char warn[700];
    snprintf(warn, sizeof warn, "%s", cJSON_IsString(w) ? w->valuestring : "");
    bool allowed = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(resp_of(rep), "allowed"));
    cJSON_Delete(rep);
    CHECK(allowed);
    CHECK_CONTAINS(warn, "could not read namespace ml");
    CHECK_CONTAINS(warn, "403");
}

/* An MPS client's /dev/shm must be its daemon's; an MPS share is the client of one GPU's daemon, so it asks for one
 * GPU; and it must state its uid (the model's rule, its message passed on). */
TEST(webhook_mps_share_refuses_what_its_daemon_cannot_serve) {
    ext_webhook_config c = cfg_with(EXT_DELIVERY_RESERVATION);
    int st;
    char *msg = denial(&c, "{'metadata':{'name':'p','annotations':{'tessera.io/gpu-fraction':'0.25','tessera.io/compute-"
                           "sharing':'mps'}},'spec':{'schedulerName':'tessera-scheduler','securityContext':{'runAsUser':1000},"
                           "'volumes':[{'name':'dshm','emptyDir':{'medium':'Memory'}}],'containers':[{'name':'m',"
                           "'volumeMounts':[{'name':'dshm','mountPath':'/dev/shm'}]}]}}", &st);
    CHECK_MSG(msg != NULL, "an MPS share with its own /dev/shm admitted");
    CHECK_CONTAINS(msg, "/dev/shm");
    CHECK_CONTAINS(msg, "container \"m\"");
    free(msg);
    msg = denial(&c, "{'metadata':{'name':'p','annotations':{'tessera.io/compute-sharing':'mps'}},'spec':{"
                     "'schedulerName':'tessera-scheduler','securityContext':{'runAsUser':1000},'containers':[{'name':'m',"
                     "'resources':{'limits':{'nvidia.com/gpu':'2','nvidia.com/gpumem':'8000'}}}]}}", &st);
    CHECK_MSG(msg != NULL, "an MPS share of two GPUs admitted");
    CHECK_CONTAINS(msg, "2 GPUs");
    free(msg);
    msg = denial(&c, "{'metadata':{'name':'p','annotations':{'tessera.io/gpu-fraction':'0.25','tessera.io/compute-"
                     "sharing':'mps'}},'spec':{'schedulerName':'tessera-scheduler','containers':[{'name':'m'}]}}", &st);
    CHECK_MSG(msg != NULL, "an MPS share without a uid admitted");
    CHECK_CONTAINS(msg, "runAsUser");
    free(msg);
}

/* A user-namespaced pod (spec.hostUsers: false) runs under other uids on the node than its runAsUser: not the uid
 * its MPS daemon serves, nor the owner the daemon's host directories expect. An MPS share so is refused with why;
 * hostUsers true, and a time-sliced share in a user namespace, are admitted. */
TEST(webhook_refuses_an_mps_share_in_a_user_namespace) {
    ext_webhook_config c = cfg_with(EXT_DELIVERY_RESERVATION);
    int st;
    static const char fmt[] = "{'metadata':{'name':'p','annotations':{'tessera.io/gpu-fraction':'0.25'%s}},'spec':{"
                              "'schedulerName':'tessera-scheduler','hostUsers':%s,'securityContext':{'runAsUser':1000},"
                              "'containers':[{'name':'m'}]}}";
    char pod[600];
    snprintf(pod, sizeof pod, fmt, ",'tessera.io/compute-sharing':'mps'", "false");
    char *msg = denial(&c, pod, &st);
    CHECK_MSG(msg != NULL, "an MPS share with hostUsers: false admitted");
    CHECK_CONTAINS(msg, "tessera: an MPS share (tessera.io/compute-sharing: mps) cannot run in a user namespace "
                        "(spec.hostUsers: false)");
    CHECK_CONTAINS(msg, "runAsUser");
    CHECK_CONTAINS(msg, "remove hostUsers: false, or drop the annotation");
    free(msg);
    snprintf(pod, sizeof pod, fmt, ",'tessera.io/compute-sharing':'mps'", "true");
    msg = denial(&c, pod, &st);
    CHECK_MSG(msg == NULL, "hostUsers: true refused: %s", msg);
    snprintf(pod, sizeof pod, fmt, "", "false");
    msg = denial(&c, pod, &st);
    CHECK_MSG(msg == NULL, "a time-sliced share in a user namespace refused: %s", msg);
}

TEST(webhook_refuses_invalid_gpu_request_with_the_parsers_message) {
    ext_webhook_config c = cfg_with(EXT_DELIVERY_RESERVATION);
    const char *pod = "{'metadata':{'name':'p','annotations':{'tessera.io/gpu-fraction':'1.5'}},"
                      "'spec':{'schedulerName':'tessera-scheduler','containers':[{'name':'c'}]}}";
    int st;
    char *msg = denial(&c, pod, &st);
    CHECK_INT(st, 200);
    CHECK_MSG(msg != NULL, "not refused");
    CHECK_MSG(!strncmp(msg, "tessera: ", 9), "message: %s", msg);
    CHECK_CONTAINS(msg, "tessera.io/gpu-fraction");
    free(msg);
    /* gpumem that is bytes but not a whole number of MiB: refused with the number to write */
    pod = "{'metadata':{'name':'p'},'spec':{'schedulerName':'tessera-scheduler',"
          "'containers':[{'name':'c','resources':{'limits':{'nvidia.com/gpumem':'20G'}}}]}}";
    msg = denial(&c, pod, &st);
    CHECK_MSG(msg != NULL, "20G not refused");
    CHECK_CONTAINS(msg, "\"20G\" is bytes, and not a whole number of MiB (nvidia.com/gpumem counts MiB: write 19074");
    free(msg);
}

TEST(webhook_refuses_a_container_setting_nvidia_visible_devices) {
    ext_webhook_config c = cfg_with(EXT_DELIVERY_RESERVATION);
    const char *pod = "{'metadata':{'name':'p','annotations':{'tessera.io/gpu-fraction':'0.5'}},"
                      "'spec':{'schedulerName':'tessera-scheduler','containers':[{'name':'main'},"
                      "{'name':'greedy','env':[{'name':'NVIDIA_VISIBLE_DEVICES','value':'all'}]}]}}";
    int st;
    char *msg = denial(&c, pod, &st);
    CHECK_INT(st, 200);
    CHECK_MSG(msg != NULL, "not refused");
    CHECK_CONTAINS(msg, "\"greedy\"");
    CHECK_CONTAINS(msg, "NVIDIA_VISIBLE_DEVICES");
    free(msg);
}

TEST(webhook_sets_runtime_class_only_when_configured_and_absent) {
    ext_webhook_config c = cfg_with(EXT_DELIVERY_NONE);
    snprintf(c.runtime_class, sizeof c.runtime_class, "nvidia");
    const char *own = "{'metadata':{'name':'p','annotations':{'tessera.io/gpu-fraction':'0.5'}},"
                      "'spec':{'schedulerName':'tessera-scheduler','runtimeClassName':'kata',"
                      "'containers':[{'name':'c','resources':{'requests':{'tessera.io/share':'1',"
                      "'tessera.io/gpu-milli':'500','tessera.io/gpu-memory-mib':'91680'},"
                      "'limits':{'tessera.io/share':'1','tessera.io/gpu-milli':'500','tessera.io/gpu-memory-mib':'91680'}}}]}}";
    CHECK_MSG(untouched(&c, "CREATE", "Pod", own), "the pod's own runtimeClassName is kept");
    char *body = review("u", "CREATE", "Pod", FRACTION_POD);
    int st;
    cJSON *rep = mutate(&c, body, &st, NULL);
    free(body);
    cJSON *pod = patched_pod(FRACTION_POD, rep);
    const char *rc = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "spec"),
                                                                           "runtimeClassName"));
    bool ok = rc && !strcmp(rc, "nvidia");
    cJSON_Delete(pod);
    cJSON_Delete(rep);
    CHECK(ok);
}

/* A pod without annotations or resources: the objects are created, not assumed. */
/* A HAMi memory share (nvidia.com/gpumem: `gpumem`) is wired for delivery, and the patched pod reads as
 * want_mib: the webhook, the extender and the reservation all read it with model/request.c. */
static void check_hami_memory_pod(const char *gpumem, int want_mib) {
    ext_webhook_config c = cfg_with(EXT_DELIVERY_RESERVATION);
    char pod_sq[256];
    snprintf(pod_sq, sizeof pod_sq, "{'metadata':{'name':'p'},'spec':{'schedulerName':'tessera-scheduler',"
             "'containers':[{'name':'c','resources':{'limits':{'nvidia.com/gpumem':'%s'}}}]}}", gpumem);
    char *body = review("ABC", "CREATE", "Pod", pod_sq);
    int st;
    cJSON *rep = mutate(&c, body, &st, NULL);
    free(body);
    cJSON *pod = patched_pod(pod_sq, rep);
    const cJSON *ctr = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "spec"),
                                                                          "containers"), 0);
    const char *d = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "metadata"), "annotations"), "tessera.io/delivery"));
    bool ok = pod && d && !strcmp(d, "tessera-gpu-abc") && has_cm_ref(ctr, "tessera-gpu-abc") &&
              marker(ctr, "requests") && marker(ctr, "limits");
    model_request mr;
    char err[256] = "";
    int prc = pod ? model_request_from_pod(pod, &mr, err, sizeof err) : -1;
    cJSON_Delete(pod);
    cJSON_Delete(rep);
    CHECK_INT(st, 200);
    CHECK(ok);
    CHECK_MSG(prc == 0, "%s", err);
    CHECK_INT(mr.kind, MODEL_REQ_FRACTION);
    CHECK_INT(mr.memory_mib, want_mib);
}

TEST(webhook_creates_missing_objects_for_hami_memory_pod) {
    check_hami_memory_pod("4096", 4096);
    check_hami_memory_pod("20k", 20000);   /* how the API server writes 20000 back */
    check_hami_memory_pod("20Gi", 20480);  /* a byte suffix: bytes */
}

TEST(webhook_base64_round_trip) {
    const char *cases[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    const char *want[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (int i = 0; i < 7; i++) {
        char *e = ext_base64_encode(cases[i], strlen(cases[i]), NULL);
        CHECK_STR(e, want[i]);
        size_t n;
        char *d = ext_base64_decode(e, strlen(e), &n);
        CHECK_INT(n, strlen(cases[i]));
        CHECK_STR(d, cases[i]);
        free(e);
        free(d);
    }
    CHECK(ext_base64_decode("Zm9v!", 5, NULL) == NULL);
    CHECK(ext_base64_decode("Z", 1, NULL) == NULL);
}

/* ---- served over HTTP ---------------------------------------------------------------- */

/* POST (body) or GET (NULL) url; with ca_file over HTTPS, the name resolved to 127.0.0.1. */
static long tls_http_call(const char *url, const char *body, const char *ca_file, const char *resolve, char **out) {
    CURL *c = curl_easy_init();
    cbuf b = {0};
    curl_easy_setopt(c, CURLOPT_URL, url);
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    struct curl_slist *res = resolve ? curl_slist_append(NULL, resolve) : NULL;
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
    if (res) curl_easy_setopt(c, CURLOPT_RESOLVE, res);
    if (ca_file) curl_easy_setopt(c, CURLOPT_CAINFO, ca_file);
    if (body) curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
    long code = 0;
    if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(c);
    curl_slist_free_all(hdr);
    curl_slist_free_all(res);
    if (out) *out = b.p ? b.p : strdup("");
    else free(b.p);
    return code;
}

TEST(webhook_http_main_listener_serves_webhook_mutate) {
    ext_state *st = demo_state();
    ext_verbs v;
    ext_verbs_init(&v, st, NULL, NULL, NULL);
    ext_webhook_config wc = cfg_with(EXT_DELIVERY_NONE);
    ext_http_config hc = {.conn_timeout_s = 2, .verbs = &v, .webhook = &wc};
    snprintf(hc.listen, sizeof hc.listen, "127.0.0.1:0");
    snprintf(hc.prefix, sizeof hc.prefix, "/tessera");
    char err[256] = "";
    ext_http *h = ext_http_start(&hc, err, sizeof err);
    char url[128], *out = NULL, *out_bad = NULL;
    char *body = review("http-uid", "CREATE", "Pod", FRACTION_POD);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/webhook/mutate", ext_http_port(h));
    long code = h ? tls_http_call(url, body, NULL, NULL, &out) : -1;
    long bad = h ? tls_http_call(url, "{", NULL, NULL, &out_bad) : -1;
    long get = h ? tls_http_call(url, NULL, NULL, NULL, NULL) : -1;
    free(body);
    ext_http_stop(h);
    ext_state_free(st);
    CHECK_MSG(h != NULL, "http: %s", err);
    CHECK_INT(code, 200);
    CHECK_CONTAINS(out, "\"uid\":\"http-uid\"");
    CHECK_CONTAINS(out, "\"patchType\":\"JSONPatch\"");
    CHECK_INT(bad, 400);
    CHECK_CONTAINS(out_bad, "\"Error\"");
    CHECK_INT(get, 405);
    free(out);
    free(out_bad);
}

/* The webhook-only TLS listener from PEM in memory: a client with the CA verifies the
 * Service's DNS name (resolved to loopback), and the verbs are not there. */
TEST(webhook_http_tls_listener_with_generated_certificate) {
    if (!ext_certs_available()) {
        printf("    skipped: built without GnuTLS\n");
        return;
    }
    ext_cert_pem ca = {0}, sv = {0};
    char err[512] = "";
    const char *dns[] = {"tessera-extender.tessera.svc", "tessera-extender.tessera.svc.cluster.local",
                         "tessera-extender.tessera"};
    int made = ext_certs_make_ca("tessera-test-ca", 1, &ca, err, sizeof err) == 0 &&
               ext_certs_make_serving(&ca, dns, 3, 1, &sv, err, sizeof err) == 0;
    CHECK_MSG(made, "certs: %s", err);
    char ca_file[] = "/tmp/tessera-wh-ca-XXXXXX";
    int fd = mkstemp(ca_file);
    CHECK(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs(ca.cert, f);
    fclose(f);
    ext_webhook_config wc = cfg_with(EXT_DELIVERY_RESERVATION);
    ext_http_config hc = {.conn_timeout_s = 2, .webhook = &wc, .webhook_only = true, .tls_cert_pem = sv.cert,
                          .tls_key_pem = sv.key};
    snprintf(hc.listen, sizeof hc.listen, "127.0.0.1:0");
    snprintf(hc.prefix, sizeof hc.prefix, "/tessera");
    ext_http *h = ext_http_start(&hc, err, sizeof err);
    int port = ext_http_port(h);
    char url[160], resolve[160], url_f[160], url_h[160], *out = NULL;
    snprintf(url, sizeof url, "https://tessera-extender.tessera.svc:%d/webhook/mutate", port);
    snprintf(url_f, sizeof url_f, "https://tessera-extender.tessera.svc:%d/tessera/filter", port);
    snprintf(url_h, sizeof url_h, "https://tessera-extender.tessera.svc:%d/healthz", port);
    snprintf(resolve, sizeof resolve, "tessera-extender.tessera.svc:%d:127.0.0.1", port);
    char *body = review("tls-uid", "CREATE", "Pod", FRACTION_POD);
    long code = h ? tls_http_call(url, body, ca_file, resolve, &out) : -1;
    long filt = h ? tls_http_call(url_f, "{}", ca_file, resolve, NULL) : -1;
    long health = h ? tls_http_call(url_h, NULL, ca_file, resolve, NULL) : -1;
    char url_ip[160];
    snprintf(url_ip, sizeof url_ip, "https://127.0.0.1:%d/healthz", port);
    long by_ip = h ? tls_http_call(url_ip, NULL, ca_file, NULL, NULL) : -1;   /* the cert does not name the IP */
    free(body);
    ext_http_stop(h);
    unlink(ca_file);
    ext_cert_pem_free(&ca);
    ext_cert_pem_free(&sv);
    CHECK_MSG(h != NULL, "https: %s", err);
    CHECK_INT(code, 200);
    CHECK_CONTAINS(out, "\"uid\":\"tls-uid\"");
    CHECK_CONTAINS(out, "\"patch\"");
    free(out);
    CHECK_INT(filt, 404);
    CHECK_INT(health, 200);
    CHECK_INT(by_ip, 0);
}

/* Renewal restarts the TLS listener on the same port with the new PEM (main.c's
 * webhook_restart): the port is free again at once and the new certificate is served. */
TEST(webhook_http_tls_listener_restarts_on_the_same_port_with_new_pem) {
    if (!ext_certs_available()) return;
    ext_cert_pem ca1 = {0}, ca2 = {0}, sv1 = {0}, sv2 = {0};
    char err[512] = "";
    const char *dns[] = {"tessera-extender.tessera.svc"};
    CHECK_MSG(ext_certs_make_ca("ca-one", 1, &ca1, err, sizeof err) == 0 && ext_certs_make_ca("ca-two", 1, &ca2, err, sizeof err) == 0 &&
              ext_certs_make_serving(&ca1, dns, 1, 1, &sv1, err, sizeof err) == 0 &&
              ext_certs_make_serving(&ca2, dns, 1, 1, &sv2, err, sizeof err) == 0, "certs: %s", err);
    char f1[] = "/tmp/tessera-wh-ca1-XXXXXX", f2[] = "/tmp/tessera-wh-ca2-XXXXXX";
    int fd1 = mkstemp(f1), fd2 = mkstemp(f2);
    CHECK(fd1 >= 0 && fd2 >= 0);
    FILE *a = fdopen(fd1, "w"), *b = fdopen(fd2, "w");
    fputs(ca1.cert, a);
    fputs(ca2.cert, b);
    fclose(a);
    fclose(b);
    ext_webhook_config wc = cfg_with(EXT_DELIVERY_NONE);
    ext_http_config hc = {.conn_timeout_s = 2, .webhook = &wc, .webhook_only = true, .tls_cert_pem = sv1.cert,
                          .tls_key_pem = sv1.key};
    snprintf(hc.listen, sizeof hc.listen, "127.0.0.1:0");
    ext_http *h = ext_http_start(&hc, err, sizeof err);
    int port = ext_http_port(h);
    char url[160], resolve[160];
    snprintf(url, sizeof url, "https://tessera-extender.tessera.svc:%d/healthz", port);
    snprintf(resolve, sizeof resolve, "tessera-extender.tessera.svc:%d:127.0.0.1", port);
    long before = h ? tls_http_call(url, NULL, f1, resolve, NULL) : -1;
    ext_http_stop(h);
    snprintf(hc.listen, sizeof hc.listen, "127.0.0.1:%d", port);
    hc.tls_cert_pem = sv2.cert;
    hc.tls_key_pem = sv2.key;
    ext_http *h2 = port ? ext_http_start(&hc, err, sizeof err) : NULL;
    long new_ca = h2 ? tls_http_call(url, NULL, f2, resolve, NULL) : -1;
    long old_ca = h2 ? tls_http_call(url, NULL, f1, resolve, NULL) : -1;
    ext_http_stop(h2);
    unlink(f1);
    unlink(f2);
    ext_cert_pem_free(&ca1);
    ext_cert_pem_free(&ca2);
    ext_cert_pem_free(&sv1);
    ext_cert_pem_free(&sv2);
    CHECK_INT(before, 200);
    CHECK_MSG(h2 != NULL, "restart on port %d: %s", port, err);
    CHECK_INT(new_ca, 200);
    CHECK_INT(old_ca, 0);
}

/* ------------------------------------------------ accounting resources (README, Quotas) */

static const char *res_of(const cJSON *ctr, const char *part, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(ctr, "resources"), part), name);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The pod after the webhook's patch (caller frees; NULL when there is none), its first container in *c0. */
static cJSON *admitted(const ext_webhook_config *c, const char *pod_sq, const cJSON **c0) {
    cJSON *pod = admit(c, "u-quota", pod_sq);
    *c0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "spec"), "containers"), 0);
    return pod;
}

/* The values of the README's Quotas table, one row per request form, with the compiled-in
 * catalog (the largest GPU is a B200: 183359 MiB). */
static const struct {
    const char *anns, *res;
    const char *milli, *mem;
} quota_rows[] = {
    {"", "'nvidia.com/gpu':'2'", "2000", "366718"},
    {"'tessera.io/gpu-models':'A100-80GB'", "'nvidia.com/gpu':'1'", "1000", "81920"},
    {"'tessera.io/isolation':'timeslice'", "'nvidia.com/gpu':'1'", "500", "91679"},
    {"", "'nvidia.com/gpu.shared':'1'", "500", "91679"},
    {"", "'nvidia.com/mig-3g.40gb':'1'", "429", "40320"},
    {"'tessera.io/gpu-models':'NVIDIA-A100-SXM4-80GB'", "'nvidia.com/mig-3g.40gb':'1'", "429", "40192"},
    {"", "'nvidia.com/mig-1g.10gb':'2'", "286", "19968"},
    {"", "'nvidia.com/mig-1g.10gb.shared':'1'", "72", "4992"},
    {"", "'nvidia.com/gpumem':'20000'", "868", "20000"},
    {"", "'nvidia.com/gpumem':'20000','nvidia.com/gpu':'2'", "1736", "40000"},
    {"", "'nvidia.com/gpumem-percentage':'25'", "250", "45840"},
    {"", "'nvidia.com/gpucores':'30'", "300", "55008"},
    {"'tessera.io/gpu-fraction':'0.25'", "", "250", "45840"},
    {"'gpu-fraction':'0.25'", "", "250", "45840"},
    {"'gpu-memory':'16384'", "", "1000", "16384"},
    {"'gpu-memory':'16384','tessera.io/gpu-models':'H100-80GB'", "", "200", "16384"},
    {"'tessera.io/gpu-fraction':'0.25','tessera.io/gpu-models':'A100-80GB'", "", "250", "20480"},
    {"'tessera.io/gpu-fraction':'0.25','tessera.io/isolation':'timeslice'", "", "500", "91679"},
    {"'tessera.io/gpu-fraction':'0.25','tessera.io/isolation':'mig'", "", "1000", "183359"},
};

TEST(webhook_accounting_resources_for_every_request_form_and_idempotent) {
    ext_webhook_config c = cfg_with(EXT_DELIVERY_RESERVATION);
    for (size_t i = 0; i < sizeof quota_rows / sizeof quota_rows[0]; i++) {
        char pod_sq[1024];
        snprintf(pod_sq, sizeof pod_sq,
                 "{'metadata':{'name':'p','annotations':{%s}},'spec':{'schedulerName':'tessera-scheduler',"
                 "'containers':[{'name':'c','resources':{'limits':{%s}}},{'name':'side','image':'busybox'}]}}",
                 quota_rows[i].anns, quota_rows[i].res);
        const cJSON *c0;
        cJSON *pod = admitted(&c, pod_sq, &c0);
        CHECK_MSG(pod, "row %zu: no patched pod", i);
        const cJSON *c1 = c0->next;
        const char *got[4] = {res_of(c0, "requests", MODEL_CHARGE_MILLI), res_of(c0, "limits", MODEL_CHARGE_MILLI),
                              res_of(c0, "requests", MODEL_CHARGE_MEMORY), res_of(c0, "limits", MODEL_CHARGE_MEMORY)};
        bool ok = got[0] && got[1] && got[2] && got[3] && !strcmp(got[0], quota_rows[i].milli) &&
                  !strcmp(got[1], quota_rows[i].milli) && !strcmp(got[2], quota_rows[i].mem) &&
                  !strcmp(got[3], quota_rows[i].mem) && !cJSON_GetObjectItemCaseSensitive(c1, "resources");
        char *again = ok ? pod_text(pod) : NULL;
        cJSON_Delete(pod);
        CHECK_MSG(ok, "row %zu (%s %s): milli %s/%s, memory %s/%s; expected %s, %s", i, quota_rows[i].anns,
                  quota_rows[i].res, got[0] ? got[0] : "-", got[1] ? got[1] : "-", got[2] ? got[2] : "-",
                  got[3] ? got[3] : "-", quota_rows[i].milli, quota_rows[i].mem);
        /* the mutated pod (as the apiserver would re-invoke with it) gets no patch */
        char *body = review("u-quota", "CREATE", "Pod", again);
        free(again);
        int st;
        cJSON *rep = mutate(&c, body, &st, NULL);
        free(body);
        bool none = st == 200 && !cJSON_GetObjectItemCaseSensitive(resp_of(rep), "patch");
        cJSON_Delete(rep);
        CHECK_MSG(none, "row %zu: the mutated pod got another patch", i);
    }
}

TEST(webhook_accounting_replaces_a_smaller_declared_value) {
    ext_webhook_config c = cfg_with(EXT_DELIVERY_NONE);
    /* A pod that writes its own, smaller charge (to slip under its quota) gets the real one. */
    const char *pod_sq = "{'metadata':{'name':'p'},'spec':{'schedulerName':'tessera-scheduler','containers':[{'name':'c',"
                         "'resources':{'requests':{'tessera.io/gpu-milli':'1','tessera.io/gpu-memory-mib':'1'},"
                         "'limits':{'nvidia.com/gpu':'1','tessera.io/gpu-milli':'1','tessera.io/gpu-memory-mib':'1'}}}]}}";
    const cJSON *c0;
    cJSON *pod = admitted(&c, pod_sq, &c0);
    bool ok = pod && res_of(c0, "requests", MODEL_CHARGE_MILLI) && !strcmp(res_of(c0, "requests", MODEL_CHARGE_MILLI), "1000") &&
              !strcmp(res_of(c0, "limits", MODEL_CHARGE_MILLI), "1000") &&
              !strcmp(res_of(c0, "requests", MODEL_CHARGE_MEMORY), "183359") &&
              !strcmp(res_of(c0, "limits", "nvidia.com/gpu"), "1");
    cJSON_Delete(pod);
    CHECK_MSG(ok, "the declared charge was not replaced by the real one");
}

TEST(webhook_accounting_skips_claims_and_refuses_what_no_gpu_can_hold) {
    ext_webhook_config c = cfg_with(EXT_DELIVERY_NONE);
    /* A claim-only DRA pod gets the marker alone: its claim is not sized at admission. */
    const char *dra = "{'metadata':{'name':'p'},'spec':{'schedulerName':'tessera-scheduler',"
                      "'resourceClaims':[{'name':'gpu','resourceClaimTemplateName':'one-gpu'}],"
                      "'containers':[{'name':'c','resources':{'claims':[{'name':'gpu'}]}}]}}";
    const cJSON *c0;
    cJSON *pod = admitted(&c, dra, &c0);
    int st;
    bool ok = pod && marker(c0, "requests") && !res_of(c0, "requests", MODEL_CHARGE_MILLI);
    cJSON_Delete(pod);
    CHECK_MSG(ok, "claim-only pod: marker without accounting expected");
    /* A fraction that only MIG may serve but that no MIG profile of the named product holds. */
    const char *big = "{'metadata':{'name':'p','annotations':{'gpu-memory':'60000','tessera.io/isolation':'mig',"
                      "'tessera.io/gpu-models':'A100-SXM4-40GB'}},'spec':{'schedulerName':'tessera-scheduler',"
                      "'containers':[{'name':'c'}]}}";
    char *msg = denial(&c, big, &st);
    CHECK_INT(st, 200);
    CHECK_CONTAINS(msg, "fits no GPU of the catalog");
    free(msg);
}
