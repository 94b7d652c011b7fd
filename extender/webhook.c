/* webhook.c -- the mutating admission webhook: validate the AdmissionReview, decide whether
 * the pod is a soft share of tessera's, and build the JSON Patch of what it lacks. See
 * webhook.h for the contract; the names come from the plan of issue 11 (delivery.h).
 */
#include "extender/webhook.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "extender/base64.h"
#include "kube/log.h"
#include "extender/mirror/dra.h"
#include "extender/base/map.h"
#include "extender/mirror/state.h"
#include "model/charge.h"
#include "model/request.h"

#define REVIEW_API "admission.k8s.io/v1"

void ext_webhook_config_defaults(ext_webhook_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->delivery = EXT_DELIVERY_NONE;
}

int ext_webhook_config_add_scheduler(ext_webhook_config *cfg, const char *name, char *err, size_t errlen) {
    if (!name || !name[0] || strlen(name) >= sizeof cfg->schedulers[0]) {
        snprintf(err, errlen, "--scheduler-name: a name of 1..%zu characters", sizeof cfg->schedulers[0] - 1);
        return -1;
    }
    if (cfg->nschedulers >= EXT_WEBHOOK_MAX_SCHEDULERS) {
        snprintf(err, errlen, "--scheduler-name: at most %d names", EXT_WEBHOOK_MAX_SCHEDULERS);
        return -1;
    }
    snprintf(cfg->schedulers[cfg->nschedulers++], sizeof cfg->schedulers[0], "%s", name);
    return 0;
}

static bool is_ours(const ext_webhook_config *cfg, const char *scheduler) {
    if (!scheduler) return false;
    if (cfg->nschedulers == 0) return !strcmp(scheduler, EXT_WEBHOOK_DEFAULT_SCHEDULER);
    for (int i = 0; i < cfg->nschedulers; i++)
        if (!strcmp(cfg->schedulers[i], scheduler)) return true;
    return false;
}

/* The AdmissionReview around a response; takes ownership of resp. */
static void reply_review(cJSON *resp, ext_reply *out) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "apiVersion", REVIEW_API);
    cJSON_AddStringToObject(root, "kind", "AdmissionReview");
    cJSON_AddItemToObject(root, "response", resp);
    out->body = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!out->body) {
        ext_reply_error(out, 500, "out of memory");
        return;
    }
    out->status = 200;
    out->len = strlen(out->body);
}

static cJSON *response_for(const char *uid, bool allowed) {
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "uid", uid);
    cJSON_AddBoolToObject(r, "allowed", allowed);
    return r;
}

static void reply_allowed(const char *uid, ext_reply *out) { reply_review(response_for(uid, true), out); }

static void reply_denied(const char *uid, const char *msg, ext_reply *out) {
    cJSON *r = response_for(uid, false);
    cJSON *st = cJSON_AddObjectToObject(r, "status");
    cJSON_AddNumberToObject(st, "code", 400);
    cJSON_AddStringToObject(st, "message", msg);
    reply_review(r, out);
}

/* JSON Pointer token: '~' -> "~0", '/' -> "~1". */
static void ptr_escape(const char *key, char *buf, size_t len) {
    size_t o = 0;
    for (const char *p = key; *p && o + 3 < len; p++) {
        if (*p == '~' || *p == '/') {
            buf[o++] = '~';
            buf[o++] = *p == '~' ? '0' : '1';
        } else {
            buf[o++] = *p;
        }
    }
    buf[o] = 0;
}

static void op_add(cJSON *ops, const char *path, cJSON *value) {
    cJSON *op = cJSON_CreateObject();
    cJSON_AddStringToObject(op, "op", "add");
    cJSON_AddStringToObject(op, "path", path);
    cJSON_AddItemToObject(op, "value", value);
    cJSON_AddItemToArray(ops, op);
}

static cJSON *cm_ref(const char *cm) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(cJSON_AddObjectToObject(e, "configMapRef"), "name", cm);
    return e;
}

/* envFrom of one container; -1 with why when envFrom is not an array. A reference to stale (the
 * delivery name the pod came with, when it is not this admission's) is pointed at cm instead. */
static int patch_env_from(cJSON *ops, const cJSON *ctr, const char *list, int i, const char *cm, const char *stale,
                          char *why, size_t whylen) {
    char path[128];
    const cJSON *ef = cJSON_GetObjectItemCaseSensitive(ctr, "envFrom");
    if (!ef || cJSON_IsNull(ef)) {
        snprintf(path, sizeof path, "/spec/%s/%d/envFrom", list, i);
        cJSON *arr = cJSON_CreateArray();
        cJSON_AddItemToArray(arr, cm_ref(cm));
        op_add(ops, path, arr);
        return 0;
    }
    if (!cJSON_IsArray(ef)) {
        snprintf(why, whylen, "spec.%s[%d].envFrom: expected an array", list, i);
        return -1;
    }
    const cJSON *e;
    bool has = false;
    int j = 0;
    cJSON_ArrayForEach(e, ef) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(e, "configMapRef"), "name");
        if (cJSON_IsString(n) && !strcmp(n->valuestring, cm)) has = true;
        if (cJSON_IsString(n) && stale && !strcmp(n->valuestring, stale)) {
            /* RFC 6902 "add" onto an existing member replaces it. */
            snprintf(path, sizeof path, "/spec/%s/%d/envFrom/%d/configMapRef/name", list, i, j);
            op_add(ops, path, cJSON_CreateString(cm));
            has = true;
        }
        j++;
    }
    if (has) return 0;
    snprintf(path, sizeof path, "/spec/%s/%d/envFrom/-", list, i);
    op_add(ops, path, cm_ref(cm));
    return 0;
}

/* Extended resources the first app container must carry in requests and limits (a resource
 * holds one value in both). The marker only needs to be there; an accounting resource must hold
 * exactly its charge: a value already there that differs (written by hand, copied from another
 * pod) is replaced, since a smaller one would let the pod past its namespace's quota. */
typedef struct want_res {
    int n;
    const char *name[3];
    char val[3][24];
    bool exact[3];
} want_res;

