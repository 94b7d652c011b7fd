/* test_leader.c -- leader election (extender/base/leader.c) against the fake API server's Leases: acquire, renew,
 * a Lease taken over after expiry, a conflict on renew, API outages and stalls (step down after the renew
 * deadline), release on shutdown, two candidates never leading at once, and the bind fence in the verbs
 * (a follower refuses without posting; a new leader relists pods before it binds; a replica whose kube-scheduler
 * is not the active one releases), and following kube-scheduler's own Lease with no scheduling call at all.
 * Durations are scaled down to a second, times the machine's load (MS below): what these tests check is how the
 * product keeps time relative to its Lease, and a thread that a loaded machine starves for half a second must
 * not turn a 1 s Lease into a coin toss. Waits for something to happen poll with wait.h's patience. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../support/fake_apiserver.h"
#include "ext_helpers.h"
#include "kube/client.h"
#include "kube/pod.h"
#include "extender/base/leader.h"
#include "extender/metrics.h"

#define LEASE_PATH "/apis/coordination.k8s.io/v1/namespaces/tessera/leases/tessera-extender"

static void nap_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Every duration of these tests, and every bound on one, in ms times one whole factor: the machine's load
 * (wait.h's test_load_scale), 1 on an idle machine. */
#define MS(ms) ((ms) * test_load_scale())

/* Polls until l's leadership equals want; the time it took in ms, or -1. */
static int wait_leader(ext_leader *l, bool want, int ms) {
    int64_t t0 = now_ms();
    while (now_ms() - t0 <= ms) {
        if (ext_leader_is_leader(l) == want) return (int)(now_ms() - t0);
        nap_ms(5);
    }
    return -1;
}

typedef struct lease_view { char holder[192]; int secs, transitions; char renew[40], rv[32]; } lease_view;

static bool read_lease(fake_api *f, lease_view *v) {
    memset(v, 0, sizeof *v);
    char *s = fake_api_get(f, "leases", "tessera", "tessera-extender");
    cJSON *o = s ? cJSON_Parse(s) : NULL;
    free(s);
    const cJSON *spec = cJSON_GetObjectItem(o, "spec"), *meta = cJSON_GetObjectItem(o, "metadata");
    const cJSON *h = cJSON_GetObjectItem(spec, "holderIdentity"), *r = cJSON_GetObjectItem(spec, "renewTime");
    const cJSON *rv = cJSON_GetObjectItem(meta, "resourceVersion");
    snprintf(v->holder, sizeof v->holder, "%s", cJSON_IsString(h) ? h->valuestring : "");
    snprintf(v->renew, sizeof v->renew, "%s", cJSON_IsString(r) ? r->valuestring : "");
    snprintf(v->rv, sizeof v->rv, "%s", cJSON_IsString(rv) ? rv->valuestring : "");
    v->secs = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(spec, "leaseDurationSeconds"));
    v->transitions = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(spec, "leaseTransitions"));
    bool ok = cJSON_IsObject(o);
    cJSON_Delete(o);
    return ok;
}

/* Another replica's record, as its client-go would write it. */
static void put_lease(fake_api *f, const char *holder, int secs, int transitions) {
    char json[512];
    snprintf(json, sizeof json,
             "{\"metadata\":{\"name\":\"tessera-extender\",\"namespace\":\"tessera\"},\"spec\":{\"holderIdentity\":\"%s\","
             "\"leaseDurationSeconds\":%d,\"acquireTime\":\"2026-01-01T00:00:00.000000Z\","
             "\"renewTime\":\"2026-01-01T00:00:00.000000Z\",\"leaseTransitions\":%d}}",
             holder, secs, transitions);
    fake_api_put(f, "leases", json);
}

/* kube-scheduler's own Lease (deploy/scheduler-config.yaml: tessera/tessera-scheduler), as kube-scheduler
 * writes it: holderIdentity "<host name>_<uuid>". */
static void put_sched_lease(fake_api *f, const char *holder, int secs) {
    char json[512];
    snprintf(json, sizeof json,
             "{\"metadata\":{\"name\":\"tessera-scheduler\",\"namespace\":\"tessera\"},\"spec\":{\"holderIdentity\":\"%s\","
             "\"leaseDurationSeconds\":%d,\"acquireTime\":\"2026-01-01T00:00:00.000000Z\","
             "\"renewTime\":\"2026-01-01T00:00:00.000000Z\",\"leaseTransitions\":0}}", holder, secs);
    fake_api_put(f, "leases", json);
}

