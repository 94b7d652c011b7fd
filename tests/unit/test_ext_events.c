/* test_ext_events.c -- the core/v1 Events tessera posts about its binds (events.h), end to end on
 * loopback: the real API client against the fake API server, the verbs' bind wired to an Events
 * queue as main.c wires it, and the Events as the fake server stored them. Also: a failing or stalled events endpoint never slows or fails a bind, and a full queue
 * drops and counts.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../support/fake_apiserver.h"
#include "ext_helpers.h"
#include "ext_proc.h"
#include "extender/base/events.h"
#include "kube/client.h"

typedef struct ev_run {
    fake_api *api;
    ext_state *st;
    kube_client *k;
    ext_events *ev;
    ext_verbs v;
    bool ok;
} ev_run;

static bool ev_ready(ev_run *r) { return WAIT_FOR(ext_state_ready(r->st)); }

/* A fake API server with node n1 (the demo's whole A100s) and pending GPU pods
 * called names[i] with uid "uid-<name>", an extender cache synced from it, and an Events queue. */
static void ev_start(ev_run *r, const char *const *names, int n, int queue_max, int post_timeout_ms) {
    memset(r, 0, sizeof *r);
    char err[256], url[128];
    r->api = fake_api_start(0, err, sizeof err);
    if (!r->api) return;
    fake_api_url(r->api, url, sizeof url);
    cJSON *node = demo_node_as("gpu-a100-whole", "n1");
    char *nj = cJSON_PrintUnformatted(node);
    cJSON_Delete(node);
    fake_api_put(r->api, "nodes", nj);
    free(nj);
    for (int i = 0; i < n; i++) {
        char uid[128];
        snprintf(uid, sizeof uid, "uid-%s", names[i]);
        char *p = pod_json(names[i], uid, 0, "\"nvidia.com/gpumem\":\"8000\"", NULL, NULL);
        fake_api_put(r->api, "pods", p);
        free(p);
    }
    ext_state_config sc = {.standalone = false};
    r->st = ext_state_new(&sc);
    kube_config kc;
    kube_config_defaults(&kc);
    snprintf(kc.api_url, sizeof kc.api_url, "%s", url);
    r->k = kube_new(&kc, err, sizeof err);
    if (!r->k || kube_start(r->k, ext_state_on_event, r->st, err, sizeof err) != 0 || !ev_ready(r)) return;
    ext_events_config ec;
    ext_events_config_defaults(&ec);
    ec.queue_max = queue_max;
    ec.post_timeout_ms = post_timeout_ms;
    ec.drain_ms = TEST_PATIENCE_MS;   /* what is queued at stop is posted, however slow the machine */
    snprintf(ec.instance, sizeof ec.instance, "tessera-test-0");
    r->ev = ext_events_start(r->k, &ec, err, sizeof err);
    ext_verbs_init(&r->v, r->st, NULL, kube_bind_fn, r->k);
    r->v.events = r->ev;   /* as main.c wires it: the verbs' bind emits the Events */
    r->ok = r->ev != NULL;
}

static void ev_stop_events(ev_run *r) {
    ext_events_stop(r->ev);
    r->v.events = NULL;
    r->ev = NULL;
}

static void ev_stop(ev_run *r) {
    ev_stop_events(r);
    kube_free(r->k);
    ext_state_free(r->st);
    fake_api_free(r->api);
}

/* Filter (so the extender knows the pod's request) and bind pod name to n1; the bind's wall time. */
static int64_t ev_place(ev_run *r, const char *name, char *err, size_t errlen) {
    char uid[128];
    snprintf(uid, sizeof uid, "uid-%s", name);
    char *p = pod_json(name, uid, 0, "\"nvidia.com/gpumem\":\"8000\"", NULL, NULL);
    const char *names[] = {"n1"};
    char *args = args_names(p, names, 1);
    cJSON_Delete(call_verb(&r->v, ext_verb_filter, args, NULL));
    free(args);
    free(p);
    int64_t t0 = ext_now_ms();
    bind_pod(&r->v, name, uid, "n1", err, errlen);
    return ext_now_ms() - t0;
}