static void want(want_res *w, const char *name, long long v, bool exact) {
    w->name[w->n] = name;
    snprintf(w->val[w->n], sizeof w->val[0], "%lld", v);
    w->exact[w->n++] = exact;
}

static cJSON *want_map(const want_res *w) {
    cJSON *m = cJSON_CreateObject();
    for (int i = 0; i < w->n; i++) cJSON_AddStringToObject(m, w->name[i], w->val[i]);
    return m;
}

static void patch_resources(cJSON *ops, const cJSON *ctr, const want_res *w) {
    if (!ctr || w->n == 0) return;
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(ctr, "resources");
    if (!cJSON_IsObject(res)) {
        cJSON *r = cJSON_CreateObject();
        cJSON_AddItemToObject(r, "requests", want_map(w));
        cJSON_AddItemToObject(r, "limits", want_map(w));
        op_add(ops, "/spec/containers/0/resources", r);
        return;
    }
    static const char *const parts[2] = {"requests", "limits"};
    for (int k = 0; k < 2; k++) {
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(res, parts[k]);
        char path[160], esc[64];
        if (!cJSON_IsObject(m)) {
            snprintf(path, sizeof path, "/spec/containers/0/resources/%s", parts[k]);
            op_add(ops, path, want_map(w));
            continue;
        }
        for (int i = 0; i < w->n; i++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, w->name[i]);
            if (v && (!w->exact[i] || (cJSON_IsString(v) && !strcmp(v->valuestring, w->val[i])))) continue;
            ptr_escape(w->name[i], esc, sizeof esc);
            snprintf(path, sizeof path, "/spec/containers/0/resources/%s/%s", parts[k], esc);
            op_add(ops, path, cJSON_CreateString(w->val[i]));   /* "add" onto a member replaces it */
        }
    }
}

/* Variables the delivery ConfigMap sets and the enforcement reads (the runtime, libtessera-cuda, the MPS
 * client, HAMi-core): an env entry of the container's own beats envFrom, so one of these there would
 * override the share's device or limits. The hints (XLA_PYTHON_CLIENT_MEM_FRACTION, TF_FORCE_GPU_ALLOW_GROWTH,
 * NVIDIA_DRIVER_CAPABILITIES) are the program's to change and are not refused. */
static bool enforced_var(const char *v) {
    static const char *const exact[] = {EXT_DLV_ENV_VISIBLE, EXT_DLV_ENV_ENFORCEMENT, EXT_DLV_ENV_HAMI_MEMORY,
                                        EXT_DLV_ENV_HAMI_SM};
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
        if (!strcmp(v, exact[i])) return true;
    return !strncmp(v, "TESSERA_GPU_", 12) || !strncmp(v, "CUDA_MPS_", 9);
}

/* The first container (app or init) that sets such a variable in env itself, or NULL; *list and *var say
 * where and which. tessera's own shim container is not looked at (it is replaced when it differs). */
static const char *overrides_delivery(const cJSON *spec, const char **list, const char **var) {
    static const char *const lists[2] = {"initContainers", "containers"};
    for (int l = 0; l < 2; l++) {
        const cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(spec, lists[l])) {
            const cJSON *cn = cJSON_GetObjectItemCaseSensitive(c, "name");
            if (l == 0 && cJSON_IsString(cn) && !strcmp(cn->valuestring, EXT_DLV_SHIM_CONTAINER)) continue;
            const cJSON *e;
            cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(c, "env")) {
                const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name");
                if (cJSON_IsString(n) && enforced_var(n->valuestring)) {
                    *list = lists[l];
                    *var = n->valuestring;
                    return cJSON_IsString(cn) ? cn->valuestring : "(unnamed)";
                }
            }
        }
    }
    return NULL;
}

/* ------------------------------------------------------------------ what enforces a share (round 4) */

static bool is_shim_ctr(const cJSON *c) {
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(c, "name");
    return cJSON_IsString(n) && !strcmp(n->valuestring, EXT_DLV_SHIM_CONTAINER);
}

/* A volume tessera adds: name, and its source (the "emptyDir", "hostPath" or "configMap" member). */
typedef struct want_vol {
    const char *name;
    const char *host;   /* a hostPath's path; NULL: emptyDir {} (or the configMap below) */
    const char *cm;     /* a configMap's name (the pod's delivery ConfigMap); NULL: not a configMap */
    const char *what;   /* what it is, for the message that refuses another volume of its name */
} want_vol;

static cJSON *vol_json(const want_vol *v) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", v->name);
    if (v->cm) {
        /* not optional: a container must not start before its limits are there to read */
        cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "configMap"), "name", v->cm);
    } else if (!v->host) {
        cJSON_AddObjectToObject(o, "emptyDir");
    } else {
        cJSON *hp = cJSON_AddObjectToObject(o, "hostPath");
        cJSON_AddStringToObject(hp, "path", v->host);
        /* Directory, not DirectoryOrCreate: the share starts only after its reservation's daemon answered,
         * which made them; a node without them is a node whose daemon is gone, and the pod should say so. */
        cJSON_AddStringToObject(hp, "type", "Directory");
    }
    return o;
}

/* Is the pod's volume of our name ours (kind): the same source type? A configMap volume of our name that names
 * another ConfigMap (a template copied from another share pod) is ours to replace, not a collision. */
static bool vol_kind_is(const cJSON *have, const want_vol *v) {
    const cJSON *ed = cJSON_GetObjectItemCaseSensitive(have, "emptyDir"), *hp = cJSON_GetObjectItemCaseSensitive(have, "hostPath");
    const cJSON *cm = cJSON_GetObjectItemCaseSensitive(have, "configMap");
    if (v->cm) return cJSON_IsObject(cm) && !ed && !hp;
    return !cm && (v->host ? hp && !ed : ed && !hp);
}

