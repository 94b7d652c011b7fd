/* test_node_agent.c -- tessera-node-agent end to end, started as deploy/node-agent's DaemonSet runs it
 * (tests/support/deployed.h: its args and env; the fake host's files under a temporary root) on the fake NVML
 * (build/fake-nvml/libnvidia-ml.so.1, found by dlopen through LD_LIBRARY_PATH), the fake kubelet Pod Resources
 * server and the fake API server: the annotation of each of the three reference servers (README, Topology) (literals written from
 * the README: bus ids, NUMA, links; and read back by the extender's model, on the server's Node as the GPU operator
 * publishes it, as that server's links), the keys an operator wrote kept, NVML missing or
 * failing, the holdings written, coalesced and retried, SIGTERM. Waits poll with deadlines. */
#include "harness.h"
#include "ext_proc.h"

#include "model/catalog.h"
#include "model/node.h"
#include "model/topo.h"
#include "topo_helpers.h"
#include "tests/support/deployed.h"
#include "tests/support/fake_apiserver.h"
#include "tests/support/fake_podresources.h"
#include "tests/support/http_client.h"

#include <cjson/cJSON.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NODE "gpu-node-1"
#define WAIT_MS TEST_PATIENCE_MS

/* The agent's intervals these tests set (--poll-interval, --min-write-interval...) and the windows the tests act or
 * look within, times the machine's load (wait.h's test_load_scale): 1 on an idle machine. The DaemonSet's own
 * timing is never scaled. */
#define S(ms) ((ms) * test_load_scale())
/* "<ms>ms", scaled, in buf. */
static const char *dur(char *buf, size_t len, int ms) {
    snprintf(buf, len, "%dms", S(ms));
    return buf;
}

/* ---- the reference servers (README.md, "Reference servers"), written out by hand ------------- */

static const char EXPECT_DGX[] =
    "[{\"index\":0,\"uuid\":\"GPU-d9a10000-0000-4000-8000-000000000000\",\"pci\":\"00000000:07:00.0\",\"numa\":0,\"nvlink\":[1,2,3,4,5,6,7],\"topo\":[\"X\",\"NV12\",\"NV12\",\"NV12\",\"NV12\",\"NV12\",\"NV12\",\"NV12\"]}"
    ",{\"index\":1,\"uuid\":\"GPU-d9a10000-0000-4000-8000-000000000001\",\"pci\":\"00000000:0F:00.0\",\"numa\":0,\"nvlink\":[0,2,3,4,5,6,7],\"topo\":[\"NV12\",\"X\",\"NV12\",\"NV12\",\"NV12\",\"NV12\",\"NV12\",\"NV12\"]}"
    ",{\"index\":2,\"uuid\":\"GPU-d9a10000-0000-4000-8000-000000000002\",\"pci\":\"00000000:47:00.0\",\"numa\":0,\"nvlink\":[0,1,3,4,5,6,7],\"topo\":[\"NV12\",\"NV12\",\"X\",\"NV12\",\"NV12\",\"NV12\",\"NV12\",\"NV12\"]}"
    ",{\"index\":3,\"uuid\":\"GPU-d9a10000-0000-4000-8000-000000000003\",\"pci\":\"00000000:4E:00.0\",\"numa\":0,\"nvlink\":[0,1,2,4,5,6,7],\"topo\":[\"NV12\",\"NV12\",\"NV12\",\"X\",\"NV12\",\"NV12\",\"NV12\",\"NV12\"]}"
    ",{\"index\":4,\"uuid\":\"GPU-d9a10000-0000-4000-8000-000000000004\",\"pci\":\"00000000:87:00.0\",\"numa\":1,\"nvlink\":[0,1,2,3,5,6,7],\"topo\":[\"NV12\",\"NV12\",\"NV12\",\"NV12\",\"X\",\"NV12\",\"NV12\",\"NV12\"]}"
    ",{\"index\":5,\"uuid\":\"GPU-d9a10000-0000-4000-8000-000000000005\",\"pci\":\"00000000:90:00.0\",\"numa\":1,\"nvlink\":[0,1,2,3,4,6,7],\"topo\":[\"NV12\",\"NV12\",\"NV12\",\"NV12\",\"NV12\",\"X\",\"NV12\",\"NV12\"]}"
    ",{\"index\":6,\"uuid\":\"GPU-d9a10000-0000-4000-8000-000000000006\",\"pci\":\"00000000:B7:00.0\",\"numa\":1,\"nvlink\":[0,1,2,3,4,5,7],\"topo\":[\"NV12\",\"NV12\",\"NV12\",\"NV12\",\"NV12\",\"NV12\",\"X\",\"NV12\"]}"
    ",{\"index\":7,\"uuid\":\"GPU-d9a10000-0000-4000-8000-000000000007\",\"pci\":\"00000000:BD:00.0\",\"numa\":1,\"nvlink\":[0,1,2,3,4,5,6],\"topo\":[\"NV12\",\"NV12\",\"NV12\",\"NV12\",\"NV12\",\"NV12\",\"NV12\",\"X\"]}]";
