/* device.c -- find the UUID(s) of the device(s) the NVIDIA device plugin gave this container.
 *
 * What reaches a container, per the plugin's deviceListStrategy (read in NVIDIA/k8s-device-plugin,
 * internal/plugin/server.go: getAllocateResponse, apiEnvs, apiMounts, getAllocateResponseForCDI,
 * deviceIDsFromAnnotatedDeviceIDs; internal/rm/devices.go: AnnotatedID, GetIndices, IsMigDevice):
 *
 *  envvar (the default)  NVIDIA_VISIBLE_DEVICES = the device IDs joined with ",". With
 *                        deviceIDStrategy=uuid (the default) they are "GPU-..." or "MIG-..."; with
 *                        deviceIDStrategy=index they are NVML indices, "<gpu>" or "<gpu>:<mig>" for MIG.
 *  volume-mounts         NVIDIA_VISIBLE_DEVICES = "/var/run/nvidia-container-devices" and one mount per
 *                        device, host /dev/null at /var/run/nvidia-container-devices/<device ID>.
 *  cdi-annotations,      no device list in the environment from the plugin: the runtime applies the
 *  cdi-cri               CDI devices "nvidia.com/gpu=<ID>". The CDI spec nvidia-ctk generates sets
 *                        NVIDIA_VISIBLE_DEVICES=void for every container and, per device, only device
 *                        nodes (NVIDIA/nvidia-container-toolkit pkg/nvcdi/full-gpu-nvml.go and
 *                        internal/platform-support/dgpu/nvml.go: /dev/nvidia<minor> plus DRM nodes;
 *                        for a MIG device the parent's /dev/nvidia<minor> and the GI/CI access nodes
 *                        /dev/nvidia-caps/nvidia-cap<N>, pkg/nvcdi/mig-device-nvml.go). CDI mounts
 *                        nothing under /proc, so /proc/driver/nvidia/gpus is the host's and lists
 *                        EVERY GPU: the injected one is the entry whose "Device Minor:" matches a
 *                        /dev/nvidia<minor> node present in the container. A MIG device's own UUID
 *                        appears nowhere but NVML: only its parent GPU can be named then.
 *  Time-slicing replicas: the plugin's internal IDs are "<uuid>::<n>" (NewAnnotatedID), but
 *                        deviceIDsFromAnnotatedDeviceIDs strips the suffix (AnnotatedIDs.GetIDs) before
 *                        any strategy sees the IDs, so it should not reach a container; stripped here
 *                        anyway in case an older or patched plugin lets it through.
 *  Legacy runtime hook   with envvar/volume-mounts the nvidia runtime's libnvidia-container
 *                        (NVIDIA/libnvidia-container src/nvc_mount.c: mount_procfs, mount_procfs_gpu)
 *                        puts a tmpfs over /proc/driver/nvidia and bind-mounts gpus/<PCI bus id> only
 *                        for the injected GPUs; MIG devices also get their
 *                        capabilities/gpu<N>/mig/gi<G>[/ci<C>]/access files (mount_procfs_mig). That
 *                        masked view is what lets indices be resolved: it shows exactly the given GPUs.
 *
 * "void", "none", "all" and "" in NVIDIA_VISIBLE_DEVICES never name a device of ours.
 */
#include "reserve/device.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_IDS 32
#define ID_LEN  128

typedef struct id_list {
    int n;
    char v[MAX_IDS][ID_LEN];
} id_list;

typedef struct proc_gpu {
    char bus[64];   /* directory name: PCI bus id */
    char uuid[ID_LEN];
    int minor;      /* "Device Minor:", -1 if absent */
} proc_gpu;

void reserve_env_from_process(reserve_env *env) {
    env->visible = getenv("NVIDIA_VISIBLE_DEVICES");
    env->devices_dir = RESERVE_DEVICES_DIR;
    env->proc_root = RESERVE_PROC_ROOT;
    env->dev_root = RESERVE_DEV_ROOT;
}

