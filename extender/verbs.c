/* verbs.c -- filter, prioritize, bind and preempt over the cache (state.h), speaking the
 * extender wire format. Every decision is model_fit's or the policy's; this file only
 * decodes arguments, asks, and encodes the answer. Wire keys are looked up
 * case-insensitively, as Go's encoding/json on the scheduler's side would match them.
 */
#include "extender/verbs.h"
#include "extender/quota.h"

#include "extender/mirror/dra.h"
#include "extender/mirror/holdings.h"
#include "model/charge.h"
#include "model/dra.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "extender/base/annotation.h"
#include "extender/jscan.h"
#include "extender/base/health.h"
#include "kube/log.h"
#include "kube/strbuf.h"
#include "extender/base/map.h"
#include "extender/delivery/reservation.h"
#include "extender/base/text.h"

/* The answer before the first sync, with what keeps tessera from syncing when health.h knows (the API
 * server unreachable, a 403 on list pods...): kube-scheduler puts it in the pod's FailedScheduling event. */
static const char *not_synced(char *buf, size_t len, const char *tail) {
    char why[1024];
    if (ext_health_ready(why, sizeof why)) snprintf(buf, len, "tessera is not synced with the API server yet%s", tail);
    else snprintf(buf, len, "tessera is not synced with the API server yet: %s%s", why, tail);
    return buf;
}

const char *ext_bind_outcome_name(ext_bind_outcome o) {
    static const char *n[] = {"ok", "already_bound", "no_room", "unknown_pod", "unknown_node", "api_error",
                              "not_ready", "bad_request", "not_leader", "claim_unallocated"};
    return o >= 0 && o < EXT_BIND_NOUTCOMES ? n[o] : "?";
}

void ext_reply_free(ext_reply *r) {
    if (!r) return;
    free(r->body);
    r->body = NULL;
    r->len = 0;
}

static void reply_json(ext_reply *r, int status, cJSON *root) {
    r->status = status;
    r->body = root ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!r->body) {
        r->status = 500;
        r->body = strdup("{\"Error\":\"out of memory\"}");
    }
    r->len = r->body ? strlen(r->body) : 0;
}

/* kube-scheduler shows an Error to people through a format string: no '%' (text.h). */
static void add_error(cJSON *o, const char *msg) {
    char *safe = ext_text_printf_safe_dup(msg ? msg : "");
    cJSON_AddStringToObject(o, "Error", safe ? safe : "out of memory");
    free(safe);
}

void ext_reply_error(ext_reply *r, int status, const char *msg) {
    cJSON *o = cJSON_CreateObject();
    add_error(o, msg);
    reply_json(r, status, o);
}

void ext_verbs_init(ext_verbs *v, ext_state *st, const policy *pol, ext_bind_fn bind, void *bind_user) {
    memset(v, 0, sizeof *v);
    v->st = st;
    v->pol = pol ? pol : policy_find("binpack");
    policy_ctx_init(&v->ctx, 0);
    v->bind = bind;
    v->bind_user = bind_user;
    v->dra_bind_wait_ms = EXT_DRA_BIND_WAIT_MS;
}

/* ---------------------------------------------------------------- reply text */

/* Filter and prioritize replies are written directly rather than built as cJSON trees:
 * with 5,000 candidates, cJSON's allocation per item and its printf+sscanf round trip for
 * every number cost as much as the scoring itself. */
typedef struct jbuf {
    kube_strbuf s;      /* kube/strbuf.h: its appends are inline */
    int items;          /* members written, for the commas */
} jbuf;

static void jb_raw(jbuf *b, const char *s, size_t n) { kube_strbuf_add(&b->s, s, n); }
static void jb_lit(jbuf *b, const char *s) { kube_strbuf_lit(&b->s, s); }
static void jb_str(jbuf *b, const char *s) { kube_strbuf_json(&b->s, s); }   /* a JSON string (kube/json.h) */

/* One "node":"reason" member of FailedNodes or FailedAndUnresolvableNodes; commas are the
 * buffer's business. kube-scheduler puts the reason in its FailedScheduling Event as a format
 * string, so a '%' a reason repeats from the pod is written as a word (text.h); the copy is
 * made only then, as most reasons have none. */
static void jb_member(jbuf *b, const char *key, const char *val) {
    if (b->items++) jb_raw(b, ",", 1);
    jb_str(b, key);
    jb_raw(b, ":", 1);
    char *safe = strchr(val, '%') ? ext_text_printf_safe_dup(val) : NULL;
    jb_str(b, safe ? safe : val);
    free(safe);
}

static void reply_jbuf(ext_reply *r, int status, jbuf *b) {
    size_t len = b->s.len;
    char *body = kube_strbuf_finish(&b->s);
    if (!body) {
        ext_reply_error(r, 500, "out of memory");
        return;
    }
    r->status = status;
    r->body = body;
    r->len = len;
}

/* ---------------------------------------------------------------- splitting work */

/* The candidates whose answer is not in the answer cache are computed on [from, to) of the
 * job's list of them. With many, the list is split with one helper thread: the caller holds
 * the state lock, so the cache is read-only meanwhile, and model_fit and policy_score only
 * read. The helper is started once and waits for work: a thread per call cost a clone, a
 * stack and its page faults, as much as the half it took over. Below SPLIT_MIN candidates
 * to compute the hand-over costs more than it saves; a call that finds the helper busy
 * (another state's verb) runs alone. The cache is read on the caller's thread before any
 * split (filter_lookup, score_lookup): a lookup costs less than the helper's wake-up and the
 * cache lines its half moves between cores, so a warm call (every answer cached, the common
 * case: kube-scheduler asks about pod after pod of one shape) never wakes the helper: over
 * 5,000 names its filter and prioritize round trip went from 1.04 to 0.86 ms p50 (tests/bench
 * A, a quiet 2-core machine). */
typedef void (*range_fn)(void *ctx, int from, int to);

#define SPLIT_MIN 1024

static struct {
    pthread_once_t once;
    bool started;
    pthread_mutex_t busy;        /* held by the caller whose job the helper runs */
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    bool has_job, job_done;
    range_fn fn;
    void *ctx;
    int from, to;
} helper = {.once = PTHREAD_ONCE_INIT, .busy = PTHREAD_MUTEX_INITIALIZER, .mu = PTHREAD_MUTEX_INITIALIZER,
            .wake = PTHREAD_COND_INITIALIZER, .done = PTHREAD_COND_INITIALIZER};

static void *helper_main(void *unused) {
    (void)unused;
    pthread_mutex_lock(&helper.mu);
    for (;;) {
        while (!helper.has_job) pthread_cond_wait(&helper.wake, &helper.mu);
        helper.has_job = false;
        pthread_mutex_unlock(&helper.mu);
        helper.fn(helper.ctx, helper.from, helper.to);
        pthread_mutex_lock(&helper.mu);
        helper.job_done = true;
        pthread_cond_signal(&helper.done);
    }
    return NULL;
}

static void helper_start(void) {
    pthread_t th;
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2 || pthread_create(&th, NULL, helper_main, NULL) != 0) return;
    pthread_detach(th);
    helper.started = true;
}

static void run_split(int n, range_fn fn, void *ctx) {
    if (n >= SPLIT_MIN) pthread_once(&helper.once, helper_start);
    if (n < SPLIT_MIN || !helper.started || pthread_mutex_trylock(&helper.busy) != 0) {
        fn(ctx, 0, n);
        return;
    }
    pthread_mutex_lock(&helper.mu);
    helper.fn = fn;
    helper.ctx = ctx;
    helper.from = n / 2;
    helper.to = n;
    helper.job_done = false;
    helper.has_job = true;
    pthread_cond_signal(&helper.wake);
    pthread_mutex_unlock(&helper.mu);
    fn(ctx, 0, n / 2);
    pthread_mutex_lock(&helper.mu);
    while (!helper.job_done) pthread_cond_wait(&helper.done, &helper.mu);
    pthread_mutex_unlock(&helper.mu);
    pthread_mutex_unlock(&helper.busy);
}

/* Per-call arrays (one per candidate) live in blocks each thread keeps and reuses: a
 * fresh 300 KiB block per call came back from jemalloc as pages purged on the last free,
 * and faulting them in again cost 90 page faults per prioritize of 5,000 names. A block
 * is valid until the same thread asks for the same slot again; freed when it exits. */
enum { SCRATCH_SLOTS = 5 };
typedef struct scratch { void *p[SCRATCH_SLOTS]; size_t cap[SCRATCH_SLOTS]; } scratch;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *arg) {
    scratch *s = arg;
    for (int i = 0; i < SCRATCH_SLOTS; i++) free(s->p[i]);
    free(s);
}

static void scratch_init(void) { (void)pthread_key_create(&scratch_key, scratch_free); }

/* n elements of size bytes in slot `slot` of this thread's scratch, zeroed if asked;
 * NULL when out of memory. */
static void *scratch_get(int slot, size_t n, size_t size, bool zero) {
    pthread_once(&scratch_once, scratch_init);
    scratch *s = pthread_getspecific(scratch_key);
    if (!s) {
        if (!(s = calloc(1, sizeof *s)) || pthread_setspecific(scratch_key, s) != 0) {
            free(s);
            return NULL;
        }
    }
    if (size && n > SIZE_MAX / size) return NULL;
    size_t need = n * size;
    if (need > s->cap[slot]) {
        void *p = realloc(s->p[slot], need);
        if (!p) return NULL;
        s->p[slot] = p;
        s->cap[slot] = need;
    }
    if (zero) memset(s->p[slot], 0, need);
    return s->p[slot];
}

/* ---------------------------------------------------------------- answer cache */

/* What filter and prioritize last answered about one node (see verbs.h), for the last
 * MEMO_WAYS request shapes each: kube-scheduler's queue interleaves the pods of several
 * workloads. Versions start at 1, so a zeroed entry matches nothing. */
#define MEMO_WAYS 4