static bool wait_events(fake_api *api, int n) { return WAIT_FOR(fake_api_event_count(api) >= n); }

/* Wait until the process-wide counters reach at least the given values. */
static bool wait_stats(uint64_t posted, uint64_t failed, uint64_t dropped) {
    ext_events_stats s;
    return WAIT_FOR((ext_events_get_stats(&s), s.posted >= posted && s.failed >= failed && s.dropped >= dropped));
}

/* The i-th stored Event (caller deletes). */
static cJSON *event_at(fake_api *api, int i) {
    char *all = fake_api_events(api);
    cJSON *arr = cJSON_Parse(all);
    free(all);
    cJSON *e = cJSON_DetachItemFromArray(arr, i);
    cJSON_Delete(arr);
    return e;
}

static const char *jstr(const cJSON *o, const char *a, const char *b) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, a);
    if (b) v = cJSON_GetObjectItemCaseSensitive(v, b);
    return cJSON_IsString(v) ? v->valuestring : "";
}

TEST(ext_events_bind_ok_posts_one_normal_assigned_event) {
    ev_run r;
    const char *names[] = {"e1"};
    ev_start(&r, names, 1, 1024, TEST_PATIENCE_MS);
    char err[512] = "?";
    if (r.ok) ev_place(&r, "e1", err, sizeof err);
    bool got = r.ok && wait_events(r.api, 1);
    ev_stop_events(&r);   /* drains: nothing else may arrive after this */
    int n = fake_api_event_count(r.api);
    cJSON *e = event_at(r.api, 0);
    char msg[1100], name[300], first[64], inst[160], ns[64];
    snprintf(msg, sizeof msg, "%s", jstr(e, "message", NULL));
    snprintf(name, sizeof name, "%s", jstr(e, "metadata", "name"));
    snprintf(first, sizeof first, "%s", jstr(e, "firstTimestamp", NULL));
    snprintf(inst, sizeof inst, "%s", jstr(e, "reportingInstance", NULL));
    snprintf(ns, sizeof ns, "%s", jstr(e, "metadata", "namespace"));
    bool fields = !strcmp(jstr(e, "type", NULL), "Normal") && !strcmp(jstr(e, "reason", NULL), "TesseraAssigned") &&
                  !strcmp(jstr(e, "involvedObject", "uid"), "uid-e1") && !strcmp(jstr(e, "involvedObject", "kind"), "Pod") &&
                  !strcmp(jstr(e, "involvedObject", "name"), "e1") &&
                  !strcmp(jstr(e, "involvedObject", "namespace"), "default") &&
                  !strcmp(jstr(e, "involvedObject", "apiVersion"), "v1") &&
                  !strcmp(jstr(e, "source", "component"), "tessera-extender") &&
                  !strcmp(jstr(e, "reportingComponent", NULL), "tessera-extender") &&
                  !strcmp(jstr(e, "action", NULL), "Binding") && !strcmp(first, jstr(e, "lastTimestamp", NULL)) &&
                  cJSON_GetObjectItemCaseSensitive(e, "count") &&
                  cJSON_GetObjectItemCaseSensitive(e, "count")->valueint == 1;
    cJSON_Delete(e);
    ev_stop(&r);
    CHECK(r.ok);
    CHECK_STR(err, "");
    CHECK(got);
    CHECK_INT(n, 1);
    CHECK(fields);
    CHECK_STR(ns, "default");
    CHECK_STR(inst, "tessera-test-0");
    CHECK(!strncmp(name, "e1.", 3) && strlen(name) > 3);
    CHECK_INT((int)strlen(first), 20);   /* 2026-01-02T03:04:05Z */
    CHECK(first[19] == 'Z' && first[10] == 'T');
    CHECK_CONTAINS(msg, "assigned to node n1: GPU ");
    CHECK_CONTAINS(msg, "8000 MiB");
    CHECK_CONTAINS(msg, " percent SMs");
    CHECK_CONTAINS(msg, "policy binpack");
    CHECK(!strchr(msg, '\n') && strlen(msg) < 1024);
}

