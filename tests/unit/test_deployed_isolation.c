/* test_deployed_isolation.c -- issue 27 end to end, as `kubectl apply -k deploy/` runs tessera: every soft share's
 * GPU memory is enforced, and an MPS share's compute is capped, by what deploy/'s tessera really adds and runs.
 *
 * tests/support/deployed_cluster.h starts two replicas of tessera-extender from deploy/'s Deployment, their
 * kube-schedulers and the GPU node (8 A100 80GB). The node's kubelet runs in exec mode (fake_kubelet.h): the
 * containers of every pod run as real processes with their environment and volumes, so:
 *   - a share's tessera-cuda-shim init container is the real `tessera-reserve --install-shim /opt/tessera` (the
 *     library it installs: build/libtessera-cuda.so), and its other containers get the real libtessera-cuda.so
 *     through the /etc/ld.so.preload the webhook mounted;
 *   - their command is build/fake-cuda/tessera-cuda-probe, a CUDA client, on the fake driver
 *     build/fake-cuda/libcuda.so.1 of the node's 8 GPUs (one state file: every pod on the node sees one device);
 *   - a reservation is the real tessera-reserve, and an MPS reservation's daemon the fake
 *     nvidia-cuda-mps-control, found on PATH where the NVIDIA runtime would mount the real one.
 * Nothing is played by the test but the node's hardware: each test says what it measured.
 */
#include <errno.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ext_helpers.h"
#include "ext_proc.h"
#include "extender/base/delivery.h"
#include "tests/support/deployed_cluster.h"

#define GPU_NODE "gpu-1"
#define GPU_PREFIX "GPU-1f0c2a3b-4d5e-4f60-8172-93a4b5c6d7"   /* + 00..07: the devices are real UUIDs */
#define NGPUS 8

typedef struct iso {
    deployed_cluster c;
    char root[256];            /* the node: node_root and host_root below it */
    char probe[700];           /* build/fake-cuda/tessera-cuda-probe */
    bool up;
} iso;

static int64_t now_ms(void) { return deployed_cluster_now_ms(); }
static void nap(int ms) { deployed_cluster_nap(ms); }

/* What the NVIDIA container runtime mounts into a GPU container, here one directory (exec mode puts it on
 * LD_LIBRARY_PATH and its bin/ first on PATH): the fake driver and NVML, and the MPS control daemon, the fake one
 * or (daemon_fails) one that cannot start, as nvidia-cuda-mps-control exits when the GPU is in another compute
 * mode: it says so in control.log and exits 1. */
static bool runtime_dir(const char *root, const char *cuda, const char *nvml, bool daemon_fails, char *out, size_t len) {
    char p[900], q[900];
    snprintf(out, len, "%s/nvidia-runtime", root);
    snprintf(p, sizeof p, "%s/bin", out);
    if (mkdir(out, 0755) != 0 || mkdir(p, 0755) != 0) return false;
    snprintf(p, sizeof p, "%s/libcuda.so.1", cuda);
    snprintf(q, sizeof q, "%s/libcuda.so.1", out);
    if (symlink(p, q) != 0) return false;
    snprintf(q, sizeof q, "%s/libnvidia-ml.so.1", out);
    if (symlink(nvml, q) != 0) return false;
    snprintf(q, sizeof q, "%s/bin/nvidia-cuda-mps-control", out);
    if (!daemon_fails) {
        snprintf(p, sizeof p, "%s/bin/nvidia-cuda-mps-control", cuda);
        return symlink(p, q) == 0;
    }
    FILE *f = fopen(q, "w");
    if (!f) return false;
    fprintf(f, "#!/bin/sh\n"
               "echo \"[2026-12-04 15:00:00.000 Control $$] Failed to start: the GPU is not in the DEFAULT compute mode\" "
               ">> \"${CUDA_MPS_LOG_DIRECTORY:-/var/log/nvidia-mps}/control.log\"\n"
               "exit 1\n");
    fclose(f);
    return chmod(q, 0755) == 0;
}