static const char EXPECT_PCIE8[] =
    "[{\"index\":0,\"uuid\":\"GPU-9c1e0000-0000-4000-8000-000000000000\",\"pci\":\"00000000:1B:00.0\",\"numa\":0,\"nvlink\":[1],\"topo\":[\"X\",\"NV12\",\"PIX\",\"PIX\",\"SYS\",\"SYS\",\"SYS\",\"SYS\"]}"
    ",{\"index\":1,\"uuid\":\"GPU-9c1e0000-0000-4000-8000-000000000001\",\"pci\":\"00000000:1C:00.0\",\"numa\":0,\"nvlink\":[0],\"topo\":[\"NV12\",\"X\",\"PIX\",\"PIX\",\"SYS\",\"SYS\",\"SYS\",\"SYS\"]}"
    ",{\"index\":2,\"uuid\":\"GPU-9c1e0000-0000-4000-8000-000000000002\",\"pci\":\"00000000:1D:00.0\",\"numa\":0,\"nvlink\":[3],\"topo\":[\"PIX\",\"PIX\",\"X\",\"NV12\",\"SYS\",\"SYS\",\"SYS\",\"SYS\"]}"
    ",{\"index\":3,\"uuid\":\"GPU-9c1e0000-0000-4000-8000-000000000003\",\"pci\":\"00000000:1E:00.0\",\"numa\":0,\"nvlink\":[2],\"topo\":[\"PIX\",\"PIX\",\"NV12\",\"X\",\"SYS\",\"SYS\",\"SYS\",\"SYS\"]}"
    ",{\"index\":4,\"uuid\":\"GPU-9c1e0000-0000-4000-8000-000000000004\",\"pci\":\"00000000:9B:00.0\",\"numa\":1,\"nvlink\":[5],\"topo\":[\"SYS\",\"SYS\",\"SYS\",\"SYS\",\"X\",\"NV12\",\"PIX\",\"PIX\"]}"
    ",{\"index\":5,\"uuid\":\"GPU-9c1e0000-0000-4000-8000-000000000005\",\"pci\":\"00000000:9C:00.0\",\"numa\":1,\"nvlink\":[4],\"topo\":[\"SYS\",\"SYS\",\"SYS\",\"SYS\",\"NV12\",\"X\",\"PIX\",\"PIX\"]}"
    ",{\"index\":6,\"uuid\":\"GPU-9c1e0000-0000-4000-8000-000000000006\",\"pci\":\"00000000:9D:00.0\",\"numa\":1,\"nvlink\":[7],\"topo\":[\"SYS\",\"SYS\",\"SYS\",\"SYS\",\"PIX\",\"PIX\",\"X\",\"NV12\"]}"
    ",{\"index\":7,\"uuid\":\"GPU-9c1e0000-0000-4000-8000-000000000007\",\"pci\":\"00000000:9E:00.0\",\"numa\":1,\"nvlink\":[6],\"topo\":[\"SYS\",\"SYS\",\"SYS\",\"SYS\",\"PIX\",\"PIX\",\"NV12\",\"X\"]}]";
static const char EXPECT_TWOSOCKET[] =
    "[{\"index\":0,\"uuid\":\"GPU-2a40c000-0000-4000-8000-000000000000\",\"pci\":\"00000000:17:00.0\",\"numa\":0,\"nvlink\":[],\"topo\":[\"X\",\"NODE\",\"SYS\",\"SYS\"]}"
    ",{\"index\":1,\"uuid\":\"GPU-2a40c000-0000-4000-8000-000000000001\",\"pci\":\"00000000:65:00.0\",\"numa\":0,\"nvlink\":[],\"topo\":[\"NODE\",\"X\",\"SYS\",\"SYS\"]}"
    ",{\"index\":2,\"uuid\":\"GPU-2a40c000-0000-4000-8000-000000000002\",\"pci\":\"00000000:CA:00.0\",\"numa\":1,\"nvlink\":[],\"topo\":[\"SYS\",\"SYS\",\"X\",\"NODE\"]}"
    ",{\"index\":3,\"uuid\":\"GPU-2a40c000-0000-4000-8000-000000000003\",\"pci\":\"00000000:E3:00.0\",\"numa\":1,\"nvlink\":[],\"topo\":[\"SYS\",\"SYS\",\"NODE\",\"X\"]}]";

/* The host's sysfs: each GPU's PCI device and its NUMA node, as the README lays the servers out. */
typedef struct server { const char *name; int n; const char *bus[8]; int numa[8]; const char *expect; } server;
static const server SERVERS[] = {
    {"dgx-a100", 8, {"07", "0f", "47", "4e", "87", "90", "b7", "bd"}, {0, 0, 0, 0, 1, 1, 1, 1}, EXPECT_DGX},
    {"pcie8-nvlink-pairs", 8, {"1b", "1c", "1d", "1e", "9b", "9c", "9d", "9e"}, {0, 0, 0, 0, 1, 1, 1, 1}, EXPECT_PCIE8},
    {"2socket-4gpu", 4, {"17", "65", "ca", "e3"}, {0, 0, 1, 1}, EXPECT_TWOSOCKET},
};

#define GPU0 "GPU-d9a10000-0000-4000-8000-000000000000"
#define GPU1 "GPU-d9a10000-0000-4000-8000-000000000001"
#define GPU2 "GPU-d9a10000-0000-4000-8000-000000000002"
#define PODS_A "default/train-1 main nvidia.com/gpu " GPU0 "," GPU1 "\n"
#define HOLD_A "{\"v\":1,\"pods\":{\"default/train-1\":{\"nvidia.com/gpu\":[\"" GPU0 "\",\"" GPU1 "\"]}}}"
#define PODS_B PODS_A "ml/notebook-3 nb nvidia.com/gpu.shared " GPU2 "::3\n"
#define HOLD_B "{\"v\":1,\"pods\":{\"default/train-1\":{\"nvidia.com/gpu\":[\"" GPU0 "\",\"" GPU1 "\"]}," \
               "\"ml/notebook-3\":{\"nvidia.com/gpu.shared\":[\"" GPU2 "::3\"]}}}"
#define PODS_C "ml/notebook-3 nb nvidia.com/gpu.shared " GPU2 "::3\n"
#define HOLD_C "{\"v\":1,\"pods\":{\"ml/notebook-3\":{\"nvidia.com/gpu.shared\":[\"" GPU2 "::3\"]}}}"

