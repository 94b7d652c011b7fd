/* fuzz_targets.c -- the fuzz target bodies (see fuzz_targets.h). Compiled into the unit
 * tests (gcc, corpus replay) and into each libFuzzer binary (clang, build-fuzz/).
 *
 * Inputs are passed as the parsers receive them in production: functions that take a
 * length get an exact-size copy with no terminating NUL (so a read past len is an ASan
 * report, not luck), functions that take a C string get a NUL-terminated copy.
 */
#include "tests/fuzz/fuzz_targets.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>

#include "agent/holdings.h"
#include "agent/protowire.h"
#include "extender/base/annotation.h"
#include "extender/base64.h"
#include "extender/mirror/dra.h"
#include "extender/mirror/state.h"
#include "extender/verbs.h"
#include "extender/webhook.h"
#include "model/catalog.h"
#include "model/dra.h"
#include "model/fit.h"
#include "model/node.h"
#include "model/topo.h"
#include "model/quantity.h"
#include "model/request.h"
#include "policy/policy.h"
#include "reserve/device.h"
#include "sim/cluster.h"
#include "sim/openb.h"
#include "sim/trace.h"

/* the demo cluster, compiled in by the Makefile (build/gen/demo_cluster_data.c) */
extern const unsigned char sim_demo_cluster_json[];
extern const size_t sim_demo_cluster_json_len;

/* A broken promise: report it the way a sanitizer would, so libFuzzer saves the input. */
#define FUZZ_REQUIRE(cond, ...)                                                  \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "fuzz: invariant broken: %s: ", #cond);              \
            fprintf(stderr, __VA_ARGS__);                                        \
            fprintf(stderr, "\n");                                               \
            abort();                                                             \
        }                                                                        \
    } while (0)

static char *copy_exact(const uint8_t *data, size_t len) {
    char *p = malloc(len ? len : 1);
    if (!p) abort();
    if (len) memcpy(p, data, len);
    return p;
}

static char *copy_cstr(const uint8_t *data, size_t len) {
    char *p = malloc(len + 1);
    if (!p) abort();
    if (len) memcpy(p, data, len);
    p[len] = 0;
    return p;
}

/* ---- the extender's verbs on a standalone demo state ---- */

/* Pods every verb run starts with: two placed (the victims preempt can name, the GPUs bind
 * competes for), one only filtered (a pending pod bind can place). Names and UIDs are what
 * the bind corpus uses. */
#define POD_FMT                                                                                                   \
    "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\",\"uid\":\"%s\"},\"spec\":{\"priority\":%d,"        \
    "\"schedulerName\":\"tessera-scheduler\",\"containers\":[{\"name\":\"main\",\"image\":\"x\",\"resources\":{" \
    "\"limits\":{%s},\"requests\":{%s}}}]},\"status\":{\"phase\":\"Pending\"}}"

static void must_filter_bind(ext_verbs *v, const char *name, const char *uid, int prio, const char *res,
                             const char *node) {
    char pod[1024], body[2048];
    snprintf(pod, sizeof pod, POD_FMT, name, uid, prio, res, res);
    snprintf(body, sizeof body, "{\"Pod\":%s,\"Nodes\":null,\"NodeNames\":[\"%s\"]}", pod, node ? node : "gpu-a100-whole");
    ext_reply r = {0};
    ext_verb_filter(v, body, strlen(body), &r);
    FUZZ_REQUIRE(r.status == 200, "setup filter of %s: %d %s", name, r.status, r.body ? r.body : "");
    ext_reply_free(&r);
    if (!node) return;
    snprintf(body, sizeof body, "{\"PodName\":\"%s\",\"PodNamespace\":\"default\",\"PodUID\":\"%s\",\"Node\":\"%s\"}",
             name, uid, node);
    ext_verb_bind(v, body, strlen(body), &r);
    FUZZ_REQUIRE(r.status == 200 && r.body && strstr(r.body, "\"Error\":\"\""), "setup bind of %s: %s", name,
                 r.body ? r.body : "");
    ext_reply_free(&r);
}

static ext_state *verbs_setup(ext_verbs *v) {
    ext_state_config cfg = {.standalone = true};
    ext_state *st = ext_state_new(&cfg);
    char err[256];
    if (ext_state_load_cluster(st, (const char *)sim_demo_cluster_json, sim_demo_cluster_json_len, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz: demo cluster: %s\n", err);
        abort();
    }
    ext_verbs_init(v, st, policy_find("binpack"), NULL, NULL);
    must_filter_bind(v, "placed-whole", "uid-placed-whole", 0, "\"nvidia.com/gpu\":\"1\"", "gpu-a100-whole");
    must_filter_bind(v, "placed-mig", "uid-placed-mig", 0, "\"nvidia.com/mig-3g.20gb\":\"1\"", "gpu-a100-mig");
    must_filter_bind(v, "pending", "uid-pending", 1000, "\"nvidia.com/gpu\":\"2\"", NULL);
    return st;
}

/* After any verb: the reply is JSON (kube-scheduler decodes every reply) and no GPU of any
 * node is over-committed. */
static void verbs_check(ext_state *st, const ext_reply *r, const char *verb) {
    FUZZ_REQUIRE(r->status >= 200 && r->status < 600, "%s: status %d", verb, r->status);
    FUZZ_REQUIRE(r->body != NULL, "%s: no body", verb);
    cJSON *o = cJSON_ParseWithLength(r->body, r->len);
    FUZZ_REQUIRE(o != NULL, "%s: reply is not JSON: %.200s", verb, r->body);
    cJSON_Delete(o);
    char why[256] = "";
    ext_state_lock(st);
    for (int i = 0; i < ext_state_node_count(st); i++) {
        const ext_node *n = ext_state_node_at(st, i);
        FUZZ_REQUIRE(!n->m || model_node_check(n->m, why, sizeof why), "%s: node %s: %s", verb, n->name, why);
    }
    ext_state_unlock(st);
}

static void run_verb(const uint8_t *data, size_t len, void (*verb)(ext_verbs *, const char *, size_t, ext_reply *),
                     const char *name) {
    ext_verbs v;
    ext_state *st = verbs_setup(&v);
    char *body = copy_exact(data, len);
    ext_reply r = {0};
    verb(&v, body, len, &r);
    verbs_check(st, &r, name);
    ext_reply_free(&r);
    free(body);
    ext_state_free(st);
}

/* Filter, and two promises beyond the reply's shape: asking again gives the same answer
 * (the second is served from the answer cache), and in NodeNames mode a node filter passed
 * takes the pod when kube-scheduler binds it there. */
void fuzz_filter_one(const uint8_t *data, size_t len) {
    ext_verbs v;
    ext_state *st = verbs_setup(&v);
    char *body = copy_exact(data, len);
    ext_reply r1 = {0}, r2 = {0};
    ext_verb_filter(&v, body, len, &r1);
    verbs_check(st, &r1, "filter");
    ext_verb_filter(&v, body, len, &r2);
    verbs_check(st, &r2, "filter again");
    FUZZ_REQUIRE(r1.status == r2.status && r1.len == r2.len && !memcmp(r1.body, r2.body, r1.len),
                 "filter answers differently the second time:\n%.400s\n%.400s", r1.body, r2.body);
    cJSON *args = r1.status == 200 ? cJSON_ParseWithLength(body, len) : NULL;
    cJSON *reply = args ? cJSON_ParseWithLength(r1.body, r1.len) : NULL;
    const cJSON *pod = cJSON_GetObjectItemCaseSensitive(args, "Pod");
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
    const cJSON *uid = cJSON_GetObjectItemCaseSensitive(meta, "uid");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(meta, "name");
    const cJSON *ns = cJSON_GetObjectItemCaseSensitive(meta, "namespace");
    const cJSON *passed = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(reply, "NodeNames"), 0);
    model_request req;
    char err[256];
    if (cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(args, "NodeNames")) && cJSON_IsString(passed) &&
        cJSON_IsString(uid) && cJSON_IsString(name) && cJSON_IsString(ns) && uid->valuestring[0] &&
        strncmp(uid->valuestring, "uid-", 4) != 0 &&   /* not a pod of the setup */
        model_request_from_pod(pod, &req, err, sizeof err) == 0 && model_request_wants_gpu(&req)) {
        cJSON *b = cJSON_CreateObject();
        cJSON_AddStringToObject(b, "PodName", name->valuestring);
        cJSON_AddStringToObject(b, "PodNamespace", ns->valuestring);
        cJSON_AddStringToObject(b, "PodUID", uid->valuestring);
        cJSON_AddStringToObject(b, "Node", passed->valuestring);
        char *bb = cJSON_PrintUnformatted(b);
        ext_reply rb = {0};
        ext_verb_bind(&v, bb, strlen(bb), &rb);
        verbs_check(st, &rb, "bind after filter");
        FUZZ_REQUIRE(rb.status == 200 && strstr(rb.body, "\"Error\":\"\""),
                     "filter passed %s but bind refuses: %.300s", passed->valuestring, rb.body);
        ext_reply_free(&rb);
        free(bb);
        cJSON_Delete(b);
    }
    cJSON_Delete(reply);
    cJSON_Delete(args);
    ext_reply_free(&r1);
    ext_reply_free(&r2);
    free(body);
    ext_state_free(st);
}
/* Prioritize: a 200 is a bare array of {Host, Score} with Score in 0..10 (extender/README.md)
 * for hosts the request named. */
