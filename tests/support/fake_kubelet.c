/* fake_kubelet.c -- the kubelet + device plugin of fake_kubelet.h: one polling thread, one mutex over its state.
 * Lock order: the kubelet's mutex, then the fake API server's (taken inside fake_api_*), never the reverse. */
#include "tests/support/fake_kubelet.h"
#include "tests/support/fake_runtime.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#define FK_POLL_MS 10
#define FK_GRACE_CAP_MS 3000 /* exec mode: terminationGracePeriodSeconds, at most this in tests */
#define FK_RESTART_MS 1000   /* exec mode: a restart after 1 s, whatever back-off the status message names */

/* One device-plugin resource of one node. */
typedef struct fk_res {
    char node[256], name[256], prefix[128];
    int count;
    char **holder; /* per device: the holding pod's uid, NULL when free */
} fk_res;

/* Device d's ID: "<prefix>-<d>"; a prefix that is a GPU UUID but for its last two hex digits (GPU-8-4-4-4-10, 38
 * characters) gets them as d in hex instead, so its devices are UUIDs as NVIDIA's device plugin names them (what the
 * fake driver, tests/support/fake_gpu.h, accepts). */
static void fk_device_id(const fk_res *r, int d, char *buf, size_t len) {
    size_t n = strlen(r->prefix);
    bool uuid = n == 38 && !strncmp(r->prefix, "GPU-", 4);
    for (size_t i = 4; uuid && i < n; i++)
        uuid = (i == 12 || i == 17 || i == 22 || i == 27) ? r->prefix[i] == '-' : isxdigit((unsigned char)r->prefix[i]) != 0;
    if (uuid && d < 256) snprintf(buf, len, "%s%02x", r->prefix, (unsigned)d);
    else snprintf(buf, len, "%s-%d", r->prefix, d);
}

/* An image as the node's container runtime knows it. */
typedef struct fk_image {
    char name[256];
    int pull_ms;          /* a first pull on a node takes this long */
    bool pullable;        /* false: ErrImagePull, then ImagePullBackOff, for ever */
    char binaries[512];   /* comma-joined paths a command may name; "" = any */
} fk_image;

/* An image pulled (or being pulled) on a node. */
typedef struct fk_pulled { char node[256], image[256]; int64_t done_ms; } fk_pulled;

/* FK_EXITED (exec mode): the process ended; restarts after next_ms when `restart`, else terminated for good. */
typedef enum fk_cstate { FK_PULLING = 0, FK_PULL_FAILED, FK_NO_BINARY, FK_CONFIG, FK_RUNNING, FK_DONE, FK_EXITED } fk_cstate;

/* One container of an admitted pod, on its way to running. */
typedef struct fk_ctr {
    char name[128], image[256];
    bool init, sidecar;     /* an init container; one with restartPolicy: Always (a native sidecar) */
    fk_cstate st;
    int64_t next_ms;        /* the next retry (config) or the pull's end */
    int backoff_ms, restarts;
    char reason[64], message[1024];
    char last_exit[1024];   /* a crash loop's start error (lastState.terminated.message) */
    int64_t started_ms;
    cJSON *env;             /* the environment it started with (RUNNING), name -> value */
    cJSON *def;             /* its spec (owned copy) */
    /* exec mode */
    pid_t pid;              /* the running process (its process group too), 0 when none */
    bool restart;           /* FK_EXITED: it will be started again */
    int exit_code;          /* the last run's, -1 before one ended */
    char started_at[32], finished_at[32], last_started_at[32];
} fk_ctr;

/* A pod the kubelet has decided about (admitted or refused), by uid. */
typedef struct fk_pod {
    char uid[128], ns[256], name[256], node[256];
    bool live;        /* admitted and not terminated: holds its devices */
    bool reservation; /* tessera-reserve runs in it */
    bool reported;    /* tessera-reserve has written its annotation */
    int64_t admitted_ms;
    char *devices;    /* comma-joined device IDs ("" when none) */
    bool seen;        /* in the latest list */
    fk_ctr *ctrs;     /* init containers in order, then the app containers */
    int nctrs;
    bool status_dirty;
    char phase[16];   /* what it last wrote */
    /* exec mode */
    bool exec;        /* its node runs containers for real */
    bool volumes_ready;
    int64_t mount_next_ms; /* a failed mount's next try */
    char marker[160]; /* FAKE_KUBELET_POD_UID of its processes */
    char restart_policy[16];
    int grace_ms;
    cJSON *obj;       /* the pod as admitted (owned): volumes, securityContext, fieldRef sources */
} fk_pod;

/* A node in exec mode. */
typedef struct fk_exec_node { char node[256]; fk_rt_node rt; } fk_exec_node;

/* A process of a pod that was deleted (or of a container stopped with its pod): SIGTERM sent, SIGKILL at deadline. */
typedef struct fk_dying { pid_t pid; int64_t deadline_ms; char marker[160]; } fk_dying;

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
    fk_image *images;
    size_t nimages;
    fk_pulled *pulled;
    size_t npulled;
    fk_exec_node *exec;
    size_t nexec;
    fk_rt_prog *progs;
    size_t nprogs;
    fk_dying *dying;
    size_t ndying;
    unsigned serial;  /* this kubelet's number in the process: with the process id, part of its pods' markers */
};

static atomic_uint fk_serials;

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