/* The same volume as ours (what a replay or a copied template holds)? */
static bool vol_is(const cJSON *have, const want_vol *v) {
    const cJSON *ed = cJSON_GetObjectItemCaseSensitive(have, "emptyDir"), *hp = cJSON_GetObjectItemCaseSensitive(have, "hostPath");
    if (v->cm) {
        /* the API server adds defaultMode 420; items or optional would change what the shim reads */
        const cJSON *cm = cJSON_GetObjectItemCaseSensitive(have, "configMap");
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(cm, "name");
        return vol_kind_is(have, v) && cJSON_IsString(n) && !strcmp(n->valuestring, v->cm) &&
               !cJSON_GetObjectItemCaseSensitive(cm, "items") &&
               !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cm, "optional"));
    }
    if (!v->host) return vol_kind_is(have, v) && cJSON_IsObject(ed) && cJSON_GetArraySize(ed) == 0;
    const cJSON *path = cJSON_GetObjectItemCaseSensitive(hp, "path"), *type = cJSON_GetObjectItemCaseSensitive(hp, "type");
    return !ed && cJSON_IsString(path) && !strcmp(path->valuestring, v->host) && cJSON_IsString(type) &&
           !strcmp(type->valuestring, "Directory");
}

/* A mount tessera adds to every container but the shim's. */
typedef struct want_mount {
    const char *vol, *path, *sub;   /* sub: subPath or NULL */
    bool ro;
} want_mount;

static cJSON *mount_json(const want_mount *m) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", m->vol);
    cJSON_AddStringToObject(o, "mountPath", m->path);
    if (m->sub) cJSON_AddStringToObject(o, "subPath", m->sub);
    if (m->ro) cJSON_AddBoolToObject(o, "readOnly", true);
    return o;
}

/* Does the pod's mount at our path mount what we do (volume and subPath)? Otherwise it is the pod's own: a
 * collision. Whether it is read-only is mount_exact's question (an older tessera's, replayed, is mended). */
static bool mount_is(const cJSON *have, const want_mount *m) {
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(have, "name"), *sp = cJSON_GetObjectItemCaseSensitive(have, "subPath");
    bool sub_ok = m->sub ? cJSON_IsString(sp) && !strcmp(sp->valuestring, m->sub)
                         : !sp || cJSON_IsNull(sp) || (cJSON_IsString(sp) && !sp->valuestring[0]);
    return cJSON_IsString(n) && !strcmp(n->valuestring, m->vol) && sub_ok;
}

static bool mount_exact(const cJSON *have, const want_mount *m) {
    return mount_is(have, m) && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(have, "readOnly")) == m->ro;
}

typedef struct wants {
    want_vol vol[5];
    int nvol;
    want_mount mnt[6];
    int nmnt;
} wants;

static void wants_for(bool mps, const char *cm, wants *w) {
    memset(w, 0, sizeof *w);
    static const char interposer[] = "GPU memory interposer (libtessera-cuda)";
    w->vol[w->nvol++] = (want_vol){EXT_DLV_SHIM_VOLUME, NULL, NULL, interposer};
    w->vol[w->nvol++] = (want_vol){EXT_DLV_SHIM_STATE_VOLUME, NULL, NULL, "GPU memory ledger (libtessera-cuda)"};
    w->vol[w->nvol++] = (want_vol){EXT_DLV_SHIM_CONFIG_VOLUME, NULL, cm, "GPU limits (libtessera-cuda)"};
    /* Read-only: a process of the pod must not be able to replace the library or ld.so.preload for the pod's
     * other processes, nor the limits. Only the ledger is written, by every process of every container. */
    w->mnt[w->nmnt++] = (want_mount){EXT_DLV_SHIM_VOLUME, EXT_DLV_SHIM_DIR, NULL, true};
    w->mnt[w->nmnt++] = (want_mount){EXT_DLV_SHIM_VOLUME, EXT_DLV_SHIM_PRELOAD, EXT_DLV_SHIM_PRELOAD_SUB, true};
    w->mnt[w->nmnt++] = (want_mount){EXT_DLV_SHIM_STATE_VOLUME, EXT_DLV_SHIM_STATE_DIR, NULL, false};
    w->mnt[w->nmnt++] = (want_mount){EXT_DLV_SHIM_CONFIG_VOLUME, EXT_DLV_SHIM_CONFIG_DIR, NULL, true};
    if (mps) {
        w->vol[w->nvol++] = (want_vol){EXT_DLV_MPS_VOLUME, EXT_DLV_MPS_ROOT, NULL, "MPS directory"};
        w->vol[w->nvol++] = (want_vol){EXT_DLV_MPS_SHM_VOLUME, EXT_DLV_MPS_SHM, NULL, "MPS directory"};
        w->mnt[w->nmnt++] = (want_mount){EXT_DLV_MPS_VOLUME, EXT_DLV_MPS_ROOT, NULL, false};
        w->mnt[w->nmnt++] = (want_mount){EXT_DLV_MPS_SHM_VOLUME, EXT_DLV_DEV_SHM, NULL, false};
    }
}

/* What the pod already has that tessera's additions would collide with: a volume of one of tessera's names
 * that is something else, a container mounting something else at one of tessera's paths (the API server
 * refuses two mounts at one path; /dev/shm is the usual one, an emptyDir for data loaders, and an MPS
 * client's must be its daemon's). 0, or -1 with why. */
