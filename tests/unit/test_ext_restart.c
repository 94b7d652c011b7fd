/* test_ext_restart.c -- the real tessera-extender binary against the fake API server,
 * SIGKILLed in the middle of a burst of binds and started again. What the second process
 * rebuilds from list+watch must equal what the API says: every pod the API shows on a
 * node holds exactly its GPUs there (none counted twice, none lost), and pods whose bind
 * died with the first process are scheduled by the second. At the end every pod is bound
 * and no GPU is over-committed, judged from the API's own record (the annotations).
 *
 * The binary is the one next to the test binary (make builds both; `make asan` builds
 * both with the sanitizers).
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ext_helpers.h"
#include "ext_proc.h"
#include "extender/base/annotation.h"
#include "tests/support/fake_apiserver.h"

#define R_NODES 4
#define R_PODS (R_NODES * 8 * 2)        /* two 40960 MiB pods per 81920 MiB A100: exactly full */
#define R_POD_MIB 40960

typedef struct bind_job { int port, pod; char node[32]; } bind_job;

static void *bind_thread(void *arg) {
    bind_job *j = arg;
    char body[256];
    snprintf(body, sizeof body, "{\"PodName\":\"r%d\",\"PodNamespace\":\"default\",\"PodUID\":\"uid-r%d\",\"Node\":\"%s\"}",
             j->pod, j->pod, j->node);
    long code;
    cJSON_Delete(http(j->port, "/tessera/bind", body, &code));   /* the outcome is read from the API afterwards */
    free(j);
    return NULL;
}

/* One scheduling round as kube-scheduler runs it: for each pod the API shows pending,
 * filter over all nodes, take the first feasible node, bind asynchronously. After
 * max_binds binds are started the round stops (0: no limit). Returns binds started. */
static int schedule_round(fake_api *api, int port, pthread_t *threads, int *nthreads, int max_binds) {
    static const char *names[R_NODES] = {"r-0", "r-1", "r-2", "r-3"};
    int started = 0;
    for (int i = 0; i < R_PODS && (!max_binds || started < max_binds); i++) {
        char name[16];
        snprintf(name, sizeof name, "r%d", i);
        char *txt = fake_api_get(api, "pods", "default", name);
        cJSON *pod = cJSON_Parse(txt);
        free(txt);
        const cJSON *nn = cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "spec"), "nodeName");
        bool pending = !cJSON_IsString(nn);
        char *pj = pending ? cJSON_PrintUnformatted(pod) : NULL;
        cJSON_Delete(pod);
        if (!pending) continue;
        char *args = args_names(pj, names, R_NODES);
        free(pj);
        long code;
        cJSON *f = http(port, "/tessera/filter", args, &code);
        free(args);
        const cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItem(f, "NodeNames"), 0);
        if (cJSON_IsString(first)) {
            bind_job *j = malloc(sizeof *j);
            *j = (bind_job){port, i, ""};
            snprintf(j->node, sizeof j->node, "%s", first->valuestring);
            if (pthread_create(&threads[*nthreads], NULL, bind_thread, j) == 0) (*nthreads)++;
            else free(j);
            started++;
        }
        cJSON_Delete(f);
    }
    return started;
}

/* Per node: MiB the API's pods there hold (R_POD_MIB each), and per GPU the pods the
 * API's tessera.io/assignment annotations put on it. */
typedef struct api_view { int pods_on[R_NODES]; int per_gpu[R_NODES][8]; int bound; } api_view;

static void read_api(fake_api *api, api_view *v) {
    memset(v, 0, sizeof *v);
    char *txt = fake_api_list(api, "pods");
    cJSON *arr = cJSON_Parse(txt), *p;
    free(txt);
    cJSON_ArrayForEach(p, arr) {
        const cJSON *nn = cJSON_GetObjectItem(cJSON_GetObjectItem(p, "spec"), "nodeName");
        if (!cJSON_IsString(nn)) continue;
        int n = atoi(nn->valuestring + 2);
        if (n < 0 || n >= R_NODES) continue;
        v->pods_on[n]++;
        v->bound++;
        const cJSON *ann = cJSON_GetObjectItem(cJSON_GetObjectItem(p, "metadata"), "annotations");
        const cJSON *as = cJSON_GetObjectItem(ann, EXT_ANN_ASSIGNMENT);
        cJSON *a = cJSON_IsString(as) ? cJSON_Parse(as->valuestring) : NULL, *g;
        cJSON_ArrayForEach(g, cJSON_GetObjectItem(a, "grants")) {
            int gi = cJSON_GetObjectItem(g, "gpu") ? cJSON_GetObjectItem(g, "gpu")->valueint : -1;
            if (gi >= 0 && gi < 8) v->per_gpu[n][gi]++;
        }
        cJSON_Delete(a);
    }
    cJSON_Delete(arr);
}

/* The extender's view from /debug/state: memory used per node, and pods it holds. */
static bool read_ext(int port, int used_mib[R_NODES], int *holding) {
    long code;
    cJSON *d = http(port, "/debug/state", NULL, &code), *n;
    if (!d) return false;
    memset(used_mib, 0, sizeof(int) * R_NODES);
    *holding = 0;
    bool consistent = true;
    cJSON_ArrayForEach(n, cJSON_GetObjectItem(d, "nodes")) {
        int i = atoi(cJSON_GetObjectItem(n, "name")->valuestring + 2);
        cJSON *g, *p;
        cJSON_ArrayForEach(g, cJSON_GetObjectItem(n, "gpus")) used_mib[i] += cJSON_GetObjectItem(g, "memoryUsedMiB")->valueint;
        cJSON_ArrayForEach(p, cJSON_GetObjectItem(n, "pods")) *holding += cJSON_GetObjectItem(p, "assignment")->valuestring[0] != 0;
        consistent &= cJSON_IsTrue(cJSON_GetObjectItem(n, "consistent"));
    }
    cJSON_Delete(d);
    return consistent;
}

