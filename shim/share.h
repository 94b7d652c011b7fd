/* share.h -- the share this process is held to, read once (TESSERA_GPU_MEMORY_MIB) from the delivered configuration
 * or the environment, and the one way the library speaks (stderr). The delivered configuration is the pod's delivery
 * ConfigMap, mounted read-only at <libdir>/../config (/opt/tessera/config: one file per key); when that directory
 * holds anything it is the only source and the environment is not read, since a process can drop a variable
 * (`env -u`) but not a mounted file. Without it (tests, the library used outside a pod) the environment is. Hidden: nothing here is exported. shim/shim.c says what the library does and
 * why; resolve.h finds the real entry points; ledger.h and track.h keep the accounting. Below resolve.c and shim.c,
 * which both read it.
 */
#ifndef SHIM_SHARE_H
#define SHIM_SHARE_H

#include <stdbool.h>
#include <stddef.h>

/* The value of key name in the source above (the file's content, one trailing newline dropped) into buf, or NULL
 * when the source does not have it. */
const char *shim_config(const char *name, char *buf, size_t len);

/* Whether the source is the delivered configuration (a directory), not the environment. */
bool shim_config_delivered(void);

/* The source, for messages: the configuration directory's path, or "the environment". */
const char *shim_config_source(void);

/* Whether TESSERA_GPU_MEMORY_MIB is set (read once): a share to enforce. Without it every hook is a plain call of
 * the real function and no lookup is mapped. */
bool shim_enforcing(void);

/* One line on stderr, prefixed "tessera: " (a single write, so lines of several processes do not interleave). */
void shim_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The share, in MiB (0 when not enforcing). */
unsigned long long shim_share_mib(void);

/* Why TESSERA_GPU_MEMORY_MIB is set but unusable (then the library refuses to start CUDA), or "". */
const char *shim_share_error(void);

#endif