static int collisions(const cJSON *spec, const wants *w, char *why, size_t whylen) {
    const cJSON *v;
    cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(spec, "volumes")) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(v, "name");
        for (int i = 0; cJSON_IsString(n) && i < w->nvol; i++)
            if (!strcmp(n->valuestring, w->vol[i].name) && !(w->vol[i].cm ? vol_kind_is(v, &w->vol[i])
                                                                            : vol_is(v, &w->vol[i]))) {
                snprintf(why, whylen, "spec.volumes: the pod has a volume named \"%s\", which is tessera's name for "
                         "the share's %s: rename yours", w->vol[i].name, w->vol[i].what);
                return -1;
            }
    }
    static const char *const lists[2] = {"initContainers", "containers"};
    for (int l = 0; l < 2; l++) {
        const cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(spec, lists[l])) {
            if (l == 0 && is_shim_ctr(c)) continue;
            const cJSON *m, *cn = cJSON_GetObjectItemCaseSensitive(c, "name");
            cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(c, "volumeMounts")) {
                const cJSON *mp = cJSON_GetObjectItemCaseSensitive(m, "mountPath");
                for (int i = 0; cJSON_IsString(mp) && i < w->nmnt; i++) {
                    if (strcmp(mp->valuestring, w->mnt[i].path) != 0 || mount_is(m, &w->mnt[i])) continue;
                    const char *what = !strcmp(w->mnt[i].path, EXT_DLV_DEV_SHM)
                                           ? "an MPS client's /dev/shm must be its daemon's shared memory "
                                             "(/run/tessera/mps/shm): remove your /dev/shm volume"
                                           : "tessera mounts what enforces the share's limits there: move yours";
                    snprintf(why, whylen, "%s \"%.100s\" mounts something else at %s; %s",
                             l ? "container" : "init container", cJSON_IsString(cn) ? cn->valuestring : "(unnamed)",
                             w->mnt[i].path, what);
                    return -1;
                }
                /* Beneath the read-only /opt/tessera the runtime cannot make a mount point (only state/ and
                 * config/ exist there, made by the installer): the container would fail to start. */
                size_t dl = strlen(EXT_DLV_SHIM_DIR);
                bool ours = false;
                for (int i = 0; cJSON_IsString(mp) && i < w->nmnt; i++) ours |= !strcmp(mp->valuestring, w->mnt[i].path);
                if (cJSON_IsString(mp) && !ours && !strncmp(mp->valuestring, EXT_DLV_SHIM_DIR, dl) &&
                    mp->valuestring[dl] == '/') {
                    snprintf(why, whylen, "%s \"%.100s\" mounts a volume at %.100s, inside %s, which tessera mounts "
                             "read-only for the share's memory limit: mount it elsewhere",
                             l ? "container" : "init container", cJSON_IsString(cn) ? cn->valuestring : "(unnamed)",
                             mp->valuestring, EXT_DLV_SHIM_DIR);
                    return -1;
                }
            }
        }
    }
    return 0;
}

/* Add items (taken) to the array at path, which is arr in the pod: created whole when the pod has none. */
static void add_items(cJSON *ops, const cJSON *arr, const char *path, cJSON *items) {
    if (cJSON_GetArraySize(items) == 0) {
        cJSON_Delete(items);
    } else if (!cJSON_IsArray(arr)) {
        op_add(ops, path, items);
    } else {
        char end[160];
        snprintf(end, sizeof end, "%s/-", path);
        cJSON *v;
        while ((v = cJSON_DetachItemFromArray(items, 0))) op_add(ops, end, v);
        cJSON_Delete(items);
    }
}

/* The array item at path replaced by v (taken): "remove" then "add" at the same index, as patch_shim_ctr does
 * (the two operations every JSON Patch reader of this project plays). */
static void op_replace(cJSON *ops, const char *path, cJSON *v) {
    cJSON *op = cJSON_CreateObject();
    cJSON_AddStringToObject(op, "op", "remove");
    cJSON_AddStringToObject(op, "path", path);
    cJSON_AddItemToArray(ops, op);
    op_add(ops, path, v);
}

/* The first object of array arr whose member key is the string val, its index in *at; NULL (*at -1) when none. */
static const cJSON *find_item(const cJSON *arr, const char *key, const char *val, int *at) {
    int i = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, arr) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(x, key);
        if (cJSON_IsString(v) && !strcmp(v->valuestring, val)) {
            *at = i;
            return x;
        }
        i++;
    }
    *at = -1;
    return NULL;
}

/* What is there already is tessera's own: collisions() refused anything else of those names and paths. Ours
 * but not as tessera makes it now (the delivery ConfigMap of a copied template) is replaced. */
static void patch_volumes(cJSON *ops, const cJSON *spec, const wants *w) {
    const cJSON *vols = cJSON_GetObjectItemCaseSensitive(spec, "volumes");
    cJSON *missing = cJSON_CreateArray();
    for (int i = 0; i < w->nvol; i++) {
        int found;
        const cJSON *have = find_item(vols, "name", w->vol[i].name, &found);
        if (!have) {
            cJSON_AddItemToArray(missing, vol_json(&w->vol[i]));
        } else if (!vol_is(have, &w->vol[i])) {
            char path[64];
            snprintf(path, sizeof path, "/spec/volumes/%d", found);
            op_replace(ops, path, vol_json(&w->vol[i]));
        }
    }
    add_items(ops, vols, "/spec/volumes", missing);
}

/* Each of tessera's mounts on container i of list: added when missing, replaced when it is ours but not read-only
 * as it should be (a pod admitted by an older tessera mounted /opt/tessera read-write). */
static void patch_mounts(cJSON *ops, const cJSON *ctr, const char *list, int i, const wants *w) {
    const cJSON *have = cJSON_GetObjectItemCaseSensitive(ctr, "volumeMounts");
    cJSON *missing = cJSON_CreateArray();
    char path[160];
    for (int k = 0; k < w->nmnt; k++) {
        int found;
        const cJSON *mine = find_item(have, "mountPath", w->mnt[k].path, &found);
        if (!mine) {
            cJSON_AddItemToArray(missing, mount_json(&w->mnt[k]));
        } else if (!mount_exact(mine, &w->mnt[k])) {
            snprintf(path, sizeof path, "/spec/%s/%d/volumeMounts/%d", list, i, found);
            op_replace(ops, path, mount_json(&w->mnt[k]));
        }
    }
    snprintf(path, sizeof path, "/spec/%s/%d/volumeMounts", list, i);
    add_items(ops, have, path, missing);
}