/* The string at obj.a.b (obj.a when b is NULL), "" when there is none. */
static const char *fk_str(const cJSON *obj, const char *a, const char *b) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, a);
    if (b) v = cJSON_GetObjectItemCaseSensitive(v, b);
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

/* The pod's effective request of res, as the kubelet computes it with native sidecars (KEP-753,
 * resourcehelper.PodRequests): the app containers and every sidecar (an init container with restartPolicy
 * Always) run together; an ordinary init container runs beside the sidecars started before it. */
static long fk_pod_req(const cJSON *pod, const char *res) {
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(pod, "spec"), *c;
    long sum = 0, init = 0, sidecars = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(spec, "containers")) sum += fk_ctr_req(c, res);
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(spec, "initContainers")) {
        long r = fk_ctr_req(c, res);
        const cJSON *rp = cJSON_GetObjectItemCaseSensitive(c, "restartPolicy");
        if (cJSON_IsString(rp) && !strcmp(rp->valuestring, "Always")) {
            sidecars += r;
            if (sidecars > init) init = sidecars;
        } else if (sidecars + r > init) {
            init = sidecars + r;
        }
    }
    return sum + sidecars > init ? sum + sidecars : init;
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

/* ---- containers: images, commands, configuration, start ------------------------------------------------- */

static fk_image *fk_find_image(fake_kubelet *k, const char *name) {
    for (size_t i = 0; i < k->nimages; i++)
        if (!strcmp(k->images[i].name, name)) return &k->images[i];
    return NULL;
}

/* When the image will be on the node (a first pull starts now). */
static int64_t fk_pull_done(fake_kubelet *k, const char *node, const char *image, int64_t now) {
    for (size_t i = 0; i < k->npulled; i++)
        if (!strcmp(k->pulled[i].node, node) && !strcmp(k->pulled[i].image, image)) return k->pulled[i].done_ms;
    fk_image *im = fk_find_image(k, image);
    k->pulled = fk_xrealloc(k->pulled, (k->npulled + 1) * sizeof *k->pulled);
    fk_pulled *pl = &k->pulled[k->npulled++];
    snprintf(pl->node, sizeof pl->node, "%s", node);
    snprintf(pl->image, sizeof pl->image, "%s", image);
    pl->done_ms = now + (im ? im->pull_ms : 0);
    return pl->done_ms;
}

static void fk_set(fk_ctr *c, fk_cstate st, const char *reason, const char *msg) {
    c->st = st;
    snprintf(c->reason, sizeof c->reason, "%s", reason ? reason : "");
    snprintf(c->message, sizeof c->message, "%s", msg ? msg : "");
}

/* The ConfigMap ns/name's data, or NULL (caller deletes). */
static cJSON *fk_configmap_data(fake_kubelet *k, const char *ns, const char *name) {
    char *t = fake_api_get(k->f, "configmaps", ns, name);
    cJSON *cm = t ? cJSON_Parse(t) : NULL;
    free(t);
    cJSON *data = cm ? cJSON_DetachItemFromObjectCaseSensitive(cm, "data") : NULL;
    cJSON_Delete(cm);
    return cm && !data ? cJSON_CreateObject() : data;
}

static void fk_env_set(cJSON *env, const char *name, const char *value) {
    if (cJSON_GetObjectItemCaseSensitive(env, name)) cJSON_ReplaceItemInObjectCaseSensitive(env, name, cJSON_CreateString(value));
    else cJSON_AddStringToObject(env, name, value);
}

/* The value of a downward-API fieldRef (the paths the API server accepts for env), NULL for another. */
static const char *fk_field_ref(const fk_pod *p, const char *path, char *buf, size_t len) {
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(p->obj, "metadata");
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(p->obj, "spec");
    if (!strcmp(path, "metadata.name")) return p->name;
    if (!strcmp(path, "metadata.namespace")) return p->ns;
    if (!strcmp(path, "metadata.uid")) return p->uid;
    if (!strcmp(path, "spec.nodeName")) return p->node;
    if (!strcmp(path, "spec.serviceAccountName")) return fk_str(spec, "serviceAccountName", NULL);
    if (!strcmp(path, "status.podIP") || !strcmp(path, "status.hostIP")) return "127.0.0.1";
    static const char *const maps[2] = {"metadata.labels['", "metadata.annotations['"};
    for (int i = 0; i < 2; i++) {
        size_t pl = strlen(maps[i]), l = strlen(path);
        if (strncmp(path, maps[i], pl) || l < pl + 2 || strcmp(path + l - 2, "']")) continue;
        snprintf(buf, len, "%.*s", (int)(l - pl - 2), path + pl);
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(meta, i ? "annotations" : "labels"), buf);
        return cJSON_IsString(v) ? v->valuestring : "";
    }
    return NULL;
}

/* makeEnvironmentVariables: the device plugin's variables, then envFrom, then env (later wins). A
 * ConfigMap that is not there and not optional stops the container (CreateContainerConfigError), message as
 * the kubelet writes it. NULL with msg. */