/* deploy/'s cluster whose GPU node runs its containers (exec mode); daemon_fails: no MPS daemon can start there. */
static bool iso_start(iso *t, bool daemon_fails) {
    memset(t, 0, sizeof *t);
    char bin[700], dir[640], reserve[700], shim[700], cuda[700], nvml[700], rt[400];
    if (!extender_path(bin, sizeof bin) || !deployed_cluster_deploy_dir(dir, sizeof dir) ||
        !sibling_binary_path("tessera-reserve", reserve, sizeof reserve) ||
        !sibling_binary_path("libtessera-cuda.so", shim, sizeof shim) ||
        !sibling_binary_path("fake-cuda", cuda, sizeof cuda) ||
        !sibling_binary_path("fake-nvml/libnvidia-ml.so.1", nvml, sizeof nvml) ||
        !sibling_binary_path("fake-cuda/tessera-cuda-probe", t->probe, sizeof t->probe)) {
        snprintf(t->c.err, sizeof t->c.err, "the build is missing tessera-extender, tessera-reserve, libtessera-cuda.so or "
                                            "fake-cuda/ next to the tests (run make)");
        return false;
    }
    snprintf(t->root, sizeof t->root, "/tmp/tessera-iso-XXXXXX");
    if (!mkdtemp(t->root) || !runtime_dir(t->root, cuda, nvml, daemon_fails, rt, sizeof rt)) {
        snprintf(t->c.err, sizeof t->c.err, "the node's directories under %s: %s", t->root, strerror(errno));
        return false;
    }
    cJSON *node = demo_node_as("gpu-a100-whole", GPU_NODE);
    char *nj = cJSON_PrintUnformatted(node);
    cJSON_Delete(node);
    deployed_cluster_config cfg = {.extender_bin = bin, .deploy_dir = dir, .gpu_node_json = nj, .gpus = NGPUS,
                                   .uuid_prefix = GPU_PREFIX};
    int rc = deployed_cluster_start(&t->c, &cfg);
    free(nj);
    if (rc != 0) return false;
    /* the shares' namespace, as a cluster has it: no Pod Security label (the cluster's default, privileged) */
    fake_api_put(t->c.api, "namespaces", "{\"metadata\":{\"name\":\"default\",\"labels\":{\"kubernetes.io/metadata.name\":"
                                         "\"default\"}}}");
    char node_root[300], host_root[300], devs[600] = "", url[128];
    snprintf(node_root, sizeof node_root, "%s/node", t->root);
    snprintf(host_root, sizeof host_root, "%s/host", t->root);
    mkdir(node_root, 0755);
    mkdir(host_root, 0755);
    for (int i = 0; i < NGPUS; i++)
        snprintf(devs + strlen(devs), sizeof devs - strlen(devs), "%s%s%02x:81920", i ? "," : "", GPU_PREFIX, i);
    fake_kubelet_set_exec(t->c.kl, GPU_NODE, &(fake_kubelet_exec){.node_root = node_root, .host_root = host_root,
                                                                  .fake_cuda_dir = rt,
                                                                  .cuda_devices = devs});
    /* the image's programs: tessera-reserve (in-cluster configuration and the library's image path are the test
     * machine's), the share's CUDA program */
    fake_api_url(t->c.api, url, sizeof url);
    const char *reserve_args[] = {"--kube-api", url, "--shim-source", shim, NULL};
    fake_kubelet_add_program(t->c.kl, "/usr/local/bin/tessera-reserve", reserve, reserve_args);
    fake_kubelet_add_program(t->c.kl, "/usr/local/bin/tessera-cuda-probe", t->probe, NULL);
    t->up = true;
    return true;
}

static void iso_stop(iso *t) {
    deployed_cluster_stop(&t->c);
    if (t->root[0]) {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", t->root);
        if (system(cmd) != 0) fprintf(stderr, "    could not remove %s\n", t->root);
    }
}

/* A pod through replica 0's webhook (the API server's path): its uid into uid, false with t->c.err. */
static bool create(iso *t, const char *pod_json, char *uid, size_t len) {
    cJSON *stored = deployed_create_pod(t->c.api, &t->c.rep[0], pod_json, t->c.err, sizeof t->c.err);
    const cJSON *u = cJSON_GetObjectItem(cJSON_GetObjectItem(stored, "metadata"), "uid");
    snprintf(uid, len, "%s", cJSON_IsString(u) ? u->valuestring : "");
    cJSON_Delete(stored);
    return uid[0] != 0;
}

