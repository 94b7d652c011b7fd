/* test_ext_holdings.c -- the cache and the node agent's tessera.io/holdings record (mirror/holdings.h), fed
 * as the watch feeds them: the kubelet's word moves the model (swaps included), a word that would
 * over-commit is refused, each disagreement is logged and counted once however many watch events repeat
 * it, a malformed record is ignored (once), entries for unknown pods and reservation pods follow the rules
 * written in holdings.h, and a record that arrives before the pods' list waits for it. The valid records are the
 * node agent's own (agent_holdings_from_list on what the kubelet's Pod Resources List says), not hand-written.
 */
#include <stdlib.h>
#include <string.h>

#include "ext_helpers.h"
#include "log_capture.h"
#include "agent/holdings.h"
#include "agent/protowire.h"
#include "extender/mirror/holdings.h"
#include "tests/support/fake_podresources.h"

#define UUID0 "GPU-11111111-0000-0000-0000-000000000000"
#define UUID1 "GPU-11111111-0000-0000-0000-000000000001"
#define UUID2 "GPU-11111111-0000-0000-0000-000000000002"

/* A 3 x A100 node n1 whose GPUs carry UUIDs; holdings (may be NULL) is the record's JSON text. */
static cJSON *hnode(const char *holdings) {
    cJSON *n = cJSON_Parse(
        "{\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\",\"labels\":{\"nvidia.com/gpu.product\":\"NVIDIA-A100-SXM4-80GB\","
        "\"nvidia.com/gpu.count\":\"3\",\"nvidia.com/gpu.memory\":\"81920\"},\"annotations\":{}},"
        "\"status\":{\"allocatable\":{\"nvidia.com/gpu\":\"3\"}}}");
    cJSON *ann = cJSON_GetObjectItem(cJSON_GetObjectItem(n, "metadata"), "annotations");
    cJSON_AddStringToObject(ann, "tessera.io/gpus",
                            "[{\"index\":0,\"uuid\":\"" UUID0 "\"},{\"index\":1,\"uuid\":\"" UUID1 "\"},"
                            "{\"index\":2,\"uuid\":\"" UUID2 "\"}]");
    if (holdings) cJSON_AddStringToObject(ann, EXT_HOLDINGS_ANN, holdings);
    return n;
}

static void node_ev(ext_state *st, kube_event e, const char *holdings) {
    cJSON *n = hnode(holdings);
    ext_state_on_event(st, KUBE_NODE, e, n);
    cJSON_Delete(n);
}

static void raw_ev(ext_state *st, kube_kind k, kube_event e, const char *json) {
    cJSON *o = json ? cJSON_Parse(json) : NULL;
    ext_state_on_event(st, k, e, o);
    cJSON_Delete(o);
}

/* A whole-GPU pod bound to n1 by tessera (its assignment annotation names gpu). */
static void pod_ev(ext_state *st, kube_event e, const char *name, const char *uid, int gpu) {
    char ann[512];
    snprintf(ann, sizeof ann,
             "\"tessera.io/assignment\":\"{\\\"version\\\":1,\\\"node\\\":\\\"n1\\\",\\\"grants\\\":[{\\\"gpu\\\":%d,"
             "\\\"whole\\\":true,\\\"memoryMiB\\\":81920,\\\"computePermille\\\":1000}]}\"",
             gpu);
    char *p = pod_json(name, uid, 0, "\"nvidia.com/gpu\":\"1\"", ann, "n1");
    raw_ev(st, KUBE_POD, e, p);
    free(p);
}

static ext_state *synced_state(const char *holdings) {
    ext_state_config cfg = {.standalone = false};
    ext_state *st = ext_state_new(&cfg);
    raw_ev(st, KUBE_NODE, KUBE_RELIST, NULL);
    node_ev(st, KUBE_ADDED, holdings);
    raw_ev(st, KUBE_NODE, KUBE_SYNCED, NULL);
    raw_ev(st, KUBE_POD, KUBE_RELIST, NULL);
    raw_ev(st, KUBE_POD, KUBE_SYNCED, NULL);
    return st;
}

