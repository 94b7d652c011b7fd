/* map.c -- chained hash table keyed by strings owned by the values (see map.h). Grows at
 * load factor 1 so lookups stay O(1) with 5,000 nodes and 40,000 pods.
 */
#include "extender/base/map.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct ent { const char *key; void *val; uint64_t h; struct ent *next; } ent;

struct ext_map {
    ent **b;
    size_t nb, n;
    /* iteration state: bucket index and position inside the chain are packed in the cursor */
};

uint64_t ext_map_str_hash(const char *s) {
    uint64_t h = 1469598103934665603ull;   /* FNV-1a */
    for (; s && *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static uint64_t hash(const char *s) {
    uint64_t h = ext_map_str_hash(s);
    return h ^ (h >> 29);   /* FNV-1a's low bits, which pick the bucket, mix poorly alone */
}

ext_map *ext_map_new(void) {
    ext_map *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->nb = 64;
    m->b = calloc(m->nb, sizeof *m->b);
    if (!m->b) { free(m); return NULL; }
    return m;
}

void ext_map_free(ext_map *m) {
    if (!m) return;
    for (size_t i = 0; i < m->nb; i++)
        for (ent *e = m->b[i], *nx; e; e = nx) { nx = e->next; free(e); }
    free(m->b);
    free(m);
}

static ent *find(const ext_map *m, const char *key, uint64_t h) {
    for (ent *e = m->b[h & (m->nb - 1)]; e; e = e->next)
        if (e->h == h && strcmp(e->key, key) == 0) return e;
    return NULL;
}

void *ext_map_get(const ext_map *m, const char *key) {
    if (!m || !key) return NULL;
    ent *e = find(m, key, hash(key));
    return e ? e->val : NULL;
}

static void grow(ext_map *m) {
    size_t nb = m->nb * 2;
    ent **b = calloc(nb, sizeof *b);
    if (!b) return;   /* keep working with longer chains rather than fail the insert */
    for (size_t i = 0; i < m->nb; i++)
        for (ent *e = m->b[i], *nx; e; e = nx) {
            nx = e->next;
            e->next = b[e->h & (nb - 1)];
            b[e->h & (nb - 1)] = e;
        }
    free(m->b);
    m->b = b;
    m->nb = nb;
}

int ext_map_put(ext_map *m, const char *key, void *val) {
    uint64_t h = hash(key);
    ent *e = find(m, key, h);
    if (e) { e->key = key; e->val = val; return 0; }
    e = malloc(sizeof *e);
    if (!e) return -1;
    *e = (ent){key, val, h, m->b[h & (m->nb - 1)]};
    m->b[h & (m->nb - 1)] = e;
    if (++m->n > m->nb) grow(m);
    return 0;
}

void *ext_map_del(ext_map *m, const char *key) {
    if (!m || !key) return NULL;
    uint64_t h = hash(key);
    for (ent **pp = &m->b[h & (m->nb - 1)]; *pp; pp = &(*pp)->next) {
        ent *e = *pp;
        if (e->h == h && strcmp(e->key, key) == 0) {
            void *v = e->val;
            *pp = e->next;
            free(e);
            m->n--;
            return v;
        }
    }
    return NULL;
}

size_t ext_map_count(const ext_map *m) { return m ? m->n : 0; }

/* The cursor is bucket * 2^20 + depth, so a walk is restartable without heap state;
 * chains never get near 2^20 entries at load factor 1. */
void *ext_map_next(const ext_map *m, size_t *it) {
    size_t bi = *it >> 20, depth = *it & 0xFFFFF;
    for (; bi < m->nb; bi++, depth = 0) {
        ent *e = m->b[bi];
        for (size_t d = 0; e && d < depth; d++) e = e->next;
        if (e) {
            *it = (bi << 20) | (depth + 1);
            return e->val;
        }
    }
    *it = bi << 20;
    return NULL;
}
