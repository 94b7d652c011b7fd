/* objects.h -- the mirror's record of a pod and of a node (with the pods placed on it): what state.c keeps in
 * its cache and the modules beside it (holdings.c) read and change under the state lock. Only the types: the
 * cache that owns them is state.h, which includes this; a module that state.c calls (holdings.h) includes this
 * rather than state.h, so that state -> holdings -> objects points one way.
 */
#ifndef EXT_OBJECTS_H
#define EXT_OBJECTS_H

#include <stdbool.h>
#include <stdint.h>

#include "model/fit.h"
#include "model/node.h"
#include "model/request.h"

typedef enum ext_pod_phase { EXT_POD_PENDING = 0, EXT_POD_BINDING, EXT_POD_ASSUMED, EXT_POD_BOUND } ext_pod_phase;

typedef struct ext_pod {
    char uid[MODEL_UID_LEN];
    char *ns, *name;
    char *node;              /* NULL while pending */
    model_request req;
    ext_pod_phase phase;
    bool holds;              /* a is applied on the node's model */
    bool overcommitted;      /* on a node, but its GPUs do not fit there */
    bool derived;            /* a came from model_fit, not from our annotation */
    bool from_api;           /* seen in a list or watch (not only through a bind) */
    int64_t expires_ms;      /* ASSUMED: monotonic deadline */
    uint32_t gen;            /* relist mark */
    model_assignment a;      /* valid when holds */
} ext_pod;

typedef struct ext_node {
    char *name;
    model_node *m;           /* NULL: pods reference the node but no Node object is known */
    model_node *base;        /* the model of the Node object alone; m = base + its DRA devices and the
                              * claims that hold them (dra.h) + pods. NULL when m is */
    ext_pod **pods;          /* pods placed on it (BINDING, ASSUMED, BOUND) */
    int npods, cap;
    int idx;                 /* position in the state's node array */
    uint32_t gen;
    uint64_t version;        /* changes with every change to the model or the pod list; drawn
                              * from one counter, so an equal version means the same node in
                              * the same state (what the verbs' answer cache keys on) */
    struct ext_node_memo *memo;   /* verbs.c's cached answers for this node; freed with it */
    struct ext_holdings *holdings;  /* the node agent's tessera.io/holdings record (holdings.h); NULL: none */
} ext_node;

#endif
