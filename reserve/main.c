/* main.c -- tessera-reserve, the program of a reservation pod: it finds the device the NVIDIA device
 * plugin handed its container (reserve/device.h), publishes the UUID on its own pod as the annotation
 * tessera.io/gpu-uuid (or tessera.io/reserve-error with the reason, which tessera treats as refused),
 * then holds the device by simply staying alive until SIGTERM/SIGINT, like pause. With --mps it first starts
 * the GPU's MPS control daemon and publishes only once it answers, and starts it again if it dies (reserve/mps.h).
 */
#include "kube/client.h"
#include "kube/log.h"
#include "kube/pod.h"
#include "reserve/device.h"
#include "reserve/install.h"
#include "reserve/mps.h"

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
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
KUBE_OPTIONS_TLS_HELP
"  --devices-dir DIR           volume-mounts device list (default " RESERVE_DEVICES_DIR ")\n"
"  --proc-root DIR             NVIDIA driver proc tree (default " RESERVE_PROC_ROOT ")\n"
"  --dev-root DIR              device nodes (default " RESERVE_DEV_ROOT ")\n"
"  --install-shim DIR          install libtessera-cuda.so for a soft share into DIR (the pod's emptyDir:\n"
"                              DIR/lib/, DIR/ld.so.preload, DIR/state/, DIR/config/) and exit: the init\n"
"                              container tessera-cuda-shim runs this (reserve/install.h)\n"
"  --shim-source FILE          the library to install (default " RESERVE_SHIM_SOURCE ")\n"
"\n"
"MPS (a reservation of a GPU whose shares ask tessera.io/compute-sharing: mps):\n"
"  --mps                       run the GPU's MPS control daemon (" RESERVE_MPS_PROGRAM " -f, found on\n"
"                              PATH: the NVIDIA container runtime mounts it when NVIDIA_DRIVER_CAPABILITIES\n"
"                              include compute) with CUDA_VISIBLE_DEVICES=<UUID>, CUDA_MPS_PIPE_DIRECTORY=\n"
"                              <root>/<UUID>/pipe and CUDA_MPS_LOG_DIRECTORY=<root>/<UUID>/log (made mode 1777;\n"
"                              a previous run's pipe directory removed, its log kept as log.previous); publish\n"
"                              the UUID, plus " RESERVE_ANN_MPS_PIPE " and\n"
"                              " RESERVE_ANN_MPS_LOG ", only once the daemon answers. A daemon that\n"
"                              does not start: " ANN_ERROR " with the reason and the last\n"
"                              lines of its control.log. A daemon that dies later is started again in the\n"
"                              same directories after 1, 2, 4 ... 16 s (logged as event=mps-daemon-restarted\n"
"                              with why and its control.log tail): CUDA processes that were its clients have\n"
"                              lost their contexts (CUDA's behaviour), new ones reach the new daemon. When\n"
"                              --mps-restarts are spent: " ANN_ERROR " beside the UUID (the\n"
"                              device stays held). SIGTERM: quit to the daemon, then exit.\n"
"                              Needs exactly one whole GPU and uid 0 (the daemon starts servers as its\n"
"                              clients' uids).\n"
"  --mps-root DIR              host directory of the pipe and log directories (default " RESERVE_MPS_ROOT ")\n"
"  --mps-shm DIR               the shared-memory directory MPS uses, made mode 1777 (default <root>/shm, the\n"
"                              host directory that the reservation and share pods mount as /dev/shm)\n"
"  --mps-timeout SECONDS       how long the daemon may take to answer (default 30)\n"
"  --mps-restarts N            restarts in a row of a daemon that died before giving up (default 5, 0: never;\n"
"                              a daemon that ran 10 minutes starts the count again)\n"
"  --help                      this text\n"
"\n"
"Environment: POD_NAME, POD_NAMESPACE (downward API; required unless --once, --no-annotate or --install-shim),\n"
"NVIDIA_VISIBLE_DEVICES (set by the device plugin), PATH (--mps).\n"
"Exit status: 0 after SIGTERM/SIGINT (or --once with a device, or --install-shim done), 1 --once without a\n"
"device or a failed --install-shim, 2 bad flags,\n"
"POD_NAME/POD_NAMESPACE missing or no API configuration.\n";

