/* test_ext_burst.c -- kube-scheduler's call pattern under a burst, through the real HTTP
 * server: filter and prioritize one pod after another on one keep-alive connection, each
 * bind in its own thread (the binding cycle is asynchronous) against an API that takes a
 * few ms to answer. The cluster has room for exactly N pods: every pod must end bound,
 * no node over-committed, and the bind failures are counted and printed.
 */
#include <curl/curl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ext_helpers.h"
#include "ext_proc.h"
#include "extender/http.h"

#define NODES 4
#define PER_GPU 2                 /* 40960 MiB pods on 81920 MiB A100s */
#define NPODS (NODES * 8 * PER_GPU)
#define MAX_ATTEMPTS (NPODS * 20)

typedef struct burst {
    char base[64];
    pthread_mutex_t mu;
    int queue[MAX_ATTEMPTS + NPODS];  /* pods waiting to be scheduled (FIFO, like the active queue) */
    int qhead, qtail;
    int bound, bind_failures, in_flight;
    pthread_t threads[MAX_ATTEMPTS];
    int nthreads;
} burst;

typedef struct bind_job { burst *b; int pod; char node[64]; } bind_job;

static int slow_api(void *user, const char *ns, const char *name, const char *uid, const char *node,
                    const cJSON *annotations, char *err, size_t errlen) {
    struct timespec ts = {0, 3 * 1000 * 1000};   /* an apiserver round trip */
    nanosleep(&ts, NULL);
    return 0;
}

static cJSON *post(CURL *c, const char *base, const char *verb, const char *body) {
    char url[128];
    snprintf(url, sizeof url, "%s/tessera/%s", base, verb);
    cbuf b = {0};
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
    long code = 0;
    if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    cJSON *o = code == 200 && b.p ? cJSON_Parse(b.p) : NULL;
    free(b.p);
    return o;
}

static void *bind_thread(void *arg) {
    bind_job *j = arg;
    CURL *c = curl_easy_init();
    char body[256];
    snprintf(body, sizeof body, "{\"PodName\":\"b%d\",\"PodNamespace\":\"default\",\"PodUID\":\"uid-b%d\",\"Node\":\"%s\"}",
             j->pod, j->pod, j->node);
    cJSON *r = c ? post(c, j->b->base, "bind", body) : NULL;
    const cJSON *e = cJSON_GetObjectItem(r, "Error");
    bool ok = cJSON_IsString(e) && !e->valuestring[0];
    pthread_mutex_lock(&j->b->mu);
    if (ok) {
        j->b->bound++;
    } else {
        j->b->bind_failures++;                              /* the scheduler requeues the pod */
        j->b->queue[j->b->qtail++] = j->pod;
    }
    j->b->in_flight--;
    pthread_mutex_unlock(&j->b->mu);
    cJSON_Delete(r);
    if (c) curl_easy_cleanup(c);
    free(j);
    return NULL;
}

