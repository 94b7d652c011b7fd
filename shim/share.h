/* share.h -- the share this process is held to, read once from its environment (TESSERA_GPU_MEMORY_MIB), and the
 * one way the library speaks (stderr). Hidden: nothing here is exported. shim/shim.c says what the library does and
 * why; resolve.h finds the real entry points; ledger.h and track.h keep the accounting. Below resolve.c and shim.c,
 * which both read it.
 */
#ifndef SHIM_SHARE_H
#define SHIM_SHARE_H

#include <stdbool.h>

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