/* The container's stdout (stream 1) or stderr (2) so far, "" when none (caller frees). */
static char *out_of(iso *t, const char *uid, const char *ctr, int stream) {
    char *s = fake_kubelet_log(t->c.kl, uid, ctr, stream);
    return s ? s : strdup("");
}

/* The same into buf (cut to len): the tests compare it after everything is stopped and freed. */
static void out_into(iso *t, const char *uid, const char *ctr, int stream, char *buf, size_t len) {
    char *s = out_of(t, uid, ctr, stream);
    snprintf(buf, len, "%s", s);
    free(s);
}

/* Wait until the container's stdout holds needle (ms at most). */
static bool wait_out(iso *t, const char *uid, const char *ctr, const char *needle, int ms) {
    for (int64_t t0 = now_ms(); now_ms() - t0 < ms; nap(50)) {
        char *s = out_of(t, uid, ctr, 1);
        bool y = strstr(s, needle) != NULL;
        free(s);
        if (y) return true;
    }
    return false;
}

/* The pod's delivery ConfigMap's value of key ("" when none). */
static void cm_value(iso *t, const char *pod, const char *key, char *buf, size_t len) {
    cJSON *p = deployed_cluster_get(&t->c, "pods", "default", pod);
    const cJSON *d = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "metadata"), "annotations"),
                                         EXT_DLV_ANN_DELIVERY);
    cJSON *cm = cJSON_IsString(d) ? deployed_cluster_get(&t->c, "configmaps", "default", d->valuestring) : NULL;
    const cJSON *v = cJSON_GetObjectItem(cJSON_GetObjectItem(cm, "data"), key);
    snprintf(buf, len, "%s", cJSON_IsString(v) ? v->valuestring : "");
    cJSON_Delete(cm);
    cJSON_Delete(p);
}

/* The GPU index the pod's tessera.io/assignment names (its first grant), -1 when none. */
static int gpu_of(iso *t, const char *pod) {
    cJSON *p = deployed_cluster_get(&t->c, "pods", "default", pod);
    const cJSON *a = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "metadata"), "annotations"),
                                         "tessera.io/assignment");
    cJSON *ao = cJSON_IsString(a) ? cJSON_Parse(a->valuestring) : NULL;
    const cJSON *g = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(ao, "grants"), 0), "gpu");
    int gpu = cJSON_IsNumber(g) ? g->valueint : -1;
    cJSON_Delete(ao);
    cJSON_Delete(p);
    return gpu;
}

/* A share pod (JSON) of containers {name, probe ops}... with the annotations (JSON members) and the pod's
 * securityContext (JSON object or ""). */
static char *share_pod(const char *name, const char *anns, const char *psc, const char *const *ctrs, int n) {
    char *out = malloc(8192);
    size_t o = (size_t)snprintf(out, 8192,
                                "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\","
                                "\"annotations\":{%s}},\"spec\":{\"schedulerName\":\"tessera-scheduler\",\"restartPolicy\":"
                                "\"Never\",", name, anns);
    if (psc[0]) o += (size_t)snprintf(out + o, 8192 - o, "\"securityContext\":%s,", psc);
    o += (size_t)snprintf(out + o, 8192 - o, "\"containers\":[");
    for (int i = 0; i < n; i++)
        o += (size_t)snprintf(out + o, 8192 - o, "%s{\"name\":\"%s\",\"image\":\"example/cuda-app:1\",\"command\":%s}",
                              i ? "," : "", ctrs[2 * i], ctrs[2 * i + 1]);
    snprintf(out + o, 8192 - o, "]}}");
    return out;
}

/* share_pod's pod created through the webhook: its uid into uid. */
static bool create_share(iso *t, const char *name, const char *anns, const char *psc, const char *const *ctrs, int n,
                         char *uid, size_t len) {
    char *p = share_pod(name, anns, psc, ctrs, n);
    bool ok = create(t, p, uid, len);
    free(p);
    return ok;
}

