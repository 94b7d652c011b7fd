/* share.c -- see share.h. */
#include "shim/glibc.h"

#include "shim/share.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { MODE_UNKNOWN, MODE_PASS, MODE_ENFORCE };
static int mode;                        /* atomic */
static unsigned long long share_mib;    /* valid when env_error is empty */
static char env_error[PATH_MAX + 200]; /* why TESSERA_GPU_MEMORY_MIB cannot be used, or "" */
static char config[PATH_MAX];           /* the delivered configuration's directory, or "": the environment */

/* <directory of this library>/../config into out; false when dladdr does not know the library's path. */
static bool config_path(char *out, size_t len) {
    Dl_info info;
    if (!dladdr((void *)shim_enforcing, &info) || !info.dli_fname) return false;
    const char *slash = strrchr(info.dli_fname, '/');
    if (!slash) snprintf(out, len, "../config");
    else snprintf(out, len, "%.*s/../config", (int)(slash - info.dli_fname), info.dli_fname);
    return true;
}

/* A directory with something in it: the ConfigMap mounted there. The bare mount point tessera-reserve
 * --install-shim makes (nothing mounted over it: tests, a library used outside a pod) is empty. */
static bool delivered(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return false;
    bool any = false;
    struct dirent *e;
    while (!any && (e = readdir(d)))
        any = strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return any;
}

const char *shim_config(const char *name, char *buf, size_t len) {
    if (!config[0]) {
        const char *v = getenv(name);
        if (!v) return NULL;
        snprintf(buf, len, "%s", v);
        return buf;
    }
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", config, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    size_t n = 0;
    while (n + 1 < len) {
        ssize_t r = read(fd, buf + n, len - 1 - n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = 0;
    if (n > 0 && buf[n - 1] == '\n') buf[n - 1] = 0;   /* a value written by hand with a newline */
    return buf;
}

bool shim_config_delivered(void) {
    shim_enforcing();
    return config[0] != 0;
}

const char *shim_config_source(void) {
    shim_enforcing();
    return config[0] ? config : "the environment";
}

static void read_mode(void) {
    char dir[PATH_MAX];
    config[0] = 0;
    if (config_path(dir, sizeof dir) && delivered(dir)) snprintf(config, sizeof config, "%s", dir);
    char buf[64];
    const char *v = shim_config("TESSERA_GPU_MEMORY_MIB", buf, sizeof buf);
    if (!v) {
        __atomic_store_n(&mode, MODE_PASS, __ATOMIC_RELEASE);
        return;
    }
    unsigned long long n = 0;
    const char *p = v;
    /* digits only, no sign, no unit: what the ConfigMap writes; at most 2^30 MiB (1 PiB) */
    while (*p >= '0' && *p <= '9' && n <= (1ull << 30)) n = n * 10 + (unsigned long long)(*p++ - '0');
    if (p == v || *p || n == 0 || n > (1ull << 30))
        snprintf(env_error, sizeof env_error, "TESSERA_GPU_MEMORY_MIB=\"%.40s\" (from %s) is not a whole number of "
                 "MiB between 1 and 1073741824", v, config[0] ? config : "the environment");
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
