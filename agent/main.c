/* main.c -- tessera-node-agent: publishes a GPU node's own truth on its Node object (issue 22):
 *   tessera.io/gpus      each GPU's UUID, PCI bus id, NUMA node, NVLink peers and PCIe relationships (NVML and
 *                        sysfs; agent/topology.h), merged with what the annotation already carries;
 *   tessera.io/holdings  which nvidia.com/<resource> devices each pod holds (the kubelet's Pod Resources API;
 *                        agent/holdings.h).
 * One thread runs the loop below; libmicrohttpd's thread serves /healthz, /readyz and /metrics (agent/status.h).
 *
 * Write discipline (the API server is shared by every node): an annotation is written only when it differs from
 * what the Node carries (read with a GET right before the PATCH, so a restart or a concurrent edit of the other
 * keys is seen), both annotations in one merge PATCH, at most one GET+PATCH per --min-write-interval (a GET that
 * finds nothing to write counts too): changes seen in
 * between replace the pending value (coalesce), and the newest is written when the interval has passed. A
 * failed GET or PATCH keeps the pending values and retries after min-write-interval x 2^(failures-1), at most
 * 5 minutes: the request rate stays bounded while the API fails, and nothing is lost when it recovers.
 */
#include "agent/holdings.h"
#include "kube/client.h"
#include "kube/log.h"
#include "kube/pod.h"
#include "agent/nvml.h"
#include "agent/podresources.h"
#include "agent/status.h"
#include "agent/topology.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define AGENT_ANN_HOLDINGS "tessera.io/holdings"
#define BACKOFF_MAX_MS (5 * 60 * 1000)
#define NVML_RETRY_MAX_MS 60000         /* a failed NVML read is retried this often at most, not every 10 min */
#define MAX_HOLDINGS_BYTES (128 * 1024)  /* a Node's annotations share 256 KiB with everyone else's */

static const char usage[] =
"usage: tessera-node-agent [flags]\n"
"Runs on each GPU node (deploy/node-agent/, a DaemonSet) and publishes on the node's own Node object:\n"
"  " AGENT_ANN_GPUS "      the GPUs' topology: per GPU (NVML index order) index, uuid, pci, numa, nvlink and\n"
"                       topo (the link to every other GPU as `nvidia-smi topo -m` names it: NV<n>, PIX, PXB,\n"
"                       PHB, NODE, SYS), read from NVML (libnvidia-ml.so.1, loaded at run time) and sysfs;\n"
"                       other keys already there (mig, mig_dynamic, memory_mib, product) are kept;\n"
"  " AGENT_ANN_HOLDINGS "  which nvidia.com/<resource> device ids each pod holds, from the kubelet's Pod Resources API\n"
"                       ({\"v\":1,\"pods\":{\"ns/name\":{\"nvidia.com/gpu\":[\"GPU-...\"]}}}); at each topology\n"
"                       read, the kubelet's allocatable device ids are checked against NVML's UUIDs (logged).\n"
"An annotation is written only when it changed, at most once per --min-write-interval (changes in between\n"
"coalesce; failed writes are retried with back-off and nothing is lost). tessera-extender reads both.\n"
"\n"
"  --node-name NAME            the Node to annotate (default $NODE_NAME, from the downward API)\n"
"  --pod-resources-socket PATH the kubelet's Pod Resources socket (default " AGENT_PR_SOCKET ")\n"
"  --sysfs-root DIR            where sysfs is mounted; NUMA nodes are read from\n"
"                              DIR/bus/pci/devices/<bus id>/numa_node (default /sys)\n"
"  --poll-interval D           how often the holdings are read (default 5s; the kubelet rate-limits the\n"
"                              Pod Resources API, so not below 1s in production)\n"
"  --topology-interval D       how often NVML is read again (default 10m; MIG reconfiguration changes the\n"
"                              GPUs); after a failed read, again within 1m\n"
"  --min-write-interval D      the least time between two writes to the Node (default 10s)\n"
"  --metrics-listen HOST:PORT  serve GET /healthz, /readyz (what is degraded: nvml, pod-resources, api,\n"
"                              topology) and /metrics here (default 0.0.0.0:9090; \"\" = off)\n"
"  --kube-api URL              API server URL, e.g. https://10.0.0.1:6443 (default: in-cluster config from\n"
"                              KUBERNETES_SERVICE_HOST/PORT and the service account)\n"
"  --token-file FILE           bearer token file, re-read on every request (default in a cluster: the\n"
"                              service account's token)\n"
"  --ca-file FILE              CA bundle for the API server's certificate (default in a cluster: the\n"
"                              service account's ca.crt; else the system CAs)\n"
KUBE_OPTIONS_TLS_HELP
"  --once                      read both once, print them on stdout (\"<annotation> <value>\" lines) and\n"
"                              exit without talking to the API server (1 if either could not be read): a\n"
"                              check to run with kubectl exec\n"
"  --log-level LEVEL           debug | info | warn | error | off (default info)\n"
"  --help                      this text\n"
"D is a duration: 500ms, 5s, 10m, 1h (a bare number is seconds).\n"
"\n"
"Needs: the NVIDIA container runtime with NVIDIA_VISIBLE_DEVICES=all and NVIDIA_DRIVER_CAPABILITIES=utility\n"
"(it mounts libnvidia-ml.so.1), the hostPath /var/lib/kubelet/pod-resources (the socket is root's: the agent\n"
"runs as uid 0 with no capabilities), and RBAC get and patch on nodes. Without NVML it still publishes the\n"
"holdings (and /readyz says why the topology is missing); without the socket it still publishes the topology.\n"
"Exit status: 0 after SIGTERM/SIGINT, 2 bad flags or no API configuration.\n";