/* Which shape at which node version a way holds; the keys of all ways sit together (one
 * cache line per verb), as every candidate node's lookup reads them. */
typedef struct memo_key {
    uint64_t version;
    uint32_t shape, written;            /* written: the call that stored it (oldest is recycled) */
} memo_key;

struct ext_node_memo {
    memo_key fit_key[MEMO_WAYS], score_key[MEMO_WAYS];
    uint64_t score_ctx[MEMO_WAYS];
    uint8_t fit_verdict[MEMO_WAYS];     /* fit_verdict below */
    bool has_why;                       /* fit_why is allocated (memo_with_why) */
    policy_result score[MEMO_WAYS];     /* rank redone per call under the random tie-break */
    /* Only a node that failed some filter needs its reasons: the block grows to hold them then (a 1 KiB
     * each of 5,000 nodes otherwise, most of which pass every filter). */
    char fit_why[][MODEL_REASON_LEN];
};

/* The way holding shape at this node version, or -1. */
static int memo_find(const memo_key *k, uint64_t version, uint32_t shape) {
    for (int w = 0; w < MEMO_WAYS; w++)
        if (k[w].version == version && k[w].shape == shape) return w;
    return -1;
}

/* The way to store a new answer in: one about an older state of the node, else the one
 * written longest ago. */
static int memo_victim(const memo_key *k, uint64_t version) {
    int out = 0;
    for (int w = 0; w < MEMO_WAYS; w++) {
        if (k[w].version != version) return w;
        if (k[w].written < k[out].written) out = w;
    }
    return out;
}

static _Atomic uint32_t memo_clock;   /* one tick per filter or prioritize call */

/* Shape ids are unique in the process, so entries written through one ext_verbs never
 * match a shape of another (tests run several over one state). */
static _Atomic uint32_t shape_seq;

/* The id of request r's shape (lock held). */
static uint32_t shape_id(ext_verbs *v, const model_request *r) {
    for (int i = 0; i < EXT_SHAPES; i++)
        if (v->shape_ids[i] && model_request_same(&v->shapes[i], r)) return v->shape_ids[i];
    int k = v->shape_next;
    v->shape_next = (k + 1) % EXT_SHAPES;
    v->shapes[k] = *r;
    v->shape_ids[k] = ++shape_seq;
    return v->shape_ids[k];
}

/* Everything besides the request and the node that a cached score depends on; 0 (never
 * cached) for a policy that draws per decision. */
static uint64_t score_ctx_key(const ext_verbs *v) {
    if (policy_draws_per_decision(v->pol)) return 0;
    const policy_ctx *c = &v->ctx;
    uint64_t h = ext_map_str_hash(policy_name(v->pol));
    /* the workload's version, not its address: an online estimate's next snapshot may
     * reuse the address of the one it replaced */
    uint64_t parts[] = {c->seed, policy_workload_version(c->workload), c->fgd_exact, c->tiebreak};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) h = (h ^ parts[i]) * 1099511628211ull + 0x9e3779b97f4a7c15ull;
    double w[] = {c->w_memory, c->w_compute, c->w_replica};
    for (int i = 0; i < 3; i++) {
        uint64_t bits;
        memcpy(&bits, &w[i], sizeof bits);
        h = (h ^ bits) * 1099511628211ull;
    }
    return h | 1;
}

/* --online-workload: count the pod as an arrival the first time it is prioritized, and
 * point ctx.workload at the estimate's current snapshot (lock held). */
static void online_observe(ext_verbs *v, const char *uid, const model_request *r) {
    if (!v->online) return;
    uint64_t h = ext_map_str_hash(uid) | 1;
    for (int i = 0; i < EXT_ONLINE_SEEN; i++)
        if (v->online_seen[i] == h) return;
    v->online_seen[v->online_next] = h;
    v->online_next = (v->online_next + 1) % EXT_ONLINE_SEEN;
    char err[256];
    if (policy_online_observe(v->online, r, err, sizeof err) < 0) return;   /* a request the model refused */
    v->ctx.workload = policy_online_current(v->online);
}

/* The node's entry, allocated on first use (lock held, one thread). NULL when out of memory. */
static struct ext_node_memo *memo_of(ext_state *st, const ext_node *en) {
    struct ext_node_memo **slot = ext_state_node_memo(st, en);
    if (!*slot) *slot = calloc(1, sizeof **slot);
    return *slot;
}

/* The node's memo with room for the reasons of failed verdicts, or NULL (out of memory: the memo stays
 * as it was and the verdict is not remembered). */
static struct ext_node_memo *memo_with_why(ext_state *st, const ext_node *en) {
    struct ext_node_memo **slot = ext_state_node_memo(st, en);
    if (!*slot || (*slot)->has_why) return *slot;
    struct ext_node_memo *g = realloc(*slot, sizeof **slot + MEMO_WAYS * sizeof g->fit_why[0]);
    if (!g) return NULL;
    memset(g->fit_why, 0, MEMO_WAYS * sizeof g->fit_why[0]);
    g->has_why = true;
    return *slot = g;
}

/* ---------------------------------------------------------------- args */

typedef struct ext_args {
    cJSON *root;            /* filter/prioritize: the Pod; preempt: the whole body */
    const cJSON *pod;
    bool node_list;         /* Nodes was given: the candidates are its items */
    int n;                  /* candidates */
    const char **names;     /* candidate names (in names_buf) */
    jscan_span *objs;       /* node-list mode: each Node object's text in the body */
    char *names_buf;
    const char *uid, *ns, *name;
    model_request req;
    int req_ok;             /* 1 parsed; 0 the pod's request is invalid (req_err) */
    char req_err[256];
} ext_args;

static void args_free(ext_args *a) {
    free(a->names);
    free(a->objs);
    free(a->names_buf);
    cJSON_Delete(a->root);
}

static const char *meta_str(const cJSON *o, const char *key) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "metadata");
    const cJSON *v = cJSON_IsObject(m) ? cJSON_GetObjectItemCaseSensitive(m, key) : NULL;
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static bool is_null(const cJSON *v) { return !v || cJSON_IsNull(v); }

/* Decode the Pod part shared by ExtenderArgs and ExtenderPreemptionArgs. */
static int parse_pod(ext_args *a, const cJSON *pod, char *err, size_t errlen) {
    a->pod = pod;
    if (!cJSON_IsObject(a->pod)) {
        snprintf(err, errlen, "Pod: expected a v1.Pod object");
        return -1;
    }
    a->uid = meta_str(a->pod, "uid");
    a->ns = meta_str(a->pod, "namespace");
    a->name = meta_str(a->pod, "name");
    if (!a->name) {
        snprintf(err, errlen, "Pod.metadata.name: expected a string");
        return -1;
    }
    if (!a->ns) a->ns = "default";
    if (!a->uid) a->uid = "";
    if (strlen(a->uid) >= MODEL_UID_LEN) {   /* the cache could not keep it, and bind would not find the pod */
        snprintf(err, errlen, "Pod.metadata.uid: %zu characters, longer than the %d tessera keeps", strlen(a->uid),
                 MODEL_UID_LEN - 1);
        return -1;
    }
    a->req_ok = model_request_from_pod(a->pod, &a->req, a->req_err, sizeof a->req_err) == 0;
    return 0;
}

static bool raw_key_is(jscan_span k, const char *name) {
    return k.len == strlen(name) && memcmp(k.p, name, k.len) == 0;   /* case-sensitive, as in v1 objects */
}

/* Room for one more candidate; the names buffer is sized by the caller. */
static bool args_grow(ext_args *a, int *cap, bool spans) {
    if (a->n < *cap) return true;
    int nc = *cap ? 2 * *cap : 64;
    const char **nn = realloc(a->names, (size_t)nc * sizeof *nn);
    if (!nn) return false;
    a->names = nn;
    if (spans) {
        jscan_span *ns = realloc(a->objs, (size_t)nc * sizeof *ns);
        if (!ns) return false;
        a->objs = ns;
    }
    *cap = nc;
    return true;
}

/* The name of the Node object the scanner is at (metadata.name) into *name, consuming
 * the object. 1 found, 0 the object has none, -1 not an object or malformed. */
static int node_name(jscan *s, char **buf, size_t *left, const char **name) {
    jscan_span k;
    int r;
    *name = NULL;
    if (!jscan_object_begin(s)) return -1;
    while ((r = jscan_object_next(s, &k)) > 0) {
        if (!raw_key_is(k, "metadata") || *name || jscan_peek(s) != '{') {
            if (!jscan_skip(s, NULL)) return -1;
            continue;
        }
        jscan_object_begin(s);
        while ((r = jscan_object_next(s, &k)) > 0) {
            if (raw_key_is(k, "name") && !*name && jscan_peek(s) == '"') {
                long w = jscan_string(s, *buf, *left);
                if (w < 0) return -1;
                *name = *buf;
                *buf += w + 1;
                *left -= (size_t)w + 1;
            } else if (!jscan_skip(s, NULL)) {
                return -1;
            }
        }
        if (r < 0) return -1;
    }
    return r < 0 ? -1 : *name != NULL;
}

/* Nodes: a v1.NodeList, read in place from the body's scanner; the candidates are its
 * items, kept as spans of the body. Names are decoded into one buffer as long as the
 * rest of the body (only the pages written to are ever touched). */
