/* soak.c -- the churn-with-faults driver (soak.h): one driver thread plays the cluster's users and
 * kube-scheduler against the fake API server, one sampler thread checks both caches and samples RSS and
 * descriptors, and at the end each cache is compared with one rebuilt from a fresh list.
 */
#include "tests/support/soak.h"

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cjson/cJSON.h>

#include "extender/base/health.h"
#include "kube/client.h"
#include "extender/base/leader.h"
#include "extender/mirror/state.h"
#include "extender/verbs.h"
#include "model/fit.h"
#include "tests/support/fake_apiserver.h"
#include "tests/support/wait.h"

extern const unsigned char sim_demo_cluster_json[];   /* data/demo-cluster.json, compiled in */

static const char *const op_names[SOAK_OP_N] = {"node-add", "node-remove", "node-relabel", "pod-create", "pod-delete",
                                                "filter", "prioritize", "bind-ok", "bind-refused", "bind-failed"};
static const char *const fault_names[SOAK_FAULT_N] = {"watch-drop", "watch-410-gone", "compaction", "429-retry-after",
                                                      "500", "hang-up", "slow-answer", "server-down", "leader-change"};
const char *soak_op_name(soak_op o) { return o < SOAK_OP_N ? op_names[o] : "?"; }
const char *soak_fault_name(soak_fault f) { return f < SOAK_FAULT_N ? fault_names[f] : "?"; }

/* GPU node templates from the demo cluster (the CPU-only node is left out). */
static const char *const templates[] = {"gpu-a100-whole", "gpu-a100-mig", "gpu-t4-timeslice", "gpu-h100-mps",
                                        "gpu-h100-single"};
#define NTEMPLATES 5

/* Every request form tessera parses: limits (inside resources.limits) and annotations (inside metadata). */
typedef struct form { const char *limits, *annotations; } form;
static const form forms[] = {
    {"\"nvidia.com/gpu\":\"1\"", ""},                                           /* whole GPU */
    {"\"nvidia.com/gpu\":\"2\"", ""},                                           /* two whole GPUs */
    {"\"nvidia.com/gpu.shared\":\"1\"", ""},                                    /* a time-slicing/MPS replica */
    {"\"nvidia.com/mig-2g.10gb\":\"1\"", ""},                                   /* MIG instance */
    {"\"nvidia.com/mig-3g.20gb\":\"1\"", ""},
    {"\"nvidia.com/gpu\":\"1\",\"nvidia.com/gpumem\":\"8000\"", ""},            /* GPU memory (HAMi style) */
    {"\"nvidia.com/gpu\":\"1\",\"nvidia.com/gpumem-percentage\":\"30\",\"nvidia.com/gpucores\":\"30\"", ""},
    {"", "\"tessera.io/gpu-fraction\":\"0.25\""},                               /* fraction annotation */
    {"", "\"tessera.io/gpu-fraction\":\"0.5\""},
};
#define NFORMS ((int)(sizeof forms / sizeof forms[0]))

typedef struct inst {
    kube_client *k;
    ext_state *st;
    ext_verbs v;
    ext_leader *l;
    char id[32];
    int gen;
} inst;

typedef struct dpod { char name[32], uid[48], node[64]; bool bound; } dpod;
typedef struct dnode { char name[64]; int tmpl; int npods; } dnode;

typedef struct soak {
    soak_config cfg;
    soak_report *r;
    fake_api *api;
    cJSON *tmpl[NTEMPLATES];
    inst in[2];
    pthread_mutex_t mu;          /* guards the instances' leader pointers against the sampler */
    dpod *pods;
    int npods, podcap, pod_seq;
    dnode *nodes;
    int nnodes, nodecap, node_seq, label_gen;
    unsigned rnd;
    _Atomic bool stop_sampler, warm;
    pthread_t sampler;
    int64_t t0_ms;
} soak;

static int64_t now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void nap_ms(int ms) {
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

static int rnd(soak *s, int n) { return n <= 0 ? 0 : (int)(rand_r(&s->rnd) % (unsigned)n); }

static void proc_sample(long *rss_kb, int *fds) {
    char line[256];
    *rss_kb = -1;
    *fds = 0;
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) *rss_kb = atol(line + 6);
    if (f) fclose(f);
    DIR *d = opendir("/proc/self/fd");
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_name[0] != '.') (*fds)++;
    if (d) {
        closedir(d);
        (*fds)--;   /* the directory's own descriptor */
    }
}