/* Deliver 5 and 1: a share over its limit gets CUDA's out-of-memory error while its neighbour on the same GPU
 * allocates, across two processes of one pod (two containers), and cuMemGetInfo shows the share. Pod "a" (a
 * quarter of an 80 GB GPU: 20480 MiB) allocates 12288 MiB in one container and holds it; its second container
 * then asks for 12288 MiB more and is refused (24576 > 20480), with libtessera-cuda's line on stderr; pod "b"
 * (half the GPU: 40960 MiB), on the same GPU, allocates 32768 MiB meanwhile and succeeds: more than pod "a" may
 * have, so it is the share that refuses, not the GPU. The second container runs the probe under `env -u
 * TESSERA_GPU_MEMORY_MIB`: the limit is read from the delivery ConfigMap mounted at /opt/tessera/config, which a
 * process cannot drop as it can a variable. */
TEST(deployed_share_over_its_limit_gets_oom_while_its_neighbour_allocates) {
    iso t;
    bool up = iso_start(&t, false);
    char go[320], uid_a[128] = "", uid_b[128] = "";
    snprintf(go, sizeof go, "%s/go-a", t.root);
    char second[1400];
    snprintf(second, sizeof second, "[\"/usr/bin/env\",\"-u\",\"TESSERA_GPU_MEMORY_MIB\",\"%s\",\"wait-file\",\"%s\","
             "\"alloc\",\"12288\",\"meminfo\"]", t.probe, go);
    const char *a_ctrs[] = {"first", "[\"/usr/local/bin/tessera-cuda-probe\",\"alloc\",\"12288\",\"meminfo\",\"hold\",\"120\"]",
                            "second", second};
    const char *b_ctrs[] = {"app", "[\"/usr/local/bin/tessera-cuda-probe\",\"alloc\",\"32768\",\"meminfo\",\"hold\",\"120\"]"};
    bool made = up && create_share(&t, "a", "\"tessera.io/gpu-fraction\":\"0.25\"", "", a_ctrs, 2, uid_a, sizeof uid_a) &&
                create_share(&t, "b", "\"tessera.io/gpu-fraction\":\"0.5\"", "", b_ctrs, 1, uid_b, sizeof uid_b);
    int64_t t0 = now_ms();
    bool first_ok = made && wait_out(&t, uid_a, "first", "alloc 12288 ok", 60000);
    int64_t t_first = now_ms() - t0;
    bool b_ok = first_ok && wait_out(&t, uid_b, "app", "alloc 32768 ok", 30000);
    FILE *f = first_ok ? fopen(go, "w") : NULL;
    if (f) fclose(f);
    bool second_done = f && wait_out(&t, uid_a, "second", "meminfo", 30000);
    char a1[2048], a2[2048], a2e[2048], b1[2048];
    out_into(&t, uid_a, "first", 1, a1, sizeof a1);
    out_into(&t, uid_a, "second", 1, a2, sizeof a2);
    out_into(&t, uid_a, "second", 2, a2e, sizeof a2e);
    out_into(&t, uid_b, "app", 1, b1, sizeof b1);
    int ga = gpu_of(&t, "a"), gb = gpu_of(&t, "b");
    char ua[128], ub[128], enf[256];
    cm_value(&t, "a", EXT_DLV_ENV_UUID, ua, sizeof ua);
    cm_value(&t, "b", EXT_DLV_ENV_UUID, ub, sizeof ub);
    cm_value(&t, "a", EXT_DLV_ENV_ENFORCEMENT, enf, sizeof enf);
    iso_stop(&t);
    CHECK_MSG(up, "%s", t.c.err);
    CHECK_MSG(made, "%s", t.c.err);
    CHECK_MSG(first_ok, "pod a's first container did not allocate 12288 MiB: %s", a1);
    CHECK_MSG(ga >= 0 && ga == gb && ua[0] && !strcmp(ua, ub), "not neighbours: a on GPU %d (%s), b on GPU %d (%s)", ga,
              ua, gb, ub);
    CHECK_MSG(b_ok, "the neighbour's allocation of 32768 MiB did not succeed: %s", b1);
    CHECK_MSG(second_done, "pod a's second container never finished: %s", a2);
    CHECK_CONTAINS(a1, "meminfo free=8192 total=20480");   /* the share, less what the pod holds */
    CHECK_CONTAINS(a2, "alloc 12288 error 2");             /* CUDA_ERROR_OUT_OF_MEMORY */
    CHECK_CONTAINS(a2e, "tessera: ");
    CHECK_CONTAINS(a2e, "refused");
    CHECK_CONTAINS(a2e, "20480 MiB");
    CHECK_CONTAINS(b1, "meminfo free=8192 total=40960");
    CHECK_STR(enf, "memory=libtessera-cuda compute=time-slicing (not capped)");
    char line[200] = "";
    sscanf(strstr(a2e, "tessera: ") ? strstr(a2e, "tessera: ") : "", "%199[^\n]", line);
    printf("    pod a (0.25) on GPU %d next to pod b (0.5): first container's 12288 MiB held %lld ms after creation, "
           "the second's 12288 MiB refused: \"%s\"\n", ga, (long long)t_first, line);
}

