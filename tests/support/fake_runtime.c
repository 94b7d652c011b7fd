/* fake_runtime.c -- the fake kubelet's container runtime (fake_runtime.h). */
#include "tests/support/fake_runtime.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define RT_DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" /* a Debian image's */
#define RT_MARKER "FAKE_KUBELET_POD_UID"

static const char *rt_str(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static char *rt_strdup(const char *s) {
    char *d = strdup(s ? s : "");
    if (!d) abort();
    return d;
}

static char *rt_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *rt_printf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0) abort();
    va_end(ap);
    return s;
}

static void rt_mkdir_p(const char *path, mode_t mode) {
    char *tmp = rt_strdup(path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        mkdir(tmp, 0755);
        *p = '/';
    }
    mkdir(tmp, mode);
    free(tmp);
}

/* ---- volumes ------------------------------------------------------------------------------------------------- */

/* The host directory (or file) of volume vol of the pod uid; NULL when the fake does not support its type (why). */
static char *rt_volume_src(const fk_rt_node *n, const char *uid, const cJSON *vol, char *why, size_t len) {
    const char *name = rt_str(vol, "name");
    if (cJSON_GetObjectItemCaseSensitive(vol, "emptyDir"))
        return rt_printf("%s/pods/%s/volumes/kubernetes.io~empty-dir/%s", n->node_root, uid, name);
    if (cJSON_GetObjectItemCaseSensitive(vol, "configMap"))
        return rt_printf("%s/pods/%s/volumes/kubernetes.io~configmap/%s", n->node_root, uid, name);
    const cJSON *hp = cJSON_GetObjectItemCaseSensitive(vol, "hostPath");
    if (hp) return rt_printf("%s%s", n->host_root, rt_str(hp, "path"));
    const cJSON *kind = vol->child;
    while (kind && !strcmp(kind->string, "name")) kind = kind->next;
    snprintf(why, len, "fake kubelet exec mode: volume \"%s\" is of a type it does not play (%s): emptyDir, hostPath "
             "and configMap only", name, kind ? kind->string : "none");
    return NULL;
}

static int rt_hostpath_check(const char *vname, const char *path, const char *type, char *msg, size_t len) {
    struct stat st;
    bool there = stat(path, &st) == 0;
    const char *want = NULL;
    if (!*type || !strcmp(type, "DirectoryOrCreate")) {
        if (!there) rt_mkdir_p(path, 0755);
        return 0;
    }
    if (!strcmp(type, "FileOrCreate")) {
        if (there) return 0;
        char *parent = rt_strdup(path), *slash = strrchr(parent, '/');
        if (slash && slash != parent) *slash = 0, rt_mkdir_p(parent, 0755);
        free(parent);
        int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd >= 0) close(fd);
        return 0;
    }
    if (!strcmp(type, "Directory") && !(there && S_ISDIR(st.st_mode))) want = "a directory";
    else if (!strcmp(type, "File") && !(there && S_ISREG(st.st_mode))) want = "a file";
    else if (!strcmp(type, "Socket") && !(there && S_ISSOCK(st.st_mode))) want = "a socket";
    else if (!strcmp(type, "CharDevice") && !(there && S_ISCHR(st.st_mode))) want = "a character device";
    else if (!strcmp(type, "BlockDevice") && !(there && S_ISBLK(st.st_mode))) want = "a block device";
    if (!want) return 0;
    snprintf(msg, len, "MountVolume.SetUp failed for volume \"%s\" : hostPath type check failed: %s is not %s", vname,
             path, want);
    return -1;
}

