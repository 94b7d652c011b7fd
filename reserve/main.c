/* main.c -- tessera-reserve, the program of a reservation pod: it finds the device the NVIDIA device
 * plugin handed its container (reserve/device.h), publishes the UUID on its own pod as the annotation
 * tessera.io/gpu-uuid (or tessera.io/reserve-error with the reason, which tessera treats as refused),
 * then holds the device by simply staying alive until SIGTERM/SIGINT, like pause.
 */
#include "kube/client.h"
#include "kube/log.h"
#include "kube/pod.h"
#include "reserve/device.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ANN_UUID  "tessera.io/gpu-uuid"
#define ANN_ERROR "tessera.io/reserve-error"
#define BACKOFF_FIRST_MS 1000
#define BACKOFF_MAX_MS   30000

static const char usage[] =
"usage: tessera-reserve [flags]\n"
"Runs in a tessera reservation pod: finds the GPU, MIG instance or time-slice replica the NVIDIA device\n"
"plugin gave this container, writes its UUID to the pod's annotation " ANN_UUID " (or\n"
ANN_ERROR " with the reason) and waits for SIGTERM. tessera-extender creates these pods;\n"
"you do not run this program yourself, except with --once to check what a container was given.\n"
"\n"
"How the device is found: NVIDIA_VISIBLE_DEVICES holding UUIDs (the plugin's envvar strategy) or GPU\n"
"indexes (deviceIDStrategy=index, resolved through --proc-root); NVIDIA_VISIBLE_DEVICES naming\n"
"--devices-dir: the UUID file names there (volume-mounts strategy); unset, void, none or all: the\n"
"/dev/nvidia<minor> nodes under --dev-root matched to --proc-root (CDI), else the GPUs --proc-root lists.\n"
"\n"
"  --once                      print the UUID(s) on stdout and exit (1 and the reason on stderr if none):\n"
"                              for kubectl exec checks\n"
"  --annotate                  publish on the pod (default)\n"
"  --no-annotate               do not talk to the API server; just log and wait\n"
"  --kube-api URL              API server URL (default: in-cluster configuration, i.e.\n"
"                              KUBERNETES_SERVICE_HOST/PORT and the service account's token and CA)\n"
"  --token-file FILE           bearer token file (default in a cluster: the service account's)\n"
"  --ca-file FILE              CA bundle for the API server's certificate (default in a cluster:\n"
"                              the service account's ca.crt)\n"
"  --client-cert FILE          client certificate for the API server\n"
"  --client-key FILE           key for --client-cert\n"
"  --insecure-skip-tls-verify  do not verify the API server's certificate (tests only)\n"
"  --devices-dir DIR           volume-mounts device list (default " RESERVE_DEVICES_DIR ")\n"
"  --proc-root DIR             NVIDIA driver proc tree (default " RESERVE_PROC_ROOT ")\n"
"  --dev-root DIR              device nodes (default " RESERVE_DEV_ROOT ")\n"
"  --help                      this text\n"
"\n"
"Environment: POD_NAME, POD_NAMESPACE (downward API; required unless --once or --no-annotate),\n"
"NVIDIA_VISIBLE_DEVICES (set by the device plugin).\n"
"Exit status: 0 after SIGTERM/SIGINT (or --once with a device), 1 --once without a device, 2 bad flags,\n"
"POD_NAME/POD_NAMESPACE missing or no API configuration.\n";

/* {"metadata":{"annotations":{"<set>": value, "<other>": null}}}: null removes a stale key a previous
 * run of the container left behind (a JSON merge patch deletes null members). */
static char *patch_body(const char *uuids, const char *why) {
    const char *keys[2] = {uuids ? ANN_UUID : ANN_ERROR, uuids ? ANN_ERROR : ANN_UUID};
    const char *values[2] = {uuids ? uuids : why, NULL};
    return kube_annotations_patch(keys, values, 2);
}

/* Sleep ms, or less if one of the blocked signals in set arrives: then true. */
static bool wait_signal(const sigset_t *set, int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    for (;;) {
        int sig = sigtimedwait(set, NULL, &ts);
        if (sig > 0) return true;
        if (errno != EINTR) return false; /* EAGAIN: the time is up */
    }
}

/* PATCH until it succeeds. Transient failures (no answer, 5xx, 429) back off 1 s, 2 s, ... 30 s; any
 * other refusal (403 without RBAC, 404 for a wrong POD_NAME) will not mend by itself, so it waits the cap
 * between tries and says so. Returns true if a signal asked us to stop meanwhile. */