/* ------------------------------------------------------------------ the instances */

static int bind_fn(void *user, const char *ns, const char *name, const char *uid, const char *node,
                   const cJSON *annotations, char *err, size_t errlen) {
    int code = kube_bind(user, ns, name, uid, node, annotations, err, errlen);
    return code == 200 || code == 201 ? 0 : -1;
}

static ext_leader *new_leader(soak *s, inst *in, char *err, size_t errlen) {
    ext_leader_config lc;
    ext_leader_config_defaults(&lc);
    snprintf(lc.ns, sizeof lc.ns, "tessera");
    snprintf(lc.identity, sizeof lc.identity, "%s_%d", in->id, in->gen++);
    lc.lease_ms = 3000;
    lc.renew_ms = 2000;
    lc.retry_ms = 300;
    /* --scheduler-lease "": no kube-scheduler Lease to follow, every instance campaigns, and the driver calls
     * whichever leads, like a Service in front */
    lc.sched_name[0] = 0;
    ext_leader *l = ext_leader_new(&lc, in->k, err, errlen);
    if (l && ext_leader_start(l, err, errlen) != 0) {
        ext_leader_free(l);
        l = NULL;
    }
    (void)s;
    return l;
}

static int inst_start(soak *s, inst *in, const char *id, char *err, size_t errlen) {
    snprintf(in->id, sizeof in->id, "%s", id);
    ext_state_config sc = {.standalone = false, .assume_ttl_ms = s->cfg.assume_ttl_ms};
    if (!(in->st = ext_state_new(&sc))) return snprintf(err, errlen, "out of memory"), -1;
    kube_config kc;
    kube_config_defaults(&kc);
    fake_api_url(s->api, kc.api_url, sizeof kc.api_url);
    kc.backoff_max_ms = 500;
    kc.watch_timeout_s = 20;
    kc.report = ext_health_kube_report;   /* as main.c wires it */
    if (!(in->k = kube_new(&kc, err, errlen))) return -1;
    if (kube_start(in->k, ext_state_on_event, in->st, err, errlen) != 0) return -1;
    ext_verbs_init(&in->v, in->st, NULL, bind_fn, in->k);
    if (!(in->l = new_leader(s, in, err, errlen))) return -1;
    in->v.leader = in->l;
    return 0;
}

static void inst_stop(inst *in) {
    ext_leader_free(in->l);
    kube_free(in->k);
    ext_state_free(in->st);
}

/* ------------------------------------------------------------------ cache checks and comparison */

static int cmp_line(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* One node (or, with n NULL, the pods on no node) as canonical text: the model's free capacity per GPU and
 * every pod on it with its phase, flags and assignment, sorted. */
static char *node_text(const ext_state *st, const ext_node *n) {
    size_t cap = 4096, off = 0;
    char *out = malloc(cap);
    char **lines = NULL;
    int nl = 0, lc = 0;
    char line[600];
#define ADD_LINE()                                                                                             \
    do {                                                                                                       \
        if (nl == lc) {                                                                                        \
            lc = lc ? lc * 2 : 16;                                                                             \
            lines = realloc(lines, sizeof *lines * (size_t)lc);                                                \
        }                                                                                                      \
        lines[nl++] = strdup(line);                                                                            \
    } while (0)
    if (n) {
        if (n->m) {
            for (int g = 0; g < n->m->ngpus; g++) {
                const model_gpu *gp = &n->m->gpus[g];
                snprintf(line, sizeof line, " gpu%d mem=%d compute=%d replicas=%d", g, model_gpu_free_memory(gp),
                         model_gpu_free_compute(gp), model_gpu_free_replicas(gp));
                ADD_LINE();
            }
        } else {
            snprintf(line, sizeof line, " (no Node object)");
            ADD_LINE();
        }
        for (int i = 0; i < n->npods; i++) {
            const ext_pod *p = n->pods[i];
            char a[300] = "";
            if (p->holds && n->m) model_assignment_format(n->m, &p->a, a, sizeof a);
            snprintf(line, sizeof line, " pod %s/%s phase=%d holds=%d over=%d derived=%d %s", p->ns, p->name,
                     (int)p->phase, p->holds, p->overcommitted, p->derived, a);
            ADD_LINE();
        }
    } else {
        size_t it = 0;
        const ext_pod *p;
        while ((p = ext_state_pod_next(st, &it)))
            if (!p->node) {
                snprintf(line, sizeof line, " pending %s/%s phase=%d", p->ns, p->name, (int)p->phase);
                ADD_LINE();
            }
    }
#undef ADD_LINE
    if (nl > 1) qsort(lines, (size_t)nl, sizeof *lines, cmp_line);
    out[0] = 0;
    for (int i = 0; i < nl; i++) {
        size_t l = strlen(lines[i]);
        if (off + l + 2 > cap) out = realloc(out, cap = (cap + l) * 2);
        memcpy(out + off, lines[i], l);
        off += l;
        out[off++] = '\n';
        out[off] = 0;
        free(lines[i]);
    }
    free(lines);
    return out;
}

static void feed(ext_state *st, kube_kind kind, const char *list_json) {
    cJSON *arr = cJSON_Parse(list_json);
    ext_state_on_event(st, kind, KUBE_RELIST, NULL);
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) ext_state_on_event(st, kind, KUBE_ADDED, it);
    ext_state_on_event(st, kind, KUBE_SYNCED, NULL);
    cJSON_Delete(arr);
}