TEST(ext_restart_after_sigkill_mid_burst_rebuilds_the_api_state) {
    char bin[600];
    CHECK_MSG(extender_path(bin, sizeof bin), "tessera-extender is not built next to the tests (run make)");
    curl_global_init(CURL_GLOBAL_DEFAULT);
    char err[256];
    fake_api *api = fake_api_start(0, err, sizeof err);
    CHECK_MSG(api, "fake API: %s", err);
    for (int i = 0; i < R_NODES; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "r-%d", i);
        cJSON *n = demo_node_as("gpu-a100-whole", nm);
        char *t = cJSON_PrintUnformatted(n);
        fake_api_put(api, "nodes", t);
        free(t);
        cJSON_Delete(n);
    }
    for (int i = 0; i < R_PODS; i++) {
        char name[16], uid[24];
        snprintf(name, sizeof name, "r%d", i);
        snprintf(uid, sizeof uid, "uid-r%d", i);
        char *pj = pod_json(name, uid, 0, "\"nvidia.com/gpumem\":\"40960\"", NULL, NULL);
        fake_api_put(api, "pods", pj);
        free(pj);
    }
    char url[128];
    fake_api_url(api, url, sizeof url);
    pthread_t *threads = calloc(R_PODS * 4, sizeof *threads);
    int nthreads = 0;

    /* First life: about half the pods, binds in flight, then SIGKILL without warning. */
    proc p1;
    bool up1 = proc_start(&p1, bin, url) && wait_ready(p1.port);
    int started1 = up1 ? schedule_round(api, p1.port, threads, &nthreads, R_PODS / 2) : 0;
    if (up1) proc_end(&p1, SIGKILL);
    for (int i = 0; i < nthreads; i++) pthread_join(threads[i], NULL);
    nthreads = 0;
    api_view before;
    read_api(api, &before);

    /* Second life: its cache must equal the API's record, before it schedules anything. */
    proc p2;
    bool up2 = proc_start(&p2, bin, url) && wait_ready(p2.port);
    int used[R_NODES], holding = 0;
    bool consistent2 = up2 && read_ext(p2.port, used, &holding);
    bool equal = consistent2 && holding == before.bound;
    for (int i = 0; i < R_NODES; i++) equal &= used[i] == before.pods_on[i] * R_POD_MIB;

    /* Then it finishes the job: rounds until the API shows every pod bound. */
    api_view after = before;
    for (int64_t end = test_now_ms() + TEST_PATIENCE_MS; up2 && test_now_ms() < end && after.bound < R_PODS;) {
        schedule_round(api, p2.port, threads, &nthreads, 0);
        for (int i = 0; i < nthreads; i++) pthread_join(threads[i], NULL);
        nthreads = 0;
        usleep(50000);   /* let the watch confirm the binds */
        read_api(api, &after);
    }
    bool consistent3 = up2 && read_ext(p2.port, used, &holding);
    int max_per_gpu = 0;
    for (int n = 0; n < R_NODES; n++)
        for (int g = 0; g < 8; g++) max_per_gpu = after.per_gpu[n][g] > max_per_gpu ? after.per_gpu[n][g] : max_per_gpu;
    bool full = true;
    for (int i = 0; i < R_NODES; i++) full &= used[i] == 8 * 81920;
    if (up2) proc_end(&p2, SIGTERM);
    printf("    restart: first life started %d binds, API had %d bound at the kill; second life bound the rest "
           "(%d/%d)\n", started1, before.bound, after.bound, R_PODS);
    free(threads);
    fake_api_free(api);
    curl_global_cleanup();
    CHECK(up1);
    CHECK(up2);
    CHECK(started1 > 0);
    CHECK_MSG(equal, "rebuilt state differs from the API: %d pods hold GPUs, the API has %d bound", holding, before.bound);
    CHECK(consistent3);
    CHECK_INT(after.bound, R_PODS);
    CHECK_INT(max_per_gpu, 2);
    CHECK(full);
}

/* Its own listener: an address that is taken makes the binary exit 1 at once, naming the address, rather
 * than run without serving. */
TEST(ext_listen_address_in_use_exits_with_the_address) {
    char bin[600];
    CHECK_MSG(extender_path(bin, sizeof bin), "tessera-extender is not built next to the tests (run make)");
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sin;
    bool bound = s >= 0 && bind(s, (struct sockaddr *)&sin, sizeof sin) == 0 && listen(s, 1) == 0 &&
                 getsockname(s, (struct sockaddr *)&sin, &sl) == 0;
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", ntohs(sin.sin_port));
    int fds[2];
    bool piped = bound && pipe(fds) == 0;
    pid_t pid = piped ? fork() : -1;
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        close(fds[1]);
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, 1);
        execl(bin, bin, "--demo", "--listen", addr, (char *)NULL);
        _exit(127);
    }
    char out[4096] = "";
    size_t n = 0;
    if (piped) {
        close(fds[1]);
        ssize_t r;
        while (n < sizeof out - 1 && (r = read(fds[0], out + n, sizeof out - 1 - n)) > 0) n += (size_t)r;
        out[n] = 0;
        close(fds[0]);
    }
    int st = 0;
    if (pid > 0) waitpid(pid, &st, 0);
    if (s >= 0) close(s);
    CHECK(bound);
    CHECK(pid > 0);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 1, "exit status %d", st);
    CHECK_CONTAINS(out, addr);
    CHECK_CONTAINS(out, "cannot listen on");
}