TEST(ext_burst_exact_fit_all_bound_nothing_overcommitted) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    char *cl = cluster_of("gpu-a100-whole", "b", NODES);
    ext_state *st = standalone_state(cl);
    free(cl);
    ext_verbs v;
    ext_verbs_init(&v, st, policy_find("binpack"), slow_api, NULL);
    ext_http_config hc = {.verbs = &v};
    snprintf(hc.listen, sizeof hc.listen, "127.0.0.1:0");
    snprintf(hc.prefix, sizeof hc.prefix, "/tessera");
    char err[256];
    ext_http *h = ext_http_start(&hc, err, sizeof err);
    CHECK_MSG(h, "%s", err);
    burst *b = calloc(1, sizeof *b);
    pthread_mutex_init(&b->mu, NULL);
    snprintf(b->base, sizeof b->base, "http://127.0.0.1:%d", ext_http_port(h));
    for (int i = 0; i < NPODS; i++) b->queue[b->qtail++] = i;
    const char *names[NODES];
    char nbuf[NODES][16];
    for (int i = 0; i < NODES; i++) {
        snprintf(nbuf[i], sizeof nbuf[i], "b-%d", i);
        names[i] = nbuf[i];
    }
    CURL *c = curl_easy_init();
    int attempts = 0, unschedulable = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        pthread_mutex_lock(&b->mu);
        bool done = b->bound == NPODS;
        int pod = b->qhead < b->qtail ? b->queue[b->qhead++] : -1;
        pthread_mutex_unlock(&b->mu);
        if (done || attempts >= MAX_ATTEMPTS) break;
        if (pod < 0) {   /* everything is in a bind: wait for one to come back */
            usleep(500);
            continue;
        }
        attempts++;
        char name[16], uid[24];
        snprintf(name, sizeof name, "b%d", pod);
        snprintf(uid, sizeof uid, "uid-b%d", pod);
        char *pj = pod_json(name, uid, 0, "\"nvidia.com/gpumem\":\"40960\"", NULL, NULL);
        char *args = args_names(pj, names, NODES);
        free(pj);
        cJSON *f = post(c, b->base, "filter", args);
        cJSON *feasible = cJSON_GetObjectItem(f, "NodeNames");
        char chosen[64] = "";
        if (cJSON_GetArraySize(feasible) == 1) {
            snprintf(chosen, sizeof chosen, "%s", cJSON_GetArrayItem(feasible, 0)->valuestring);
        } else if (cJSON_GetArraySize(feasible) > 1) {
            /* prioritize over the filter's survivors, take the top score (first on ties) */
            cJSON *pa = cJSON_Parse(args);
            cJSON_ReplaceItemInObject(pa, "NodeNames", cJSON_Duplicate(feasible, 1));
            char *pbody = cJSON_PrintUnformatted(pa);
            cJSON_Delete(pa);
            cJSON *pr = post(c, b->base, "prioritize", pbody);
            free(pbody);
            double best = -1;
            const cJSON *it;
            cJSON_ArrayForEach(it, pr) {
                double sc = cJSON_GetObjectItem(it, "Score")->valuedouble;
                if (sc > best) {
                    best = sc;
                    snprintf(chosen, sizeof chosen, "%s", cJSON_GetObjectItem(it, "Host")->valuestring);
                }
            }
            cJSON_Delete(pr);
        }
        cJSON_Delete(f);
        free(args);
        pthread_mutex_lock(&b->mu);
        if (!chosen[0]) {
            unschedulable++;                 /* back of the queue; binds in flight may free room */
            b->queue[b->qtail++] = pod;
            pthread_mutex_unlock(&b->mu);
            continue;
        }
        bind_job *j = malloc(sizeof *j);
        *j = (bind_job){b, pod, ""};
        snprintf(j->node, sizeof j->node, "%s", chosen);
        b->in_flight++;
        if (pthread_create(&b->threads[b->nthreads], NULL, bind_thread, j) == 0) b->nthreads++;
        else { b->in_flight--; b->queue[b->qtail++] = pod; free(j); }
        pthread_mutex_unlock(&b->mu);
    }
    for (int i = 0; i < b->nthreads; i++) pthread_join(b->threads[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    /* The cluster is now exactly full: one more pod fits nowhere. */
    char *pj = pod_json("extra", "uid-extra", 0, "\"nvidia.com/gpumem\":\"40960\"", NULL, NULL);
    char *args = args_names(pj, names, NODES);
    cJSON *f = post(c, b->base, "filter", args);
    int extra_fits = cJSON_GetArraySize(cJSON_GetObjectItem(f, "NodeNames"));
    cJSON_Delete(f);
    free(pj);
    free(args);
    curl_easy_cleanup(c);
    ext_http_stop(h);
    char why[256] = "";
    bool consistent = all_nodes_consistent(st, why, sizeof why);
    ext_state_lock(st);
    ext_state_stats s;
    ext_state_get_stats(st, &s);
    ext_state_unlock(st);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
    printf("    burst: %d pods into room for exactly %d: %d bound, %d bind failures, %d filter retries, "
           "%d scheduling attempts, %.0f ms\n", NPODS, NPODS, b->bound, b->bind_failures, unschedulable, attempts, ms);
    int bound = b->bound;
    pthread_mutex_destroy(&b->mu);
    free(b);
    ext_state_free(st);
    curl_global_cleanup();
    CHECK_INT(bound, NPODS);
    CHECK_INT(s.bound, NPODS);
    CHECK_INT(s.overcommitted, 0);
    CHECK_MSG(consistent, "%s", why);
    CHECK_INT(extra_fits, 0);
}