static cJSON *fk_make_env(fake_kubelet *k, const fk_pod *p, const fk_ctr *c, char *msg, size_t msglen) {
    cJSON *env = cJSON_CreateObject();
    bool wants_device = false;
    for (size_t i = 0; i < k->nres; i++)
        if (!strcmp(k->res[i].node, p->node) && fk_ctr_req(c->def, k->res[i].name) > 0) wants_device = true;
    if (wants_device && p->devices[0]) fk_env_set(env, "NVIDIA_VISIBLE_DEVICES", p->devices);
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(c->def, "envFrom")) {
        const cJSON *ref = cJSON_GetObjectItemCaseSensitive(e, "configMapRef");
        const char *name = fk_str(e, "configMapRef", "name");
        if (!ref || !*name) continue;
        cJSON *data = fk_configmap_data(k, p->ns, name);
        if (!data) {
            if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ref, "optional"))) continue;
            snprintf(msg, msglen, "configmap \"%s\" not found", name);
            cJSON_Delete(env);
            return NULL;
        }
        const cJSON *kv;
        cJSON_ArrayForEach(kv, data)
            if (cJSON_IsString(kv)) fk_env_set(env, kv->string, kv->valuestring);
        cJSON_Delete(data);
    }
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(c->def, "env")) {
        const char *name = fk_str(e, "name", NULL), *value = NULL;
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, "value");
        const cJSON *from = cJSON_GetObjectItemCaseSensitive(e, "valueFrom");
        const cJSON *ref = cJSON_GetObjectItemCaseSensitive(from, "configMapKeyRef");
        const cJSON *field = cJSON_GetObjectItemCaseSensitive(from, "fieldRef");
        if (!name) continue;
        if (cJSON_IsString(v)) value = v->valuestring;
        char fbuf[256];
        if (field && !(value = fk_field_ref(p, fk_str(field, "fieldPath", NULL), fbuf, sizeof fbuf)) && p->exec) {
            /* a process would run without it: say so rather than start it wrong */
            snprintf(msg, msglen, "fake kubelet exec mode: fieldRef %s of variable %s is not played",
                     fk_str(field, "fieldPath", NULL), name);
            cJSON_Delete(env);
            return NULL;
        }
        if (from && !ref && !field && p->exec) {
            snprintf(msg, msglen, "fake kubelet exec mode: valueFrom of variable %s is not played (configMapKeyRef "
                     "and fieldRef only)", name);
            cJSON_Delete(env);
            return NULL;
        }
        cJSON *data = NULL;
        if (ref) {
            const char *cm = fk_str(ref, "name", NULL), *key = fk_str(ref, "key", NULL);
            data = cm ? fk_configmap_data(k, p->ns, cm) : NULL;
            const cJSON *dv = cJSON_GetObjectItemCaseSensitive(data, key ? key : "");
            if (!cJSON_IsString(dv) && !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ref, "optional"))) {
                snprintf(msg, msglen, data ? "couldn't find key %s in ConfigMap %s/%s" : "configmap \"%s\" not found",
                         data ? key : cm, p->ns, cm);
                cJSON_Delete(data);
                cJSON_Delete(env);
                return NULL;
            }
            if (cJSON_IsString(dv)) value = dv->valuestring;
        }
        if (value) fk_env_set(env, name, value);
        cJSON_Delete(data);
    }
    return env;
}

/* ---- exec mode: containers as processes (fake_runtime.h) ---------------------------------------------------- */

static fk_exec_node *fk_exec_find(fake_kubelet *k, const char *node) {
    for (size_t i = 0; i < k->nexec; i++)
        if (!strcmp(k->exec[i].node, node)) return &k->exec[i];
    return NULL;
}

static void fk_rfc3339(char *buf, size_t len) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static cJSON *fk_cm_lookup(void *user, const char *ns, const char *name) {
    return fk_configmap_data(user, ns, name);
}

/* Caller holds mu. SIGTERM now, SIGKILL to its process group at the deadline (fk_reap_dying). */
static void fk_terminate(fake_kubelet *k, pid_t pid, int grace_ms, const char *marker) {
    if (pid <= 0) return;
    kill(pid, SIGTERM);
    k->dying = fk_xrealloc(k->dying, (k->ndying + 1) * sizeof *k->dying);
    fk_dying *d = &k->dying[k->ndying++];
    d->pid = pid;
    d->deadline_ms = fk_now_ms() + grace_ms;
    snprintf(d->marker, sizeof d->marker, "%s", marker);
}

/* Caller holds mu. Reap what ended, kill what outlived its grace; the last process of a pod gone takes anything
 * still carrying the pod's marker with it (the pod's cgroup going). wait: block until all are gone. */
static void fk_reap_dying(fake_kubelet *k, bool wait) {
    do {
        int64_t now = fk_now_ms();
        for (size_t i = 0; i < k->ndying;) {
            fk_dying *d = &k->dying[i];
            int st;
            pid_t r = waitpid(d->pid, &st, WNOHANG);
            if (r == 0 && now < d->deadline_ms) { i++; continue; }
            kill(-d->pid, SIGKILL);
            if (r == 0) while (waitpid(d->pid, &st, 0) < 0 && errno == EINTR) {}
            char marker[sizeof d->marker];
            snprintf(marker, sizeof marker, "%s", d->marker);
            k->dying[i] = k->dying[--k->ndying];
            bool more = false;
            for (size_t j = 0; j < k->ndying && !more; j++) more = !strcmp(k->dying[j].marker, marker);
            if (!more) fk_rt_kill_pod(marker);
        }
        if (wait && k->ndying) {
            struct timespec nap = {0, 10 * 1000000L};
            nanosleep(&nap, NULL);
        }
    } while (wait && k->ndying);
}

