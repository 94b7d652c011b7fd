/* deployed.c -- deploy/'s manifests read and run (deployed.h). */
#include "tests/support/deployed.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "extender/base64.h"
#include "tests/support/http_client.h"
#include "tests/support/json_patch.h"
#include "tests/support/wait.h"
#include "tests/support/yaml_json.h"

#define EXTENDER_CONTAINER "tessera-extender"
#define AGENT_CONTAINER "tessera-node-agent"

static const cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }
static const char *str(const cJSON *o, const char *k) {
    const cJSON *v = get(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* "15s", "2m", "500ms" -> ms; -1 if not a duration. */
static int duration_ms(const char *s) {
    if (!s) return -1;
    char *end;
    double v = strtod(s, &end);
    if (end == s) return -1;
    double mul = !strcmp(end, "ms") ? 1 : !strcmp(end, "s") ? 1000 : !strcmp(end, "m") ? 60000 : -1;
    return mul < 0 ? -1 : (int)(v * mul + 0.5);
}

/* kustomize's images: transformer on one container: the name before any tag or digest selects the entry. */
static void map_image(cJSON *ctr, const cJSON *images) {
    const char *img = str(ctr, "image");
    if (!img) return;
    char name[256];
    snprintf(name, sizeof name, "%s", img);
    char *at = strchr(name, '@'), *slash = strrchr(name, '/'), *colon = strrchr(name, ':');
    if (at) *at = 0;
    else if (colon && (!slash || colon > slash)) *colon = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, images) {
        if (!str(e, "name") || strcmp(str(e, "name"), name) != 0) continue;
        char out[512];
        const char *nn = str(e, "newName") ? str(e, "newName") : name, *tag = str(e, "newTag"), *dig = str(e, "digest");
        if (dig) snprintf(out, sizeof out, "%s@%s", nn, dig);
        else if (tag) snprintf(out, sizeof out, "%s:%s", nn, tag);
        else snprintf(out, sizeof out, "%s%s", nn, img + strlen(name));
        cJSON_ReplaceItemInObjectCaseSensitive(ctr, "image", cJSON_CreateString(out));
    }
}

/* The container named name in the pod spec: initContainers first (a native sidecar), then containers. */
static const cJSON *container(const cJSON *spec, const char *name) {
    static const char *const lists[2] = {"initContainers", "containers"};
    for (int l = 0; l < 2; l++) {
        const cJSON *c;
        cJSON_ArrayForEach(c, get(spec, lists[l]))
            if (str(c, "name") && !strcmp(str(c, "name"), name)) return c;
    }
    return NULL;
}

static int read_sched_config(deployed *d, char *err, size_t errlen) {
    const cJSON *o, *cfg = NULL;
    cJSON_ArrayForEach(o, d->objects) {
        const char *text = str(get(o, "data"), "scheduler-config.yaml");
        if (str(o, "kind") && !strcmp(str(o, "kind"), "ConfigMap") && text) {
            cJSON *docs = yaml_json_parse_all(text, strlen(text), err, errlen);
            if (!docs) return -1;
            d->sched_config = cJSON_DetachItemFromArray(docs, 0);
            cJSON_Delete(docs);
            cfg = d->sched_config;
        }
    }
    if (!cfg) { snprintf(err, errlen, "no ConfigMap with scheduler-config.yaml"); return -1; }
    const cJSON *prof = cJSON_GetArrayItem(get(cfg, "profiles"), 0), *le = get(cfg, "leaderElection");
    const cJSON *ext = cJSON_GetArrayItem(get(prof, "extenders") ? get(prof, "extenders") : get(cfg, "extenders"), 0);
    if (!prof || !le || !ext) { snprintf(err, errlen, "scheduler config: no profile, leaderElection or extender"); return -1; }
    snprintf(d->scheduler_name, sizeof d->scheduler_name, "%s", str(prof, "schedulerName") ? str(prof, "schedulerName") : "");
    snprintf(d->lease_ns, sizeof d->lease_ns, "%s", str(le, "resourceNamespace") ? str(le, "resourceNamespace") : "");
    snprintf(d->lease_name, sizeof d->lease_name, "%s", str(le, "resourceName") ? str(le, "resourceName") : "");
    d->lease_ms = duration_ms(str(le, "leaseDuration"));
    d->renew_ms = duration_ms(str(le, "renewDeadline"));
    d->retry_ms = duration_ms(str(le, "retryPeriod"));
    const char *url = str(ext, "urlPrefix"), *path = url ? strstr(url, "://") : NULL;
    path = path ? strchr(path + 3, '/') : NULL;
    snprintf(d->url_path, sizeof d->url_path, "%s", path ? path : "");
    snprintf(d->filter_verb, sizeof d->filter_verb, "%s", str(ext, "filterVerb") ? str(ext, "filterVerb") : "");
    snprintf(d->prioritize_verb, sizeof d->prioritize_verb, "%s", str(ext, "prioritizeVerb") ? str(ext, "prioritizeVerb") : "");
    snprintf(d->bind_verb, sizeof d->bind_verb, "%s", str(ext, "bindVerb") ? str(ext, "bindVerb") : "");
    snprintf(d->preempt_verb, sizeof d->preempt_verb, "%s", str(ext, "preemptVerb") ? str(ext, "preemptVerb") : "");
    d->node_cache_capable = cJSON_IsTrue(get(ext, "nodeCacheCapable"));
    const cJSON *m;
    cJSON_ArrayForEach(m, get(ext, "managedResources"))
        if (str(m, "name") && d->nmanaged < 64) snprintf(d->managed[d->nmanaged++], sizeof d->managed[0], "%s", str(m, "name"));
    if (!d->scheduler_name[0] || !d->lease_name[0] || d->lease_ms <= 0 || d->renew_ms <= 0 || d->retry_ms <= 0 ||
        !d->url_path[0] || !d->filter_verb[0] || !d->bind_verb[0]) {
        snprintf(err, errlen, "scheduler config: schedulerName, leaderElection or the extender's urlPrefix/verbs missing");
        return -1;
    }
    return 0;
}

/* Every object of the resources the kustomization (or component) in dir lists, appended to out. 0, or -1. */
static int load_resources(const char *dir, const cJSON *kust, cJSON *out, char *err, size_t errlen) {
    const cJSON *res;
    cJSON_ArrayForEach(res, get(kust, "resources")) {
        if (!cJSON_IsString(res)) continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, res->valuestring);
        cJSON *docs = yaml_json_load_all(path, err, errlen);
        if (!docs) return -1;
        while (cJSON_GetArraySize(docs) > 0) cJSON_AddItemToArray(out, cJSON_DetachItemFromArray(docs, 0));
        cJSON_Delete(docs);
    }
    return 0;
}