typedef struct agent_cfg {
    const char *node, *socket, *sysfs, *metrics_listen;
    int poll_ms, topo_ms, min_write_ms;
    kube_config kube;
    kube_client *api;       /* made from kube once the flags are read */
} agent_cfg;

typedef struct agent_state {
    agent_gpus gpus;
    bool gpus_ok;
    bool topo_check;        /* a fresh NVML read is to be compared with the Node */
    char *topo_refused;     /* the latest refusal's reason (logged once per reason) */
    char *nvml_err;         /* the latest NVML error (logged once per reason) */
    char *pr_err;           /* the latest Pod Resources error (idem) */
    char *alloc_note;       /* the latest finding about the kubelet's allocatable device ids (idem) */
    char *holdings_pending; /* newest holdings read, not on the Node yet */
    char *holdings_written; /* what the Node carries, as last seen */
    uint64_t next_topo, next_poll, next_write;
    int failures;           /* consecutive failed write attempts */
} agent_state;

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Replace *slot with a copy of s when it differs; true when it changed (so the caller logs it once). */
static bool remember(char **slot, const char *s) {
    if (*slot && s && !strcmp(*slot, s)) return false;
    if (!*slot && !s) return false;
    free(*slot);
    *slot = s ? strdup(s) : NULL;
    return true;
}

/* The kubelet's allocatable whole-GPU ids against NVML's UUIDs: the holdings map a pod's devices to GPUs by UUID,
 * which fails when the device plugin names devices otherwise (deviceIDStrategy=index) or offers a GPU NVML does
 * not see. Logged when the finding changes; it changes nothing else (the kubelet's word is what is published). */
static void check_allocatable(const agent_cfg *c, agent_state *a) {
    char err[1024], note[1024] = "";
    char *js = agent_allocatable_json(c->socket, 5000, err, sizeof err);
    cJSON *alloc = js ? cJSON_Parse(js) : NULL;
    free(js);
    if (!alloc) return; /* the holdings poll reports the socket's troubles */
    const cJSON *res, *id;
    int unknown = 0, not_uuid = 0;
    char first[160] = "";
    cJSON_ArrayForEach(res, alloc) {
        cJSON_ArrayForEach(id, res) {
            if (!cJSON_IsString(id) || !strncmp(id->valuestring, "MIG-", 4)) continue; /* MIG: NVML lists GPUs */
            char base[160];
            snprintf(base, sizeof base, "%s", id->valuestring);
            char *rep = strstr(base, "::"); /* a time-slice/MPS replica of the GPU */
            if (rep) *rep = 0;
            bool known = false;
            for (int i = 0; i < a->gpus.n && !known; i++) known = !strcmp(a->gpus.gpu[i].uuid, base);
            if (known) continue;
            if (strncmp(base, "GPU-", 4) != 0) not_uuid++;
            else unknown++;
            if (!first[0]) snprintf(first, sizeof first, "%s %s", res->string ? res->string : "?", id->valuestring);
        }
    }
    cJSON_Delete(alloc);
    if (not_uuid)
        snprintf(note, sizeof note, "the kubelet's device ids are not GPU UUIDs (%d, e.g. %s): the device plugin's "
                 "deviceIDStrategy must be uuid for the holdings to name GPUs", not_uuid, first);
    else if (unknown)
        snprintf(note, sizeof note, "the kubelet offers %d device(s) on GPUs NVML does not list (e.g. %s)", unknown, first);
    if (remember(&a->alloc_note, note[0] ? note : NULL) && note[0])
        kube_log(KUBE_LOG_WARN, "event=allocatable-mismatch reason=\"%s\"", note);
}