void fuzz_prioritize_one(const uint8_t *data, size_t len) {
    ext_verbs v;
    ext_state *st = verbs_setup(&v);
    char *body = copy_exact(data, len);
    ext_reply r = {0};
    ext_verb_prioritize(&v, body, len, &r);
    verbs_check(st, &r, "prioritize");
    if (r.status == 200) {
        cJSON *reply = cJSON_ParseWithLength(r.body, r.len);
        FUZZ_REQUIRE(cJSON_IsArray(reply), "prioritize: 200 without an array: %.200s", r.body);
        const cJSON *hp;
        cJSON_ArrayForEach(hp, reply) {
            const cJSON *host = cJSON_GetObjectItemCaseSensitive(hp, "Host");
            const cJSON *score = cJSON_GetObjectItemCaseSensitive(hp, "Score");
            FUZZ_REQUIRE(cJSON_IsString(host) && cJSON_IsNumber(score), "prioritize: entry without Host and Score");
            FUZZ_REQUIRE(score->valuedouble >= 0 && score->valuedouble <= 10 &&
                             score->valuedouble == (double)(int)score->valuedouble,
                         "prioritize: %s scored %g", host->valuestring, score->valuedouble);
            /* the host was in the request (as a name, or a Node's metadata.name); checked for
             * names the request cannot have spelt with JSON escapes */
            bool plain = strlen(host->valuestring) < 300;
            for (const char *c = host->valuestring; *c && plain; c++)
                plain = (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-' || *c == '.';
            char needle[320];
            snprintf(needle, sizeof needle, "\"%s\"", host->valuestring);
            FUZZ_REQUIRE(!plain || memmem(body, len, needle, strlen(needle)), "prioritize: host %s was not asked about",
                         host->valuestring);
        }
        cJSON_Delete(reply);
    }
    ext_reply_free(&r);
    free(body);
    ext_state_free(st);
}
void fuzz_bind_one(const uint8_t *data, size_t len) { run_verb(data, len, ext_verb_bind, "bind"); }
/* The victims kube-scheduler proposed for a node, from the request's map (either form;
 * every entry of that name, as a fuzzed body can repeat a key). The verb, like Go's decoder,
 * matches the ExtenderPreemptionArgs keys case-insensitively, so this does too. */
static int proposed_victims(const cJSON *args, const char *node, const char **uids, int max) {
    const cJSON *meta = cJSON_GetObjectItem(args, "NodeNameToMetaVictims");
    bool is_meta = cJSON_IsObject(meta);
    const cJSON *map = is_meta ? meta : cJSON_GetObjectItem(args, "NodeNameToVictims");
    const cJSON *ent, *emap = cJSON_IsObject(map) ? map : NULL;
    int n = 0;
    cJSON_ArrayForEach(ent, emap) {
        if (!ent->string || strcmp(ent->string, node) != 0) continue;
        const cJSON *pods = cJSON_GetObjectItem(ent, "Pods");
        const cJSON *pp, *plist = cJSON_IsArray(pods) ? pods : NULL;
        cJSON_ArrayForEach(pp, plist) {
            const cJSON *u = is_meta ? cJSON_GetObjectItem(pp, "UID")
                                     : cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pp, "metadata"), "uid");
            if (cJSON_IsString(u) && n < max) uids[n++] = u->valuestring;
        }
    }
    return n;
}

/* Preempt, and what its answer promises: every victim it names was proposed for that node,
 * and for a GPU pod, evicting them makes the pod fit the node. */
void fuzz_preempt_one(const uint8_t *data, size_t len) {
    ext_verbs v;
    ext_state *st = verbs_setup(&v);
    char *body = copy_exact(data, len);
    ext_reply r = {0};
    ext_verb_preempt(&v, body, len, &r);
    verbs_check(st, &r, "preempt");
    cJSON *args = r.status == 200 ? cJSON_ParseWithLength(body, len) : NULL;
    cJSON *reply = args ? cJSON_ParseWithLength(r.body, r.len) : NULL;
    model_request req;
    char err[256];
    bool gpu_pod = args && model_request_from_pod(cJSON_GetObjectItem(args, "Pod"), &req, err, sizeof err) == 0 &&
                   model_request_wants_gpu(&req);
    const cJSON *ent;
    cJSON_ArrayForEach(ent, cJSON_GetObjectItemCaseSensitive(reply, "NodeNameToMetaVictims")) {
        const char *proposed[64], *kept[64];
        int np = proposed_victims(args, ent->string, proposed, 64), nk = 0;
        const cJSON *pp;
        cJSON_ArrayForEach(pp, cJSON_GetObjectItemCaseSensitive(ent, "Pods")) {
            const cJSON *u = cJSON_GetObjectItemCaseSensitive(pp, "UID");
            FUZZ_REQUIRE(cJSON_IsString(u), "preempt: victim without a UID on %s", ent->string);
            bool found = false;
            for (int i = 0; i < np && !found; i++) found = !strcmp(proposed[i], u->valuestring);
            FUZZ_REQUIRE(found || np == 64, "preempt: victim %s on %s was not proposed", u->valuestring, ent->string);
            if (nk < 64) kept[nk++] = u->valuestring;
        }
        if (!gpu_pod || nk == 64) continue;
        ext_state_lock(st);
        const ext_node *en = ext_state_node(st, ent->string);
        if (en && en->m) {
            model_node *c = ext_state_node_without(st, en, kept, nk);
            char why[256] = "";
            FUZZ_REQUIRE(c && model_fit(c, &req, NULL, 0, why, sizeof why) > 0,
                         "preempt: evicting %d victim(s) on %s leaves the pod unplaceable: %s", nk, ent->string, why);
            model_node_free(c);
        }
        ext_state_unlock(st);
    }
    cJSON_Delete(reply);
    cJSON_Delete(args);
    ext_reply_free(&r);
    free(body);
    ext_state_free(st);
}

