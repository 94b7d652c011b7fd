/* log.c -- see log.h. */
#include "agent/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static atomic_int g_level = AGENT_LOG_INFO;
static const char *const names[] = {"debug", "info", "warn", "error", "off"};

int agent_log_parse_level(const char *s) {
    for (int i = 0; s && i <= AGENT_LOG_OFF; i++)
        if (!strcmp(s, names[i])) return i;
    return -1;
}

void agent_log_set_level(agent_log_level lvl) { atomic_store(&g_level, (int)lvl); }

void agent_log(agent_log_level lvl, const char *fmt, ...) {
    if ((int)lvl < atomic_load(&g_level) || lvl >= AGENT_LOG_OFF) return;
    char line[2048];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    int off = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ level=%s ", tm.tm_year + 1900,
                       tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, names[lvl]);
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(line + off, sizeof line - (size_t)off - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)off + (w < 0 ? 0 : (size_t)w);
    if (len > sizeof line - 2) len = sizeof line - 2;
    for (size_t i = (size_t)off; i < len; i++)
        if (line[i] == '\n' || line[i] == '\r') line[i] = ' ';
    line[len++] = '\n';
    /* one write(2): lines of concurrent threads never interleave */
    ssize_t r = write(2, line, len);
    (void)r;
}