typedef struct env {
    fake_api *f;
    kube_client *k;
} env;

static bool env_init(env *e) {
    memset(e, 0, sizeof *e);
    char err[256], url[128];
    if (!(e->f = fake_api_start(0, err, sizeof err))) return false;
    fake_api_url(e->f, url, sizeof url);
    kube_config kc;
    kube_config_defaults(&kc);
    snprintf(kc.api_url, sizeof kc.api_url, "%s", url);
    kc.backoff_max_ms = 200;
    e->k = kube_new(&kc, err, sizeof err);
    return e->k != NULL;
}

static void env_free(env *e) {
    kube_free(e->k);
    fake_api_free(e->f);
}

/* A replica with identity id. pod_host NULL: no kube-scheduler Lease to follow (--scheduler-lease "": it
 * campaigns always, as one replica does); else it follows tessera/tessera-scheduler as deploy/ runs it, and
 * its own kube-scheduler's identity starts "<pod_host>_". */
static ext_leader *candidate(env *e, const char *id, int lease, int renew, int retry, const char *pod_host) {
    ext_leader_config c;
    ext_leader_config_defaults(&c);
    snprintf(c.ns, sizeof c.ns, "tessera");
    snprintf(c.identity, sizeof c.identity, "%s", id);
    c.lease_ms = lease;
    c.renew_ms = renew;
    c.retry_ms = retry;
    char err[256];
    if (ext_leader_parse_scheduler_lease(&c, pod_host ? "tessera/tessera-scheduler" : "", err, sizeof err) != 0) return NULL;
    snprintf(c.pod_host, sizeof c.pod_host, "%s", pod_host ? pod_host : "");
    ext_leader *l = ext_leader_new(&c, e->k, err, sizeof err);
    if (l && ext_leader_start(l, err, sizeof err) != 0) { ext_leader_free(l); l = NULL; }
    if (!l) fprintf(stdout, "    candidate %s: %s\n", id, err);
    return l;
}

