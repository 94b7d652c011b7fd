/* shim.h -- what the parts of libtessera-cuda.so share (hidden: nothing here is exported). shim/shim.c says what
 * the library does and why; resolve.h finds the real entry points; track.h remembers what each allocation took.
 */
#ifndef SHIM_SHIM_H
#define SHIM_SHIM_H

#include <stdbool.h>

/* Whether TESSERA_GPU_MEMORY_MIB is set (read once): a share to enforce. Without it every hook is a plain call of
 * the real function and no lookup is mapped. */
bool shim_enforcing(void);

/* One line on stderr, prefixed "tessera: " (a single write, so lines of several processes do not interleave). */
void shim_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The share, in MiB (0 when not enforcing). */
unsigned long long shim_share_mib(void);

#endif
