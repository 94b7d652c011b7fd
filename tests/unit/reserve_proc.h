/* reserve_proc.h -- the real build/tessera-reserve as a child process, for its end-to-end tests (test_reserve.c,
 * test_reserve_mps.c): start it with an exact environment, wait for its exit or for a line in its log, read the
 * annotations it published on the fake API server. Static functions, so each test file stands alone.
 */
#ifndef TEST_RESERVE_PROC_H
#define TEST_RESERVE_PROC_H

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "ext_proc.h"
#include "tests/support/fake_apiserver.h"

#define RESERVE_PROC_HELPER static __attribute__((unused))

RESERVE_PROC_HELPER bool reserve_path(char *out, size_t len) {
    return sibling_binary_path("tessera-reserve", out, len);
}

/* Run bin with exactly envp, stdout and stderr into files. */
RESERVE_PROC_HELPER pid_t spawn(char *const argv[], char *const envp[], const char *out_path, const char *err_path) {
    pid_t pid = fork();
    if (pid != 0) return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* a test that fails early never leaves it running */
    int o = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644), e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (o < 0 || e < 0) _exit(126);
    dup2(o, 1);
    dup2(e, 2);
    execve(argv[0], argv, envp);
    _exit(127);
}

/* Exit status, or -1 if it has not exited within ms. */
RESERVE_PROC_HELPER int wait_exit(pid_t pid, int ms) {
    for (int waited = 0; waited <= ms; waited += 20) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return -1;
}

RESERVE_PROC_HELPER char *slurp(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return strdup("");
    char *buf = calloc(1, 65536);
    size_t n = fread(buf, 1, 65535, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

/* Poll until the log contains one of the needles; returns its index or -1. */
RESERVE_PROC_HELPER int wait_log(const char *path, const char *const needles[], int n, int ms) {
    for (int waited = 0; waited <= ms; waited += 20) {
        char *log = slurp(path);
        for (int i = 0; i < n; i++)
            if (strstr(log, needles[i])) { free(log); return i; }
        free(log);
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return -1;
}

/* The pod's annotation, or NULL (malloc'd). */
RESERVE_PROC_HELPER char *pod_annotation(fake_api *f, const char *ns, const char *name, const char *key) {
    char *json = fake_api_get(f, "pods", ns, name);
    cJSON *pod = json ? cJSON_Parse(json) : NULL;
    free(json);
    cJSON *ann = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "metadata"), "annotations");
    cJSON *v = cJSON_GetObjectItemCaseSensitive(ann, key);
    char *s = cJSON_IsString(v) ? strdup(v->valuestring) : NULL;
    cJSON_Delete(pod);
    return s;
}

#endif
