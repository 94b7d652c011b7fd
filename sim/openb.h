/* openb.h -- the Alibaba "openb" GPU cluster trace (FGD paper, ATC '23): its node list
 * and pod lists as CSV, read from a file or from the copies compiled into the binary
 * (the node list and the default pod list, from data/openb), and turned into model
 * nodes and requests for fgd-paper and convert.
 *
 * Node list:  sn,cpu_milli,memory_mib,gpu,model
 * Pod list:   name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,
 *             creation_time,deletion_time,scheduled_time
 * Columns are found by their header names (the multigpu lists have no gpu_spec column);
 * gpu_milli is per GPU; gpu_spec is a '|' list of allowed models, empty for any.
 * A malformed line is an error naming the line and column, never skipped silently.
 */
#ifndef SIM_OPENB_H
#define SIM_OPENB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/node.h"
#include "model/request.h"

/* GPU memory for the openb models, which the trace does not give. A multiple of 1000
 * MiB, so the memory the model charges a compute-only fraction (ceil(permille * memory
 * / 1000)) is exact and never blocks what compute alone admits. */
#define SIM_OPENB_GPU_MIB 16000

typedef struct sim_openb_node {
    char name[64];
    int64_t cpu_milli, memory_mib;
    int gpus;
    char model[32];
} sim_openb_node;

typedef struct sim_openb_pod {
    char name[64];
    int64_t cpu_milli, memory_mib;
    int num_gpu;
    int gpu_milli;              /* per GPU, 0..1000; 0 when num_gpu is 0 */
    char gpu_spec[160];         /* "V100M16|V100M32"; "" = any model */
    char qos[16], phase[16];    /* "" when the list has no such column */
    bool has_times;
    int64_t creation, deletion, scheduled;   /* seconds when has_times; -1 where the CSV leaves it empty */
} sim_openb_pod;

/* Parse CSV text. 0 and a malloc'd array (*out, *n), or -1 with err ("line 7: gpu: not
 * an integer"). */
int sim_openb_parse_nodes(const char *text, size_t len, sim_openb_node **out, int *n, char *err, size_t errlen);
int sim_openb_parse_pods(const char *text, size_t len, sim_openb_pod **out, int *n, char *err, size_t errlen);

/* Read a file; path NULL means the built-in copy (node list / default pod list). */
int sim_openb_load_nodes(const char *path, sim_openb_node **out, int *n, char *err, size_t errlen);
int sim_openb_load_pods(const char *path, sim_openb_pod **out, int *n, char *err, size_t errlen);

/* A pod list by short name ("default", "cpu050"): data_dir/openb_pod_list_NAME.csv, or
 * with data_dir NULL the built-in copy, which only "default" has. */
int sim_openb_load_pod_list(const char *data_dir, const char *name, sim_openb_pod **out, int *n, char *err,
                            size_t errlen);

/* The pod as a request: CPU-only, a compute share of one GPU (gpu_milli < 1000), or
 * whole GPUs; host CPU and memory; gpu_spec as the allowed models. */
void sim_openb_request(const sim_openb_pod *p, model_request *r);

/* GPU milli the pod asks for in all: num_gpu * gpu_milli. */
int64_t sim_openb_pod_gpu_milli(const sim_openb_pod *p);

/* The nodes as model nodes tracking host CPU and memory, whole-mode GPUs of a generic
 * product per model name (SIM_OPENB_GPU_MIB each). The products live in the cluster. */
typedef struct sim_openb_cluster {
    int n, gpus;
    model_node **nodes;
    int nproducts;
    model_gpu_product products[16];
} sim_openb_cluster;

sim_openb_cluster *sim_openb_cluster_new(const sim_openb_node *v, int n, char *err, size_t errlen);
void sim_openb_cluster_free(sim_openb_cluster *c);

#endif