static void read_topology(const agent_cfg *c, agent_state *a, uint64_t now) {
    char err[1024];
    if (agent_nvml_read(&a->gpus, err, sizeof err) < 0) {
        a->gpus_ok = false;
        a->topo_check = false; /* nothing to compare; the Node keeps what it has */
        agent_status_fail(AGENT_NVML, err);
        if (remember(&a->nvml_err, err))
            kube_log(KUBE_LOG_ERROR, "event=nvml-failed reason=\"%s\" effect=\"no topology is written; holdings "
                     "still are\" retry_in_ms=%d", err, c->topo_ms < NVML_RETRY_MAX_MS ? c->topo_ms : NVML_RETRY_MAX_MS);
        a->next_topo = now + (uint64_t)(c->topo_ms < NVML_RETRY_MAX_MS ? c->topo_ms : NVML_RETRY_MAX_MS);
        return;
    }
    if (remember(&a->nvml_err, NULL) || !a->gpus_ok)
        kube_log(KUBE_LOG_INFO, "event=nvml-read gpus=%d", a->gpus.n);
    agent_status_ok(AGENT_NVML);
    a->gpus_ok = true;
    a->topo_check = true;
    check_allocatable(c, a);
    a->next_topo = now + (uint64_t)c->topo_ms;
}

static void poll_holdings(const agent_cfg *c, agent_state *a) {
    char err[1024];
    int timeout = c->poll_ms < 10000 ? (c->poll_ms > 1000 ? c->poll_ms : 1000) : 10000;
    char *h = agent_holdings_json(c->socket, timeout, err, sizeof err);
    if (h && strlen(h) > MAX_HOLDINGS_BYTES) {
        snprintf(err, sizeof err, "the holdings record is %zu bytes, more than the %d a Node annotation may take "
                 "here", strlen(h), MAX_HOLDINGS_BYTES);
        free(h);
        h = NULL;
    }
    if (!h) {
        agent_status_fail(AGENT_PODRES, err);
        if (remember(&a->pr_err, err)) kube_log(KUBE_LOG_ERROR, "event=pod-resources-failed reason=\"%s\"", err);
        return;
    }
    if (remember(&a->pr_err, NULL)) kube_log(KUBE_LOG_INFO, "event=pod-resources-ok");
    agent_status_ok(AGENT_PODRES);
    if (a->holdings_written && !strcmp(h, a->holdings_written)) {
        free(a->holdings_pending); /* changed and changed back before it was written: nothing to write */
        a->holdings_pending = NULL;
        free(h);
    } else if (a->holdings_pending && !strcmp(h, a->holdings_pending)) {
        free(h);
    } else {
        kube_log(KUBE_LOG_DEBUG, "event=holdings-changed bytes=%zu%s", strlen(h),
                 a->holdings_pending ? " coalesced=true" : "");
        free(a->holdings_pending);
        a->holdings_pending = h;
    }
}

