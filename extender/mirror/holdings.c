/* holdings.c -- the holdings record of holdings.h: read strictly from the Node object, set against the
 * node's model (model/holdings.h decides; this file maps names, applies, remembers what it reported).
 */
#include "extender/mirror/holdings.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/log.h"
#include "extender/base/map.h"
#include "model/fit.h"
#include "model/holdings.h"

#define HOLD_MAX_KEY 512      /* "namespace/name": 63 + 1 + 253, with room */
#define HOLD_MAX_ID  128      /* one device id: a UUID is 40, a replica id a few more */
#define HOLD_TEXT    256      /* what the model or the kubelet said, as shown */

typedef struct hold_entry {
    char *key;                /* "namespace/name" */
    int nids;
    char **ids;               /* device ids, every resource of the pod together */
    char *devices;            /* "nvidia.com/gpu=GPU-a,GPU-b": the record as written, for people */
    uint64_t devices_hash;    /* of devices: what identifies a finding (with key and kind) */
} hold_entry;

typedef struct hold_record {
    int n;
    hold_entry *e;
} hold_record;

/* What was found about one record entry; kept while the record says the same of the pod. */
enum { F_APPLIED = EXT_HOLD_APPLIED, F_REFUSED = EXT_HOLD_REFUSED, F_RESERVATION = EXT_HOLD_RESERVATION,
       F_UNMAPPED, F_UNKNOWN_POD };

typedef struct finding {
    char key[HOLD_MAX_KEY];
    int kind;
    uint64_t devices_hash;    /* what the kubelet said (the entry's devices) */
    char model[HOLD_TEXT];    /* what the model said when it was found */
    char kubelet[HOLD_TEXT];  /* the kubelet's word in the model's terms, or its ids */
    char devices[HOLD_TEXT];
    char why[MODEL_REASON_LEN];
    int64_t since_ms;
} finding;

struct ext_holdings {
    hold_record rec;          /* the record in use (the last valid one) */
    uint64_t text_hash;       /* of the annotation as last seen */
    bool seen_any;            /* text_hash is set */
    uint64_t bad_hash;        /* the malformed content last reported (0: none) */
    char bad_why[512];        /* "" unless the latest annotation is malformed */
    int64_t changed_ms;       /* when the record in use first arrived */
    int64_t seen_ms;          /* the latest watch event that carried the annotation */
    int mapped;               /* entries compared with a pod of the cache, at the last reconcile */
    uint64_t sig;             /* what the last reconcile judged (inputs_sig); 0: judge again */
    int nf;
    finding *f;
};

const char *ext_hold_kind_name(ext_hold_kind k) {
    static const char *n[] = {"applied", "refused", "reservation"};
    return k >= 0 && k < EXT_HOLD_NKINDS ? n[k] : "?";
}

const char *ext_hold_ignored_name(ext_hold_ignored w) {
    static const char *n[] = {"unmapped", "unknown-pod"};
    return w >= 0 && w < EXT_HOLD_IGN_N ? n[w] : "?";
}

static const char *finding_kind_name(int k) {
    return k < EXT_HOLD_NKINDS ? ext_hold_kind_name((ext_hold_kind)k)
                               : ext_hold_ignored_name((ext_hold_ignored)(k - EXT_HOLD_NKINDS));
}

/* ------------------------------------------------------------------ reading */

static void record_clear(hold_record *r) {
    for (int i = 0; i < r->n; i++) {
        for (int k = 0; k < r->e[i].nids; k++) free(r->e[i].ids[k]);
        free(r->e[i].ids);
        free(r->e[i].key);
        free(r->e[i].devices);
    }
    free(r->e);
    r->n = 0;
    r->e = NULL;
}

static bool valid_key(const char *k) {
    const char *s = strchr(k, '/');
    return s && s != k && s[1] && !strchr(s + 1, '/') && strlen(k) < HOLD_MAX_KEY;
}

#define BAD(...) (snprintf(why, whylen, __VA_ARGS__), -1)

