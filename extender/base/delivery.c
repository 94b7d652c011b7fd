/* delivery.c -- the fixed names of soft-share delivery (delivery.h) and the data of a delivery
 * ConfigMap. Pure string work: no API calls, no state.
 */
#include "extender/base/delivery.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ext_delivery_mode_parse(const char *s, ext_delivery_mode *out) {
    if (!s) return -1;
    if (!strcmp(s, "reservation")) *out = EXT_DELIVERY_RESERVATION;
    else if (!strcmp(s, "none")) *out = EXT_DELIVERY_NONE;
    else return -1;
    return 0;
}

const char *ext_delivery_mode_name(ext_delivery_mode m) { return m == EXT_DELIVERY_RESERVATION ? "reservation" : "none"; }

void ext_delivery_cm_name(const char *admission_uid, char *buf, size_t len) {
    if (!len) return;
    size_t cap = len - 1 < 253 ? len - 1 : 253;
    int n = snprintf(buf, len, "%s", EXT_DLV_CM_PREFIX);
    size_t o = n > 0 && (size_t)n < cap ? (size_t)n : cap;
    for (const char *p = admission_uid ? admission_uid : ""; *p && o < cap; p++) {
        char ch = (char)tolower((unsigned char)*p);
        buf[o++] = (isalnum((unsigned char)ch) || ch == '-' || ch == '.') ? ch : '-';
    }
    buf[o] = 0;
}

void ext_delivery_mps_dir(const char *uuid, bool log, char *buf, size_t len) {
    snprintf(buf, len, EXT_DLV_MPS_ROOT "/%s/%s", uuid ? uuid : "", log ? "log" : "pipe");
}

bool ext_delivery_mps_dir_ok(const char *path) {
    size_t rl = strlen(EXT_DLV_MPS_ROOT);
    return path && !strncmp(path, EXT_DLV_MPS_ROOT "/", rl + 1) && path[rl + 1] && !strstr(path, "..") &&
           strlen(path) < 512;
}

void ext_delivery_enforcement(const ext_delivery_unit *u, int n, const ext_delivery_share *s, char *buf, size_t len) {
    static const ext_delivery_share dflt = {.shim = true};
    if (!s) s = &dflt;
    bool mig = false, replica = false;
    for (int i = 0; u && i < n; i++) {
        mig |= u[i].mig;
        replica |= u[i].replica;
    }
    /* Memory: the interposer in every process of the pod; MPS adds the driver's own pinned limit per client
     * process; a MIG instance is fenced by the hardware besides. Compute: only MPS caps it per client; a MIG
     * instance has its own SMs; time-slicing gives each context the whole GPU (or instance) in turn. */
    char mem[256], comp[160];
    const char *hw = mig ? "mig-instance+" : "";
    if (s->mps && s->mps_mounts)
        snprintf(mem, sizeof mem, "%smps-pinned-limit%s", hw, s->shim ? "+libtessera-cuda" : "");
    else if (s->shim)
        snprintf(mem, sizeof mem, "%slibtessera-cuda", hw);
    else if (mig && !replica)
        snprintf(mem, sizeof mem, "mig-instance (the share within it not enforced: the pod has no %s init "
                 "container; re-create it)", EXT_DLV_SHIM_CONTAINER);
    else
        snprintf(mem, sizeof mem, "not enforced (the pod has no %s init container: it was admitted by a tessera "
                 "without it; re-create it)", EXT_DLV_SHIM_CONTAINER);
    if (s->mps && s->mps_mounts)
        snprintf(comp, sizeof comp, "%smps-active-threads", mig ? "mig-instance+" : "");
    else if (s->mps)
        snprintf(comp, sizeof comp, "not capped (the pod has no MPS volumes: it was admitted by a tessera without "
                 "them; re-create it)");
    else if (mig && !replica)
        snprintf(comp, sizeof comp, "mig-instance");
    else
        snprintf(comp, sizeof comp, "time-slicing%s (not capped)", mig ? " within the mig-instance" : "");
    snprintf(buf, len, "memory=%s compute=%s", mem, comp);
}

