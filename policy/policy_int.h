/* policy_int.h -- what the policy .c files share and nobody else sees: the workload's
 * hot arrays, the compact node view the scoring loops read instead of model_node, and
 * the fragmentation kernels over that view.
 */
#ifndef POLICY_POLICY_INT_H
#define POLICY_POLICY_INT_H

#include "policy/policy.h"

/* How a task type's room on one GPU is decided. FAST types need only the GPU's
 * effective free value E (see pv_node): room <=> E >= d_eff. */
enum { TT_CPU = 0, TT_FAST = 1, TT_GENERIC = 2 };

typedef struct tt_hot {
    int64_t cpu;        /* c_m */
    double p;           /* p_m */
    int16_t d_eff;      /* FAST: room threshold on E (1001 = needs an idle GPU) */
    int8_t k;           /* k_m */
    uint8_t cls;        /* TT_* */
    bool mig;           /* a MIG type: room from the GPU's profile bits */
    bool mig_whole;     /* MIG: a plain instance will do (not the .shared name) */
    bool mig_rep;       /* MIG: a replica of a shared instance will do (.shared name, or isolation
                         * timeslice/mps/any); the node's renameByDefault is left to model_fit */
    bool restricted;    /* has a model list: check access per node */
} tt_hot;

/* The hot copy of a type (cls, d_eff, ...); p must be set first. */
void tt_hot_of(const policy_task_type *t, tt_hot *h);

struct policy_workload {
    int n, cap;                 /* all shapes seen; after finish the kept ones are [0, nkept) */
    policy_task_type *types;
    int nkept;
    long total, kept;
    bool finished;
    bool has_mig;               /* some kept type asks for MIG */
    uint64_t id;                /* unique per finished workload: key of the profile-index memo */
    tt_hot *hot;                /* nkept entries */
};

/* One GPU as the scoring loops see it. */
typedef struct pv_gpu {
    model_gpu_mode mode;
    bool idle, excl, dyn;
    int free_mem, mem_cap;      /* whole mode */
    int free_rep, replicas;     /* time-slice / MPS */
    const model_gpu_product *product;
    uint8_t mps_clients;        /* whole mode: MPS soft shares (node.h), of uid mps_uid */
    bool ts_shares;             /* whole mode: time-sliced soft shares (no MPS share may join) */
    int32_t mps_uid;
    model_mig_layout layout;    /* MIG: every instance */
    uint8_t held;               /* MIG: bit i set = layout.inst[i] held by a pod (shared: every replica taken) */
    uint8_t shared;             /* MIG: bit i set = layout.inst[i] carries replicas (layered sharing) */
    uint8_t rep_n[MODEL_MIG_MAX_INSTANCES], rep_free[MODEL_MIG_MAX_INSTANCES];   /* shared instances */
    uint16_t rep_prof;          /* MIG: bit p = a shared instance of profile p has a free replica */
    uint16_t idle_prof;         /* MIG: bit p = an idle instance of product profile p */
    uint16_t addable;           /* MIG, dynamic: bit p = profile p has a legal free start */
    uint8_t starts[MODEL_MAX_PROFILES];  /* MIG: free start mask per profile (see mig_starts) */
    uint64_t key;               /* MIG: the packed state (frag.c), equal for GPUs in the same state; 0 unknown
                                 * (also for layered GPUs, which are not memoised) */
} pv_gpu;

/* R: free milli-GPU (policy_gpu_free). E: R folded with "can a FAST type use it":
 * 1001 idle whole-mode GPU, min(R, 999) busy whole-mode GPU, -1 not whole mode or serving MPS
 * shares (FAST types are whole GPUs and time-sliced shares, which never join MPS clients). */
typedef struct pv_node {
    const model_node *n;
    int ngpus;
    bool all_whole;
    bool track;                 /* node tracks host cpu/memory */
    int64_t cpu_free, mem_free; /* milli, MiB; INT64_MAX when not tracked */
    int16_t R[MODEL_MAX_GPUS], E[MODEL_MAX_GPUS];
    pv_gpu g[MODEL_MAX_GPUS];   /* filled only when detail is asked for */
} pv_node;