/* Caller holds mu. Every process of the pod goes (deleted, terminal, or the kubelet stops). */
static void fk_exec_stop_pod(fake_kubelet *k, fk_pod *p) {
    for (int i = 0; i < p->nctrs; i++) {
        fk_ctr *c = &p->ctrs[i];
        if (c->pid > 0) fk_terminate(k, c->pid, p->grace_ms, p->marker);
        c->pid = 0;
    }
}

static bool fk_exec_start(fake_kubelet *k, fk_pod *p, fk_ctr *c, int64_t now) {
    const fk_exec_node *x = fk_exec_find(k, p->node);
    char msg[1024] = "fake kubelet exec mode: the node is not in exec mode";
    pid_t pid = x ? fk_rt_start(&x->rt, k->progs, k->nprogs, p->obj, c->def, c->env, p->marker, msg, sizeof msg) : -1;
    if (pid < 0) {   /* as a command the image lacks: RunContainerError, then the crash loop */
        fk_set(c, FK_NO_BINARY, "RunContainerError", msg);
        c->next_ms = now + FK_RESTART_MS;
        return true;
    }
    c->pid = pid;
    fk_rfc3339(c->started_at, sizeof c->started_at);
    fk_set(c, FK_RUNNING, "", "");
    return true;
}

/* Caller holds mu. Has the container's process ended? Then its exit is recorded as the kubelet records it and the
 * restart policy decides (a native sidecar always restarts; an init container unless Never; an app container by
 * the pod's policy). True when the status changed. */
static bool fk_exec_reap(fk_pod *p, fk_ctr *c, int64_t now) {
    int st;
    if (c->st != FK_RUNNING || c->pid <= 0 || waitpid(c->pid, &st, WNOHANG) != c->pid) return false;
    kill(-c->pid, SIGKILL); /* the rest of the container's processes: its PID namespace goes */
    c->pid = 0;
    c->exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    fk_rfc3339(c->finished_at, sizeof c->finished_at);
    snprintf(c->last_started_at, sizeof c->last_started_at, "%s", c->started_at);
    bool ok = c->exit_code == 0;
    if (c->init && !c->sidecar && ok) {
        fk_set(c, FK_DONE, "", "");
        return true;
    }
    const char *pol = p->restart_policy;
    c->restart = c->sidecar || (c->init ? strcmp(pol, "Never") != 0
                                        : !strcmp(pol, "Always") || (!strcmp(pol, "OnFailure") && !ok));
    if (!c->restart) {
        fk_set(c, FK_EXITED, ok ? "Completed" : "Error", "");
        return true;
    }
    char msg[1024];   /* the kubelet's back-off message (kuberuntime_manager.go doBackOff) */
    snprintf(msg, sizeof msg, "back-off %ds restarting failed container=%s pod=%s_%s(%s)",
             c->restarts < 5 ? 10 << c->restarts : 300, c->name, p->name, p->ns, p->uid);
    fk_set(c, FK_EXITED, "CrashLoopBackOff", msg);
    c->next_ms = now + FK_RESTART_MS;
    return true;
}

/* Exec mode's phase: Failed once an init container failed for good; Succeeded/Failed once every app container
 * ended for good (Succeeded when all exited 0); Running once an app container started; else Pending. */
static const char *fk_exec_phase(const fk_pod *p) {
    int apps = 0, ended = 0, failed = 0;
    bool started = false;
    for (int i = 0; i < p->nctrs; i++) {
        const fk_ctr *c = &p->ctrs[i];
        bool over = c->st == FK_EXITED && !c->restart;
        if (c->init && !c->sidecar && over) return "Failed";
        if (c->init) continue;
        apps++;
        started |= c->st == FK_RUNNING || c->st == FK_EXITED || c->restarts > 0;
        ended += over;
        failed += over && c->exit_code != 0;
    }
    if (apps && ended == apps) return failed ? "Failed" : "Succeeded";
    return started ? "Running" : "Pending";
}

