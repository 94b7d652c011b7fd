/* slowdown.c -- the sharing and multi-GPU communication slowdown models; the formulas and sources are in
 * slowdown.h. */
#include "sim/slowdown.h"

double sim_rate_timeslice(double u, double others) {
    if (others <= 0) return 1.0;
    if (u < 0) u = 0;
    double d = u + others;
    double share = d > 1.0 ? 1.0 / d : 1.0;
    double busy_u = u < 1.0 ? u : 1.0, busy_o = others < 1.0 ? others : 1.0;
    return share * (1.0 - SIM_TIMESLICE_LOSS * busy_u * busy_o);
}

double sim_rate_share(double u, double share) {
    if (share <= 0) return 0;
    if (u <= share) return 1.0;
    return share / u;
}

double sim_mig_sm_share(const model_gpu_product *p, int prof) {
    if (prof < 0 || prof >= p->nprofiles) return 1.0;
    const model_mig_profile *m = &p->profiles[prof];
    if (m->sm_count > 0 && p->sm_count > 0) return (double)m->sm_count / p->sm_count;
    /* Unknown SM counts: the compute slices, with the MIG-enable loss where known. */
    double s = p->mig_compute_slices > 0 ? (double)m->compute_slices / p->mig_compute_slices : 1.0;
    if (p->mig_sm_total > 0 && p->sm_count > 0) s *= (double)p->mig_sm_total / p->sm_count;
    return s > 1.0 ? 1.0 : s;
}

double sim_rate_mig_timeslice(double u, double others, double share) {
    if (share <= 0) return 0;
    if (others <= 0) return sim_rate_share(u, share);
    return sim_rate_timeslice(u / share, others / share);
}

double sim_mps_share(const model_gpu *g, const model_grant *gr) {
    if (gr->mps) {
        int pct = (gr->compute_permille + 9) / 10;   /* the percentage the share's client is given */
        return (pct < 1 ? 1 : pct > 100 ? 100 : pct) / 100.0;
    }
    if (g->mode == MODEL_GPU_MPS && gr->replica >= 0 && gr->mig_profile < 0) return g->mps_thread_permille / 1000.0;
    return 0;
}

double sim_mps_load(double u, double m, double share) {
    if (m <= 0) return 0;
    return u > share && u > 0 ? m * share / u : m;
}

double sim_rate_mps(double u, double share, double load) {
    double r = sim_rate_share(u, share);
    return load > 1.0 ? r / load : r;
}

double sim_rate_grant(const model_gpu *g, const model_grant *gr, double u, double others) {
    if (gr->exclusive) return 1.0;
    if (gr->mps) return sim_rate_mps(u, sim_mps_share(g, gr), 0);
    switch (g->mode) {
    case MODEL_GPU_MIG:
        if (gr->replica >= 0) return sim_rate_mig_timeslice(u, others, sim_mig_sm_share(g->product, gr->mig_profile));
        return sim_rate_share(u, sim_mig_sm_share(g->product, gr->mig_profile));
    case MODEL_GPU_MPS: return sim_rate_mps(u, sim_mps_share(g, gr), 0);
    case MODEL_GPU_TIMESLICE:
    case MODEL_GPU_WHOLE: break;
    }
    return sim_rate_timeslice(u, others);
}

void sim_comm_defaults(sim_comm_model *m) {
    m->share = SIM_COMM_SHARE;
    m->bw[MODEL_ALIGN_UNKNOWN] = 0;
    m->bw[MODEL_ALIGN_NONE] = SIM_COMM_BW_NONE;
    m->bw[MODEL_ALIGN_NUMA] = SIM_COMM_BW_NUMA;
    m->bw[MODEL_ALIGN_PCIE] = SIM_COMM_BW_PCIE;
    m->bw[MODEL_ALIGN_NVLINK] = SIM_COMM_BW_NVLINK;
}

double sim_comm_factor(const sim_comm_model *m, model_align a, double c) {
    if (a <= MODEL_ALIGN_UNKNOWN || a > MODEL_ALIGN_NVLINK || m->bw[a] <= 0) return 1.0;
    if (c < 0) c = 0;
    if (c > 1) c = 1;
    return (1.0 - c) + c * m->bw[MODEL_ALIGN_NVLINK] / m->bw[a];
}
