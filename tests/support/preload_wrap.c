/* preload_wrap.c -- $(BUILD)/fake-cuda/libwrap-uname.so, a test library that wraps uname() the way tracing and
 * sandboxing interposers wrap libc: it finds the real uname with dlsym(RTLD_NEXT, "uname") and prefixes the system
 * name with "wrapped-". glibc answers RTLD_NEXT relative to the object that called dlsym, so preloaded after
 * libtessera-cuda.so (which interposes dlsym) it still works only if the shim passes such lookups on with the
 * caller intact; a shim that called dlsym itself would hand this library its own uname back, which would recurse
 * until the stack overflows. tests/unit/test_shim.c runs /bin/uname -s under both.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>

int uname(struct utsname *buf);

int uname(struct utsname *buf) {
    int (*real)(struct utsname *) = (int (*)(struct utsname *))dlsym(RTLD_NEXT, "uname");
    if (!real) return -1;
    int rc = real(buf);
    if (rc == 0) {
        char name[sizeof buf->sysname];
        snprintf(name, sizeof name, "wrapped-%.56s", buf->sysname);
        memcpy(buf->sysname, name, sizeof name);
    }
    return rc;
}