/* Parse one pod's object into e. */
static int parse_entry(const cJSON *pod, hold_entry *e, char *why, size_t whylen) {
    if (!cJSON_IsObject(pod) || !pod->child)
        return BAD("pods[\"%.100s\"] must be a non-empty object of nvidia.com/* resources", pod->string);
    size_t dlen = 1;
    for (const cJSON *res = pod->child; res; res = res->next) {
        if (strncmp(res->string, "nvidia.com/", 11) != 0 || !res->string[11] || strlen(res->string) > 63)
            return BAD("pods[\"%.100s\"]: \"%.80s\" is not an nvidia.com/* resource", pod->string, res->string);
        if (!cJSON_IsArray(res) || !res->child)
            return BAD("pods[\"%.100s\"][\"%.63s\"] must be a non-empty array of device ids", pod->string, res->string);
        dlen += strlen(res->string) + 2;
        for (const cJSON *id = res->child; id; id = id->next) {
            if (!cJSON_IsString(id) || !id->valuestring[0] || strlen(id->valuestring) >= HOLD_MAX_ID)
                return BAD("pods[\"%.100s\"][\"%.63s\"] holds a device id that is not a string of 1..%d characters",
                           pod->string, res->string, HOLD_MAX_ID - 1);
            for (int k = 0; k < e->nids; k++)
                if (!strcmp(e->ids[k], id->valuestring))
                    return BAD("pods[\"%.100s\"] lists device %.127s twice", pod->string, id->valuestring);
            if (e->nids == MODEL_HELD_MAX)
                return BAD("pods[\"%.100s\"] lists more than %d devices", pod->string, MODEL_HELD_MAX);
            char **g = realloc(e->ids, (size_t)(e->nids + 1) * sizeof *g);
            if (!g) return BAD("out of memory");
            e->ids = g;
            if (!(e->ids[e->nids] = strdup(id->valuestring))) return BAD("out of memory");
            e->nids++;
            dlen += strlen(id->valuestring) + 1;
        }
    }
    if (!(e->devices = malloc(dlen))) return BAD("out of memory");
    size_t off = 0;
    for (const cJSON *res = pod->child; res; res = res->next) {
        off += (size_t)sprintf(e->devices + off, "%s%s=", off ? "; " : "", res->string);
        for (const cJSON *id = res->child; id; id = id->next)
            off += (size_t)sprintf(e->devices + off, "%s%s", id == res->child ? "" : ",", id->valuestring);
    }
    e->devices_hash = ext_map_str_hash(e->devices);
    return 0;
}

static int parse_record(const char *text, hold_record *out, char *why, size_t whylen) {
    memset(out, 0, sizeof *out);
    cJSON *root = cJSON_Parse(text);
    int rc = 0;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "v"), *pods = cJSON_GetObjectItemCaseSensitive(root, "pods");
    if (!cJSON_IsObject(root)) rc = BAD("not a JSON object");
    else if (!cJSON_IsNumber(v) || v->valuedouble != 1) rc = BAD("\"v\" must be 1 (the record's version)");
    else if (!cJSON_IsObject(pods)) rc = BAD("\"pods\" must be an object keyed by \"namespace/name\"");
    for (const cJSON *k = root && !rc ? root->child : NULL; k && !rc; k = k->next)
        if (strcmp(k->string, "v") && strcmp(k->string, "pods")) rc = BAD("unknown key \"%.80s\"", k->string);
    for (const cJSON *p = rc ? NULL : pods->child; p && !rc; p = p->next) {
        if (!valid_key(p->string)) {
            rc = BAD("pods key \"%.100s\" is not \"namespace/name\"", p->string);
            break;
        }
        for (int i = 0; i < out->n && !rc; i++)
            if (!strcmp(out->e[i].key, p->string)) rc = BAD("pods lists \"%.100s\" twice", p->string);
        hold_entry *g = rc ? NULL : realloc(out->e, (size_t)(out->n + 1) * sizeof *g);
        if (!g) {
            if (!rc) rc = BAD("out of memory");
            break;
        }
        out->e = g;
        hold_entry *e = &out->e[out->n++];
        memset(e, 0, sizeof *e);
        if (!(e->key = strdup(p->string))) rc = BAD("out of memory");
        else rc = parse_entry(p, e, why, whylen);
    }
    cJSON_Delete(root);
    if (rc) record_clear(out);
    return rc;
}

