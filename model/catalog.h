/* catalog.h -- GPU products and their MIG profiles, loaded from a JSON data file.
 *
 * The data is data/gpus.json (from the project's reference catalog, sources inside).
 * A product is one string GPU feature discovery writes in nvidia.com/gpu.product, e.g.
 * "NVIDIA-A100-SXM4-80GB"; model variants that share a die (SXM4 and PCIe) are separate
 * products with the same facts. MIG profiles are keyed by (product, profile name):
 * "1g.10gb" is one memory slice on A100-80GB and two on A100-40GB.
 */
#ifndef MODEL_CATALOG_H
#define MODEL_CATALOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MODEL_MAX_PROFILES 16      /* MIG profiles per product */
#define MODEL_MIG_MAX_SLICES 8     /* memory slices per GPU (8, or 4 on A30) */
#define MODEL_NAME_LEN 64

typedef struct model_mig_profile {
    char name[32];          /* canonical, with '+': "1g.10gb", "1g.10gb+me" */
    int compute_slices;     /* the 'g' in the name */
    int memory_slices;      /* placement size: slots [start, start+size) */
    int memory_mib;         /* MIG device memory (first observation; 0 if unknown) */
    int sm_count;           /* SMs of the instance (0 if unknown) */
    int max_instances;      /* per GPU */
    uint8_t start_mask;     /* bit s set: the profile may start at memory slice s */
    bool media;             /* "+me": owns the media engines, at most one per GPU */
} model_mig_profile;

typedef struct model_gpu_product {
    char product[MODEL_NAME_LEN];   /* GFD product string, without -SHARED / -MIG-... */
    char model_id[MODEL_NAME_LEN];  /* catalog id shared by variants, e.g. "A100-80GB" */
    char family[24];                /* "ampere", "hopper", ... */
    int cc_major, cc_minor;         /* compute capability */
    int memory_mib;                 /* total framebuffer (label value wins at run time) */
    int sm_count;                   /* SMs with MIG off (0 if unknown) */
    bool mig_capable;
    bool mps_capable;
    int mps_max_clients;            /* 48 for compute capability >= 7.5, else 16 */
    int mig_compute_slices;         /* 7 (4 on A30); 0 if not MIG capable */
    int mig_memory_slices;          /* 8 (4 on A30) */
    int mig_sm_total;               /* SMs in MIG mode (98 on A100); 0 if unknown */
    int nprofiles;
    model_mig_profile profiles[MODEL_MAX_PROFILES];
} model_gpu_product;

typedef struct model_catalog model_catalog;

/* The catalog compiled into the binary (data/gpus.json). Owned by the library; never
 * free it. Thread-safe after the first call returns. */
const model_catalog *model_catalog_default(void);

/* Load a catalog from JSON text or a file in the gpus.json schema. NULL and a message
 * in err on failure. Free with model_catalog_free. */
model_catalog *model_catalog_from_json(const char *json, size_t len, char *err, size_t errlen);
model_catalog *model_catalog_from_file(const char *path, char *err, size_t errlen);
void model_catalog_free(model_catalog *cat);

int model_catalog_count(const model_catalog *cat);
const model_gpu_product *model_catalog_at(const model_catalog *cat, int i);

/* What a nvidia.com/gpu.product label value says, once its suffixes are taken apart:
 * "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb-SHARED" -> product A100-SXM4-40GB, mig "1g.5gb",
 * shared. Pre-R470 names without the "NVIDIA-" prefix match too. */
typedef struct model_product_label {
    const model_gpu_product *product;  /* NULL if the model is not in the catalog */
    char base[MODEL_NAME_LEN];         /* the label with its suffixes removed */
    char mig_profile[32];              /* "" unless "-MIG-<profile>" */
    bool mig_invalid;                  /* "-MIG-INVALID" */
    bool shared;                       /* "-SHARED" */
} model_product_label;

void model_catalog_parse_label(const model_catalog *cat, const char *label, model_product_label *out);

/* Exact product lookup by GFD product string (no suffixes); NULL if unknown. */
const model_gpu_product *model_catalog_find(const model_catalog *cat, const char *product);

/* Profile by name on one product. Accepts the label/resource spelling with '.' for '+'
 * ("1g.10gb.me") and a compute-instance prefix is not accepted. Returns the index into
 * product->profiles or -1. */
int model_product_profile_index(const model_gpu_product *p, const char *name);

/* A product the catalog does not know (a model named in a trace, or a card newer than
 * the data): whole-GPU, replica and fractional sharing only, no MIG. */
void model_product_init_generic(model_gpu_product *p, const char *product, int memory_mib, int sm_count);

#endif