static bool publish(kube_client *k, const char *ns, const char *name, const char *body, const sigset_t *set) {
    char path[700], err[512];
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s", ns, name);
    int delay = BACKOFF_FIRST_MS;
    for (int attempt = 1;; attempt++) {
        int st = kube_request(k, "PATCH", path, body, 0, NULL, err, sizeof err);
        if (st >= 200 && st < 300) {
            kube_log(KUBE_LOG_INFO, "event=published pod=%s/%s status=%d attempt=%d", ns, name, st, attempt);
            return false;
        }
        bool transient = st < 0 || st >= 500 || st == 429;
        int wait = transient ? delay : BACKOFF_MAX_MS;
        kube_log(transient ? KUBE_LOG_WARN : KUBE_LOG_ERROR,
                 "event=patch-failed pod=%s/%s status=%d attempt=%d retry_in_s=%d transient=%s err=\"%s\"", ns, name,
                 st, attempt, wait / 1000, transient ? "true" : "false", err);
        if (wait_signal(set, wait)) return true;
        if (transient) delay = delay * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : delay * 2;
    }
}

int main(int argc, char **argv) {
    /* Blocked from the start (and in any thread libcurl may make): taken only by sigtimedwait/sigwaitinfo. */
    sigset_t stop;
    kube_pod_block_stop_signals(&stop);

    enum { O_HELP = 1, O_ONCE, O_ANN, O_NOANN, O_DEVS, O_PROC, O_DEV };
    static const struct option opts[] = {
        {"help", no_argument, 0, O_HELP}, {"once", no_argument, 0, O_ONCE},
        {"annotate", no_argument, 0, O_ANN}, {"no-annotate", no_argument, 0, O_NOANN}, KUBE_OPTIONS,
        {"devices-dir", required_argument, 0, O_DEVS}, {"proc-root", required_argument, 0, O_PROC},
        {"dev-root", required_argument, 0, O_DEV}, {0, 0, 0, 0}};
    kube_config kc;
    kube_config_defaults(&kc);
    snprintf(kc.user_agent, sizeof kc.user_agent, "tessera-reserve");
    reserve_env env;
    reserve_env_from_process(&env);
    bool once = false, annotate = true, api_given = false;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (kube_config_option(&kc, c, optarg)) {
            api_given |= c == KUBE_OPT_API;
            continue;
        }
        switch (c) {
        case O_HELP: fputs(usage, stdout); return 0;
        case O_ONCE: once = true; break;
        case O_ANN: annotate = true; break;
        case O_NOANN: annotate = false; break;
        case O_DEVS: env.devices_dir = optarg; break;
        case O_PROC: env.proc_root = optarg; break;
        case O_DEV: env.dev_root = optarg; break;
        default: fputs(usage, stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "unexpected argument: %s\n%s", argv[optind], usage);
        return 2;
    }

    char uuids[4096], why[2048];
    int method = reserve_find_devices(&env, uuids, sizeof uuids, why, sizeof why);
    if (once) {
        if (method < 0) {
            fprintf(stderr, "%s\n", why);
            return 1;
        }
        printf("%s\n", uuids);
        return 0;
    }
    if (method > 0) kube_log(KUBE_LOG_INFO, "event=device method=%s uuid=%s", reserve_method_name(method), uuids);
    else kube_log(KUBE_LOG_ERROR, "event=no-device reason=\"%s\"", why);

    if (annotate) {
        const char *ns = getenv("POD_NAMESPACE"), *name = getenv("POD_NAME");
        char err[512];
        if (!ns || !*ns || !name || !*name) {
            kube_log(KUBE_LOG_ERROR, "event=config-error reason=\"POD_NAME and POD_NAMESPACE must be set (downward "
                                   "API), or run with --no-annotate\"");
            return 2;
        }
        if (!api_given && kube_config_in_cluster(&kc, err, sizeof err) < 0) {
            kube_log(KUBE_LOG_ERROR, "event=config-error reason=\"%s; give --kube-api URL\"", err);
            return 2;
        }
        kube_client *k = kube_new(&kc, err, sizeof err);
        char *body = k ? patch_body(method > 0 ? uuids : NULL, why) : NULL;
        if (!k || !body) {
            kube_log(KUBE_LOG_ERROR, "event=config-error reason=\"API client: %s\"", k ? "out of memory" : err);
            kube_free(k);
            return 2;
        }
        kube_log(KUBE_LOG_INFO, "event=publishing pod=%s/%s annotation=%s api=%s", ns, name,
                 method > 0 ? ANN_UUID : ANN_ERROR, kc.api_url);
        bool stopped = publish(k, ns, name, body, &stop);
        cJSON_free(body);
        kube_free(k);
        if (stopped) {
            kube_log(KUBE_LOG_INFO, "event=stopped before publishing");
            return 0;
        }
    }

    kube_log(KUBE_LOG_INFO, "event=waiting reason=\"holding the device until SIGTERM\"");
    int sig;
    while ((sig = sigwaitinfo(&stop, NULL)) < 0 && errno == EINTR) {}
    kube_log(KUBE_LOG_INFO, "event=exit signal=%d", sig);
    return 0;
}
