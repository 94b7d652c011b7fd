/* main.c -- tessera-extender: flags, then either standalone mode (nodes from a file, binds
 * kept in memory) or cluster mode (list+watch through kube.c, binds posted to the API),
 * the HTTP server, and a main thread that only waits for signals and expires assumptions.
 */
#include <errno.h>
#include <pthread.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "extender/base/delivery.h"
#include "extender/delivery/podsecurity.h"
#include "extender/base/events.h"
#include "extender/base/health.h"
#include "extender/http.h"
#include "kube/client.h"
#include "extender/base/leader.h"
#include "kube/log.h"
#include "kube/pod.h"
#include "extender/delivery/reservation.h"
#include "extender/mirror/state.h"
#include "extender/verbs.h"
#include "extender/webhook.h"
#include "extender/webhook_tls.h"
#include "extender/workload.h"
#include "policy/policy.h"

/* The demo cluster is compiled in by the Makefile when it links build/gen/demo_cluster_data.o;
 * weak, so the binary still links (without --demo) when it does not. */
extern const unsigned char sim_demo_cluster_json[] __attribute__((weak));
extern const size_t sim_demo_cluster_json_len __attribute__((weak));

/* jemalloc (when linked) reads its options from this symbol. A background thread hands
 * freed pages back to the kernel after a second: the first list of a large cluster
 * allocates and frees tens of MB of JSON, and an idle extender would otherwise keep them
 * resident. Ignored by other allocators. */
const char *malloc_conf = "background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0";