const char *reserve_method_name(int method) {
    switch (method) {
    case RESERVE_ENVVAR: return "envvar";
    case RESERVE_VOLUME_MOUNTS: return "volume-mounts";
    case RESERVE_INDEX_PROC: return "index+proc";
    case RESERVE_DEVICE_NODES: return "cdi-device-nodes";
    case RESERVE_PROC_ONLY: return "proc";
    default: return "none";
    }
}

static void trim(char *s) {
    size_t n = strlen(s), i = 0;
    while (n > 0 && isspace((unsigned char)s[n - 1])) s[--n] = 0;
    while (isspace((unsigned char)s[i])) i++;
    if (i) memmove(s, s + i, n - i + 1);
}

static bool is_uuid(const char *s) { return strncmp(s, "GPU-", 4) == 0 || strncmp(s, "MIG-", 4) == 0; }

/* "3" or, for a MIG device under deviceIDStrategy=index, "3:1". */
static bool is_index(const char *s, bool *mig) {
    const char *p = s;
    *mig = false;
    if (!isdigit((unsigned char)*p)) return false;
    while (isdigit((unsigned char)*p)) p++;
    if (*p == ':') {
        *mig = true;
        p++;
        if (!isdigit((unsigned char)*p)) return false;
        while (isdigit((unsigned char)*p)) p++;
    }
    return *p == 0;
}

static int add_id(id_list *l, const char *s) {
    if (l->n == MAX_IDS) return -1;
    snprintf(l->v[l->n], ID_LEN, "%s", s);
    char *rep = strstr(l->v[l->n], "::"); /* time-slicing replica: "<uuid>::<n>" */
    if (rep) *rep = 0;
    trim(l->v[l->n]);
    if (l->v[l->n][0]) l->n++;
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

/* Names in dir (no dot files), sorted; -1 with errno if dir cannot be read. */
static int list_dir(const char *dir, id_list *out) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    struct dirent *e;
    out->n = 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        if (add_id(out, e->d_name) < 0) break;
    }
    closedir(d);
    qsort(out->v, (size_t)out->n, ID_LEN, cmp_str);
    return out->n;
}

/* Every <proc_root>/gpus/<bus>/information with a "GPU UUID:" line, in bus order; -1 if gpus/
 * cannot be read. */
static int read_proc_gpus(const char *proc_root, proc_gpu *gpus, int max) {
    char path[1024];
    id_list buses;
    snprintf(path, sizeof path, "%s/gpus", proc_root);
    if (list_dir(path, &buses) < 0) return -1;
    int n = 0;
    for (int i = 0; i < buses.n && n < max; i++) {
        snprintf(path, sizeof path, "%s/gpus/%s/information", proc_root, buses.v[i]);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        proc_gpu g = {.minor = -1};
        snprintf(g.bus, sizeof g.bus, "%s", buses.v[i]);
        char line[512];
        while (fgets(line, sizeof line, f)) {
            char *colon = strchr(line, ':');
            if (!colon) continue;
            *colon = 0;
            char *val = colon + 1;
            trim(line);
            trim(val);
            if (strcmp(line, "GPU UUID") == 0) snprintf(g.uuid, sizeof g.uuid, "%s", val);
            else if (strcmp(line, "Device Minor") == 0) g.minor = atoi(val);
        }
        fclose(f);
        if (is_uuid(g.uuid)) gpus[n++] = g;
    }
    return n;
}

/* Minor numbers of the /dev/nvidia<N> nodes present; -1 if dev_root cannot be read. */
static int dev_minors(const char *dev_root, int *minors, int max) {
    id_list names;
    if (list_dir(dev_root, &names) < 0) return -1;
    int n = 0;
    for (int i = 0; i < names.n && n < max; i++) {
        const char *s = names.v[i];
        if (strncmp(s, "nvidia", 6) != 0 || !s[6]) continue;
        bool all_digits = true;
        for (const char *p = s + 6; *p; p++) all_digits = all_digits && isdigit((unsigned char)*p);
        if (all_digits) minors[n++] = atoi(s + 6);
    }
    return n;
}