static int gpu_of(ext_state *st, const char *uid) {
    ext_state_lock(st);
    const ext_pod *p = ext_state_pod(st, uid);
    int g = p && p->holds && p->a.ngrants == 1 ? p->a.grant[0].gpu : -1;
    ext_state_unlock(st);
    return g;
}

static ext_holdings_stats hstats(ext_state *st) {
    ext_state_lock(st);
    ext_holdings_stats s = *ext_state_holdings_stats(st);
    ext_state_unlock(st);
    return s;
}

/* The node's holdings section of /debug/state (caller deletes). */
static cJSON *hdebug(ext_state *st, int *standing) {
    ext_state_lock(st);
    const ext_node *n = ext_state_node(st, "n1");
    cJSON *d = n && n->holdings ? ext_holdings_debug(n->holdings, ext_now_ms()) : NULL;
    *standing = n ? ext_holdings_disagreements(n->holdings) : -1;
    ext_state_unlock(st);
    return d;
}

/* The record the node agent writes when the kubelet's List says what spec says (fake_podresources.h's text form:
 * "<ns>/<pod> <container> <resource> <id>[,<id>...]" per line). Static: valid until the next call. */
static const char *agent_rec(const char *spec) {
    static char buf[4096];
    agent_pr_list l;
    char err[256];
    buf[0] = 0;
    if (fake_pr_parse_pods(spec, &l, err, sizeof err) != 0) return buf;
    char *j = agent_holdings_from_list(&l);
    agent_pr_list_free(&l);
    snprintf(buf, sizeof buf, "%s", j ? j : "");
    free(j);
    return buf;
}

/* Listed b first, as a kubelet may: the agent sorts. */
#define SWAPPED agent_rec("default/b app nvidia.com/gpu " UUID0 "\ndefault/a app nvidia.com/gpu " UUID1 "\n")

TEST(ext_holdings_swap_is_applied_and_reported_once) {
    logcap_start(KUBE_LOG_INFO);
    ext_state *st = synced_state(NULL);
    pod_ev(st, KUBE_ADDED, "a", "uid-a", 0);
    pod_ev(st, KUBE_ADDED, "b", "uid-b", 1);
    CHECK_INT(gpu_of(st, "uid-a"), 0);
    CHECK_INT(gpu_of(st, "uid-b"), 1);
    node_ev(st, KUBE_MODIFIED, SWAPPED);
    CHECK_INT(gpu_of(st, "uid-a"), 1);
    CHECK_INT(gpu_of(st, "uid-b"), 0);
    /* more watch events: the same Node again, pods modified, a relabel that rebuilds the model */
    for (int i = 0; i < 3; i++) node_ev(st, KUBE_MODIFIED, SWAPPED);
    pod_ev(st, KUBE_MODIFIED, "a", "uid-a", 0);
    CHECK_INT(gpu_of(st, "uid-a"), 1);
    CHECK_INT(gpu_of(st, "uid-b"), 0);
    CHECK_INT(logcap_count("event=holdings-mismatch", "pod=default/a", "action=applied"), 1);
    CHECK_INT(logcap_count("event=holdings-mismatch", "pod=default/b", "action=applied"), 1);
    ext_holdings_stats s = hstats(st);
    CHECK_INT(s.mismatches[EXT_HOLD_APPLIED], 2);
    CHECK_INT(s.mismatches[EXT_HOLD_REFUSED], 0);
    int standing;
    cJSON *d = hdebug(st, &standing);
    CHECK(d);
    CHECK_INT(standing, 0);   /* applied: nothing stands */
    CHECK_INT(cJSON_GetObjectItem(d, "podsMapped")->valueint, 2);
    const cJSON *arr = cJSON_GetObjectItem(d, "disagreements");
    CHECK_INT(cJSON_GetArraySize(arr), 2);
    const cJSON *x = cJSON_GetArrayItem(arr, 0);
    CHECK_STR(cJSON_GetObjectItem(x, "pod")->valuestring, "default/a");
    CHECK_STR(cJSON_GetObjectItem(x, "model")->valuestring, "GPU 0 whole");
    CHECK_STR(cJSON_GetObjectItem(x, "kubelet")->valuestring, "GPU 1 whole");
    CHECK(cJSON_IsTrue(cJSON_GetObjectItem(x, "applied")));
    cJSON_Delete(d);
    char why[256];
    CHECK_MSG(all_nodes_consistent(st, why, sizeof why), "%s", why);
    ext_state_free(st);
    logcap_stop();
}

