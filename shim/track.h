/* track.h -- what each live allocation of this process took, so a free gives back what its allocation reserved:
 * the driver's free calls name only the pointer or handle. An open-addressing hash table keyed by (kind, value),
 * grown by doubling; the caller serialises access. A fork child empties it (track_clear): the parent's allocations
 * are not the child's.
 */
#ifndef SHIM_TRACK_H
#define SHIM_TRACK_H

#include <stdbool.h>
#include <stdint.h>

/* Kinds of key: a device pointer, a VMM allocation handle, an array, a mipmapped array (values of different kinds
 * may be equal). */
enum { TRACK_PTR = 1, TRACK_VMM, TRACK_ARRAY, TRACK_MIPMAP };

/* Remember that key holds bytes on ledger device dev; false if memory for the table ran out. */
bool track_put(int kind, uint64_t key, int dev, uint64_t bytes);

/* Forget key; true and *dev, *bytes filled if it was remembered. */
bool track_take(int kind, uint64_t key, int *dev, uint64_t *bytes);

/* Forget everything (a fork child). */
void track_clear(void);

#endif
