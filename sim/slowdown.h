/* slowdown.h -- how fast a workload runs on a shared GPU, relative to a dedicated one
 * (rate 1 = as fast as alone on a whole GPU; the replay divides the remaining work by
 * the rate). The numbers come from data/sharing-costs.md, section 7:
 *
 *   exclusive GPU   1.
 *   time-slicing    the GPU gives equal time to busy processes: with total demand
 *                   D = u + others (utilisations), a tenant gets min(1, 1/D) of what it
 *                   needs, and context switching costs c = 0.38 (CHEP 2024, Table 1:
 *                   37.9-38.6 % for two compute-bound processes, no further loss at 4
 *                   and 8) scaled by how busy both sides are: c * min(1, u) * min(1, others).
 *                   Two compute-bound tenants: (1/2)(1 - 0.38) = 0.31 each; four: 0.155;
 *                   mostly idle tenants (notebooks at 5 %) barely slow each other.
 *                   Soft fractions on an unshared GPU share it the same way.
 *   MIG             the instance's SMs over the GPU's SMs with MIG off (A100: 42/108 =
 *                   0.389 for 3g, 98/108 = 0.907 for 7g, which is the MIG-enable loss);
 *                   a workload needing only u of the GPU runs at min(1, share / u). No
 *                   cross-instance interference (isolation breaks only on PCIe/power).
 *   MIG, time-sliced (layered sharing) the instance's SM share s, time-sliced among its
 *                   tenants as a whole GPU is: a tenant needing u of the GPU needs u/s of
 *                   the instance, so rate = time-slicing(u/s, others/s) with the same
 *                   loss c, others being the tenants of the same instance only; alone, it
 *                   is the MIG rate min(1, s/u). No measurement of time-slicing inside a MIG
 *                   instance was found (data/sharing-costs.md section 7 derives it): the
 *                   mechanism is the same CUDA time-slicing, on fewer SMs.
 *   MPS             an MPS client runs on at most its active-thread share p of the SMs,
 *                   concurrently with the other clients (no context switching, so no
 *                   time-slicing loss): compute-capped rate min(1, p / u). p is 1/replicas
 *                   for a device-plugin replica (the plugin's 100/replicas percent), and for
 *                   a tessera MPS share (tessera.io/compute-sharing: mps) its charged compute
 *                   rounded up to a whole percent, at least 1 (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE).
 *                   MPS gives no memory-bandwidth QoS (MIG User Guide, "CUDA Concurrency
 *                   Mechanisms"): a client at that rate uses m * min(1, p / u) of the GPU's
 *                   bandwidth, m its bandwidth share alone (the trace's memBandwidth, default
 *                   its gpuUtil); when the GPU's clients together ask more than 1 (load L),
 *                   each runs at its compute-capped rate / L (bandwidth shared in proportion
 *                   to demand). Assumptions, not measurements: no source gives MPS
 *                   interference numbers (data/sharing-costs.md sections 3 and 7). With the
 *                   default m = u the load is sum min(u, p) <= sum p <= 1 (tessera never
 *                   charges a GPU more than its SMs), so contention needs a memBandwidth.
 *                   Unlike time-slicing, MPS is not work-conserving: a client never uses the
 *                   SMs an idle neighbour leaves free.
 * A workload on several GPUs runs at its slowest GPU's rate.
 *
 * Multi-GPU communication (data/sharing-costs.md, "Multi-GPU communication"): a workload
 * whose grants sit on k >= 2 distinct GPUs of a node talks between them every step. Its
 * duration is taken on an NVLink-connected set; with a communication share c of a step at
 * NVLink speed, a step on a set whose slowest pair has bandwidth B takes
 *     factor = (1 - c) + c * B_nvlink / B
 * times as long (a ring collective moves at its slowest link's speed; overlap of
 * communication with compute is folded into c). The set's alignment class (model/topo.h:
 * its worst pair) picks B; a node without topology (alignment unknown) is not slowed, and
 * is counted as unknown. MIG grants are left out: GPU-to-GPU P2P (NVLink and PCIe) is not
 * available between MIG devices, so the class of their GPUs says nothing (NVIDIA MIG User
 * Guide, application considerations).
 */
#ifndef SIM_SLOWDOWN_H
#define SIM_SLOWDOWN_H

#include "model/node.h"
#include "model/topo.h"

#define SIM_TIMESLICE_LOSS 0.38

/* Rate of a tenant with utilisation u next to co-tenants whose utilisations sum to others. */
double sim_rate_timeslice(double u, double others);
/* Rate with a compute share (MIG SM share, MPS thread share) in (0, 1]. */
double sim_rate_share(double u, double share);
/* The SM share of MIG profile index prof on product p, against the GPU with MIG off. */
double sim_mig_sm_share(const model_gpu_product *p, int prof);

/* Rate of a tenant of a time-sliced MIG instance with SM share s (layered sharing). */
double sim_rate_mig_timeslice(double u, double others, double share);

/* The SM share an MPS client runs on (see MPS above): a device-plugin replica's 1/replicas as the
 * plugin rounds it, a tessera MPS share's charged compute rounded up to a percent; 0 for a grant that
 * is no MPS client. */
double sim_mps_share(const model_gpu *g, const model_grant *gr);
/* The share of the GPU's memory bandwidth an MPS client uses: m x min(1, share / u), m its share alone. */
double sim_mps_load(double u, double m, double share);
/* Rate of an MPS client with SM share `share`, on a GPU whose MPS clients' loads (sim_mps_load, its own
 * included) sum to load: min(1, share / u) / max(1, load). */
double sim_rate_mps(double u, double share, double load);

/* Rate of one grant: g is the GPU, u the workload's utilisation, others the summed
 * utilisation of the other tenants -- of the GPU, or for a replica of a time-sliced MIG
 * instance of that instance (ignored for exclusive, plain MIG and MPS grants; an MPS
 * client's bandwidth contention needs its GPU's load: sim_rate_mps). */
double sim_rate_grant(const model_gpu *g, const model_grant *gr, double u, double others);

/* The multi-GPU communication model's parameters, all in one place. Bandwidths in GB/s per
 * direction, effective (what a bandwidth-bound collective sees), indexed by model_align;
 * the sources and which numbers are assumptions are in data/sharing-costs.md. */
#define SIM_COMM_SHARE 0.05          /* communication share of a step at NVLink speed (assumption) */
#define SIM_COMM_BW_NVLINK 230.0     /* A100 NV12: 12 links x 25 GB/s line rate, ~230 effective */
#define SIM_COMM_BW_PCIE 25.0        /* PCIe 4.0 x16 through one switch: 31.5 line, ~25 measured */
#define SIM_COMM_BW_NUMA 20.0        /* through the CPU's root complex, one socket (assumption) */
#define SIM_COMM_BW_NONE 10.0        /* across sockets (UPI/xGMI) (assumption, from measured ~10) */

typedef struct sim_comm_model {
    double share;                    /* default communication share, 0..1 (workloads may carry their own) */
    double bw[MODEL_ALIGN_NVLINK + 1];   /* GB/s by model_align; [MODEL_ALIGN_UNKNOWN] unused */
} sim_comm_model;

void sim_comm_defaults(sim_comm_model *m);
/* How many times longer a step takes on a set of alignment a than on an NVLink set, with
 * communication share c: (1 - c) + c * bw[nvlink] / bw[a]; 1 for unknown alignment. */
double sim_comm_factor(const sim_comm_model *m, model_align a, double c);

#endif