static void usage(FILE *f) {
    fprintf(f,
"usage: tessera-extender [flags]\n"
"\n"
"kube-scheduler HTTP extender for fractional NVIDIA GPUs: filter, prioritize, bind, preempt.\n"
"Modes: cluster (default; list+watch the API server, bind through it) or standalone\n"
"(--cluster FILE or --demo: nodes from a file, binds recorded in memory only).\n"
"\n"
"Serving:\n"
"  --listen HOST:PORT          address to serve on (default 127.0.0.1:8888; port 0 = any free port)\n"
"  --url-prefix PATH           path part of kube-scheduler's urlPrefix; verbs are served at\n"
"                              POST PATH/filter, PATH/prioritize, PATH/bind, PATH/preempt\n"
"                              (default /tessera, i.e. urlPrefix: http://HOST:PORT/tessera)\n"
"  --policy NAME               scoring policy (default binpack):\n"
"                              ");
    /* the names wrapped at 100 columns, under the description column */
    for (int i = 0, col = 30; i < policy_count(); i++) {
        const char *pn = policy_name(policy_at(i));
        if (i && col + 2 + (int)strlen(pn) > 100) {
            fprintf(f, ",\n%30s", "");
            col = 30;
        } else if (i) {
            col += fprintf(f, ", ");
        }
        col += fprintf(f, "%s", pn);
    }
    fprintf(f, "\n"
"                              (fgd and fgd-pack need --workload or --online-workload)\n"
"  --workload FILE             target workload for fgd and the fragmentation metric: a JSON\n"
"                              array (or List) of Pod objects, each counted once, and the\n"
"                              ResourceClaim(Template)s their claims name (default: the GPU\n"
"                              pods and claims in the cache, at each /metrics scrape)\n"
"  --online-workload           estimate the target workload from the GPU pods (claim pods too)\n"
"                              prioritized so far (each pod counts once; a shape's weight\n"
"                              halves every --online-half-life pods; policy/policy.h has the\n"
"                              rules)\n"
"  --online-half-life N        half-life of the online estimate, in pods (default 1000)\n"
"  --max-body-bytes N          largest request body accepted; larger gets 413 (default 8388608)\n"
"  --conn-timeout SECONDS      close a connection idle or stalled this long (default 30)\n"
"  --tls-cert FILE             serve HTTPS with this PEM certificate (needs --tls-key)\n"
"  --tls-key FILE              PEM private key for --tls-cert\n"
"  --tls-client-ca FILE        PEM CA bundle; clients must present a certificate it signed\n"
"  --metrics-listen HOST:PORT  also serve GET /healthz, /readyz and /metrics (only) here, over\n"
"                              plain HTTP: for kubelet probes and Prometheus on the pod IP\n"
"\n"
"Cluster mode (in-cluster service account by default):\n"
"  --kube-api URL              API server URL, e.g. https://10.0.0.1:6443 (default: in-cluster\n"
"                              config from KUBERNETES_SERVICE_HOST/PORT and the service account)\n"
"  --token-file FILE           bearer token file, re-read on every reconnect (default in a\n"
"                              cluster: the service account's token)\n"
"  --ca-file FILE              CA bundle for the API server's certificate (default in a\n"
"                              cluster: the service account's ca.crt; else the system CAs)\n"
KUBE_OPTIONS_TLS_HELP
"  --bind-timeout SECONDS      time limit of one Binding call to the API server (default 10);\n"
"                              keep it below kube-scheduler's httpTimeout\n"
"  --assume-ttl SECONDS        how long a bound pod is held as assumed until the watch\n"
"                              confirms it (default 30)\n"
"\n"
"Leader election (cluster mode; see deploy/README.md, High availability). Only the holder of the\n"
"Lease binds and runs the background work (soft-share delivery, release, timeouts); the others\n"
"keep a synced cache and answer filter, prioritize and preempt:\n"
"  --leader-elect[=BOOL]       campaign for the Lease (default true in cluster mode;\n"
"                              --leader-elect=true is an error with --cluster/--demo, =false\n"
"                              is accepted)\n"
"  --scheduler-lease NS/NAME   kube-scheduler's own Lease (its leaderElection resourceNamespace/\n"
"                              resourceName; NAME alone: in --leader-elect-namespace). A replica\n"
"                              campaigns while the kube-scheduler of its own pod holds it (its\n"
"                              identity starts with $POD_NAME, else the host name), while it has\n"
"                              no valid holder, and while scheduling calls arrive; so the Lease\n"
"                              is held at all times, by the replica whose kube-scheduler is active.\n"
"                              Default: tessera-scheduler in the Lease's namespace (deploy/).\n"
"                              \"\": none to follow, campaign always (one replica, or kube-scheduler\n"
"                              without leader election)\n"
"  --leader-elect-namespace NS namespace of the Lease (default: tessera's own namespace, i.e.\n"
"                              $POD_NAMESPACE, else the service account's namespace file\n"
"                              /var/run/secrets/kubernetes.io/serviceaccount/namespace, else\n"
"                              tessera). The namespace must exist and the service account may\n"
"                              get, create and update leases there\n"
"  --leader-elect-name NAME    name of the Lease (default tessera-extender)\n"
"  --leader-elect-lease-duration D   how long a holder that stopped renewing keeps the\n"
"                              Lease (default 15s; written to the Lease rounded up to whole\n"
"                              seconds)\n"
"  --leader-elect-renew-deadline D   the leader stops binding when it could not renew for\n"
"                              this long (default 10s)\n"
"  --leader-elect-retry-period D     between two attempts to acquire or renew (default 2s)\n"
"                              Durations: 15s, 500ms, 1m; lease duration > renew deadline >\n"
"                              1.2 x retry period, and --bind-timeout < lease duration.\n"
"                              Identity: $POD_NAME (else the host\n"
"                              name) plus a random suffix. The Lease is released on SIGTERM.\n"
"\n"
"Admission webhook (POST /webhook/mutate; also served on --listen, e.g. by --demo):\n"
"  --webhook-listen HOST:PORT  serve the webhook over TLS here (cluster mode default\n"
"                              0.0.0.0:8443; \"\" turns it off); only POST /webhook/mutate and\n"
"                              GET /healthz are served on it\n"
"  --webhook-cert FILE         PEM serving certificate for --webhook-listen (with --webhook-key;\n"
"                              e.g. from cert-manager) instead of the Secret tessera manages\n"
"  --webhook-key FILE          PEM private key for --webhook-cert\n"
"  --webhook-secret NS/NAME    Secret holding the webhook's CA and serving certificate, created\n"
"                              and renewed by tessera (default $POD_NAMESPACE, else tessera,\n"
"                              /tessera-webhook-tls)\n"
"  --webhook-config NAME       MutatingWebhookConfiguration whose caBundle tessera sets\n"
"                              (default tessera; \"\" leaves it alone)\n"
"  --webhook-runtime-class NAME  runtimeClassName the webhook gives soft shares that have none\n"
"  --scheduler-name NAME       pods of this scheduler are mutated (repeatable; default\n"
"                              tessera-scheduler); other pods are left unchanged\n"
"\n"
"Soft-share delivery (cluster mode; see deploy/README.md, Soft shares):\n"
"  --soft-share-delivery MODE  reservation (default in cluster mode): tessera reserves each GPU that\n"
"                              carries soft shares with a tessera-reserve pod and hands its UUID to\n"
"                              the shares through per-pod ConfigMaps; none: accounting only (the node\n"
"                              side delivers shares another way, e.g. HAMi's device plugin)\n"
"  --reservation-namespace NS  where reservation pods live (default $POD_NAMESPACE, else tessera)\n"
"  --mps-reservation-namespace NS  where the reservations of GPUs whose shares use MPS\n"
"                              (tessera.io/compute-sharing: mps) live: they run the GPU's MPS\n"
"                              control daemon as root with host directories, which needs Pod\n"
"                              Security privileged there (default tessera-node)\n"
"  --reservation-grace SECONDS a reservation whose last share ended is deleted after this long\n"
"                              (default 30)\n"
"  --reservation-timeout SECONDS  a reservation that has not reported its GPU's UUID this long\n"
"                              after its creation (image not pulled, tessera-reserve crashing)\n"
"                              counts as refused: its shares move or are given up (default 300)\n"
"  --reserve-image IMAGE       image of the reservation pods and of the tessera-cuda-shim init\n"
"                              container the webhook adds to soft shares (default: the image of\n"
"                              the container named tessera-extender, in initContainers or\n"
"                              containers, of its own Pod $POD_NAMESPACE/$POD_NAME, read at start;\n"
"                              outside a pod give it, or no reservation is created, soft shares\n"
"                              are refused admission, and /readyz says why)\n"
"\n"
"Dynamic Resource Allocation (cluster mode; see README, DRA):\n"
"  --dra on|off                list and watch ResourceSlices, ResourceClaims and DeviceClasses\n"
"                              (resource.k8s.io/v1) so GPUs handed out through claims are\n"
"                              accounted and pods with GPU claims are ranked (default on; a\n"
"                              cluster without the API is noticed and skipped)\n"
"\n"
"Standalone mode:\n"
"  --cluster FILE              nodes from FILE: a JSON array of Node objects or a NodeList\n"
"  --demo                      the embedded demo cluster (whole GPUs, MIG mixed and single,\n"
"                              time-sliced, MPS, MIG instances time-sliced (layered), CPU-only)\n"
"\n"
"Other:\n"
"  --log-level LEVEL           debug | info | warn | error | off (default info)\n"
"  --help                      this text\n"
"\n"
"Endpoints: GET /healthz, /readyz (503 until the cache is synced, and while something tessera\n"
"needs fails: the API's list/watch, bind, the Lease, the token or CA file, the listener, the\n"
"webhook's TLS listener; the body says which and why), /metrics (Prometheus;\n"
"tessera_dependency_ok, tessera_dependency_failures_total), /debug/state (JSON;\n"
"?pod=namespace/name explains where a pod fits and why), POST /webhook/mutate.\n"
"SIGTERM or SIGINT: stop accepting, finish in-flight requests, exit 0.\n");
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 65536 + 1 > cap) {
            cap = cap ? 2 * cap : 131072;
            char *nb = realloc(buf, cap);
            if (!nb) { free(buf); fclose(f); return NULL; }
            buf = nb;
        }
        size_t r = fread(buf + n, 1, 65536, f);
        n += r;
        if (r < 65536) break;
    }
    fclose(f);
    buf[n] = 0;
    *len = n;
    return buf;
}