static uint64_t text_hash(const char *s) {
    uint64_t h = ext_map_str_hash(s);
    return h ? h : 1;   /* 0 means "none" in bad_hash */
}

static void holdings_free_parts(ext_holdings *h) {
    record_clear(&h->rec);
    free(h->f);
}

void ext_holdings_free(ext_holdings *h) {
    if (!h) return;
    holdings_free_parts(h);
    free(h);
}

bool ext_holdings_read(ext_holdings **hp, const char *node, const cJSON *node_obj, int64_t now_ms,
                       ext_holdings_stats *stats) {
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(node_obj, "metadata");
    const cJSON *ann = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(meta, "annotations"),
                                                        EXT_HOLDINGS_ANN);
    ext_holdings *h = *hp;
    if (!cJSON_IsString(ann)) {
        if (!h) return false;
        if (ann) {   /* said once: the record is dropped with it, so the next such event finds none */
            stats->malformed++;
            kube_log(KUBE_LOG_WARN, "event=holdings-malformed node=%s why=\"the annotation is not a string\" "
                     "action=ignored", node);
        }
        kube_log(KUBE_LOG_INFO, "event=holdings-gone node=%s", node);   /* the agent stopped, or was removed */
        ext_holdings_free(h);
        *hp = NULL;
        return true;
    }
    if (!h && !(h = *hp = calloc(1, sizeof *h))) {
        kube_log(KUBE_LOG_ERROR, "event=oom node=%s", node);
        return false;
    }
    h->seen_ms = now_ms;
    uint64_t th = text_hash(ann->valuestring);
    if (h->seen_any && th == h->text_hash) return false;   /* the watch sends the whole Node on every change */
    h->seen_any = true;
    h->text_hash = th;
    hold_record r;
    char why[512];
    if (parse_record(ann->valuestring, &r, why, sizeof why) != 0) {
        snprintf(h->bad_why, sizeof h->bad_why, "%s", why);
        if (h->bad_hash != th) {   /* once per node and content */
            h->bad_hash = th;
            stats->malformed++;
            kube_log(KUBE_LOG_WARN, "event=holdings-malformed node=%s why=\"%s\" action=ignored%s", node, why,
                     h->rec.e || h->changed_ms ? " (the record seen before stays in use)" : "");
        }
        return false;
    }
    h->bad_why[0] = 0;
    record_clear(&h->rec);
    h->rec = r;
    h->changed_ms = now_ms;
    return true;
}

/* ------------------------------------------------------------------ reconciling */

static const ext_pod *pod_by_key(const ext_node *n, const char *key) {
    const char *slash = strchr(key, '/');
    size_t nl = (size_t)(slash - key);
    for (int i = 0; i < n->npods; i++) {
        const ext_pod *p = n->pods[i];
        if (strlen(p->ns) == nl && !strncmp(p->ns, key, nl) && !strcmp(p->name, slash + 1)) return p;
    }
    return NULL;
}

/* What the model or the kubelet said, formatted only when a finding is new (most reconciles find nothing new,
 * and a Node event reconciles every pod of the node). */
typedef struct said {
    const char *text;                /* as is, or: */
    const model_node *m;
    const model_assignment *a;       /* an assignment on m, or: */
    const model_holding *hd;         /* the kubelet's devices in the model's terms */
} said;

static void held_format(const model_holding *hd, char *buf, size_t len);

static void said_format(const said *s, char *buf, size_t len) {
    if (s->a) model_assignment_format(s->m, s->a, buf, len);
    else if (s->hd) held_format(s->hd, buf, len);
    else snprintf(buf, len, "%s", s->text ? s->text : "");
}

/* The findings of one reconcile; grown on demand (usually none). */
typedef struct flist { finding *f; int n, cap; bool oom; int64_t now_ms; } flist;

static finding *flist_add(flist *l) {
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 4;
        finding *g = realloc(l->f, (size_t)cap * sizeof *g);
        if (!g) { l->oom = true; return NULL; }
        l->f = g;
        l->cap = cap;
    }
    return &l->f[l->n++];
}