static int parse_node_list(ext_args *a, jscan *s, char *err, size_t errlen) {
    if (jscan_peek(s) != '{') {
        snprintf(err, errlen, "Nodes: expected a v1.NodeList object or null");
        return -1;
    }
    a->node_list = true;
    size_t left = (size_t)(s->end - s->p) + 1;
    if (!(a->names_buf = malloc(left))) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    char *buf = a->names_buf;
    jscan_span k;
    int r, cap = 0;
    bool seen_items = false;
    jscan_object_begin(s);
    while ((r = jscan_object_next(s, &k)) > 0) {
        if (!raw_key_is(k, "items") || seen_items) {
            if (!jscan_skip(s, NULL)) break;
            continue;
        }
        seen_items = true;
        if (jscan_null(s)) continue;
        if (jscan_peek(s) != '[') {
            if (s->err) break;
            snprintf(err, errlen, "Nodes.items: expected an array");
            return -1;
        }
        jscan_array_begin(s);
        int ri;
        while ((ri = jscan_array_next(s)) > 0) {
            if (!args_grow(a, &cap, true)) {
                snprintf(err, errlen, "out of memory");
                return -1;
            }
            const char *start = s->p, *nm;
            int found = jscan_peek(s) == '{' ? node_name(s, &buf, &left, &nm) : -1;
            if (found != 1 && !s->err) {
                snprintf(err, errlen, "Nodes.items[%d]: expected a v1.Node with metadata.name", a->n);
                return -1;
            }
            if (found != 1) break;
            a->objs[a->n] = (jscan_span){start, (size_t)(s->p - start)};
            a->names[a->n++] = nm;
        }
        if (ri < 0 || s->err) break;
    }
    if (r < 0 || s->err) {
        snprintf(err, errlen, "request body is not valid JSON (malformed or truncated): %s", s->err ? s->err : "?");
        return -1;
    }
    return 0;
}

static int parse_node_names(ext_args *a, jscan_span names, char *err, size_t errlen) {
    jscan s;
    jscan_init(&s, names.p, names.len);
    if (jscan_peek(&s) != '[') {
        snprintf(err, errlen, "NodeNames: expected an array of strings or null");
        return -1;
    }
    if (!(a->names_buf = malloc(names.len + 1))) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    char *buf = a->names_buf;
    size_t left = names.len + 1;
    int r, cap = 0;
    jscan_array_begin(&s);
    while ((r = jscan_array_next(&s)) > 0) {
        if (!args_grow(a, &cap, false)) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        long w = jscan_peek(&s) == '"' ? jscan_string(&s, buf, left) : -1;
        if (w < 0) {
            snprintf(err, errlen, "NodeNames[%d]: expected a string", a->n);
            return -1;
        }
        a->names[a->n++] = buf;
        buf += w + 1;
        left -= (size_t)w + 1;
    }
    if (r < 0) {
        snprintf(err, errlen, "NodeNames: %s", s.err ? s.err : "malformed");
        return -1;
    }
    return 0;
}

/* ExtenderArgs: {Pod, Nodes: NodeList|null, NodeNames: [string]|null}. The body is
 * walked with jscan (keys matched case-insensitively, the first of duplicates wins, as
 * cJSON_GetObjectItem would): only the Pod becomes a cJSON tree; candidate names are
 * decoded into one buffer, and Node objects stay spans of the body, echoed as they came.
 * With 1,000 full Node objects (megabytes) that is most of filter's time saved. */
/* What the delivery of soft shares can serve narrows where a fraction may go (model_request.no_mps). */
static void limit_to_delivery(const ext_verbs *v, model_request *r) {
    if (v->fraction_no_mps) model_request_for_reservation_delivery(r);
}

static int parse_args(ext_args *a, const char *body, size_t len, char *err, size_t errlen) {
    memset(a, 0, sizeof *a);
    jscan s;
    jscan_init(&s, body, len);
    jscan_span k, pod = {0}, names = {0};
    bool seen_nodes = false;
    int r = -1;
    if (jscan_peek(&s) == '{') {
        jscan_object_begin(&s);
        while ((r = jscan_object_next(&s, &k)) > 0) {
            if (jscan_key_is(k, "Nodes") && !seen_nodes) {   /* read in place: it can be megabytes */
                seen_nodes = true;
                if (jscan_null(&s)) continue;
                if (s.err) break;
                if (parse_node_list(a, &s, err, errlen) < 0) return -1;
                continue;
            }
            jscan_span *slot = jscan_key_is(k, "Pod") ? &pod : jscan_key_is(k, "NodeNames") ? &names : NULL;
            if (!jscan_skip(&s, slot && !slot->p ? slot : NULL)) break;
        }
    } else if (jscan_peek(&s) && jscan_skip(&s, NULL) && jscan_at_end(&s)) {
        snprintf(err, errlen, "request body must be a JSON object (ExtenderArgs)");
        return -1;
    }
    if (r != 0 || s.err || !jscan_at_end(&s)) {
        snprintf(err, errlen, "request body is not valid JSON (malformed or truncated)%s%s", s.err ? ": " : "",
                 s.err ? s.err : "");
        return -1;
    }
    a->root = pod.p ? cJSON_ParseWithLength(pod.p, pod.len) : NULL;
    if (parse_pod(a, a->root, err, errlen) < 0) return -1;
    if (a->node_list) return 0;
    if (!names.p || (names.len == 4 && !memcmp(names.p, "null", 4))) {
        snprintf(err, errlen, "ExtenderArgs: neither Nodes nor NodeNames is set");
        return -1;
    }
    return parse_node_names(a, names, err, errlen);
}

/* ---------------------------------------------------------------- filter */

static cJSON *filter_result(cJSON *nodes, cJSON *names, cJSON *failed, cJSON *unres, const char *error) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "Nodes", nodes ? nodes : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "NodeNames", names ? names : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "FailedNodes", failed ? failed : cJSON_CreateObject());
    cJSON_AddItemToObject(o, "FailedAndUnresolvableNodes", unres ? unres : cJSON_CreateObject());
    add_error(o, error);
    return o;
}

typedef enum { FIT_OK, FIT_FAILED, FIT_UNRESOLVABLE } fit_verdict;

/* Whether r fits node en; if not, whether evicting every lower-priority pod there could
 * make room (FailedNodes) or not (FailedAndUnresolvableNodes: wrong model, unusable
 * node, request larger than the node). Lock held. */
static fit_verdict judge(ext_state *st, const ext_node *en, const char *node, const model_request *r, char *why,
                         size_t whylen) {
    if (r->via_dra) {
        /* DynamicResources allocates: refuse only where too few devices are published at all; what tessera cannot
         * see (no Node object, a node it cannot model) is no reason to refuse */
        if (!en || !en->m || en->m->reason[0]) return FIT_OK;
        return model_dra_could_fit(en->m, r, why, whylen) ? FIT_OK : FIT_UNRESOLVABLE;
    }
    if (!en || !en->m) {
        snprintf(why, whylen, "node %s is not in tessera's cache (no Node object seen)", node);
        return FIT_UNRESOLVABLE;
    }
    if (en->m->reason[0]) {
        snprintf(why, whylen, "node takes no GPU pods: %.200s", en->m->reason);
        return FIT_UNRESOLVABLE;
    }
    /* a pod sized at admission for the GPUs the cluster had then (README, Quotas) never takes a larger one */
    if (!model_charge_node_within(en->m, r, why, whylen)) return FIT_UNRESOLVABLE;
    if (model_fit_any(en->m, r, why, whylen)) return FIT_OK;
    const char *stack[64] = {0};
    const char **uids = en->npods <= 64 ? stack : malloc((size_t)en->npods * sizeof *uids);
    if (!uids) return FIT_FAILED;
    int k = 0;
    for (int i = 0; i < en->npods; i++)
        if (en->pods[i]->holds && en->pods[i]->req.priority < r->priority) uids[k++] = en->pods[i]->uid;
    fit_verdict v = FIT_UNRESOLVABLE;
    if (k > 0) {
        model_node *c = ext_state_node_without(st, en, uids, k);
        char why2[MODEL_REASON_LEN];
        if (!c || model_fit(c, r, NULL, 0, why2, sizeof why2) > 0) v = FIT_FAILED;
        else snprintf(why, whylen, "%s", why2);   /* what stands in the way even on an emptier node */
        model_node_free(c);
    }
    if (uids != stack) free((void *)uids);
    return v;
}

/* What filter answered about one candidate: read from the node's cache entry by the caller
 * (filter_lookup), or computed (filter_range, maybe on the helper) and stored into the entry
 * afterwards by one thread (a body may name a node twice). */
typedef struct fit_answer {
    const ext_node *en;          /* the candidate's node; NULL: not in tessera's cache */
    fit_verdict verdict;
    bool computed;               /* judged in this call */
    const char *cached_why;      /* from the cache: the entry's reason ("" when it fits) */
    char *why;                   /* computed: malloc'd reason; NULL when it fits (or out of memory) */
} fit_answer;

/* The request a node is judged and scored on: the pod's, or on a node whose GPUs only DRA publishes the one of
 * the claim kube-scheduler makes for its nvidia.com/gpu (xreq, when a DeviceClass maps it; dra.h). */
typedef struct node_req { const model_request *req, *xreq; uint32_t shape, xshape; } node_req;

static const model_request *req_on(const node_req *q, const ext_node *en, uint32_t *shape) {
    bool x = q->xreq && en && en->m && model_dra_extended_on(en->m);
    *shape = x ? q->xshape : q->shape;
    return x ? q->xreq : q->req;
}

/* The extended-resource alternative of a device-plugin request into q (lock held). */
static void req_prepare(ext_verbs *v, const ext_args *a, node_req *q, model_request *xr) {
    q->req = &a->req;
    q->shape = shape_id(v, &a->req);
    q->xreq = NULL;
    if (!ext_dra_extended_request(ext_state_dra(v->st), &a->req, xr)) return;
    q->xreq = xr;
    q->xshape = shape_id(v, xr);
    ext_dra_note_pod(ext_state_dra(v->st), a->pod);   /* bind records the claim kube-scheduler will make */
}

typedef struct filter_job {
    ext_state *st;
    const ext_args *a;
    node_req q;
    uint32_t clock;
    bool *pass;
    fit_answer *ans;            /* per candidate */
    int *todo, ntodo;           /* the candidates to compute: not answered by the cache */
    long hits;
    jbuf failed, unres;         /* "node":"why" members */
    const char *claim;          /* a claim pod's reasons name the claim whose constraints they are about: the
                                 * cached reason is the shape's, the claim is this pod's */
} filter_job;

