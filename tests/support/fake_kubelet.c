/* fake_kubelet.c -- the kubelet + device plugin of fake_kubelet.h: one polling thread, one mutex over its state.
 * Lock order: the kubelet's mutex, then the fake API server's (taken inside fake_api_*), never the reverse. */
#include "tests/support/fake_kubelet.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FK_POLL_MS 10

/* One device-plugin resource of one node. */
typedef struct fk_res {
    char node[256], name[256], prefix[128];
    int count;
    char **holder; /* per device: the holding pod's uid, NULL when free */
} fk_res;

/* A pod the kubelet has decided about (admitted or refused), by uid. */
typedef struct fk_pod {
    char uid[128], ns[256], name[256], node[256];
    bool live;        /* admitted and not terminated: holds its devices */
    bool reservation; /* tessera-reserve runs in it */
    bool reported;    /* tessera-reserve has written its annotation */
    int64_t admitted_ms;
    char *devices;    /* comma-joined device IDs ("" when none) */
    bool seen;        /* in the latest list */
} fk_pod;

struct fake_kubelet {
    fake_api *f;
    pthread_t thread;
    atomic_bool stop;
    pthread_mutex_t mu;
    fk_res *res;
    size_t nres;
    fk_pod *pods;
    size_t npods;
    int admitted, refused;
    bool random, outof, silent;
    uint64_t rng;
    int reserve_delay_ms;
    char **doubled; /* "node/device" keys counted by double_holds */
    size_t ndoubled;
};

static void *fk_xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) abort();
    return p;
}

static void *fk_xrealloc(void *p, size_t size) {
    p = realloc(p, size ? size : 1);
    if (!p) abort();
    return p;
}

static char *fk_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    return memcpy(fk_xcalloc(n, 1), s, n);
}

static int64_t fk_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *fk_str(const cJSON *obj, const char *a, const char *b) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, a), b);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* An extended resource (kubelet's IsExtendedResourceName): has a domain that is not kubernetes.io's, and is not
 * a "requests." quota name. */
static bool fk_extended(const char *name) {
    return strchr(name, '/') && !strstr(name, "kubernetes.io/") && strncmp(name, "requests.", 9) != 0;
}

/* A quantity of an extended resource: a whole number, as a JSON string or number. */
static long fk_qty(const cJSON *v) {
    if (cJSON_IsNumber(v)) return (long)v->valuedouble;
    if (cJSON_IsString(v)) return strtol(v->valuestring, NULL, 10);
    return 0;
}

/* A container's request of res: requests, else limits (the apiserver defaults requests to limits). */
static long fk_ctr_req(const cJSON *ctr, const char *res) {
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(ctr, "resources");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, "requests"), res);
    if (!v) v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, "limits"), res);
    return fk_qty(v);
}

/* The pod's effective request of res: the app containers' sum, at least the largest init container's. */
static long fk_pod_req(const cJSON *pod, const char *res) {
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(pod, "spec"), *c;
    long sum = 0, init = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(spec, "containers")) sum += fk_ctr_req(c, res);
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(spec, "initContainers")) {
        long r = fk_ctr_req(c, res);
        if (r > init) init = r;
    }
    return sum > init ? sum : init;
}

static fk_res *fk_find_res(fake_kubelet *k, const char *node, const char *name) {
    for (size_t i = 0; i < k->nres; i++)
        if (!strcmp(k->res[i].node, node) && !strcmp(k->res[i].name, name)) return &k->res[i];
    return NULL;
}

static bool fk_node_known(fake_kubelet *k, const char *node) {
    for (size_t i = 0; i < k->nres; i++)
        if (!strcmp(k->res[i].node, node)) return true;
    return false;
}

static fk_pod *fk_find_pod(fake_kubelet *k, const char *uid) {
    for (size_t i = 0; i < k->npods; i++)
        if (!strcmp(k->pods[i].uid, uid)) return &k->pods[i];
    return NULL;
}

static int fk_free_count(const fk_res *r) {
    int n = 0;
    for (int i = 0; i < r->count; i++) n += !r->holder[i];
    return n;
}

static void fk_release(fake_kubelet *k, fk_pod *p) {
    for (size_t i = 0; i < k->nres; i++)
        for (int d = 0; d < k->res[i].count; d++)
            if (k->res[i].holder[d] && !strcmp(k->res[i].holder[d], p->uid)) {
                free(k->res[i].holder[d]);
                k->res[i].holder[d] = NULL;
            }
    p->live = false;
}

static uint64_t fk_rand(fake_kubelet *k) { /* xorshift64 */
    k->rng ^= k->rng << 13;
    k->rng ^= k->rng >> 7;
    k->rng ^= k->rng << 17;
    return k->rng;
}