/* Deliver 5: the limits follow the charged size. A quarter and a half of an 80 GB GPU, and nvidia.com/gpumem: 10000,
 * each see exactly their share as the device's memory, in CUDA (cuMemGetInfo, cuDeviceTotalMem) and in NVML, and
 * can allocate it all but not one MiB more. */
TEST(deployed_share_limits_follow_the_charged_size) {
    iso t;
    bool up = iso_start(&t, false);
    static const struct { const char *name, *anns, *res; int mib; } shares[] = {
        {"quarter", "\"tessera.io/gpu-fraction\":\"0.25\"", NULL, 20480},
        {"half", "\"tessera.io/gpu-fraction\":\"0.5\"", NULL, 40960},
        {"gpumem", "", "{\"limits\":{\"nvidia.com/gpumem\":\"10000\"}}", 10000},
    };
    char uid[3][128];
    bool made = up;
    for (int i = 0; made && i < 3; i++) {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "[\"/usr/local/bin/tessera-cuda-probe\",\"meminfo\",\"total-mem\",\"nvml-meminfo\","
                 "\"alloc\",\"%d\",\"alloc\",\"1\"]", shares[i].mib);
        char pod[2048];
        snprintf(pod, sizeof pod,
                 "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\","
                 "\"annotations\":{%s}},\"spec\":{\"schedulerName\":\"tessera-scheduler\",\"restartPolicy\":\"Never\","
                 "\"containers\":[{\"name\":\"app\",\"image\":\"example/cuda-app:1\",\"command\":%s%s%s}]}}",
                 shares[i].name, shares[i].anns, cmd, shares[i].res ? ",\"resources\":" : "", shares[i].res ? shares[i].res : "");
        made = create(&t, pod, uid[i], sizeof uid[i]);
    }
    bool done[3] = {false, false, false};
    for (int i = 0; made && i < 3; i++) done[i] = wait_out(&t, uid[i], "app", "alloc 1 ", 60000);
    char out[3][2048], mem[3][32];
    for (int i = 0; i < 3; i++) {
        out[i][0] = 0;
        if (made) out_into(&t, uid[i], "app", 1, out[i], sizeof out[i]);
        cm_value(&t, shares[i].name, EXT_DLV_ENV_MEMORY, mem[i], sizeof mem[i]);
    }
    iso_stop(&t);
    CHECK_MSG(up, "%s", t.c.err);
    CHECK_MSG(made, "%s", t.c.err);
    for (int i = 0; i < 3; i++) {
        char want[200];
        CHECK_MSG(done[i], "%s did not finish: %s", shares[i].name, out[i]);
        snprintf(want, sizeof want, "%d", shares[i].mib);
        CHECK_STR(mem[i], want);
        snprintf(want, sizeof want, "total=%d\n", shares[i].mib);
        CHECK_CONTAINS(out[i], want);                       /* cuMemGetInfo */
        snprintf(want, sizeof want, "total-mem %d\n", shares[i].mib);
        CHECK_CONTAINS(out[i], want);                       /* cuDeviceTotalMem */
        snprintf(want, sizeof want, "nvml-meminfo total=%d ", shares[i].mib);
        CHECK_CONTAINS(out[i], want);                       /* NVML, as nvidia-smi and pynvml read it */
        snprintf(want, sizeof want, "alloc %d ok\nalloc 1 error 2", shares[i].mib);
        CHECK_CONTAINS(out[i], want);
    }
}

