/* track.c -- see track.h. Linear probing with backward-shift deletion, so no tombstones accumulate in a process that
 * allocates and frees for days. */
#include "shim/track.h"

#include <stdlib.h>

typedef struct slot {
    uint64_t key, bytes;
    int kind; /* 0: empty */
    int dev;
} slot;

static slot *tab;
static size_t cap, count; /* cap: a power of two, or 0 */

static size_t hash(int kind, uint64_t key) {
    uint64_t h = (key ^ ((uint64_t)kind << 56)) * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 17);
}

static bool grow(void) {
    size_t ncap = cap ? cap * 2 : 256;
    slot *n = calloc(ncap, sizeof *n);
    if (!n) return false;
    for (size_t i = 0; i < cap; i++) {
        if (!tab[i].kind) continue;
        size_t j = hash(tab[i].kind, tab[i].key) & (ncap - 1);
        while (n[j].kind) j = (j + 1) & (ncap - 1);
        n[j] = tab[i];
    }
    free(tab);
    tab = n;
    cap = ncap;
    return true;
}

bool track_put(int kind, uint64_t key, int dev, uint64_t bytes) {
    if ((count + 1) * 4 > cap * 3 && !grow()) return false;
    size_t i = hash(kind, key) & (cap - 1);
    while (tab[i].kind && !(tab[i].kind == kind && tab[i].key == key)) i = (i + 1) & (cap - 1);
    if (!tab[i].kind) count++;
    tab[i] = (slot){key, bytes, kind, dev};
    return true;
}

bool track_take(int kind, uint64_t key, int *dev, uint64_t *bytes) {
    if (!cap) return false;
    size_t i = hash(kind, key) & (cap - 1);
    while (tab[i].kind && !(tab[i].kind == kind && tab[i].key == key)) i = (i + 1) & (cap - 1);
    if (!tab[i].kind) return false;
    *dev = tab[i].dev;
    *bytes = tab[i].bytes;
    /* Backward-shift: move later members of the probe run into the hole when their home is at or before it. */
    size_t hole = i, j = i;
    for (;;) {
        j = (j + 1) & (cap - 1);
        if (!tab[j].kind) break;
        size_t home = hash(tab[j].kind, tab[j].key) & (cap - 1);
        if (((j - home) & (cap - 1)) >= ((j - hole) & (cap - 1))) {
            tab[hole] = tab[j];
            hole = j;
        }
    }
    tab[hole].kind = 0;
    count--;
    return true;
}

void track_clear(void) {
    free(tab);
    tab = NULL;
    cap = count = 0;
}