/* One step of one container; true when what the API shows of it changed. */
static bool fk_ctr_step(fake_kubelet *k, fk_pod *p, fk_ctr *c, int64_t now) {
    if (c->st == FK_RUNNING || c->st == FK_DONE || now < c->next_ms) return false;
    if (c->st == FK_EXITED) {   /* exec mode: started again (with a fresh environment) or never */
        if (!c->restart) return false;
        c->restarts++;
        c->st = FK_CONFIG;
    }
    fk_image *im = fk_find_image(k, c->image);
    if (c->st == FK_PULLING || c->st == FK_PULL_FAILED) {
        int64_t done = fk_pull_done(k, p->node, c->image, now);
        if (now < done) {
            bool was = !strcmp(c->reason, "ContainerCreating");
            fk_set(c, FK_PULLING, "ContainerCreating", "");
            c->next_ms = done;
            return !was;
        }
        if (im && !im->pullable) {
            char msg[512];
            bool first = c->st == FK_PULLING;
            snprintf(msg, sizeof msg, first ? "failed to pull and unpack image \"%s\": failed to resolve reference: "
                     "pull access denied, repository does not exist or may require authorization"
                     : "Back-off pulling image \"%s\"", c->image);
            fk_set(c, FK_PULL_FAILED, first ? "ErrImagePull" : "ImagePullBackOff", msg);
            c->next_ms = now + 1000;
            return true;
        }
        /* the image is there: does it hold the command? */
        const cJSON *cmd = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(c->def, "command"), 0);
        if (im && im->binaries[0] && cJSON_IsString(cmd)) {
            char list[520];
            snprintf(list, sizeof list, ",%s,", im->binaries);
            char needle[300];
            snprintf(needle, sizeof needle, ",%s,", cmd->valuestring);
            if (!strstr(list, needle)) {
                char msg[512];
                snprintf(msg, sizeof msg, "failed to create containerd task: failed to create shim task: OCI runtime "
                         "create failed: runc create failed: unable to start container process: exec: \"%s\": stat %s: "
                         "no such file or directory: unknown", cmd->valuestring, cmd->valuestring);
                fk_set(c, FK_NO_BINARY, "RunContainerError", msg);
                c->next_ms = now + 1000;
                return true;
            }
        }
        c->st = FK_CONFIG;
        c->backoff_ms = 0;
    }
    if (c->st == FK_NO_BINARY) {   /* it exits at once, again and again: the start error goes to lastState */
        if (!c->restarts) snprintf(c->last_exit, sizeof c->last_exit, "%s", c->message);
        c->restarts++;
        char msg[1024];   /* the kubelet's back-off message (kuberuntime_manager.go doBackOff) */
        snprintf(msg, sizeof msg, "back-off %ds restarting failed container=%s pod=%s_%s(%s)",
                 c->restarts < 5 ? 10 << (c->restarts - 1) : 300, c->name, p->name, p->ns, p->uid);
        fk_set(c, FK_NO_BINARY, "CrashLoopBackOff", msg);
        c->next_ms = now + 1000;
        return c->restarts == 1;
    }
    /* FK_CONFIG: build the environment; a missing ConfigMap waits for the next retry */
    char msg[512] = "";
    cJSON *env = fk_make_env(k, p, c, msg, sizeof msg);
    if (!env) {
        bool same = !strcmp(c->reason, "CreateContainerConfigError") && !strcmp(c->message, msg);
        fk_set(c, FK_CONFIG, "CreateContainerConfigError", msg);
        c->backoff_ms = c->backoff_ms ? (c->backoff_ms * 2 > 8000 ? 8000 : c->backoff_ms * 2) : 1000;
        c->next_ms = now + c->backoff_ms;
        return !same;
    }
    cJSON_Delete(c->env);
    c->env = env;
    c->started_ms = now;
    if (p->exec) return fk_exec_start(k, p, c, now);
    fk_set(c, c->init && !c->sidecar ? FK_DONE : FK_RUNNING, "", "");
    return true;
}

/* Caller holds mu. Init containers one after another (a native sidecar must be running, an ordinary one must
 * have completed, before the next starts), then the app containers together. */
static void fk_pod_step(fake_kubelet *k, fk_pod *p, int64_t now) {
    if (p->exec) {
        for (int i = 0; i < p->nctrs; i++)
            if (fk_exec_reap(p, &p->ctrs[i], now)) p->status_dirty = true;
        if (strcmp(fk_exec_phase(p), "Running") && strcmp(fk_exec_phase(p), "Pending")) return;
        /* the pod's volumes before any container: a failed mount holds them all in ContainerCreating */
        if (!p->volumes_ready && now < p->mount_next_ms) return;
        if (!p->volumes_ready) {
            const fk_exec_node *x = fk_exec_find(k, p->node);
            char msg[1024];
            if (x && fk_rt_pod_setup(&x->rt, p->obj, fk_cm_lookup, k, msg, sizeof msg) != 0) {
                for (int i = 0; i < p->nctrs; i++) fk_set(&p->ctrs[i], FK_PULLING, "ContainerCreating", msg);
                p->mount_next_ms = now + FK_RESTART_MS;
                p->status_dirty = true;
                return;
            }
            p->volumes_ready = true;
        }
    }
    for (int i = 0; i < p->nctrs; i++) {
        fk_ctr *c = &p->ctrs[i];
        if (fk_ctr_step(k, p, c, now)) p->status_dirty = true;
        /* the next init container waits for this one: completed, or (a native sidecar) running */
        if (c->init && c->st != FK_DONE && !(c->sidecar && c->st == FK_RUNNING)) return;
    }
}

/* A terminated state (exec mode: the run that ended). */
static void fk_add_terminated(cJSON *parent, const fk_ctr *c, const char *reason) {
    cJSON *t = cJSON_AddObjectToObject(parent, "terminated");
    cJSON_AddNumberToObject(t, "exitCode", c->exit_code < 0 ? 0 : c->exit_code);
    cJSON_AddStringToObject(t, "reason", reason);
    if (c->last_started_at[0]) cJSON_AddStringToObject(t, "startedAt", c->last_started_at);
    if (c->finished_at[0]) cJSON_AddStringToObject(t, "finishedAt", c->finished_at);
}