/* The reservation pods of namespace ns that are not being deleted (caller deletes). */
static cJSON *reservations_in(iso *t, const char *ns) {
    char *all = fake_api_list(t->c.api, "pods");
    cJSON *arr = cJSON_Parse(all), *out = cJSON_CreateArray(), *it;
    free(all);
    cJSON_ArrayForEach(it, arr) {
        const cJSON *meta = cJSON_GetObjectItem(it, "metadata");
        const cJSON *l = cJSON_GetObjectItem(cJSON_GetObjectItem(meta, "labels"), EXT_RSV_LABEL);
        const cJSON *n = cJSON_GetObjectItem(meta, "namespace");
        if (cJSON_IsString(l) && !strcmp(l->valuestring, "true") && cJSON_IsString(n) && !strcmp(n->valuestring, ns) &&
            !cJSON_GetObjectItem(meta, "deletionTimestamp"))
            cJSON_AddItemToArray(out, cJSON_Duplicate(it, 1));
    }
    cJSON_Delete(arr);
    return out;
}

/* The number of Events reason on pod, and the last one's message into msg. */
static int events_of(iso *t, const char *reason, const char *pod, char *msg, size_t len) {
    char *all = fake_api_events(t->c.api);
    cJSON *arr = cJSON_Parse(all), *e;
    free(all);
    int n = 0;
    cJSON_ArrayForEach(e, arr) {
        const cJSON *r = cJSON_GetObjectItem(e, "reason"), *m = cJSON_GetObjectItem(e, "message");
        const cJSON *o = cJSON_GetObjectItem(cJSON_GetObjectItem(e, "involvedObject"), "name");
        if (!cJSON_IsString(r) || strcmp(r->valuestring, reason) || !cJSON_IsString(o) || strcmp(o->valuestring, pod)) continue;
        n++;
        if (msg && cJSON_IsString(m)) snprintf(msg, len, "%s", m->valuestring);
    }
    cJSON_Delete(arr);
    return n;
}

#define MPS_ANNS "\"tessera.io/gpu-fraction\":\"0.25\",\"tessera.io/compute-sharing\":\"mps\""

/* Deliver 2 (MPS): an MPS share's reservation runs its GPU's control daemon (the real tessera-reserve --mps, in
 * tessera-node, starting the fake nvidia-cuda-mps-control), and the share's processes are its clients: the driver
 * gives them 25 percent of the SMs (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE) and refuses a process more than its pinned
 * limit, even one that runs without libtessera-cuda (its LD_PRELOAD, the fake kubelet's stand-in for
 * /etc/ld.so.preload, unset). A second MPS share of another uid lands on another GPU (a server serves one uid). */