/* The tessera-cuda-shim init container, as tessera adds it. */
static cJSON *shim_ctr_json(const char *image) {
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "name", EXT_DLV_SHIM_CONTAINER);
    cJSON_AddStringToObject(c, "image", image);
    cJSON *cmd = cJSON_AddArrayToObject(c, "command");
    cJSON_AddItemToArray(cmd, cJSON_CreateString(EXT_RSV_COMMAND));
    cJSON_AddItemToArray(cmd, cJSON_CreateString(EXT_DLV_SHIM_INSTALL));
    cJSON_AddItemToArray(cmd, cJSON_CreateString(EXT_DLV_SHIM_DIR));
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "name", EXT_DLV_SHIM_VOLUME);
    cJSON_AddStringToObject(m, "mountPath", EXT_DLV_SHIM_DIR);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(c, "volumeMounts"), m);
    cJSON *res = cJSON_AddObjectToObject(c, "resources");
    for (int k = 0; k < 2; k++) {
        cJSON *l = cJSON_AddObjectToObject(res, k ? "limits" : "requests");
        cJSON_AddStringToObject(l, "cpu", "10m");
        cJSON_AddStringToObject(l, "memory", "16Mi");
    }
    /* Restricted-clean, so it never changes the pod's Pod Security level. */
    cJSON *sc = cJSON_AddObjectToObject(c, "securityContext");
    cJSON_AddBoolToObject(sc, "runAsNonRoot", true);
    cJSON_AddNumberToObject(sc, "runAsUser", EXT_DLV_SHIM_UID);
    cJSON_AddBoolToObject(sc, "allowPrivilegeEscalation", false);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(cJSON_AddObjectToObject(sc, "capabilities"), "drop"),
                         cJSON_CreateString("ALL"));
    cJSON_AddStringToObject(cJSON_AddObjectToObject(sc, "seccompProfile"), "type", "RuntimeDefault");
    cJSON_AddBoolToObject(sc, "readOnlyRootFilesystem", true);
    /* tessera-reserve's message on stderr becomes the termination message when it fails: the reservation
     * controller's TesseraGPUEnforcementFailed Event and `kubectl describe pod` show it. */
    cJSON_AddStringToObject(c, "terminationMessagePolicy", "FallbackToLogsOnError");
    return c;
}

/* Does the pod's container hold exactly what tessera would add? Every member tessera sets must be equal, and
 * the only others allowed are the ones the API server defaults (a copied container with an extra member, an
 * env or a capability added, is not tessera's and is made again). */
static bool shim_ctr_is(const cJSON *have, const cJSON *want) {
    if (!cJSON_IsObject(have)) return false;
    const cJSON *w, *h;
    cJSON_ArrayForEach(w, want)
        if (!cJSON_Compare(cJSON_GetObjectItemCaseSensitive(have, w->string), w, true)) return false;
    cJSON_ArrayForEach(h, have)
        if (!cJSON_GetObjectItemCaseSensitive(want, h->string) && strcmp(h->string, "imagePullPolicy") != 0 &&
            strcmp(h->string, "terminationMessagePath") != 0)
            return false;
    return true;
}

/* The shim container first in spec.initContainers, exactly as tessera makes it. Called after every other
 * op on the init containers (they name their original indices). */
static void patch_shim_ctr(cJSON *ops, const cJSON *spec, const char *image) {
    const cJSON *inits = cJSON_GetObjectItemCaseSensitive(spec, "initContainers");
    cJSON *want = shim_ctr_json(image);
    int at = -1, i = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, inits) {
        if (is_shim_ctr(c) && at < 0) at = i;
        i++;
    }
    if (at == 0 && shim_ctr_is(cJSON_GetArrayItem(inits, 0), want)) {
        cJSON_Delete(want);
        return;
    }
    if (!cJSON_IsArray(inits) || i == 0) {
        cJSON *arr = cJSON_CreateArray();
        cJSON_AddItemToArray(arr, want);
        op_add(ops, "/spec/initContainers", arr);
        return;
    }
    if (at >= 0) {   /* misplaced or not ours any more (another image, changed by hand): made again, first */
        char path[64];
        snprintf(path, sizeof path, "/spec/initContainers/%d", at);
        cJSON *op = cJSON_CreateObject();
        cJSON_AddStringToObject(op, "op", "remove");
        cJSON_AddStringToObject(op, "path", path);
        cJSON_AddItemToArray(ops, op);
    }
    op_add(ops, "/spec/initContainers/0", want);
}

/* Delivery names this process issued lately. The apiserver may call the webhook again for the same
 * pod within one request (reinvocationPolicy: IfNeeded) with another request uid; the name the first
 * call gave is then kept. A name the pod came with that was not issued here lately was copied from
 * another pod (a template made from `kubectl get pod -o yaml`) and is replaced. Forgetting (a restart,
 * another replica answered first) only renames once more, consistently: correctness does not depend
 * on this memory. */
#define ISSUED_SLOTS 4096
#define ISSUED_MS 120000   /* longer than any admission request with its webhook calls */
static struct { uint64_t h; int64_t ms; } issued[ISSUED_SLOTS];
static int issued_next;
static pthread_mutex_t issued_mu = PTHREAD_MUTEX_INITIALIZER;

static uint64_t name_hash(const char *s) {
    uint64_t h = ext_map_str_hash(s);
    return h ? h : 1;   /* 0 marks an empty slot */
}

static void issued_note(const char *name) {
    uint64_t h = name_hash(name);
    pthread_mutex_lock(&issued_mu);
    issued[issued_next].h = h;
    issued[issued_next].ms = ext_now_ms();
    issued_next = (issued_next + 1) % ISSUED_SLOTS;
    pthread_mutex_unlock(&issued_mu);
}

static bool issued_lately(const char *name) {
    uint64_t h = name_hash(name);
    int64_t now = ext_now_ms();
    bool y = false;
    pthread_mutex_lock(&issued_mu);
    for (int i = 0; i < ISSUED_SLOTS && !y; i++) y = issued[i].h == h && now - issued[i].ms < ISSUED_MS;
    pthread_mutex_unlock(&issued_mu);
    return y;
}