static cJSON *fk_ctr_status(const fk_ctr *c) {
    cJSON *s = cJSON_CreateObject(), *state = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "name", c->name);
    cJSON_AddStringToObject(s, "image", c->image);
    cJSON_AddBoolToObject(s, "ready", c->st == FK_RUNNING);
    cJSON_AddBoolToObject(s, "started", c->st == FK_RUNNING);
    cJSON_AddNumberToObject(s, "restartCount", c->restarts);
    const char *last_reason = c->exit_code == 0 ? "Completed" : "Error";
    if (c->st == FK_RUNNING) {
        cJSON_AddStringToObject(cJSON_AddObjectToObject(state, "running"), "startedAt",
                                c->started_at[0] ? c->started_at : "2026-01-01T00:00:00Z");
    } else if (c->st == FK_DONE && c->exit_code >= 0) {
        fk_add_terminated(state, c, "Completed");
    } else if (c->st == FK_DONE) {
        cJSON *t = cJSON_AddObjectToObject(state, "terminated");
        cJSON_AddStringToObject(t, "reason", "Completed");
        cJSON_AddNumberToObject(t, "exitCode", 0);
    } else if (c->st == FK_EXITED && !c->restart) {
        fk_add_terminated(state, c, last_reason);
    } else {
        cJSON *w = cJSON_AddObjectToObject(state, "waiting");
        cJSON_AddStringToObject(w, "reason", c->reason[0] ? c->reason : "PodInitializing");
        if (c->message[0]) cJSON_AddStringToObject(w, "message", c->message);
    }
    cJSON_AddItemToObject(s, "state", state);
    if (c->exit_code >= 0 && c->st != FK_DONE && !(c->st == FK_EXITED && !c->restart)) {
        /* exec mode: the run before this one (a restart, or the back-off before it) */
        fk_add_terminated(cJSON_AddObjectToObject(s, "lastState"), c, last_reason);
    } else if (c->st == FK_NO_BINARY && c->restarts > 0) {   /* the crash loop's last exit */
        cJSON *t = cJSON_AddObjectToObject(cJSON_AddObjectToObject(s, "lastState"), "terminated");
        cJSON_AddStringToObject(t, "reason", "StartError");
        cJSON_AddStringToObject(t, "message", c->last_exit);
        cJSON_AddNumberToObject(t, "exitCode", 128);
    }
    return s;
}

/* Caller holds mu. Write the pod's status when it changed: phase Running once an app container runs. */
static void fk_write_status(fake_kubelet *k, fk_pod *p) {
    if (!p->status_dirty || !p->live) return;
    p->status_dirty = false;
    cJSON *patch = cJSON_CreateObject(), *st = cJSON_AddObjectToObject(patch, "status");
    cJSON *ics = cJSON_CreateArray(), *cs = cJSON_CreateArray();
    bool running = false;
    for (int i = 0; i < p->nctrs; i++) {
        cJSON_AddItemToArray(p->ctrs[i].init ? ics : cs, fk_ctr_status(&p->ctrs[i]));
        running |= !p->ctrs[i].init && p->ctrs[i].st == FK_RUNNING;
    }
    snprintf(p->phase, sizeof p->phase, "%s", p->exec ? fk_exec_phase(p) : running ? "Running" : "Pending");
    /* a pod that is over keeps no process (its native sidecars are stopped too) */
    if (p->exec && (!strcmp(p->phase, "Succeeded") || !strcmp(p->phase, "Failed"))) fk_exec_stop_pod(k, p);
    cJSON_AddStringToObject(st, "phase", p->phase);
    if (cJSON_GetArraySize(ics)) cJSON_AddItemToObject(st, "initContainerStatuses", ics);
    else cJSON_Delete(ics);
    cJSON_AddItemToObject(st, "containerStatuses", cs);
    char *txt = cJSON_PrintUnformatted(patch);
    fake_api_patch(k->f, "pods", p->ns, p->name, txt);
    free(txt);
    cJSON_Delete(patch);
}

static void fk_free_pod(fk_pod *p);
static void fk_free_ctrs(fk_pod *p) {
    for (int i = 0; i < p->nctrs; i++) {
        cJSON_Delete(p->ctrs[i].env);
        cJSON_Delete(p->ctrs[i].def);
    }
    free(p->ctrs);
    p->ctrs = NULL;
    p->nctrs = 0;
}

static void fk_free_pod(fk_pod *p) {
    free(p->devices);
    fk_free_ctrs(p);
    cJSON_Delete(p->obj);
    p->obj = NULL;
}