/* A cache built from a fresh list of everything in the fake API. */
static ext_state *fresh_state(soak *s) {
    ext_state_config sc = {.standalone = false};
    ext_state *st = ext_state_new(&sc);
    char *nodes = fake_api_list(s->api, "nodes"), *pods = fake_api_list(s->api, "pods");
    feed(st, KUBE_NODE, nodes);
    feed(st, KUBE_POD, pods);
    free(nodes);
    free(pods);
    return st;
}

/* Nodes (and the pending set) where a differs from b; the first differences go to diff. */
static int compare(ext_state *a, ext_state *b, const char *who, char *diff, size_t difflen) {
    int bad = 0;
    size_t off = strlen(diff);
    ext_state_lock(a);
    ext_state_lock(b);
    for (int pass = 0; pass < 2; pass++) {   /* a's nodes, then b's nodes that a lacks */
        ext_state *x = pass ? b : a, *y = pass ? a : b;
        for (int i = 0; i < ext_state_node_count(x); i++) {
            const ext_node *nx = ext_state_node_at(x, i);
            const ext_node *ny = ext_state_node(y, nx->name);
            if (pass && ny) continue;
            /* a node that only pods refer to and that holds none is nothing to compare */
            char *tx = node_text(x, nx), *ty = ny ? node_text(y, ny) : strdup(" (absent)\n");
            if (strcmp(tx, ty) != 0) {
                bad++;
                if (off + 40 < difflen)
                    off += (size_t)snprintf(diff + off, difflen - off, "%s node %s:\n cache:\n%s fresh list:\n%s", who,
                                            nx->name, pass ? ty : tx, pass ? tx : ty);
            }
            free(tx);
            free(ty);
        }
    }
    char *pa = node_text(a, NULL), *pb = node_text(b, NULL);
    if (strcmp(pa, pb) != 0) {
        bad++;
        if (off + 40 < difflen)
            off += (size_t)snprintf(diff + off, difflen - off, "%s pending pods:\n cache:\n%s fresh list:\n%s", who, pa, pb);
    }
    free(pa);
    free(pb);
    ext_state_unlock(b);
    ext_state_unlock(a);
    return bad;
}

static void *sampler(void *arg) {
    soak *s = arg;
    int64_t next_proc = 0, next_expire = 0;
    while (!atomic_load(&s->stop_sampler)) {
        for (int i = 0; i < 2; i++) {
            ext_state *st = s->in[i].st;
            ext_state_lock(st);
            for (int j = 0; j < ext_state_node_count(st); j++) {
                const ext_node *n = ext_state_node_at(st, j);
                char why[256];
                if (!n->m) continue;
                s->r->checks++;
                if (!model_node_check(n->m, why, sizeof why)) {
                    if (!s->r->overcommits++)
                        snprintf(s->r->first_overcommit, sizeof s->r->first_overcommit, "%s node %s: %s", s->in[i].id,
                                 n->name, why);
                }
            }
            ext_state_unlock(st);
        }
        int64_t now = now_ms();
        if (now >= next_expire) {   /* as the extender's main loop does, about once a second */
            for (int i = 0; i < 2; i++) {
                ext_state_lock(s->in[i].st);
                ext_state_expire(s->in[i].st, ext_now_ms());
                ext_state_unlock(s->in[i].st);
            }
            next_expire = now + 1000;
        }
        if (now >= next_proc) {
            long rss;
            int fds;
            proc_sample(&rss, &fds);
            if (!atomic_load(&s->warm) && now - s->t0_ms >= (int64_t)s->cfg.warmup_s * 1000) {
                s->r->rss_kb[1] = rss;
                s->r->fds[1] = fds;
                atomic_store(&s->warm, true);
            }
            if (atomic_load(&s->warm)) {
                if (rss > s->r->rss_max_kb) s->r->rss_max_kb = rss;
                if (fds > s->r->fds_max) s->r->fds_max = fds;
            }
            next_proc = now + 500;
        }
        nap_ms(100);
    }
    return NULL;
}