deployed *deployed_load(const char *dir, char *err, size_t errlen) {
    return deployed_load_components(dir, NULL, err, errlen);
}

deployed *deployed_load_components(const char *dir, const char *const *components, char *err, size_t errlen) {
    char path[1100];
    snprintf(path, sizeof path, "%s/kustomization.yaml", dir);
    cJSON *kdocs = yaml_json_load_all(path, err, errlen);
    if (!kdocs) return NULL;
    const cJSON *kust = cJSON_GetArrayItem(kdocs, 0);
    deployed *d = calloc(1, sizeof *d);
    d->objects = cJSON_CreateArray();
    int rc = load_resources(dir, kust, d->objects, err, errlen);
    /* the components the test enables, then those kustomization.yaml enables itself */
    const cJSON *listed = get(kust, "components"), *cj;
    for (int pass = 0; pass < 2 && rc == 0; pass++) {
        for (int i = 0; rc == 0; i++) {
            const char *comp = NULL;
            if (pass == 0) comp = components ? components[i] : NULL;
            else comp = (cj = cJSON_GetArrayItem(listed, i)) && cJSON_IsString(cj) ? cj->valuestring : NULL;
            if (!comp) break;
            char cdir[512];
            snprintf(cdir, sizeof cdir, "%s/%s", dir, comp);
            snprintf(path, sizeof path, "%s/kustomization.yaml", cdir);
            cJSON *cdocs = yaml_json_load_all(path, err, errlen);
            rc = cdocs ? load_resources(cdir, cJSON_GetArrayItem(cdocs, 0), d->objects, err, errlen) : -1;
            cJSON_Delete(cdocs);
        }
    }
    if (rc != 0) { cJSON_Delete(kdocs); deployed_free(d); return NULL; }
    cJSON *o;
    cJSON_ArrayForEach(o, d->objects) {
        const cJSON *spec = get(get(get(o, "spec"), "template"), "spec");
        if (!spec) continue;
        static const char *const lists[2] = {"initContainers", "containers"};
        for (int l = 0; l < 2; l++) {
            cJSON *c;
            cJSON_ArrayForEach(c, get(spec, lists[l])) map_image(c, get(kust, "images"));
        }
        if (container(spec, AGENT_CONTAINER) && str(o, "kind") && !strcmp(str(o, "kind"), "DaemonSet")) d->node_agent = o;
        const cJSON *ext = container(spec, EXTENDER_CONTAINER);
        if (ext && str(o, "kind") && !strcmp(str(o, "kind"), "Deployment")) {
            d->deployment = o;
            snprintf(d->ns, sizeof d->ns, "%s", str(get(o, "metadata"), "namespace") ? str(get(o, "metadata"), "namespace") : "default");
            snprintf(d->extender_image, sizeof d->extender_image, "%s", str(ext, "image") ? str(ext, "image") : "");
        }
    }
    cJSON_Delete(kdocs);
    if (!d->deployment) {
        snprintf(err, errlen, "%s: no Deployment with a container named " EXTENDER_CONTAINER, dir);
        deployed_free(d);
        return NULL;
    }
    if (read_sched_config(d, err, errlen) != 0) { deployed_free(d); return NULL; }
    return d;
}