static const char *annotation_of(const cJSON *node, const char *key) {
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(node, "metadata");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(meta, "annotations"), key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void write_failed(const agent_cfg *c, agent_state *a, uint64_t now, const char *what, int status,
                         const char *err) {
    a->failures++;
    uint64_t delay = (uint64_t)c->min_write_ms << (a->failures - 1 < 16 ? a->failures - 1 : 16);
    if (delay > BACKOFF_MAX_MS) delay = BACKOFF_MAX_MS < (uint64_t)c->min_write_ms ? (uint64_t)c->min_write_ms : BACKOFF_MAX_MS;
    a->next_write = now + delay;
    char why[1200];
    snprintf(why, sizeof why, "%s node %s: %s", what, c->node, err);
    agent_status_fail(AGENT_API, why);
    agent_status_write_failed();
    kube_log(KUBE_LOG_WARN, "event=write-failed op=%s node=%s status=%d attempt=%d retry_in_ms=%llu err=\"%s\"%s",
             what, c->node, status, a->failures, (unsigned long long)delay, err,
             status == 403 ? " hint=\"the ClusterRole tessera-node-agent must grant get and patch on nodes (and "
                             "node-agent-policy allows only this Node and its two annotations)\""
             : status == 404 ? " hint=\"no Node of this name: NODE_NAME comes from the pod's spec.nodeName\"" : "");
}

/* The agent's only API calls: "GET" or (merge) "PATCH" of its own Node (the RBAC grants no more; the manifest checks
 * read the methods from the calls below). The HTTP status, or KUBE_UNREACHABLE / KUBE_TIMEOUT / KUBE_NO_REQUEST;
 * err says why for any other than 2xx, an answer's as "HTTP <status>: <the API's message>". */
static int node_call(const agent_cfg *c, const char *method, const char *body, char **resp, char *err, size_t errlen) {
    char path[300];
    snprintf(path, sizeof path, "/api/v1/nodes/%s", c->node);   /* a DNS subdomain: nothing to escape */
    int st = kube_request(c->api, method, path, body, 0, resp, err, errlen);
    if (st > 0 && (st < 200 || st > 299) && strncmp(err, "HTTP ", 5) != 0) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", err);
        snprintf(err, errlen, "HTTP %d: %s", st, msg);
    }
    return st;
}

/* One write attempt: GET the Node, compare, PATCH what differs. */
static void write_node(const agent_cfg *c, agent_state *a, uint64_t now) {
    char err[1024], *body = NULL;
    int st = node_call(c, "GET", NULL, &body, err, sizeof err);
    cJSON *node = st == 200 ? cJSON_Parse(body) : NULL;
    free(body);
    if (!node) {
        write_failed(c, a, now, "get", st, st == 200 ? "the Node is not JSON" : err);
        return;
    }
    const char *keys[2], *vals[2];
    int n = 0;
    char *gpus = NULL;
    if (a->topo_check && a->gpus_ok) {
        const char *cur = annotation_of(node, AGENT_ANN_GPUS);
        gpus = agent_topology_json(&a->gpus, c->sysfs, cur, err, sizeof err);
        if (!gpus) {
            agent_status_fail(AGENT_TOPOLOGY, err);
            if (remember(&a->topo_refused, err)) kube_log(KUBE_LOG_ERROR, "event=topology-refused reason=\"%s\"", err);
            a->topo_check = false;
        } else {
            agent_status_ok(AGENT_TOPOLOGY);
            if (remember(&a->topo_refused, NULL)) kube_log(KUBE_LOG_INFO, "event=topology-accepted");
            if (cur && !strcmp(cur, gpus)) a->topo_check = false;
            else { keys[n] = AGENT_ANN_GPUS; vals[n++] = gpus; }
        }
    }
    const char *cur_h = annotation_of(node, AGENT_ANN_HOLDINGS);
    remember(&a->holdings_written, cur_h);
    if (a->holdings_pending && cur_h && !strcmp(cur_h, a->holdings_pending)) {
        free(a->holdings_pending);
        a->holdings_pending = NULL;
    }
    if (a->holdings_pending) { keys[n] = AGENT_ANN_HOLDINGS; vals[n++] = a->holdings_pending; }
    cJSON_Delete(node);
    if (n == 0) { /* the Node already says it all: no write; the GET counts against the interval all the same */
        agent_status_ok(AGENT_API);
        a->failures = 0;
        a->next_write = now + (uint64_t)c->min_write_ms;
        free(gpus);
        return;
    }
    uint64_t t0 = now_ms();
    char *patch = kube_annotations_patch(keys, vals, n);
    st = patch ? node_call(c, "PATCH", patch, NULL, err, sizeof err) : KUBE_NO_REQUEST;
    if (!patch) snprintf(err, sizeof err, "out of memory");
    cJSON_free(patch);
    if (st < 200 || st > 299) {
        write_failed(c, a, now, "patch", st, err);
        free(gpus);
        return;
    }
    agent_status_ok(AGENT_API);
    agent_status_written(keys, n);
    for (int i = 0; i < n; i++)
        kube_log(KUBE_LOG_INFO, "event=written node=%s annotation=%s bytes=%zu attempt=%d patch_ms=%llu", c->node,
                 keys[i], strlen(vals[i]), a->failures + 1, (unsigned long long)(now_ms() - t0));
    if (gpus) a->topo_check = false;
    if (a->holdings_pending) {
        free(a->holdings_written);
        a->holdings_written = a->holdings_pending;
        a->holdings_pending = NULL;
    }
    a->failures = 0;
    a->next_write = now + (uint64_t)c->min_write_ms;
    free(gpus);
}