/* ------------------------------------------------------------------ the driver's moves */

static char *node_json(soak *s, int tmpl, const char *name) {
    cJSON *n = cJSON_Duplicate(s->tmpl[tmpl], 1);
    cJSON *meta = cJSON_GetObjectItem(n, "metadata");
    cJSON_ReplaceItemInObject(meta, "name", cJSON_CreateString(name));
    cJSON_DeleteItemFromObject(meta, "resourceVersion");
    cJSON_DeleteItemFromObject(meta, "uid");
    cJSON *labels = cJSON_GetObjectItem(meta, "labels");
    if (labels) cJSON_ReplaceItemInObject(labels, "kubernetes.io/hostname", cJSON_CreateString(name));
    char *txt = cJSON_PrintUnformatted(n);
    cJSON_Delete(n);
    return txt;
}

static void node_add(soak *s) {
    if (s->nnodes == s->nodecap) s->nodes = realloc(s->nodes, sizeof *s->nodes * (size_t)(s->nodecap = s->nodecap * 2 + 8));
    dnode *d = &s->nodes[s->nnodes++];
    snprintf(d->name, sizeof d->name, "soak-n%d", s->node_seq++);
    d->tmpl = rnd(s, NTEMPLATES);
    d->npods = 0;
    char *j = node_json(s, d->tmpl, d->name);
    fake_api_put(s->api, "nodes", j);
    free(j);
    s->r->ops[SOAK_NODE_ADD]++;
}

static void pod_forget(soak *s, int i) {
    for (int k = 0; k < s->nnodes; k++)
        if (s->pods[i].bound && !strcmp(s->nodes[k].name, s->pods[i].node)) s->nodes[k].npods--;
    s->pods[i] = s->pods[--s->npods];
}

static void node_remove(soak *s) {
    int i = rnd(s, s->nnodes);
    fake_api_delete(s->api, "nodes", NULL, s->nodes[i].name);
    /* its pods go too, as the pod garbage collector deletes pods bound to a node that is gone */
    for (int p = s->npods - 1; p >= 0; p--)
        if (s->pods[p].bound && !strcmp(s->pods[p].node, s->nodes[i].name)) {
            fake_api_delete(s->api, "pods", "default", s->pods[p].name);
            s->pods[p].bound = false;   /* so pod_forget does not count it off the node being removed */
            s->pods[p] = s->pods[--s->npods];
            s->r->ops[SOAK_POD_DELETE]++;
        }
    s->nodes[i] = s->nodes[--s->nnodes];
    s->r->ops[SOAK_NODE_REMOVE]++;
}

/* A label that changes nothing tessera reads, or, on a node without pods, another GPU inventory. */
static void node_relabel(soak *s) {
    dnode *d = &s->nodes[rnd(s, s->nnodes)];
    if (d->npods == 0 && rnd(s, 2)) {
        d->tmpl = (d->tmpl + 1 + rnd(s, NTEMPLATES - 1)) % NTEMPLATES;
        char *j = node_json(s, d->tmpl, d->name);
        fake_api_put(s->api, "nodes", j);
        free(j);
    } else {
        char patch[128];
        snprintf(patch, sizeof patch, "{\"metadata\":{\"labels\":{\"soak.tessera.io/generation\":\"%d\"}}}", ++s->label_gen);
        fake_api_patch(s->api, "nodes", NULL, d->name, patch);
    }
    s->r->ops[SOAK_NODE_RELABEL]++;
}