/* Each candidate's verdict from its node's cache entry, or the candidate onto the list to compute (lock held,
 * the caller's thread). */
static void filter_lookup(filter_job *j) {
    j->ntodo = 0;
    for (int i = 0; i < j->a->n; i++) {
        const ext_node *en = ext_state_node(j->st, j->a->names[i]);
        const struct ext_node_memo *m = en && en->m ? en->memo : NULL;
        uint32_t shape;
        req_on(&j->q, en, &shape);
        int w = m ? memo_find(m->fit_key, en->version, shape) : -1;
        if (w >= 0) {
            fit_verdict fv = (fit_verdict)m->fit_verdict[w];
            j->ans[i] = (fit_answer){en, fv, false, fv == FIT_OK ? "" : m->fit_why[w], NULL};
            j->hits++;
        } else {
            j->ans[i] = (fit_answer){en, FIT_OK, true, NULL, NULL};
            j->todo[j->ntodo++] = i;
        }
    }
}

/* Judge the candidates todo[from..to) (lock held; maybe on the helper). */
static void filter_range(void *ctx, int from, int to) {
    filter_job *j = ctx;
    for (int k = from; k < to; k++) {
        int i = j->todo[k];
        fit_answer *f = &j->ans[i];
        uint32_t shape;
        const model_request *r = req_on(&j->q, f->en, &shape);
        char buf[MODEL_REASON_LEN];
        f->verdict = judge(j->st, f->en, j->a->names[i], r, buf, sizeof buf);
        f->why = f->verdict == FIT_OK ? NULL : strdup(buf);
    }
}

/* The candidates' answers in the order the body named them: pass, FailedNodes and FailedAndUnresolvableNodes
 * (lock held: a cached reason is the entry's text, which filter_remember may move). */
static void filter_answer(filter_job *j) {
    for (int i = 0; i < j->a->n; i++) {
        const fit_answer *f = &j->ans[i];
        if (f->verdict == FIT_OK) {
            j->pass[i] = true;
            continue;
        }
        const char *why = !f->computed ? f->cached_why : f->why ? f->why : "out of memory while judging this node";
        char named[MODEL_REASON_LEN + 160];
        if (j->claim && j->claim[0]) {
            snprintf(named, sizeof named, "claim %.120s: %s", j->claim, why);
            why = named;
        }
        jb_member(f->verdict == FIT_FAILED ? &j->failed : &j->unres, j->a->names[i], why);
    }
}

/* Store the verdicts computed in this call (lock held, one thread). */
static void filter_remember(filter_job *j) {
    for (int k = 0; k < j->ntodo; k++) {
        fit_answer *f = &j->ans[j->todo[k]];
        if (!f->en || !f->en->m) continue;   /* nothing to store it in */
        struct ext_node_memo *m = memo_of(j->st, f->en);
        if (m && f->verdict != FIT_OK) m = f->why ? memo_with_why(j->st, f->en) : NULL;
        if (m) {
            uint32_t shape;
            req_on(&j->q, f->en, &shape);
            int w = memo_victim(m->fit_key, f->en->version);
            m->fit_key[w] = (memo_key){f->en->version, shape, j->clock};
            m->fit_verdict[w] = (uint8_t)f->verdict;
            if (m->has_why) snprintf(m->fit_why[w], sizeof m->fit_why[w], "%s", f->why ? f->why : "");
        }
    }
    for (int k = 0; k < j->ntodo; k++) free(j->ans[j->todo[k]].why);
}

/* The whole judging of a pod's request on every candidate (lock held). */
static void filter_judge(filter_job *j) {
    filter_lookup(j);
    run_split(j->ntodo, filter_range, j);
    filter_answer(j);
    filter_remember(j);
}

/* {"a":"x"} from the members. */
static void put_members(jbuf *out, jbuf *members) {
    jb_raw(out, "{", 1);
    if (members->s.p) jb_raw(out, members->s.p, members->s.len);
    out->s.oom |= members->s.oom;
    kube_strbuf_free(&members->s);
    jb_raw(out, "}", 1);
}

/* ---------------------------------------------------------------- DRA pods
 *
 * A pod whose GPUs come through ResourceClaims (extender/mirror/dra.h) is DynamicResources' to allocate: filter
 * refuses a node only where the node publishes too few matching devices even if all were free (which
 * DynamicResources refuses too), prioritize ranks the nodes with the policy on the devices the claim could get
 * there, and bind posts the Binding alone (the memo's request is via_dra, which is never reserved). A claim
 * tessera cannot judge (dra.h) passes every node and scores 0 everywhere: neutral. */

static model_dra_verdict dra_request(ext_verbs *v, const ext_args *a, model_request *dr, char *why, size_t whylen,
                                     char *claim, size_t claimlen) {
    model_dra_verdict vd = ext_dra_pod_request(ext_state_dra(v->st), a->pod, dr, why, whylen, claim, claimlen);
    if (vd == MODEL_DRA_JUDGED) model_dra_request_of_pod(dr, &a->req);
    return vd;
}

static void dra_log(const ext_args *a, const char *verb, model_dra_verdict vd, const char *why) {
    if (vd == MODEL_DRA_UNJUDGED)
        kube_log(KUBE_LOG_INFO, "verb=%s pod=%s/%s dra=not-judged score=neutral why=\"%s\"", verb, a->ns, a->name, why);
}

/* The claim's request is judged on each node as any request is (filter_range, the answer cache), by
 * model_dra_could_fit (judge). */
static void dra_filter(ext_verbs *v, ext_args *a, filter_job *j) {
    model_request dr;
    char why[256];
    ext_state_lock(v->st);
    ext_dra_note_pod(ext_state_dra(v->st), a->pod);   /* which claims bind records */
    char claim[256];
    model_dra_verdict vd = dra_request(v, a, &dr, why, sizeof why, claim, sizeof claim);
    if (vd == MODEL_DRA_JUDGED) {
        j->q = (node_req){.req = &dr, .shape = shape_id(v, &dr)};
        j->claim = claim;
        j->clock = ++memo_clock;
        filter_judge(j);
        j->claim = NULL;   /* claim is this function's */
    } else {
        for (int i = 0; i < a->n; i++) j->pass[i] = true;   /* not judged: neutral */
    }
    ext_state_unlock(v->st);
    if (vd == MODEL_DRA_JUDGED) {
        v->cache_hits += (uint64_t)j->hits;
        v->cache_misses += (uint64_t)(a->n - j->hits);
        ext_state_note_request(v->st, a->uid, a->ns, a->name, &dr);   /* bind, debug */
    }
    dra_log(a, "filter", vd, why);
}

void ext_verb_filter(ext_verbs *v, const char *body, size_t len, ext_reply *out) {
    ext_args a;
    char err[1024];   /* room for namespace (63), name (253) and the request's error (256) */
    ext_leader_note_call(v->leader);   /* scheduling calls are what makes this replica campaign */
    int parsed = parse_args(&a, body, len, err, sizeof err);
    if (parsed == 0 && a.req_ok) limit_to_delivery(v, &a.req);
    if (parsed < 0) {
        args_free(&a);
        reply_json(out, 400, filter_result(NULL, NULL, NULL, NULL, err));
        return;
    }
    if (!ext_state_ready(v->st)) {
        args_free(&a);
        char nm[1200];
        reply_json(out, 200, filter_result(NULL, NULL, NULL, NULL, not_synced(nm, sizeof nm, "; try again")));
        return;
    }
    filter_job j = {.st = v->st, .a = &a, .pass = scratch_get(0, (size_t)a.n + 1, sizeof *j.pass, true),
                    .ans = scratch_get(1, (size_t)a.n + 1, sizeof *j.ans, false),   /* filter_lookup fills each */
                    .todo = scratch_get(2, (size_t)a.n + 1, sizeof *j.todo, false)};
    if (!j.pass || !j.ans || !j.todo) {
        args_free(&a);
        ext_reply_error(out, 500, "out of memory");
        return;
    }
    if (a.req_ok) ext_state_note_request(v->st, a.uid, a.ns, a.name, &a.req);   /* for bind */
    if (!a.req_ok) {
        snprintf(err, sizeof err, "pod %s/%s: invalid GPU request: %s", a.ns, a.name, a.req_err);
        for (int i = 0; i < a.n; i++) jb_member(&j.unres, a.names[i], err);
    } else if (!model_request_wants_gpu(&a.req) && ext_dra_pod_has_claims(a.pod)) {
        dra_filter(v, &a, &j);   /* GPUs through ResourceClaims: see "DRA pods" below */
    } else if (!model_request_wants_gpu(&a.req)) {
        for (int i = 0; i < a.n; i++) j.pass[i] = true;   /* not ours to judge */
    } else {
        ext_state_lock(v->st);
        model_request xr;
        req_prepare(v, &a, &j.q, &xr);
        j.clock = ++memo_clock;
        filter_judge(&j);
        ext_state_unlock(v->st);
        v->cache_hits += (uint64_t)j.hits;
        v->cache_misses += (uint64_t)(a.n - j.hits);
    }
    jbuf b = {0};
    int npass = 0;
    if (a.node_list) {
        /* Echo the scheduler's own Node objects, as it sent them: it uses what we return as is. */
        size_t total = 4096;
        for (int i = 0; i < a.n; i++) total += j.pass[i] ? a.objs[i].len + 1 : 0;
        kube_strbuf_reserve(&b.s, total);   /* one allocation for megabytes of Node objects */
        jb_lit(&b, "{\"Nodes\":{\"metadata\":{},\"items\":[");
        for (int i = 0; i < a.n; i++)
            if (j.pass[i]) {
                if (npass++) jb_raw(&b, ",", 1);
                jb_raw(&b, a.objs[i].p, a.objs[i].len);
            }
        jb_lit(&b, "]},\"NodeNames\":null");
    } else {
        jb_lit(&b, "{\"Nodes\":null,\"NodeNames\":[");
        for (int i = 0; i < a.n; i++)
            if (j.pass[i]) {
                if (npass++) jb_raw(&b, ",", 1);
                jb_str(&b, a.names[i]);
            }
        jb_raw(&b, "]", 1);
    }
    jb_lit(&b, ",\"FailedNodes\":");
    put_members(&b, &j.failed);
    jb_lit(&b, ",\"FailedAndUnresolvableNodes\":");
    put_members(&b, &j.unres);
    jb_lit(&b, ",\"Error\":\"\"}");
    kube_log(KUBE_LOG_DEBUG, "verb=filter pod=%s/%s candidates=%d feasible=%d", a.ns, a.name, a.n, npass);
    args_free(&a);
    reply_jbuf(out, 200, &b);
}

