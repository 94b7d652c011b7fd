/* install.h -- tessera-reserve --install-shim DIR: what the init container tessera-cuda-shim of a soft share does.
 * It puts libtessera-cuda.so into the pod's emptyDir (mounted at /opt/tessera in every container), with the
 * ld.so.preload file the webhook mounts at /etc/ld.so.preload and the state directory the library keeps the pod's
 * accounting in (shim/shim.c). Every step is idempotent: a restarted init container installs again over a
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
 * line RESERVE_SHIM_PRELOAD) and create dir/state/ (mode 01777: containers of any uid write there, none removes
 * another's files). 0, or -1 with why filled ("cannot read /usr/local/lib/tessera/libtessera-cuda.so: No such file
 * or directory"). */
int reserve_install_shim(const char *dir, const char *source, char *why, size_t whylen);

#endif