static void pod_create(soak *s) {
    if (s->npods == s->podcap) s->pods = realloc(s->pods, sizeof *s->pods * (size_t)(s->podcap = s->podcap * 2 + 16));
    dpod *p = &s->pods[s->npods++];
    memset(p, 0, sizeof *p);
    int seq = s->pod_seq++;
    snprintf(p->name, sizeof p->name, "soak-p%d", seq);
    snprintf(p->uid, sizeof p->uid, "50a50a50-0000-4000-8000-%012d", seq);
    const form *fm = &forms[rnd(s, NFORMS)];
    char j[2048];
    snprintf(j, sizeof j,
             "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\",\"uid\":\"%s\",\"annotations\":{%s}},"
             "\"spec\":{\"schedulerName\":\"tessera-scheduler\",\"containers\":[{\"name\":\"main\",\"image\":\"x\","
             "\"resources\":{\"limits\":{%s},\"requests\":{%s}}}]},\"status\":{\"phase\":\"Pending\"}}",
             p->name, p->uid, fm->annotations, fm->limits, fm->limits);
    fake_api_put(s->api, "pods", j);
    s->r->ops[SOAK_POD_CREATE]++;
}

static void pod_delete(soak *s) {
    int i = rnd(s, s->npods);
    fake_api_delete(s->api, "pods", "default", s->pods[i].name);
    pod_forget(s, i);
    s->r->ops[SOAK_POD_DELETE]++;
}

static inst *leader_inst(soak *s) {
    for (int i = 0; i < 2; i++)
        if (ext_leader_is_leader(s->in[i].l)) return &s->in[i];
    return &s->in[rnd(s, 2)];
}

/* kube-scheduler's cycle for one pending pod: filter over every node, prioritize the survivors, bind to the
 * best; each verb goes to the instance that leads (as the active kube-scheduler calls its own extender). */
static void pod_schedule(soak *s) {
    int pending[64], np = 0;
    for (int i = 0; i < s->npods && np < 64; i++)
        if (!s->pods[i].bound) pending[np++] = i;
    if (!np || !s->nnodes) return;
    dpod *p = &s->pods[pending[rnd(s, np)]];
    char *obj = fake_api_get(s->api, "pods", "default", p->name);
    if (!obj) return;
    cJSON *pj = cJSON_Parse(obj);
    free(obj);
    const cJSON *nn = cJSON_GetObjectItem(cJSON_GetObjectItem(pj, "spec"), "nodeName");
    if (cJSON_IsString(nn)) {   /* a bind whose answer was lost did happen */
        p->bound = true;
        snprintf(p->node, sizeof p->node, "%s", nn->valuestring);
        for (int k = 0; k < s->nnodes; k++)
            if (!strcmp(s->nodes[k].name, p->node)) s->nodes[k].npods++;
        cJSON_Delete(pj);
        return;
    }
    inst *in = leader_inst(s);
    cJSON *args = cJSON_CreateObject();
    cJSON_AddItemToObject(args, "Pod", pj);
    cJSON_AddNullToObject(args, "Nodes");
    cJSON *names = cJSON_AddArrayToObject(args, "NodeNames");
    for (int k = 0; k < s->nnodes; k++) cJSON_AddItemToArray(names, cJSON_CreateString(s->nodes[k].name));
    char *body = cJSON_PrintUnformatted(args);
    ext_reply fr = {0};
    ext_verb_filter(&in->v, body, strlen(body), &fr);
    s->r->ops[SOAK_FILTER]++;
    cJSON *fj = fr.body ? cJSON_Parse(fr.body) : NULL;
    ext_reply_free(&fr);
    const cJSON *ok = cJSON_GetObjectItem(fj, "NodeNames");
    char best[64] = "";
    if (cJSON_GetArraySize(ok) > 0) {
        cJSON_ReplaceItemInObject(args, "NodeNames", cJSON_Duplicate(ok, 1));
        char *b2 = cJSON_PrintUnformatted(args);
        ext_reply pr = {0};
        ext_verb_prioritize(&in->v, b2, strlen(b2), &pr);
        s->r->ops[SOAK_PRIORITIZE]++;
        free(b2);
        cJSON *pl = pr.body ? cJSON_Parse(pr.body) : NULL;
        ext_reply_free(&pr);
        long top = -1;
        const cJSON *e;
        cJSON_ArrayForEach(e, pl) {
            const cJSON *h = cJSON_GetObjectItem(e, "Host"), *sc = cJSON_GetObjectItem(e, "Score");
            if (cJSON_IsString(h) && cJSON_IsNumber(sc) && (long)sc->valuedouble > top) {
                top = (long)sc->valuedouble;
                snprintf(best, sizeof best, "%s", h->valuestring);
            }
        }
        cJSON_Delete(pl);
    }
    cJSON_Delete(fj);
    free(body);
    cJSON_Delete(args);
    if (!best[0]) return;
    char bb[512];
    snprintf(bb, sizeof bb, "{\"PodName\":\"%s\",\"PodNamespace\":\"default\",\"PodUID\":\"%s\",\"Node\":\"%s\"}", p->name,
             p->uid, best);
    ext_reply br = {0};
    ext_verb_bind(&in->v, bb, strlen(bb), &br);
    cJSON *bj = br.body ? cJSON_Parse(br.body) : NULL;
    ext_reply_free(&br);
    const cJSON *e = cJSON_GetObjectItem(bj, "Error");
    if (cJSON_IsString(e) && !e->valuestring[0]) {
        p->bound = true;
        snprintf(p->node, sizeof p->node, "%s", best);
        for (int k = 0; k < s->nnodes; k++)
            if (!strcmp(s->nodes[k].name, best)) s->nodes[k].npods++;
        s->r->ops[SOAK_BIND_OK]++;
    } else if (cJSON_IsString(e) && strstr(e->valuestring, "leader")) {
        s->r->ops[SOAK_BIND_REFUSED]++;
    } else {
        s->r->ops[SOAK_BIND_API_ERROR]++;
    }
    cJSON_Delete(bj);
}