/* ---------------------------------------------------------------- prioritize */

typedef struct score_job {
    ext_state *st;
    const ext_verbs *v;
    const ext_args *a;
    const policy_ctx *ctx;
    node_req q;
    uint32_t clock;
    uint64_t ctx_key;            /* 0: do not cache */
    policy_result *res;
    const ext_node **node;       /* per candidate to compute: its node (NULL: not in tessera's cache) */
    const ext_node **fresh;      /* per candidate: the node whose res[i] is to be remembered */
    int *todo, ntodo;            /* the candidates to compute: not answered by the cache */
    long hits;
} score_job;

/* Each candidate's result from its node's cache entry, or the candidate onto the list to compute (lock held,
 * the caller's thread). */
static void score_lookup(score_job *j) {
    j->ntodo = 0;
    for (int i = 0; i < j->a->n; i++) {
        const ext_node *en = ext_state_node(j->st, j->a->names[i]);
        const struct ext_node_memo *m = j->ctx_key && en && en->m ? en->memo : NULL;
        uint32_t shape;
        req_on(&j->q, en, &shape);
        int w = m ? memo_find(m->score_key, en->version, shape) : -1;
        if (w >= 0 && m->score_ctx[w] == j->ctx_key) {
            j->res[i] = m->score[w];
            if (j->ctx->tiebreak == POLICY_TIE_RANDOM) j->res[i].rank = policy_node_rank(j->ctx, j->a->names[i]);
            j->hits++;
        } else {
            j->node[i] = en;
            j->todo[j->ntodo++] = i;
        }
    }
}

/* Score the candidates todo[from..to) (lock held; maybe on the helper). */
static void score_range(void *vctx, int from, int to) {
    score_job *j = vctx;
    for (int k = from; k < to; k++) {
        int i = j->todo[k];
        const ext_node *en = j->node[i];
        uint32_t shape;
        const model_request *r = req_on(&j->q, en, &shape);
        if (!en || !en->m || policy_score(j->v->pol, r, en->m, j->ctx, &j->res[i], NULL, 0) != 0) {
            memset(&j->res[i], 0, sizeof j->res[i]);
            j->res[i].rank = policy_node_rank(j->ctx, j->a->names[i]);
        } else if (j->ctx_key) {
            j->fresh[i] = en;
        }
    }
}

/* Store the scores computed in this call (lock held, one thread). */
static void score_remember(score_job *j) {
    for (int k = 0; k < j->ntodo; k++) {
        int i = j->todo[k];
        if (!j->fresh[i]) continue;
        struct ext_node_memo *m = memo_of(j->st, j->fresh[i]);
        if (!m) continue;
        uint32_t shape;
        req_on(&j->q, j->fresh[i], &shape);
        int w = memo_victim(m->score_key, j->fresh[i]->version);
        m->score_key[w] = (memo_key){j->fresh[i]->version, shape, j->clock};
        m->score_ctx[w] = j->ctx_key;
        m->score[w] = j->res[i];
    }
}

/* The policy's result for the pod's request on every candidate (lock held). */
static void score_all(score_job *j) {
    score_lookup(j);
    run_split(j->ntodo, score_range, j);
    score_remember(j);
}

/* Scores into res (zeroed by the caller when not judged): the policy on the claim's request, through score_all
 * and the answer cache as for any pod. */
static void dra_prioritize(ext_verbs *v, const ext_args *a, policy_ctx *ctx, score_job *jp) {
    model_request dr;
    char why[256];
    ext_state_lock(v->st);
    ext_dra_note_pod(ext_state_dra(v->st), a->pod);
    model_dra_verdict vd = dra_request(v, a, &dr, why, sizeof why, NULL, 0);
    score_job j = *jp;
    if (vd == MODEL_DRA_JUDGED) {
        /* a claim pod is GPU work like any other: the online target workload counts its shape (the workload
         * keeps no path, policy_workload_add), so fgd measures it as it measures the device-plugin pod */
        online_observe(v, a->uid, &dr);
        ctx->workload = v->ctx.workload;   /* read under the lock, as in ext_verb_prioritize */
        j.ctx_key = score_ctx_key(v);
        j.q = (node_req){.req = &dr, .shape = shape_id(v, &dr)};
        j.clock = ++memo_clock;
        score_all(&j);
    } else {
        for (int i = 0; i < a->n; i++) j.res[i].rank = policy_node_rank(ctx, a->names[i]);
    }
    ext_state_unlock(v->st);
    if (vd == MODEL_DRA_JUDGED) {
        v->cache_hits += (uint64_t)j.hits;
        v->cache_misses += (uint64_t)(a->n - j.hits);
        ext_state_note_request(v->st, a->uid, a->ns, a->name, &dr);
    }
    dra_log(a, "prioritize", vd, why);
}

void ext_verb_prioritize(ext_verbs *v, const char *body, size_t len, ext_reply *out) {
    ext_args a;
    char err[1024];
    ext_leader_note_call(v->leader);   /* scheduling calls are what makes this replica campaign */
    int parsed = parse_args(&a, body, len, err, sizeof err);
    if (parsed == 0 && a.req_ok) limit_to_delivery(v, &a.req);
    if (parsed < 0) {
        args_free(&a);
        ext_reply_error(out, 400, err);
        return;
    }
    if (!ext_state_ready(v->st)) {
        args_free(&a);
        char nm[1200];
        ext_reply_error(out, 503, not_synced(nm, sizeof nm, ""));
        return;
    }
    int *score = scratch_get(0, (size_t)a.n + 1, sizeof *score, true);
    policy_result *res = scratch_get(1, (size_t)a.n + 1, sizeof *res, false);   /* score_all fills each */
    const ext_node **fresh = scratch_get(2, (size_t)a.n + 1, sizeof *fresh, true);
    const ext_node **node = scratch_get(3, (size_t)a.n + 1, sizeof *node, false);   /* score_lookup: each to compute */
    int *todo = scratch_get(4, (size_t)a.n + 1, sizeof *todo, false);
    if (!score || !res || !fresh || !node || !todo) {
        args_free(&a);
        ext_reply_error(out, 500, "out of memory");
        return;
    }
    if (a.req_ok) ext_state_note_request(v->st, a.uid, a.ns, a.name, &a.req);
    policy_ctx ctx = v->ctx;
    ctx.decision = ext_map_str_hash(a.uid);
    score_job j = {.st = v->st, .v = v, .a = &a, .ctx = &ctx, .res = res, .node = node, .fresh = fresh, .todo = todo};
    if (a.req_ok && model_request_wants_gpu(&a.req)) {
        ext_state_lock(v->st);
        online_observe(v, a.uid, &a.req);
        ctx.workload = v->ctx.workload;   /* read under the lock: a rebuild frees the old one */
        j.ctx_key = score_ctx_key(v);
        model_request xr;
        req_prepare(v, &a, &j.q, &xr);
        j.clock = ++memo_clock;
        score_all(&j);
        ext_state_unlock(v->st);
        v->cache_hits += (uint64_t)j.hits;
        v->cache_misses += (uint64_t)(a.n - j.hits);
        policy_scores_0_10(v->pol, &ctx, res, a.n, score);
    } else if (a.req_ok && ext_dra_pod_has_claims(a.pod)) {
        memset(res, 0, (size_t)a.n * sizeof *res);
        dra_prioritize(v, &a, &ctx, &j);
        policy_scores_0_10(v->pol, &ctx, res, a.n, score);
    }
    /* [{"Host":"name","Score":n}, ...]: the bare HostPriorityList. */
    jbuf b = {0};
    jb_raw(&b, "[", 1);
    for (int i = 0; i < a.n; i++) {
        jb_lit(&b, i ? ",{\"Host\":" : "{\"Host\":");
        jb_str(&b, a.names[i]);
        /* Scores are 0..10: digits by hand, as printf per node costs as much as the lookup. */
        char num[16] = ",\"Score\":";
        size_t nl = 9;
        int sc = score[i] < 0 ? 0 : score[i] > 99 ? 99 : score[i];
        if (sc >= 10) num[nl++] = (char)('0' + sc / 10);
        num[nl++] = (char)('0' + sc % 10);
        num[nl++] = '}';
        jb_raw(&b, num, nl);
    }
    jb_raw(&b, "]", 1);
    args_free(&a);
    reply_jbuf(out, 200, &b);
}

/* ---------------------------------------------------------------- bind */

/* A malloc'd formatted string (measured, never cut); NULL when out of memory. */
static char *str_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *str_printf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!s) return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

/* A DRA pod's record was not complete in the cache (rec: ext_dra_bind_record's answer, missing what it lacked):
 * wait on the watch up to dra_bind_wait_ms (when the pod's claims are known), then read the API. 0 with *text,
 * or -1 with err saying what bind waited for. Called without the lock. */
