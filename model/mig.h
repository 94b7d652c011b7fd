/* mig.h -- MIG placement: which start slots are legal, which layouts are valid.
 *
 * A MIG GPU has 8 memory slices (4 on A30). An instance of a profile occupies the
 * memory slices [start, start+size) for one of the profile's fixed start slots. A set
 * of instances is valid iff each sits on a legal start, no two overlap, each profile
 * stays within its max_instances, at most one "+me" instance exists, and the compute
 * slices add up to at most the GPU's total. Pure functions over a product and a layout.
 */
#ifndef MODEL_MIG_H
#define MODEL_MIG_H

#include "catalog.h"

#define MODEL_MIG_MAX_INSTANCES 8

typedef struct model_mig_placement {
    int8_t profile;   /* index into product->profiles */
    int8_t start;     /* first memory slice */
} model_mig_placement;

typedef struct model_mig_layout {
    int n;
    model_mig_placement inst[MODEL_MIG_MAX_INSTANCES];
} model_mig_layout;

/* Bit i set: memory slice i is taken by some instance of the layout. */
uint8_t model_mig_used_mask(const model_gpu_product *p, const model_mig_layout *l);

/* Whether adding one instance of `profile` at `start` to a valid layout keeps it
 * valid; on false, why says which rule it breaks. With why NULL it only answers (the
 * hot case: bit masks, no formatting). */
bool model_mig_can_add(const model_gpu_product *p, const model_mig_layout *l, int profile, int start,
                       char *why, size_t whylen);

/* Legal start slots for one more instance of `profile` on the layout, as a bit mask. */
uint8_t model_mig_free_starts(const model_gpu_product *p, const model_mig_layout *l, int profile);

/* The same for every profile at once, from one pass over the layout: out[i] for each
 * profile i, 0 past p->nprofiles; writes MODEL_MAX_PROFILES masks. */
void model_mig_free_starts_all(const model_gpu_product *p, const model_mig_layout *l, uint8_t *out);

/* Whether a whole layout is valid; on false, why names the first offending instance. */
bool model_mig_layout_valid(const model_gpu_product *p, const model_mig_layout *l, char *why, size_t whylen);

/* A mig-parted style device config: profile -> count, e.g. {"3g.20gb": 1, "2g.10gb": 2}. */
typedef struct model_mig_config {
    int n;
    struct { int8_t profile; int8_t count; } item[MODEL_MAX_PROFILES];
} model_mig_config;

/* Parse {"3g.20gb": 1, "2g.10gb": 2} for a product. -1 and a message naming the
 * offending key (unknown profile, count not a whole number >= 0) on failure. */
int model_mig_config_parse(const model_gpu_product *p, const char *json, model_mig_config *out,
                           char *err, size_t errlen);

/* Every layout (distinct placement set, instances sorted by start) that realises the
 * config exactly. Writes up to max layouts; returns how many exist (0: the config is
 * impossible on this product). Deterministic order: by start slots, lexicographic. */
int model_mig_layouts(const model_gpu_product *p, const model_mig_config *cfg, model_mig_layout *out, int max);

/* Format a layout as "3g.20gb@4 2g.10gb@0 2g.10gb@2" into buf. */
void model_mig_layout_format(const model_gpu_product *p, const model_mig_layout *l, char *buf, size_t len);

#endif