cJSON *ext_delivery_data(const ext_delivery_unit *u, int n, const ext_delivery_share *s) {
    if (!u || n < 1) return NULL;
    if (s && s->mps && n != 1) return NULL;   /* one daemon per GPU, and a client talks to one */
    char uuids[1024] = "";
    size_t off = 0;
    int mem = -1, comp = -1, dev = -1;
    for (int i = 0; i < n; i++) {
        if (!u[i].uuid || !u[i].uuid[0]) return NULL;
        int w = snprintf(uuids + off, sizeof uuids - off, "%s%s", i ? "," : "", u[i].uuid);
        if (w < 0 || (size_t)w >= sizeof uuids - off) return NULL;
        off += (size_t)w;
        if (mem < 0 || u[i].memory_mib < mem) mem = u[i].memory_mib;
        if (comp < 0 || u[i].compute_permille < comp) comp = u[i].compute_permille;
        if (dev < 0 || u[i].device_memory_mib < dev) dev = u[i].device_memory_mib;
    }
    if (mem < 0) mem = 0;
    if (comp < 0) comp = 0;
    int pct = (comp + 9) / 10;
    /* Round the fraction DOWN: JAX preallocates it, and more than the share would spill into a
     * neighbour's memory. Integer arithmetic, so the text is the same on every platform. */
    long hundredths = dev > 0 ? (long)mem * 100 / dev : 100;
    if (hundredths < 1) hundredths = 1;
    if (hundredths > 100) hundredths = 100;
    char b_mem[32], b_pct[32], b_hmem[32], b_frac[32], enf[600];
    snprintf(b_mem, sizeof b_mem, "%d", mem);
    snprintf(b_pct, sizeof b_pct, "%d", pct);
    snprintf(b_hmem, sizeof b_hmem, "%dm", mem);
    snprintf(b_frac, sizeof b_frac, "%ld.%02ld", hundredths / 100, hundredths % 100);
    ext_delivery_enforcement(u, n, s, enf, sizeof enf);
    cJSON *d = cJSON_CreateObject();
    if (!d) return NULL;
    /* The HAMi-core variables stay: libtessera-cuda does not read them and HAMi-core is not loaded unless an
     * image preloads it itself, so they change nothing for other images, and an image built around HAMi-core
     * keeps the SM throttling that time-sliced shares otherwise lack. */
    if (!cJSON_AddStringToObject(d, EXT_DLV_ENV_VISIBLE, uuids) || !cJSON_AddStringToObject(d, EXT_DLV_ENV_CAPS, EXT_DLV_CAPS_VALUE) ||
        !cJSON_AddStringToObject(d, EXT_DLV_ENV_UUID, uuids) || !cJSON_AddStringToObject(d, EXT_DLV_ENV_MEMORY, b_mem) ||
        !cJSON_AddStringToObject(d, EXT_DLV_ENV_COMPUTE, b_pct) || !cJSON_AddStringToObject(d, EXT_DLV_ENV_ENFORCEMENT, enf) ||
        !cJSON_AddStringToObject(d, EXT_DLV_ENV_HAMI_MEMORY, b_hmem) ||
        !cJSON_AddStringToObject(d, EXT_DLV_ENV_HAMI_SM, b_pct) || !cJSON_AddStringToObject(d, EXT_DLV_ENV_XLA_FRACTION, b_frac) ||
        !cJSON_AddStringToObject(d, EXT_DLV_ENV_TF_GROWTH, "true")) {
        cJSON_Delete(d);
        return NULL;
    }
    if (s && s->mps) {
        /* The thread percentage is the compute the share is charged; a share that asked only for memory is
         * charged (tessera.io/gpu-milli) its memory's share of the GPU, and gets that many threads. Rounded up
         * and at least 1: the driver takes whole percents, and 0 is not a limit it accepts. */
        int permille = comp > 0 ? comp : dev > 0 ? (int)(((long)mem * 1000 + dev - 1) / dev) : 1000;
        int threads = (permille + 9) / 10;
        if (threads < 1) threads = 1;
        if (threads > 100) threads = 100;
        char pipe[600], logd[600], b_thr[16], b_pin[48];
        /* Where tessera-reserve --mps says its daemon listens; the contract's path otherwise (and for a path a
         * share pod could not reach: the webhook mounts /run/tessera/mps only). */
        if (ext_delivery_mps_dir_ok(u[0].mps_pipe)) snprintf(pipe, sizeof pipe, "%s", u[0].mps_pipe);
        else ext_delivery_mps_dir(u[0].uuid, false, pipe, sizeof pipe);
        if (ext_delivery_mps_dir_ok(u[0].mps_log)) snprintf(logd, sizeof logd, "%s", u[0].mps_log);
        else ext_delivery_mps_dir(u[0].uuid, true, logd, sizeof logd);
        snprintf(b_thr, sizeof b_thr, "%d", threads);
        /* "<device ordinal>=<limit>": the client sees one device (ordinal 0). M as NVIDIA's examples write it;
         * should the driver read M as 10^6 bytes, the limit is 4.6 percent below the charge, never above. */
        snprintf(b_pin, sizeof b_pin, "0=%dM", mem);
        if (!cJSON_AddStringToObject(d, EXT_DLV_ENV_MPS_PIPE, pipe) || !cJSON_AddStringToObject(d, EXT_DLV_ENV_MPS_LOG, logd) ||
            !cJSON_AddStringToObject(d, EXT_DLV_ENV_MPS_THREADS, b_thr) ||
            !cJSON_AddStringToObject(d, EXT_DLV_ENV_MPS_PINNED, b_pin)) {
            cJSON_Delete(d);
            return NULL;
        }
    }
    return d;
}