void deployed_free(deployed *d) {
    if (!d) return;
    cJSON_Delete(d->objects);
    cJSON_Delete(d->sched_config);
    free(d);
}

void deployed_apply(const deployed *d, fake_api *api) {
    const cJSON *o;
    cJSON_ArrayForEach(o, d->objects) {
        const char *kind = str(o, "kind");
        const char *plural = !kind ? NULL : !strcmp(kind, "ConfigMap") ? "configmaps"
                           : !strcmp(kind, "MutatingWebhookConfiguration") ? "mutatingwebhookconfigurations" : NULL;
        if (!plural) continue;   /* the fake serves no other kind of these */
        char *s = cJSON_PrintUnformatted(o);
        fake_api_put(api, plural, s);
        free(s);
    }
}

static cJSON *running_status(const char *name, const char *image) {
    cJSON *s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "name", name);
    cJSON_AddStringToObject(s, "image", image ? image : "");
    cJSON_AddBoolToObject(s, "ready", true);
    cJSON_AddBoolToObject(s, "started", true);
    cJSON_AddNumberToObject(s, "restartCount", 0);
    cJSON_AddStringToObject(cJSON_AddObjectToObject(cJSON_AddObjectToObject(s, "state"), "running"), "startedAt",
                            "2026-01-01T00:00:00Z");
    return s;
}

/* The Pod the workload's controller (owner_kind: a Deployment's ReplicaSet, a DaemonSet itself) makes. */
static cJSON *template_pod(const cJSON *workload, const char *owner_kind, const char *ns, const char *pod_name,
                           const char *node) {
    const cJSON *tmpl = get(get(workload, "spec"), "template");
    cJSON *pod = cJSON_CreateObject();
    cJSON_AddStringToObject(pod, "apiVersion", "v1");
    cJSON_AddStringToObject(pod, "kind", "Pod");
    cJSON *meta = cJSON_AddObjectToObject(pod, "metadata");
    char uid[160];
    snprintf(uid, sizeof uid, "uid-%s", pod_name);
    cJSON_AddStringToObject(meta, "name", pod_name);
    cJSON_AddStringToObject(meta, "namespace", ns);
    cJSON_AddStringToObject(meta, "uid", uid);
    const cJSON *labels = get(get(tmpl, "metadata"), "labels");
    if (labels) cJSON_AddItemToObject(meta, "labels", cJSON_Duplicate(labels, 1));
    cJSON *owner = cJSON_CreateObject();
    cJSON_AddStringToObject(owner, "apiVersion", "apps/v1");
    cJSON_AddStringToObject(owner, "kind", owner_kind);
    cJSON_AddStringToObject(owner, "name", str(get(workload, "metadata"), "name"));
    cJSON_AddBoolToObject(owner, "controller", true);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(meta, "ownerReferences"), owner);
    cJSON *spec = cJSON_Duplicate(get(tmpl, "spec"), 1);
    cJSON_DeleteItemFromObjectCaseSensitive(spec, "nodeName");
    cJSON_AddStringToObject(spec, "nodeName", node);
    cJSON_AddItemToObject(pod, "spec", spec);
    cJSON *st = cJSON_AddObjectToObject(pod, "status");
    cJSON_AddStringToObject(st, "phase", "Running");
    cJSON_AddStringToObject(st, "podIP", "127.0.0.1");
    cJSON *ics = cJSON_AddArrayToObject(st, "initContainerStatuses"), *cs = cJSON_AddArrayToObject(st, "containerStatuses");
    const cJSON *c;
    cJSON_ArrayForEach(c, get(spec, "initContainers")) {
        if (str(c, "restartPolicy") && !strcmp(str(c, "restartPolicy"), "Always")) {
            cJSON_AddItemToArray(ics, running_status(str(c, "name"), str(c, "image")));
        } else {   /* an ordinary init container ran to completion before the app containers started */
            cJSON *s = cJSON_CreateObject();
            cJSON_AddStringToObject(s, "name", str(c, "name") ? str(c, "name") : "");
            cJSON *t = cJSON_AddObjectToObject(cJSON_AddObjectToObject(s, "state"), "terminated");
            cJSON_AddStringToObject(t, "reason", "Completed");
            cJSON_AddNumberToObject(t, "exitCode", 0);
            cJSON_AddItemToArray(ics, s);
        }
    }
    cJSON_ArrayForEach(c, get(spec, "containers")) cJSON_AddItemToArray(cs, running_status(str(c, "name"), str(c, "image")));
    return pod;
}