TEST(ext_holdings_overcommitting_word_is_refused_until_the_gpu_frees) {
    logcap_start(KUBE_LOG_INFO);
    ext_state *st = synced_state(NULL);
    pod_ev(st, KUBE_ADDED, "a", "uid-a", 0);
    pod_ev(st, KUBE_ADDED, "b", "uid-b", 1);
    pod_ev(st, KUBE_ADDED, "c", "uid-c", 2);
    /* the kubelet says b holds GPU 2, which c holds in the model (c's own entry lags) */
    node_ev(st, KUBE_MODIFIED, agent_rec("default/b app nvidia.com/gpu " UUID2 "\n"));
    node_ev(st, KUBE_MODIFIED, agent_rec("default/b app nvidia.com/gpu " UUID2 "\n"));
    CHECK_INT(gpu_of(st, "uid-b"), 1);
    CHECK_INT(gpu_of(st, "uid-c"), 2);
    CHECK_INT(hstats(st).mismatches[EXT_HOLD_REFUSED], 1);
    CHECK_INT(logcap_count("event=holdings-mismatch", "pod=default/b", "action=kept-model"), 1);
    int standing;
    cJSON *d = hdebug(st, &standing);
    CHECK_INT(standing, 1);
    const cJSON *x = cJSON_GetArrayItem(cJSON_GetObjectItem(d, "disagreements"), 0);
    CHECK(x && cJSON_IsFalse(cJSON_GetObjectItem(x, "applied")));
    CHECK_MSG(strstr(cJSON_GetObjectItem(x, "why")->valuestring, "cannot be applied"), "%s",
              cJSON_GetObjectItem(x, "why")->valuestring);
    cJSON_Delete(d);
    /* c goes: GPU 2 is free, and the kubelet's word applies now */
    char *c = pod_json("c", "uid-c", 0, "\"nvidia.com/gpu\":\"1\"", NULL, "n1");
    raw_ev(st, KUBE_POD, KUBE_DELETED, c);
    free(c);
    CHECK_INT(gpu_of(st, "uid-b"), 2);
    CHECK_INT(hstats(st).mismatches[EXT_HOLD_APPLIED], 1);
    d = hdebug(st, &standing);
    CHECK_INT(standing, 0);
    cJSON_Delete(d);
    char why[256];
    CHECK_MSG(all_nodes_consistent(st, why, sizeof why), "%s", why);
    ext_state_free(st);
    logcap_stop();
}