void ext_rsv_unit_of(const model_gpu *g, const model_grant *gr, char *buf, size_t len) {
    if (gr->mig_profile >= 0 && gr->mig_profile < g->product->nprofiles && gr->replica >= 0)
        /* one replica of a time-sliced instance: each replica is its own device-plugin unit */
        snprintf(buf, len, "mig:%s@%d/r%d", g->product->profiles[gr->mig_profile].name, gr->mig_start, gr->replica);
    else if (gr->mig_profile >= 0 && gr->mig_profile < g->product->nprofiles)
        snprintf(buf, len, "mig:%s@%d", g->product->profiles[gr->mig_profile].name, gr->mig_start);
    else if (gr->replica >= 0)
        snprintf(buf, len, "replica:%d", gr->replica);
    else
        snprintf(buf, len, "gpu");
}

static uint32_t fnv1a(const char *s) {
    uint32_t h = 2166136261u;
    for (; *s; s++) {
        h ^= (uint8_t)*s;
        h *= 16777619u;
    }
    return h;
}

int ext_rsv_pod_name(const char *node, int gpu_index, const char *unit, int attempt, char *buf, size_t len) {
    char cut[31];
    size_t i = 0;
    for (; node[i] && i < 30; i++) {
        char c = (char)tolower((unsigned char)node[i]);
        cut[i] = (isalnum((unsigned char)c) || c == '-') && (unsigned char)c < 128 ? c : '-';
    }
    cut[i] = 0;
    char tail[96];
    if (!strcmp(unit, "gpu")) {
        tail[0] = 0;
    } else if (!strncmp(unit, "replica:", 8)) {
        char *end;
        long r = strtol(unit + 8, &end, 10);
        if (end == unit + 8 || *end || r < 0) return -1;
        snprintf(tail, sizeof tail, "-r%ld", r);
    } else if (!strncmp(unit, "mig:", 4)) {
        const char *at = strrchr(unit, '@');
        if (!at || at == unit + 4) return -1;
        char *end;
        long start = strtol(at + 1, &end, 10), rep = -1;
        if (end == at + 1 || start < 0) return -1;
        if (*end == '/' && end[1] == 'r') {   /* a replica of a time-sliced instance */
            const char *r0 = end + 2;
            rep = strtol(r0, &end, 10);
            if (end == r0 || rep < 0) return -1;
        }
        if (*end) return -1;
        size_t o = (size_t)snprintf(tail, sizeof tail, "-m");
        for (const char *p = unit + 4; p < at && o + 1 < sizeof tail; p++)
            if (isalnum((unsigned char)*p)) tail[o++] = (char)tolower((unsigned char)*p);
        if (rep >= 0) snprintf(tail + o, sizeof tail - o, "-%ld-r%ld", start, rep);
        else snprintf(tail + o, sizeof tail - o, "-%ld", start);
    } else {
        return -1;
    }
    int w = snprintf(buf, len, "tessera-rsv-%s-%08x-g%d%s-%d", cut, fnv1a(node), gpu_index, tail, attempt);
    return w > 0 && (size_t)w < len ? 0 : -1;
}

int ext_rsv_name_attempt(const char *name) {
    const char *dash = name ? strrchr(name, '-') : NULL;
    if (!dash || !dash[1]) return -1;
    char *end;
    long a = strtol(dash + 1, &end, 10);
    return *end || a < 1 || a > 1000000 ? -1 : (int)a;
}

int ext_rsv_resource(const model_node *n, const model_gpu *g, const model_grant *gr, char *buf, size_t len, char *err,
                     size_t errlen) {
    if (gr->mig_profile >= 0) {
        /* A replica of a time-sliced instance (layered) is asked under the instance's name, or
         * with renameByDefault under <name>.shared (the device plugin's suffix). */
        const char *sfx = gr->replica >= 0 && n->mig_renamed ? ".shared" : "";
        if (n->mig_strategy == MODEL_MIG_MIXED) {
            size_t o = (size_t)snprintf(buf, len, "nvidia.com/mig-");
            for (const char *p = g->product->profiles[gr->mig_profile].name; *p && o + 1 < len; p++)
                buf[o++] = *p == '+' ? '.' : *p;
            buf[o < len ? o : len - 1] = 0;
            if (o < len) snprintf(buf + o, len - o, "%s", sfx);
        } else {
            snprintf(buf, len, "nvidia.com/gpu%s", sfx);   /* MIG single: every slice is advertised as a gpu */
        }
        return 0;
    }
    if (gr->replica >= 0) {
        if (g->mode == MODEL_GPU_MPS) {
            snprintf(err, errlen, "a share mapped onto an MPS replica cannot be delivered by a reservation: the "
                                  "client needs the device plugin's MPS daemon mounts and environment");
            return -1;
        }
        snprintf(buf, len, "%s", n->shared_renamed ? "nvidia.com/gpu.shared" : "nvidia.com/gpu");
        return 0;
    }
    snprintf(buf, len, "nvidia.com/gpu");
    return 0;
}