/* The patch for a soft share (an empty array when it has everything), or NULL with why. */
static cJSON *share_patch(const ext_webhook_config *cfg, const cJSON *pod, const char *uid, bool mps, const char *image,
                          char *why, size_t whylen) {
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(pod, "spec");
    cJSON *ops = cJSON_CreateArray();
    if (cfg->delivery == EXT_DELIVERY_RESERVATION) {
        const cJSON *anns = cJSON_GetObjectItemCaseSensitive(meta, "annotations");
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(anns, EXT_DLV_ANN_DELIVERY);
        /* The name comes from this admission's uid. A tessera.io/delivery the pod already carries is kept
         * only when it is that name (a replay of this review) or one this process issued lately (a
         * reinvocation); any other was copied from another pod (a template made from `kubectl get pod -o
         * yaml`): it names that pod's ConfigMap and would hand this pod that pod's GPU. It is replaced, and
         * so are the containers' references to it. */
        char cm[256];
        const char *stale = NULL;
        ext_delivery_cm_name(uid, cm, sizeof cm);
        bool keep = cJSON_IsString(d) && d->valuestring[0] &&
                    (!strcmp(d->valuestring, cm) || issued_lately(d->valuestring));
        if (keep) snprintf(cm, sizeof cm, "%s", d->valuestring);
        else if (cJSON_IsString(d) && d->valuestring[0]) stale = d->valuestring;
        issued_note(cm);
        if (!keep) {
            cJSON *v = cJSON_CreateString(cm);
            if (!cJSON_IsObject(meta)) {
                cJSON *m = cJSON_CreateObject();
                cJSON_AddStringToObject(cJSON_AddObjectToObject(m, "annotations"), EXT_DLV_ANN_DELIVERY, cm);
                op_add(ops, "/metadata", m);
                cJSON_Delete(v);
            } else if (!cJSON_IsObject(anns)) {
                cJSON *a = cJSON_CreateObject();
                cJSON_AddItemToObject(a, EXT_DLV_ANN_DELIVERY, v);
                op_add(ops, "/metadata/annotations", a);
            } else {
                char esc[64], path[96];
                ptr_escape(EXT_DLV_ANN_DELIVERY, esc, sizeof esc);
                snprintf(path, sizeof path, "/metadata/annotations/%s", esc);
                op_add(ops, path, v);
            }
        }
        wants w;
        wants_for(mps, cm, &w);
        if (collisions(spec, &w, why, whylen) < 0) {
            cJSON_Delete(ops);
            return NULL;
        }
        static const char *const lists[2] = {"initContainers", "containers"};
        for (int l = 0; l < 2; l++) {
            int i = 0;
            const cJSON *c;
            cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(spec, lists[l])) {
                int at = i++;
                if (l == 0 && is_shim_ctr(c)) continue;   /* no envFrom, no preload: made again if it has them */
                if (patch_env_from(ops, c, lists[l], at, cm, stale, why, whylen) < 0) {
                    cJSON_Delete(ops);
                    return NULL;
                }
                patch_mounts(ops, c, lists[l], at, &w);
            }
        }
        patch_volumes(ops, spec, &w);
        patch_shim_ctr(ops, spec, image);
    }
    const cJSON *rc = cJSON_GetObjectItemCaseSensitive(spec, "runtimeClassName");
    if (cfg->runtime_class[0] && (!rc || cJSON_IsNull(rc)))
        op_add(ops, "/spec/runtimeClassName", cJSON_CreateString(cfg->runtime_class));
    return ops;
}

