/* log_capture.h -- capture the extender's log lines (kube_log_set_hook) in a test, to check
 * what an operator would read: that a failure is logged once at warn, and its recovery at info.
 * Static functions, so each test file stands alone.
 */
#ifndef TEST_LOG_CAPTURE_H
#define TEST_LOG_CAPTURE_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/log.h"

#define LOG_CAPTURE static __attribute__((unused))

typedef struct log_capture {
    pthread_mutex_t mu;
    char *text;              /* every captured line, each ending in '\n' */
    size_t len, cap;
    kube_log_level saved;
} log_capture;

static log_capture g_logcap = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void logcap_hook(void *user, kube_log_level lvl, const char *line) {
    (void)user;
    (void)lvl;
    size_t n = strlen(line);
    pthread_mutex_lock(&g_logcap.mu);
    if (g_logcap.len + n + 2 > g_logcap.cap) {
        size_t c = g_logcap.cap ? g_logcap.cap : 65536;
        while (c < g_logcap.len + n + 2) c *= 2;
        char *t = realloc(g_logcap.text, c);
        if (t) { g_logcap.text = t; g_logcap.cap = c; }
    }
    if (g_logcap.len + n + 2 <= g_logcap.cap) {
        memcpy(g_logcap.text + g_logcap.len, line, n);
        g_logcap.len += n;
        g_logcap.text[g_logcap.len++] = '\n';
        g_logcap.text[g_logcap.len] = 0;
    }
    if (getenv("EXT_TEST_LOG")) fprintf(stderr, "%s\n", line);
    pthread_mutex_unlock(&g_logcap.mu);
}

/* Capture lines at level and above (info shows recoveries) until logcap_stop. */
LOG_CAPTURE void logcap_start(kube_log_level level) {
    pthread_mutex_lock(&g_logcap.mu);
    g_logcap.len = 0;
    if (g_logcap.text) g_logcap.text[0] = 0;
    pthread_mutex_unlock(&g_logcap.mu);
    g_logcap.saved = kube_log_get_level();
    kube_log_set_level(level);
    kube_log_set_hook(logcap_hook, NULL);
}

LOG_CAPTURE void logcap_stop(void) {
    kube_log_set_hook(NULL, NULL);
    kube_log_set_level(g_logcap.saved);
    pthread_mutex_lock(&g_logcap.mu);
    free(g_logcap.text);
    g_logcap.text = NULL;
    g_logcap.len = g_logcap.cap = 0;
    pthread_mutex_unlock(&g_logcap.mu);
}

/* Lines that contain every one of the (up to three, NULL-ended) substrings. */
LOG_CAPTURE int logcap_count(const char *a, const char *b, const char *c) {
    int n = 0;
    pthread_mutex_lock(&g_logcap.mu);
    for (const char *l = g_logcap.text; l && *l;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        char *line = strndup(l, len);
        if (line && strstr(line, a) && (!b || strstr(line, b)) && (!c || strstr(line, c))) n++;
        free(line);
        l += len + (e ? 1 : 0);
    }
    pthread_mutex_unlock(&g_logcap.mu);
    return n;
}

/* A copy of everything captured (for failure messages); the caller frees it. */
LOG_CAPTURE char *logcap_text(void) {
    pthread_mutex_lock(&g_logcap.mu);
    char *t = strdup(g_logcap.text ? g_logcap.text : "");
    pthread_mutex_unlock(&g_logcap.mu);
    return t;
}

#endif