static int rt_write_configmap(const char *dir, const cJSON *cmv, const cJSON *data, char *msg, size_t len) {
    rt_mkdir_p(dir, 0755);
    const cJSON *dm = cJSON_GetObjectItemCaseSensitive(cmv, "defaultMode");
    mode_t mode = cJSON_IsNumber(dm) ? (mode_t)dm->valueint : 0644;
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(cmv, "items"), *it;
    const cJSON *kv;
    cJSON_ArrayForEach(kv, data) {
        if (!cJSON_IsString(kv)) continue;
        const char *rel = kv->string;
        mode_t m = mode;
        if (cJSON_GetArraySize(items) > 0) {
            rel = NULL;
            cJSON_ArrayForEach(it, items) {
                if (strcmp(rt_str(it, "key"), kv->string)) continue;
                rel = rt_str(it, "path");
                const cJSON *im = cJSON_GetObjectItemCaseSensitive(it, "mode");
                if (cJSON_IsNumber(im)) m = (mode_t)im->valueint;
            }
            if (!rel) continue;
        }
        char *path = rt_printf("%s/%s", dir, rel);
        char *parent = rt_strdup(path), *slash = strrchr(parent, '/');
        if (slash) *slash = 0, rt_mkdir_p(parent, 0755);
        free(parent);
        FILE *f = fopen(path, "we");
        if (!f) {
            snprintf(msg, len, "cannot write %s: %s", path, strerror(errno));
            free(path);
            return -1;
        }
        fputs(kv->valuestring, f);
        fclose(f);
        chmod(path, m);
        free(path);
    }
    return 0;
}

int fk_rt_pod_setup(const fk_rt_node *n, const cJSON *pod, fk_rt_get_cm get_cm, void *user, char *msg, size_t len) {
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
    const char *uid = rt_str(meta, "uid"), *ns = rt_str(meta, "namespace");
    char *logs = rt_printf("%s/pods/%s/logs", n->node_root, uid);
    rt_mkdir_p(logs, 0755);
    free(logs);
    const cJSON *vol;
    cJSON_ArrayForEach(vol, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "spec"), "volumes")) {
        char why[512];
        char *src = rt_volume_src(n, uid, vol, why, sizeof why);
        if (!src) continue; /* refused when a container mounts it */
        int rc = 0;
        const cJSON *hp = cJSON_GetObjectItemCaseSensitive(vol, "hostPath");
        const cJSON *cmv = cJSON_GetObjectItemCaseSensitive(vol, "configMap");
        if (hp) {
            rc = rt_hostpath_check(rt_str(vol, "name"), src, rt_str(hp, "type"), msg, len);
        } else if (cmv) {
            cJSON *data = get_cm(user, ns, rt_str(cmv, "name"));
            if (!data && !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cmv, "optional"))) {
                snprintf(msg, len, "MountVolume.SetUp failed for volume \"%s\" : configmap \"%s\" not found",
                         rt_str(vol, "name"), rt_str(cmv, "name"));
                rc = -1;
            } else {
                rc = rt_write_configmap(src, cmv, data, msg, len);
            }
            cJSON_Delete(data);
        } else {
            rt_mkdir_p(src, 0777); /* an emptyDir: the kubelet makes it 0777, any uid of the pod writes there */
            chmod(src, 0777);
        }
        free(src);
        if (rc != 0) return -1;
    }
    return 0;
}

/* ---- mounts and paths --------------------------------------------------------------------------------------- */

typedef struct rt_mount { char *path, *src; } rt_mount;

static void rt_mounts_free(rt_mount *m, size_t n) {
    for (size_t i = 0; i < n; i++) free(m[i].path), free(m[i].src);
    free(m);
}

/* A mount inside another's mountPath (the share's state/ and config/ under /opt/tessera): with no mount namespace,
 * the directory at that place in the outer mount's host directory becomes a symlink to the inner mount's source,
 * so that a path a program finds by itself under the outer mount (libtessera-cuda's <libdir>/../state) reaches what
 * is mounted there. Only an empty directory (the mount point, as an init container made it) or a missing one is
 * replaced; the pod's containers mount the same things there, so the symlink is the same for all of them. */