/* Patch the pod's status with a refusal. */
static void fk_refuse(fake_kubelet *k, const char *ns, const char *name, const char *reason, const char *msg) {
    cJSON *p = cJSON_CreateObject(), *st = cJSON_AddObjectToObject(p, "status");
    cJSON_AddStringToObject(st, "phase", "Failed");
    cJSON_AddStringToObject(st, "reason", reason);
    cJSON_AddStringToObject(st, "message", msg);
    char *s = cJSON_PrintUnformatted(p);
    fake_api_patch(k->f, "pods", ns, name, s);
    free(s);
    cJSON_Delete(p);
    k->refused++;
}

/* Caller holds mu. Decide about a new pod on a registered node, as kubelet admission and the device manager's
 * Allocate do; the decision is recorded by uid so it is made once. */
static void fk_admit(fake_kubelet *k, const cJSON *pod, const char *uid, const char *node) {
    const char *ns = fk_str(pod, "metadata", "namespace"), *name = fk_str(pod, "metadata", "name");
    char reason[300], msg[800];
    bool ok = true;

    /* removeMissingExtendedResources strips app containers only: an init container's unregistered extended
     * resource fails the predicate admission (capacity 0) */
    const cJSON *c, *q;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "spec"),
                                                           "initContainers")) {
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(c, "resources");
        const char *lists[2] = {"requests", "limits"};
        for (int l = 0; l < 2 && ok; l++)
            cJSON_ArrayForEach(q, cJSON_GetObjectItemCaseSensitive(r, lists[l])) {
                if (!fk_extended(q->string) || fk_find_res(k, node, q->string) || fk_qty(q) <= 0) continue;
                snprintf(reason, sizeof reason, "OutOf%s", q->string);
                snprintf(msg, sizeof msg, "Node didn't have enough resource: %s, requested: %ld, used: 0, "
                         "capacity: 0", q->string, fk_qty(q));
                ok = false;
                break;
            }
    }
    for (size_t i = 0; i < k->nres && ok; i++) {
        fk_res *r = &k->res[i];
        long want = strcmp(r->node, node) ? 0 : fk_pod_req(pod, r->name);
        int avail = fk_free_count(r);
        if (want <= avail) continue;
        ok = false;
        if (k->outof) {
            snprintf(reason, sizeof reason, "OutOf%s", r->name);
            snprintf(msg, sizeof msg, "Node didn't have enough resource: %s, requested: %ld, used: %d, capacity: %d",
                     r->name, want, r->count - avail, r->count);
        } else {
            snprintf(reason, sizeof reason, "UnexpectedAdmissionError");
            snprintf(msg, sizeof msg, "Allocate failed due to requested number of devices unavailable for %s. "
                     "Requested: %ld, Available: %d, which is unexpected", r->name, want, avail);
        }
    }

    k->pods = fk_xrealloc(k->pods, (k->npods + 1) * sizeof *k->pods);
    fk_pod *p = &k->pods[k->npods++];
    memset(p, 0, sizeof *p);
    snprintf(p->uid, sizeof p->uid, "%s", uid);
    snprintf(p->ns, sizeof p->ns, "%s", ns);
    snprintf(p->name, sizeof p->name, "%s", name);
    snprintf(p->node, sizeof p->node, "%s", node);
    p->seen = true;
    p->devices = fk_strdup("");
    if (!ok) {
        fk_refuse(k, ns, name, reason, msg);
        return;
    }

    size_t len = 0;
    for (size_t i = 0; i < k->nres; i++) {
        fk_res *r = &k->res[i];
        long want = strcmp(r->node, node) ? 0 : fk_pod_req(pod, r->name);
        for (long n = 0; n < want; n++) {
            int d = 0;
            if (k->random) {
                int pick = (int)(fk_rand(k) % (uint64_t)fk_free_count(r));
                for (d = 0; r->holder[d] || pick-- > 0; d++) {}
            } else {
                while (r->holder[d]) d++;
            }
            r->holder[d] = fk_strdup(uid);
            char id[200];
            snprintf(id, sizeof id, "%s-%d", r->prefix, d);
            p->devices = fk_xrealloc(p->devices, len + strlen(id) + 2);
            len += (size_t)sprintf(p->devices + len, "%s%s", len ? "," : "", id);
        }
    }
    p->live = true;
    p->admitted_ms = fk_now_ms();
    const char *label = fk_str(cJSON_GetObjectItemCaseSensitive(pod, "metadata"), "labels", "tessera.io/reservation");
    p->reservation = strcmp(label, "true") == 0;
    fake_api_patch(k->f, "pods", ns, name, "{\"status\":{\"phase\":\"Running\"}}");
    k->admitted++;
}

