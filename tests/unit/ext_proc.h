/* ext_proc.h -- the real tessera-extender binary as a child process, for end-to-end tests: start it in
 * cluster mode against a fake API server, read the port it bound from its log, talk HTTP to it, end it with
 * a signal (SIGKILL: a crash without warning). Also the few pieces the benches share with the tests (a raw
 * loopback connection, main.c's bind callback): benches cannot include ext_helpers.h, which needs the harness.
 * Static functions, so each test file stands alone.
 */
#ifndef TEST_EXT_PROC_H
#define TEST_EXT_PROC_H

#include <arpa/inet.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cjson/cJSON.h>

#include "kube/client.h"
#include "tests/support/http_client.h"
#include "tests/support/wait.h"

#define EXT_PROC_HELPER static __attribute__((unused))

typedef struct proc { pid_t pid; int port; pthread_t drain; } proc;

/* The child's log goes to stderr only with EXT_TEST_LOG set. */
EXT_PROC_HELPER void *drain_log(void *arg) {
    FILE *f = arg;
    char line[1024];
    while (fgets(line, sizeof line, f))
        if (getenv("EXT_TEST_LOG")) fputs(line, stderr);
    fclose(f);
    return NULL;
}

/* build/<name> (a program the build made next to this test binary), if it is there and executable. */
EXT_PROC_HELPER bool sibling_binary_path(const char *name, char *out, size_t len) {
    char self[512];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return false;
    self[n] = 0;
    char *slash = strrchr(self, '/');
    if (!slash) return false;
    *slash = 0;
    snprintf(out, len, "%s/%s", self, name);
    return access(out, X_OK) == 0;
}

/* build/tessera-extender, next to this test binary. */
EXT_PROC_HELPER bool extender_path(char *out, size_t len) { return sibling_binary_path("tessera-extender", out, len); }

/* Start the extender in cluster mode against api_url, with extra flags (NULL-terminated, may be NULL); the
 * port it bound is read from its event=serving log line. */
EXT_PROC_HELPER bool proc_start_with(proc *p, const char *bin, const char *api_url, const char *const *extra) {
    const char *argv[48] = {bin, "--kube-api", api_url, "--listen", "127.0.0.1:0",
                            /* no TLS webhook listener on the fixed port 8443 during tests */
                            "--webhook-listen", "", "--log-level", "info", "--bind-timeout", "5"};
    int n = 11;
    for (int i = 0; extra && extra[i] && n < 47; i++) argv[n++] = extra[i];
    argv[n] = NULL;
    int fds[2];
    if (pipe(fds) != 0) return false;
    p->pid = fork();
    if (p->pid < 0) return false;
    if (p->pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        close(fds[1]);
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, 1);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    FILE *f = fdopen(fds[0], "r");
    char line[1024];
    p->port = 0;
    while (!p->port && fgets(line, sizeof line, f)) {
        if (getenv("EXT_TEST_LOG")) fputs(line, stderr);
        char *s = strstr(line, "event=serving listen=");
        if (s && (s = strstr(s, " port="))) p->port = atoi(s + 6);
    }
    pthread_create(&p->drain, NULL, drain_log, f);
    return p->port > 0;
}

EXT_PROC_HELPER bool proc_start(proc *p, const char *bin, const char *api_url) { return proc_start_with(p, bin, api_url, NULL); }

EXT_PROC_HELPER void proc_end(proc *p, int sig) {
    kill(p->pid, sig);
    int st;
    waitpid(p->pid, &st, 0);
    pthread_join(p->drain, NULL);
}

/* The curl body collector the tests share (tests/support/http_client.h), under the names the tests use. */
typedef http_body cbuf;
#define on_body http_body_collect

/* GET (body NULL) or POST; the reply as JSON (NULL unless 200 and JSON). */
EXT_PROC_HELPER cJSON *http(int port, const char *path, const char *body, long *code) {
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    char *text = http_call(url, body, 10, code);
    cJSON *o = *code == 200 && text ? cJSON_Parse(text) : NULL;
    free(text);
    return o;
}

/* GET the body as text (caller frees; NULL when nothing answered), whatever its status and type. */
EXT_PROC_HELPER char *http_text(int port, const char *path, long *code) {
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    return http_call(url, NULL, 10, code);
}

/* A raw TCP connection to 127.0.0.1:port whose reads time out after timeout_s, or -1. nodelay turns off Nagle
 * as Go's net/http client does (no delay between a request's header and its body). */
EXT_PROC_HELPER int loopback_connect(int port, int timeout_s, bool nodelay) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {timeout_s, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    int one = 1;
    if (nodelay) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* main.c's kube_bind, for in-process verbs wired to a real kube_client (user): 0 on 200/201, else -1 with the
 * API client's message. */
EXT_PROC_HELPER int kube_bind_fn(void *user, const char *ns, const char *name, const char *uid, const char *node,
                                 const cJSON *annotations, char *err, size_t errlen) {
    int code = kube_bind(user, ns, name, uid, node, annotations, err, errlen);
    if (code == 200 || code == 201) return 0;
    if (code > 0 && !err[0]) snprintf(err, errlen, "API server answered %d", code);
    return -1;
}

/* /readyz answers 200 (wait.h: a deadline that only ends a hang). */
EXT_PROC_HELPER bool wait_ready(int port) {
    return WAIT_FOR(({
        long code;
        cJSON_Delete(http(port, "/readyz", NULL, &code));
        code == 200;
    }));
}

#endif