static void rt_nest(const rt_mount *m, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const rt_mount *outer = NULL;
        size_t ol = 0;
        for (size_t j = 0; j < n; j++) {
            size_t l = strlen(m[j].path);
            if (j == i || l <= ol || strncmp(m[i].path, m[j].path, l) || m[i].path[l] != '/') continue;
            outer = &m[j];
            ol = l;
        }
        if (!outer) continue;
        char *at = rt_printf("%s%s", outer->src, m[i].path + ol);
        char target[4096];
        ssize_t tl = readlink(at, target, sizeof target - 1);
        if (tl >= 0) target[tl] = 0;
        if (tl < 0 || strcmp(target, m[i].src)) {
            if (tl >= 0) unlink(at);
            else rmdir(at);   /* fails, and the symlink too, unless it was empty or missing */
            int rc = symlink(m[i].src, at);   /* on failure left as it is: the program sees the outer's */
            (void)rc;
        }
        free(at);
    }
}

/* The container's volumeMounts as (mountPath, host source). NULL with msg for a mount the fake cannot play. */
static rt_mount *rt_mounts(const fk_rt_node *n, const cJSON *pod, const cJSON *ctr, size_t *count, char *msg,
                           size_t len) {
    const char *uid = rt_str(cJSON_GetObjectItemCaseSensitive(pod, "metadata"), "uid");
    const cJSON *vols = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "spec"), "volumes");
    const cJSON *vm_list = cJSON_GetObjectItemCaseSensitive(ctr, "volumeMounts"), *vm, *vol;
    rt_mount *m = calloc((size_t)cJSON_GetArraySize(vm_list) + 1, sizeof *m);
    if (!m) abort();
    *count = 0;
    cJSON_ArrayForEach(vm, vm_list) {
        const char *name = rt_str(vm, "name"), *at = rt_str(vm, "mountPath"), *sub = rt_str(vm, "subPath");
        const cJSON *found = NULL;
        cJSON_ArrayForEach(vol, vols) if (!strcmp(rt_str(vol, "name"), name)) found = vol;
        char *src = NULL;
        if (!found) snprintf(msg, len, "fake kubelet exec mode: volumeMount \"%s\" names no volume of the pod", name);
        else src = rt_volume_src(n, uid, found, msg, len);
        if (!src || !*at || !strcmp(at, "/")) {
            if (src && (!*at || !strcmp(at, "/")))
                snprintf(msg, len, "fake kubelet exec mode: volumeMount \"%s\" at \"%s\" cannot be rewritten", name, at);
            free(src);
            rt_mounts_free(m, *count);
            return NULL;
        }
        if (*sub) {
            char *full = rt_printf("%s/%s", src, sub);
            free(src);
            src = full;
            /* a subPath that is not there is made a directory, as the kubelet does */
            if (access(src, F_OK) != 0) rt_mkdir_p(src, 0755);
        }
        m[*count].path = rt_strdup(at);
        size_t pl = strlen(m[*count].path);
        while (pl > 1 && m[*count].path[pl - 1] == '/') m[*count].path[--pl] = 0;
        m[*count].src = src;
        (*count)++;
    }
    rt_nest(m, *count);
    return m;
}

/* s rewritten through the longest mountPath that is s or a directory above it; NULL when none is. */
static char *rt_rewrite(const rt_mount *m, size_t n, const char *s) {
    const rt_mount *best = NULL;
    size_t best_len = 0;
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(m[i].path);
        if (strncmp(s, m[i].path, l) || (s[l] && s[l] != '/') || l <= best_len) continue;
        best = &m[i];
        best_len = l;
    }
    return best ? rt_printf("%s%s", best->src, s + best_len) : NULL;
}

/* An argument rewritten: the whole of it, or the value of "--flag=VALUE". */
static char *rt_rewrite_arg(const rt_mount *m, size_t n, const char *arg) {
    char *r = rt_rewrite(m, n, arg);
    if (r) return r;
    const char *eq = strchr(arg, '=');
    if (arg[0] == '-' && eq && (r = rt_rewrite(m, n, eq + 1))) {
        char *out = rt_printf("%.*s%s", (int)(eq + 1 - arg), arg, r);
        free(r);
        return out;
    }
    return rt_strdup(arg);
}