static int bind_via_kube(void *user, const char *ns, const char *name, const char *uid, const char *node,
                     const cJSON *annotations, char *err, size_t errlen) {
    int code = kube_bind(user, ns, name, uid, node, annotations, err, errlen);
    if (code == 200 || code == 201) return 0;
    if (code > 0 && !err[0]) snprintf(err, errlen, "API server answered %d", code);
    return -1;
}

static void kube_stats_of(void *user, kube_stats *out) { kube_get_stats(user, out); }

static bool rsv_image(void *user, char *buf, size_t len, char *why, size_t whylen) {
    return ext_rsv_image(user, buf, len, why, whylen);
}

/* The pod watch feeds both the cache and the reservation controller, in that order: the controller
 * reads the node models the cache has just updated. */
typedef struct watch_users { ext_state *st; ext_rsv *rsv; } watch_users;
static void on_watch_event(void *user, kube_kind kind, kube_event ev, const cJSON *obj) {
    watch_users *w = user;
    ext_state_on_event(w->st, kind, ev, obj);
    if (w->rsv) ext_rsv_on_event(w->rsv, kind, ev, obj);
}

static int parse_seconds(const char *s, int *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || (*end && strcmp(end, "s") != 0) || v <= 0 || v > 86400) return -1;
    *out = (int)v;
    return 0;
}

static void print_demo_help(const char *listen, int port, const char *prefix, const ext_webhook_config *wc) {
    char host[128];
    snprintf(host, sizeof host, "%s", listen);
    char *colon = strrchr(host, ':');
    if (colon) *colon = 0;
    printf("tessera-extender (standalone) on http://%s:%d%s\n", host, port, prefix);
    printf("Try:\n");
    const char *pod = "{\"metadata\":{\"name\":\"demo\",\"namespace\":\"default\",\"uid\":\"demo-uid-1\"},"
                      "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/gpumem\":\"8192\"}}}]}}";
    printf("  curl -s -XPOST http://%s:%d%s/filter -d '{\"Pod\":%s,\"Nodes\":null,\"NodeNames\":[\"gpu-a100-whole\",\"gpu-t4-timeslice\",\"cpu-only\"]}'\n",
           host, port, prefix, pod);
    printf("  curl -s -XPOST http://%s:%d%s/prioritize -d '{\"Pod\":%s,\"Nodes\":null,\"NodeNames\":[\"gpu-a100-whole\",\"gpu-t4-timeslice\"]}'\n",
           host, port, prefix, pod);
    printf("  curl -s -XPOST http://%s:%d%s/bind -d '{\"PodName\":\"demo\",\"PodNamespace\":\"default\",\"PodUID\":\"demo-uid-1\",\"Node\":\"gpu-a100-whole\"}'\n",
           host, port, prefix);
    printf("  curl -s -XPOST http://%s:%d%s/preempt -d '{\"Pod\":%s,\"NodeNameToVictims\":null,\"NodeNameToMetaVictims\":{\"gpu-a100-whole\":{\"Pods\":[{\"UID\":\"demo-uid-1\"}],\"NumPDBViolations\":0}}}'\n",
           host, port, prefix, pod);
    printf("  curl -s 'http://%s:%d/debug/state?pod=default/demo'\n", host, port);
    /* A gpu-fraction pod's AdmissionReview, as the API server posts it; jq + base64 show the JSON Patch. */
    printf("  curl -s -XPOST http://%s:%d" EXT_WEBHOOK_PATH " -H 'Content-Type: application/json' -d '"
           "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{"
           "\"uid\":\"0d3f4b9e-5a61-4c5e-9a59-2b8f2f7d6c11\",\"kind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":\"Pod\"},"
           "\"resource\":{\"group\":\"\",\"version\":\"v1\",\"resource\":\"pods\"},\"namespace\":\"default\","
           "\"operation\":\"CREATE\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"half\","
           "\"namespace\":\"default\",\"annotations\":{\"tessera.io/gpu-fraction\":\"0.5\"}},\"spec\":{"
           "\"schedulerName\":\"%s\",\"containers\":[{\"name\":\"main\",\"image\":\"nvidia/cuda:12.4.1-base-ubuntu22.04\"}]}}}}'"
           "\n    (the admission webhook, soft-share delivery %s; append | jq -r .response.patch | base64 -d for the JSON Patch)\n",
           host, port, wc->nschedulers ? wc->schedulers[0] : EXT_WEBHOOK_DEFAULT_SCHEDULER,
           ext_delivery_mode_name(wc->delivery));
    printf("  curl -s http://%s:%d/metrics\n", host, port);
    fflush(stdout);
}