/* ---- the rig: host files, fakes, the agent ---------------------------------------------------------- */

typedef struct rig_opts {
    const char *server;        /* FAKE_NVML_SERVER; NULL: no NVML library at all */
    const char *fail, *mig;    /* FAKE_NVML_FAIL, FAKE_NVML_MIG, or NULL */
    const char *gpus_ann;      /* the Node's tessera.io/gpus before the agent starts, or NULL */
    const char *pods;          /* what the kubelet says the pods hold */
    const char *alloc;         /* what it says it can hand out (fake_pr_set_allocatable), or NULL */
    const char *const *timing; /* deployed_agent_opts.timing */
} rig_opts;

typedef struct rig {
    char root[64];
    fake_api *api;
    fake_pr *pr;
    deployed *d;
    deployed_agent a;
    char nvml_dir[1024], bin[1024];
    char state[128];           /* FAKE_NVML_STATE_FILE: the test changes the machine by writing it */
    rig_opts o;
} rig;

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void nap(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void mkdirs(const char *path) {
    char p[1024];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') { *s = 0; mkdir(p, 0755); *s = '/'; }
    mkdir(p, 0755);
}

static void make_sysfs(const char *root, const server *s) {
    for (int i = 0; s && i < s->n; i++) {
        char p[512];
        snprintf(p, sizeof p, "%s/sys/bus/pci/devices/0000:%s:00.0", root, s->bus[i]);
        mkdirs(p);
        strcat(p, "/numa_node");
        FILE *f = fopen(p, "w");
        if (f) { fprintf(f, "%d\n", s->numa[i]); fclose(f); }
    }
}

static const server *server_named(const char *name) {
    for (size_t i = 0; name && i < sizeof SERVERS / sizeof SERVERS[0]; i++)
        if (!strcmp(SERVERS[i].name, name)) return &SERVERS[i];
    return NULL;
}

static void rig_down(rig *r) {
    if (r->a.running) deployed_agent_stop(&r->a, SIGKILL);
    fake_api_free(r->api);
    fake_pr_stop(r->pr);
    deployed_free(r->d);
    if (r->root[0]) {
        char cmd[200];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", r->root);
        if (system(cmd) != 0) fprintf(stderr, "# could not remove %s\n", r->root);
    }
    memset(r, 0, sizeof *r);
}

/* Start (or restart) the agent on the rig's node. */
static bool rig_start_agent(rig *r, char *err, size_t errlen) {
    const rig_opts *o = &r->o;
    char env[4][192];
    const char *envp[5] = {NULL};
    int ne = 0;
    if (o->server) { snprintf(env[ne], sizeof env[ne], "FAKE_NVML_SERVER=%s", o->server); envp[ne] = env[ne]; ne++; }
    if (o->fail) { snprintf(env[ne], sizeof env[ne], "FAKE_NVML_FAIL=%s", o->fail); envp[ne] = env[ne]; ne++; }
    if (o->mig) { snprintf(env[ne], sizeof env[ne], "FAKE_NVML_MIG=%s", o->mig); envp[ne] = env[ne]; ne++; }
    snprintf(env[ne], sizeof env[ne], "FAKE_NVML_STATE_FILE=%s", r->state);
    envp[ne] = env[ne];
    deployed_agent_opts ao = {.host_root = r->root, .nvml_dir = o->server ? r->nvml_dir : NULL, .nvml_env = envp,
                              .timing = o->timing};
    return deployed_agent_start(r->d, r->api, r->bin, NODE, &ao, &r->a, err, errlen) == 0;
}

/* The fake machine from now on: "" (as started), "MIG=2", "FAIL=init", ... (fake_nvml.c) */
static void rig_machine(rig *r, const char *state) {
    FILE *f = fopen(r->state, "w");
    if (f) { fputs(state, f); fclose(f); }
}

static bool rig_up(rig *r, const rig_opts *o, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    r->o = *o;
    char *bin = r->bin, dir[1024];
    if (!sibling_binary_path("tessera-node-agent", bin, sizeof r->bin) ||
        !sibling_binary_path("fake-nvml/libnvidia-ml.so.1", r->nvml_dir, sizeof r->nvml_dir) ||
        !sibling_binary_path("../deploy", dir, sizeof dir)) {
        snprintf(err, errlen, "build/tessera-node-agent or build/fake-nvml/libnvidia-ml.so.1 missing: make test builds them");
        return false;
    }
    *strrchr(r->nvml_dir, '/') = 0;
    snprintf(r->root, sizeof r->root, "/tmp/tessera-agent-XXXXXX");
    if (!mkdtemp(r->root)) { snprintf(err, errlen, "mkdtemp failed"); r->root[0] = 0; return false; }
    make_sysfs(r->root, server_named(o->server));
    r->pr = fake_pr_start(err, errlen);
    if (!r->pr || fake_pr_set_pods(r->pr, o->pods ? o->pods : "", err, errlen) < 0) return false;
    if (o->alloc && fake_pr_set_allocatable(r->pr, o->alloc, err, errlen) < 0) return false;
    /* the kubelet's directory on the fake host is the fake server's */
    char kdir[256], sock[1024], link[300];
    snprintf(kdir, sizeof kdir, "%s/var/lib/kubelet", r->root);
    mkdirs(kdir);
    snprintf(sock, sizeof sock, "%s", fake_pr_socket(r->pr));
    snprintf(link, sizeof link, "%s/pod-resources", kdir);
    if (symlink(dirname(sock), link) != 0) { snprintf(err, errlen, "symlink %s failed", link); return false; }
    if (!(r->api = fake_api_start(0, err, errlen))) return false;
    cJSON *node = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(node, "metadata");
    cJSON_AddStringToObject(meta, "name", NODE);
    cJSON_AddStringToObject(cJSON_AddObjectToObject(meta, "labels"), "nvidia.com/gpu.present", "true");
    if (o->gpus_ann) cJSON_AddStringToObject(cJSON_AddObjectToObject(meta, "annotations"), "tessera.io/gpus", o->gpus_ann);
    cJSON_AddStringToObject(cJSON_AddObjectToObject(node, "status"), "phase", "Running");
    char *nj = cJSON_PrintUnformatted(node);
    cJSON_Delete(node);
    fake_api_put(r->api, "nodes", nj);
    free(nj);
    static const char *const comps[] = {"node-agent", NULL};
    if (!(r->d = deployed_load_components(dir, comps, err, errlen))) return false;
    snprintf(r->state, sizeof r->state, "%s/nvml-state", r->root); /* absent: the environment's knobs */
    return rig_start_agent(r, err, errlen);
}

/* The Node's annotation now (malloc'd), or NULL. */
static char *annotation(rig *r, const char *key) {
    char *nj = fake_api_get(r->api, "nodes", "", NODE);
    cJSON *n = nj ? cJSON_Parse(nj) : NULL;
    free(nj);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(n, "metadata"), "annotations"), key);
    char *s = cJSON_IsString(v) ? strdup(v->valuestring) : NULL;
    cJSON_Delete(n);
    return s;
}