/* /dev/nvidia-caps/nvidia-cap<N> nodes: only a MIG device's GI/CI access brings them under CDI. */
static int dev_caps(const char *dev_root) {
    char path[1024];
    id_list names;
    snprintf(path, sizeof path, "%s/nvidia-caps", dev_root);
    if (list_dir(path, &names) < 0) return 0;
    int n = 0;
    for (int i = 0; i < names.n; i++) n += strncmp(names.v[i], "nvidia-cap", 10) == 0;
    return n;
}

/* Join ids into out, dropping duplicates. -1 if it does not fit. */
static int join(const id_list *ids, char *out, size_t outlen) {
    size_t len = 0;
    out[0] = 0;
    for (int i = 0; i < ids->n; i++) {
        bool dup = false;
        for (int j = 0; j < i; j++) dup = dup || strcmp(ids->v[i], ids->v[j]) == 0;
        if (dup) continue;
        int w = snprintf(out + len, outlen - len, "%s%s", len ? "," : "", ids->v[i]);
        if (w < 0 || (size_t)w >= outlen - len) return -1;
        len += (size_t)w;
    }
    return 0;
}

static int finish(const id_list *ids, int method, char *out, size_t outlen, char *why, size_t whylen) {
    if (join(ids, out, outlen) < 0) {
        snprintf(why, whylen, "the device list does not fit in %zu bytes", outlen);
        return RESERVE_FAILED;
    }
    return method;
}

/* No device list in the environment (CDI, or no GPU at all): look at /dev and proc. */
static int from_nodes(const reserve_env *env, const char *seen, char *out, size_t outlen, char *why, size_t whylen) {
    proc_gpu gpus[MAX_IDS];
    int minors[MAX_IDS];
    int ngpu = read_proc_gpus(env->proc_root, gpus, MAX_IDS);
    int nmin = dev_minors(env->dev_root, minors, MAX_IDS);
    int caps = dev_caps(env->dev_root);
    id_list ids = {0};
    int method;
    if (ngpu > 0 && nmin > 0) {
        /* CDI: the host's proc lists every GPU; the device nodes say which are ours. */
        for (int i = 0; i < ngpu; i++)
            for (int j = 0; j < nmin; j++)
                if (gpus[i].minor == minors[j]) add_id(&ids, gpus[i].uuid);
        if (ids.n == 0) {
            snprintf(why, whylen, "%s; %s has /dev/nvidia%d but no %s/gpus/*/information gives that Device Minor",
                     seen, env->dev_root, minors[0], env->proc_root);
            return RESERVE_FAILED;
        }
        method = RESERVE_DEVICE_NODES;
    } else if (ngpu > 0 && nmin < 0) {
        /* /dev unreadable: trust proc only as libnvidia-container masks it (gpus/ holds ours alone). */
        for (int i = 0; i < ngpu; i++) add_id(&ids, gpus[i].uuid);
        method = RESERVE_PROC_ONLY;
    } else {
        char procs[300];
        if (ngpu > 0) /* CDI leaves the host's proc in place: those GPUs are not necessarily ours */
            snprintf(procs, sizeof procs, "the %d GPU(s) in %s/gpus are the host's", ngpu, env->proc_root);
        else
            snprintf(procs, sizeof procs, "%s/gpus lists no GPU", env->proc_root);
        snprintf(why, whylen,
                 "no GPU was handed to this container: %s, %s has no nvidia<N> device node and %s; does the pod "
                 "request a GPU resource and does the node run the NVIDIA container runtime or CDI?",
                 seen, env->dev_root, procs);
        return RESERVE_FAILED;
    }
    if (caps > 0) {
        char parent[512];
        if (join(&ids, parent, sizeof parent) < 0) snprintf(parent, sizeof parent, "%s", ids.v[0]);
        snprintf(why, whylen,
                 "%s; a MIG device of GPU %s was injected (%s/nvidia-caps holds its access nodes) but a MIG "
                 "UUID is known only to NVML, so only the parent GPU can be named: run the device plugin with "
                 "deviceListStrategy envvar or volume-mounts and deviceIDStrategy uuid",
                 seen, parent, env->dev_root);
        return RESERVE_FAILED;
    }
    return finish(&ids, method, out, outlen, why, whylen);
}