char *fk_rt_expand(const char *s, const cJSON *env) {
    size_t cap = strlen(s) + 1, o = 0;
    char *out = malloc(cap);
    if (!out) abort();
    for (const char *p = s; *p;) {
        const char *val = NULL;
        size_t skip = 1, vlen = 0;
        if (p[0] == '$' && p[1] == '$') {
            val = "$";
            vlen = 1;
            skip = 2;
        } else if (p[0] == '$' && p[1] == '(') {
            const char *close = strchr(p + 2, ')');
            if (close) {
                char name[256];
                snprintf(name, sizeof name, "%.*s", (int)(close - p - 2), p + 2);
                const cJSON *v = cJSON_GetObjectItemCaseSensitive(env, name);
                if (cJSON_IsString(v)) {
                    val = v->valuestring;
                    vlen = strlen(val);
                    skip = (size_t)(close - p) + 1;
                }
            }
        }
        if (!val) {
            val = p;
            vlen = 1;
        }
        if (o + vlen + 1 > cap) {
            cap = (o + vlen + 1) * 2;
            out = realloc(out, cap);
            if (!out) abort();
        }
        memcpy(out + o, val, vlen);
        o += vlen;
        p += skip;
    }
    out[o] = 0;
    return out;
}

/* ---- the process -------------------------------------------------------------------------------------------- */

typedef struct rt_vec { char **v; size_t n, cap; } rt_vec;

static void vec_push(rt_vec *a, char *s) {
    if (a->n + 2 > a->cap) {
        a->cap = a->cap ? a->cap * 2 : 16;
        a->v = realloc(a->v, a->cap * sizeof *a->v);
        if (!a->v) abort();
    }
    a->v[a->n++] = s;
    a->v[a->n] = NULL;
}

static void vec_free(rt_vec *a) {
    for (size_t i = 0; i < a->n; i++) free(a->v[i]);
    free(a->v);
}

/* NVIDIA_DRIVER_CAPABILITIES names compute (unset: the toolkit's default, utility,compute). */
static bool rt_has_compute(const char *caps) {
    if (!caps) return true;
    char *copy = rt_strdup(caps), *save = NULL;
    bool yes = false;
    for (char *t = strtok_r(copy, ",", &save); t && !yes; t = strtok_r(NULL, ",", &save))
        yes = !strcmp(t, "compute") || !strcmp(t, "all");
    free(copy);
    return yes;
}

static long long rt_run_as(const cJSON *pod, const cJSON *ctr) {
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(ctr, "securityContext"),
                                                      "runAsUser");
    if (!cJSON_IsNumber(u))
        u = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "spec"), "securityContext"),
            "runAsUser");
    return cJSON_IsNumber(u) ? (long long)u->valuedouble : 0;
}