/* Wait until the annotation equals want; the ms it took, or -1 at the deadline. */
static long wait_annotation(rig *r, const char *key, const char *want, int deadline_ms) {
    uint64_t t0 = now_ms();
    for (;;) {
        char *s = annotation(r, key);
        bool ok = s && !strcmp(s, want);
        free(s);
        if (ok) return (long)(now_ms() - t0);
        if (now_ms() - t0 > (uint64_t)deadline_ms) return -1;
        nap(10);
    }
}

static char *get_text(int port, const char *path, long *code) {
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    return http_call(url, NULL, 5, code);
}

static bool wait_log(rig *r, const char *needle, int deadline_ms) {
    uint64_t t0 = now_ms();
    while (!deployed_agent_log_has(&r->a, needle)) {
        if (now_ms() - t0 > (uint64_t)deadline_ms) return false;
        nap(10);
    }
    return true;
}

/* A metric's value on /metrics ("name{labels}" exactly as printed), or -1. */
static double metric(rig *r, const char *series) {
    long code;
    char *m = get_text(r->a.ops_port, "/metrics", &code);
    double v = -1;
    char want[256];
    snprintf(want, sizeof want, "\n%s ", series);
    const char *p = m ? strstr(m, want) : NULL;
    if (p) v = strtod(p + strlen(want), NULL);
    free(m);
    return v;
}

/* The metric reaches value within the deadline (the agent has taken in the answer to its PATCH: the Node shows
 * a write a moment before the agent knows it succeeded). */
static bool wait_metric(rig *r, const char *series, double value) {
    uint64_t t0 = now_ms();
    while (metric(r, series) != value) {
        if (now_ms() - t0 > WAIT_MS) return false;
        nap(20);
    }
    return true;
}

/* /readyz answers 200 within the deadline. */
static bool agent_ready(rig *r) {
    uint64_t t0 = now_ms();
    for (;;) {
        long code;
        free(get_text(r->a.ops_port, "/readyz", &code));
        if (code == 200) return true;
        if (now_ms() - t0 > WAIT_MS) return false;
        nap(20);
    }
}

#define PATCHES(r) fake_api_requests((r)->api, "PATCH /api/v1/nodes/" NODE)

/* ---- tests ------------------------------------------------------------------------------------------ */


/* What tessera-extender's model reads from what the agent wrote: the server's Node as the GPU operator publishes it
 * (tests/fixtures/nodes/topo-<server>.json: GFD labels, allocatable) with the agent's tessera.io/gpus in place of the
 * fixture's, through model_node_from_json. "" when the node takes pods and every pair of GPUs is linked as the
 * reference server (topo_helpers.h, written independently of the agent) says, else what differs. */
static void model_reads_agent_topology(const server *s, test_server ts, const char *ann, char *why, size_t len) {
    char rel[128];
    snprintf(rel, sizeof rel, "nodes/topo-%s.json", s->name);
    char *t = test_fixture(rel, NULL);
    cJSON *node = t ? cJSON_Parse(t) : NULL;
    free(t);
    cJSON *anns = cJSON_GetObjectItem(cJSON_GetObjectItem(node, "metadata"), "annotations");
    why[0] = 0;
    if (!anns) {
        snprintf(why, len, "fixture %s has no annotations", rel);
        cJSON_Delete(node);
        return;
    }
    cJSON_ReplaceItemInObject(anns, "tessera.io/gpus", cJSON_CreateString(ann));
    char err[256] = "";
    model_node *n = model_node_from_json(node, model_catalog_default(), err, sizeof err);
    cJSON_Delete(node);
    if (!n) snprintf(why, len, "not a node: %.200s", err);
    else if (n->reason[0]) snprintf(why, len, "node reason: %.200s", n->reason);
    else if (!n->topo) snprintf(why, len, "no topology");
    else if (n->ngpus != s->n) snprintf(why, len, "%d GPUs, want %d", n->ngpus, s->n);
    for (int a = 0; n && !why[0] && a < n->ngpus; a++)
        for (int b = 0; b < n->ngpus && !why[0]; b++) {
            if (a == b) continue;
            model_link want = test_server_link(ts, a, b), got = model_topo_link(n, a, b);
            int links = n->topo->nvlinks[a][b];
            if (got != want || (want == MODEL_LINK_NVLINK && links != 12))
                snprintf(why, len, "GPUs %d,%d: link %d (%d NVLinks), want %d", a, b, (int)got, links, (int)want);
        }
    model_node_free(n);
}

