/* ext_helpers.h -- shared helpers for the extender tests (test_ext_*.c): clusters built
 * from the demo cluster's labelled nodes, Pod and ExtenderArgs bodies, and calling a verb
 * and parsing its reply. Static functions, so each test file stands alone.
 */
#ifndef TEST_EXT_HELPERS_H
#define TEST_EXT_HELPERS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>

#include "kube/log.h"
#include "extender/mirror/state.h"
#include "extender/verbs.h"
#include "harness.h"

/* Not every test file uses every helper. */
#define EXT_HELPER static __attribute__((unused))

/* Keep test output to the harness's lines; EXT_TEST_LOG=debug shows the extender's. */
__attribute__((constructor)) static void ext_test_quiet(void) {
    const char *l = getenv("EXT_TEST_LOG");
    int lv = l ? kube_log_parse_level(l) : -1;
    kube_log_set_level(lv >= 0 ? (kube_log_level)lv : KUBE_LOG_OFF);
}

/* The demo cluster (realistic GFD-labelled nodes), as a NodeList object. */
EXT_HELPER cJSON *demo_nodes(void) {
    char *txt = test_fixture("../../data/demo-cluster.json", NULL);
    cJSON *root = cJSON_Parse(txt);
    free(txt);
    return root;
}

/* A body or reply a real kube-scheduler exchanged (tests/fixtures/extender-samples/<mode>/<file>), parsed. */
EXT_HELPER cJSON *extender_sample(const char *mode, const char *file) {
    char rel[256];
    snprintf(rel, sizeof rel, "extender-samples/%s/%s", mode, file);
    char *txt = test_fixture(rel, NULL);
    cJSON *o = cJSON_Parse(txt);
    free(txt);
    return o;
}

/* The demo node called `name`, renamed to `as` (a copy the caller owns). */
EXT_HELPER cJSON *demo_node_as(const char *name, const char *as) {
    cJSON *root = demo_nodes(), *it, *out = NULL;
    cJSON_ArrayForEach(it, cJSON_GetObjectItem(root, "items")) {
        cJSON *meta = cJSON_GetObjectItem(it, "metadata");
        if (strcmp(cJSON_GetObjectItem(meta, "name")->valuestring, name) != 0) continue;
        out = cJSON_Duplicate(it, 1);
        cJSON *m2 = cJSON_GetObjectItem(out, "metadata");
        cJSON_ReplaceItemInObject(m2, "name", cJSON_CreateString(as));
        break;
    }
    cJSON_Delete(root);
    return out;
}

/* A NodeList of copies of demo node `name` called prefix-0 .. prefix-(n-1), as text. */
EXT_HELPER char *cluster_of(const char *name, const char *prefix, int n) {
    cJSON *list = cJSON_CreateObject();
    cJSON_AddStringToObject(list, "kind", "NodeList");
    cJSON *items = cJSON_AddArrayToObject(list, "items");
    for (int i = 0; i < n; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "%s-%d", prefix, i);
        cJSON_AddItemToArray(items, demo_node_as(name, nm));
    }
    char *s = cJSON_PrintUnformatted(list);
    cJSON_Delete(list);
    return s;
}

EXT_HELPER ext_state *standalone_state(const char *cluster_json) {
    ext_state_config cfg = {.standalone = true};
    ext_state *st = ext_state_new(&cfg);
    char err[256];
    if (ext_state_load_cluster(st, cluster_json, strlen(cluster_json), err, sizeof err) != 0) {
        fprintf(stderr, "cluster: %s\n", err);
        abort();
    }
    return st;
}

EXT_HELPER ext_state *demo_state(void) {
    cJSON *root = demo_nodes();
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    ext_state *st = standalone_state(s);
    free(s);
    return st;
}

/* A Pod as the scheduler's informer sends it, with the schedulerName of deploy's profile.
 * limits: the inside of a resources.limits object ("\"nvidia.com/gpu\":\"1\""), which
 * kube-scheduler only passes on if it names a managed resource (an annotation-only pod needs
 * the webhook's "tessera.io/share":"1"); annotations: inside of metadata.annotations. */