void pv_build(pv_node *v, const model_node *n, bool detail);
/* Apply one grant to a detailed copy of one GPU (hypothetical state); R and E follow.
 * room: also refresh the MIG room bits (only the fragmentation measure reads them). */
void pv_gpu_apply(pv_gpu *g, int16_t *R, int16_t *E, const model_grant *gr, bool room);
int16_t pv_eff(const pv_gpu *g, int R);
/* A detailed MIG GPU after one MIG grant (pv_gpu_apply's result, usually straight from
 * the memo): returns R after, room = idle_prof | addable after, starts after. */
int pv_mig_after(const pv_gpu *g, const model_grant *gr, uint16_t *room, uint8_t *starts);

/* model_mig_free_starts for every profile of p on layout l, memoised per thread (a
 * direct-mapped table keyed by product and layout; the product's contents must not
 * change while in use). Writes MODEL_MAX_PROFILES masks to out. */
void mig_starts(const model_gpu_product *p, const model_mig_layout *l, uint8_t *out);
/* Index of type t's MIG profile on product p, or -1 (memoised per thread). */
int mig_type_profile(const policy_workload *w, int t, const model_gpu_product *p);

/* Per-type state of a node for the frag kernels. */
typedef struct frag_state {
    int64_t free;                       /* sum of R */
    int64_t cpu;                        /* free cpu */
    int cnt[256];                       /* GPUs with room for type t */
    int64_t sl[256];                    /* sum of R over GPUs without room */
    uint16_t room[256];                 /* bit g: GPU g has room for type t */
    const model_gpu_product *mig_p;     /* the node's MIG product, and ... */
    int8_t mig_idx[256];                /* ... each type's profile index on it (-1 none) */
} frag_state;
#define POLICY_MAX_TYPES 256

/* access[t]: the node's product is allowed for type t. */
void frag_access(const policy_workload *w, const model_node *n, uint8_t *access);
/* Fill st from the view; returns F_n(M). per_type optional. */
double frag_eval(const policy_workload *w, const pv_node *v, const uint8_t *access, frag_state *st, double *per_type);
/* F_n(M) after changing GPUs chg_g[i] from (R,E) to (R2,E2) and taking cpu; only valid
 * when every type is TT_CPU or TT_FAST (otherwise re-evaluate a modified view). */
double frag_after_fast(const policy_workload *w, const uint8_t *access, const frag_state *st, int64_t cpu_take,
                       int nchg, const int8_t *chg_g, const int16_t *R0, const int16_t *E0, const int16_t *R1,
                       const int16_t *E1);
/* Same, for any workload: the changed GPUs' hypothetical detailed state is gafter[]. */
double frag_after_generic(const policy_workload *w, const uint8_t *access, const frag_state *st, int64_t cpu_take,
                          int nchg, const int8_t *chg_g, const int16_t *R0, const int16_t *R1, const int16_t *E1,
                          const pv_gpu *gafter);
bool frag_workload_fast(const policy_workload *w);

/* Tests only: true sends every policy_score call on this thread down the generic path
 * (model_fit's candidates), to check the fast path against it. */
extern _Thread_local bool policy_test_generic_only;

/* How a policy's raw scores become final ones (score.c knows the policies). */
enum { NORM_NONE = 0, NORM_MINMAX, NORM_ONE_WINNER };
int policy_norm_kind(const policy *p);

/* The random policy's raw score of a node: a uniform draw in [0, 100) from (seed,
 * decision, hash of the node name); incremental.c redraws it without re-scoring. */
double policy_random_draw(const policy_ctx *ctx, uint64_t name_hash);

/* Hash helpers (splitmix64): seeded, deterministic, no state. */
static inline uint64_t policy_hash64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
uint64_t policy_hash_str(uint64_t h, const char *s);

#endif
