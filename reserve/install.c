/* install.c -- see install.h. Files are written beside their final name and renamed over it, so an application
 * container never sees half a library (a container restarted while the pod runs reads the same directory). */
#include "reserve/install.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int failed(char *why, size_t len, const char *what, const char *path) {
    snprintf(why, len, "%s %s: %s", what, path, strerror(errno));
    return -1;
}

static int make_dir(const char *path, mode_t mode, char *why, size_t len) {
    if (mkdir(path, mode) < 0 && errno != EEXIST) return failed(why, len, "cannot create", path);
    /* chmod as well: mkdir's mode passes through the umask, and the directory may exist from an earlier try */
    if (chmod(path, mode) < 0) return failed(why, len, "cannot set the mode of", path);
    return 0;
}

/* Write len bytes from fd_in (or text) to path via path.tmp, mode, then rename. */
static int write_file(const char *path, int fd_in, const char *text, mode_t mode, char *why, size_t len) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    unlink(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return failed(why, len, "cannot create", tmp);
    int rc = 0;
    if (text) {
        size_t n = strlen(text);
        if (write(fd, text, n) != (ssize_t)n) rc = failed(why, len, "cannot write", tmp);
    } else {
        char buf[65536];
        ssize_t n;
        while (rc == 0 && (n = read(fd_in, buf, sizeof buf)) != 0) {
            if (n < 0) {
                if (errno == EINTR) continue;
                rc = failed(why, len, "cannot read the library while copying to", tmp);
            } else if (write(fd, buf, (size_t)n) != n) {
                rc = failed(why, len, "cannot write", tmp);
            }
        }
    }
    if (rc == 0 && fchmod(fd, mode) < 0) rc = failed(why, len, "cannot set the mode of", tmp);
    if (rc == 0 && fsync(fd) < 0) rc = failed(why, len, "cannot sync", tmp);
    if (close(fd) < 0 && rc == 0) rc = failed(why, len, "cannot write", tmp);
    /* A directory where the file goes: the kubelet makes one when it mounts a subPath that does not exist yet
     * (ld.so.preload, mounted by a container that started before this one wrote it). An empty one is removed
     * (rename cannot replace a directory with a file); one with something in it is not ours to remove. */
    struct stat st;
    if (rc == 0 && lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && rmdir(path) < 0)
        rc = failed(why, len, "cannot remove the directory in the way of", path);
    if (rc == 0 && rename(tmp, path) < 0) rc = failed(why, len, "cannot rename into place", path);
    if (rc < 0) unlink(tmp);
    return rc;
}

int reserve_install_shim(const char *dir, const char *source, char *why, size_t whylen) {
    char lib[4096], file[4096];
    if (!dir || !*dir) {
        snprintf(why, whylen, "--install-shim needs a directory");
        return -1;
    }
    int src = open(source, O_RDONLY | O_CLOEXEC);
    if (src < 0) return failed(why, whylen, "cannot read", source);
    /* DIR is the emptyDir's mount point in a pod; made here when missing (not its parents), for a plain directory */
    int rc = 0;
    if (mkdir(dir, 0755) < 0 && errno != EEXIST) rc = failed(why, whylen, "cannot create", dir);
    snprintf(lib, sizeof lib, "%s/lib", dir);
    if (rc == 0) rc = make_dir(lib, 0755, why, whylen);
    snprintf(file, sizeof file, "%s/lib/libtessera-cuda.so", dir);
    if (rc == 0) rc = write_file(file, src, NULL, 0555, why, whylen);
    close(src);
    snprintf(file, sizeof file, "%s/ld.so.preload", dir);
    if (rc == 0) rc = write_file(file, -1, RESERVE_SHIM_PRELOAD "\n", 0444, why, whylen);
    /* state/ and config/ are mount points in the application containers (the ledger's emptyDir, the delivery
     * ConfigMap), inside this directory they mount read-only, where the runtime could not create them. state/
     * is also the ledger itself where nothing is mounted over it (tests, a pod of an older webhook). */
    snprintf(file, sizeof file, "%s/state", dir);
    if (rc == 0) rc = make_dir(file, 01777, why, whylen);
    snprintf(file, sizeof file, "%s/config", dir);
    if (rc == 0) rc = make_dir(file, 0755, why, whylen);
    return rc;
}