/* Sleep until the deadline or a stop signal: true when asked to stop. */
static bool wait_until(const sigset_t *stop, uint64_t deadline) {
    uint64_t now = now_ms();
    if (deadline <= now) return false;
    uint64_t ms = deadline - now;
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    for (;;) {
        int sig = sigtimedwait(stop, NULL, &ts);
        if (sig > 0) {
            kube_log(KUBE_LOG_INFO, "event=exit signal=%d", sig);
            return true;
        }
        if (errno != EINTR) return false;
    }
}

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

static int run(const agent_cfg *c, const sigset_t *stop) {
    agent_state a;
    memset(&a, 0, sizeof a);
    for (;;) {
        uint64_t now = now_ms();
        if (now >= a.next_topo) read_topology(c, &a, now);
        if (now >= a.next_poll) {
            poll_holdings(c, &a);
            a.next_poll = now + (uint64_t)c->poll_ms;
        }
        now = now_ms();
        if ((a.topo_check || a.holdings_pending) && now >= a.next_write) write_node(c, &a, now);
        agent_status_tick();
        uint64_t wake = min_u64(a.next_topo, a.next_poll);
        if (a.topo_check || a.holdings_pending) wake = min_u64(wake, a.next_write);
        if (wait_until(stop, wake)) break;
    }
    free(a.topo_refused);
    free(a.nvml_err);
    free(a.pr_err);
    free(a.alloc_note);
    free(a.holdings_pending);
    free(a.holdings_written);
    return 0;
}

static int once(const agent_cfg *c) {
    char err[1024];
    int rc = 0;
    agent_gpus g;
    char *gpus = NULL;
    if (agent_nvml_read(&g, err, sizeof err) < 0 || !(gpus = agent_topology_json(&g, c->sysfs, NULL, err, sizeof err))) {
        fprintf(stderr, "%s: %s\n", AGENT_ANN_GPUS, err);
        rc = 1;
    } else printf("%s %s\n", AGENT_ANN_GPUS, gpus);
    free(gpus);
    char *h = agent_holdings_json(c->socket, 5000, err, sizeof err);
    if (!h) {
        fprintf(stderr, "%s: %s\n", AGENT_ANN_HOLDINGS, err);
        rc = 1;
    } else printf("%s %s\n", AGENT_ANN_HOLDINGS, h);
    free(h);
    return rc;
}