static void fk_make_ctrs(fk_pod *p, const cJSON *pod) {
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(pod, "spec");
    int n = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(spec, "initContainers")) +
            cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(spec, "containers"));
    p->ctrs = fk_xcalloc((size_t)n, sizeof *p->ctrs);
    static const char *const lists[2] = {"initContainers", "containers"};
    for (int l = 0; l < 2; l++) {
        const cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(spec, lists[l])) {
            fk_ctr *x = &p->ctrs[p->nctrs++];
            snprintf(x->name, sizeof x->name, "%s", fk_str(c, "name", NULL));
            snprintf(x->image, sizeof x->image, "%s", fk_str(c, "image", NULL));
            x->init = l == 0;
            x->sidecar = x->init && !strcmp(fk_str(c, "restartPolicy", NULL), "Always");
            x->def = cJSON_Duplicate(c, 1);
            x->exit_code = -1;
        }
    }
    p->status_dirty = true;
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
    p->obj = cJSON_Duplicate(pod, 1);
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
            fk_device_id(r, d, id, sizeof id);
            p->devices = fk_xrealloc(p->devices, len + strlen(id) + 2);
            len += (size_t)sprintf(p->devices + len, "%s%s", len ? "," : "", id);
        }
    }
    p->live = true;
    p->admitted_ms = fk_now_ms();
    const char *label = fk_str(cJSON_GetObjectItemCaseSensitive(pod, "metadata"), "labels", "tessera.io/reservation");
    p->reservation = strcmp(label, "true") == 0;
    if ((p->exec = fk_exec_find(k, node) != NULL)) {
        /* the process id too: tests run side by side, each in a process of its own whose fake API server hands out
         * the same pod UIDs, and a marker names what a pod's end kills, in every process of the machine */
        snprintf(p->marker, sizeof p->marker, "k%d.%u-%s", (int)getpid(), k->serial, uid);
        const char *pol = fk_str(pod, "spec", "restartPolicy");
        snprintf(p->restart_policy, sizeof p->restart_policy, "%s", *pol ? pol : "Always");
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "spec"),
                                                          "terminationGracePeriodSeconds");
        long long grace = cJSON_IsNumber(g) ? (long long)g->valuedouble * 1000 : 30000;
        p->grace_ms = grace < FK_GRACE_CAP_MS ? (int)grace : FK_GRACE_CAP_MS;
    }
    fk_make_ctrs(p, pod);   /* the containers start in the passes that follow */
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
        fk_pod *p = fk_find_pod(k, fk_str(pod, "metadata", "uid"));
        if (p) p->seen = true;
    }
    /* pods gone from the list free their devices and are forgotten, before anything new is admitted: the device
     * manager drops the devices of pods no longer active before it allocates (UpdateAllocatedDevices); their
     * processes stop */
    size_t keep = 0;
    for (size_t i = 0; i < k->npods; i++) {
        if (k->pods[i].seen) { k->pods[keep++] = k->pods[i]; continue; }
        fk_exec_stop_pod(k, &k->pods[i]);
        fk_release(k, &k->pods[i]);
        fk_free_pod(&k->pods[i]);
    }
    k->npods = keep;
    cJSON_ArrayForEach(pod, pods) {
        const char *uid = fk_str(pod, "metadata", "uid"), *node = fk_str(pod, "spec", "nodeName");
        const char *phase = fk_str(pod, "status", "phase");
        fk_pod *p = fk_find_pod(k, uid);
        if (!*uid || !fk_node_known(k, node)) continue;
        if (!p) {
            if (!*phase || !strcmp(phase, "Pending")) fk_admit(k, pod, uid, node);
            continue;
        }
        if (p->live && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed"))) {
            fk_exec_stop_pod(k, p);
            fk_release(k, p);
        }
    }
    int64_t now = fk_now_ms();
    for (size_t i = 0; i < k->npods; i++) {
        fk_pod *p = &k->pods[i];
        if (p->live) fk_pod_step(k, p, now);
        /* tessera-reserve runs in the reservation's app container: it reports once that container runs (in exec
         * mode the real one does) */
        const fk_ctr *app = p->nctrs ? &p->ctrs[p->nctrs - 1] : NULL;
        if (p->live && p->reservation && !p->exec && !p->reported && !k->silent && app && app->st == FK_RUNNING &&
            now - app->started_ms >= k->reserve_delay_ms)
            fk_report(k, p);
        fk_write_status(k, p);
    }
    fk_check_doubles(k);
    fk_reap_dying(k, false);
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
    /* Exec mode: every process goes, each with its pod's grace, before this thread ends (its processes' parent-death
     * signal is this thread's end: without this they would get SIGKILL with no SIGTERM first). */
    pthread_mutex_lock(&k->mu);
    for (size_t i = 0; i < k->npods; i++) fk_exec_stop_pod(k, &k->pods[i]);
    fk_reap_dying(k, true);
    pthread_mutex_unlock(&k->mu);
    return NULL;
}

