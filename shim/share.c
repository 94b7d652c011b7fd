/* share.c -- see share.h. */
#include "shim/share.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

enum { MODE_UNKNOWN, MODE_PASS, MODE_ENFORCE };
static int mode;                        /* atomic */
static unsigned long long share_mib;    /* valid when env_error is empty */
static char env_error[200];            /* why TESSERA_GPU_MEMORY_MIB cannot be used, or "" */

static void read_mode(void) {
    const char *v = getenv("TESSERA_GPU_MEMORY_MIB");
    if (!v) {
        __atomic_store_n(&mode, MODE_PASS, __ATOMIC_RELEASE);
        return;
    }
    unsigned long long n = 0;
    const char *p = v;
    /* digits only, no sign, no unit: what the ConfigMap writes; at most 2^30 MiB (1 PiB) */
    while (*p >= '0' && *p <= '9' && n <= (1ull << 30)) n = n * 10 + (unsigned long long)(*p++ - '0');
    if (p == v || *p || n == 0 || n > (1ull << 30))
        snprintf(env_error, sizeof env_error, "TESSERA_GPU_MEMORY_MIB=\"%.40s\" is not a whole number of MiB "
                                              "between 1 and 1073741824", v);
    else
        share_mib = n;
    __atomic_store_n(&mode, MODE_ENFORCE, __ATOMIC_RELEASE);
}

bool shim_enforcing(void) {
    int m = __atomic_load_n(&mode, __ATOMIC_ACQUIRE);
    if (m == MODE_UNKNOWN) {
        read_mode();
        m = __atomic_load_n(&mode, __ATOMIC_ACQUIRE);
    }
    return m == MODE_ENFORCE;
}

unsigned long long shim_share_mib(void) { return shim_enforcing() ? share_mib : 0; }

void shim_say(const char *fmt, ...) {
    char line[768];
    int n = snprintf(line, sizeof line, "tessera: ");
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2) len = sizeof line - 2;
    line[len++] = '\n';
    ssize_t w = write(2, line, len);
    (void)w;
}

const char *shim_share_error(void) {
    shim_enforcing();
    return env_error;
}