cJSON *deployed_pod(const deployed *d, const char *pod_name, const char *node) {
    return template_pod(d->deployment, "ReplicaSet", d->ns, pod_name, node);
}

/* ---- the extender process ---------------------------------------------------------------------------- */

static bool is_listen_flag(const char *flag) {
    size_t n = strlen(flag);
    return !strncmp(flag, "--", 2) && n >= 8 && !strcmp(flag + n - 6, "listen");
}

/* The container's args, rewritten as deployed.h says. Returns argc, or -1 with err. */
static int build_argv(const cJSON *ctr, const char *bin, const char *api_url, char **argv, int max, char *err,
                      size_t errlen) {
    const cJSON *cmd = get(ctr, "command"), *a;
    if (cJSON_GetArraySize(cmd) > 1 || (cJSON_GetArraySize(cmd) == 1 &&
        strcmp(cJSON_GetArrayItem(cmd, 0)->valuestring, "/usr/local/bin/tessera-extender") != 0)) {
        snprintf(err, errlen, "the tessera-extender container has a command the harness does not know how to run");
        return -1;
    }
    int n = 0;
    argv[n++] = strdup(bin);
    bool next_is_listen = false;
    cJSON_ArrayForEach(a, get(ctr, "args")) {
        if (n >= max - 3) {
            snprintf(err, errlen, "the tessera-extender container has more arguments than the harness takes (%d)", max - 3);
            for (int i = 0; i < n; i++) free(argv[i]);
            argv[0] = NULL;
            return -1;
        }
        const char *s = cJSON_IsString(a) ? a->valuestring : "";
        const char *eq = strchr(s, '=');
        char flag[128] = "";
        if (eq && (size_t)(eq - s) < sizeof flag) memcpy(flag, s, (size_t)(eq - s));
        if (next_is_listen) {
            argv[n++] = strdup(s[0] ? "127.0.0.1:0" : "");
            next_is_listen = false;
        } else if (eq && is_listen_flag(flag)) {
            char buf[160];
            snprintf(buf, sizeof buf, "%s=%s", flag, eq[1] ? "127.0.0.1:0" : "");
            argv[n++] = strdup(buf);
        } else {
            next_is_listen = !eq && is_listen_flag(s);
            argv[n++] = strdup(s);
        }
    }
    argv[n++] = strdup("--kube-api");
    argv[n++] = strdup(api_url);
    argv[n] = NULL;
    return n;
}

static int build_envp(const cJSON *ctr, const cJSON *pod, char **envp, int max, char *err, size_t errlen) {
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, get(ctr, "env")) {
        if (n >= max - 4) {
            snprintf(err, errlen, "the tessera-extender container has more variables than the harness takes (%d)", max - 4);
            for (int i = 0; i < n; i++) free(envp[i]);
            envp[0] = NULL;
            return -1;
        }
        const char *name = str(e, "name"), *value = str(e, "value");
        const cJSON *vf = get(e, "valueFrom");
        const char *fp = str(get(vf, "fieldRef"), "fieldPath");
        char buf[512];
        if (value) {
            snprintf(buf, sizeof buf, "%s=%s", name, value);
        } else if (fp && !strcmp(fp, "metadata.name")) {
            snprintf(buf, sizeof buf, "%s=%s", name, str(get(pod, "metadata"), "name"));
        } else if (fp && !strcmp(fp, "metadata.namespace")) {
            snprintf(buf, sizeof buf, "%s=%s", name, str(get(pod, "metadata"), "namespace"));
        } else if (fp && !strcmp(fp, "spec.nodeName")) {
            snprintf(buf, sizeof buf, "%s=%s", name, str(get(pod, "spec"), "nodeName"));
        } else if (fp && !strcmp(fp, "status.podIP")) {
            snprintf(buf, sizeof buf, "%s=127.0.0.1", name);
        } else {
            snprintf(err, errlen, "env %s: a source the harness does not provide", name ? name : "?");
            return -1;
        }
        envp[n++] = strdup(buf);
    }
    static const char *const pass[] = {"ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"};
    for (size_t i = 0; i < sizeof pass / sizeof pass[0] && n < max - 1; i++) {
        const char *v = getenv(pass[i]);
        if (!v) continue;
        char buf[1024];
        snprintf(buf, sizeof buf, "%s=%s", pass[i], v);
        envp[n++] = strdup(buf);
    }
    envp[n] = NULL;
    return n;
}