TEST(ext_events_bind_failure_posts_warning) {
    ev_run r;
    const char *names[] = {"e2"};
    ev_start(&r, names, 1, 1024, TEST_PATIENCE_MS);
    if (r.ok) fake_api_inject(r.api, "POST /api/v1/namespaces/default/pods/e2/binding", 409, 1);
    char err[512] = "?";
    if (r.ok) ev_place(&r, "e2", err, sizeof err);
    bool got = r.ok && wait_events(r.api, 1);
    ev_stop_events(&r);
    int n = fake_api_event_count(r.api);
    cJSON *e = event_at(r.api, 0);
    char type[32], reason[64], uid[64], msg[1100];
    snprintf(type, sizeof type, "%s", jstr(e, "type", NULL));
    snprintf(reason, sizeof reason, "%s", jstr(e, "reason", NULL));
    snprintf(uid, sizeof uid, "%s", jstr(e, "involvedObject", "uid"));
    snprintf(msg, sizeof msg, "%s", jstr(e, "message", NULL));
    cJSON_Delete(e);
    ev_stop(&r);
    CHECK(r.ok);
    CHECK_CONTAINS(err, "injected 409");
    CHECK(got);
    CHECK_INT(n, 1);
    CHECK_STR(type, "Warning");
    CHECK_STR(reason, "TesseraBindFailed");
    CHECK_STR(uid, "uid-e2");
    CHECK_CONTAINS(msg, "injected 409");
}

/* The API server's message has a '%' of its own: neither the bind's Error (kube-scheduler formats it) nor
 * the Event carries it, both say "percent" (text.h). */
TEST(ext_events_bind_failure_message_is_printf_safe) {
    ev_run r;
    const char *names[] = {"e6"};
    ev_start(&r, names, 1, 1024, TEST_PATIENCE_MS);
    if (r.ok)
        fake_api_inject_msg(r.api, "POST /api/v1/namespaces/default/pods/e6/binding", 403, "Forbidden",
                            "exceeded quota: gpu-quota, 100% of requests.nvidia.com/gpu used", 1);
    char err[512] = "?";
    if (r.ok) ev_place(&r, "e6", err, sizeof err);
    bool got = r.ok && wait_events(r.api, 1);
    ev_stop_events(&r);
    cJSON *e = event_at(r.api, 0);
    char reason[64], msg[1100];
    snprintf(reason, sizeof reason, "%s", jstr(e, "reason", NULL));
    snprintf(msg, sizeof msg, "%s", jstr(e, "message", NULL));
    cJSON_Delete(e);
    ev_stop(&r);
    CHECK(r.ok);
    CHECK(got);
    CHECK_STR(reason, "TesseraBindFailed");
    CHECK_CONTAINS(err, "100 percent of requests");
    CHECK_MSG(!strchr(err, '%'), "bind Error: %s", err);
    CHECK_CONTAINS(msg, "100 percent of requests");
    CHECK_MSG(!strchr(msg, '%'), "Event message: %s", msg);
}