TEST(node_agent_three_servers_publish_the_reference_topology) {
    const test_server ts[] = {TEST_DGX_A100, TEST_PCIE8, TEST_2SOCKET};
    for (size_t i = 0; i < sizeof SERVERS / sizeof SERVERS[0]; i++) {
        rig r;
        char err[512];
        rig_opts o = {.server = SERVERS[i].name, .pods = PODS_A};
        bool up = rig_up(&r, &o, err, sizeof err);
        CHECK_MSG(up, "%s: %s", SERVERS[i].name, err);
        /* the DaemonSet's own timing: the first write comes at once, both annotations in one PATCH */
        long ms = wait_annotation(&r, "tessera.io/gpus", SERVERS[i].expect, WAIT_MS);
        char *got = annotation(&r, "tessera.io/gpus");
        CHECK_MSG(ms >= 0, "%s: tessera.io/gpus is\n%s\nwant\n%s", SERVERS[i].name, got ? got : "(none)", SERVERS[i].expect);
        /* and the extender's model reads it as the server it is */
        char why[256] = "no annotation";
        if (got) model_reads_agent_topology(&SERVERS[i], ts[i], got, why, sizeof why);
        CHECK_MSG(!why[0], "%s: %s", SERVERS[i].name, why);
        free(got);
        CHECK(wait_annotation(&r, "tessera.io/holdings", HOLD_A, WAIT_MS) >= 0);
        CHECK(wait_metric(&r, "tessera_node_agent_writes_total{annotation=\"tessera.io/holdings\"}", 1));
        CHECK(metric(&r, "tessera_node_agent_writes_total{annotation=\"tessera.io/gpus\"}") == 1);
        CHECK_INT(PATCHES(&r), 1);
        long code;
        char *ready = get_text(r.a.ops_port, "/readyz", &code);
        CHECK_MSG(code == 200 && ready && !strcmp(ready, "ok\n"), "/readyz %ld: %s", code, ready ? ready : "");
        free(ready);
        CHECK_INT(deployed_agent_stop(&r.a, SIGTERM), 0);
        rig_down(&r);
    }
}

/* The keys an operator (or GFD) wrote stay, matched by uuid; a MIG GPU with its "mig" list is fine. */
TEST(node_agent_keeps_mig_and_memory_keys) {
    const char *before =
        "[{\"index\":0,\"uuid\":\"" GPU0 "\",\"memory_mib\":81920,\"mig\":[{\"profile\":\"3g.40gb\",\"start\":4}],"
        "\"mig_dynamic\":true},{\"uuid\":\"GPU-d9a10000-0000-4000-8000-000000000003\",\"product\":\"NVIDIA-A100-SXM4-80GB\"}]";
    rig r;
    char err[512];
    rig_opts o = {.server = "dgx-a100", .mig = "0", .gpus_ann = before, .pods = PODS_A};
    bool up = rig_up(&r, &o, err, sizeof err);
    CHECK_MSG(up, "%s", err);
    /* the reference DGX annotation with GPU 0's and GPU 3's own keys added after the agent's */
    cJSON *want = cJSON_Parse(EXPECT_DGX);
    cJSON *g0 = cJSON_GetArrayItem(want, 0), *g3 = cJSON_GetArrayItem(want, 3);
    cJSON_AddNumberToObject(g0, "memory_mib", 81920);
    cJSON_AddItemToObject(g0, "mig", cJSON_Parse("[{\"profile\":\"3g.40gb\",\"start\":4}]"));
    cJSON_AddBoolToObject(g0, "mig_dynamic", true);
    cJSON_AddStringToObject(g3, "product", "NVIDIA-A100-SXM4-80GB");
    char *ws = cJSON_PrintUnformatted(want);
    cJSON_Delete(want);
    long ms = wait_annotation(&r, "tessera.io/gpus", ws, WAIT_MS);
    char *got = annotation(&r, "tessera.io/gpus");
    bool same = ms >= 0;
    if (!same) fprintf(stderr, "# got  %s\n# want %s\n", got ? got : "(none)", ws);
    free(got);
    free(ws);
    CHECK(same);
    CHECK_INT(deployed_agent_stop(&r.a, SIGTERM), 0);
    rig_down(&r);
}

/* A MIG GPU whose "mig" nobody wrote: no topology for the node, said in the log and /readyz; holdings still. */
TEST(node_agent_mig_gpu_without_mig_list_writes_no_topology) {
    rig r;
    char err[512];
    rig_opts o = {.server = "dgx-a100", .mig = "2", .pods = PODS_A};
    bool up = rig_up(&r, &o, err, sizeof err);
    CHECK_MSG(up, "%s", err);
    CHECK(wait_annotation(&r, "tessera.io/holdings", HOLD_A, WAIT_MS) >= 0);
    CHECK(wait_log(&r, "event=topology-refused reason=\"GPU 2 (GPU-d9a10000-0000-4000-8000-000000000002) has MIG enabled", WAIT_MS));
    char *g = annotation(&r, "tessera.io/gpus");
    CHECK_MSG(g == NULL, "tessera.io/gpus written: %s", g);
    long code;
    char *ready = get_text(r.a.ops_port, "/readyz", &code);
    CHECK_MSG(code == 503 && ready && strstr(ready, "topology: GPU 2 (") && !strstr(ready, "nvml:"),
              "/readyz %ld: %s", code, ready ? ready : "");
    free(ready);
    CHECK(metric(&r, "tessera_node_agent_degraded{component=\"topology\"}") == 1);
    CHECK_INT(deployed_agent_stop(&r.a, SIGTERM), 0);
    rig_down(&r);
}