TEST(ext_holdings_malformed_record_is_ignored_once_per_content) {
    logcap_start(KUBE_LOG_INFO);
    ext_state *st = synced_state(NULL);
    pod_ev(st, KUBE_ADDED, "a", "uid-a", 0);
    const char *bad[] = {
        "not json", "{\"v\":2,\"pods\":{}}", "{\"v\":1}", "{\"v\":1,\"pods\":{},\"extra\":1}",
        "{\"v\":1,\"pods\":{\"noslash\":{\"nvidia.com/gpu\":[\"x\"]}}}",
        "{\"v\":1,\"pods\":{\"default/a\":{\"example.com/gpu\":[\"x\"]}}}",
        "{\"v\":1,\"pods\":{\"default/a\":{\"nvidia.com/gpu\":[1]}}}",
        "{\"v\":1,\"pods\":{\"default/a\":{\"nvidia.com/gpu\":[]}}}",
        "{\"v\":1,\"pods\":{\"default/a\":{}}}",
        "{\"v\":1,\"pods\":{\"default/a\":{\"nvidia.com/gpu\":[\"" UUID1 "\",\"" UUID1 "\"]}}}",
    };
    int nbad = (int)(sizeof bad / sizeof bad[0]);
    for (int i = 0; i < nbad; i++) {
        node_ev(st, KUBE_MODIFIED, bad[i]);
        node_ev(st, KUBE_MODIFIED, bad[i]);   /* the same content again: not said again */
    }
    CHECK_INT(logcap_count("event=holdings-malformed", "action=ignored", NULL), nbad);
    CHECK_INT(hstats(st).malformed, nbad);
    CHECK_INT(gpu_of(st, "uid-a"), 0);
    int standing;
    cJSON *d = hdebug(st, &standing);
    CHECK(d && cJSON_IsString(cJSON_GetObjectItem(d, "malformed")));
    CHECK_MSG(strstr(cJSON_GetObjectItem(d, "malformed")->valuestring, "twice"), "%s",
              cJSON_GetObjectItem(d, "malformed")->valuestring);
    cJSON_Delete(d);
    /* a valid record after them is used */
    node_ev(st, KUBE_MODIFIED, agent_rec("default/a app nvidia.com/gpu " UUID2 "\n"));
    CHECK_INT(gpu_of(st, "uid-a"), 2);
    ext_state_free(st);
    logcap_stop();
}

TEST(ext_holdings_unknown_pods_unmapped_ids_and_lag) {
    logcap_start(KUBE_LOG_INFO);
    ext_state *st = synced_state(NULL);
    pod_ev(st, KUBE_ADDED, "a", "uid-a", 0);
    pod_ev(st, KUBE_ADDED, "b", "uid-b", 1);   /* bound, but not in the record yet: no finding */
    char rec[1024];
    snprintf(rec, sizeof rec, "%s", agent_rec("other/ghost app nvidia.com/gpu " UUID2 "\n"
                                              "default/a app nvidia.com/mig-1g.10gb MIG-aaaa\n"));
    node_ev(st, KUBE_MODIFIED, rec);
    node_ev(st, KUBE_MODIFIED, rec);
    ext_holdings_stats s = hstats(st);
    CHECK_INT(s.ignored[EXT_HOLD_IGN_UNMAPPED], 1);
    CHECK_INT(s.ignored[EXT_HOLD_IGN_UNKNOWN_POD], 1);
    CHECK_INT(s.mismatches[EXT_HOLD_APPLIED] + s.mismatches[EXT_HOLD_REFUSED], 0);
    CHECK_INT(gpu_of(st, "uid-a"), 0);
    CHECK_INT(gpu_of(st, "uid-b"), 1);
    int standing;
    cJSON *d = hdebug(st, &standing);
    CHECK_INT(standing, 0);
    CHECK_INT(cJSON_GetArraySize(cJSON_GetObjectItem(d, "disagreements")), 2);
    cJSON_Delete(d);
    ext_state_free(st);
    logcap_stop();
}

TEST(ext_holdings_record_before_the_pod_list_waits_for_it) {
    logcap_start(KUBE_LOG_INFO);
    ext_state_config cfg = {.standalone = false};
    ext_state *st = ext_state_new(&cfg);
    raw_ev(st, KUBE_NODE, KUBE_RELIST, NULL);
    node_ev(st, KUBE_ADDED, SWAPPED);
    raw_ev(st, KUBE_NODE, KUBE_SYNCED, NULL);
    raw_ev(st, KUBE_POD, KUBE_RELIST, NULL);
    pod_ev(st, KUBE_ADDED, "a", "uid-a", 0);   /* a restart: both annotations say the bind's GPUs */
    pod_ev(st, KUBE_ADDED, "b", "uid-b", 1);
    raw_ev(st, KUBE_POD, KUBE_SYNCED, NULL);
    CHECK_INT(gpu_of(st, "uid-a"), 1);
    CHECK_INT(gpu_of(st, "uid-b"), 0);
    CHECK_INT(hstats(st).ignored[EXT_HOLD_IGN_UNKNOWN_POD], 0);   /* no entry judged before its pod was listed */
    ext_state_free(st);
    logcap_stop();
}