/* ---- the watch: Node and Pod events from the API server ---- */

/* No GPU of any node in st is over-committed (what and step say when, in the message). */
static void check_nodes(ext_state *st, const char *what, int step) {
    char why[256] = "";
    ext_state_lock(st);
    for (int n = 0; n < ext_state_node_count(st); n++) {
        const ext_node *en = ext_state_node_at(st, n);
        FUZZ_REQUIRE(!en->m || (en->m->ngpus >= 0 && en->m->ngpus <= MODEL_MAX_GPUS), "%s %d: node %s: ngpus %d",
                     what, step, en->name, en->m->ngpus);
        FUZZ_REQUIRE(!en->m || model_node_check(en->m, why, sizeof why), "%s %d: node %s: %s", what, step, en->name,
                     why);
    }
    ext_state_unlock(st);
}

/* A watch event's "type" as kube_client delivers it, or -1 for one it does not know. */
static int watch_event_type(const char *t) {
    return !strcmp(t, "ADDED")      ? (int)KUBE_ADDED
           : !strcmp(t, "MODIFIED") ? (int)KUBE_MODIFIED
           : !strcmp(t, "DELETED")  ? (int)KUBE_DELETED
           : !strcmp(t, "RELIST")   ? (int)KUBE_RELIST
           : !strcmp(t, "SYNCED")   ? (int)KUBE_SYNCED
                                    : -1;
}


/* A watch stream as the API server sends it, gathered into one JSON array of
 * {"type": "ADDED"|"MODIFIED"|"DELETED", "object": {...}} (the kind from object.kind), applied
 * in order to the demo state. After every event no GPU may be over-committed: a pod whose
 * annotation or request no longer fits is marked overcommitted and holds nothing. */
void fuzz_watch_one(const uint8_t *data, size_t len) {
    cJSON *events = cJSON_ParseWithLength((const char *)data, len);
    if (!cJSON_IsArray(events)) {
        cJSON_Delete(events);
        return;
    }
    ext_verbs v;
    ext_state *st = verbs_setup(&v);
    const cJSON *e;
    int i = 0;
    cJSON_ArrayForEach(e, events) {
        if (++i > 64) break;   /* a long stream teaches nothing a short one does not */
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(e, "type");
        const cJSON *obj = cJSON_GetObjectItemCaseSensitive(e, "object");
        const cJSON *kind = cJSON_GetObjectItemCaseSensitive(obj, "kind");
        if (!cJSON_IsString(type) || !cJSON_IsString(kind)) continue;
        int ev = watch_event_type(type->valuestring);
        if (ev < 0 || ev == KUBE_RELIST || ev == KUBE_SYNCED) continue;   /* this stream has no relists */
        kube_kind k = !strcmp(kind->valuestring, "Node") ? KUBE_NODE : KUBE_POD;
        ext_state_apply(st, k, (kube_event)ev, obj);
        check_nodes(st, "event", i);
    }
    ext_state_free(st);
    cJSON_Delete(events);
}

/* The node agent's tessera.io/holdings record (extender/mirror/holdings.h), as the annotation's text, on a node
 * of 3 A100s with UUIDs holding two whole-GPU pods bound by tessera (GPUs 0 and 1) and one placed by another
 * scheduler (derived): whatever the record says, no GPU is over-committed, twice in a row (the second read is
 * the same content: nothing new). */
void fuzz_holdings_one(const uint8_t *data, size_t len) {
    char *text = copy_cstr(data, len);
    ext_state_config cfg = {.standalone = false};
    ext_state *st = ext_state_new(&cfg);
    cJSON *node = cJSON_Parse(
        "{\"kind\":\"Node\",\"metadata\":{\"name\":\"h1\",\"labels\":{\"nvidia.com/gpu.product\":"
        "\"NVIDIA-A100-SXM4-80GB\",\"nvidia.com/gpu.count\":\"3\"},\"annotations\":{\"tessera.io/gpus\":"
        "\"[{\\\"uuid\\\":\\\"GPU-h-0\\\"},{\\\"uuid\\\":\\\"GPU-h-1\\\"},{\\\"uuid\\\":\\\"GPU-h-2\\\"}]\"}},"
        "\"status\":{\"allocatable\":{\"nvidia.com/gpu\":\"3\"}}}");
    FUZZ_REQUIRE(node != NULL, "the fixed node does not parse");
    ext_state_apply(st, KUBE_NODE, KUBE_RELIST, NULL);
    ext_state_apply(st, KUBE_NODE, KUBE_ADDED, node);
    ext_state_apply(st, KUBE_NODE, KUBE_SYNCED, NULL);
    ext_state_apply(st, KUBE_POD, KUBE_RELIST, NULL);
    static const char *const assignment[3] = {
        "\"annotations\":{\"tessera.io/assignment\":\"{\\\"version\\\":1,\\\"node\\\":\\\"h1\\\",\\\"grants\\\":[{"
        "\\\"gpu\\\":0,\\\"whole\\\":true,\\\"memoryMiB\\\":81920,\\\"computePermille\\\":1000}]}\"},",
        "\"annotations\":{\"tessera.io/assignment\":\"{\\\"version\\\":1,\\\"node\\\":\\\"h1\\\",\\\"grants\\\":[{"
        "\\\"gpu\\\":1,\\\"whole\\\":true,\\\"memoryMiB\\\":81920,\\\"computePermille\\\":1000}]}\"},",
        ""};   /* the third: placed by another scheduler, derived */
    for (int i = 0; i < 3; i++) {
        char pod[1024];
        snprintf(pod, sizeof pod,
                 "{\"metadata\":{%s\"name\":\"p%d\",\"namespace\":\"default\",\"uid\":\"uid-%d\"},\"spec\":{\"nodeName\":"
                 "\"h1\",\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]},"
                 "\"status\":{\"phase\":\"Running\"}}",
                 assignment[i], i, i);
        cJSON *p = cJSON_Parse(pod);
        FUZZ_REQUIRE(p != NULL, "pod %d does not parse", i);
        ext_state_apply(st, KUBE_POD, KUBE_ADDED, p);
        cJSON_Delete(p);
    }
    ext_state_apply(st, KUBE_POD, KUBE_SYNCED, NULL);
    cJSON *ann = cJSON_GetObjectItem(cJSON_GetObjectItem(node, "metadata"), "annotations");
    cJSON_AddStringToObject(ann, "tessera.io/holdings", text);
    for (int round = 0; round < 2; round++) {
        ext_state_apply(st, KUBE_NODE, KUBE_MODIFIED, node);
        check_nodes(st, "holdings", round);
    }
    ext_state_free(st);
    cJSON_Delete(node);
    free(text);
}