static const char *const targets[] = {"/api/v1/pods", "/api/v1/nodes", "POST /api/v1/namespaces/",
                                      "/apis/coordination.k8s.io/", "WATCH /api/v1/pods", "LIST /api/v1/nodes"};
#define NTARGETS 6

static void fault(soak *s) {
    int slow = s->cfg.slow_min_ms + rnd(s, s->cfg.slow_max_ms - s->cfg.slow_min_ms + 1);
    const char *t = targets[rnd(s, NTARGETS)];
    soak_fault f = (soak_fault)rnd(s, SOAK_F_DOWN + 1);
    fake_api_clear_injections(s->api);   /* the fake keeps 32 rules: only the latest fault stays armed */
    switch (f) {
    case SOAK_F_WATCH_DROP: fake_api_drop_watches(s->api); break;
    case SOAK_F_WATCH_GONE: fake_api_expire_watches(s->api); break;
    case SOAK_F_COMPACT: fake_api_compact(s->api); fake_api_end_watches(s->api); break;
    case SOAK_F_429: fake_api_inject(s->api, t, 429, 1 + rnd(s, 3)); break;
    case SOAK_F_500: fake_api_inject(s->api, t, 500, 1 + rnd(s, 3)); break;
    case SOAK_F_HANGUP: fake_api_inject(s->api, t, FAKE_API_HANGUP, 1 + rnd(s, 2)); break;
    case SOAK_F_SLOW: fake_api_inject_stall(s->api, t, slow, 1 + rnd(s, 3)); break;
    default: {   /* the server goes away for a moment (half the slow time), state kept */
        char err[128];
        fake_api_down(s->api);
        nap_ms(slow / 2);
        if (fake_api_up(s->api, err, sizeof err) != 0) {
            nap_ms(200);
            fake_api_up(s->api, err, sizeof err);
        }
        f = SOAK_F_DOWN;
        break;
    }
    }
    s->r->faults[f]++;
}

/* The leader lets its Lease go (as on shutdown) and comes back as a candidate once the other has taken over. */
static void leader_change(soak *s) {
    inst *cur = NULL;
    for (int i = 0; i < 2; i++)
        if (ext_leader_is_leader(s->in[i].l)) cur = &s->in[i];
    if (!cur) return;
    inst *other = cur == &s->in[0] ? &s->in[1] : &s->in[0];
    fake_api_clear_injections(s->api);
    pthread_mutex_lock(&s->mu);
    ext_leader_free(cur->l);
    cur->l = NULL;
    cur->v.leader = NULL;
    pthread_mutex_unlock(&s->mu);
    for (int64_t dl = now_ms() + TEST_PATIENCE_MS; now_ms() < dl && !ext_leader_is_leader(other->l);) nap_ms(20);
    char err[256];
    ext_leader *l = new_leader(s, cur, err, sizeof err);
    pthread_mutex_lock(&s->mu);
    cur->l = l;
    cur->v.leader = l;
    pthread_mutex_unlock(&s->mu);
    s->r->faults[SOAK_F_LEADER]++;
}

/* ------------------------------------------------------------------ the run */