/* fork and exec bin (stderr into the returned stream, stdout to /dev/null); NULL with err. */
static FILE *spawn(const char *bin, char **argv, char **envp, pid_t *pid, char *err, size_t errlen) {
    int fds[2] = {-1, -1};
    *pid = -1;
    if (pipe(fds) == 0) {
        *pid = fork();
        if (*pid == 0) {
            /* a test that fails returns early and never stops what it started: the process goes with the tests
             * (tests run one after another on the main thread, the one that forks) */
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            dup2(fds[1], 2);
            close(fds[0]);
            close(fds[1]);
            int null = open("/dev/null", O_WRONLY);
            if (null >= 0) dup2(null, 1);
            execve(bin, argv, envp);
            _exit(127);
        }
        close(fds[1]);
    }
    if (fds[0] < 0 || *pid <= 0) {
        snprintf(err, errlen, "cannot start %s: %s", bin, strerror(errno));
        if (fds[0] >= 0) close(fds[0]);
        return NULL;
    }
    return fdopen(fds[0], "r");
}

struct deployed_log {
    pthread_mutex_t mu;
    FILE *f;                   /* the process's stderr, read by drain */
    char *text;
    size_t len, cap;
};

static void log_keep(struct deployed_log *l, const char *line) {
    size_t n = strlen(line);
    pthread_mutex_lock(&l->mu);
    if (l->len + n + 1 > l->cap) {
        size_t c = l->cap ? 2 * l->cap : 65536;
        while (c < l->len + n + 1) c *= 2;
        char *t = realloc(l->text, c);
        if (t) l->text = t, l->cap = c;
    }
    if (l->len + n + 1 <= l->cap) {
        memcpy(l->text + l->len, line, n + 1);
        l->len += n;
    }
    pthread_mutex_unlock(&l->mu);
}

static void *drain(void *arg) {
    struct deployed_log *l = arg;
    char line[2048];
    while (fgets(line, sizeof line, l->f)) {
        if (getenv("EXT_TEST_LOG")) fputs(line, stderr);
        log_keep(l, line);
    }
    fclose(l->f);
    return NULL;
}

/* Keep reading the process's stderr (f) on a thread until it exits: the log, or NULL with err (the process is
 * killed then: nothing would read what it writes). */
static struct deployed_log *log_follow(FILE *f, pid_t pid, pthread_t *thread, char *err, size_t errlen) {
    struct deployed_log *l = calloc(1, sizeof *l);
    if (!l) {
        fclose(f);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&l->mu, NULL);
    l->f = f;
    pthread_create(thread, NULL, drain, l);
    return l;
}

/* Send sig, reap the process and its log reader, free the log: the exit status (128 + signal when killed). */
static int log_unfollow(pid_t pid, int sig, pthread_t thread, struct deployed_log **l) {
    kill(pid, sig);
    int st = 0;
    waitpid(pid, &st, 0);
    pthread_join(thread, NULL);
    pthread_mutex_destroy(&(*l)->mu);
    free((*l)->text);
    free(*l);
    *l = NULL;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int deployed_replica_log_count(deployed_replica *r, const char *a, const char *b) {
    if (!r->log) return 0;
    int n = 0;
    pthread_mutex_lock(&r->log->mu);
    for (const char *l = r->log->text; l && l < r->log->text + r->log->len;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        char *line = strndup(l, len);
        if (line && strstr(line, a) && (!b || strstr(line, b))) n++;
        free(line);
        l += len + 1;
    }
    pthread_mutex_unlock(&r->log->mu);
    return n;
}

int deployed_replica_start(const deployed *d, fake_api *api, const char *bin, const char *pod_name, const char *node,
                           deployed_replica *r, char *err, size_t errlen) {
    cJSON *pod = deployed_pod(d, pod_name, node);
    int rc = deployed_replica_start_as(d, api, bin, pod, r, err, errlen);
    cJSON_Delete(pod);
    return rc;
}

int deployed_replica_start_as(const deployed *d, fake_api *api, const char *bin, const cJSON *shown,
                              deployed_replica *r, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    snprintf(r->pod_name, sizeof r->pod_name, "%s", str(get(shown, "metadata"), "name"));
    char *pj = cJSON_PrintUnformatted(shown);
    fake_api_put(api, "pods", pj);
    free(pj);
    /* the process is what the Deployment's container says, whatever the test made the API show */
    cJSON *pod = deployed_pod(d, r->pod_name, str(get(shown, "spec"), "nodeName"));
    const cJSON *ctr = container(get(pod, "spec"), EXTENDER_CONTAINER);
    char *argv[96] = {0}, *envp[64] = {0}, url[128];
    fake_api_url(api, url, sizeof url);
    int argc = build_argv(ctr, bin, url, argv, 96, err, errlen);
    int envc = argc < 0 ? -1 : build_envp(ctr, pod, envp, 64, err, errlen);
    cJSON_Delete(pod);
    FILE *f = argc > 0 && envc >= 0 ? spawn(bin, argv, envp, &r->pid, err, errlen) : NULL;
    for (int i = 0; argv[i]; i++) free(argv[i]);
    for (int i = 0; envp[i]; i++) free(envp[i]);
    if (!f) return -1;
    char line[2048];
    while ((!r->verbs_port || !r->ops_port) && fgets(line, sizeof line, f)) {
        if (getenv("EXT_TEST_LOG")) fputs(line, stderr);
        char *s;
        if ((s = strstr(line, "event=serving-ops ")) && (s = strstr(s, " port="))) r->ops_port = atoi(s + 6);
        else if ((s = strstr(line, "event=serving ")) && (s = strstr(s, " port="))) r->verbs_port = atoi(s + 6);
    }
    r->log = log_follow(f, r->pid, &r->drain, err, errlen);
    if (!r->log) return -1;
    r->running = true;
    if (!r->verbs_port || !r->ops_port) {
        snprintf(err, errlen, "%s exited before it served (run with EXT_TEST_LOG=1 to see its log)", bin);
        deployed_replica_stop(r, SIGKILL);
        return -1;
    }
    return 0;
}

void deployed_replica_stop(deployed_replica *r, int sig) {
    if (!r->running) return;
    log_unfollow(r->pid, sig, r->drain, &r->log);
    r->running = false;
}

const char *deployed_extender_arg(const deployed *d, const char *flag) {
    const cJSON *ctr = container(get(get(get(d->deployment, "spec"), "template"), "spec"), EXTENDER_CONTAINER), *a;
    size_t fl = strlen(flag);
    bool next = false;
    cJSON_ArrayForEach(a, get(ctr, "args")) {
        if (!cJSON_IsString(a)) continue;
        if (next) return a->valuestring;
        if (!strncmp(a->valuestring, flag, fl) && a->valuestring[fl] == '=') return a->valuestring + fl + 1;
        next = !strcmp(a->valuestring, flag);
    }
    return NULL;
}

void deployed_image_binaries(const char *dir, char *buf, size_t len) {
    char path[512], line[1024];
    snprintf(path, sizeof path, "%s/Containerfile", dir);
    buf[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f) return;
    size_t off = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "COPY", 4) != 0) continue;
        for (char *p = strstr(line, "/usr/local/bin/"); p; p = strstr(p + 1, "/usr/local/bin/")) {
            size_t n = strcspn(p, " \t\r\n\"],");
            if (n <= strlen("/usr/local/bin/") || off + n + 2 >= len) continue;
            off += (size_t)snprintf(buf + off, len - off, "%s%.*s", off ? "," : "", (int)n, p);
        }
    }
    fclose(f);
}