/* The earlier finding of this kind about the entry (the same pod, the kubelet saying the same), or NULL. */
static const finding *earlier(const ext_holdings *h, const hold_entry *e, int kind) {
    for (int i = 0; i < h->nf; i++)
        if (h->f[i].kind == kind && h->f[i].devices_hash == e->devices_hash && !strcmp(h->f[i].key, e->key))
            return &h->f[i];
    return NULL;
}

/* A new finding, said and counted, or the earlier one it repeats (then nothing is said again). */
static void found(ext_holdings *h, flist *out, const hold_entry *e, int kind, said model, said kubelet,
                  const char *why, const char *node, ext_holdings_stats *stats) {
    const finding *o = earlier(h, e, kind);
    finding *f = flist_add(out);
    if (!f) return;
    if (o) {
        *f = *o;
        return;
    }
    memset(f, 0, sizeof *f);
    snprintf(f->key, sizeof f->key, "%s", e->key);
    f->kind = kind;
    f->devices_hash = e->devices_hash;
    said_format(&model, f->model, sizeof f->model);
    said_format(&kubelet, f->kubelet, sizeof f->kubelet);
    snprintf(f->devices, sizeof f->devices, "%s", e->devices);
    snprintf(f->why, sizeof f->why, "%s", why);
    f->since_ms = out->now_ms;
    if (kind < EXT_HOLD_NKINDS) {
        stats->mismatches[kind]++;
        kube_log(KUBE_LOG_WARN, "event=holdings-mismatch node=%s pod=%s model=\"%s\" kubelet=\"%s\" devices=\"%s\" "
                 "action=%s%s%s%s", node, e->key, f->model, f->kubelet, e->devices,
                 kind == F_APPLIED ? "applied" : "kept-model", why[0] ? " why=\"" : "", why, why[0] ? "\"" : "");
    } else {
        stats->ignored[kind - EXT_HOLD_NKINDS]++;
        /* an unknown pod is mostly one deleted a moment ago (the record lags): not worth an info line each */
        kube_log(kind == F_UNKNOWN_POD ? KUBE_LOG_DEBUG : KUBE_LOG_INFO,
                 "event=holdings-ignored node=%s pod=%s devices=\"%s\" why=\"%s\"", node, e->key, e->devices, why);
    }
}

/* "GPU 1, GPU 2 replica 3": the kubelet's devices in the model's terms. */
static void held_format(const model_holding *hd, char *buf, size_t len) {
    size_t off = 0;
    buf[0] = 0;
    for (int i = 0; i < hd->nheld && off < len; i++) {
        int w = hd->held[i].replica >= 0
                    ? snprintf(buf + off, len - off, "%sGPU %d replica %d", i ? ", " : "", hd->held[i].gpu, hd->held[i].replica)
                    : snprintf(buf + off, len - off, "%sGPU %d", i ? ", " : "", hd->held[i].gpu);
        if (w < 0) break;
        off += (size_t)w;
    }
}

/* The reservation pod's device against what it published (holdings.h). */
static void judge_reservation(ext_holdings *h, flist *out, const hold_entry *e, const char *published, int gpu,
                              const ext_node *n, ext_holdings_stats *stats) {
    if (!published[0]) return;   /* not published yet: the same lag as a binding the record has not caught */
    bool same = e->nids == 1 && model_held_id_is(e->ids[0], published);
    h->mapped++;
    if (same) return;
    char model[HOLD_TEXT];
    snprintf(model, sizeof model, "reservation of GPU %d published %s", gpu, published);
    found(h, out, e, F_RESERVATION, (said){.text = model}, (said){.text = e->devices},
          "the share's delivery names the published UUID; the reservation controller owns it, so the kubelet's word "
          "is reported, not applied", n->name, stats);
}

static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h;
}

/* Everything a reconcile's outcome depends on when nothing disagrees: the record, the GPUs' UUIDs, the pods on
 * the node and their grants, the reservations' table. A Node event rebuilds the model from the Node object and puts
 * the same pods back, which changes none of these: the reconcile is skipped. (A standing refusal also depends on
 * which GPUs are free, so a node with one is always judged again.) */