int soak_run(const soak_config *cfg_in, soak_report *r, char *err, size_t errlen) {
    soak *s = calloc(1, sizeof *s);
    memset(r, 0, sizeof *r);
    s->cfg = *cfg_in;
    soak_config *c = &s->cfg;
    if (c->seconds <= 0) c->seconds = 15;
    if (c->warmup_s <= 0) c->warmup_s = c->seconds / 5 > 0 ? c->seconds / 5 : 1;
    if (c->nodes <= 0) c->nodes = 10;
    if (c->pods <= 0) c->pods = 40;
    if (c->slow_min_ms <= 0) c->slow_min_ms = 100;
    if (c->slow_max_ms < c->slow_min_ms) c->slow_max_ms = c->slow_min_ms < 400 ? 400 : c->slow_min_ms;
    if (c->fault_every_ms <= 0) c->fault_every_ms = 300;
    if (c->leader_every_s <= 0) c->leader_every_s = c->seconds / 3 > 0 ? c->seconds / 3 : 1;
    s->rnd = c->seed ? c->seed : 1;
    s->r = r;
    pthread_mutex_init(&s->mu, NULL);
    int rc = -1;
    cJSON *demo = cJSON_Parse((const char *)sim_demo_cluster_json);
    const cJSON *it;
    cJSON_ArrayForEach(it, cJSON_GetObjectItem(demo, "items")) {
        const char *nm = cJSON_GetObjectItem(cJSON_GetObjectItem(it, "metadata"), "name")->valuestring;
        for (int t = 0; t < NTEMPLATES; t++)
            if (!strcmp(nm, templates[t])) s->tmpl[t] = cJSON_Duplicate(it, 1);
    }
    cJSON_Delete(demo);
    for (int t = 0; t < NTEMPLATES; t++)
        if (!s->tmpl[t]) {
            snprintf(err, errlen, "demo cluster lacks node %s", templates[t]);
            goto out;
        }
    if (!(s->api = fake_api_start(0, err, errlen))) goto out;
    for (int i = 0; i < c->nodes; i++) node_add(s);
    for (int i = 0; i < c->pods / 2; i++) pod_create(s);
    if (inst_start(s, &s->in[0], "soak-a", err, errlen) != 0 || inst_start(s, &s->in[1], "soak-b", err, errlen) != 0)
        goto out;
    for (int64_t dl = now_ms() + TEST_PATIENCE_MS; now_ms() < dl && !(ext_state_ready(s->in[0].st) && ext_state_ready(s->in[1].st));)
        nap_ms(10);
    if (!ext_state_ready(s->in[0].st) || !ext_state_ready(s->in[1].st)) {
        snprintf(err, errlen, "the caches did not sync with the fake API server within %d s", TEST_PATIENCE_MS / 1000);
        goto out;
    }
    proc_sample(&r->rss_kb[0], &r->fds[0]);
    s->t0_ms = now_ms();
    if (pthread_create(&s->sampler, NULL, sampler, s) != 0) {
        snprintf(err, errlen, "cannot start the sampler thread");
        goto out;
    }
    int64_t end = s->t0_ms + (int64_t)c->seconds * 1000, next_fault = s->t0_ms + c->fault_every_ms,
            next_leader = s->t0_ms + (int64_t)c->leader_every_s * 1000 / 2, next_note = s->t0_ms + 10000;
    while (now_ms() < end) {
        int64_t now = now_ms();
        if (now >= next_fault) {
            fake_api_forget_records(s->api);   /* the fake's own records would otherwise grow RSS */
            fault(s);
            next_fault = now + c->fault_every_ms / 2 + rnd(s, c->fault_every_ms);
        }
        if (now >= next_leader) {
            leader_change(s);
            next_leader = now_ms() + (int64_t)c->leader_every_s * 1000;
        }
        if (c->verbose && now >= next_note) {
            long rss;
            int fds;
            proc_sample(&rss, &fds);
            fprintf(stderr, "soak: %llds rss=%.1fMiB fds=%d pods=%d nodes=%d binds=%llu faults=%llu checks=%llu "
                            "overcommits=%llu\n", (long long)((now - s->t0_ms) / 1000), rss / 1024.0, fds,
                    s->npods, s->nnodes,
                    (unsigned long long)r->ops[SOAK_BIND_OK], (unsigned long long)(r->faults[0] + r->faults[1] +
                    r->faults[2] + r->faults[3] + r->faults[4] + r->faults[5] + r->faults[6] + r->faults[7]),
                    (unsigned long long)r->checks, (unsigned long long)r->overcommits);
            next_note = now + 10000;
        }
        int roll = rnd(s, 100);
        if (roll < 3 && s->nnodes < 2 * c->nodes) node_add(s);
        else if (roll < 5 && s->nnodes > c->nodes / 2) node_remove(s);
        else if (roll < 9 && s->nnodes) node_relabel(s);
        else if (roll < 35 && s->npods < c->pods) pod_create(s);
        else if (roll < 50 && s->npods > c->pods / 2) pod_delete(s);
        else pod_schedule(s);
        nap_ms(2);
    }
    r->seconds = (double)(now_ms() - s->t0_ms) / 1000.0;
    /* Settle: faults off, server up; the caches must come to equal a fresh list. */
    fake_api_clear_injections(s->api);
    {
        char e2[128];
        fake_api_up(s->api, e2, sizeof e2);   /* already up: harmless */
    }
    int64_t s0 = now_ms();
    int bad = 1;
    /* an assumption the watch can never confirm (its pod was deleted while the watch was away) is held for the
     * TTL: the deadline leaves room for it */
    int ttl = c->assume_ttl_ms > 0 ? c->assume_ttl_ms : 30000;
    for (int64_t dl = s0 + ttl + TEST_PATIENCE_MS; bad && now_ms() < dl;) {
        ext_state *fresh = fresh_state(s);
        r->diff[0] = 0;
        bad = compare(s->in[0].st, fresh, "instance soak-a", r->diff, sizeof r->diff) +
              compare(s->in[1].st, fresh, "instance soak-b", r->diff, sizeof r->diff);
        ext_state_free(fresh);
        if (bad) nap_ms(200);
    }
    r->settle_s = (double)(now_ms() - s0) / 1000.0;
    r->diff_nodes = bad;
    r->live_pods = s->npods;
    r->live_nodes = s->nnodes;
    atomic_store(&s->stop_sampler, true);
    pthread_join(s->sampler, NULL);
    s->sampler = 0;
    proc_sample(&r->rss_kb[2], &r->fds[2]);
    if (!atomic_load(&s->warm)) {
        r->rss_kb[1] = r->rss_kb[2];
        r->fds[1] = r->fds[2];
    }
    rc = 0;
out:
    if (s->sampler) {
        atomic_store(&s->stop_sampler, true);
        pthread_join(s->sampler, NULL);
    }
    for (int i = 0; i < 2; i++)
        if (s->in[i].k || s->in[i].st) inst_stop(&s->in[i]);
    fake_api_free(s->api);
    for (int t = 0; t < NTEMPLATES; t++) cJSON_Delete(s->tmpl[t]);
    free(s->pods);
    free(s->nodes);
    pthread_mutex_destroy(&s->mu);
    free(s);
    return rc;
}