fake_kubelet *fake_kubelet_start(fake_api *f) {
    fake_kubelet *k = fk_xcalloc(1, sizeof *k);
    k->f = f;
    k->serial = atomic_fetch_add(&fk_serials, 1) + 1;
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
    for (size_t i = 0; i < k->npods; i++) fk_free_pod(&k->pods[i]);
    free(k->pods);
    free(k->images);
    free(k->pulled);
    free(k->exec);
    for (size_t i = 0; i < k->nprogs; i++) {
        for (char **a = k->progs[i].extra_args; a && *a; a++) free(*a);
        free(k->progs[i].extra_args);
    }
    free(k->progs);
    free(k->dying);
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
        if (strcmp(r->node, node) != 0) continue;
        for (int d = 0; d < r->count && !out; d++) {
            char id[200];
            fk_device_id(r, d, id, sizeof id);
            if (!strcmp(id, device_id) && r->holder[d]) out = fk_strdup(r->holder[d]);
        }
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

void fake_kubelet_add_image(fake_kubelet *k, const char *image, int pull_ms, bool pullable, const char *binaries) {
    if (!image) return;
    pthread_mutex_lock(&k->mu);
    fk_image *im = fk_find_image(k, image);
    if (!im) {
        k->images = fk_xrealloc(k->images, (k->nimages + 1) * sizeof *k->images);
        im = &k->images[k->nimages++];
        memset(im, 0, sizeof *im);
        snprintf(im->name, sizeof im->name, "%s", image);
    }
    im->pull_ms = pull_ms > 0 ? pull_ms : 0;
    im->pullable = pullable;
    snprintf(im->binaries, sizeof im->binaries, "%s", binaries ? binaries : "");
    pthread_mutex_unlock(&k->mu);
}

static const fk_ctr *fk_find_ctr(fake_kubelet *k, const char *uid, const char *container) {
    fk_pod *p = uid ? fk_find_pod(k, uid) : NULL;
    for (int i = 0; p && i < p->nctrs; i++)
        if (!container || !strcmp(p->ctrs[i].name, container)) return &p->ctrs[i];
    return NULL;
}

char *fake_kubelet_env(fake_kubelet *k, const char *pod_uid, const char *container, const char *var) {
    pthread_mutex_lock(&k->mu);
    const fk_ctr *c = fk_find_ctr(k, pod_uid, container);
    const cJSON *v = c && c->st == FK_RUNNING ? cJSON_GetObjectItemCaseSensitive(c->env, var) : NULL;
    char *out = cJSON_IsString(v) ? fk_strdup(v->valuestring) : NULL;
    pthread_mutex_unlock(&k->mu);
    return out;
}

bool fake_kubelet_running(fake_kubelet *k, const char *pod_uid, const char *container) {
    pthread_mutex_lock(&k->mu);
    const fk_ctr *c = fk_find_ctr(k, pod_uid, container);
    bool r = c && c->st == FK_RUNNING;
    pthread_mutex_unlock(&k->mu);
    return r;
}

/* ---- exec mode ---------------------------------------------------------------------------------------------- */

void fake_kubelet_set_exec(fake_kubelet *k, const char *node, const fake_kubelet_exec *x) {
    if (!node || !x || !x->node_root) return;
    pthread_mutex_lock(&k->mu);
    fk_exec_node *e = fk_exec_find(k, node);
    if (!e) {
        k->exec = fk_xrealloc(k->exec, (k->nexec + 1) * sizeof *k->exec);
        e = &k->exec[k->nexec++];
    }
    memset(e, 0, sizeof *e);
    snprintf(e->node, sizeof e->node, "%s", node);
    snprintf(e->rt.node_root, sizeof e->rt.node_root, "%s", x->node_root);
    if (x->host_root) snprintf(e->rt.host_root, sizeof e->rt.host_root, "%s", x->host_root);
    else snprintf(e->rt.host_root, sizeof e->rt.host_root, "%s/host", x->node_root);
    snprintf(e->rt.fake_cuda_dir, sizeof e->rt.fake_cuda_dir, "%s", x->fake_cuda_dir ? x->fake_cuda_dir : "");
    snprintf(e->rt.cuda_devices, sizeof e->rt.cuda_devices, "%s", x->cuda_devices ? x->cuda_devices : "");
    if (x->cuda_state) snprintf(e->rt.cuda_state, sizeof e->rt.cuda_state, "%s", x->cuda_state);
    else snprintf(e->rt.cuda_state, sizeof e->rt.cuda_state, "%s/fake-cuda-state", x->node_root);
    pthread_mutex_unlock(&k->mu);
}

void fake_kubelet_add_program(fake_kubelet *k, const char *image_path, const char *host_path,
                              const char *const *extra_args) {
    if (!image_path || !host_path) return;
    pthread_mutex_lock(&k->mu);
    fk_rt_prog *pr = NULL;
    for (size_t i = 0; i < k->nprogs && !pr; i++)
        if (!strcmp(k->progs[i].image_path, image_path)) pr = &k->progs[i];
    if (pr) {
        for (char **a = pr->extra_args; a && *a; a++) free(*a);
        free(pr->extra_args);
    } else {
        k->progs = fk_xrealloc(k->progs, (k->nprogs + 1) * sizeof *k->progs);
        pr = &k->progs[k->nprogs++];
    }
    memset(pr, 0, sizeof *pr);
    snprintf(pr->image_path, sizeof pr->image_path, "%s", image_path);
    snprintf(pr->host_path, sizeof pr->host_path, "%s", host_path);
    size_t n = 0;
    while (extra_args && extra_args[n]) n++;
    pr->extra_args = fk_xcalloc(n + 1, sizeof *pr->extra_args);
    for (size_t i = 0; i < n; i++) pr->extra_args[i] = fk_strdup(extra_args[i]);
    pthread_mutex_unlock(&k->mu);
}

char *fake_kubelet_log(fake_kubelet *k, const char *pod_uid, const char *container, int stream) {
    char *out = NULL;
    pthread_mutex_lock(&k->mu);
    for (size_t i = 0; i < k->nexec && !out && pod_uid && container; i++) {
        char path[1200];
        fk_rt_log_path(&k->exec[i].rt, pod_uid, container, stream, path, sizeof path);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        size_t len = 0, cap = 4096;
        out = fk_xcalloc(cap, 1);
        size_t n;
        while ((n = fread(out + len, 1, cap - len - 1, f)) > 0) {
            len += n;
            if (cap - len - 1 == 0) out = fk_xrealloc(out, cap *= 2);
        }
        out[len] = 0;
        fclose(f);
    }
    pthread_mutex_unlock(&k->mu);
    return out;
}

int fake_kubelet_exit_code(fake_kubelet *k, const char *pod_uid, const char *container) {
    pthread_mutex_lock(&k->mu);
    const fk_ctr *c = fk_find_ctr(k, pod_uid, container);
    int code = c ? c->exit_code : -1;
    pthread_mutex_unlock(&k->mu);
    return code;
}

int fake_kubelet_pid(fake_kubelet *k, const char *pod_uid, const char *container) {
    pthread_mutex_lock(&k->mu);
    const fk_ctr *c = fk_find_ctr(k, pod_uid, container);
    int pid = c && c->st == FK_RUNNING ? (int)c->pid : 0;
    pthread_mutex_unlock(&k->mu);
    return pid;
}