static uint64_t inputs_sig(const ext_holdings *h, const ext_node *n, uint64_t rsv_version) {
    uint64_t s = mix(mix(h->text_hash, rsv_version), (uint64_t)n->npods);
    for (int g = 0; g < n->m->ngpus; g++) s = mix(s, ext_map_str_hash(n->m->gpus[g].uuid));
    for (int i = 0; i < n->npods; i++) {
        const ext_pod *p = n->pods[i];
        s = mix(mix(s, ext_map_str_hash(p->uid)), (uint64_t)p->holds);
        for (int k = 0; p->holds && k < p->a.ngrants; k++) {
            const model_grant *gr = &p->a.grant[k];
            s = mix(s, (uint64_t)(uint8_t)gr->gpu | (uint64_t)(uint16_t)gr->replica << 8 |
                           (uint64_t)(uint8_t)gr->mig_start << 24 | (uint64_t)(uint8_t)gr->mig_profile << 32 |
                           (uint64_t)gr->exclusive << 40);
        }
    }
    return s ? s : 1;
}

bool ext_holdings_reconcile(ext_holdings *h, ext_node *n, ext_holdings_rsv_fn rsv, void *user, uint64_t rsv_version,
                            int64_t now_ms, ext_holdings_stats *stats) {
    if (!h || !n->m) return false;
    uint64_t sig = inputs_sig(h, n, rsv_version);
    if (sig == h->sig && ext_holdings_disagreements(h) == 0) return false;
    h->sig = sig;
    int ne = h->rec.n;
    size_t cap = (size_t)(ne ? ne : 1);
    /* not zeroed: each slot is written before it is read (judge_one clears its result itself) */
    model_holding *hold = malloc(cap * sizeof *hold);
    model_hold_result *res = malloc(cap * sizeof *res);
    const hold_entry **who = malloc(cap * sizeof *who);
    ext_pod **pods = malloc(cap * sizeof *pods);
    if (!hold || !res || !who || !pods) {
        free(hold), free(res), free(who), free(pods);
        kube_log(KUBE_LOG_ERROR, "event=oom node=%s", n->name);
        return false;
    }
    flist out = {.now_ms = now_ms};
    int k = 0;
    h->mapped = 0;
    char why[MODEL_REASON_LEN];
    for (int i = 0; i < ne; i++) {
        const hold_entry *e = &h->rec.e[i];
        ext_pod *p = (ext_pod *)pod_by_key(n, e->key);
        if (!p) {
            int gpu = -1;
            const char *pub = rsv ? rsv(user, e->key, &gpu) : NULL;
            if (pub) judge_reservation(h, &out, e, pub, gpu, n, stats);
            else found(h, &out, e, F_UNKNOWN_POD, (said){0}, (said){0},
                       "no pod of that name is on this node in tessera's cache", n->name, stats);
            continue;
        }
        if (!p->holds) continue;   /* over-committed or not placed yet: nothing of the model's to compare */
        h->mapped++;
        model_holding *hd = &hold[k];
        hd->uid = p->uid;
        model_held_map m = model_holding_map(n->m, e->ids, e->nids, hd, why, sizeof why);
        said model = {.m = n->m, .a = &p->a}, ids = {.text = e->devices};
        if (m == MODEL_HELD_UNKNOWN) {
            found(h, &out, e, F_REFUSED, model, ids, why, n->name, stats);
        } else if (m == MODEL_HELD_UNMAPPED) {
            found(h, &out, e, F_UNMAPPED, model, ids, why, n->name, stats);
        } else {
            who[k] = e;
            pods[k] = p;
            k++;
        }
    }
    bool changed = false;
    if (k > 0 && model_holdings_judge(n->m, k, hold, res) < 0) {
        kube_log(KUBE_LOG_ERROR, "event=oom node=%s", n->name);
        k = 0;
    }
    bool any_moved = false;
    for (int i = 0; i < k; i++) any_moved |= res[i].verdict == MODEL_HOLD_MOVED;
    model_assignment *was = any_moved ? malloc((size_t)k * sizeof *was) : NULL;
    if (any_moved) {
        char err[MODEL_REASON_LEN];
        for (int i = 0; was && i < k; i++) was[i] = pods[i]->a;
        if (!was || model_holdings_apply(n->m, k, hold, res, err, sizeof err) != 0) {
            /* judged on this very model an instant ago: only an inconsistency (or no memory) gets here */
            kube_log(KUBE_LOG_ERROR, "event=holdings-apply-failed node=%s why=\"%s\"", n->name, was ? err : "out of memory");
            for (int i = 0; i < k; i++)
                if (res[i].verdict == MODEL_HOLD_MOVED) {
                    res[i].verdict = MODEL_HOLD_REFUSED;
                    snprintf(res[i].why, sizeof res[i].why, "%s", was ? err : "out of memory");
                    res[i].a = pods[i]->a;
                }
        }
    }
    for (int i = 0; i < k; i++) {
        ext_pod *p = pods[i];
        switch (res[i].verdict) {
        case MODEL_HOLD_MOVED:
            p->a = res[i].a;
            p->derived = false;   /* a fact now: the kubelet's */
            changed = true;
            found(h, &out, who[i], F_APPLIED, (said){.m = n->m, .a = &was[i]}, (said){.m = n->m, .a = &p->a}, "",
                  n->name, stats);
            break;
        case MODEL_HOLD_REFUSED:
            found(h, &out, who[i], F_REFUSED, (said){.m = n->m, .a = &p->a}, (said){.hd = &hold[i]}, res[i].why,
                  n->name, stats);
            break;
        case MODEL_HOLD_AGREE: {
            /* an applied finding stays shown while the record says the same of the pod: the model agrees now
             * because it followed */
            const finding *o = earlier(h, who[i], F_APPLIED);
            finding *f = o ? flist_add(&out) : NULL;
            if (f) *f = *o;
            break;
        }
        case MODEL_HOLD_NOT_COMPARED:
            break;
        }
    }
    if (out.oom) kube_log(KUBE_LOG_ERROR, "event=oom node=%s what=holdings-findings", n->name);
    free(h->f);
    h->f = out.f;
    h->nf = out.n;
    free(was), free(hold), free(res), free(who), free(pods);
    return changed;
}