/* The executable for command[0]: the image's program table, a path under a mount, a host path, or PATH. */
static char *rt_resolve(const fk_rt_prog *progs, size_t nprogs, const rt_mount *m, size_t nm, const char *cmd0,
                        const char *path_env, const fk_rt_prog **prog) {
    *prog = NULL;
    for (size_t i = 0; i < nprogs; i++)
        if (!strcmp(progs[i].image_path, cmd0)) {
            *prog = &progs[i];
            return rt_strdup(progs[i].host_path);
        }
    if (strchr(cmd0, '/')) {
        char *r = rt_rewrite(m, nm, cmd0);
        return r ? r : rt_strdup(cmd0);
    }
    char *dirs = rt_strdup(path_env), *save = NULL;
    char *found = NULL;
    for (char *d = strtok_r(dirs, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
        char *cand = rt_printf("%s/%s", d, cmd0);
        if (access(cand, X_OK) == 0) found = cand;
        else free(cand);
    }
    free(dirs);
    return found;
}

static void rt_env_put(rt_vec *envp, const char *name, const char *value) {
    size_t nl = strlen(name);
    for (size_t i = 0; i < envp->n; i++)
        if (!strncmp(envp->v[i], name, nl) && envp->v[i][nl] == '=') {
            free(envp->v[i]);
            envp->v[i] = rt_printf("%s=%s", name, value);
            return;
        }
    vec_push(envp, rt_printf("%s=%s", name, value));
}

static const char *rt_env_get(const rt_vec *envp, const char *name) {
    size_t nl = strlen(name);
    for (size_t i = 0; i < envp->n; i++)
        if (!strncmp(envp->v[i], name, nl) && envp->v[i][nl] == '=') return envp->v[i] + nl + 1;
    return NULL;
}

/* /etc/ld.so.preload mounted: its entries, rewritten, for LD_PRELOAD. 0, or -1 with msg (a directory there). */
static int rt_preload(const rt_mount *m, size_t nm, rt_vec *envp, char *msg, size_t len) {
    for (size_t i = 0; i < nm; i++) {
        if (strcmp(m[i].path, "/etc/ld.so.preload")) continue;
        struct stat st;
        if (stat(m[i].src, &st) == 0 && S_ISDIR(st.st_mode)) {
            snprintf(msg, len, "failed to create containerd task: failed to create shim task: OCI runtime create "
                     "failed: runc create failed: unable to start container process: error mounting \"%s\" to rootfs "
                     "at \"/etc/ld.so.preload\": not a directory: unknown", m[i].src);
            return -1;
        }
        FILE *f = fopen(m[i].src, "re");
        char buf[4096];
        size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        if (f) fclose(f);
        buf[n] = 0;
        char *list = rt_strdup(rt_env_get(envp, "LD_PRELOAD")), *save = NULL;
        for (char *t = strtok_r(buf, " \t\n:", &save); t; t = strtok_r(NULL, " \t\n:", &save)) {
            char *r = rt_rewrite(m, nm, t);
            char *joined = rt_printf("%s%s%s", list, *list ? " " : "", r ? r : t);
            free(r);
            free(list);
            list = joined;
        }
        if (*list) rt_env_put(envp, "LD_PRELOAD", list);
        free(list);
    }
    return 0;
}

static void rt_start_error(const char *cmd0, const char *what, char *msg, size_t len) {
    snprintf(msg, len, "failed to create containerd task: failed to create shim task: OCI runtime create failed: runc "
             "create failed: unable to start container process: exec: \"%s\": %s: unknown", cmd0, what);
}

pid_t fk_rt_start(const fk_rt_node *n, const fk_rt_prog *progs, size_t nprogs, const cJSON *pod, const cJSON *ctr,
                  const cJSON *env, const char *marker, char *msg, size_t len) {
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(pod, "metadata");
    const char *uid = rt_str(meta, "uid"), *cname = rt_str(ctr, "name");
    size_t nm = 0;
    rt_mount *m = rt_mounts(n, pod, ctr, &nm, msg, len);
    if (!m) return -1;
    rt_vec argv = {0}, envp = {0};
    pid_t pid = -1;
    char *exe = NULL, *cwd = NULL, *out_path = NULL, *err_path = NULL;

    /* environment: the pod's marker first (kept by children that copy the environment, read in 64 KiB by
     * fk_rt_kill_pod), the kubelet's, values under a mount rewritten, then the stand-ins */
    vec_push(&envp, rt_printf(RT_MARKER "=%s", marker));
    const cJSON *kv;
    cJSON_ArrayForEach(kv, env) {
        if (!cJSON_IsString(kv)) continue;
        char *r = rt_rewrite(m, nm, kv->valuestring);
        vec_push(&envp, rt_printf("%s=%s", kv->string, r ? r : kv->valuestring));
        free(r);
    }
    if (!rt_env_get(&envp, "HOSTNAME")) rt_env_put(&envp, "HOSTNAME", rt_str(meta, "name"));
    if (!rt_env_get(&envp, "PATH")) rt_env_put(&envp, "PATH", RT_DEFAULT_PATH);
    const char *vis = rt_env_get(&envp, "NVIDIA_VISIBLE_DEVICES");
    bool inject = n->fake_cuda_dir[0] && vis && *vis && strcmp(vis, "void") && strcmp(vis, "none");
    if (inject && rt_has_compute(rt_env_get(&envp, "NVIDIA_DRIVER_CAPABILITIES"))) {
        char *p = rt_printf("%s/bin:%s", n->fake_cuda_dir, rt_env_get(&envp, "PATH"));
        rt_env_put(&envp, "PATH", p);
        free(p);
        const char *old = rt_env_get(&envp, "LD_LIBRARY_PATH");
        char *l = rt_printf("%s%s%s", n->fake_cuda_dir, old && *old ? ":" : "", old && *old ? old : "");
        rt_env_put(&envp, "LD_LIBRARY_PATH", l);
        free(l);
    }
    if (inject) {
        rt_env_put(&envp, "FAKE_CUDA_DEVICES", n->cuda_devices);
        rt_env_put(&envp, "FAKE_CUDA_STATE", n->cuda_state);
    }
    char uidbuf[32];
    snprintf(uidbuf, sizeof uidbuf, "%lld", rt_run_as(pod, ctr));
    rt_env_put(&envp, "FAKE_CUDA_UID", uidbuf);
    static const char *const pass[] = {"ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"};
    for (size_t i = 0; i < sizeof pass / sizeof *pass; i++)
        if (getenv(pass[i]) && !rt_env_get(&envp, pass[i])) rt_env_put(&envp, pass[i], getenv(pass[i]));
    if (rt_preload(m, nm, &envp, msg, len) != 0) goto out;

    /* command and args, $(VAR) expanded from the container's environment, paths under a mount rewritten */
    const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(ctr, "command"), *args = cJSON_GetObjectItemCaseSensitive(ctr, "args");
    if (cJSON_GetArraySize(cmd) == 0) {
        snprintf(msg, len, "fake kubelet exec mode: container \"%s\" has no command, and the fake knows no image's "
                 "ENTRYPOINT", cname);
        goto out;
    }
    const cJSON *a;
    int i = 0;
    const fk_rt_prog *prog = NULL;
    for (const cJSON *list = cmd; list; list = list == cmd ? args : NULL) {
        cJSON_ArrayForEach(a, list) {
            if (!cJSON_IsString(a)) continue;
            char *x = fk_rt_expand(a->valuestring, env);
            if (i++ == 0) {
                exe = rt_resolve(progs, nprogs, m, nm, x, rt_env_get(&envp, "PATH"), &prog);
                vec_push(&argv, x);
                if (!exe) {
                    rt_start_error(x, "executable file not found in $PATH", msg, len);
                    goto out;
                }
                continue;
            }
            vec_push(&argv, rt_rewrite_arg(m, nm, x));
            free(x);
        }
    }
    for (char **e = prog ? prog->extra_args : NULL; e && *e; e++) vec_push(&argv, rt_strdup(*e));

    const char *wd = rt_str(ctr, "workingDir");
    cwd = *wd ? rt_rewrite(m, nm, wd) : NULL;
    if (!cwd) cwd = rt_printf("%s/pods/%s", n->node_root, uid);
    out_path = rt_printf("%s/pods/%s/logs/%s.stdout", n->node_root, uid, cname);
    err_path = rt_printf("%s/pods/%s/logs/%s.stderr", n->node_root, uid, cname);
    int o = open(out_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    int e = open(err_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
    int ep[2] = {-1, -1};
    if (o < 0 || e < 0 || nul < 0 || pipe2(ep, O_CLOEXEC) != 0) {
        snprintf(msg, len, "fake kubelet exec mode: cannot open %s: %s", err_path, strerror(errno));
    } else {
        pid_t parent = getpid();
        pid = fork();
        if (pid == 0) {
            /* async-signal-safe calls only until exec: the test process has threads */
            setpgid(0, 0);
            prctl(PR_SET_PDEATHSIG, SIGKILL); /* the kubelet thread (the forking thread) goes: so does this */
            if (getppid() != parent) _exit(1);
            dup2(nul, 0);
            dup2(o, 1);
            dup2(e, 2);
            dup3(ep[1], 3, O_CLOEXEC);
            if (close_range(4, ~0U, 0) != 0) /* never hold the tests' sockets and pipes (ENOSYS before Linux 5.9) */
                for (int fd = 4; fd < 4096; fd++) close(fd);
            struct sigaction dfl = {.sa_handler = SIG_DFL};
            for (int s = 1; s < 32; s++)
                if (s != SIGKILL && s != SIGSTOP) sigaction(s, &dfl, NULL);
            sigset_t none;
            sigemptyset(&none);
            sigprocmask(SIG_SETMASK, &none, NULL);
            if (chdir(cwd) != 0) {}
            execve(exe, argv.v, envp.v);
            int err = errno;
            if (write(3, &err, sizeof err) != (ssize_t)sizeof err) {}
            _exit(127);
        }
        close(ep[1]);
        ep[1] = -1;
        int err = 0;
        ssize_t r = pid > 0 ? read(ep[0], &err, sizeof err) : 0;
        if (pid < 0) {
            snprintf(msg, len, "fake kubelet exec mode: fork: %s", strerror(errno));
        } else if (r == (ssize_t)sizeof err) {
            char what[600];
            snprintf(what, sizeof what, "stat %s: %s", exe, err == ENOENT ? "no such file or directory" : strerror(err));
            rt_start_error(argv.v[0], what, msg, len);
            while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {} /* it has written and exits */
            pid = -1;
        }
    }
    if (o >= 0) close(o);
    if (e >= 0) close(e);
    if (nul >= 0) close(nul);
    if (ep[0] >= 0) close(ep[0]);
    if (ep[1] >= 0) close(ep[1]);
out:
    free(exe);
    free(cwd);
    free(out_path);
    free(err_path);
    vec_free(&argv);
    vec_free(&envp);
    rt_mounts_free(m, nm);
    return pid;
}

void fk_rt_log_path(const fk_rt_node *n, const char *uid, const char *container, int stream, char *buf, size_t len) {
    snprintf(buf, len, "%s/pods/%s/logs/%s.%s", n->node_root, uid, container, stream == 2 ? "stderr" : "stdout");
}

void fk_rt_kill_pod(const char *marker) {
    char want[300];
    int wl = snprintf(want, sizeof want, RT_MARKER "=%s", marker);
    DIR *d = opendir("/proc");
    char *buf = malloc(65536);
    if (!d || !buf || wl <= 0 || (size_t)wl >= sizeof want) {
        if (d) closedir(d);
        free(buf);
        return;
    }
    struct dirent *de;
    pid_t self = getpid();
    while ((de = readdir(d))) {
        if (!isdigit((unsigned char)de->d_name[0])) continue;
        pid_t pid = (pid_t)atoi(de->d_name);
        if (pid == self) continue;
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        ssize_t n = read(fd, buf, 65535);
        close(fd);
        for (ssize_t off = 0; n > 0 && off < n;) {
            const char *var = buf + off;
            size_t vl = strnlen(var, (size_t)(n - off));
            if (vl == (size_t)wl && !memcmp(var, want, vl)) {
                kill(pid, SIGKILL);
                break;
            }
            off += (ssize_t)vl + 1;
        }
    }
    closedir(d);
    free(buf);
}