bool deployed_interested(const deployed *d, const cJSON *pod) {
    static const char *const lists[2] = {"initContainers", "containers"}, *const kinds[2] = {"requests", "limits"};
    for (int l = 0; l < 2; l++) {
        const cJSON *c;
        cJSON_ArrayForEach(c, get(get(pod, "spec"), lists[l]))
            for (int k = 0; k < 2; k++)
                for (int m = 0; m < d->nmanaged; m++)
                    if (get(get(get(c, "resources"), kinds[k]), d->managed[m])) return true;
    }
    return false;
}

/* ---- creating pods through the webhook ---------------------------------------------------------------- */

bool deployed_http_ok(int port, const char *path) {
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    long code;
    free(http_call(url, NULL, 5, &code));
    return code == 200;
}

cJSON *deployed_create_pod(fake_api *api, const deployed_replica *r, const char *pod_json, char *err, size_t errlen) {
    static unsigned counter;
    cJSON *pod = cJSON_Parse(pod_json);
    if (!pod) { snprintf(err, errlen, "the pod is not JSON"); return NULL; }
    cJSON *review = cJSON_CreateObject(), *req = cJSON_AddObjectToObject(review, "request");
    cJSON_AddStringToObject(review, "apiVersion", "admission.k8s.io/v1");
    cJSON_AddStringToObject(review, "kind", "AdmissionReview");
    char uid[64];
    snprintf(uid, sizeof uid, "5a1e%04x-0c2d-4e6f-8a9b-%012x", __atomic_add_fetch(&counter, 1, __ATOMIC_SEQ_CST),
             (unsigned)getpid());
    cJSON_AddStringToObject(req, "uid", uid);
    cJSON *k = cJSON_AddObjectToObject(req, "kind");
    cJSON_AddStringToObject(k, "group", "");
    cJSON_AddStringToObject(k, "version", "v1");
    cJSON_AddStringToObject(k, "kind", "Pod");
    cJSON *rs = cJSON_AddObjectToObject(req, "resource");
    cJSON_AddStringToObject(rs, "group", "");
    cJSON_AddStringToObject(rs, "version", "v1");
    cJSON_AddStringToObject(rs, "resource", "pods");
    const char *ns = str(get(pod, "metadata"), "namespace");
    cJSON_AddStringToObject(req, "namespace", ns ? ns : "default");
    cJSON_AddStringToObject(req, "operation", "CREATE");
    cJSON_AddItemToObject(req, "object", cJSON_Duplicate(pod, 1));
    char *text = cJSON_PrintUnformatted(review), url[128];
    cJSON_Delete(review);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/webhook/mutate", r->verbs_port);
    long code;
    char *answer = http_call(url, text, TEST_PATIENCE_MS / 1000, &code);   /* a loaded machine answers late */
    free(text);
    cJSON *reply = code == 200 && answer ? cJSON_Parse(answer) : NULL;
    free(answer);
    const cJSON *resp = get(reply, "response");
    const char *patch = str(resp, "patch");
    cJSON *ops = NULL;
    if (patch) {
        char *dec = ext_base64_decode(patch, strlen(patch), NULL);
        ops = dec ? cJSON_Parse(dec) : NULL;
        free(dec);
    }
    cJSON *stored = NULL;
    if (!cJSON_IsTrue(get(resp, "allowed"))) {
        snprintf(err, errlen, "the webhook refused or was not reached (HTTP %ld): %s", code,
                 str(get(resp, "status"), "message") ? str(get(resp, "status"), "message") : "");
    } else if (patch && (!ops || json_patch_apply(pod, ops) != 0)) {
        snprintf(err, errlen, "the webhook's patch does not apply");
    } else {
        char *pj = cJSON_PrintUnformatted(pod);
        fake_api_put(api, "pods", pj);
        free(pj);
        const cJSON *meta = get(pod, "metadata");
        char *s = fake_api_get(api, "pods", ns ? ns : "default", str(meta, "name"));
        stored = s ? cJSON_Parse(s) : NULL;
        free(s);
    }
    cJSON_Delete(ops);
    cJSON_Delete(reply);
    cJSON_Delete(pod);
    return stored;
}