/* Caller holds mu. tessera-reserve reads NVIDIA_VISIBLE_DEVICES and annotates its own pod. */
static void fk_report(fake_kubelet *k, fk_pod *p) {
    cJSON *patch = cJSON_CreateObject();
    cJSON *ann = cJSON_AddObjectToObject(cJSON_AddObjectToObject(patch, "metadata"), "annotations");
    if (p->devices[0]) cJSON_AddStringToObject(ann, "tessera.io/gpu-uuid", p->devices);
    else cJSON_AddStringToObject(ann, "tessera.io/reserve-error", "no GPU is visible to the container");
    char *s = cJSON_PrintUnformatted(patch);
    fake_api_patch(k->f, "pods", p->ns, p->name, s);
    free(s);
    cJSON_Delete(patch);
    p->reported = true;
}

/* Caller holds mu. Count device IDs listed by two live pods (each ID once, ever). */
static void fk_check_doubles(fake_kubelet *k) {
    for (size_t i = 0; i < k->npods; i++) {
        if (!k->pods[i].live || !k->pods[i].devices[0]) continue;
        char *list = fk_strdup(k->pods[i].devices), *save = NULL;
        for (char *id = strtok_r(list, ",", &save); id; id = strtok_r(NULL, ",", &save)) {
            size_t idlen = strlen(id);
            bool twice = false;
            for (size_t j = i + 1; j < k->npods && !twice; j++) {
                const char *d = k->pods[j].devices, *hit;
                if (!k->pods[j].live || strcmp(k->pods[j].node, k->pods[i].node)) continue;
                for (hit = strstr(d, id); hit && !twice; hit = strstr(hit + 1, id))
                    twice = (hit == d || hit[-1] == ',') && (hit[idlen] == ',' || !hit[idlen]);
            }
            if (!twice) continue;
            char key[600];
            snprintf(key, sizeof key, "%s/%s", k->pods[i].node, id);
            bool counted = false;
            for (size_t d = 0; d < k->ndoubled && !counted; d++) counted = !strcmp(k->doubled[d], key);
            if (counted) continue;
            k->doubled = fk_xrealloc(k->doubled, (k->ndoubled + 1) * sizeof *k->doubled);
            k->doubled[k->ndoubled++] = fk_strdup(key);
        }
        free(list);
    }
}