/* ---- model: pods, nodes, quantities ---- */

void fuzz_request_one(const uint8_t *data, size_t len) {
    char *json = copy_exact(data, len);
    model_request r;
    char err[256];
    int rc = model_request_from_pod_json(json, len, &r, err, sizeof err);
    if (rc == 0)
        FUZZ_REQUIRE(r.run_as_uid >= MODEL_UID_UNKNOWN && r.run_as_uid <= INT32_MAX, "uid %lld", (long long)r.run_as_uid);
    if (rc == 0 && r.kind != MODEL_REQ_NONE) {
        FUZZ_REQUIRE(r.count >= 1, "request kind %d with count %d", (int)r.kind, r.count);
        FUZZ_REQUIRE(r.memory_permille >= 0 && r.memory_permille <= 1000, "memory_permille %d", r.memory_permille);
        FUZZ_REQUIRE(r.compute_permille >= 0 && r.compute_permille <= 1000, "compute_permille %d", r.compute_permille);
        FUZZ_REQUIRE(r.memory_mib >= 0, "memory_mib %d", r.memory_mib);
        /* an MPS share is a fraction with the default isolation and one known uid (request.h) */
        FUZZ_REQUIRE(r.compute_sharing == MODEL_COMPUTE_TIMESLICE || r.compute_sharing == MODEL_COMPUTE_MPS,
                     "compute_sharing %d", r.compute_sharing);
        if (r.compute_sharing == MODEL_COMPUTE_MPS)
            FUZZ_REQUIRE(r.kind == MODEL_REQ_FRACTION && r.isolation == MODEL_ISO_DEFAULT && r.run_as_uid >= 0 &&
                         r.run_as_uid <= INT32_MAX, "MPS share kind %d isolation %d uid %lld", (int)r.kind,
                         (int)r.isolation, (long long)r.run_as_uid);
    }
    free(json);
}

void fuzz_node_one(const uint8_t *data, size_t len) {
    char *json = copy_exact(data, len);
    char err[256], why[256] = "";
    model_node *n = model_node_from_json_text(json, len, model_catalog_default(), err, sizeof err);
    if (n) {
        FUZZ_REQUIRE(n->ngpus >= 0 && n->ngpus <= MODEL_MAX_GPUS, "ngpus %d", n->ngpus);
        FUZZ_REQUIRE(model_node_check(n, why, sizeof why), "fresh node %s: %s", n->name, why);
        model_node *c = model_node_clone(n);
        FUZZ_REQUIRE(c != NULL, "clone failed");
        /* topology (model/topo.h): symmetric, copied with the node, and every set best_set
         * returns is ascending, of the size asked and as aligned as it says */
        bool all[MODEL_MAX_GPUS];
        for (int g = 0; g < MODEL_MAX_GPUS; g++) all[g] = g < n->ngpus;
        for (int a = 0; a < n->ngpus; a++)
            for (int b = 0; b < n->ngpus; b++) {
                FUZZ_REQUIRE(model_topo_link(n, a, b) == model_topo_link(n, b, a), "link %d-%d asymmetric", a, b);
                FUZZ_REQUIRE(model_topo_link(c, a, b) == model_topo_link(n, a, b), "clone lost link %d-%d", a, b);
            }
        for (int k = 1; k <= n->ngpus; k++) {
            int8_t set[MODEL_MAX_GPUS];
            int al = model_topo_best_set(n, all, k, set);
            FUZZ_REQUIRE(al >= 0 && al == (int)model_topo_align(n, set, k), "best_set k=%d: %d", k, al);
            for (int i = 1; i < k; i++) FUZZ_REQUIRE(set[i - 1] < set[i], "best_set k=%d not ascending", k);
        }
        model_node_free(c);
        model_node_free(n);
    }
    free(json);
}

void fuzz_quantity_one(const uint8_t *data, size_t len) {
    char *s = copy_cstr(data, len);
    char err[128];
    int64_t milli = 0, value = 0;
    int rm = model_quantity_parse_milli(s, &milli, err, sizeof err);
    int ri = model_quantity_parse_int(s, &value, err, sizeof err);
    if (ri == 0) {
        FUZZ_REQUIRE(value >= 0, "parse_int(\"%s\") = %lld", s, (long long)value);
        FUZZ_REQUIRE(rm == 0, "parse_int accepts \"%s\" but parse_milli does not", s);
        FUZZ_REQUIRE(milli == value * 1000, "\"%s\": milli %lld, int %lld", s, (long long)milli, (long long)value);
    }
    free(s);
}

/* ---- the assignment annotation, against each demo node ---- */

/* The demo nodes, built once and never changed (each call clones before assigning). */
static model_node *ann_nodes[16];
static int ann_nnodes = -1;

static void ann_nodes_init(void) {
    if (ann_nnodes >= 0) return;
    ann_nnodes = 0;
    cJSON *root = cJSON_ParseWithLength((const char *)sim_demo_cluster_json, sim_demo_cluster_json_len);
    const cJSON *it;
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(root, "items")) {
        char err[256];
        model_node *n = model_node_from_json(it, model_catalog_default(), err, sizeof err);
        if (n && ann_nnodes < (int)(sizeof ann_nodes / sizeof ann_nodes[0])) ann_nodes[ann_nnodes++] = n;
        else model_node_free(n);
    }
    cJSON_Delete(root);
    FUZZ_REQUIRE(ann_nnodes > 0, "no demo nodes");
}

void fuzz_annotation_one(const uint8_t *data, size_t len) {
    ann_nodes_init();
    char *text = copy_cstr(data, len);
    for (int i = 0; i < ann_nnodes; i++) {
        model_assignment a;
        char err[256], why[256] = "";
        if (ext_ann_decode(ann_nodes[i], text, &a, err, sizeof err) != 0) continue;
        /* What the cache does next with a decoded annotation: model_assign re-checks it. It
         * either refuses or leaves the node consistent; it never over-commits. */
        model_node *c = model_node_clone(ann_nodes[i]);
        if (model_assign(c, "fuzz-uid", &a, err, sizeof err) == 0) {
            FUZZ_REQUIRE(model_node_check(c, why, sizeof why), "node %s after assign: %s", c->name, why);
            /* and encoding it again gives an annotation that decodes to the same GPUs */
            char *again = ext_ann_encode(c, &a, "binpack");
            model_assignment b;
            FUZZ_REQUIRE(again && ext_ann_decode(ann_nodes[i], again, &b, err, sizeof err) == 0,
                         "re-encoded annotation does not decode: %s", err);
            free(again);
        }
        model_node_free(c);
    }
    free(text);
}

/* ---- the simulator's inputs ---- */