/* ---- the node agent (deploy/node-agent/) ------------------------------------------------------------- */

cJSON *deployed_agent_pod(const deployed *d, const char *node) {
    if (!d->node_agent) return NULL;
    char name[160];
    snprintf(name, sizeof name, "tessera-node-agent-%s", node);
    const char *ns = str(get(d->node_agent, "metadata"), "namespace");
    return template_pod(d->node_agent, "DaemonSet", ns ? ns : "default", name, node);
}

/* Where the container's absolute path lives on the test's fake host (deployed.h), or NULL to keep it. */
static bool host_path(const cJSON *spec, const cJSON *ctr, const char *root, const char *v, char *out, size_t len) {
    if (!root || v[0] != '/') return false;
    const cJSON *m;
    cJSON_ArrayForEach(m, get(ctr, "volumeMounts")) {
        const char *mp = str(m, "mountPath"), *vol = str(m, "name");
        size_t ml = mp ? strlen(mp) : 0;
        if (!ml || strncmp(v, mp, ml) != 0 || (v[ml] && v[ml] != '/')) continue;
        const cJSON *vo;
        cJSON_ArrayForEach(vo, get(spec, "volumes")) {
            const char *hp = str(get(vo, "hostPath"), "path");
            if (hp && vol && str(vo, "name") && !strcmp(str(vo, "name"), vol)) {
                snprintf(out, len, "%s%s%s", root, hp, v + ml);
                return true;
            }
        }
    }
    if (!strncmp(v, "/sys", 4) && (!v[4] || v[4] == '/')) { /* the container's sysfs is the host's */
        snprintf(out, len, "%s%s", root, v);
        return true;
    }
    return false;
}

static const char *const AGENT_TIMING[] = {"--poll-interval", "--min-write-interval", "--topology-interval"};

static int agent_argv(const cJSON *spec, const cJSON *ctr, const char *bin, const char *api_url,
                      const deployed_agent_opts *o, char **argv, int max, char *err, size_t errlen) {
    const cJSON *cmd = get(ctr, "command"), *a;
    if (cJSON_GetArraySize(cmd) != 1 || strcmp(cJSON_GetArrayItem(cmd, 0)->valuestring, "/usr/local/bin/" AGENT_CONTAINER)) {
        snprintf(err, errlen, "the " AGENT_CONTAINER " container's command is not /usr/local/bin/" AGENT_CONTAINER);
        return -1;
    }
    for (int i = 0; o->timing && o->timing[i]; i += 2) {
        bool known = false;
        for (size_t t = 0; t < sizeof AGENT_TIMING / sizeof AGENT_TIMING[0]; t++) known |= !strcmp(o->timing[i], AGENT_TIMING[t]);
        if (!known || !o->timing[i + 1]) {
            snprintf(err, errlen, "%s: only --poll-interval, --min-write-interval and --topology-interval may be "
                     "changed, each with a value", o->timing[i]);
            return -1;
        }
    }
    int n = 0;
    argv[n++] = strdup(bin);
    cJSON_ArrayForEach(a, get(ctr, "args")) {
        if (n >= max - 3) {
            snprintf(err, errlen, "the " AGENT_CONTAINER " container has more arguments than the harness takes");
            return -1;
        }
        const char *s = cJSON_IsString(a) ? a->valuestring : "";
        const char *eq = strchr(s, '=');
        if (!eq || strncmp(s, "--", 2) != 0) {
            snprintf(err, errlen, "the harness takes the agent's flags as --flag=value: %s", s);
            return -1;
        }
        char flag[128], buf[1200];
        snprintf(flag, sizeof flag, "%.*s", (int)(eq - s), s);
        const char *v = eq + 1;
        for (int i = 0; o->timing && o->timing[i]; i += 2)
            if (!strcmp(o->timing[i], flag)) v = o->timing[i + 1];
        char moved[1024];
        if (is_listen_flag(flag) && v[0]) v = "127.0.0.1:0";
        else if (host_path(spec, ctr, o->host_root, v, moved, sizeof moved)) v = moved;
        snprintf(buf, sizeof buf, "%s=%s", flag, v);
        argv[n++] = strdup(buf);
    }
    argv[n++] = strdup("--kube-api");
    argv[n++] = strdup(api_url);
    argv[n] = NULL;
    return n;
}