int ext_holdings_disagreements(const ext_holdings *h) {
    int c = 0;
    for (int i = 0; h && i < h->nf; i++) c += h->f[i].kind == F_REFUSED || h->f[i].kind == F_RESERVATION;
    return c;
}

cJSON *ext_holdings_debug(const ext_holdings *h, int64_t now_ms) {
    cJSON *o = cJSON_CreateObject();
    if (!o || !h) return o;
    if (h->changed_ms) {
        cJSON_AddNumberToObject(o, "recordAgeSeconds", (double)(now_ms - h->changed_ms) / 1000.0);
        cJSON_AddNumberToObject(o, "pods", h->rec.n);
        cJSON_AddNumberToObject(o, "podsMapped", h->mapped);
    } else {
        cJSON_AddNullToObject(o, "recordAgeSeconds");   /* only malformed records were seen */
    }
    cJSON_AddNumberToObject(o, "lastSeenSecondsAgo", (double)(now_ms - h->seen_ms) / 1000.0);
    if (h->bad_why[0]) cJSON_AddStringToObject(o, "malformed", h->bad_why);
    cJSON *arr = cJSON_AddArrayToObject(o, "disagreements");
    for (int i = 0; i < h->nf; i++) {
        const finding *f = &h->f[i];
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "pod", f->key);
        cJSON_AddStringToObject(j, "kind", finding_kind_name(f->kind));
        cJSON_AddStringToObject(j, "model", f->model);
        cJSON_AddStringToObject(j, "kubelet", f->kubelet);
        cJSON_AddStringToObject(j, "devices", f->devices);
        cJSON_AddBoolToObject(j, "applied", f->kind == F_APPLIED);
        cJSON_AddStringToObject(j, "why", f->why);
        cJSON_AddNumberToObject(j, "sinceSeconds", (double)(now_ms - f->since_ms) / 1000.0);
        cJSON_AddItemToArray(arr, j);
    }
    return o;
}