int main(int argc, char **argv) {
    enum { O_LISTEN = 1000, O_PREFIX, O_POLICY, O_CLUSTER, O_DEMO,
           O_TCERT, O_TKEY, O_TCA, O_MAXBODY, O_TTL, O_CONNTO, O_LOG, O_HELP, O_WORKLOAD, O_ONLINE, O_ONLINE_HL, O_BINDTO, O_MLISTEN,
           O_LE, O_LE_NS, O_LE_NAME, O_LE_LEASE, O_LE_RENEW, O_LE_RETRY, O_LE_SCHED,
           /* admission webhook */
           O_WH_LISTEN, O_WH_CERT, O_WH_KEY, O_WH_SECRET, O_WH_CONFIG, O_WH_RUNTIME, O_SCHED_NAME,
           /* soft-share delivery */
           O_DELIVERY, O_RSV_GRACE, O_RSV_NS, O_RSV_MPS_NS, O_RSV_IMAGE, O_RSV_TIMEOUT, O_DRA };
    static const struct option opts[] = {
        {"listen", required_argument, 0, O_LISTEN}, {"url-prefix", required_argument, 0, O_PREFIX},
        {"policy", required_argument, 0, O_POLICY}, {"cluster", required_argument, 0, O_CLUSTER},
        {"demo", no_argument, 0, O_DEMO}, KUBE_OPTIONS, {"tls-cert", required_argument, 0, O_TCERT},
        {"tls-key", required_argument, 0, O_TKEY}, {"tls-client-ca", required_argument, 0, O_TCA},
        {"max-body-bytes", required_argument, 0, O_MAXBODY}, {"assume-ttl", required_argument, 0, O_TTL},
        {"conn-timeout", required_argument, 0, O_CONNTO}, {"log-level", required_argument, 0, O_LOG},
        {"help", no_argument, 0, O_HELP}, {"workload", required_argument, 0, O_WORKLOAD},
        {"online-workload", no_argument, 0, O_ONLINE}, {"online-half-life", required_argument, 0, O_ONLINE_HL},
        {"bind-timeout", required_argument, 0, O_BINDTO}, {"metrics-listen", required_argument, 0, O_MLISTEN},
        {"leader-elect", optional_argument, 0, O_LE}, {"leader-elect-namespace", required_argument, 0, O_LE_NS},
        {"leader-elect-name", required_argument, 0, O_LE_NAME},
        {"leader-elect-lease-duration", required_argument, 0, O_LE_LEASE},
        {"leader-elect-renew-deadline", required_argument, 0, O_LE_RENEW},
        {"leader-elect-retry-period", required_argument, 0, O_LE_RETRY},
        {"scheduler-lease", required_argument, 0, O_LE_SCHED},
        /* admission webhook */
        {"webhook-listen", required_argument, 0, O_WH_LISTEN}, {"webhook-cert", required_argument, 0, O_WH_CERT},
        {"webhook-key", required_argument, 0, O_WH_KEY}, {"webhook-secret", required_argument, 0, O_WH_SECRET},
        {"webhook-config", required_argument, 0, O_WH_CONFIG}, {"webhook-runtime-class", required_argument, 0, O_WH_RUNTIME},
        {"scheduler-name", required_argument, 0, O_SCHED_NAME},
        /* soft-share delivery */
        {"soft-share-delivery", required_argument, 0, O_DELIVERY}, {"reservation-grace", required_argument, 0, O_RSV_GRACE},
        {"reservation-namespace", required_argument, 0, O_RSV_NS}, {"reserve-image", required_argument, 0, O_RSV_IMAGE},
        {"mps-reservation-namespace", required_argument, 0, O_RSV_MPS_NS},
        {"reservation-timeout", required_argument, 0, O_RSV_TIMEOUT},
        {"dra", required_argument, 0, O_DRA},
        {0, 0, 0, 0}};
    ext_http_config hc;
    memset(&hc, 0, sizeof hc);
    snprintf(hc.listen, sizeof hc.listen, "127.0.0.1:8888");
    snprintf(hc.prefix, sizeof hc.prefix, "/tessera");
    kube_config kc;
    kube_config_defaults(&kc);
    kc.dra = true;   /* Dynamic Resource Allocation: watched unless --dra=off (a cluster without it answers 404) */
    snprintf(kc.rbac, sizeof kc.rbac, "%s", EXT_KUBE_RBAC);
    snprintf(kc.user_agent, sizeof kc.user_agent, "tessera-extender");
    kc.report = ext_health_kube_report;   /* the client's dependencies are in /readyz and /metrics */
    const char *policy_arg = "binpack", *cluster = NULL, *workload_file = NULL, *metrics_listen = NULL;
    bool online_workload = false;
    double online_half_life = POLICY_ONLINE_HALF_LIFE;
    bool demo = false, api_given = false;
    int ttl_s = 30, c;
    char err0[512];
    ext_leader_config lc;
    ext_leader_config_defaults(&lc);
    int leader_elect = -1; /* -1: the mode's default */
    /* Admission webhook. */
    ext_webhook_config wc;
    ext_webhook_config_defaults(&wc);
    ext_webhook_tls_config wtc;
    ext_webhook_tls_config_defaults(&wtc);
    const char *webhook_listen = NULL, *webhook_cert = NULL, *webhook_key = NULL;   /* NULL: the mode's default */
    /* Soft-share delivery (reservation.h); the webhook follows the same mode. */
    ext_rsv_config rsvc;
    ext_rsv_config_defaults(&rsvc);
    int delivery_mode = -1; /* -1: the mode's default (reservation in cluster mode, none standalone) */
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (kube_config_option(&kc, c, optarg)) {   /* --kube-api, --token-file, ... (kube/client.h) */
            api_given |= c == KUBE_OPT_API;
            continue;
        }
        switch (c) {
        case O_LISTEN: snprintf(hc.listen, sizeof hc.listen, "%s", optarg); break;
        case O_PREFIX:
            if (optarg[0] && optarg[0] != '/') { fprintf(stderr, "--url-prefix must start with '/'\n"); return 2; }
            snprintf(hc.prefix, sizeof hc.prefix, "%s", optarg);
            break;
        case O_POLICY: policy_arg = optarg; break;
        case O_CLUSTER: cluster = optarg; break;
        case O_DEMO: demo = true; break;
        case O_TCERT: hc.tls_cert_file = optarg; break;
        case O_TKEY: hc.tls_key_file = optarg; break;
        case O_TCA: hc.tls_client_ca_file = optarg; break;
        case O_MAXBODY: {
            char *end;
            unsigned long long v = strtoull(optarg, &end, 10);
            if (*end || v < 1024 || v > (1ull << 31)) { fprintf(stderr, "--max-body-bytes: 1024..2147483648\n"); return 2; }
            hc.max_body = (size_t)v;
            break;
        }
        case O_TTL:
            if (parse_seconds(optarg, &ttl_s) < 0) { fprintf(stderr, "--assume-ttl: seconds, 1..86400\n"); return 2; }
            break;
        case O_CONNTO:
            if (parse_seconds(optarg, &hc.conn_timeout_s) < 0) { fprintf(stderr, "--conn-timeout: seconds, 1..86400\n"); return 2; }
            break;
        case O_LOG: {
            int l = kube_log_parse_level(optarg);
            if (l < 0) { fprintf(stderr, "--log-level: debug, info, warn, error or off\n"); return 2; }
            kube_log_set_level((kube_log_level)l);
            break;
        }
        case O_WORKLOAD: workload_file = optarg; break;
        case O_ONLINE: online_workload = true; break;
        case O_ONLINE_HL: {
            char *end;
            online_half_life = strtod(optarg, &end);
            if (*end || !(online_half_life > 0 && online_half_life < 1e9)) {
                fprintf(stderr, "--online-half-life %s: expected a number of pods > 0\n", optarg);
                return 2;
            }
            break;
        }
        case O_MLISTEN: metrics_listen = optarg; break;
        case O_BINDTO: {
            int secs;
            if (parse_seconds(optarg, &secs) < 0) { fprintf(stderr, "--bind-timeout: seconds, 1..86400\n"); return 2; }
            kc.bind_timeout_ms = secs * 1000;
            break;
        }
        case O_LE:
            /* Also "--leader-elect false", as people write other flags: take the next word
             * when it is a boolean. */
            if (!optarg && optind < argc && (!strcmp(argv[optind], "true") || !strcmp(argv[optind], "false")))
                optarg = argv[optind++];
            if (!optarg || !strcmp(optarg, "true")) leader_elect = 1;
            else if (!strcmp(optarg, "false")) leader_elect = 0;
            else { fprintf(stderr, "--leader-elect: true or false (--leader-elect=false)\n"); return 2; }
            break;
        case O_LE_NS: snprintf(lc.ns, sizeof lc.ns, "%s", optarg); break;
        case O_LE_NAME: snprintf(lc.name, sizeof lc.name, "%s", optarg); break;
        case O_LE_SCHED:
            if (ext_leader_parse_scheduler_lease(&lc, optarg, err0, sizeof err0) < 0) { fprintf(stderr, "%s\n", err0); return 2; }
            break;
        case O_LE_LEASE: case O_LE_RENEW: case O_LE_RETRY: {
            int *dst = c == O_LE_LEASE ? &lc.lease_ms : c == O_LE_RENEW ? &lc.renew_ms : &lc.retry_ms;
            if ((*dst = kube_pod_parse_duration(optarg, 3600000)) < 0) {   /* Lease timing: at most an hour */
                fprintf(stderr, "--%s: a duration of 1ms to 1h, such as 15s, 500ms or 1m\n", c == O_LE_LEASE ? "leader-elect-lease-duration"
                        : c == O_LE_RENEW ? "leader-elect-renew-deadline" : "leader-elect-retry-period");
                return 2;
            }
            break;
        }
        case O_WH_LISTEN: webhook_listen = optarg; break;
        case O_WH_CERT: webhook_cert = optarg; break;
        case O_WH_KEY: webhook_key = optarg; break;
        case O_WH_SECRET:
            if (ext_webhook_tls_parse_secret(&wtc, optarg, err0, sizeof err0) < 0) { fprintf(stderr, "%s\n", err0); return 2; }
            break;
        case O_WH_CONFIG: snprintf(wtc.webhook_config, sizeof wtc.webhook_config, "%s", optarg); break;
        case O_WH_RUNTIME:
            if (strlen(optarg) >= sizeof wc.runtime_class) { fprintf(stderr, "--webhook-runtime-class: name too long\n"); return 2; }
            snprintf(wc.runtime_class, sizeof wc.runtime_class, "%s", optarg);
            break;
        case O_SCHED_NAME:
            if (ext_webhook_config_add_scheduler(&wc, optarg, err0, sizeof err0) < 0) { fprintf(stderr, "%s\n", err0); return 2; }
            break;
        case O_DELIVERY: {
            ext_delivery_mode m;
            if (ext_delivery_mode_parse(optarg, &m) < 0) { fprintf(stderr, "--soft-share-delivery: reservation or none\n"); return 2; }
            delivery_mode = (int)m;
            break;
        }
        case O_RSV_GRACE: {
            int secs;
            if (parse_seconds(optarg, &secs) < 0) { fprintf(stderr, "--reservation-grace: seconds, 1..86400\n"); return 2; }
            rsvc.grace_ms = secs * 1000;
            break;
        }
        case O_RSV_TIMEOUT: {
            int secs;
            if (parse_seconds(optarg, &secs) < 0) { fprintf(stderr, "--reservation-timeout: seconds, 1..86400\n"); return 2; }
            rsvc.timeout_ms = secs * 1000;
            break;
        }
        case O_RSV_MPS_NS:
            if (!optarg[0] || strlen(optarg) >= sizeof rsvc.mps_ns) {
                fprintf(stderr, "--mps-reservation-namespace: a namespace name\n");
                return 2;
            }
            snprintf(rsvc.mps_ns, sizeof rsvc.mps_ns, "%s", optarg);
            break;
        case O_RSV_NS:
            if (!optarg[0] || strlen(optarg) >= sizeof rsvc.ns) { fprintf(stderr, "--reservation-namespace: a namespace name\n"); return 2; }
            snprintf(rsvc.ns, sizeof rsvc.ns, "%s", optarg);
            break;
        case O_DRA:
            if (!strcmp(optarg, "on") || !strcmp(optarg, "true")) kc.dra = true;
            else if (!strcmp(optarg, "off") || !strcmp(optarg, "false")) kc.dra = false;
            else { fprintf(stderr, "--dra: on or off\n"); return 2; }
            break;
        case O_RSV_IMAGE:
            if (!optarg[0] || strlen(optarg) >= sizeof rsvc.image) { fprintf(stderr, "--reserve-image: an image reference\n"); return 2; }
            snprintf(rsvc.image, sizeof rsvc.image, "%s", optarg);
            break;
        case O_HELP: case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) { fprintf(stderr, "unexpected argument: %s\n", argv[optind]); usage(stderr); return 2; }
    const policy *pol = policy_find(policy_arg);
    if (!pol) { fprintf(stderr, "--policy %s: unknown policy (see --help)\n", policy_arg); return 2; }
    policy_workload *workload = NULL;
    if (workload_file) {
        size_t wlen = 0;
        char *wjson = slurp(workload_file, &wlen), werr[512];
        if (!wjson) { fprintf(stderr, "--workload %s: %s\n", workload_file, strerror(errno)); return 2; }
        /* the delivery's default is settled below (reservation in cluster mode): the same rule here */
        bool rsv_delivery = delivery_mode >= 0 ? delivery_mode == EXT_DELIVERY_RESERVATION : !(cluster || demo);
        workload = ext_workload_from_json(wjson, wlen, rsv_delivery, werr, sizeof werr);
        free(wjson);
        if (!workload) { fprintf(stderr, "--workload %s: %s\n", workload_file, werr); return 2; }
    }
    if (online_workload && workload) {
        fprintf(stderr, "--workload and --online-workload exclude each other: a given target workload, or one "
                        "estimated from the pods\n");
        policy_workload_free(workload);
        return 2;
    }
    if ((!strcmp(policy_arg, "fgd") || !strcmp(policy_arg, "fgd-pack")) && !workload && !online_workload) {
        fprintf(stderr, "--policy %s needs a target workload: give --workload FILE or --online-workload\n", policy_arg);
        policy_workload_free(workload);
        return 2;
    }
    bool standalone = cluster || demo;
    if (standalone && api_given) {
        fprintf(stderr, "--cluster/--demo and --kube-api exclude each other\n");
        policy_workload_free(workload);
        return 2;
    }
    if (standalone && leader_elect == 1) {
        fprintf(stderr, "--leader-elect needs cluster mode: a standalone extender (--cluster/--demo) binds in memory only\n");
        policy_workload_free(workload);
        return 2;
    }
    /* Admission webhook: the mode's defaults, then what cannot work. */
    if (delivery_mode < 0) delivery_mode = standalone ? EXT_DELIVERY_NONE : EXT_DELIVERY_RESERVATION;
    wc.delivery = (ext_delivery_mode)delivery_mode;
    if (hc.max_body) wc.max_body = hc.max_body;
    if (!webhook_listen) webhook_listen = standalone ? "" : "0.0.0.0:8443";
    if (!webhook_cert != !webhook_key) {
        fprintf(stderr, "--webhook-cert and --webhook-key go together\n");
        policy_workload_free(workload);
        return 2;
    }
    if (webhook_listen[0] && standalone && !webhook_cert) {
        fprintf(stderr, "--webhook-listen in standalone mode needs --webhook-cert and --webhook-key (the managed Secret "
                        "needs the API server); standalone serves POST /webhook/mutate on --listen anyway\n");
        policy_workload_free(workload);
        return 2;
    }
    lc.bind_budget_ms = kc.bind_timeout_ms > 0 ? kc.bind_timeout_ms : kc.request_timeout_ms; /* a Binding POST's timeout */
    if (!standalone && leader_elect != 0 && ext_leader_config_check(&lc, err0, sizeof err0) < 0) {
        fprintf(stderr, "%s\n", err0);
        policy_workload_free(workload);
        return 2;
    }

    /* Signals are taken synchronously by the main thread; every thread started after this
     * inherits the mask, so none of them is interrupted. */
    sigset_t sigs;
    kube_pod_block_stop_signals(&sigs);

    char err[512];
    ext_state_config sc = {.cat = NULL, .standalone = standalone, .assume_ttl_ms = ttl_s * 1000, .dra = kc.dra && !standalone};
    snprintf(sc.reservation_ns, sizeof sc.reservation_ns, "%s", rsvc.ns);
    snprintf(sc.mps_reservation_ns, sizeof sc.mps_reservation_ns, "%s", rsvc.mps_ns);
    ext_state *st = ext_state_new(&sc);
    if (!st) { fprintf(stderr, "out of memory\n"); return 1; }
    /* Everything startup makes, NULL until made: a failure below frees what exists at `fail`. */
    int exit_code = 2;   /* a bad flag or input; 1 once the problem is at run time */
    kube_client *kube = NULL;
    ext_leader *leader = NULL;
    ext_events *events = NULL;
    ext_rsv *rsv = NULL;
    ext_pss *pss = NULL;
    ext_webhook_listener *whl = NULL;
    ext_http *http = NULL, *ops = NULL;
    if (standalone) {
        size_t len = 0;
        char *json = NULL;
        if (demo) {
            if (!sim_demo_cluster_json || !&sim_demo_cluster_json_len) {
                fprintf(stderr, "--demo: this binary was built without the demo cluster; use --cluster FILE\n");
                goto fail;
            }
            json = strndup((const char *)sim_demo_cluster_json, sim_demo_cluster_json_len);
            len = json ? strlen(json) : 0;
        } else if (!(json = slurp(cluster, &len))) {
            fprintf(stderr, "--cluster %s: %s\n", cluster, strerror(errno));
            goto fail;
        }
        int rc = json ? ext_state_load_cluster(st, json, len, err, sizeof err) : -1;
        free(json);
        if (rc < 0) {
            fprintf(stderr, "--cluster: %s\n", json ? err : "out of memory");
            goto fail;
        }
        ext_state_lock(st);
        kube_log(KUBE_LOG_INFO, "event=standalone nodes=%d source=%s", ext_state_node_count(st), demo ? "demo" : cluster);
        ext_state_unlock(st);
    } else {
        if (!api_given && kube_config_in_cluster(&kc, err, sizeof err) < 0) {
            fprintf(stderr, "no in-cluster configuration (%s): give --kube-api URL, or --cluster FILE for standalone mode\n", err);
            goto fail;
        }
        if (!(kube = kube_new(&kc, err, sizeof err))) {
            fprintf(stderr, "API client: %s\n", err);
            goto fail;
        }
    }
    if (kube && leader_elect != 0 && !(leader = ext_leader_new(&lc, kube, err, sizeof err))) {
        fprintf(stderr, "%s\n", err);
        goto fail;
    }
    /* Events before HTTP: the first bind may come as soon as the server listens. */
    exit_code = 1;
    if (kube) {
        ext_events_config ec;
        ext_events_config_defaults(&ec);
        if (!(events = ext_events_start(kube, &ec, err, sizeof err))) {
            fprintf(stderr, "%s\n", err);
            goto fail;
        }
    }
    if (kube && delivery_mode == EXT_DELIVERY_RESERVATION && !(rsv = ext_rsv_new(&rsvc, st, kube, events, leader, err, sizeof err))) {
        fprintf(stderr, "%s\n", err);
        goto fail;
    }
    watch_users wu = {st, rsv};
    /* The webhook's tessera-cuda-shim runs the reservation pods' image: the controller's once it knows it
     * (from --reserve-image or our own Pod), the flag alone without a controller (standalone). */
    if (rsv) {
        wc.image_fn = rsv_image;
        wc.image_user = rsv;
    } else {
        snprintf(wc.image, sizeof wc.image, "%s", rsvc.image);
    }
    if (kube && delivery_mode == EXT_DELIVERY_RESERVATION) {
        if (!(pss = ext_pss_new(kube, 0))) { fprintf(stderr, "out of memory\n"); goto fail; }
        wc.ns_level_fn = ext_pss_level;
        wc.ns_level_user = pss;
    }
    ext_verbs verbs;
    ext_verbs_init(&verbs, st, pol, kube ? bind_via_kube : NULL, kube);
    verbs.events = events;
    verbs.rsv = rsv;
    verbs.fraction_no_mps = delivery_mode == EXT_DELIVERY_RESERVATION;
    verbs.ctx.workload = workload;
    if (online_workload) {
        char oerr[256];
        verbs.online = policy_online_new(online_half_life, POLICY_ONLINE_WARMUP, oerr, sizeof oerr);
        if (!verbs.online) fprintf(stderr, "--online-workload: %s; continuing without a target workload\n", oerr);
    }
    verbs.leader = leader;
    verbs.kube = kube;   /* bind reads a claim the watch has not shown yet */
    hc.verbs = &verbs;
    wc.mirror = st;   /* the accounting resources are sized for this cluster's GPUs once it has synced */
    hc.webhook = &wc;
    if (kube) {
        hc.kube_stats = kube_stats_of;
        hc.kube_user = kube;
        hc.health = true;   /* /readyz: not ready while a dependency it cannot answer correctly without fails */
        static const ext_dep used[] = {EXT_DEP_API_NODES, EXT_DEP_API_PODS, EXT_DEP_BIND, EXT_DEP_LISTEN, EXT_DEP_EVENTS};
        for (size_t i = 0; i < sizeof used / sizeof used[0]; i++) ext_health_register(used[i]);
        if (leader) ext_health_register(EXT_DEP_LEASE);
        if (kc.dra) {
            ext_health_register(EXT_DEP_API_SLICES);
            ext_health_register(EXT_DEP_API_CLAIMS);
            ext_health_register(EXT_DEP_API_CLASSES);
        }
        if (rsv) {
            ext_health_register(EXT_DEP_RESERVATIONS);
            ext_health_register(EXT_DEP_RESERVE_IMAGE);
        }
        if (kc.token_file[0]) ext_health_register(EXT_DEP_TOKEN_FILE);
        if (kc.ca_file[0]) {
            ext_health_register(EXT_DEP_CA_FILE);
            /* curl reads it only when it connects; say at once that it cannot */
            FILE *caf = fopen(kc.ca_file, "rb");
            if (!caf) {
                char msg[700];
                snprintf(msg, sizeof msg, "cannot read CA file %s: %s", kc.ca_file, strerror(errno));
                ext_health_fail(EXT_DEP_CA_FILE, 0, EXT_REASON_FILE, msg);
            } else {
                fclose(caf);
            }
        }
    }
    /* The webhook's TLS listener on the Secret's certificate, (re)started by ext_webhook_tls below;
     * while it cannot start, /readyz says why (the Service publishes not-ready pods, so reviews
     * sent to this replica fail until a retry works: see deploy/service.yaml). */
    if (webhook_listen[0] && !webhook_cert) {
        ext_http_config wl = hc;
        snprintf(wl.listen, sizeof wl.listen, "%s", webhook_listen);
        if (!(whl = ext_webhook_listener_new(&wl))) { fprintf(stderr, "out of memory\n"); goto fail; }
    }
    if (!(http = ext_http_start(&hc, err, sizeof err))) {
        fprintf(stderr, "%s\n", err);
        goto fail;
    }
    if (metrics_listen) {
        ext_http_config oc = hc;
        snprintf(oc.listen, sizeof oc.listen, "%s", metrics_listen);
        oc.ops_only = true;
        oc.metrics_from = ext_http_metrics(http);
        oc.tls_cert_file = oc.tls_key_file = oc.tls_client_ca_file = NULL;
        if (!(ops = ext_http_start(&oc, err, sizeof err))) {
            fprintf(stderr, "--metrics-listen: %s\n", err);
            goto fail;
        }
        kube_log(KUBE_LOG_INFO, "event=serving-ops listen=%s port=%d", metrics_listen, ext_http_port(ops));
    }
    kube_log(KUBE_LOG_INFO, "event=serving listen=%s port=%d prefix=%s policy=%s mode=%s tls=%s", hc.listen,
             ext_http_port(http), hc.prefix, policy_name(pol), standalone ? "standalone" : "cluster",
             hc.tls_cert_file ? "on" : "off");
    /* The webhook's TLS listener: from files, or from the Secret tessera keeps (restarted on renewal). */
    ext_http *whf = NULL;
    ext_webhook_tls *wtls = NULL;
    if (webhook_listen[0]) {
        ext_http_config fc = hc;
        fc.webhook_only = true;
        fc.tls_client_ca_file = NULL;
        snprintf(fc.listen, sizeof fc.listen, "%s", webhook_listen);
        fc.tls_cert_file = webhook_cert;
        fc.tls_key_file = webhook_key;
        fc.health = false;   /* the webhook's listener has no /readyz */
        ext_health_register(EXT_DEP_WEBHOOK_LISTEN);
        if (!webhook_cert) {   /* the Secret tessera manages */
            ext_health_register(EXT_DEP_WEBHOOK_SECRET);
            if (wtc.webhook_config[0]) ext_health_register(EXT_DEP_WEBHOOK_CONFIG);
        }
        if (webhook_cert ? !(whf = ext_http_start(&fc, err, sizeof err))
                         : !(wtls = ext_webhook_tls_start(&wtc, ext_webhook_tls_kube_request, kube,
                                                          ext_webhook_listener_on_pem, whl, err, sizeof err))) {
            fprintf(stderr, "--webhook-listen: %s\n", err);
            goto fail;
        }
        if (whf)
            kube_log(KUBE_LOG_INFO, "event=serving-webhook listen=%s port=%d cert=%s", webhook_listen, ext_http_port(whf),
                     webhook_cert);
    }
    kube_log(KUBE_LOG_INFO, "event=webhook schedulers=%d delivery=%s runtime_class=%s listen=%s", wc.nschedulers ? wc.nschedulers : 1,
             ext_delivery_mode_name(wc.delivery), wc.runtime_class[0] ? wc.runtime_class : "-",
             webhook_listen[0] ? webhook_listen : "-");
    if (standalone) print_demo_help(hc.listen, ext_http_port(http), hc.prefix, &wc);
    exit_code = 0;
    if ((kube && kube_start(kube, on_watch_event, &wu, err, sizeof err) < 0) ||
        (leader && ext_leader_start(leader, err, sizeof err) < 0) || (rsv && ext_rsv_start(rsv, err, sizeof err) < 0)) {
        fprintf(stderr, "API client: %s\n", err);
        /* Torn down below in the shutdown order: the webhook's certificate thread and listeners
         * run by now and use the client, so they stop before it is freed. */
        exit_code = 1;
    }

    while (!exit_code) {
        struct timespec tick = {1, 0};
        int sig = sigtimedwait(&sigs, NULL, &tick);
        if (sig == SIGTERM || sig == SIGINT) {
            kube_log(KUBE_LOG_INFO, "event=shutdown signal=%s", sig == SIGTERM ? "SIGTERM" : "SIGINT");
            break;
        }
        ext_state_lock(st);
        ext_state_expire(st, ext_now_ms());
        ext_state_unlock(st);
    }
    /* No new binds; HTTP next (the metrics listener, then the verbs), so no verb runs against a state being
     * torn down and binds in flight finish under the Lease; then the Lease is released (a successor takes over
     * at once); then the Events queue (no bind can enqueue any more; what is queued is posted for up to a
     * second, while the API client still exists); then the watchers. */
    ext_leader_stop(leader);
    ext_webhook_tls_stop(wtls);   /* no restart of the webhook listener after this */
    ext_http_stop(whf);
    ext_webhook_listener_free(whl);
    ext_http_stop(ops);
    ext_http_stop(http);
    ext_pss_free(pss);   /* after every listener that serves the webhook, before the client it reads with */
    ext_rsv_stop(rsv);   /* before the leader, the Events queue and the client it uses */
    ext_leader_free(leader);
    ext_events_stop(events);
    kube_free(kube);
    ext_rsv_free(rsv);   /* after the client: its watch threads feed the controller's tables */
    ext_state_free(st);
    policy_workload_free(workload);
    policy_online_free(verbs.online);   /* after the servers: nothing prioritizes any more */
    if (!exit_code) kube_log(KUBE_LOG_INFO, "event=stopped");
    return exit_code;

fail:   /* startup failed before anything ran: free what was made, newest first */
    ext_http_stop(ops);
    ext_http_stop(http);
    ext_webhook_listener_free(whl);
    ext_rsv_free(rsv);
    ext_pss_free(pss);
    ext_events_stop(events);
    ext_leader_free(leader);
    kube_free(kube);
    ext_state_free(st);
    return exit_code;
}