TEST(ext_events_failing_or_stalled_endpoint_never_delays_binds) {
    ev_run r;
    const char *names[] = {"e3", "e4", "e5"};
    /* A post times out after 1 s (stretched on a loaded machine, so that only the stalled one does); a bind that
     * waited for a post would take at least that long. */
    int post_timeout = (int)test_slack_ms(1000);
    ev_start(&r, names, 3, 1024, post_timeout);
    ext_events_stats s0;
    ext_events_get_stats(&s0);
    char err1[512] = "?", err2[512] = "?", err3[512] = "?";
    int64_t t1 = 0, t2 = 0, t3 = 0;
    bool failed500 = false, failed_stall = false, posted_after = false;
    if (r.ok) {
        /* 500 twice: the post and its one retry fail; the bind does not notice */
        fake_api_inject(r.api, "POST /api/v1/namespaces/default/events", 500, 2);
        t1 = ev_place(&r, "e3", err1, sizeof err1);
        failed500 = wait_stats(0, s0.failed + 1, 0);
        /* a hung endpoint: the worker waits out its timeout while binds go on */
        fake_api_inject_stall(r.api, "POST /api/v1/namespaces/default/events", TEST_PATIENCE_MS, 1);
        t2 = ev_place(&r, "e4", err2, sizeof err2);
        t3 = ev_place(&r, "e5", err3, sizeof err3);   /* queued behind the stalled post */
        failed_stall = wait_stats(0, s0.failed + 2, 0);
        posted_after = wait_stats(s0.posted + 1, 0, 0);
    }
    ev_stop_events(&r);
    ext_events_stats s1;
    ext_events_get_stats(&s1);
    int n = fake_api_event_count(r.api);
    cJSON *e = event_at(r.api, 0);
    char uid[64];
    snprintf(uid, sizeof uid, "%s", jstr(e, "involvedObject", "uid"));
    cJSON_Delete(e);
    int events_posts = fake_api_requests(r.api, "POST /api/v1/namespaces/default/events");
    ev_stop(&r);
    CHECK(r.ok);
    CHECK_STR(err1, "");
    CHECK_STR(err2, "");
    CHECK_STR(err3, "");
    CHECK_MSG(t1 < post_timeout && t2 < post_timeout && t3 < post_timeout,
              "binds took %lld, %lld, %lld ms, as long as an Event post's timeout (%d ms)", (long long)t1, (long long)t2,
              (long long)t3, post_timeout);
    CHECK(failed500);
    CHECK(failed_stall);
    CHECK(posted_after);
    CHECK_INT(s1.failed - s0.failed, 2);
    CHECK_INT(s1.posted - s0.posted, 1);
    CHECK_INT(s1.dropped - s0.dropped, 0);
    CHECK_INT(events_posts, 4);   /* 500 + its retry, the stalled one (no retry after a timeout), e5's */
    CHECK_INT(n, 1);              /* only e5's reached the store */
    CHECK_STR(uid, "uid-e5");
}

TEST(ext_events_full_queue_drops_and_counts) {
    ev_run r;
    ev_start(&r, NULL, 0, 4, (int)test_slack_ms(1000));   /* only the stalled post times out */
    ext_events_stats s0;
    ext_events_get_stats(&s0);
    int accepted = 0;
    if (r.ok) {
        fake_api_inject_stall(r.api, "POST /api/v1/namespaces/default/events", TEST_PATIENCE_MS, 1);
        for (int i = 0; i < 20; i++) {
            char name[32];
            snprintf(name, sizeof name, "p%d", i);
            accepted += ext_events_emit(r.ev, "Normal", "TesseraAssigned", "default", name, "uid-x", "m\nulti\tline");
        }
    }
    bool null_ok = !ext_events_emit(NULL, "Normal", "TesseraAssigned", "default", "p", "u", "m");
    ev_stop_events(&r);   /* the stalled post times out, the queued ones drain */
    ext_events_stats s1;
    ext_events_get_stats(&s1);
    int n = fake_api_event_count(r.api);
    cJSON *e = event_at(r.api, 0);
    char msg[64];
    snprintf(msg, sizeof msg, "%s", jstr(e, "message", NULL));
    cJSON_Delete(e);
    ev_stop(&r);
    CHECK(r.ok);
    CHECK(null_ok);
    CHECK_MSG(accepted == 4 || accepted == 5, "accepted %d", accepted);   /* 4 queued (+1 the worker took) */
    CHECK_INT(s1.dropped - s0.dropped, 20 - accepted);
    CHECK_INT(s1.posted - s0.posted + s1.failed - s0.failed, accepted);
    CHECK_INT(n, (int)(s1.posted - s0.posted));
    CHECK_STR(msg, "m ulti line");
}
