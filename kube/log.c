/* log.c -- one line per event on stderr with a UTC timestamp and a level. The line is
 * built in a buffer and written with one fwrite so concurrent threads do not interleave.
 */
#include "kube/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static _Atomic int g_level = KUBE_LOG_INFO;
static pthread_mutex_t g_hook_mu = PTHREAD_MUTEX_INITIALIZER;
static kube_log_hook g_hook;
static void *g_hook_user;
static _Atomic bool g_hooked;   /* lets the usual path skip the mutex */

void kube_log_set_hook(kube_log_hook fn, void *user) {
    pthread_mutex_lock(&g_hook_mu);
    g_hook = fn;
    g_hook_user = user;
    atomic_store(&g_hooked, fn != NULL);
    pthread_mutex_unlock(&g_hook_mu);
}

void kube_log_set_level(kube_log_level lvl) { atomic_store(&g_level, (int)lvl); }
kube_log_level kube_log_get_level(void) { return (kube_log_level)atomic_load(&g_level); }

int kube_log_parse_level(const char *s) {
    static const char *names[] = {"debug", "info", "warn", "error", "off"};
    for (int i = 0; s && i < 5; i++)
        if (strcmp(s, names[i]) == 0) return i;
    return -1;
}

void kube_log(kube_log_level lvl, const char *fmt, ...) {
    if ((int)lvl < atomic_load(&g_level)) return;
    static const char *names[] = {"debug", "info", "warn", "error", "off"};
    char line[2048];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    int off = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ level=%s ", tm.tm_year + 1900,
                       tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
                       names[lvl < 0 || lvl > KUBE_LOG_OFF ? 1 : lvl]);
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(line + off, sizeof line - (size_t)off - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)off + (w < 0 ? 0 : (size_t)w);
    if (len > sizeof line - 2) len = sizeof line - 2;
    for (size_t i = (size_t)off; i < len; i++)
        if (line[i] == '\n' || line[i] == '\r') line[i] = ' ';
    if (atomic_load(&g_hooked)) {
        pthread_mutex_lock(&g_hook_mu);
        bool done = g_hook != NULL;
        if (done) {
            line[len] = 0;
            g_hook(g_hook_user, lvl, line);
        }
        pthread_mutex_unlock(&g_hook_mu);
        if (done) return;
    }
    line[len++] = '\n';
    fwrite(line, 1, len, stderr);
}