int reserve_find_devices(const reserve_env *env, char *out, size_t outlen, char *why, size_t whylen) {
    char seen[600];
    id_list ids = {0};
    int method;
    const char *v = env->visible;
    out[0] = 0;
    why[0] = 0;
    if (v) snprintf(seen, sizeof seen, "NVIDIA_VISIBLE_DEVICES=%s", v);
    else snprintf(seen, sizeof seen, "NVIDIA_VISIBLE_DEVICES is not set");

    if (v && (strcmp(v, env->devices_dir) == 0 || strcmp(v, RESERVE_DEVICES_DIR) == 0)) {
        int n = list_dir(env->devices_dir, &ids);
        if (n <= 0) {
            snprintf(why, whylen, "%s (deviceListStrategy volume-mounts) but %s %s", seen, env->devices_dir,
                     n < 0 ? strerror(errno) : "is empty");
            return RESERVE_FAILED;
        }
        method = RESERVE_VOLUME_MOUNTS;
    } else if (v && *v && strcmp(v, "void") != 0 && strcmp(v, "none") != 0 && strcmp(v, "all") != 0) {
        char buf[4096];
        snprintf(buf, sizeof buf, "%s", v);
        for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
            if (add_id(&ids, tok) < 0) break;
        method = RESERVE_ENVVAR;
    } else {
        return from_nodes(env, seen, out, outlen, why, whylen);
    }

    bool any_index = false;
    for (int i = 0; i < ids.n; i++) {
        bool mig = false;
        if (is_uuid(ids.v[i])) continue;
        if (!is_index(ids.v[i], &mig)) {
            snprintf(why, whylen, "%s: \"%s\" is neither a device UUID (GPU-..., MIG-...) nor an index", seen,
                     ids.v[i]);
            return RESERVE_FAILED;
        }
        if (mig) {
            snprintf(why, whylen,
                     "%s: \"%s\" is a MIG device index (deviceIDStrategy index) and a MIG UUID is known only to "
                     "NVML: set deviceIDStrategy=uuid on the device plugin", seen, ids.v[i]);
            return RESERVE_FAILED;
        }
        any_index = true;
    }
    if (ids.n == 0) {
        snprintf(why, whylen, "%s names no device", seen);
        return RESERVE_FAILED;
    }
    if (!any_index) return finish(&ids, method, out, outlen, why, whylen);

    /* Indices: NVML's numbering is not in proc, but the runtime hook's masked proc shows exactly the GPUs
     * it injected, so when it shows as many as we were given, those are ours. */
    proc_gpu gpus[MAX_IDS];
    int ngpu = read_proc_gpus(env->proc_root, gpus, MAX_IDS);
    if (ngpu != ids.n) {
        snprintf(why, whylen,
                 "%s holds device indices (deviceIDStrategy index) and %s/gpus shows %d GPU(s) for %d index(es), "
                 "so they cannot be told apart: set deviceIDStrategy=uuid on the device plugin",
                 seen, env->proc_root, ngpu < 0 ? 0 : ngpu, ids.n);
        return RESERVE_FAILED;
    }
    id_list uuids = {0};
    for (int i = 0; i < ngpu; i++) add_id(&uuids, gpus[i].uuid);
    return finish(&uuids, RESERVE_INDEX_PROC, out, outlen, why, whylen);
}