void fuzz_trace_one(const uint8_t *data, size_t len) {
    char *json = copy_exact(data, len);
    char err[256];
    sim_trace *t = sim_trace_from_json(json, len, err, sizeof err);
    if (t) {
        /* what `tessera-sim convert` writes must read back */
        char *buf = NULL;
        size_t blen = 0;
        FILE *f = open_memstream(&buf, &blen);
        FUZZ_REQUIRE(f != NULL, "open_memstream");
        int rc = sim_trace_write(t, f);
        fclose(f);
        if (rc == 0) {
            sim_trace *t2 = sim_trace_from_json(buf, blen, err, sizeof err);
            FUZZ_REQUIRE(t2 != NULL, "written trace does not read back: %s", err);
            sim_trace_free(t2);
        }
        free(buf);
        sim_trace_free(t);
    }
    free(json);
}

void fuzz_openb_one(const uint8_t *data, size_t len) {
    char *text = copy_exact(data, len);
    char err[256];
    sim_openb_node *nodes = NULL;
    sim_openb_pod *pods = NULL;
    int nn = 0, np = 0;
    if (sim_openb_parse_nodes(text, len, &nodes, &nn, err, sizeof err) == 0) free(nodes);
    if (sim_openb_parse_pods(text, len, &pods, &np, err, sizeof err) == 0) {
        for (int i = 0; i < np; i++) {
            model_request r;
            sim_openb_request(&pods[i], &r);
        }
        free(pods);
    }
    free(text);
}

void fuzz_cluster_one(const uint8_t *data, size_t len) {
    char *json = copy_exact(data, len);
    char err[256];
    sim_cluster *c = sim_cluster_from_json(json, len, NULL, err, sizeof err);
    if (c) {
        /* Building every node is what replay and plan do first; a file can ask for more
         * nodes than a fuzz run should build, so only modest clusters are built. */
        if (sim_cluster_nodes(c) <= 256) {
            model_node **nodes = NULL;
            int *group_of = NULL, n = 0;
            if (sim_cluster_build(c, NULL, &nodes, &group_of, &n, err, sizeof err) == 0)
                sim_cluster_free_nodes(nodes, group_of, n);
        }
        char *out = sim_cluster_to_json(c);
        FUZZ_REQUIRE(out != NULL, "sim_cluster_to_json failed");
        sim_cluster *c2 = sim_cluster_from_json(out, strlen(out), NULL, err, sizeof err);
        FUZZ_REQUIRE(c2 != NULL, "written cluster does not read back: %s", err);
        sim_cluster_free(c2);
        free(out);
        sim_cluster_free(c);
    }
    free(json);
}

/* ---- the admission webhook, under both delivery modes ---- */

/* RFC 6902 "add" (the only operation the webhook emits) of value at the JSON Pointer path
 * (RFC 6901) in doc, as the apiserver applies it: the parent must exist; in an object the
 * member is added or replaced; in an array the index must be 0..size or "-". 0, or -1 when
 * the apiserver would reject the patch (and with it the pod). */
static int patch_add(cJSON *doc, const char *path, const cJSON *value) {
    if (path[0] != '/') return -1;
    cJSON *parent = doc;
    const char *p = path + 1;
    for (;;) {
        char tok[256];
        size_t n = 0;
        for (; *p && *p != '/'; p++) {
            if (n + 1 >= sizeof tok) return -1;
            if (*p == '~' && (p[1] == '0' || p[1] == '1')) tok[n++] = p[1] == '0' ? '~' : '/', p++;
            else tok[n++] = *p;
        }
        tok[n] = 0;
        bool last = *p == 0;
        if (!last) p++;
        if (cJSON_IsObject(parent)) {
            cJSON *child = cJSON_GetObjectItemCaseSensitive(parent, tok);
            if (last) {
                cJSON *v = cJSON_Duplicate(value, 1);
                if (child) cJSON_ReplaceItemViaPointer(parent, child, v);
                else cJSON_AddItemToObject(parent, tok, v);
                return 0;
            }
            if (!child) return -1;
            parent = child;
        } else if (cJSON_IsArray(parent)) {
            int size = cJSON_GetArraySize(parent);
            if (last && !strcmp(tok, "-")) {
                cJSON_AddItemToArray(parent, cJSON_Duplicate(value, 1));
                return 0;
            }
            char *endp;
            long i = strtol(tok, &endp, 10);
            if (!tok[0] || *endp || i < 0 || i > size || (!last && i == size)) return -1;
            if (last) {
                cJSON *v = cJSON_Duplicate(value, 1);
                if (i == size) cJSON_AddItemToArray(parent, v);
                else cJSON_InsertItemInArray(parent, (int)i, v);
                return 0;
            }
            parent = cJSON_GetArrayItem(parent, (int)i);
        } else {
            return -1;
        }
    }
}

/* The patch of an allowed reply, decoded; NULL when the reply carries none. */
static cJSON *reply_patch(const cJSON *reply) {
    const cJSON *resp = cJSON_GetObjectItemCaseSensitive(reply, "response");
    const cJSON *patch = cJSON_GetObjectItemCaseSensitive(resp, "patch");
    if (!patch) return NULL;
    FUZZ_REQUIRE(cJSON_IsString(patch), "webhook: patch is not a string");
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(resp, "patchType");
    FUZZ_REQUIRE(cJSON_IsString(pt) && !strcmp(pt->valuestring, "JSONPatch"), "webhook: patch without patchType JSONPatch");
    size_t n = 0;
    char *raw = ext_base64_decode(patch->valuestring, strlen(patch->valuestring), &n);
    FUZZ_REQUIRE(raw != NULL, "webhook: patch is not base64");
    cJSON *ops = cJSON_ParseWithLength(raw, n);
    free(raw);
    FUZZ_REQUIRE(cJSON_IsArray(ops) && cJSON_GetArraySize(ops) > 0, "webhook: patch is not a non-empty JSON array");
    return ops;
}

static cJSON *webhook_call(const ext_webhook_config *cfg, const char *body, size_t len, int *status) {
    ext_reply r = {0};
    ext_webhook_mutate(cfg, body, len, &r);
    FUZZ_REQUIRE(r.body != NULL, "webhook: no body (status %d)", r.status);
    cJSON *o = cJSON_ParseWithLength(r.body, r.len);
    FUZZ_REQUIRE(o != NULL, "webhook reply is not JSON: %.200s", r.body);
    *status = r.status;
    ext_reply_free(&r);
    return o;
}

/* The reply is JSON; a patch applies to the pod as the apiserver would apply it, and a
 * review of the patched pod (the same review, replayed) asks for nothing more (webhook.h). */