TEST(deployed_mps_share_is_capped_by_its_gpus_daemon) {
    iso t;
    bool up = iso_start(&t, false);
    char raw[1400], uid1[128] = "", uid2[128] = "";
    snprintf(raw, sizeof raw, "[\"env\",\"-u\",\"LD_PRELOAD\",\"%s\",\"alloc\",\"24576\",\"alloc\",\"8192\"]", t.probe);
    const char *c1[] = {"app", "[\"/usr/local/bin/tessera-cuda-probe\",\"sm-count\",\"alloc\",\"16384\",\"meminfo\",\"hold\",\"120\"]",
                        "raw", raw};
    const char *c2[] = {"app", "[\"/usr/local/bin/tessera-cuda-probe\",\"sm-count\",\"alloc\",\"8192\"]"};
    bool made = up && create_share(&t, "m1", MPS_ANNS, "{\"runAsUser\":1000}", c1, 2, uid1, sizeof uid1) &&
                create_share(&t, "m2", MPS_ANNS, "{\"runAsUser\":2000}", c2, 1, uid2, sizeof uid2);
    int64_t t0 = now_ms();
    bool app_ok = made && wait_out(&t, uid1, "app", "meminfo", 60000);
    int64_t t_app = now_ms() - t0;
    bool raw_done = app_ok && wait_out(&t, uid1, "raw", "alloc 8192", 30000);
    bool m2_done = made && wait_out(&t, uid2, "app", "alloc 8192", 30000);
    char a[2048], r[2048], re[2048], b[2048];
    out_into(&t, uid1, "app", 1, a, sizeof a);
    out_into(&t, uid1, "raw", 1, r, sizeof r);
    out_into(&t, uid1, "raw", 2, re, sizeof re);
    out_into(&t, uid2, "app", 1, b, sizeof b);
    int g1 = gpu_of(&t, "m1"), g2 = gpu_of(&t, "m2");
    char u1[128], u2[128], thr[16], pin[32], enf[256], pipe[256];
    cm_value(&t, "m1", EXT_DLV_ENV_UUID, u1, sizeof u1);
    cm_value(&t, "m2", EXT_DLV_ENV_UUID, u2, sizeof u2);
    cm_value(&t, "m1", EXT_DLV_ENV_MPS_THREADS, thr, sizeof thr);
    cm_value(&t, "m1", EXT_DLV_ENV_MPS_PINNED, pin, sizeof pin);
    cm_value(&t, "m1", EXT_DLV_ENV_ENFORCEMENT, enf, sizeof enf);
    cm_value(&t, "m1", EXT_DLV_ENV_MPS_PIPE, pipe, sizeof pipe);
    /* the MPS reservations: in tessera-node, and what their tessera-reserve said */
    cJSON *rs = reservations_in(&t, EXT_RSV_DEFAULT_MPS_NS), *plain = reservations_in(&t, "tessera");
    int nmps = cJSON_GetArraySize(rs), nplain = cJSON_GetArraySize(plain);
    char rlog[4096] = "", ctl[2048] = "";
    const cJSON *x;
    cJSON_ArrayForEach(x, rs) {
        const cJSON *ru = cJSON_GetObjectItem(cJSON_GetObjectItem(x, "metadata"), "uid");
        char *l = cJSON_IsString(ru) ? fake_kubelet_log(t.c.kl, ru->valuestring, "reserve", 2) : NULL;
        if (l) snprintf(rlog + strlen(rlog), sizeof rlog - strlen(rlog), "%.1500s", l);
        free(l);
    }
    cJSON_Delete(rs);
    cJSON_Delete(plain);
    char path[700];
    snprintf(path, sizeof path, "%s/host/run/tessera/mps/%s/log/control.log", t.root, u1);
    FILE *f = fopen(path, "r");
    if (f) {
        size_t n = fread(ctl, 1, sizeof ctl - 1, f);
        ctl[n] = 0;
        fclose(f);
    }
    iso_stop(&t);
    CHECK_MSG(up, "%s", t.c.err);
    CHECK_MSG(made, "%s", t.c.err);
    CHECK_MSG(app_ok, "m1's client did not run: %s", a);
    CHECK_INT(nmps, 2);
    CHECK_INT(nplain, 0);
    CHECK_CONTAINS(rlog, "event=mps-ready");
    CHECK_CONTAINS(ctl, "for user 1000");                  /* the daemon started a server for m1's uid */
    CHECK_STR(thr, "25");
    CHECK_STR(pin, "0=20480M");
    CHECK_STR(enf, "memory=mps-pinned-limit+libtessera-cuda compute=mps-active-threads");
    char want_pipe[200];
    snprintf(want_pipe, sizeof want_pipe, "/run/tessera/mps/%s/pipe", u1);
    CHECK_STR(pipe, want_pipe);
    CHECK_CONTAINS(a, "sm-count 27\n");                    /* 108 SMs x 25 percent */
    CHECK_CONTAINS(a, "alloc 16384 ok");
    CHECK_CONTAINS(a, "total=20480");
    CHECK_MSG(raw_done, "the process without the interposer did not finish: %s", r);
    CHECK_CONTAINS(r, "alloc 24576 error 2");              /* the driver's pinned limit, per process */
    CHECK_MSG(!strstr(re, "tessera: "), "libtessera-cuda was loaded after all: %s", re);
    CHECK_MSG(m2_done, "m2 did not run: %s", b);
    CHECK_CONTAINS(b, "sm-count 27\n");
    CHECK_CONTAINS(b, "alloc 8192 ok");
    CHECK_MSG(g1 >= 0 && g2 >= 0 && g1 != g2 && strcmp(u1, u2) != 0, "uid 1000 on GPU %d (%s), uid 2000 on GPU %d (%s)",
              g1, u1, g2, u2);
    printf("    MPS: m1 (uid 1000) ran as its daemon's client %lld ms after creation, on GPU %d; m2 (uid 2000) on GPU %d\n",
           (long long)t_app, g1, g2);
}