/* One look at the pods. */
static void fk_pass(fake_kubelet *k) {
    char *s = fake_api_list(k->f, "pods");
    cJSON *pods = s ? cJSON_Parse(s) : NULL;
    free(s);
    pthread_mutex_lock(&k->mu);
    for (size_t i = 0; i < k->npods; i++) k->pods[i].seen = false;
    const cJSON *pod;
    cJSON_ArrayForEach(pod, pods) {
        const char *uid = fk_str(pod, "metadata", "uid"), *node = fk_str(pod, "spec", "nodeName");
        const char *phase = fk_str(pod, "status", "phase");
        fk_pod *p = fk_find_pod(k, uid);
        if (p) p->seen = true;
        if (!*uid || !fk_node_known(k, node)) continue;
        if (!p) {
            if (!*phase || !strcmp(phase, "Pending")) fk_admit(k, pod, uid, node);
            continue;
        }
        if (p->live && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed"))) fk_release(k, p);
    }
    /* pods gone from the list free their devices and are forgotten */
    size_t keep = 0;
    for (size_t i = 0; i < k->npods; i++) {
        if (k->pods[i].seen) { k->pods[keep++] = k->pods[i]; continue; }
        fk_release(k, &k->pods[i]);
        free(k->pods[i].devices);
    }
    k->npods = keep;
    int64_t now = fk_now_ms();
    for (size_t i = 0; i < k->npods; i++) {
        fk_pod *p = &k->pods[i];
        if (p->live && p->reservation && !p->reported && !k->silent && now - p->admitted_ms >= k->reserve_delay_ms)
            fk_report(k, p);
    }
    fk_check_doubles(k);
    pthread_mutex_unlock(&k->mu);
    cJSON_Delete(pods);
}

static void *fk_main(void *arg) {
    fake_kubelet *k = arg;
    while (!atomic_load(&k->stop)) {
        fk_pass(k);
        struct timespec nap = {0, FK_POLL_MS * 1000000L};
        nanosleep(&nap, NULL);
    }
    return NULL;
}

fake_kubelet *fake_kubelet_start(fake_api *f) {
    fake_kubelet *k = fk_xcalloc(1, sizeof *k);
    k->f = f;
    k->rng = 0x9e3779b97f4a7c15u;
    pthread_mutex_init(&k->mu, NULL);
    atomic_init(&k->stop, false);
    if (pthread_create(&k->thread, NULL, fk_main, k) != 0) abort();
    return k;
}

void fake_kubelet_stop(fake_kubelet *k) {
    if (!k) return;
    atomic_store(&k->stop, true);
    pthread_join(k->thread, NULL);
    for (size_t i = 0; i < k->nres; i++) {
        for (int d = 0; d < k->res[i].count; d++) free(k->res[i].holder[d]);
        free(k->res[i].holder);
    }
    free(k->res);
    for (size_t i = 0; i < k->npods; i++) free(k->pods[i].devices);
    free(k->pods);
    for (size_t i = 0; i < k->ndoubled; i++) free(k->doubled[i]);
    free(k->doubled);
    pthread_mutex_destroy(&k->mu);
    free(k);
}

void fake_kubelet_add_node(fake_kubelet *k, const char *node_name, const char *resource, int count,
                           const char *uuid_prefix) {
    if (!node_name || !resource || !uuid_prefix || count < 0) return;
    pthread_mutex_lock(&k->mu);
    k->res = fk_xrealloc(k->res, (k->nres + 1) * sizeof *k->res);
    fk_res *r = &k->res[k->nres++];
    memset(r, 0, sizeof *r);
    snprintf(r->node, sizeof r->node, "%s", node_name);
    snprintf(r->name, sizeof r->name, "%s", resource);
    snprintf(r->prefix, sizeof r->prefix, "%s", uuid_prefix);
    r->count = count;
    r->holder = fk_xcalloc((size_t)count, sizeof *r->holder);
    pthread_mutex_unlock(&k->mu);
}

void fake_kubelet_set_random(fake_kubelet *k, unsigned seed) {
    pthread_mutex_lock(&k->mu);
    k->random = true;
    k->rng = 0x9e3779b97f4a7c15u ^ ((uint64_t)seed * 0xff51afd7ed558ccdu); /* never 0: xorshift's fixed point */
    if (!k->rng) k->rng = 1;
    pthread_mutex_unlock(&k->mu);
}

void fake_kubelet_set_outof_reason(fake_kubelet *k, bool on) {
    pthread_mutex_lock(&k->mu);
    k->outof = on;
    pthread_mutex_unlock(&k->mu);
}

void fake_kubelet_set_reserve_delay_ms(fake_kubelet *k, int ms) {
    pthread_mutex_lock(&k->mu);
    k->reserve_delay_ms = ms > 0 ? ms : 0;
    pthread_mutex_unlock(&k->mu);
}

void fake_kubelet_set_reserve_silent(fake_kubelet *k, bool on) {
    pthread_mutex_lock(&k->mu);
    k->silent = on;
    pthread_mutex_unlock(&k->mu);
}

char *fake_kubelet_holder(fake_kubelet *k, const char *node, const char *device_id) {
    char *out = NULL;
    pthread_mutex_lock(&k->mu);
    for (size_t i = 0; i < k->nres && !out; i++) {
        fk_res *r = &k->res[i];
        size_t pl = strlen(r->prefix);
        if (strcmp(r->node, node) || strncmp(device_id, r->prefix, pl) || device_id[pl] != '-') continue;
        char *end = NULL;
        long d = strtol(device_id + pl + 1, &end, 10);
        if (end && !*end && end != device_id + pl + 1 && d >= 0 && d < r->count && r->holder[d])
            out = fk_strdup(r->holder[d]);
    }
    pthread_mutex_unlock(&k->mu);
    return out;
}

char *fake_kubelet_devices(fake_kubelet *k, const char *pod_uid) {
    pthread_mutex_lock(&k->mu);
    fk_pod *p = pod_uid ? fk_find_pod(k, pod_uid) : NULL;
    char *out = p && p->live && p->devices[0] ? fk_strdup(p->devices) : NULL;
    pthread_mutex_unlock(&k->mu);
    return out;
}

int fake_kubelet_double_holds(fake_kubelet *k) {
    pthread_mutex_lock(&k->mu);
    int n = (int)k->ndoubled;
    pthread_mutex_unlock(&k->mu);
    return n;
}

int fake_kubelet_admitted(fake_kubelet *k) {
    pthread_mutex_lock(&k->mu);
    int n = k->admitted;
    pthread_mutex_unlock(&k->mu);
    return n;
}

int fake_kubelet_refused(fake_kubelet *k) {
    pthread_mutex_lock(&k->mu);
    int n = k->refused;
    pthread_mutex_unlock(&k->mu);
    return n;
}