int deployed_agent_start(const deployed *d, fake_api *api, const char *bin, const char *node,
                         const deployed_agent_opts *o, deployed_agent *a, char *err, size_t errlen) {
    memset(a, 0, sizeof *a);
    if (!d->node_agent) {
        snprintf(err, errlen, "no DaemonSet runs " AGENT_CONTAINER " (load deploy/ with the node-agent component)");
        return -1;
    }
    cJSON *pod = deployed_agent_pod(d, node);
    char *pj = cJSON_PrintUnformatted(pod);
    fake_api_put(api, "pods", pj);
    free(pj);
    const cJSON *spec = get(pod, "spec"), *ctr = container(spec, AGENT_CONTAINER);
    char *argv[64] = {0}, *envp[64] = {0}, url[128];
    fake_api_url(api, url, sizeof url);
    int argc = agent_argv(spec, ctr, bin, url, o, argv, 64, err, errlen);
    int envc = argc < 0 ? -1 : build_envp(ctr, pod, envp, 48, err, errlen);
    cJSON_Delete(pod);
    /* the NVIDIA runtime's part: the library where the loader looks; the fake machine's description */
    if (envc >= 0 && o->nvml_dir) {
        char buf[1100];
        snprintf(buf, sizeof buf, "LD_LIBRARY_PATH=%s", o->nvml_dir);
        envp[envc++] = strdup(buf);
    }
    for (int i = 0; envc >= 0 && o->nvml_env && o->nvml_env[i] && envc < 62; i++) envp[envc++] = strdup(o->nvml_env[i]);
    FILE *out = argc > 0 && envc >= 0 ? spawn(bin, argv, envp, &a->pid, err, errlen) : NULL;
    for (int i = 0; argv[i]; i++) free(argv[i]);
    for (int i = 0; envp[i]; i++) free(envp[i]);
    if (!out) return -1;
    char line[4096];
    while (!a->ops_port && fgets(line, sizeof line, out)) {
        if (getenv("EXT_TEST_LOG")) fputs(line, stderr);
        char *s;
        if ((s = strstr(line, "event=serving-ops ")) && (s = strstr(s, " port="))) a->ops_port = atoi(s + 6);
    }
    a->log = log_follow(out, a->pid, &a->drain, err, errlen);
    if (!a->log) return -1;
    a->running = true;
    if (!a->ops_port) {
        snprintf(err, errlen, "%s exited before it served (run with EXT_TEST_LOG=1 to see its log)", bin);
        deployed_agent_stop(a, SIGKILL);
        return -1;
    }
    return 0;
}

int deployed_agent_stop(deployed_agent *a, int sig) {
    if (!a->running) return -1;
    int status = log_unfollow(a->pid, sig, a->drain, &a->log);
    a->running = false;
    return status;
}

bool deployed_agent_log_has(deployed_agent *a, const char *needle) {
    if (!a->log) return false;
    pthread_mutex_lock(&a->log->mu);
    bool found = a->log->text && strstr(a->log->text, needle);
    pthread_mutex_unlock(&a->log->mu);
    return found;
}

const char *deployed_agent_arg(const deployed *d, const char *flag) {
    const cJSON *ctr = container(get(get(get(d->node_agent, "spec"), "template"), "spec"), AGENT_CONTAINER), *a;
    size_t fl = strlen(flag);
    cJSON_ArrayForEach(a, get(ctr, "args"))
        if (cJSON_IsString(a) && !strncmp(a->valuestring, flag, fl) && a->valuestring[fl] == '=')
            return a->valuestring + fl + 1;
    return NULL;
}