/* No NVML library (a node without driver, or a pod without the NVIDIA runtime), or nvmlInit failing: no topology
 * write, the reason in the log and on /readyz, and the holdings published all the same. */
TEST(node_agent_without_nvml_still_publishes_holdings) {
    static const struct { const char *server, *fail, *why; } cases[] = {
        {NULL, NULL, "libnvidia-ml.so.1 not found"},
        {"dgx-a100", "init", "nvmlInit_v2: Driver Not Loaded"},
        {"dgx-a100", "topology", "nvmlDeviceGetTopologyCommonAncestor(GPU 0, GPU 1): Unknown Error"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rig r;
        char err[512];
        rig_opts o = {.server = cases[i].server, .fail = cases[i].fail, .pods = PODS_A};
        bool up = rig_up(&r, &o, err, sizeof err);
        CHECK_MSG(up, "%s", err);
        CHECK(wait_annotation(&r, "tessera.io/holdings", HOLD_A, WAIT_MS) >= 0);
        char needle[200];
        snprintf(needle, sizeof needle, "event=nvml-failed reason=\"%s", cases[i].why);
        CHECK_MSG(wait_log(&r, needle, WAIT_MS), "no log line with %s", needle);
        char *g = annotation(&r, "tessera.io/gpus");
        CHECK_MSG(g == NULL, "tessera.io/gpus written: %s", g);
        CHECK(wait_metric(&r, "tessera_node_agent_writes_total{annotation=\"tessera.io/holdings\"}", 1));
        long code;
        char *ready = get_text(r.a.ops_port, "/readyz", &code);
        snprintf(needle, sizeof needle, "nvml: %s", cases[i].why);
        CHECK_MSG(code == 503 && ready && strstr(ready, needle) && !strstr(ready, "pod-resources:") && !strstr(ready, "api:"),
                  "/readyz %ld: %s", code, ready ? ready : "");
        free(ready);
        /* alive all the same: the liveness probe must not restart it for a missing driver */
        char *health = get_text(r.a.ops_port, "/healthz", &code);
        free(health);
        CHECK_INT(code, 200);
        CHECK(metric(&r, "tessera_node_agent_errors_total{component=\"nvml\"}") >= 1);
        CHECK_INT(deployed_agent_stop(&r.a, SIGTERM), 0);
        rig_down(&r);
    }
}

/* Changes within --min-write-interval coalesce into one write of the newest holdings. */
TEST(node_agent_coalesces_holdings_changes) {
    char poll[16], minw[16];
    const char *const timing[] = {"--poll-interval", dur(poll, sizeof poll, 100), "--min-write-interval",
                                  dur(minw, sizeof minw, 2000), NULL};
    rig r;
    char err[512];
    rig_opts o = {.server = "2socket-4gpu", .pods = PODS_A, .timing = timing};
    bool up = rig_up(&r, &o, err, sizeof err);
    CHECK_MSG(up, "%s", err);
    CHECK(wait_annotation(&r, "tessera.io/holdings", HOLD_A, WAIT_MS) >= 0);
    uint64_t first = now_ms();
    CHECK_INT(PATCHES(&r), 1);
    CHECK(fake_pr_set_pods(r.pr, PODS_B, err, sizeof err) == 0);
    nap(S(500)); /* several polls see B */
    CHECK(fake_pr_set_pods(r.pr, PODS_C, err, sizeof err) == 0);
    uint64_t changed = now_ms();
    CHECK(wait_annotation(&r, "tessera.io/holdings", HOLD_C, WAIT_MS) >= 0);
    uint64_t written = now_ms();
    /* B was never written: one PATCH since the first, and not before the interval was over */
    CHECK_INT(PATCHES(&r), 2);
    /* not before the interval: less the ms by which the test may have seen the first write late, stretched by load */
    CHECK_MSG(written - first >= (uint64_t)(S(2000) - test_slack_ms(100)), "second write %llu ms after the first (interval %d ms)",
              (unsigned long long)(written - first), S(2000));
    fprintf(stderr, "# coalesced: 2 changes, 1 write, %llu ms after the last change, %llu ms after the previous write\n",
            (unsigned long long)(written - changed), (unsigned long long)(written - first));
    /* nothing changes: no more writes */
    nap(S(2500));
    CHECK_INT(PATCHES(&r), 2);
    CHECK_INT(deployed_agent_stop(&r.a, SIGTERM), 0);
    rig_down(&r);
}

/* The API fails: retried with back-off (the request rate stays bounded), and the newest value lands once it
 * recovers. */
TEST(node_agent_api_errors_then_recovery_loses_nothing) {
    char poll[16], minw[16];   /* the back-off (3 x the interval) is the window in which /readyz must say 503 */
    const char *const timing[] = {"--poll-interval", dur(poll, sizeof poll, 100), "--min-write-interval",
                                  dur(minw, sizeof minw, 300), NULL};
    rig r;
    char err[512];
    rig_opts o = {.server = "2socket-4gpu", .pods = PODS_A, .timing = timing};
    bool up = rig_up(&r, &o, err, sizeof err);
    CHECK_MSG(up, "%s", err);
    CHECK(wait_annotation(&r, "tessera.io/holdings", HOLD_A, WAIT_MS) >= 0);
    CHECK_INT(PATCHES(&r), 1);
    fake_api_inject(r.api, "PATCH /api/v1/nodes/" NODE, 500, 3);
    CHECK(fake_pr_set_pods(r.pr, PODS_B, err, sizeof err) == 0);
    CHECK(wait_log(&r, "event=write-failed op=patch node=" NODE " status=500 attempt=1", WAIT_MS));
    long code;
    char *ready = get_text(r.a.ops_port, "/readyz", &code);
    CHECK_MSG(code == 503 && ready && strstr(ready, "api: patch node " NODE ": HTTP 500"), "/readyz %ld: %s", code,
              ready ? ready : "");
    free(ready);
    nap(S(200));
    CHECK(fake_pr_set_pods(r.pr, PODS_C, err, sizeof err) == 0); /* changes keep coming while it fails */
    uint64_t t0 = now_ms();
    CHECK(wait_annotation(&r, "tessera.io/holdings", HOLD_C, WAIT_MS) >= 0);
    /* 3 failures back off 300, 600, 1200 ms: then the 4th attempt succeeds; exactly 1 + 3 + 1 PATCHes */
    fprintf(stderr, "# API erring 3 times: recovered write %llu ms after the last change\n",
            (unsigned long long)(now_ms() - t0));
    /* ready again once the agent has its answer (the Node shows the write a moment before) */
    CHECK(agent_ready(&r));
    CHECK_INT(PATCHES(&r), 5);
    CHECK(metric(&r, "tessera_node_agent_write_errors_total") == 3);
    /* the API down altogether, then back: the pending value is written after it returns */
    fake_api_down(r.api);
    CHECK(fake_pr_set_pods(r.pr, PODS_A, err, sizeof err) == 0);
    CHECK(wait_log(&r, "event=write-failed op=get node=" NODE " status=-1", WAIT_MS));
    CHECK(fake_api_up(r.api, err, sizeof err) == 0);
    CHECK(wait_annotation(&r, "tessera.io/holdings", HOLD_A, WAIT_MS) >= 0);
    CHECK_INT(deployed_agent_stop(&r.a, SIGTERM), 0);
    rig_down(&r);
}

/* The DaemonSet's own timing (5 s polls, 10 s between writes): a change right after a write waits out the
 * interval, then lands with the next poll. ~10 s. */
TEST(node_agent_daemonset_timing) {
    rig r;
    char err[512];
    rig_opts o = {.server = "dgx-a100", .pods = PODS_A};
    bool up = rig_up(&r, &o, err, sizeof err);
    CHECK_MSG(up, "%s", err);
    CHECK_STR(deployed_agent_arg(r.d, "--min-write-interval"), "10s");
    CHECK_STR(deployed_agent_arg(r.d, "--poll-interval"), "5s");
    CHECK(wait_annotation(&r, "tessera.io/holdings", HOLD_A, WAIT_MS) >= 0);
    uint64_t first = now_ms();
    CHECK(fake_pr_set_pods(r.pr, PODS_B, err, sizeof err) == 0);
    long ms = wait_annotation(&r, "tessera.io/holdings", HOLD_B, 15000 + WAIT_MS);
    CHECK(ms >= 0);
    uint64_t gap = now_ms() - first;
    /* at most interval + a poll + 1 s; the slack on either side is the time the test may have seen a write late */
    CHECK_MSG(gap >= (uint64_t)(10000 - test_slack_ms(500)) && gap <= (uint64_t)(16000 + test_slack_ms(1000)),
              "second write %llu ms after the first", (unsigned long long)gap);
    fprintf(stderr, "# DaemonSet timing: change -> annotation %ld ms (10 s write interval, 5 s polls)\n", ms);
    CHECK_INT(PATCHES(&r), 2);
    CHECK_INT(deployed_agent_stop(&r.a, SIGTERM), 0);
    rig_down(&r);
}

/* The topology is read again every --topology-interval: a MIG reconfiguration without a "mig" list is refused
 * (the Node keeps its last good annotation), the operator's list makes it whole again (and since the Node then
 * says what the agent would write, nothing is written); the driver going away and coming back. */
TEST(node_agent_rereads_topology) {
    char poll[16], minw[16], topo[16];
    const char *const timing[] = {"--poll-interval", dur(poll, sizeof poll, 100), "--min-write-interval",
                                  dur(minw, sizeof minw, 300), "--topology-interval", dur(topo, sizeof topo, 300), NULL};
    rig r;
    char err[512];
    rig_opts o = {.server = "dgx-a100", .pods = PODS_A, .timing = timing};
    bool up = rig_up(&r, &o, err, sizeof err);
    CHECK_MSG(up, "%s", err);
    CHECK(wait_annotation(&r, "tessera.io/gpus", EXPECT_DGX, WAIT_MS) >= 0);
    CHECK(wait_annotation(&r, "tessera.io/holdings", HOLD_A, WAIT_MS) >= 0);
    rig_machine(&r, "MIG=2\n");
    CHECK(wait_log(&r, "event=topology-refused reason=\"GPU 2 (", WAIT_MS));
    char *g = annotation(&r, "tessera.io/gpus");
    CHECK_STR(g, EXPECT_DGX);
    free(g);
    /* the operator lists GPU 2's instances */
    cJSON *want = cJSON_Parse(EXPECT_DGX);
    cJSON_AddItemToObject(cJSON_GetArrayItem(want, 2), "mig", cJSON_Parse("[{\"profile\":\"7g.80gb\",\"start\":0}]"));
    char *ws = cJSON_PrintUnformatted(want);
    cJSON_Delete(want);
    cJSON *patch = cJSON_CreateObject();
    cJSON_AddStringToObject(cJSON_AddObjectToObject(cJSON_AddObjectToObject(patch, "metadata"), "annotations"),
                            "tessera.io/gpus", ws);
    char *ps = cJSON_PrintUnformatted(patch);
    cJSON_Delete(patch);
    int patches = PATCHES(&r);
    CHECK(fake_api_patch(r.api, "nodes", "", NODE, ps) > 0);
    free(ps);
    CHECK(wait_log(&r, "event=topology-accepted", WAIT_MS));
    nap(S(700));
    g = annotation(&r, "tessera.io/gpus");
    bool kept = g && !strcmp(g, ws);
    free(g);
    free(ws);
    CHECK(kept);
    CHECK_INT(PATCHES(&r), patches); /* the Node already said it: no write */
    /* the driver goes away while a comparison with the Node waits out failed GETs: once the API answers
     * again there is nothing to compare, and no busy loop of API calls; then the driver comes back */
    fake_api_inject(r.api, "GET /api/v1/nodes/" NODE, 500, 2);
    CHECK(wait_log(&r, "event=write-failed op=get", WAIT_MS));
    rig_machine(&r, "MIG=2\nFAIL=init\n");
    CHECK(wait_log(&r, "event=nvml-failed reason=\"nvmlInit_v2: Driver Not Loaded", WAIT_MS));
    nap(S(1500)); /* the back-off (300 + 600 ms) is over */
    int before = fake_api_requests(r.api, "");
    nap(S(1500));
    int calls = fake_api_requests(r.api, "") - before;
    CHECK_MSG(calls <= 2, "%d API calls in %d ms with nothing to write", calls, S(1500));
    long code;
    char *ready = get_text(r.a.ops_port, "/readyz", &code);
    CHECK_MSG(code == 503 && ready && strstr(ready, "nvml: nvmlInit_v2: Driver Not Loaded"), "/readyz %ld: %s", code,
              ready ? ready : "");
    free(ready);
    rig_machine(&r, "MIG=2\n");
    CHECK(agent_ready(&r));
    CHECK_INT(deployed_agent_stop(&r.a, SIGTERM), 0);
    rig_down(&r);
}

/* A restarted agent finds the Node already saying what it would write: no PATCH. */
TEST(node_agent_restart_writes_nothing_unchanged) {
    char poll[16], minw[16];
    const char *const timing[] = {"--poll-interval", dur(poll, sizeof poll, 100), "--min-write-interval",
                                  dur(minw, sizeof minw, 300), NULL};
    rig r;
    char err[512];
    rig_opts o = {.server = "pcie8-nvlink-pairs", .pods = PODS_B, .timing = timing};
    bool up = rig_up(&r, &o, err, sizeof err);
    CHECK_MSG(up, "%s", err);
    CHECK(wait_annotation(&r, "tessera.io/gpus", EXPECT_PCIE8, WAIT_MS) >= 0);
    CHECK(wait_annotation(&r, "tessera.io/holdings", HOLD_B, WAIT_MS) >= 0);
    CHECK_INT(PATCHES(&r), 1);
    CHECK_INT(deployed_agent_stop(&r.a, SIGTERM), 0);
    up = rig_start_agent(&r, err, sizeof err);
    CHECK_MSG(up, "%s", err);
    CHECK(agent_ready(&r)); /* it has read both and compared them with the Node */
    nap(S(600));
    CHECK_INT(PATCHES(&r), 1);
    CHECK(fake_api_requests(r.api, "GET /api/v1/nodes/" NODE) >= 2);
    CHECK_INT(deployed_agent_stop(&r.a, SIGTERM), 0);
    rig_down(&r);
}

/* The kubelet's allocatable ids are checked against NVML's UUIDs: device ids that are not UUIDs (the device
 * plugin's deviceIDStrategy=index) or GPUs NVML does not list are logged; replicas and MIG devices are fine. */
TEST(node_agent_checks_allocatable_ids_against_nvml) {
    static const struct { const char *alloc, *warn; } cases[] = {
        {"nvidia.com/gpu " GPU0 "," GPU1 "\nnvidia.com/gpu.shared " GPU2 "::0," GPU2 "::1\n"
         "nvidia.com/mig-3g.40gb MIG-aaaa0000-0000-4000-8000-000000000000\n", NULL},
        {"nvidia.com/gpu 0,1,2\n", "the kubelet's device ids are not GPU UUIDs (3, e.g. nvidia.com/gpu 0): the device "
                                   "plugin's deviceIDStrategy must be uuid"},
        {"nvidia.com/gpu " GPU0 ",GPU-ffff0000-0000-4000-8000-000000000009\n",
         "the kubelet offers 1 device(s) on GPUs NVML does not list (e.g. nvidia.com/gpu GPU-ffff0000-0000-4000-8000-000000000009)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rig r;
        char err[512];
        rig_opts o = {.server = "dgx-a100", .pods = PODS_A, .alloc = cases[i].alloc};
        bool up = rig_up(&r, &o, err, sizeof err);
        CHECK_MSG(up, "%s", err);
        CHECK(wait_metric(&r, "tessera_node_agent_writes_total{annotation=\"tessera.io/holdings\"}", 1));
        if (cases[i].warn) {
            char needle[400];
            snprintf(needle, sizeof needle, "event=allocatable-mismatch reason=\"%s", cases[i].warn);
            CHECK_MSG(wait_log(&r, needle, WAIT_MS), "case %zu: no log line %s", i, needle);
        } else {
            nap(200);
            CHECK(!deployed_agent_log_has(&r.a, "allocatable-mismatch"));
        }
        /* published all the same: the kubelet's word is what the holdings say */
        CHECK(wait_annotation(&r, "tessera.io/holdings", HOLD_A, WAIT_MS) >= 0);
        CHECK_INT(deployed_agent_stop(&r.a, SIGTERM), 0);
        rig_down(&r);
    }
}