void fuzz_webhook_one(const uint8_t *data, size_t len) {
    char *body = copy_exact(data, len);
    for (int mode = 0; mode < 2; mode++) {
        ext_webhook_config cfg;
        ext_webhook_config_defaults(&cfg);
        if (mode == 1) {
            cfg.delivery = EXT_DELIVERY_RESERVATION;
            snprintf(cfg.runtime_class, sizeof cfg.runtime_class, "nvidia");
        }
        int status;
        cJSON *reply = webhook_call(&cfg, body, len, &status);
        cJSON *ops = status == 200 ? reply_patch(reply) : NULL;
        if (ops) {
            cJSON *review = cJSON_ParseWithLength(body, len);
            cJSON *pod = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(review, "request"), "object");
            const cJSON *op;
            cJSON_ArrayForEach(op, ops) {
                const cJSON *kind = cJSON_GetObjectItemCaseSensitive(op, "op");
                const cJSON *path = cJSON_GetObjectItemCaseSensitive(op, "path");
                const cJSON *value = cJSON_GetObjectItemCaseSensitive(op, "value");
                FUZZ_REQUIRE(cJSON_IsString(kind) && !strcmp(kind->valuestring, "add") && cJSON_IsString(path) && value,
                             "webhook: patch operation is not {op: add, path, value}");
                FUZZ_REQUIRE(patch_add(pod, path->valuestring, value) == 0, "webhook: patch does not apply at %s",
                             path->valuestring);
            }
            char *again = cJSON_PrintUnformatted(review);
            int status2;
            cJSON *reply2 = webhook_call(&cfg, again, strlen(again), &status2);
            cJSON *ops2 = reply_patch(reply2);
            if (ops2) {
                char *txt = cJSON_PrintUnformatted(ops2);
                FUZZ_REQUIRE(ops2 == NULL, "webhook: the patched pod is patched again: %.300s", txt);
            }
            cJSON_Delete(reply2);
            free(again);
            cJSON_Delete(review);
            cJSON_Delete(ops);
        }
        cJSON_Delete(reply);
    }
    free(body);
}

/* ---- tessera-reserve: NVIDIA_VISIBLE_DEVICES against a fixed container view ---- */

/* A read-only tree in the repository (relative to the repository root, where both
 * `make fuzz` and `make test` run): two GPUs in proc, their device nodes, and a
 * volume-mounts directory. */
#define RESERVE_ROOT "tests/fuzz/reserve-root"

void fuzz_reserve_visible_one(const uint8_t *data, size_t len) {
    char *visible = copy_cstr(data, len);
    reserve_env env = {
        .visible = visible,
        .devices_dir = RESERVE_ROOT "/devices",
        .proc_root = RESERVE_ROOT "/proc",
        .dev_root = RESERVE_ROOT "/dev",
    };
    char out[512], why[512];
    int m = reserve_find_devices(&env, out, sizeof out, why, sizeof why);
    if (m != RESERVE_FAILED) {
        FUZZ_REQUIRE(out[0] != 0, "method %s but no device", reserve_method_name(m));
        FUZZ_REQUIRE(!strstr(out, "::"), "replica suffix left in \"%s\"", out);
    }
    free(visible);
}

/* ---- Dynamic Resource Allocation: ResourceSlices, ResourceClaims, DeviceClasses ---- */

/* The DRA fixtures (tests/fixtures/dra, relative to the repository root where `make test` and
 * `make fuzz` run), parsed once and never changed: every call builds its own nodes and state. */
#define DRA_FX "tests/fixtures/dra/"

typedef struct dra_fx {
    const char *file;
    kube_kind kind;
    cJSON *obj;
} dra_fx;

/* Applied in this order to a fresh state: the driver's classes, three nodes (dra-a and dra-b
 * with DRA only, "both" where the device plugin hands out the GPUs DRA publishes too) and
 * their slices. */
static dra_fx dra_fxs[] = {
    {"deviceclass-gpu.json", KUBE_DEVICECLASS, NULL}, {"deviceclass-mig.json", KUBE_DEVICECLASS, NULL},
    {"node-dra-a.json", KUBE_NODE, NULL},             {"node-dra-b.json", KUBE_NODE, NULL},
    {"node-both.json", KUBE_NODE, NULL},              {"slice-dra-a.json", KUBE_RESOURCESLICE, NULL},
    {"slice-dra-b-mig.json", KUBE_RESOURCESLICE, NULL}, {"slice-both.json", KUBE_RESOURCESLICE, NULL},
};
#define DRA_NFX ((int)(sizeof dra_fxs / sizeof dra_fxs[0]))

/* A device-plugin pod on "both" holding one of its GPUs (guessed from its request, as the cache
 * places a bound pod without an assignment annotation), so DRA holdings meet device-plugin ones. */
static const char dra_dp_pod[] =
    "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"dp-pod\",\"namespace\":\"default\",\"uid\":\"uid-dp-pod\"},"
    "\"spec\":{\"nodeName\":\"both\",\"schedulerName\":\"tessera-scheduler\",\"containers\":[{\"name\":\"main\","
    "\"image\":\"x\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]},\"status\":{\"phase\":\"Running\"}}";

/* Node models built from the Node fixtures alone (no DRA yet), for the model-level targets. */
static model_node *dra_base[3];

static cJSON *dra_load(const char *file) {
    char path[256];
    snprintf(path, sizeof path, DRA_FX "%s", file);
    FILE *f = fopen(path, "rb");
    FUZZ_REQUIRE(f != NULL, "cannot open %s (run from the repository root)", path);
    char buf[16384];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    cJSON *o = cJSON_ParseWithLength(buf, n);
    FUZZ_REQUIRE(o != NULL, "%s is not JSON", path);
    return o;
}

static void dra_init(void) {
    if (dra_fxs[0].obj) return;
    for (int i = 0; i < DRA_NFX; i++) dra_fxs[i].obj = dra_load(dra_fxs[i].file);
    int nb = 0;
    for (int i = 0; i < DRA_NFX; i++) {
        if (dra_fxs[i].kind != KUBE_NODE) continue;
        char err[256];
        dra_base[nb] = model_node_from_json(dra_fxs[i].obj, model_catalog_default(), err, sizeof err);
        FUZZ_REQUIRE(dra_base[nb] != NULL, "%s: %s", dra_fxs[i].file, err);
        nb++;
    }
}

static const cJSON *dra_class(void *user, const char *name) {
    (void)user;
    for (int i = 0; i < DRA_NFX; i++) {
        const cJSON *md = cJSON_GetObjectItemCaseSensitive(dra_fxs[i].obj, "metadata");
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(md, "name");
        if (dra_fxs[i].kind == KUBE_DEVICECLASS && cJSON_IsString(nm) && !strcmp(nm->valuestring, name))
            return dra_fxs[i].obj;
    }
    return NULL;
}

/* What fit is handed must be a request it can judge: a judged claim asks for >= 1 device. */
static void dra_check_request(const model_request *r, const char *what) {
    if (r->kind == MODEL_REQ_NONE) return;
    FUZZ_REQUIRE(r->count >= 1 && r->count <= MODEL_MAX_GPUS * 8, "%s: request kind %d with count %d", what,
                 (int)r->kind, r->count);
    FUZZ_REQUIRE(r->memory_permille >= 0 && r->memory_permille <= 1000, "%s: memory_permille %d", what,
                 r->memory_permille);
    FUZZ_REQUIRE(r->compute_permille >= 0 && r->compute_permille <= 1000, "%s: compute_permille %d", what,
                 r->compute_permille);
    FUZZ_REQUIRE(r->memory_mib >= 0, "%s: memory_mib %d", what, r->memory_mib);
}