static const char *str_field(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* ---------------------------------------------------------------- the quota declaration */

static _Atomic uint64_t declared[EXT_DECL_N];
static _Atomic int last_rule = -1;   /* the rule of the previous declaration: a change is logged at info */

const char *ext_webhook_rule_name(ext_webhook_rule r) { return r == EXT_DECL_CLUSTER ? "cluster" : "catalog"; }

const char *ext_webhook_rule_why(ext_webhook_rule r) {
    static const char *const why[EXT_DECL_N] = {"synced", "no-mirror", "not-synced", "no-gpu-holds-it", "too-many-kinds"};
    return r >= 0 && r < EXT_DECL_N ? why[r] : "?";
}

void ext_webhook_declarations(uint64_t out[EXT_DECL_N]) {
    for (int i = 0; i < EXT_DECL_N; i++) out[i] = atomic_load(&declared[i]);
}

/* What the pod declares (README, Quotas): the most it could hold on the GPUs this cluster has and the
 * request allows, so that a team's quota counts what its pods can really take here; without the mirror's
 * word on them (a webhook alone, or start-up before the first list), the most on any GPU of the catalog. A
 * node that joins later with larger GPUs is one the pod may not use (model_charge_node_within, in filter):
 * what it declared stays the most it holds. 0, or -1 with err when no GPU of the catalog could hold it. */
static int declaration(const ext_webhook_config *cfg, const cJSON *req, const cJSON *pod, const model_request *r,
                       model_charge *out, char *err, size_t errlen) {
    ext_webhook_rule rule = EXT_DECL_CATALOG_NO_MIRROR;
    if (cfg->mirror && !ext_state_ready(cfg->mirror)) rule = EXT_DECL_CATALOG_NOT_SYNCED;
    if (cfg->mirror && rule != EXT_DECL_CATALOG_NOT_SYNCED) {
        static _Thread_local model_charge_gpus g;   /* 1.5 KiB: not on a small thread stack */
        memset(&g, 0, sizeof g);
        ext_state_lock(cfg->mirror);
        for (int i = 0; i < ext_state_node_count(cfg->mirror); i++) {
            const ext_node *en = ext_state_node_at(cfg->mirror, i);
            if (en && en->m && !en->m->reason[0]) model_charge_gpus_add(&g, en->m, r);
        }
        rule = g.overflow ? EXT_DECL_CATALOG_TOO_MANY
               : model_charge_request_gpus(r, &g, out) ? EXT_DECL_CLUSTER : EXT_DECL_CATALOG_NO_GPU;
        ext_state_unlock(cfg->mirror);   /* (g's products point into the nodes: read above, under the lock) */
    }
    if (rule != EXT_DECL_CLUSTER && model_charge_request(r, cfg->catalog, out, err, errlen) != 0) return -1;
    atomic_fetch_add(&declared[rule], 1);
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
    const char *ns = str_field(req, "namespace"), *name = str_field(meta, "name");
    if (!name) name = str_field(meta, "generateName");   /* (a name the API server has yet to make) */
    kube_log(atomic_exchange(&last_rule, (int)rule) != (int)rule ? KUBE_LOG_INFO : KUBE_LOG_DEBUG,
             "event=quota-declared rule=%s why=%s pod=%s/%s gpu_milli=%lld gpu_memory_mib=%lld", ext_webhook_rule_name(rule),
             ext_webhook_rule_why(rule), ns ? ns : "-", name ? name : "-", (long long)out->gpu_milli,
             (long long)out->memory_mib);
    return 0;
}

void ext_webhook_mutate(const ext_webhook_config *cfg, const char *body, size_t len, ext_reply *out) {
    memset(out, 0, sizeof *out);
    size_t max = cfg->max_body ? cfg->max_body : 8u << 20;
    char msg[1200];
    if (len > max) {
        snprintf(msg, sizeof msg, "AdmissionReview of %zu bytes is larger than the limit of %zu bytes", len, max);
        ext_reply_error(out, 400, msg);
        return;
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(body ? body : "", len, &end, 0);
    if (!root) {
        snprintf(msg, sizeof msg, "malformed JSON in the AdmissionReview near byte %zu",
                 end && body ? (size_t)(end - body) : (size_t)0);
        ext_reply_error(out, 400, msg);
        return;
    }
    const char *kind = str_field(root, "kind"), *api = str_field(root, "apiVersion");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(root, "request");
    const cJSON *uidj = cJSON_GetObjectItemCaseSensitive(req, "uid");
    const cJSON *rkind = cJSON_GetObjectItemCaseSensitive(req, "kind");
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(req, "operation");
    const char *bad = NULL;
    if (!cJSON_IsObject(root) || !kind || strcmp(kind, "AdmissionReview"))
        bad = "not an AdmissionReview: expected an object with \"kind\": \"AdmissionReview\"";
    else if (!api || strcmp(api, REVIEW_API))
        bad = "AdmissionReview apiVersion must be \"" REVIEW_API "\" (register the webhook with "
              "admissionReviewVersions: [v1])";
    else if (!cJSON_IsObject(req))
        bad = "AdmissionReview without a \"request\" object";
    else if (!cJSON_IsString(uidj) || !uidj->valuestring[0])
        bad = "AdmissionReview request.uid: expected a non-empty string";
    else if (!cJSON_IsObject(rkind) || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(rkind, "kind")))
        bad = "AdmissionReview request.kind: expected an object {group, version, kind}";
    else if (!cJSON_IsString(op))
        bad = "AdmissionReview request.operation: expected a string (CREATE, UPDATE, DELETE, CONNECT)";
    if (bad) {
        ext_reply_error(out, 400, bad);
        cJSON_Delete(root);
        return;
    }
    const char *uid = uidj->valuestring;
    const char *group = str_field(rkind, "group"), *sub = str_field(req, "subResource");
    bool pod_create = !strcmp(str_field(rkind, "kind"), "Pod") && (!group || !group[0]) && (!sub || !sub[0]) &&
                      !strcmp(op->valuestring, "CREATE");
    if (!pod_create) {
        reply_allowed(uid, out);
        cJSON_Delete(root);
        return;
    }
    const cJSON *pod = cJSON_GetObjectItemCaseSensitive(req, "object");
    if (!cJSON_IsObject(pod) || !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(pod, "spec"))) {
        ext_reply_error(out, 400, "AdmissionReview request.object: expected the Pod object (with a spec) of a CREATE");
        cJSON_Delete(root);
        return;
    }
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(pod, "spec");
    if (!is_ours(cfg, str_field(spec, "schedulerName"))) {
        reply_allowed(uid, out);
        cJSON_Delete(root);
        return;
    }
    model_request r;
    char perr[400];
    if (model_request_from_pod(pod, &r, perr, sizeof perr) != 0) {
        snprintf(msg, sizeof msg, "tessera: %s", perr);
        reply_denied(uid, msg, out);
        cJSON_Delete(root);
        return;
    }
    /* Only ResourceClaims, no GPU resource: the marker alone, so that kube-scheduler calls tessera for it too
     * (README, DRA). The claims themselves are not looked at: a template's claim does not exist yet at
     * admission, and a pod whose claims ask for no GPU costs one extender call that answers neutrally. */
    bool claims_only = r.kind == MODEL_REQ_NONE && ext_dra_pod_has_claims(pod);
    if (r.kind == MODEL_REQ_NONE && !claims_only) {   /* asks for no GPU */
        reply_allowed(uid, out);
        cJSON_Delete(root);
        return;
    }
    /* Every GPU request states what it will hold, in the units namespaces' quotas count (README,
     * Quotas). Claims are not sized: a template's claim does not exist yet at admission. */
    model_charge charge;
    if (!claims_only && declaration(cfg, req, pod, &r, &charge, perr, sizeof perr) != 0) {
        snprintf(msg, sizeof msg, "tessera: %s", perr);
        reply_denied(uid, msg, out);
        cJSON_Delete(root);
        return;
    }
    bool share = r.kind == MODEL_REQ_FRACTION;
    bool mps = share && r.compute_sharing == MODEL_COMPUTE_MPS;
    char image[512] = "", warning[700] = "";
    if (cfg->delivery == EXT_DELIVERY_RESERVATION && share) {
        const char *list = NULL, *ctr = NULL, *var = NULL;
        if (r.isolation == MODEL_ISO_MPS) {
            reply_denied(uid,
                         "tessera: a GPU fraction with tessera.io/isolation: mps would be a replica of the device "
                         "plugin's MPS daemon, which tessera's reservations cannot hand over; for a fraction whose SMs "
                         "MPS caps, use the annotation tessera.io/compute-sharing: mps (with runAsUser) instead, ask for "
                         "nvidia.com/gpu.shared with tessera.io/isolation: mps, or run tessera with "
                         "--soft-share-delivery=none", out);
            cJSON_Delete(root);
            return;
        }
        if ((ctr = overrides_delivery(spec, &list, &var))) {
            snprintf(msg, sizeof msg,
                     "tessera: %s \"%.100s\" sets %.60s in env; tessera delivers a GPU share's device and limits "
                     "through that variable (from the pod's delivery ConfigMap) and an env entry would override it: "
                     "remove it", !strcmp(list, "containers") ? "container" : "init container", ctr, var);
            reply_denied(uid, msg, out);
            cJSON_Delete(root);
            return;
        }
        if (mps && r.count > 1) {
            snprintf(msg, sizeof msg, "tessera: an MPS share (tessera.io/compute-sharing: mps) is a client of one GPU's "
                     "MPS control daemon (CUDA_MPS_PIPE_DIRECTORY names one), and this pod asks for shares of %d GPUs: "
                     "run one pod per GPU, or drop the annotation for time-sliced shares", r.count);
            reply_denied(uid, msg, out);
            cJSON_Delete(root);
            return;
        }
        /* A user namespace maps the pod's uids to others on the node: the MPS daemon (on the host's uids) would see
         * a client uid that is not the runAsUser the model keeps apart per GPU, and files the client makes in the
         * daemon's host directories would belong to an unmapped uid. */
        const cJSON *hu = cJSON_GetObjectItemCaseSensitive(spec, "hostUsers");
        if (mps && cJSON_IsFalse(hu)) {
            reply_denied(uid,
                         "tessera: an MPS share (tessera.io/compute-sharing: mps) cannot run in a user namespace "
                         "(spec.hostUsers: false): the node would see its processes under another uid than its "
                         "runAsUser, which is the uid its GPU's MPS control daemon must serve (one server per uid; a "
                         "client of another uid waits for that server's clients to finish), and the daemon's host "
                         "directories it mounts (/run/tessera/mps and its shm) are shared with the daemon by uid: "
                         "remove hostUsers: false, or drop the annotation for a time-sliced share", out);
            cJSON_Delete(root);
            return;
        }
        /* The shim's image is tessera's own: a share admitted without it would run with no memory limit. */
        char why[700] = "";
        bool known = cfg->image_fn ? cfg->image_fn(cfg->image_user, image, sizeof image, why, sizeof why)
                                   : (snprintf(image, sizeof image, "%s", cfg->image), image[0] != 0);
        if (!known) {
            snprintf(msg, sizeof msg, "tessera: a GPU share is admitted only with its memory limit, whose init container "
                     "%s runs tessera's own image, and tessera does not know that image yet: %.400s; try again in a "
                     "moment (or give tessera --reserve-image)", EXT_DLV_SHIM_CONTAINER,
                     why[0] ? why : "no --reserve-image");
            reply_denied(uid, msg, out);
            cJSON_Delete(root);
            return;
        }
        /* An MPS client mounts its daemon's host directories; Pod Security baseline and restricted forbid
         * hostPath, so the API server would refuse the pod after this webhook anyway, with a message that does
         * not say why tessera added them. The namespace's label says it first. */
        const char *ns = str_field(req, "namespace");
        if (!ns || !ns[0]) ns = str_field(cJSON_GetObjectItemCaseSensitive(pod, "metadata"), "namespace");
        if (mps && cfg->ns_level_fn && ns && ns[0]) {
            char level[64] = "";
            if (cfg->ns_level_fn(cfg->ns_level_user, ns, level, sizeof level, why, sizeof why) < 0) {
                snprintf(warning, sizeof warning, "tessera could not read namespace %.100s (%.300s): an MPS share mounts "
                         "hostPath volumes (/run/tessera/mps), which Pod Security baseline and restricted refuse",
                         ns, why);
            } else if (!strcmp(level, "baseline") || !strcmp(level, "restricted")) {
                snprintf(msg, sizeof msg,
                         "tessera: namespace %.100s enforces Pod Security \"%s\" (label pod-security.kubernetes.io/"
                         "enforce), which forbids hostPath volumes; an MPS share (tessera.io/compute-sharing: mps) "
                         "mounts its MPS daemon's directories from the node (/run/tessera/mps and its shm) as "
                         "hostPath: run it in a namespace whose level is privileged, or drop the annotation for a "
                         "time-sliced share (memory still enforced, compute not capped)", ns, level);
                reply_denied(uid, msg, out);
                cJSON_Delete(root);
                return;
            }
        }
    }
    /* whole GPUs, replicas, MIG: the device plugin's; only the accounting resources are added */
    const cJSON *ctr0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(spec, "containers"), 0);
    cJSON *ops = share ? share_patch(cfg, pod, uid, mps, image, perr, sizeof perr) : cJSON_CreateArray();
    want_res w = {0};
    if (share || claims_only) want(&w, EXT_DLV_MARKER_RESOURCE, 1, false);
    if (!claims_only) {
        want(&w, MODEL_CHARGE_MILLI, (long long)charge.gpu_milli, true);
        want(&w, MODEL_CHARGE_MEMORY, (long long)charge.memory_mib, true);
    }
    if (ops) patch_resources(ops, ctr0, &w);
    if (!ops) {
        snprintf(msg, sizeof msg, "tessera: %s", perr);
        reply_denied(uid, msg, out);
        cJSON_Delete(root);
        return;
    }
    cJSON *resp = response_for(uid, true);
    if (warning[0]) cJSON_AddItemToArray(cJSON_AddArrayToObject(resp, "warnings"), cJSON_CreateString(warning));
    if (cJSON_GetArraySize(ops) > 0) {
        char *text = cJSON_PrintUnformatted(ops);
        char *b64 = text ? ext_base64_encode(text, strlen(text), NULL) : NULL;
        free(text);
        if (!b64) {
            cJSON_Delete(ops);
            cJSON_Delete(resp);
            cJSON_Delete(root);
            ext_reply_error(out, 500, "out of memory");
            return;
        }
        cJSON_AddStringToObject(resp, "patchType", "JSONPatch");
        cJSON_AddStringToObject(resp, "patch", b64);
        free(b64);
    }
    cJSON_Delete(ops);
    reply_review(resp, out);
    cJSON_Delete(root);
}