TEST(leader_config_rules) {
    CHECK(kube_pod_parse_duration("15s", 3600000) == 15000);   /* the --leader-elect-* flags (extender/main.c) */
    CHECK(kube_pod_parse_duration("500ms", 3600000) == 500);
    CHECK(kube_pod_parse_duration("1m", 3600000) == 60000);
    CHECK(kube_pod_parse_duration("2", 3600000) == 2000);
    CHECK(kube_pod_parse_duration("1.5s", 3600000) == 1500);
    CHECK(kube_pod_parse_duration("1h", 3600000) == 3600000);
    CHECK(kube_pod_parse_duration("2h", 3600000) < 0);          /* above the cap */
    CHECK(kube_pod_parse_duration("2h", 86400000) == 7200000);  /* the node agent's cap is a day */
    CHECK(kube_pod_parse_duration("0.4ms", 3600000) < 0);       /* below a millisecond */
    CHECK(kube_pod_parse_duration("", 3600000) < 0);
    CHECK(kube_pod_parse_duration(NULL, 3600000) < 0);
    CHECK(kube_pod_parse_duration("10x", 3600000) < 0);
    CHECK(kube_pod_parse_duration("5 s", 3600000) < 0);
    CHECK(kube_pod_parse_duration("-1s", 3600000) < 0);
    CHECK(kube_pod_parse_duration("nan", 3600000) < 0);
    ext_leader_config c;
    ext_leader_config_defaults(&c);
    char err[256];
    CHECK(ext_leader_config_check(&c, err, sizeof err) == 0);
    CHECK_INT(c.lease_ms, 15000);
    CHECK_STR(c.name, "tessera-extender");
    CHECK(strchr(c.identity, '_') != NULL);   /* "<pod or host>_<random>" */
    ext_leader_config d;
    ext_leader_config_defaults(&d);
    CHECK(strcmp(c.identity, d.identity) != 0); /* a restarted process is a new holder */
    c.renew_ms = c.lease_ms;
    CHECK(ext_leader_config_check(&c, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "renew deadline");
    c.renew_ms = 2000;
    c.retry_ms = 2000;                         /* renew must exceed 1.2 x retry */
    CHECK(ext_leader_config_check(&c, err, sizeof err) < 0);
    ext_leader_config_defaults(&c);
    snprintf(c.name, sizeof c.name, "Bad_Name");
    CHECK(ext_leader_config_check(&c, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "Bad_Name");
}

TEST(leader_acquires_creates_and_renews) {
    env e;
    CHECK(env_init(&e));
    ext_leader *a = candidate(&e, "pod-a_1", MS(1000), MS(600), MS(100), NULL);
    int t = a ? wait_leader(a, true, TEST_PATIENCE_MS) : -1;
    lease_view v1, v2;
    bool got1 = read_lease(e.f, &v1);
    nap_ms(MS(800)); /* longer than the renew deadline: only renewals keep it */
    bool still = a && ext_leader_is_leader(a);
    bool got2 = read_lease(e.f, &v2);
    ext_leader_stats st;
    ext_leader_get_stats(a, &st);
    int creates = fake_api_requests(e.f, "POST /apis/coordination.k8s.io/");
    ext_leader_free(a);
    env_free(&e);
    CHECK(a);
    CHECK_MSG(t >= 0, "never became leader");
    CHECK(got1 && got2);
    CHECK_STR(v1.holder, "pod-a_1");
    CHECK_INT(v1.secs, test_load_scale());
    CHECK_INT(v1.transitions, 0);
    CHECK_INT(creates, 1);
    CHECK(still);
    CHECK(strcmp(v1.renew, v2.renew) != 0);   /* renewTime moved */
    CHECK_STR(v2.holder, "pod-a_1");
    CHECK_INT(v2.transitions, 0);              /* renewals are not transitions */
    CHECK_INT((long long)st.transitions, 1);
}

TEST(leader_waits_for_a_foreign_lease_to_expire_then_takes_it) {
    env e;
    CHECK(env_init(&e));
    put_lease(e.f, "pod-z_9", test_load_scale(), 4);   /* never renewed: expires 1 s (scaled) after we first see it */
    int64_t t0 = now_ms();
    ext_leader *a = candidate(&e, "pod-a_1", MS(1000), MS(600), MS(100), NULL);
    nap_ms(MS(500));
    bool early = a && ext_leader_is_leader(a);
    char why[256] = "", holder[192] = "";
    bool may = a && ext_leader_may_bind(a, 0, why, sizeof why);
    ext_leader_holder(a, holder, sizeof holder);
    int t = a ? wait_leader(a, true, TEST_PATIENCE_MS) : -1;
    int64_t took = now_ms() - t0;
    lease_view v;
    read_lease(e.f, &v);
    ext_leader_free(a);
    env_free(&e);
    CHECK(a);
    CHECK(!early);
    CHECK(!may);
    CHECK_CONTAINS(why, "not the tessera leader (leader is pod-z_9); kube-scheduler will retry");
    CHECK_STR(holder, "pod-z_9");
    CHECK_MSG(t >= 0, "never took the expired Lease");
    CHECK_MSG(took >= MS(950), "took it after %lld ms, before it expired", (long long)took);
    CHECK_STR(v.holder, "pod-a_1");
    CHECK_INT(v.transitions, 5);
}

TEST(leader_conflict_on_renew_steps_down_at_once) {
    env e;
    CHECK(env_init(&e));
    /* a renew deadline far longer than the retry period: stepping down early can only be the conflict */
    ext_leader *a = candidate(&e, "pod-a_1", MS(3000), MS(2500), MS(100), NULL);
    bool led = a && wait_leader(a, true, TEST_PATIENCE_MS) >= 0;
    put_lease(e.f, "pod-b_2", test_load_scale(), 1);   /* another replica wrote the Lease: our resourceVersion is stale */
    int down = a ? wait_leader(a, false, TEST_PATIENCE_MS) : -1;
    ext_leader_stats st;
    ext_leader_get_stats(a, &st);
    char holder[192] = "";
    ext_leader_holder(a, holder, sizeof holder);
    int back = a ? wait_leader(a, true, TEST_PATIENCE_MS) : -1;   /* pod-b never renews: after 1 s it is ours again */
    lease_view v;
    read_lease(e.f, &v);
    ext_leader_get_stats(a, &st);
    ext_leader_free(a);
    env_free(&e);
    CHECK(led);
    printf("    leader: stepped down %d ms after a conflicting write (renew deadline %d ms)\n", down, MS(2500));
    CHECK_MSG(down >= 0 && down < MS(1000), "stepped down after %d ms", down);
    CHECK(st.errors[EXT_LEASE_ERR_CONFLICT] >= 1);
    CHECK_STR(holder, "pod-b_2");
    CHECK(back >= 0);
    CHECK_STR(v.holder, "pod-a_1");
    CHECK_INT(v.transitions, 2);
    CHECK_INT((long long)st.transitions, 2);
}

TEST(leader_api_outage_steps_down_after_renew_deadline_and_recovers) {
    env e;
    CHECK(env_init(&e));
    ext_leader *a = candidate(&e, "pod-a_1", MS(1000), MS(600), MS(100), NULL);
    bool led = a && wait_leader(a, true, TEST_PATIENCE_MS) >= 0;
    int64_t t0 = now_ms();
    fake_api_down(e.f);
    int down = a ? wait_leader(a, false, TEST_PATIENCE_MS) : -1;
    int64_t after = now_ms() - t0;
    char why[256] = "";
    bool may = a && ext_leader_may_bind(a, 0, why, sizeof why);
    char err[256];
    int up = fake_api_up(e.f, err, sizeof err);
    int back = a ? wait_leader(a, true, TEST_PATIENCE_MS) : -1;
    ext_leader_stats st;
    ext_leader_get_stats(a, &st);
    ext_leader_free(a);
    env_free(&e);
    CHECK(led);
    CHECK_MSG(down >= 0, "still leader during the outage");
    printf("    leader: stepped down %lld ms into an API outage (renew deadline %d ms)\n", (long long)after, MS(600));
    CHECK_MSG(after >= MS(450) && after <= MS(1200), "stepped down %lld ms into the outage (renew deadline %d)",
              (long long)after, MS(600));
    CHECK(!may);
    CHECK_CONTAINS(why, "not the tessera leader");
    CHECK_INT(up, 0);
    CHECK(back >= 0);                          /* the record still names us: re-acquired without waiting */
    CHECK(st.errors[EXT_LEASE_ERR_UNREACHABLE] >= 1);
    CHECK_INT((long long)st.transitions, 2);
}

static void ignore_events(void *user, kube_kind kind, kube_event ev, const cJSON *obj) {}

TEST(leader_refuses_binds_that_could_outlive_the_lease) {
    env e;
    CHECK(env_init(&e));
    ext_leader_config c;
    ext_leader_config_defaults(&c);
    snprintf(c.ns, sizeof c.ns, "tessera");
    snprintf(c.identity, sizeof c.identity, "pod-a_1");
    c.lease_ms = MS(2000);
    c.renew_ms = MS(1500);
    c.retry_ms = MS(100);
    c.bind_budget_ms = MS(2000);
    c.sched_name[0] = 0;   /* --scheduler-lease "": one replica, campaigning always */
    char err[256], why[256] = "";
    CHECK(ext_leader_config_check(&c, err, sizeof err) < 0);   /* a bind as long as the Lease: never safe */
    CHECK_CONTAINS(err, "shorter than the lease duration");
    c.bind_budget_ms = MS(1200);   /* binds must start within 800 ms (scaled) of the last renewal */
    ext_leader *a = ext_leader_new(&c, e.k, err, sizeof err);
    bool started = a && ext_leader_start(a, err, sizeof err) == 0;
    bool led = started && wait_leader(a, true, TEST_PATIENCE_MS) >= 0;
    bool watching = kube_start(e.k, ignore_events, NULL, err, sizeof err) == 0;   /* for the relist */
    bool may = watching && ext_leader_may_bind(a, TEST_PATIENCE_MS, why, sizeof why);
    fake_api_down(e.f);
    int64_t t0 = now_ms();
    while (started && now_ms() - t0 < MS(3000) && ext_leader_may_bind(a, 0, why, sizeof why)) nap_ms(5);
    int64_t refused_at = now_ms() - t0;
    bool still_leader = started && ext_leader_is_leader(a);   /* the renew deadline (1.5 s) has not passed */
    ext_leader_free(a);
    env_free(&e);
    CHECK(led);
    CHECK_MSG(may, "%s", why);
    CHECK_CONTAINS(why, "too long ago to finish a bind");
    CHECK_MSG(refused_at <= MS(900), "binds refused only %lld ms into the outage", (long long)refused_at);
    CHECK(still_leader);
}

TEST(leader_stalled_api_steps_down) {
    env e;
    CHECK(env_init(&e));
    ext_leader *a = candidate(&e, "pod-a_1", MS(1000), MS(600), MS(100), NULL);
    bool led = a && wait_leader(a, true, TEST_PATIENCE_MS) >= 0;
    fake_api_inject_stall(e.f, "/apis/coordination.k8s.io/", MS(1500), 4);
    int down = a ? wait_leader(a, false, TEST_PATIENCE_MS) : -1;
    int back = a ? wait_leader(a, true, TEST_PATIENCE_MS) : -1;
    ext_leader_stats st;
    ext_leader_get_stats(a, &st);
    ext_leader_free(a);
    env_free(&e);
    CHECK(led);
    CHECK_MSG(down >= 0 && down <= MS(1000), "stepped down after %d ms", down);
    CHECK(st.errors[EXT_LEASE_ERR_TIMEOUT] >= 1);
    CHECK(back >= 0);
}

TEST(leader_releases_on_shutdown_and_successor_takes_over_at_once) {
    env e;
    CHECK(env_init(&e));
    ext_leader *a = candidate(&e, "pod-a_1", MS(1000), MS(600), MS(100), NULL);
    bool led = a && wait_leader(a, true, TEST_PATIENCE_MS) >= 0;
    ext_leader_stop(a);
    char why[256] = "";
    bool may = a && ext_leader_may_bind(a, 0, why, sizeof why);
    ext_leader_free(a);
    lease_view v;
    read_lease(e.f, &v);
    /* a follower that saw a's record just before: it would have to wait out 1 s without the release */
    ext_leader *b = candidate(&e, "pod-b_2", MS(1000), MS(600), MS(100), NULL);
    int t = b ? wait_leader(b, true, TEST_PATIENCE_MS) : -1;
    ext_leader_free(b);
    env_free(&e);
    CHECK(led);
    CHECK(!may);
    CHECK_CONTAINS(why, "shutting down");
    CHECK_STR(v.holder, "");
    CHECK_INT(v.secs, 1);   /* client-go's release writes 1 s whatever the Lease */
    printf("    leader: successor led %d ms after a release on shutdown (lease %d ms)\n", t, MS(1000));
    CHECK_MSG(t >= 0 && t < MS(500), "successor took %d ms", t);
}

typedef struct sampler {
    pthread_mutex_t mu;   /* guards a and b: a candidate leaves the sample before it is freed */
    ext_leader *a, *b;
    atomic_bool done;
    int both, a_led, b_led;
} sampler;

static void *sample(void *arg) {
    sampler *s = arg;
    while (!atomic_load(&s->done)) {
        pthread_mutex_lock(&s->mu);
        bool x = s->a && ext_leader_is_leader(s->a), y = s->b && ext_leader_is_leader(s->b);
        pthread_mutex_unlock(&s->mu);
        s->both += x && y;
        s->a_led += x;
        s->b_led += y;
        nap_ms(1);
    }
    return NULL;
}

TEST(leader_two_candidates_never_both_lead) {
    env e;
    CHECK(env_init(&e));
    sampler s = {.a = candidate(&e, "pod-a_1", MS(1000), MS(600), MS(100), NULL), .b = candidate(&e, "pod-b_2", MS(1000), MS(600), MS(100), NULL)};
    atomic_init(&s.done, false);
    pthread_mutex_init(&s.mu, NULL);
    pthread_t thr;
    bool ok = s.a && s.b && pthread_create(&thr, NULL, sample, &s) == 0;
    int64_t t0 = now_ms();
    while (ok && now_ms() - t0 < TEST_PATIENCE_MS && !ext_leader_is_leader(s.a) && !ext_leader_is_leader(s.b)) nap_ms(5);
    bool one = ok && (ext_leader_is_leader(s.a) != ext_leader_is_leader(s.b));
    /* chaos: failing renewals, stalls, an outage */
    fake_api_inject(e.f, "PUT /apis/coordination.k8s.io/", 500, 4);
    nap_ms(MS(700));
    fake_api_inject_stall(e.f, "/apis/coordination.k8s.io/", MS(800), 3);
    nap_ms(MS(1200));
    fake_api_down(e.f);
    nap_ms(MS(900));
    char err[256];
    fake_api_up(e.f, err, sizeof err);
    t0 = now_ms();
    while (ok && now_ms() - t0 < TEST_PATIENCE_MS && !ext_leader_is_leader(s.a) && !ext_leader_is_leader(s.b)) nap_ms(5);
    /* the leader shuts down: the other takes over */
    bool a_led = ext_leader_is_leader(s.a);
    ext_leader *gone = a_led ? s.a : s.b, *heir = a_led ? s.b : s.a;
    ext_leader_stop(gone);
    pthread_mutex_lock(&s.mu);
    if (a_led) s.a = NULL; else s.b = NULL;
    pthread_mutex_unlock(&s.mu);
    ext_leader_free(gone);   /* releases: the heir may take over while the sampler watches it */
    int heir_t = wait_leader(heir, true, TEST_PATIENCE_MS);
    atomic_store(&s.done, true);
    if (ok) pthread_join(thr, NULL);
    pthread_mutex_destroy(&s.mu);
    ext_leader_free(heir);
    env_free(&e);
    CHECK(ok);
    CHECK(one);
    CHECK_MSG(s.both == 0, "both led in %d samples", s.both);
    CHECK(s.a_led + s.b_led > 0);
    printf("    leader: two candidates, chaos: %d/%d samples led by a/b, %d by both; heir led after %d ms\n", s.a_led,
           s.b_led, s.both, heir_t);
    CHECK_MSG(heir_t >= 0 && heir_t < MS(1000), "heir took %d ms", heir_t);
}

/* ---- the bind fence in the verbs ---------------------------------------------------------------------- */

static int kube_bind_fn(void *user, const char *ns, const char *name, const char *uid, const char *node,
                        const cJSON *annotations, char *err, size_t errlen) {
    int code = kube_bind(user, ns, name, uid, node, annotations, err, errlen);
    return code == 200 || code == 201 ? 0 : -1;
}

TEST(leader_fences_binds_and_relists_after_taking_over) {
    env e;
    CHECK(env_init(&e));
    cJSON *node = demo_node_as("gpu-a100-whole", "n1");
    char *nj = cJSON_PrintUnformatted(node);
    cJSON_Delete(node);
    fake_api_put(e.f, "nodes", nj);
    free(nj);
    char *pend = pod_json("c1", "uid-c1", 0, "\"nvidia.com/gpumem\":\"30000\"", NULL, NULL);
    fake_api_put(e.f, "pods", pend);
    put_lease(e.f, "pod-z_9", 3600, 0);   /* another replica leads, and keeps its Lease valid */
    ext_state_config sc = {.standalone = false};
    ext_state *st = ext_state_new(&sc);
    char err[256];
    bool started = kube_start(e.k, ext_state_on_event, st, err, sizeof err) == 0;
    if (started) WAIT_FOR(ext_state_ready(st));
    /* as deployed: another pod's kube-scheduler is active, so this replica only watches the Leases ... */
    put_sched_lease(e.f, "pod-z_6d1c0e7e-kube", 3600);
    ext_leader *a = candidate(&e, "pod-a_1", MS(1000), MS(600), MS(100), "pod-a");
    nap_ms(MS(300));   /* a few retry periods: it would have written by now */
    int idle_calls = fake_api_requests(e.f, "PUT /apis/coordination.k8s.io/") +
                     fake_api_requests(e.f, "POST /apis/coordination.k8s.io/");
    ext_verbs v;
    ext_verbs_init(&v, st, NULL, kube_bind_fn, e.k);
    v.leader = a;
    const char *names[] = {"n1"};
    char *args = args_names(pend, names, 1);
    free(pend);
    cJSON *f = call_verb(&v, ext_verb_filter, args, NULL);   /* followers filter from their warm cache */
    int npass = cJSON_GetArraySize(cJSON_GetObjectItem(f, "NodeNames"));
    cJSON_Delete(f);
    free(args);
    char berr[512] = "?";
    bind_pod(&v, "c1", "uid-c1", "n1", berr, sizeof berr);
    int posted_as_follower = fake_api_bindings(e.f);
    uint64_t refused = atomic_load(&v.bind_outcomes[EXT_BIND_NOT_LEADER]);
    int campaign_calls = fake_api_requests(e.f, "/apis/coordination.k8s.io/");
    ext_reply dbg = {0};
    ext_debug_state(&v, NULL, &dbg);
    cJSON *dj = dbg.body ? cJSON_Parse(dbg.body) : NULL;
    ext_reply_free(&dbg);
    const cJSON *dh = cJSON_GetObjectItem(cJSON_GetObjectItem(dj, "leader_election"), "holder");
    char dbg_holder[64];
    snprintf(dbg_holder, sizeof dbg_holder, "%s", cJSON_IsString(dh) ? dh->valuestring : "(none)");
    cJSON_Delete(dj);
    kube_stats ks0, ks1;
    kube_get_stats(e.k, &ks0);
    put_lease(e.f, "", 1, 0);             /* the other replica released it (its kube-scheduler stopped) */
    char berr2[512] = "?";
    int retries_refused = 0;              /* until the Lease is ours and pods are relisted: as many as it takes */
    WAIT_FOR(({                           /* kube-scheduler retries the bind */
        bind_pod(&v, "c1", "uid-c1", "n1", berr2, sizeof berr2);
        retries_refused += berr2[0] != 0;
        if (berr2[0]) nap_ms(50);
        !berr2[0];
    }));
    kube_get_stats(e.k, &ks1);
    int posted = fake_api_bindings(e.f);
    static ext_metrics m;   /* zeroed */
    size_t mlen = 0;
    char *metrics = ext_metrics_render(&m, &v, NULL, &mlen);
    /* no more calls: after the lease duration the replica lets the Lease go */
    int64_t t0 = now_ms();
    lease_view lv;
    do { nap_ms(20); read_lease(e.f, &lv); } while (lv.holder[0] && now_ms() - t0 < TEST_PATIENCE_MS);
    bool leader_after_idle = ext_leader_is_leader(a);
    ext_leader_free(a);
    env_free(&e);   /* stops the watch threads before the state goes */
    ext_state_free(st);
    CHECK(started);
    CHECK(a);
    CHECK_INT(idle_calls, 0);
    CHECK_INT(npass, 1);
    CHECK_CONTAINS(berr, "not the tessera leader (leader is pod-z_9); kube-scheduler will retry");
    CHECK_INT(posted_as_follower, 0);
    CHECK_INT((long long)refused, 1);
    CHECK(campaign_calls > 0);
    CHECK_STR(dbg_holder, "pod-z_9");   /* /debug/state names the leader */
    CHECK_STR(berr2, "");
    CHECK_INT(posted, 1);
    CHECK_MSG(ks1.lists[KUBE_POD] > ks0.lists[KUBE_POD], "no pod relist after taking over");
    CHECK_STR(lv.holder, "");
    CHECK(!leader_after_idle);
    CHECK_CONTAINS(metrics, "\ntessera_leader 1\n");
    CHECK_CONTAINS(metrics, "\ntessera_leader_transitions_total 1\n");
    /* whether a Lease write lost a race (reason="conflict") depends on timing; the family is always there */
    CHECK_CONTAINS(metrics, "# TYPE tessera_leader_lease_errors_total counter\n");
    char refusals[64];   /* the bind counter, whatever its label is called: the follower's refusal and the retries' */
    snprintf(refusals, sizeof refusals, "=\"not_leader\"} %d\n", 1 + retries_refused);
    CHECK_CONTAINS(metrics, refusals);
    free(metrics);
}

/* Deliver 1 of issue 19: the Lease follows the active kube-scheduler with no scheduling call at all, so the
 * background work it carries runs in an idle cluster; it moves when kube-scheduler's Lease moves, and nobody
 * writes it in vain while kube-scheduler's Lease names a third pod. */
TEST(leader_follows_its_kube_scheduler_with_no_calls) {
    env e;
    CHECK(env_init(&e));
    put_sched_lease(e.f, "pod-z_0b7f-kube", 3600);   /* a third replica's kube-scheduler leads */
    ext_leader *a = candidate(&e, "pod-a_1", MS(1000), MS(600), MS(100), "pod-a");
    ext_leader *b = candidate(&e, "pod-b_2", MS(1000), MS(600), MS(100), "pod-b");
    nap_ms(MS(400));   /* a few retry periods: they would have written by now */
    int writes_while_other = fake_api_requests(e.f, "PUT /apis/coordination.k8s.io/") +
                             fake_api_requests(e.f, "POST /apis/coordination.k8s.io/");
    bool led_while_other = ext_leader_is_leader(a) || ext_leader_is_leader(b);
    const char *st_other = ext_leader_scheduler_state(a);
    put_sched_lease(e.f, "pod-a_0b7f-kube", 3600);   /* pod-a's kube-scheduler wins its Lease */
    int t_a = wait_leader(a, true, TEST_PATIENCE_MS);
    bool b_led = ext_leader_is_leader(b);
    const char *st_mine = ext_leader_scheduler_state(a);
    put_sched_lease(e.f, "pod-b_77aa-kube", 3600);   /* failover of kube-scheduler to pod-b */
    int t_b = wait_leader(b, true, TEST_PATIENCE_MS);
    int t_a_off = wait_leader(a, false, TEST_PATIENCE_MS);
    lease_view lv;
    read_lease(e.f, &lv);
    fake_api_delete(e.f, "leases", "tessera", "tessera-scheduler");   /* between leaders: work must go on */
    nap_ms(MS(500));
    bool b_kept = ext_leader_is_leader(b) && !ext_leader_is_leader(a);
    const char *st_none = ext_leader_scheduler_state(b);
    ext_leader_free(a);
    ext_leader_free(b);
    env_free(&e);
    CHECK_INT(writes_while_other, 0);
    CHECK(!led_while_other);
    CHECK_STR(st_other, "other");
    CHECK_MSG(t_a >= 0, "pod-a never took the Lease after its kube-scheduler did");
    CHECK(!b_led);
    CHECK_STR(st_mine, "mine");
    CHECK_MSG(t_b >= 0 && t_a_off >= 0, "the Lease did not follow kube-scheduler to pod-b (b %d ms, a off %d ms)", t_b, t_a_off);
    CHECK_STR(lv.holder, "pod-b_2");
    CHECK(b_kept);
    CHECK_STR(st_none, "none");
}

/* Review of issue 19: kube-scheduler's Lease missing (or misnamed by --scheduler-lease): both replicas campaign
 * (rule (b)) and the idle one may win; the replica whose kube-scheduler sends the calls asks for the Lease with a
 * note, and the idle holder gives way, so binds are never refused for good. */
TEST(leader_idle_holder_gives_way_when_kube_schedulers_lease_is_missing) {
    env e;
    CHECK(env_init(&e));
    ext_leader *a = candidate(&e, "pod-a_1", MS(1000), MS(600), MS(100), "pod-a");
    ext_leader *b = candidate(&e, "pod-b_2", MS(1000), MS(600), MS(100), "pod-b");
    ext_leader *l[2] = {a, b};
    int who = -1;
    for (int64_t t0 = now_ms(); now_ms() - t0 < TEST_PATIENCE_MS && who < 0; nap_ms(10))
        who = ext_leader_is_leader(a) ? 0 : ext_leader_is_leader(b) ? 1 : -1;
    ext_leader *idle = who >= 0 ? l[who] : NULL, *active = who >= 0 ? l[1 - who] : NULL;
    int64_t t_bind = -1, t0 = now_ms();
    char why[512] = "";
    for (; active && now_ms() - t0 < TEST_PATIENCE_MS && t_bind < 0; nap_ms(50)) {
        ext_leader_note_call(active);   /* only the active kube-scheduler calls its extender */
        if (ext_leader_is_leader(active)) t_bind = now_ms() - t0;   /* (may_bind also waits for a relist: no watch here) */
    }
    bool idle_led = idle && ext_leader_is_leader(idle);
    /* once the calls stop and nobody asks, the Lease stays where it is (rule (b): background work goes on) */
    nap_ms(MS(1500));
    bool kept = active && ext_leader_is_leader(active);
    ext_leader_free(a);
    ext_leader_free(b);
    env_free(&e);
    CHECK(who >= 0);
    CHECK_MSG(t_bind >= 0 && t_bind < MS(3000), "the replica receiving calls did not lead within %d ms (%s)", MS(3000), why);
    CHECK(!idle_led);
    CHECK(kept);
}

/* Review of issue 19: reading kube-scheduler's Lease never delays the holder's own renewal: with that read
 * stalled and each renewal slow (but within the deadline), the holder keeps leading. */
TEST(leader_slow_scheduler_lease_read_does_not_cost_the_renewal) {
    env e;
    CHECK(env_init(&e));
    put_sched_lease(e.f, "pod-a_0b7f-kube", 3600);
    ext_leader *a = candidate(&e, "pod-a_1", MS(3000), MS(2000), MS(300), "pod-a");
    int up = wait_leader(a, true, TEST_PATIENCE_MS);
    fake_api_inject_stall(e.f, "GET /apis/coordination.k8s.io/v1/namespaces/tessera/leases/tessera-scheduler", MS(1100), 1000);
    /* Each renewal takes a quarter of the renew deadline: slow, yet half the request timeout (renew deadline / 2)
     * away from failing, so a loaded machine's scheduling delays do not turn it into a timeout. */
    fake_api_inject_stall(e.f, "PUT /apis/coordination.k8s.io/v1/namespaces/tessera/leases/tessera-extender", MS(500), 1000);
    int down = wait_leader(a, false, MS(6000));
    fake_api_clear_injections(e.f);
    ext_leader_free(a);
    env_free(&e);
    CHECK(up >= 0);
    CHECK_MSG(down < 0, "stepped down %d ms into the stalls although every renewal succeeded within the deadline", down);
}