/* A standalone state with the DRA fixtures applied and the device-plugin pod placed on "both". */
static ext_state *dra_state(void) {
    dra_init();
    ext_state_config cfg = {.standalone = true};
    ext_state *st = ext_state_new(&cfg);
    FUZZ_REQUIRE(st != NULL, "ext_state_new");
    for (int i = 0; i < DRA_NFX; i++) ext_state_apply(st, dra_fxs[i].kind, KUBE_ADDED, dra_fxs[i].obj);
    cJSON *pod = cJSON_Parse(dra_dp_pod);
    ext_state_apply(st, KUBE_POD, KUBE_ADDED, pod);
    cJSON_Delete(pod);
    ext_state_lock(st);
    const ext_node *both = ext_state_node(st, "both");
    FUZZ_REQUIRE(both && both->m && both->m->has_dra, "setup: node both has no DRA view");
    bool held = false;
    for (int i = 0; i < both->m->nallocs; i++) held |= !strcmp(both->m->allocs[i].uid, "uid-dp-pod");
    FUZZ_REQUIRE(held, "setup: the device-plugin pod holds nothing on both");
    ext_state_unlock(st);
    return st;
}

/* A ResourceSlice, as a node's kubelet plugin publishes it: read it, merge its devices into
 * each fixture node (DRA only, and "both" where the device plugin hands the GPUs out too), then
 * hold each device it publishes, one claim per device, as the cache would. The merged node is
 * consistent and clones; a hold either is refused or leaves the node consistent. */
void fuzz_dra_slice_one(const uint8_t *data, size_t len) {
    dra_init();
    cJSON *o = cJSON_ParseWithLength((const char *)data, len);
    if (!o) return;
    model_dra_slice s;
    char err[256], why[256] = "";
    if (model_dra_slice_parse(o, &s, err, sizeof err) == 0) {
        FUZZ_REQUIRE(s.ndev >= 0 && (s.ndev == 0 || s.dev), "slice: ndev %d, dev %p", s.ndev, (void *)s.dev);
        for (int b = 0; b < 3; b++) {
            model_node *m = model_node_clone(dra_base[b]);
            FUZZ_REQUIRE(m != NULL, "clone failed");
            model_node_add_dra(m, s.dev, s.ndev, model_catalog_default());
            FUZZ_REQUIRE(m->ngpus >= 0 && m->ngpus <= MODEL_MAX_GPUS, "%s: ngpus %d", m->name, m->ngpus);
            FUZZ_REQUIRE(model_node_check(m, why, sizeof why), "%s after the slice: %s", m->name, why);
            model_node *c = model_node_clone(m);
            FUZZ_REQUIRE(c != NULL, "clone of the merged node failed");
            model_node_free(c);
            for (int i = 0; i < s.ndev && i < 64; i++) {
                model_assignment a;
                memset(&a, 0, sizeof a);
                if (model_dra_grant(m, &s.dev[i], &a.grant[0], err, sizeof err) != 0) continue;
                a.ngrants = 1;
                char uid[32];
                snprintf(uid, sizeof uid, "claim:%d", i);
                model_assign(m, uid, &a, err, sizeof err);
                FUZZ_REQUIRE(model_node_check(m, why, sizeof why), "%s after holding %s: %s", m->name, s.dev[i].name,
                             why);
            }
            model_node_free(m);
        }
    }
    model_dra_slice_clear(&s);
    cJSON_Delete(o);
}

/* A ResourceClaim: its spec turned into a request (with the driver's DeviceClasses), directly
 * and through a pod that names it; then the claim, and a second claim with the same allocation,
 * added to the cache where "both" already has a device-plugin pod. No GPU is over-committed
 * after each step, and deleting both claims leaves no claim holding anything. */
void fuzz_dra_claim_one(const uint8_t *data, size_t len) {
    cJSON *claim = cJSON_ParseWithLength((const char *)data, len);
    if (!cJSON_IsObject(claim)) {
        cJSON_Delete(claim);
        return;
    }
    ext_state *st = dra_state();
    char why[256];
    model_request r;
    memset(&r, 0, sizeof r);
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(claim, "spec");
    if (model_dra_request(spec, dra_class, NULL, &r, why, sizeof why) == MODEL_DRA_JUDGED) {
        dra_check_request(&r, "claim spec");
        for (int b = 0; b < 3; b++) model_dra_could_fit(dra_base[b], &r, why, sizeof why);
    }
    model_dra_result res[MODEL_DRA_MAX_RESULTS];
    int nres = model_dra_claim_results(claim, res, MODEL_DRA_MAX_RESULTS);
    FUZZ_REQUIRE(nres >= -1 && nres <= MODEL_DRA_MAX_RESULTS, "claim results %d", nres);

    ext_state_apply(st, KUBE_RESOURCECLAIM, KUBE_ADDED, claim);
    check_nodes(st, "claim added", 0);

    /* a pod naming the claim, as ext_dra_pod_request sees it in filter */
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(claim, "metadata");
    const cJSON *ns = cJSON_GetObjectItemCaseSensitive(md, "namespace");
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(md, "name");
    cJSON *pod = cJSON_CreateObject();
    cJSON *pmd = cJSON_AddObjectToObject(pod, "metadata");
    cJSON_AddStringToObject(pmd, "name", "claim-pod");
    cJSON_AddStringToObject(pmd, "namespace", cJSON_IsString(ns) ? ns->valuestring : "default");
    cJSON_AddStringToObject(pmd, "uid", "uid-claim-pod");
    cJSON *rcs = cJSON_AddArrayToObject(cJSON_AddObjectToObject(pod, "spec"), "resourceClaims");
    cJSON *rc = cJSON_CreateObject();
    cJSON_AddStringToObject(rc, "name", "gpu");
    cJSON_AddStringToObject(rc, "resourceClaimName", cJSON_IsString(nm) ? nm->valuestring : "");
    cJSON_AddItemToArray(rcs, rc);
    ext_state_lock(st);
    memset(&r, 0, sizeof r);
    if (ext_dra_pod_request(ext_state_dra(st), pod, &r, why, sizeof why, NULL, 0) == MODEL_DRA_JUDGED)
        dra_check_request(&r, "pod's claim");
    ext_dra_note_pod(ext_state_dra(st), pod);
    char *alloc = NULL, miss[256];
    int rec = ext_dra_bind_record(ext_state_dra(st), cJSON_IsString(ns) ? ns->valuestring : "default", "uid-claim-pod",
                                  false, &alloc, miss, sizeof miss);
    FUZZ_REQUIRE(rec != 1 || alloc != NULL, "a complete record without text");
    FUZZ_REQUIRE(rec == 1 || alloc == NULL, "an incomplete record with text");
    free(alloc);
    cJSON *dbg = ext_dra_debug(ext_state_dra(st));
    FUZZ_REQUIRE(dbg != NULL, "ext_dra_debug returned NULL");
    cJSON_Delete(dbg);
    ext_state_unlock(st);
    cJSON_Delete(pod);

    /* the same allocation claimed a second time (another claim): never held twice */
    cJSON *twin = cJSON_Duplicate(claim, 1);
    cJSON *tmd = cJSON_GetObjectItemCaseSensitive(twin, "metadata");
    if (cJSON_IsObject(tmd)) {
        cJSON_DeleteItemFromObjectCaseSensitive(tmd, "name");
        cJSON_DeleteItemFromObjectCaseSensitive(tmd, "uid");
        cJSON_AddStringToObject(tmd, "name", "fuzz-twin");
        cJSON_AddStringToObject(tmd, "uid", "uid-fuzz-twin");
        ext_state_apply(st, KUBE_RESOURCECLAIM, KUBE_ADDED, twin);
        check_nodes(st, "twin claim added", 1);
        ext_state_apply(st, KUBE_RESOURCECLAIM, KUBE_DELETED, twin);
        check_nodes(st, "twin claim deleted", 2);
    }
    cJSON_Delete(twin);
    ext_state_apply(st, KUBE_RESOURCECLAIM, KUBE_DELETED, claim);
    check_nodes(st, "claim deleted", 3);
    ext_state_lock(st);
    for (int n = 0; n < ext_state_node_count(st); n++) {
        const ext_node *en = ext_state_node_at(st, n);
        for (int i = 0; en->m && i < en->m->nallocs; i++)
            FUZZ_REQUIRE(strncmp(en->m->allocs[i].uid, "claim:", 6) != 0, "node %s: %s still holds after deletion",
                         en->name, en->m->allocs[i].uid);
    }
    ext_state_unlock(st);
    ext_state_free(st);
    cJSON_Delete(claim);
}

