/* install.h -- tessera-reserve --install-shim DIR: what the init container tessera-cuda-shim of a soft share does.
 * It puts libtessera-cuda.so into the pod's emptyDir (mounted read-only at /opt/tessera in every other container),
 * with the ld.so.preload file the webhook mounts at /etc/ld.so.preload, and the directories state/ and config/ over
 * which the webhook mounts the pod's ledger emptyDir and its delivery ConfigMap (shim/shim.c). Every step is idempotent: a restarted init container installs again over a
 * half-finished try.
 */
#ifndef RESERVE_INSTALL_H
#define RESERVE_INSTALL_H

#include <stddef.h>

/* Where the image carries the library (deploy/Containerfile). */
#define RESERVE_SHIM_SOURCE "/usr/local/lib/tessera/libtessera-cuda.so"
/* The library's path as the application containers see it: the line written to DIR/ld.so.preload. */
#define RESERVE_SHIM_PRELOAD "/opt/tessera/lib/libtessera-cuda.so"

/* Copy source to dir/lib/libtessera-cuda.so (mode 0555, replaced atomically), write dir/ld.so.preload (the single
 * line RESERVE_SHIM_PRELOAD; an empty directory in its place, which a kubelet subPath mount of the missing file
 * makes, is removed first), create dir/state/ (mode 01777: containers of any uid write there, none removes
 * another's files) and dir/config/ (0755, a mount point). 0, or -1 with why filled ("cannot read /usr/local/lib/tessera/libtessera-cuda.so: No such file
 * or directory"). */
int reserve_install_shim(const char *dir, const char *source, char *why, size_t whylen);

#endif
