/* gpu.c -- what is free on one GPU, and the node-wide invariant check.
 *
 * The usage fields of model_gpu are written only by fit.c; this file reads them. The
 * check recomputes every usage field from the live allocations, so a bookkeeping slip
 * anywhere shows up as a named mismatch instead of a silent over-commit.
 */
#include "model/node.h"

#include <stdio.h>
#include <string.h>

const char *model_gpu_mode_name(model_gpu_mode m) {
    switch (m) {
    case MODEL_GPU_WHOLE: return "whole";
    case MODEL_GPU_TIMESLICE: return "timeslice";
    case MODEL_GPU_MPS: return "mps";
    case MODEL_GPU_MIG: return "mig";
    }
    return "?";
}

/* Memory and compute slices not held by a pod, in thousandths of a slice: idle
 * pre-existing instances count as free because a pod can take them; on a dynamic GPU so
 * do unused slices; a shared instance (layered sharing) counts in proportion to its free
 * replicas, so a free replica of a 1g instance is less capacity than a free 1g instance.
 * policy/frag.c's mig_free_permille uses the same arithmetic. */
static void mig_free_milli(const model_gpu *g, long *mem_free, long *compute_free) {
    const model_gpu_product *p = g->product;
    long mem_held = 0, compute_held = 0, mem_idle = 0, compute_idle = 0;
    for (int i = 0; i < g->ninst; i++) {
        const model_mig_profile *pr = &p->profiles[g->inst[i].profile];
        long ms = 1000L * pr->memory_slices, cs = 1000L * pr->compute_slices;
        long mfree = 0, cfree = 0;
        if (g->inst[i].replicas > 1) {
            int r = g->inst[i].replicas, fr = r - __builtin_popcount(g->inst[i].rep_used);
            mfree = ms * fr / r;
            cfree = cs * fr / r;
        } else if (g->inst[i].holder < 0) {
            mfree = ms;
            cfree = cs;
        }
        mem_idle += mfree;
        compute_idle += cfree;
        mem_held += ms - mfree;
        compute_held += cs - cfree;
    }
    if (g->mig_dynamic) {
        *mem_free = 1000L * p->mig_memory_slices - mem_held;
        *compute_free = 1000L * p->mig_compute_slices - compute_held;
    } else {
        *mem_free = mem_idle;
        *compute_free = compute_idle;
    }
}

int model_gpu_free_memory(const model_gpu *g) {
    if (g->mode == MODEL_GPU_MIG) {
        long mem, compute;
        if (g->product->mig_memory_slices <= 0) return 0;
        mig_free_milli(g, &mem, &compute);
        return (int)((long long)g->memory_mib * mem / (1000LL * g->product->mig_memory_slices));
    }
    if (g->exclusive_holder >= 0) return 0;
    return g->memory_mib - g->memory_used_mib;
}

int model_gpu_free_compute(const model_gpu *g) {
    if (g->mode == MODEL_GPU_MIG) {
        long mem, compute;
        if (g->product->mig_compute_slices <= 0) return 0;
        mig_free_milli(g, &mem, &compute);
        return (int)(compute / g->product->mig_compute_slices);
    }
    if (g->exclusive_holder >= 0) return 0;
    return 1000 - g->compute_used_permille;
}

int model_gpu_free_replicas(const model_gpu *g) {
    switch (g->mode) {
    case MODEL_GPU_TIMESLICE:
    case MODEL_GPU_MPS:
        return g->replicas - g->replicas_used;
    case MODEL_GPU_MIG: {
        /* idle plain instances, and each free replica of a shared one */
        int idle = 0;
        for (int i = 0; i < g->ninst; i++)
            idle += g->inst[i].replicas > 1 ? g->inst[i].replicas - __builtin_popcount(g->inst[i].rep_used)
                                            : g->inst[i].holder < 0;
        return idle;
    }
    case MODEL_GPU_WHOLE:
        return g->nholders == 0 ? 1 : 0;
    }
    return 0;
}