/* A watch stream of every kind the extender follows with --dra: Node, Pod, ResourceSlice,
 * ResourceClaim, DeviceClass (from object.kind), as [{"type": ..., "object": {...}}, ...], types
 * ADDED, MODIFIED, DELETED and also RELIST / SYNCED (a relist drops what it did not mention),
 * applied to the DRA fixture state. After every event no GPU is over-committed. */
void fuzz_dra_watch_one(const uint8_t *data, size_t len) {
    cJSON *events = cJSON_ParseWithLength((const char *)data, len);
    if (!cJSON_IsArray(events)) {
        cJSON_Delete(events);
        return;
    }
    ext_state *st = dra_state();
    const cJSON *e;
    int i = 0;
    cJSON_ArrayForEach(e, events) {
        if (++i > 64) break;
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(e, "type");
        const cJSON *obj = cJSON_GetObjectItemCaseSensitive(e, "object");
        const cJSON *kind = cJSON_GetObjectItemCaseSensitive(obj, "kind");
        if (!cJSON_IsString(type)) continue;
        int t = watch_event_type(type->valuestring);
        if (t < 0 || !cJSON_IsString(kind)) continue;
        kube_event ev = (kube_event)t;
        const char *k = kind->valuestring;
        kube_kind kk = !strcmp(k, "Node")            ? KUBE_NODE
                           : !strcmp(k, "Pod")           ? KUBE_POD
                           : !strcmp(k, "ResourceSlice") ? KUBE_RESOURCESLICE
                           : !strcmp(k, "ResourceClaim") ? KUBE_RESOURCECLAIM
                           : !strcmp(k, "DeviceClass")   ? KUBE_DEVICECLASS
                                                         : KUBE_NKINDS;
        if (kk == KUBE_NKINDS) continue;
        /* RELIST and SYNCED carry no object, as kube_client delivers them */
        ext_state_apply(st, kk, ev, ev == KUBE_RELIST || ev == KUBE_SYNCED ? NULL : obj);
        check_nodes(st, "event", i);
    }
    ext_state_lock(st);
    cJSON *dbg = ext_dra_debug(ext_state_dra(st));
    FUZZ_REQUIRE(dbg != NULL, "ext_dra_debug returned NULL");
    cJSON_Delete(dbg);
    ext_state_unlock(st);
    ext_state_free(st);
    cJSON_Delete(events);
}

/* ---- the kubelet's Pod Resources replies (agent/protowire.c) ---- */

/* Both decoders on the same bytes. What decodes re-encodes to bytes that decode to the same encoding (nothing the
 * decoder keeps is lost or invented), and its holdings record and allocatable list are JSON. */
static void podres_roundtrip_list(const agent_pr_list *l) {
    agent_pw_buf b1 = {0}, b2 = {0};
    agent_pr_list l2;
    char err[256];
    FUZZ_REQUIRE(agent_pw_encode_list(l, &b1) == 0, "encode failed");
    FUZZ_REQUIRE(agent_pw_decode_list(b1.p, b1.n, &l2, err, sizeof err) == 0, "re-encoded list refused: %s", err);
    FUZZ_REQUIRE(agent_pw_encode_list(&l2, &b2) == 0, "encode failed");
    FUZZ_REQUIRE(b1.n == b2.n && (!b1.n || !memcmp(b1.p, b2.p, b1.n)), "round trip changed %zu bytes to %zu",
                 b1.n, b2.n);
    agent_pr_list_free(&l2);
    agent_pw_buf_free(&b1);
    agent_pw_buf_free(&b2);
}

void fuzz_podresources_one(const uint8_t *data, size_t len) {
    uint8_t *buf = (uint8_t *)copy_exact(data, len);
    char err[256];
    agent_pr_list l;
    if (agent_pw_decode_list(buf, len, &l, err, sizeof err) == 0) {
        podres_roundtrip_list(&l);
        char *json = agent_holdings_from_list(&l);
        cJSON *doc = json ? cJSON_Parse(json) : NULL;
        FUZZ_REQUIRE(doc != NULL, "the holdings record is not JSON: %s", json ? json : "(null)");
        FUZZ_REQUIRE(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(doc, "pods")), "no pods object");
        cJSON_Delete(doc);
        free(json);
        agent_pr_list_free(&l);
    } else {
        FUZZ_REQUIRE(err[0] && !l.pods && !l.npods, "refused without an error, or with pods left");
    }
    agent_pr_allocatable a;
    if (agent_pw_decode_allocatable(buf, len, &a, err, sizeof err) == 0) {
        char *json = agent_allocatable_from_reply(&a);
        cJSON *doc = json ? cJSON_Parse(json) : NULL;
        FUZZ_REQUIRE(cJSON_IsObject(doc), "the allocatable list is not a JSON object: %s", json ? json : "(null)");
        cJSON_Delete(doc);
        free(json);
        agent_pr_allocatable_free(&a);
    } else {
        FUZZ_REQUIRE(err[0] && !a.devices && !a.ndevices, "refused without an error, or with devices left");
    }
    free(buf);
}

const fuzz_target fuzz_targets[] = {
    {"filter", fuzz_filter_one},
    {"prioritize", fuzz_prioritize_one},
    {"bind", fuzz_bind_one},
    {"preempt", fuzz_preempt_one},
    {"watch", fuzz_watch_one},
    {"request", fuzz_request_one},
    {"node", fuzz_node_one},
    {"annotation", fuzz_annotation_one},
    {"quantity", fuzz_quantity_one},
    {"trace", fuzz_trace_one},
    {"openb", fuzz_openb_one},
    {"cluster", fuzz_cluster_one},
    {"webhook", fuzz_webhook_one},
    {"reserve_visible", fuzz_reserve_visible_one},
    {"dra_slice", fuzz_dra_slice_one},
    {"dra_claim", fuzz_dra_claim_one},
    {"dra_watch", fuzz_dra_watch_one},
    {"podresources", fuzz_podresources_one},
    {"holdings", fuzz_holdings_one},
    {NULL, NULL},
};
