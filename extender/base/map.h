/* map.h -- a string-keyed hash table (separate chaining, power-of-two buckets) for the
 * extender's caches: nodes by name, pods by UID. Keys are not copied: each key must live
 * inside its value (e.g. pod->uid) and stay unchanged while the entry is in the map.
 */
#ifndef EXT_MAP_H
#define EXT_MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct ext_map ext_map;

ext_map *ext_map_new(void);
void ext_map_free(ext_map *m);          /* frees the table, not the values */

void *ext_map_get(const ext_map *m, const char *key);
/* Insert, or replace the value of an existing key (which allocates nothing, so never fails). */
int ext_map_put(ext_map *m, const char *key, void *val);   /* 0 ok, -1 out of memory */
void *ext_map_del(ext_map *m, const char *key);            /* removed value or NULL */
size_t ext_map_count(const ext_map *m);

/* Iteration: size_t it = 0; void *v; while ((v = ext_map_next(m, &it))) ...
 * Entries must not be added or removed during a walk. */
void *ext_map_next(const ext_map *m, size_t *it);

/* The 64-bit FNV-1a hash of s (NULL hashes as ""): the table's own hash before its final mix,
 * shared so the extender hashes a name or UID one way. */
uint64_t ext_map_str_hash(const char *s);

#endif