static int dra_settle(ext_verbs *v, const char *ns, const char *name, const char *uid, bool want_extended, int rec,
                      char **text, char *missing, size_t mlen, char *err, size_t errlen) {
    int64_t t0 = ext_now_ms(), deadline = t0 + (v->dra_bind_wait_ms > 0 ? v->dra_bind_wait_ms : 0);
    while (rec == 0 && ext_now_ms() < deadline) {
        usleep(5000);
        ext_state_lock(v->st);
        rec = ext_dra_bind_record(ext_state_dra(v->st), ns, uid, want_extended, text, missing, mlen);
        ext_state_unlock(v->st);
    }
    if (rec == 1) return 0;
    int waited = (int)(ext_now_ms() - t0);
    char first[512];
    snprintf(first, sizeof first, "%s", missing);
    if (!v->kube) {
        snprintf(err, errlen, "pod %s/%s: waited %d ms for %s; not bound, so that the record of its devices is never "
                 "partial (no API server to read it from in standalone mode)", ns, name, waited, first);
        return -1;
    }
    int timeout = v->dra_bind_wait_ms > 0 ? v->dra_bind_wait_ms * 2 : 2000;
    if (ext_dra_record_from_api(v->kube, ns, name, uid, want_extended, timeout, text, missing, mlen) == 1) {
        kube_log(KUBE_LOG_INFO, "verb=bind pod=%s/%s dra-record=api waited_ms=%d why=\"the watch had not shown %s\"", ns,
                 name, waited, first);
        return 0;
    }
    snprintf(err, errlen, "pod %s/%s: waited %d ms on the watch for %s, then read the API: %s; not bound, so that the "
             "record of its devices is never partial", ns, name, waited, first, missing);
    return -1;
}

static void bind_reply(ext_verbs *v, ext_reply *out, ext_bind_outcome o, int status, const char *err) {
    atomic_fetch_add(&v->bind_outcomes[o], 1);
    ext_reply_error(out, status, err ? err : "");
}

static const char *bind_str(const cJSON *root, const char *key, char *err, size_t errlen) {
    const cJSON *s = cJSON_GetObjectItem(root, key);
    if (!cJSON_IsString(s) || !s->valuestring[0]) {
        snprintf(err, errlen, "%s: expected a non-empty string", key);
        return NULL;
    }
    return s->valuestring;
}

void ext_verb_bind(ext_verbs *v, const char *body, size_t len, ext_reply *out) {
    char err[2048];   /* room for namespace, name, node and a claim's names (253 each) in one message */
    cJSON *root = cJSON_ParseWithLength(body, len);
    const char *name = NULL, *ns = NULL, *uid = NULL, *node = NULL;
    if (!root) snprintf(err, sizeof err, "request body is not valid JSON (malformed or truncated)");
    else if (!cJSON_IsObject(root)) snprintf(err, sizeof err, "request body must be a JSON object (ExtenderBindingArgs)");
    else if ((name = bind_str(root, "PodName", err, sizeof err)) && (ns = bind_str(root, "PodNamespace", err, sizeof err)) &&
             (uid = bind_str(root, "PodUID", err, sizeof err)))
        node = bind_str(root, "Node", err, sizeof err);
    if (!node) {
        cJSON_Delete(root);
        bind_reply(v, out, EXT_BIND_BAD_REQUEST, 400, err);
        return;
    }
    ext_leader_note_call(v->leader);
    if (!ext_leader_may_bind(v->leader, -1, err, sizeof err)) {
        /* a follower never posts: only the Lease holder's view of the cluster is known to be current */
        kube_log(KUBE_LOG_INFO, "verb=bind outcome=not_leader pod=%s/%s node=%s why=\"%s\"", ns, name, node, err);
        bind_reply(v, out, EXT_BIND_NOT_LEADER, 200, err);
        cJSON_Delete(root);
        return;
    }
    if (!ext_state_ready(v->st)) {
        char nm[1200];
        bind_reply(v, out, EXT_BIND_NOT_READY, 200, not_synced(nm, sizeof nm, "; try again"));
        cJSON_Delete(root);
        return;
    }
    ext_bind_outcome oc = EXT_BIND_OK;
    model_request req;
    /* granted: the longest assignment text is MODEL_MAX_GPUS grants of under 64 characters each */
    char *ann = NULL, granted[MODEL_MAX_GPUS * 64 + 16] = "no GPU", *dra_alloc = NULL, dra_missing[512] = "";
    bool reserved = false, via_dra = false, extended = false;
    int dra_rec = 1;
    model_request xr;
    ext_state_lock(v->st);
    const ext_node *en = ext_state_node(v->st, node);
    const ext_pod *p = ext_state_pod(v->st, uid);
    if (!en || !en->m) {
        oc = EXT_BIND_UNKNOWN_NODE;
        snprintf(err, sizeof err, "node %s is not known to tessera", node);
    } else if (p && (strcmp(p->ns, ns) != 0 || strcmp(p->name, name) != 0)) {
        oc = EXT_BIND_UNKNOWN_POD;
        snprintf(err, sizeof err, "pod UID %s belongs to %s/%s, not %s/%s", uid, p->ns, p->name, ns, name);
    } else if (p && p->node && p->phase != EXT_POD_PENDING) {
        oc = strcmp(p->node, node) == 0 ? EXT_BIND_ALREADY : EXT_BIND_NO_ROOM;
        snprintf(err, sizeof err, "pod %s/%s is already on node %s", ns, name, p->node);
    } else if (ext_state_pod_request(v->st, uid, &req) != 0) {
        oc = EXT_BIND_UNKNOWN_POD;
        snprintf(err, sizeof err, "pod %s/%s (uid %s) is unknown: tessera saw it in no filter call and no watch event",
                 ns, name, uid);
    } else if (req.via_dra || (!model_request_wants_gpu(&req) && ext_dra_noted(ext_state_dra(v->st), uid))) {
        /* DynamicResources chose the devices and wrote them into the claims just before calling us */
        via_dra = true;
        dra_rec = ext_dra_bind_record(ext_state_dra(v->st), ns, uid, false, &dra_alloc, dra_missing, sizeof dra_missing);
    } else if (model_request_wants_gpu(&req) && model_dra_extended_on(en->m) &&
               ext_dra_extended_request(ext_state_dra(v->st), &req, &xr)) {
        /* nvidia.com/gpu on a node whose GPUs only DRA publishes: kube-scheduler made a claim for the pod (dra.h),
         * which holds the devices; record them as for any claim */
        via_dra = extended = true;
        dra_rec = ext_dra_bind_record(ext_state_dra(v->st), ns, uid, true, &dra_alloc, dra_missing, sizeof dra_missing);
    } else if (model_request_wants_gpu(&req)) {
        limit_to_delivery(v, &req);
        policy_ctx ctx = v->ctx;
        ctx.decision = ext_map_str_hash(uid);
        policy_result res;
        model_assignment a;
        char why[MODEL_REASON_LEN];
        if (!model_charge_node_within(en->m, &req, why, sizeof why)) {   /* as filter said (judge) */
            oc = EXT_BIND_NO_ROOM;
            snprintf(err, sizeof err, "pod %s/%s cannot be placed on node %s: %s", ns, name, node, why);
        } else if (policy_score(v->pol, &req, en->m, &ctx, &res, why, sizeof why) != 0) {
            oc = EXT_BIND_NO_ROOM;
            snprintf(err, sizeof err, "policy %s: %s", policy_name(v->pol), why);
        } else if (!res.feasible) {
            oc = EXT_BIND_NO_ROOM;
            model_fit(en->m, &req, NULL, 0, why, sizeof why);
            snprintf(err, sizeof err, "pod %s/%s no longer fits node %s: %s", ns, name, node, why);
        } else if (policy_materialize(en->m, &req, &res.choice, &a, why, sizeof why) != 0 ||
                   ext_state_reserve(v->st, uid, ns, name, node, &req, &a, why, sizeof why) != 0) {
            oc = EXT_BIND_NO_ROOM;
            snprintf(err, sizeof err, "pod %s/%s cannot be placed on node %s: %s", ns, name, node, why);
        } else {
            reserved = true;
            ann = ext_ann_encode(en->m, &a, policy_name(v->pol));
            model_assignment_format(en->m, &a, granted, sizeof granted);
            kube_log(KUBE_LOG_DEBUG, "verb=bind pod=%s/%s node=%s reserve=\"%s\"", ns, name, node, granted);
        }
    }
    ext_state_unlock(v->st);
    if (oc == EXT_BIND_OK && via_dra && dra_rec != 1 && dra_settle(v, ns, name, uid, extended, dra_rec, &dra_alloc, dra_missing,
                                                                  sizeof dra_missing, err, sizeof err) != 0)
        oc = EXT_BIND_DRA_UNSEEN;
    if (oc == EXT_BIND_ALREADY) {
        cJSON_Delete(root);
        bind_reply(v, out, oc, 200, "");   /* a retry of a bind that worked: the pod is where it was asked to be */
        return;
    }
    if (oc != EXT_BIND_OK) {
        kube_log(KUBE_LOG_WARN, "verb=bind outcome=%s pod=%s/%s node=%s err=\"%s\"", ext_bind_outcome_name(oc), ns, name,
                 node, err);
        cJSON_Delete(root);
        free(dra_alloc);
        bind_reply(v, out, oc, 200, err);
        return;
    }
    /* The Binding goes out without the lock: other verbs and binds proceed meanwhile, and
     * they see this pod's reservation. */
    int rc = 0;
    err[0] = 0;
    if (v->bind) {
        cJSON *anns = cJSON_CreateObject();
        if (ann) cJSON_AddStringToObject(anns, EXT_ANN_ASSIGNMENT, ann);
        else if (dra_alloc && dra_alloc[0]) cJSON_AddStringToObject(anns, EXT_ANN_DRA_ALLOCATION, dra_alloc);
        rc = v->bind(v->bind_user, ns, name, uid, node, anns, err, sizeof err);
        cJSON_Delete(anns);
        /* queued for `kubectl describe pod`; never waits on the network (events.h cuts a long one, with "...") */
        if (rc == 0) {
            char *msg = dra_alloc ? str_printf("assigned to node %s: devices of its claims: %s; policy %s", node,
                                               dra_alloc[0] ? dra_alloc : "none", policy_name(v->pol))
                                  : str_printf("assigned to node %s: %s; policy %s", node, granted, policy_name(v->pol));
            ext_events_emit(v->events, "Normal", "TesseraAssigned", ns, name, uid, msg ? msg : "assigned");
            free(msg);
        } else {
            ext_events_emit(v->events, "Warning", "TesseraBindFailed", ns, name, uid,
                            err[0] ? err : "the API server refused the Binding");
        }
    }
    if (reserved) {
        ext_state_lock(v->st);
        ext_state_bind_done(v->st, uid, rc == 0);
        ext_state_unlock(v->st);
    }
    if (rc != 0) {
        char *msg = str_printf("binding %s/%s to %s failed: %s", ns, name, node, err[0] ? err : "API error");
        /* while binding itself is failing (health.h logged it once at warn), one line per retried pod is noise */
        kube_log(ext_health_failing(EXT_DEP_BIND, NULL, 0) ? KUBE_LOG_DEBUG : KUBE_LOG_WARN,
                 "verb=bind outcome=api_error pod=%s/%s node=%s err=\"%s\"", ns, name, node, err);
        bind_reply(v, out, EXT_BIND_API_ERROR, 200, msg ? msg : err);
        free(msg);
    } else {
        kube_log(KUBE_LOG_INFO, "verb=bind outcome=ok pod=%s/%s node=%s assignment=%s", ns, name, node,
                 ann ? ann : dra_alloc ? dra_alloc : "none");
        bind_reply(v, out, EXT_BIND_OK, 200, "");
    }
    free(ann);
    free(dra_alloc);
    cJSON_Delete(root);
}