/* {"metadata":{"annotations":{"<set>": value, "<other>": null}}}: null removes a stale key a previous
 * run of the container left behind (a JSON merge patch deletes null members). The UUID (uuids) or the error
 * (why); both when an MPS daemon died for good under a published UUID: the pod still holds that device, and
 * the shares that run on it still use it, so the UUID stays beside the error. With --mps (mps_mode) the daemon's
 * directories go with a working daemon (mps), and are removed with an error. */
static char *patch_body(const char *uuids, const char *why, bool mps_mode, const reserve_mps *mps) {
    cJSON *root = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(root, "metadata");
    cJSON *ann = cJSON_AddObjectToObject(meta, "annotations");
    if (uuids) cJSON_AddStringToObject(ann, ANN_UUID, uuids);
    else cJSON_AddNullToObject(ann, ANN_UUID);
    if (why) cJSON_AddStringToObject(ann, ANN_ERROR, why);
    else cJSON_AddNullToObject(ann, ANN_ERROR);
    if (mps_mode && uuids && !why && mps) {
        cJSON_AddStringToObject(ann, RESERVE_ANN_MPS_PIPE, reserve_mps_pipe_dir(mps));
        cJSON_AddStringToObject(ann, RESERVE_ANN_MPS_LOG, reserve_mps_log_dir(mps));
    } else if (mps_mode) {
        cJSON_AddNullToObject(ann, RESERVE_ANN_MPS_PIPE);
        cJSON_AddNullToObject(ann, RESERVE_ANN_MPS_LOG);
    }
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
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

/* A daemon that ran this long before it died was healthy: its death starts the restart count again. */
#define MPS_HEALTHY_MS     600000
#define MPS_BACKOFF_MS     1000
#define MPS_BACKOFF_MAX_MS 16000

static long long mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Hold the device until SIGTERM/SIGINT (returned). With a daemon (*mps) that dies: it is started again
 * (reserve_mps_restart) after a back-off, at most max_restarts times in a row (reserve/mps.h says why and what the
 * shares see meanwhile); when they are spent, the death is reported on the pod beside the UUID (k NULL:
 * --no-annotate, only logged) and the daemon forgotten; the device stays held, so the pod shows what happened
 * and its shares keep their GPU until tessera deletes it. */
static int reserve_hold(const sigset_t *stop, reserve_mps **mps, int max_restarts, kube_client *k, const char *ns,
                        const char *name, const char *uuids) {
    int restarts = 0;                  /* in a row: since the last daemon that ran MPS_HEALTHY_MS */
    long long started_ms = mono_ms();  /* when the running daemon answered */
    for (;;) {
        /* SIGCHLD is blocked too (main), so a dying daemon wakes this at once; the timeout is a safety net */
        sigset_t wake = *stop;
        sigaddset(&wake, SIGCHLD);
        struct timespec ts = {1, 0};
        int sig = sigtimedwait(&wake, NULL, &ts);
        if (sig == SIGTERM || sig == SIGINT) return sig;
        char why[2048];
        if (!*mps || reserve_mps_alive(*mps, why, sizeof why)) continue;
        long long ran_ms = mono_ms() - started_ms;
        if (ran_ms >= MPS_HEALTHY_MS) restarts = 0;
        kube_log(KUBE_LOG_ERROR, "event=mps-died ran_s=%lld restarts=%d max_restarts=%d reason=\"%s\"", ran_ms / 1000,
                 restarts, max_restarts, why);
        bool back = false;
        while (restarts < max_restarts) {
            int delay = MPS_BACKOFF_MS << (restarts < 4 ? restarts : 4);
            if (delay > MPS_BACKOFF_MAX_MS) delay = MPS_BACKOFF_MAX_MS;
            restarts++;
            kube_log(KUBE_LOG_WARN, "event=mps-restarting attempt=%d max_restarts=%d in_ms=%d", restarts, max_restarts,
                     delay);
            if (wait_signal(stop, delay)) return SIGTERM;
            char rwhy[2048];
            if (reserve_mps_restart(*mps, rwhy, sizeof rwhy) == 0) {
                /* the clients of the dead daemon lost their contexts (CUDA's behaviour); new ones reach this one */
                kube_log(KUBE_LOG_WARN, "event=mps-daemon-restarted pid=%ld attempt=%d max_restarts=%d why=\"%s\"",
                         (long)reserve_mps_pid(*mps), restarts, max_restarts, why);
                started_ms = mono_ms();
                back = true;
                break;
            }
            kube_log(KUBE_LOG_ERROR, "event=mps-restart-failed attempt=%d max_restarts=%d reason=\"%s\"", restarts,
                     max_restarts, rwhy);
            snprintf(why, sizeof why, "%s", rwhy);
        }
        if (back) continue;
        size_t used = strlen(why);
        if (max_restarts == 0)
            snprintf(why + used, sizeof why - used, " (not restarted: --mps-restarts 0)");
        else
            snprintf(why + used, sizeof why - used, " (restarted %d time%s in a row, at most %d: given up)", restarts,
                     restarts == 1 ? "" : "s", max_restarts);
        kube_log(KUBE_LOG_ERROR, "event=mps-given-up restarts=%d reason=\"%s\"", restarts, why);
        reserve_mps_stop(*mps);
        *mps = NULL;
        if (!k) continue;
        char *body = patch_body(uuids, why, true, NULL);
        if (!body) continue;
        kube_log(KUBE_LOG_INFO, "event=publishing pod=%s/%s annotation=%s", ns, name, ANN_ERROR);
        bool stopped = publish(k, ns, name, body, stop);
        cJSON_free(body);
        if (stopped) return SIGTERM;
    }
}

int main(int argc, char **argv) {
    /* Blocked from the start (and in any thread libcurl may make): taken only by sigtimedwait/sigwaitinfo. */
    sigset_t stop;
    kube_pod_block_stop_signals(&stop);
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD); /* taken by reserve_hold's sigtimedwait: the MPS daemon exited */
    pthread_sigmask(SIG_BLOCK, &chld, NULL);

    enum { O_HELP = 1, O_ONCE, O_ANN, O_NOANN, O_DEVS, O_PROC, O_DEV, O_MPS,
           O_MPS_ROOT, O_MPS_SHM, O_MPS_TIMEOUT, O_MPS_RESTARTS, O_INSTALL, O_SHIMSRC };
    static const struct option opts[] = {
        {"help", no_argument, 0, O_HELP}, {"once", no_argument, 0, O_ONCE},
        {"annotate", no_argument, 0, O_ANN}, {"no-annotate", no_argument, 0, O_NOANN}, KUBE_OPTIONS,
        {"devices-dir", required_argument, 0, O_DEVS}, {"proc-root", required_argument, 0, O_PROC},
        {"dev-root", required_argument, 0, O_DEV}, {"mps", no_argument, 0, O_MPS},
        {"mps-root", required_argument, 0, O_MPS_ROOT}, {"mps-shm", required_argument, 0, O_MPS_SHM},
        {"mps-timeout", required_argument, 0, O_MPS_TIMEOUT},
        {"mps-restarts", required_argument, 0, O_MPS_RESTARTS}, {"install-shim", required_argument, 0, O_INSTALL},
        {"shim-source", required_argument, 0, O_SHIMSRC}, {0, 0, 0, 0}};
    kube_config kc;
    kube_config_defaults(&kc);
    snprintf(kc.user_agent, sizeof kc.user_agent, "tessera-reserve");
    reserve_env env;
    reserve_env_from_process(&env);
    reserve_mps_config mcfg;
    reserve_mps_config_defaults(&mcfg);
    bool once = false, annotate = true, api_given = false, mps_mode = false;
    int mps_restarts = RESERVE_MPS_RESTARTS;
    char *end = NULL;
    long secs;
    const char *install_dir = NULL, *shim_source = RESERVE_SHIM_SOURCE;
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
        case O_MPS: mps_mode = true; break;
        case O_MPS_ROOT: mcfg.root = optarg; break;
        case O_MPS_SHM: mcfg.shm_dir = optarg; break;
        case O_MPS_TIMEOUT:
            secs = strtol(optarg, &end, 10);
            if (!*optarg || *end || secs < 1 || secs > 3600) {
                fprintf(stderr, "--mps-timeout: \"%s\" is not a whole number of seconds from 1 to 3600\n", optarg);
                return 2;
            }
            mcfg.timeout_ms = (int)secs * 1000;
            break;
        case O_MPS_RESTARTS:
            secs = strtol(optarg, &end, 10);
            if (!*optarg || *end || secs < 0 || secs > 100) {
                fprintf(stderr, "--mps-restarts: \"%s\" is not a whole number from 0 to 100\n", optarg);
                return 2;
            }
            mps_restarts = (int)secs;
            break;
        case O_INSTALL: install_dir = optarg; break;
        case O_SHIMSRC: shim_source = optarg; break;
        default: fputs(usage, stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "unexpected argument: %s\n%s", argv[optind], usage);
        return 2;
    }
    if (once && mps_mode) {
        fputs("--once and --mps do not go together: --once only prints the device and exits\n", stderr);
        return 2;
    }

    char uuids[4096], why[2048];
    if (install_dir) {
        if (reserve_install_shim(install_dir, shim_source, why, sizeof why) < 0) {
            fprintf(stderr, "tessera-reserve --install-shim: %s\n", why);
            return 1;
        }
        printf("installed %s into %s\n", shim_source, install_dir);
        return 0;
    }
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
    reserve_mps *mps = NULL;
    if (mps_mode && method > 0) {
        kube_log(KUBE_LOG_INFO, "event=mps-starting uuid=%s root=%s program=%s", uuids, mcfg.root, mcfg.program);
        if ((mps = reserve_mps_start(&mcfg, uuids, why, sizeof why))) {
            kube_log(KUBE_LOG_INFO, "event=mps-ready pid=%ld pipe_dir=%s log_dir=%s", (long)reserve_mps_pid(mps),
                    reserve_mps_pipe_dir(mps), reserve_mps_log_dir(mps));
        } else {
            kube_log(KUBE_LOG_ERROR, "event=mps-failed reason=\"%s\"", why);
            method = RESERVE_FAILED;
        }
    }

    const char *ns = getenv("POD_NAMESPACE"), *name = getenv("POD_NAME");
    kube_client *k = NULL;
    if (annotate) {
        char err[512];
        if (!ns || !*ns || !name || !*name) {
            kube_log(KUBE_LOG_ERROR, "event=config-error reason=\"POD_NAME and POD_NAMESPACE must be set (downward "
                                   "API), or run with --no-annotate\"");
            reserve_mps_stop(mps);
            return 2;
        }
        if (!api_given && kube_config_in_cluster(&kc, err, sizeof err) < 0) {
            kube_log(KUBE_LOG_ERROR, "event=config-error reason=\"%s; give --kube-api URL\"", err);
            reserve_mps_stop(mps);
            return 2;
        }
        k = kube_new(&kc, err, sizeof err);
        char *body = k ? patch_body(method > 0 ? uuids : NULL, method > 0 ? NULL : why, mps_mode, mps) : NULL;
        if (!k || !body) {
            kube_log(KUBE_LOG_ERROR, "event=config-error reason=\"API client: %s\"", k ? "out of memory" : err);
            kube_free(k);
            reserve_mps_stop(mps);
            return 2;
        }
        kube_log(KUBE_LOG_INFO, "event=publishing pod=%s/%s annotation=%s api=%s", ns, name,
                 method > 0 ? ANN_UUID : ANN_ERROR, kc.api_url);
        bool stopped = publish(k, ns, name, body, &stop);
        cJSON_free(body);
        if (stopped) {
            kube_log(KUBE_LOG_INFO, "event=stopped before publishing");
            reserve_mps_stop(mps);
            kube_free(k);
            return 0;
        }
    }

    kube_log(KUBE_LOG_INFO, "event=waiting reason=\"holding the device until SIGTERM\"");
    int sig = reserve_hold(&stop, &mps, mps_restarts, k, ns, name, uuids);
    kube_log(KUBE_LOG_INFO, "event=exit signal=%d", sig);
    if (mps) kube_log(KUBE_LOG_INFO, "event=mps-quit pid=%ld", (long)reserve_mps_pid(mps));
    reserve_mps_stop(mps);
    kube_free(k);
    return 0;
}