bool model_gpu_idle(const model_gpu *g) { return g->nholders == 0; }

#define FAIL(...) do { if (why) snprintf(why, whylen, __VA_ARGS__); return false; } while (0)

/* Usage recomputed from the allocations alone. */
typedef struct {
    int memory, compute, replicas, holders, exclusive_holder;
    int mps, mps_uid_conflict;   /* MPS soft shares; set when two of them name different uids */
    int64_t mps_uid;
    uint64_t replica_bits[2];
} gpu_usage;

static int find_instance(const model_gpu *g, int start) {
    for (int i = 0; i < g->ninst; i++)
        if (g->inst[i].start == start) return i;
    return -1;
}

bool model_node_check(const model_node *n, char *why, size_t whylen) {
    gpu_usage use[MODEL_MAX_GPUS];
    uint32_t inst_rep[MODEL_MAX_GPUS][MODEL_MIG_MAX_INSTANCES];   /* replicas of shared instances, from grants */
    int inst_mem[MODEL_MAX_GPUS][MODEL_MIG_MAX_INSTANCES], inst_comp[MODEL_MAX_GPUS][MODEL_MIG_MAX_INSTANCES];
    memset(use, 0, sizeof use);
    memset(inst_rep, 0, sizeof inst_rep);
    memset(inst_mem, 0, sizeof inst_mem);
    memset(inst_comp, 0, sizeof inst_comp);
    for (int i = 0; i < n->ngpus; i++) use[i].exclusive_holder = -1;
    int64_t cpu = 0, mem = 0;
    int live = 0;

    if (n->ngpus < 0 || n->ngpus > MODEL_MAX_GPUS) FAIL("ngpus %d out of range", n->ngpus);
    for (int ai = 0; ai < n->nallocs; ai++) {
        const model_alloc *al = &n->allocs[ai];
        if (!al->uid[0]) continue;
        live++;
        cpu += al->a.cpu_milli;
        mem += al->a.memory_mib;
        for (int k = 0; k < al->a.ngrants; k++) {
            const model_grant *gr = &al->a.grant[k];
            if (gr->gpu < 0 || gr->gpu >= n->ngpus) FAIL("pod %s: grant on GPU %d of %d", al->uid, gr->gpu, n->ngpus);
            const model_gpu *g = &n->gpus[gr->gpu];
            gpu_usage *u = &use[gr->gpu];
            u->holders++;
            if (gr->mps) {
                if (gr->mig_profile >= 0 || gr->exclusive || gr->replica >= 0)
                    FAIL("pod %s: MPS grant on GPU %d is not a soft share", al->uid, g->index);
                if (u->mps && u->mps_uid != al->a.mps_uid) u->mps_uid_conflict = 1;
                u->mps_uid = al->a.mps_uid;
                u->mps++;
            }
            if (gr->mig_profile >= 0 && gr->replica >= 0) {
                int ii = find_instance(g, gr->mig_start);
                if (ii < 0 || g->inst[ii].profile != gr->mig_profile || g->inst[ii].replicas < 2 ||
                    gr->replica >= g->inst[ii].replicas)
                    FAIL("pod %s: MIG replica grant at GPU %d start %d has no matching shared instance", al->uid,
                         gr->gpu, gr->mig_start);
                if (inst_rep[gr->gpu][ii] & (1u << gr->replica))
                    FAIL("GPU %d instance at %d replica %d given twice", g->index, gr->mig_start, gr->replica);
                inst_rep[gr->gpu][ii] |= 1u << gr->replica;
                if (gr->memory_mib < 0 || gr->compute_permille < 0)
                    FAIL("pod %s: MIG replica grant on GPU %d charges negative amounts", al->uid, gr->gpu);
                inst_mem[gr->gpu][ii] += gr->memory_mib;
                inst_comp[gr->gpu][ii] += gr->compute_permille;
                continue;
            }
            if (gr->mig_profile >= 0) {
                int ii = find_instance(g, gr->mig_start);
                if (ii < 0 || g->inst[ii].profile != gr->mig_profile || g->inst[ii].holder != ai)
                    FAIL("pod %s: MIG grant at GPU %d start %d has no matching held instance", al->uid, gr->gpu,
                         gr->mig_start);
                continue;
            }
            if (gr->exclusive) {
                if (u->exclusive_holder >= 0) FAIL("GPU %d held whole by two pods", g->index);
                u->exclusive_holder = ai;
            }
            if (gr->replica >= 0) {
                uint64_t bit = 1ull << (gr->replica % 64);
                if (u->replica_bits[gr->replica / 64] & bit)
                    FAIL("GPU %d replica %d given twice", g->index, gr->replica);
                u->replica_bits[gr->replica / 64] |= bit;
                u->replicas++;
            }
            u->memory += gr->memory_mib;
            u->compute += gr->compute_permille;
        }
    }
    if (live != n->nlive) FAIL("nlive %d but %d live allocations", n->nlive, live);
    if (cpu != n->cpu_used_milli) FAIL("cpu_used %lld but allocations sum to %lld", (long long)n->cpu_used_milli, (long long)cpu);
    if (mem != n->memory_used_mib) FAIL("memory_used %lld but allocations sum to %lld", (long long)n->memory_used_mib, (long long)mem);
    if (n->track_host && (cpu > n->cpu_milli || mem > n->memory_mib)) FAIL("host resources over-committed");

    for (int i = 0; i < n->ngpus; i++) {
        const model_gpu *g = &n->gpus[i];
        const gpu_usage *u = &use[i];
        if (g->memory_used_mib != u->memory) FAIL("GPU %d memory_used %d, grants sum to %d", g->index, g->memory_used_mib, u->memory);
        if (g->compute_used_permille != u->compute) FAIL("GPU %d compute_used %d, grants sum to %d", g->index, g->compute_used_permille, u->compute);
        if (g->replicas_used != u->replicas) FAIL("GPU %d replicas_used %d, grants hold %d", g->index, g->replicas_used, u->replicas);
        if (g->replica_used[0] != u->replica_bits[0] || g->replica_used[1] != u->replica_bits[1]) FAIL("GPU %d replica bits differ", g->index);
        if (g->nholders != u->holders) FAIL("GPU %d nholders %d, grants %d", g->index, g->nholders, u->holders);
        if (g->exclusive_holder != u->exclusive_holder) FAIL("GPU %d exclusive holder %d, grants say %d", g->index, g->exclusive_holder, u->exclusive_holder);
        if (g->memory_used_mib < 0 || g->memory_used_mib > g->memory_mib) FAIL("GPU %d memory over-committed: %d of %d MiB", g->index, g->memory_used_mib, g->memory_mib);
        if (g->compute_used_permille < 0 || g->compute_used_permille > 1000) FAIL("GPU %d compute over-committed: %d permille", g->index, g->compute_used_permille);
        if (g->replicas_used > g->replicas) FAIL("GPU %d replicas over-committed: %d of %d", g->index, g->replicas_used, g->replicas);
        if (g->exclusive_holder >= 0 && g->nholders != 1) FAIL("GPU %d held whole but shared by %d grants", g->index, g->nholders);
        if (g->mode != MODEL_GPU_MIG && g->ninst) FAIL("GPU %d has MIG instances but is in %s mode", g->index, model_gpu_mode_name(g->mode));
        /* MPS soft shares: counted right, on an unshared GPU that takes MPS clients, never next to time-sliced
         * shares, one uid, within the server's client cap */
        if (g->mps_clients != u->mps) FAIL("GPU %d mps_clients %d, MPS grants %d", g->index, g->mps_clients, u->mps);
        if (u->mps) {
            if (g->mode != MODEL_GPU_WHOLE) FAIL("GPU %d is %s but carries MPS shares", g->index, model_gpu_mode_name(g->mode));
            if (!model_gpu_mps_capable(g)) FAIL("GPU %d carries MPS shares but has compute capability %d.%d", g->index,
                                                g->product->cc_major, g->product->cc_minor);
            if (u->holders != u->mps) FAIL("GPU %d mixes %d MPS shares with %d other grants", g->index, u->mps, u->holders - u->mps);
            if (u->mps_uid_conflict) FAIL("GPU %d carries MPS shares of different uids", g->index);
            if (g->mps_uid != u->mps_uid) FAIL("GPU %d mps_uid %d, its MPS shares run as %lld", g->index, (int)g->mps_uid,
                                               (long long)u->mps_uid);
            if (u->mps > g->product->mps_max_clients)
                FAIL("GPU %d has %d MPS clients, more than %d", g->index, u->mps, g->product->mps_max_clients);
        }
        if (g->mode == MODEL_GPU_MIG) {
            model_mig_layout l = {.n = g->ninst};
            for (int k = 0; k < g->ninst; k++) {
                l.inst[k].profile = g->inst[k].profile;
                l.inst[k].start = g->inst[k].start;
                int h = g->inst[k].holder;
                if (g->inst[k].replicas < 1 || g->inst[k].replicas > MODEL_MIG_MAX_REPLICAS)
                    FAIL("GPU %d instance at %d has %d replicas", g->index, g->inst[k].start, g->inst[k].replicas);
                if (g->inst[k].replicas > 1 && (h >= 0 || g->inst[k].on_demand))
                    FAIL("GPU %d shared instance at %d is held whole or on demand", g->index, g->inst[k].start);
                if (g->inst[k].rep_used != inst_rep[i][k])
                    FAIL("GPU %d instance at %d replica bits differ from the grants", g->index, g->inst[k].start);
                if (g->inst[k].mem_used != inst_mem[i][k] || g->inst[k].comp_used != inst_comp[i][k])
                    FAIL("GPU %d instance at %d usage %d MiB / %d permille, its replicas' grants %d / %d", g->index,
                         g->inst[k].start, g->inst[k].mem_used, g->inst[k].comp_used, inst_mem[i][k], inst_comp[i][k]);
                if (g->inst[k].replicas > 1) {
                    const model_mig_profile *pr = &g->product->profiles[g->inst[k].profile];
                    int cap_mem = pr->memory_mib > 0 ? pr->memory_mib
                                  : (int)((long long)g->memory_mib * pr->memory_slices /
                                          (g->product->mig_memory_slices > 0 ? g->product->mig_memory_slices : 8));
                    int cap_comp = 1000 * pr->compute_slices /
                                   (g->product->mig_compute_slices > 0 ? g->product->mig_compute_slices : 7);
                    if (inst_mem[i][k] > cap_mem || inst_comp[i][k] > cap_comp)
                        FAIL("GPU %d instance at %d over-committed: %d of %d MiB, %d of %d permille", g->index,
                             g->inst[k].start, inst_mem[i][k], cap_mem, inst_comp[i][k], cap_comp);
                }
                if (h >= n->nallocs || (h >= 0 && !n->allocs[h].uid[0])) FAIL("GPU %d instance at %d held by a dead allocation", g->index, g->inst[k].start);
                if (h < 0 && g->inst[k].on_demand) FAIL("GPU %d on-demand instance at %d left idle", g->index, g->inst[k].start);
                if (h >= 0) {
                    bool named = false;
                    const model_assignment *a = &n->allocs[h].a;
                    for (int q = 0; q < a->ngrants; q++)
                        named |= a->grant[q].gpu == i && a->grant[q].mig_start == g->inst[k].start;
                    if (!named) FAIL("GPU %d instance at %d holder does not name it", g->index, g->inst[k].start);
                }
            }
            char lwhy[160];
            if (!model_mig_layout_valid(g->product, &l, lwhy, sizeof lwhy)) FAIL("GPU %d MIG layout invalid: %s", g->index, lwhy);
        }
    }
    return true;
}