/* ---------------------------------------------------------------- preempt */

typedef struct victim {
    const char *uid;
    int32_t priority;
    bool gpu;           /* holds GPUs on this node in the cache */
    bool keep;
} victim;

static int by_priority_desc(const void *x, const void *y) {
    const victim *a = x, *b = y;
    return (a->priority < b->priority) - (a->priority > b->priority);
}

static bool fits_without(ext_state *st, const ext_node *en, const model_request *r, victim *vs, int n, int skip) {
    const char *stack[64] = {0};
    const char **uids = n <= 64 ? stack : malloc((size_t)n * sizeof *uids);
    if (!uids) return false;
    int k = 0;
    for (int i = 0; i < n; i++)
        if (vs[i].gpu && vs[i].keep && i != skip) uids[k++] = vs[i].uid;
    model_node *c = ext_state_node_without(st, en, uids, k);
    bool ok = c && model_fit(c, r, NULL, 0, NULL, 0) > 0;
    model_node_free(c);
    if (uids != stack) free((void *)uids);
    return ok;
}

/* One candidate node: the victims that must go for the pod to fit, or -1 to drop the
 * node. Victims that hold no GPU here are kept as proposed: kube-scheduler's dry run chose
 * them for its own resources (CPU, memory, pods), which tessera does not account. */
static int preempt_node(ext_state *st, const ext_node *en, const model_request *r, victim *vs, int n) {
    if (!en || !en->m || en->m->reason[0]) return -1;
    for (int i = 0; i < n; i++) {
        const ext_pod *p = ext_state_pod(st, vs[i].uid);
        vs[i].gpu = p && p->holds && p->node && strcmp(p->node, en->name) == 0;
        vs[i].priority = p ? p->req.priority : vs[i].priority;
        vs[i].keep = true;
    }
    if (!fits_without(st, en, r, vs, n, -1)) return -1;
    /* Spare the most important victims first; the lowest-priority ones are tried last,
     * so they are the ones left to evict. */
    qsort(vs, (size_t)n, sizeof *vs, by_priority_desc);
    for (int i = 0; i < n; i++)
        if (vs[i].gpu && fits_without(st, en, r, vs, n, i)) vs[i].keep = false;
    int kept = 0;
    for (int i = 0; i < n; i++) kept += vs[i].keep;
    return kept > 0 ? kept : -1;   /* nothing to evict: the pod fits already, no preemption here */
}

void ext_verb_preempt(ext_verbs *v, const char *body, size_t len, ext_reply *out) {
    ext_args a;
    char err[1024];
    ext_leader_note_call(v->leader);   /* scheduling calls are what makes this replica campaign */
    memset(&a, 0, sizeof a);
    a.root = cJSON_ParseWithLength(body, len);
    if (!a.root || !cJSON_IsObject(a.root)) {
        ext_reply_error(out, 400, a.root ? "request body must be a JSON object (ExtenderPreemptionArgs)"
                                         : "request body is not valid JSON (malformed or truncated)");
        args_free(&a);
        return;
    }
    int parsed = parse_pod(&a, cJSON_GetObjectItem(a.root, "Pod"), err, sizeof err);
    if (parsed == 0 && a.req_ok) limit_to_delivery(v, &a.req);
    if (parsed < 0) {
        ext_reply_error(out, 400, err);
        args_free(&a);
        return;
    }
    const cJSON *full = cJSON_GetObjectItem(a.root, "NodeNameToVictims");
    const cJSON *meta = cJSON_GetObjectItem(a.root, "NodeNameToMetaVictims");
    const cJSON *map = !is_null(meta) ? meta : full;
    bool is_meta = !is_null(meta);
    if ((!is_null(full) && !cJSON_IsObject(full)) || (!is_null(meta) && !cJSON_IsObject(meta))) {
        ext_reply_error(out, 400, "NodeNameToVictims / NodeNameToMetaVictims: expected an object or null");
        args_free(&a);
        return;
    }
    /* Validate the whole body before looking at the cache: bad input changes nothing. */
    int total = 0;
    const cJSON *ent;
    const cJSON *vmap = is_null(map) ? NULL : map;   /* cJSON_ArrayForEach needs a plain operand */
    cJSON_ArrayForEach(ent, vmap) {
        const cJSON *pods = cJSON_GetObjectItem(ent, "Pods");
        const cJSON *pdb = cJSON_GetObjectItem(ent, "NumPDBViolations");
        if (!cJSON_IsObject(ent) || (!is_null(pods) && !cJSON_IsArray(pods)) || (pdb && !cJSON_IsNumber(pdb))) {
            snprintf(err, sizeof err, "victims of node %s: expected {Pods: [...], NumPDBViolations: n}", ent->string);
            ext_reply_error(out, 400, err);
            args_free(&a);
            return;
        }
        const cJSON *pp, *plist = is_null(pods) ? NULL : pods;
        cJSON_ArrayForEach(pp, plist) {
            const char *u = NULL;
            if (is_meta) {
                const cJSON *uj = cJSON_IsObject(pp) ? cJSON_GetObjectItem(pp, "UID") : NULL;
                u = cJSON_IsString(uj) ? uj->valuestring : NULL;
            } else if (cJSON_IsObject(pp)) {
                u = meta_str(pp, "uid");
            }
            if (!u) {
                snprintf(err, sizeof err, "victims of node %s: every pod needs a %s", ent->string,
                         is_meta ? "UID" : "metadata.uid");
                ext_reply_error(out, 400, err);
                args_free(&a);
                return;
            }
            total++;
        }
    }
    if (!ext_state_ready(v->st)) {
        char nm[1200];
        ext_reply_error(out, 503, not_synced(nm, sizeof nm, ""));
        args_free(&a);
        return;
    }
    bool ours = a.req_ok && model_request_wants_gpu(&a.req);
    cJSON *res = cJSON_CreateObject();
    cJSON *rmap = cJSON_AddObjectToObject(res, "NodeNameToMetaVictims");
    victim *vs = calloc((size_t)total + 1, sizeof *vs);
    if (!vs) {
        cJSON_Delete(res);
        args_free(&a);
        ext_reply_error(out, 500, "out of memory");
        return;
    }
    if (ours) ext_state_lock(v->st);
    int kept_nodes = 0, in_nodes = 0;
    cJSON_ArrayForEach(ent, vmap) {
        const cJSON *pods = cJSON_GetObjectItem(ent, "Pods"), *pp, *plist = is_null(pods) ? NULL : pods;
        const cJSON *pdb = cJSON_GetObjectItem(ent, "NumPDBViolations");
        int n = 0;
        in_nodes++;
        cJSON_ArrayForEach(pp, plist) {
            vs[n] = (victim){.uid = is_meta ? cJSON_GetObjectItem(pp, "UID")->valuestring : meta_str(pp, "uid"), .keep = true};
            if (!is_meta) {
                const cJSON *spec = cJSON_GetObjectItemCaseSensitive(pp, "spec");
                const cJSON *pr = cJSON_IsObject(spec) ? cJSON_GetObjectItemCaseSensitive(spec, "priority") : NULL;
                vs[n].priority = cJSON_IsNumber(pr) ? (int32_t)pr->valuedouble : 0;
            }
            n++;
        }
        if (!a.req_ok) continue;   /* an invalid request fits nowhere: no victim set helps */
        if (ours && preempt_node(v->st, ext_state_node(v->st, ent->string), &a.req, vs, n) < 0) {
            kube_log(KUBE_LOG_DEBUG, "verb=preempt pod=%s/%s node=%s dropped", a.ns, a.name, ent->string);
            continue;
        }
        if (n == 0) continue;   /* kube-scheduler rejects a node with no victims */
        cJSON *mv = cJSON_AddObjectToObject(rmap, ent->string);
        cJSON *arr = cJSON_AddArrayToObject(mv, "Pods");
        for (int i = 0; i < n; i++) {
            if (!vs[i].keep) continue;
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "UID", vs[i].uid);
            cJSON_AddItemToArray(arr, o);
        }
        cJSON_AddNumberToObject(mv, "NumPDBViolations", cJSON_IsNumber(pdb) ? pdb->valuedouble : 0);
        kept_nodes++;
    }
    if (ours) ext_state_unlock(v->st);
    kube_log(KUBE_LOG_INFO, "verb=preempt pod=%s/%s nodes_in=%d nodes_kept=%d", a.ns, a.name, in_nodes, kept_nodes);
    free(vs);
    args_free(&a);
    reply_json(out, 200, res);
}

/* ---------------------------------------------------------------- debug */