TEST(ext_holdings_reservation_pods_compare_the_published_uuid) {
    logcap_start(KUBE_LOG_INFO);
    ext_state *st = synced_state(NULL);
    const char *rsv = "{\"metadata\":{\"name\":\"tessera-rsv-n1-g0-0\",\"namespace\":\"tessera\",\"uid\":\"uid-r\","
                      "\"labels\":{\"tessera.io/reservation\":\"true\"},\"annotations\":{\"tessera.io/reservation-gpu\":\"0\","
                      "\"tessera.io/gpu-uuid\":\"%s\"}},\"spec\":{\"nodeName\":\"n1\",\"containers\":[{\"name\":\"reserve\","
                      "\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]},\"status\":{\"phase\":\"Running\"}}";
    char buf[1024];
    snprintf(buf, sizeof buf, rsv, "");   /* not published yet: lag, nothing said */
    raw_ev(st, KUBE_POD, KUBE_ADDED, buf);
    char rec[1024];
    snprintf(rec, sizeof rec, "%s", agent_rec("tessera/tessera-rsv-n1-g0-0 reserve nvidia.com/gpu " UUID2 "\n"));
    node_ev(st, KUBE_MODIFIED, rec);
    ext_holdings_stats s = hstats(st);
    CHECK_INT(s.mismatches[EXT_HOLD_RESERVATION] + s.ignored[EXT_HOLD_IGN_UNKNOWN_POD], 0);
    snprintf(buf, sizeof buf, rsv, UUID2);   /* published what the kubelet says: agreement */
    raw_ev(st, KUBE_POD, KUBE_MODIFIED, buf);
    CHECK_INT(hstats(st).mismatches[EXT_HOLD_RESERVATION], 0);
    snprintf(buf, sizeof buf, rsv, UUID1);   /* published another: reported, not applied */
    raw_ev(st, KUBE_POD, KUBE_MODIFIED, buf);
    node_ev(st, KUBE_MODIFIED, rec);
    CHECK_INT(hstats(st).mismatches[EXT_HOLD_RESERVATION], 1);
    CHECK_INT(logcap_count("event=holdings-mismatch", "pod=tessera/tessera-rsv-n1-g0-0", "action=kept-model"), 1);
    int standing;
    cJSON *d = hdebug(st, &standing);
    CHECK_INT(standing, 1);
    cJSON_Delete(d);
    ext_state_free(st);
    logcap_stop();
}

/* A pod relist that no longer names a pod frees its GPU at the relist's end (the sweep), with no event of its own:
 * a move the kubelet's word asked for, refused while that pod held the GPU, is applied then. */
TEST(ext_holdings_refused_word_applies_after_a_relist_sweeps_the_holder) {
    logcap_start(KUBE_LOG_INFO);
    ext_state *st = synced_state(NULL);
    pod_ev(st, KUBE_ADDED, "a", "uid-a", 0);
    pod_ev(st, KUBE_ADDED, "b", "uid-b", 1);
    pod_ev(st, KUBE_ADDED, "c", "uid-c", 2);
    node_ev(st, KUBE_MODIFIED, agent_rec("default/b app nvidia.com/gpu " UUID2 "\n"));
    CHECK_INT(gpu_of(st, "uid-b"), 1);
    CHECK_INT(hstats(st).mismatches[EXT_HOLD_REFUSED], 1);
    raw_ev(st, KUBE_POD, KUBE_RELIST, NULL);   /* c was deleted while the watch was down */
    pod_ev(st, KUBE_ADDED, "a", "uid-a", 0);
    pod_ev(st, KUBE_ADDED, "b", "uid-b", 1);
    raw_ev(st, KUBE_POD, KUBE_SYNCED, NULL);
    CHECK_INT(gpu_of(st, "uid-c"), -1);
    CHECK_INT(gpu_of(st, "uid-b"), 2);
    CHECK_INT(hstats(st).mismatches[EXT_HOLD_APPLIED], 1);
    char why[256];
    CHECK_MSG(all_nodes_consistent(st, why, sizeof why), "%s", why);
    ext_state_free(st);
    logcap_stop();
}