EXT_HELPER char *pod_json(const char *name, const char *uid, int priority, const char *limits, const char *annotations,
                      const char *node) {
    size_t cap = 2048 + strlen(limits) + (annotations ? strlen(annotations) : 0);
    char *s = malloc(cap);
    snprintf(s, cap,
             "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\",\"uid\":\"%s\",\"annotations\":{%s}},"
             "\"spec\":{\"containers\":[{\"name\":\"main\",\"image\":\"x\",\"resources\":{\"limits\":{%s},"
             "\"requests\":{%s}}}],\"priority\":%d%s%s%s,\"schedulerName\":\"tessera-scheduler\"},"
             "\"status\":{\"phase\":\"%s\"}}",
             name, uid, annotations ? annotations : "", limits, limits, priority, node ? ",\"nodeName\":\"" : "",
             node ? node : "", node ? "\"" : "", node ? "Running" : "Pending");
    return s;
}

/* ExtenderArgs in nodeCacheCapable mode. */
EXT_HELPER char *args_names(const char *pod, const char *const *names, int n) {
    size_t cap = strlen(pod) + 64;
    for (int i = 0; i < n; i++) cap += strlen(names[i]) + 4;
    char *s = malloc(cap);
    size_t off = (size_t)snprintf(s, cap, "{\"Pod\":%s,\"Nodes\":null,\"NodeNames\":[", pod);
    for (int i = 0; i < n; i++) off += (size_t)snprintf(s + off, cap - off, "%s\"%s\"", i ? "," : "", names[i]);
    snprintf(s + off, cap - off, "]}");
    return s;
}

typedef void (*verb_fn)(ext_verbs *, const char *, size_t, ext_reply *);

/* Call a verb; returns the parsed reply (caller deletes) and the status in *status. */
EXT_HELPER cJSON *call_verb(ext_verbs *v, verb_fn fn, const char *body, int *status) {
    ext_reply r = {0};
    fn(v, body, strlen(body), &r);
    if (status) *status = r.status;
    cJSON *o = r.body ? cJSON_Parse(r.body) : NULL;
    ext_reply_free(&r);
    return o;
}

/* Bind (the pod must have been seen by filter, or be in the cache); returns the bind
 * Error ("" on success) in err. */
EXT_HELPER void bind_pod(ext_verbs *v, const char *name, const char *uid, const char *node, char *err, size_t errlen) {
    char body[512];
    snprintf(body, sizeof body, "{\"PodName\":\"%s\",\"PodNamespace\":\"default\",\"PodUID\":\"%s\",\"Node\":\"%s\"}",
             name, uid, node);
    cJSON *r = call_verb(v, ext_verb_bind, body, NULL);
    const cJSON *e = cJSON_GetObjectItem(r, "Error");
    snprintf(err, errlen, "%s", cJSON_IsString(e) ? e->valuestring : "(no Error key)");
    cJSON_Delete(r);
}

/* Filter the pod over the named nodes (which also teaches the memo its request), then
 * bind it to node. */
EXT_HELPER void place_pod(ext_verbs *v, const char *pod, const char *name, const char *uid, const char *node, char *err,
                      size_t errlen) {
    const char *names[1] = {node};
    char *args = args_names(pod, names, 1);
    cJSON *r = call_verb(v, ext_verb_filter, args, NULL);
    free(args);
    /* kube-scheduler binds only a node the filter let through: otherwise err is the filter's reason */
    const cJSON *passed = cJSON_GetArrayItem(cJSON_GetObjectItem(r, "NodeNames"), 0);
    if (!cJSON_IsString(passed) || strcmp(passed->valuestring, node) != 0) {
        const cJSON *why = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "FailedNodes"), node);
        if (!why) why = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "FailedAndUnresolvableNodes"), node);
        const cJSON *e = cJSON_GetObjectItem(r, "Error");
        snprintf(err, errlen, "filter: %s", cJSON_IsString(why) ? why->valuestring
                                            : cJSON_IsString(e) && e->valuestring[0] ? e->valuestring : "node not passed");
        cJSON_Delete(r);
        return;
    }
    cJSON_Delete(r);
    bind_pod(v, name, uid, node, err, errlen);
}

EXT_HELPER bool json_has(const cJSON *obj, const char *key) { return cJSON_GetObjectItemCaseSensitive(obj, key) != NULL; }

/* Whether every node in the cache passes model_node_check. */
EXT_HELPER bool all_nodes_consistent(ext_state *st, char *why, size_t whylen) {
    bool ok = true;
    ext_state_lock(st);
    for (int i = 0; ok && i < ext_state_node_count(st); i++) {
        const ext_node *n = ext_state_node_at(st, i);
        if (n->m && !model_node_check(n->m, why, whylen)) ok = false;
    }
    ext_state_unlock(st);
    return ok;
}

#endif