int main(int argc, char **argv) {
    /* blocked from the start, so libcurl's and libmicrohttpd's threads inherit it: taken only by sigtimedwait */
    sigset_t stop;
    kube_pod_block_stop_signals(&stop);

    enum { O_HELP = 1, O_NODE, O_SOCK, O_SYSFS, O_POLL, O_TOPO, O_MINW, O_METRICS, O_ONCE, O_LOG };
    static const struct option opts[] = {
        {"help", no_argument, 0, O_HELP}, {"node-name", required_argument, 0, O_NODE},
        {"pod-resources-socket", required_argument, 0, O_SOCK}, {"sysfs-root", required_argument, 0, O_SYSFS},
        {"poll-interval", required_argument, 0, O_POLL}, {"topology-interval", required_argument, 0, O_TOPO},
        {"min-write-interval", required_argument, 0, O_MINW}, {"metrics-listen", required_argument, 0, O_METRICS},
        KUBE_OPTIONS,
        {"once", no_argument, 0, O_ONCE}, {"log-level", required_argument, 0, O_LOG}, {0, 0, 0, 0}};
    agent_cfg c = {.node = getenv("NODE_NAME"), .socket = AGENT_PR_SOCKET, .sysfs = "/sys",
                   .metrics_listen = "0.0.0.0:9090", .poll_ms = 5000, .topo_ms = 600000, .min_write_ms = 10000};
    kube_config_defaults(&c.kube);
    snprintf(c.kube.user_agent, sizeof c.kube.user_agent, "tessera-node-agent");
    c.kube.max_answer = 8u << 20;   /* a Node with big annotations and images lists stays far below */
    bool api_given = false, do_once = false;
    int opt;
    while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (kube_config_option(&c.kube, opt, optarg)) {
            api_given |= opt == KUBE_OPT_API;
            continue;
        }
        int *dur = opt == O_POLL ? &c.poll_ms : opt == O_TOPO ? &c.topo_ms : opt == O_MINW ? &c.min_write_ms : NULL;
        if (dur) {
            if ((*dur = kube_pod_parse_duration(optarg, 86400000)) < 0) {   /* at most a day */
                fprintf(stderr, "--%s %s: not a duration of 1ms to 24h (500ms, 5s, 10m, 1h)\n",
                        opt == O_POLL ? "poll-interval" : opt == O_TOPO ? "topology-interval" : "min-write-interval",
                        optarg);
                return 2;
            }
            continue;
        }
        switch (opt) {
        case O_HELP: fputs(usage, stdout); return 0;
        case O_NODE: c.node = optarg; break;
        case O_SOCK: c.socket = optarg; break;
        case O_SYSFS: c.sysfs = optarg; break;
        case O_METRICS: c.metrics_listen = optarg; break;
        case O_ONCE: do_once = true; break;
        case O_LOG: {
            int lv = kube_log_parse_level(optarg);
            if (lv < 0) {
                fprintf(stderr, "--log-level %s: one of debug, info, warn, error, off\n", optarg);
                return 2;
            }
            kube_log_set_level((kube_log_level)lv);
            break;
        }
        default: fputs(usage, stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "unexpected argument: %s\n%s", argv[optind], usage);
        return 2;
    }
    char err[512];
    if (kube_init(err, sizeof err) < 0) {
        fprintf(stderr, "libcurl could not be initialised: %s\n", err);
        return 2;
    }
    if (do_once) return once(&c);
    if (!c.node || !*c.node) {
        fprintf(stderr, "no node name: set NODE_NAME (the DaemonSet takes it from spec.nodeName through the "
                        "downward API) or give --node-name\n");
        return 2;
    }
    if (!kube_name_ok("node name", c.node, err, sizeof err)) {
        fprintf(stderr, "--node-name/NODE_NAME: %s\n", err);
        return 2;
    }
    if (!api_given && kube_config_in_cluster(&c.kube, err, sizeof err) < 0) {
        fprintf(stderr, "no in-cluster configuration (%s): give --kube-api URL\n", err);
        return 2;
    }
    if (!(c.api = kube_new(&c.kube, err, sizeof err))) {
        fprintf(stderr, "--kube-api: %s\n", err);
        return 2;
    }
    if (c.metrics_listen[0]) {
        /* the loop ticks at least every poll interval; three missed ticks (and a minute of slack for a slow
         * API call) is a stall */
        int port = agent_status_serve(c.metrics_listen, 3 * c.poll_ms + 60000, err, sizeof err);
        if (port < 0) {
            fprintf(stderr, "--metrics-listen: %s\n", err);
            return 2;
        }
        kube_log(KUBE_LOG_INFO, "event=serving-ops listen=%s port=%d", c.metrics_listen, port);
    }
    kube_log(KUBE_LOG_INFO, "event=start node=%s api=%s socket=%s sysfs=%s poll_ms=%d topology_ms=%d "
             "min_write_ms=%d", c.node, c.kube.api_url, c.socket, c.sysfs, c.poll_ms, c.topo_ms, c.min_write_ms);
    int rc = run(&c, &stop);
    agent_status_stop();
    kube_free(c.api);
    return rc;
}