/* Deliver 3 (MPS): the daemon of a reservation cannot start (nvidia-cuda-mps-control exits: the GPU is in another
 * compute mode). tessera-reserve publishes tessera.io/reserve-error with the daemon's log; tessera treats the
 * reservation as refused: deleted (its GPU free again), the share moved to another GPU with a Warning quoting the
 * daemon, and, the node's daemons all failing, given up with TesseraGPUUnavailable once refusals allow no more. No
 * device stays held, and the share's client never ran. */
TEST(deployed_mps_daemon_that_cannot_start_leaves_the_gpu_free) {
    iso t;
    bool up = iso_start(&t, true);
    char uid[128] = "";
    const char *c1[] = {"app", "[\"/usr/local/bin/tessera-cuda-probe\",\"sm-count\"]"};
    bool made = up && create_share(&t, "m1", MPS_ANNS, "{\"runAsUser\":1000}", c1, 1, uid, sizeof uid);
    char refused[2048] = "", unavailable[2048] = "";
    int64_t t0 = now_ms(), t_given = 0;
    for (; made && now_ms() - t0 < 90000 && !t_given; nap(100))
        if (events_of(&t, EXT_DLV_EV_UNAVAILABLE, "m1", unavailable, sizeof unavailable) > 0) t_given = now_ms();
    int nrefused = events_of(&t, EXT_DLV_EV_REFUSED, "m1", refused, sizeof refused);
    /* every reservation gone, every device free */
    int live = -1, held = 0;
    for (int64_t t1 = now_ms(); t_given && now_ms() - t1 < 15000; nap(100)) {
        cJSON *rs = reservations_in(&t, EXT_RSV_DEFAULT_MPS_NS);
        live = cJSON_GetArraySize(rs);
        cJSON_Delete(rs);
        held = 0;
        for (int i = 0; i < NGPUS; i++) {
            char dev[64];
            snprintf(dev, sizeof dev, "%s%02x", GPU_PREFIX, i);
            char *h = fake_kubelet_holder(t.c.kl, GPU_NODE, dev);
            held += h != NULL;
            free(h);
        }
        if (live == 0 && held == 0) break;
    }
    char a[2048];
    out_into(&t, uid, "app", 1, a, sizeof a);
    iso_stop(&t);
    CHECK_MSG(up, "%s", t.c.err);
    CHECK_MSG(made, "%s", t.c.err);
    CHECK_MSG(t_given, "no %s Event within 90 s", EXT_DLV_EV_UNAVAILABLE);
    CHECK_MSG(nrefused >= 1, "the share was never moved: no %s Event", EXT_DLV_EV_REFUSED);
    CHECK_CONTAINS(refused, "DEFAULT compute mode");       /* the daemon's own words, from its control.log */
    CHECK_CONTAINS(refused, "tries another GPU");
    CHECK_CONTAINS(unavailable, "reservations refused");
    CHECK_INT(live, 0);
    CHECK_INT(held, 0);
    CHECK_STR(a, "");                                       /* never ran: not without its daemon */
    printf("    a daemon that cannot start: moved %d time(s), given up %lld ms after creation; no reservation or "
           "device left\n", nrefused, (long long)(t_given - t0));
}