static const char *phase_name(ext_pod_phase p) {
    static const char *n[] = {"pending", "binding", "assumed", "bound"};
    return p >= 0 && p <= EXT_POD_BOUND ? n[p] : "?";
}

static cJSON *node_json(const ext_node *en) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", en->name);
    const model_node *m = en->m;
    cJSON_AddBoolToObject(o, "known", m != NULL);
    if (m) {
        cJSON_AddStringToObject(o, "reason", m->reason);
        cJSON_AddStringToObject(o, "product", m->product_label);
        if (m->has_dra || m->dra_note[0]) cJSON_AddStringToObject(o, "draNote", m->dra_note);
        cJSON *gpus = cJSON_AddArrayToObject(o, "gpus");
        for (int i = 0; i < m->ngpus; i++) {
            const model_gpu *g = &m->gpus[i];
            cJSON *j = cJSON_CreateObject();
            cJSON_AddNumberToObject(j, "index", g->index);
            if (g->uuid[0]) cJSON_AddStringToObject(j, "uuid", g->uuid);
            if (g->dra) cJSON_AddStringToObject(j, "publishedBy", g->dra_only ? "dra" : "dra+device-plugin");
            cJSON_AddStringToObject(j, "product", g->product->product);
            cJSON_AddStringToObject(j, "mode", model_gpu_mode_name(g->mode));
            cJSON_AddNumberToObject(j, "memoryMiB", g->memory_mib);
            cJSON_AddNumberToObject(j, "memoryUsedMiB", g->memory_used_mib);
            cJSON_AddNumberToObject(j, "computeUsedPermille", g->compute_used_permille);
            cJSON_AddNumberToObject(j, "replicas", g->replicas);
            cJSON_AddNumberToObject(j, "replicasUsed", g->replicas_used);
            if (g->exclusive_holder >= 0 && g->exclusive_holder < m->nallocs)
                cJSON_AddStringToObject(j, "wholeHolder", m->allocs[g->exclusive_holder].uid);
            if (g->mode == MODEL_GPU_MIG) {
                cJSON *mi = cJSON_AddArrayToObject(j, "mig");
                for (int k = 0; k < g->ninst; k++) {
                    cJSON *x = cJSON_CreateObject();
                    cJSON_AddStringToObject(x, "profile", g->product->profiles[g->inst[k].profile].name);
                    cJSON_AddNumberToObject(x, "start", g->inst[k].start);
                    int h = g->inst[k].holder;
                    if (h >= 0 && h < m->nallocs) cJSON_AddStringToObject(x, "holder", m->allocs[h].uid);
                    else cJSON_AddNullToObject(x, "holder");
                    if (g->inst[k].replicas > 1) {   /* layered: who holds each replica */
                        cJSON_AddNumberToObject(x, "replicas", g->inst[k].replicas);
                        cJSON *rh = cJSON_AddArrayToObject(x, "replicaHolders");
                        for (int r = 0; r < g->inst[k].replicas; r++) {
                            const char *uid = NULL;
                            for (int a = 0; a < m->nallocs && !uid; a++)
                                for (int q = 0; q < m->allocs[a].a.ngrants && m->allocs[a].uid[0]; q++) {
                                    const model_grant *gr = &m->allocs[a].a.grant[q];
                                    if (gr->gpu == i && gr->mig_profile >= 0 && gr->mig_start == g->inst[k].start && gr->replica == r)
                                        uid = m->allocs[a].uid;
                                }
                            cJSON_AddItemToArray(rh, uid ? cJSON_CreateString(uid) : cJSON_CreateNull());
                        }
                    }
                    cJSON_AddItemToArray(mi, x);
                }
            }
            cJSON_AddItemToArray(gpus, j);
        }
        char why[MODEL_REASON_LEN];
        cJSON_AddBoolToObject(o, "consistent", model_node_check(m, why, sizeof why));
    }
    if (en->holdings)   /* what the kubelet says the pods hold, and where the model disagreed */
        cJSON_AddItemToObject(o, "holdings", ext_holdings_debug(en->holdings, ext_now_ms()));
    cJSON *pods = cJSON_AddArrayToObject(o, "pods");
    for (int i = 0; i < en->npods; i++) {
        const ext_pod *p = en->pods[i];
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "uid", p->uid);
        cJSON_AddStringToObject(j, "namespace", p->ns);
        cJSON_AddStringToObject(j, "name", p->name);
        cJSON_AddStringToObject(j, "phase", phase_name(p->phase));
        cJSON_AddNumberToObject(j, "priority", p->req.priority);
        char buf[256] = "";
        if (p->holds && m) model_assignment_format(m, &p->a, buf, sizeof buf);
        cJSON_AddStringToObject(j, "assignment", p->holds ? buf : "");
        cJSON_AddBoolToObject(j, "derived", p->derived);
        cJSON_AddBoolToObject(j, "overcommitted", p->overcommitted);
        cJSON_AddItemToArray(pods, j);
    }
    return o;
}

void ext_debug_state(ext_verbs *v, const char *pod, ext_reply *out) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddBoolToObject(root, "ready", ext_state_ready(v->st));
    cJSON_AddStringToObject(root, "policy", policy_name(v->pol));
    if (v->leader) {   /* which replica binds, as this one sees it */
        char holder[192];
        ext_leader_holder(v->leader, holder, sizeof holder);
        cJSON *le = cJSON_AddObjectToObject(root, "leader_election");
        cJSON_AddBoolToObject(le, "leader", ext_leader_is_leader(v->leader));
        cJSON_AddStringToObject(le, "identity", ext_leader_identity(v->leader));
        cJSON_AddStringToObject(le, "holder", holder);
        /* what this replica last saw of kube-scheduler's own Lease: mine, other, none, unknown (leader.h) */
        cJSON_AddStringToObject(le, "scheduler_lease", ext_leader_scheduler_state(v->leader));
    }
    ext_state_lock(v->st);
    if (pod && pod[0]) {
        char uid[MODEL_UID_LEN];
        model_request req;
        if (ext_state_find_request(v->st, pod, uid, sizeof uid, &req) != 0) {
            ext_state_unlock(v->st);
            cJSON_Delete(root);
            ext_reply_error(out, 404, "pod not in tessera's cache (neither watched nor seen in a filter call)");
            return;
        }
        char buf[256];
        model_request_format(&req, buf, sizeof buf);
        cJSON_AddStringToObject(root, "pod", pod);
        cJSON_AddStringToObject(root, "uid", uid);
        cJSON_AddStringToObject(root, "request", buf);
        policy_ctx ctx = v->ctx;
        ctx.decision = ext_map_str_hash(uid);
        int n = ext_state_node_count(v->st);
        policy_result *res = calloc((size_t)n + 1, sizeof *res);
        int *score = calloc((size_t)n + 1, sizeof *score);
        char (*whys)[MODEL_REASON_LEN + 32] = calloc((size_t)n + 1, sizeof *whys);
        if (res && score && whys) {
            for (int i = 0; i < n; i++) {
                const ext_node *en = ext_state_node_at(v->st, i);
                char fitwhy[MODEL_REASON_LEN];
                fit_verdict fv = judge(v->st, en, en->name, &req, fitwhy, sizeof fitwhy);
                if (fv != FIT_OK || policy_score(v->pol, &req, en->m, &ctx, &res[i], whys[i], sizeof whys[i]) != 0) {
                    memset(&res[i], 0, sizeof res[i]);
                    res[i].rank = policy_node_rank(&ctx, en->name);
                    snprintf(whys[i], sizeof whys[i], "%s%s", fv == FIT_UNRESOLVABLE ? "unresolvable: " : "", fitwhy);
                }
            }
            policy_scores_0_10(v->pol, &ctx, res, n, score);
            cJSON *arr = cJSON_AddArrayToObject(root, "nodes");
            for (int i = 0; i < n; i++) {
                cJSON *j = cJSON_CreateObject();
                cJSON_AddStringToObject(j, "node", ext_state_node_at(v->st, i)->name);
                cJSON_AddBoolToObject(j, "fits", res[i].feasible);
                cJSON_AddNumberToObject(j, "score", res[i].score);
                cJSON_AddNumberToObject(j, "score0to10", score[i]);
                cJSON_AddStringToObject(j, "why", whys[i]);
                cJSON_AddItemToArray(arr, j);
            }
        }
        free(res);
        free(score);
        free(whys);
    } else {
        ext_state_stats s;
        ext_state_get_stats(v->st, &s);
        cJSON *sj = cJSON_AddObjectToObject(root, "stats");
        cJSON_AddNumberToObject(sj, "nodes", s.nodes);
        cJSON_AddNumberToObject(sj, "nodesUnusable", s.nodes_unusable);
        cJSON_AddNumberToObject(sj, "pods", s.pods);
        cJSON_AddNumberToObject(sj, "pending", s.pending);
        cJSON_AddNumberToObject(sj, "binding", s.binding);
        cJSON_AddNumberToObject(sj, "assumed", s.assumed);
        cJSON_AddNumberToObject(sj, "bound", s.bound);
        cJSON_AddNumberToObject(sj, "overcommitted", s.overcommitted);
        cJSON_AddNumberToObject(sj, "assumptionsExpired", (double)s.expired);
        cJSON *arr = cJSON_AddArrayToObject(root, "nodes");
        for (int i = 0; i < ext_state_node_count(v->st); i++)
            cJSON_AddItemToArray(arr, node_json(ext_state_node_at(v->st, i)));
        cJSON_AddItemToObject(root, "dra", ext_dra_debug(ext_state_dra(v->st)));   /* claims tessera cannot judge say so */
        cJSON_AddItemToObject(root, "namespaces", ext_quota_debug(v->st));   /* usage in quota units (quota.h) */
    }
    ext_state_unlock(v->st);
    if (v->rsv && !(pod && pod[0])) ext_rsv_debug(v->rsv, root);   /* its own lock, never under the state's */
    reply_json(out, 200, root);
}