void soak_print(const soak_report *r, FILE *f) {
    fprintf(f, "soak: %.1f s of churn, settled in %.1f s; at the end %d nodes and %d pods in the API\n", r->seconds,
            r->settle_s, r->live_nodes, r->live_pods);
    fprintf(f, "  operations:");
    for (int i = 0; i < SOAK_OP_N; i++) fprintf(f, " %s=%llu", op_names[i], (unsigned long long)r->ops[i]);
    fprintf(f, "\n  faults:");
    for (int i = 0; i < SOAK_FAULT_N; i++) fprintf(f, " %s=%llu", fault_names[i], (unsigned long long)r->faults[i]);
    fprintf(f, "\n  node checks: %llu, over-committed: %llu%s%s\n", (unsigned long long)r->checks,
            (unsigned long long)r->overcommits, r->overcommits ? " -- first: " : "", r->first_overcommit);
    fprintf(f, "  final state vs a fresh relist: %d node(s) differ%s%s\n", r->diff_nodes, r->diff_nodes ? "\n" : "",
            r->diff_nodes ? r->diff : "");
    fprintf(f, "  RSS (MiB) / open fds: start %.1f / %d, after warm-up %.1f / %d, end %.1f / %d; highest after warm-up %.1f / %d\n",
            r->rss_kb[0] / 1024.0, r->fds[0], r->rss_kb[1] / 1024.0, r->fds[1], r->rss_kb[2] / 1024.0, r->fds[2],
            r->rss_max_kb / 1024.0, r->fds_max);
}
