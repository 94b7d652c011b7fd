/* gen.h -- `tessera-sim gen`: a seeded synthetic trace of training, inference, notebook
 * and batch workloads. The same seed and options always give the same trace.
 *
 * Distributions (per kind; N workloads over H hours, kind shares `mix`):
 *   arrivals     a Poisson process per kind with rate N * mix[k] / H: given the count,
 *                its arrival times are independent and uniform over [0, H), which is how
 *                they are drawn (then sorted).
 *   duration     log-normal, median m and sigma s, clamped to [lo, hi] (on a dedicated GPU)
 *                  training   m 2 h,    s 1.0, [5 min, 48 h]
 *                  inference  m 1 h,    s 1.0, [1 min, 24 h]
 *                  notebook   m 2 h,    s 0.8, [10 min, 12 h]
 *                  batch      m 30 min, s 1.2, [1 min, 12 h]
 *   size         training   nvidia.com/gpu 1 (60 %), 2 (25 %), 4 (10 %), 8 (5 %); other
 *                           shares with --training-sizes 1=0.3,2=0.35,4=0.25,8=0.1
 *                inference  tessera.io/gpu-fraction 0.1 (40 %), 0.25 (40 %), 0.5 (10 %),
 *                           nvidia.com/gpu 1 (10 %)
 *                notebook   gpu-fraction 0.1 (60 %), 0.25 (40 %)
 *                batch      nvidia.com/gpu 1 (70 %), gpu-fraction 0.5 (30 %)
 *                fractions carry tessera.io/isolation: any (a MIG slice, a replica or a
 *                soft share, whatever the node offers)
 *   utilisation  uniform: training [0.6, 0.95], inference [0.1, 0.5], notebook [0, 0.1]
 *                (data/sharing-costs.md section 4: notebooks mostly idle), batch [0.5, 1]
 *   priority     inference 1000, notebook 500, training 100, batch 0
 *   host         per GPU (or per fraction's pod): training 8 CPU / 64 GiB per GPU,
 *                inference 2 CPU / 8 GiB, notebook 1 CPU / 4 GiB, batch 4 CPU / 16 GiB
 *   tenant       uniform over team-1 .. team-T
 */
#ifndef SIM_GEN_H
#define SIM_GEN_H

#include <stdint.h>

#include "sim/trace.h"

typedef struct sim_gen_opts {
    uint64_t seed;
    long workloads;
    double hours;
    double mix[SIM_NKINDS];   /* shares of training, inference, notebook, batch (need not sum to 1) */
    int tenants;
    double training_sizes[4];   /* shares of 1, 2, 4, 8-GPU training (need not sum to 1); all 0: the defaults */
} sim_gen_opts;

/* seed 1, 1000 workloads, 8 hours, mix 0.2 / 0.4 / 0.3 / 0.1, 8 tenants. */
void sim_gen_defaults(sim_gen_opts *o);

/* "training=0.2,inference=0.5,..." into o->mix. -1 with err. */
int sim_gen_parse_mix(const char *s, sim_gen_opts *o, char *err, size_t errlen);

/* "1=0.3,2=0.35,4=0.25,8=0.1" into o->training_sizes (sizes not named get 0). -1 with err. */
int sim_gen_parse_training_sizes(const char *s, sim_gen_opts *o, char *err, size_t errlen);

/* The trace, sorted by arrival. NULL with err on bad options. */
sim_trace *sim_gen(const sim_gen_opts *o, char *err, size_t errlen);

#endif
