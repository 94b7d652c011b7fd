/* annotation.h -- the tessera.io/assignment pod annotation: what tessera's bind granted the
 * pod, written on the Binding object so the apiserver stores it with spec.nodeName, and
 * read back from the watch to rebuild the cache exactly after a restart.
 *
 * Schema (JSON object, version 1; keys are fixed, unknown keys are ignored):
 *   {"version": 1, "node": "gpu-a100-whole", "policy": "binpack",
 *    "grants": [
 *      {"gpu": 0, "uuid": "GPU-6a0f...", "whole": true, "memoryMiB": 81920, "computePermille": 1000},
 *      {"gpu": 1, "mig": {"profile": "3g.20gb", "start": 4, "create": false},
 *       "memoryMiB": 19968, "computePermille": 428},
 *      {"gpu": 1, "mig": {"profile": "1g.5gb", "start": 0, "create": false}, "replica": 2,
 *       "memoryMiB": 2432, "computePermille": 35},            <- a replica of a time-sliced instance
 *      {"gpu": 2, "replica": 3, "memoryMiB": 3840, "computePermille": 250},
 *      {"gpu": 3, "memoryMiB": 8192, "computePermille": 300}   <- a soft share of an unshared GPU
 *    ]}
 * "gpu" is the device index as the device plugin numbers it (model_gpu.index); "uuid" is
 * present when the node publishes it (tessera.io/gpus) and must then match; "mig" names
 * the profile (catalog spelling) and memory start slot, "create" is true when the instance
 * is created on demand (dynamic MIG); "replica" is the time-slice/MPS replica (with "mig":
 * the replica of that shared instance, layered sharing); memoryMiB
 * and computePermille are what the grant charges on that GPU (0..1000 = 0..100 % of SMs).
 */
#ifndef EXT_ANNOTATION_H
#define EXT_ANNOTATION_H

#include <stddef.h>
#include <cjson/cJSON.h>
#include "model/node.h"

#define EXT_ANN_ASSIGNMENT "tessera.io/assignment"

/* The annotation value (JSON text, malloc'd) for assignment a on node n. */
char *ext_ann_encode(const model_node *n, const model_assignment *a, const char *policy_name);

/* Parse an annotation value against the node it is on. 0 and out filled; -1 with err when
 * the text is malformed or does not describe GPUs of this node (wrong node, unknown index,
 * uuid mismatch, unknown MIG profile). Whether the grants still fit is model_assign's job. */
int ext_ann_decode(const model_node *n, const char *text, model_assignment *out, char *err, size_t errlen);

#endif
