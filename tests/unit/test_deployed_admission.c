/* test_deployed_admission.c -- the pods tessera itself makes or changes, as deploy/ runs it, for the admission
 * checks of tests/deploy/check_manifests.py (issue 28: "everything deploy/ ships is admitted by the cluster").
 *
 * tessera creates pods and changes pods at run time that no manifest shows: the reservation pods the extender
 * POSTs (extender/delivery/reservation.c) and the patch its webhook applies to every share. Pod Security
 * admission judges them as it judges the manifests, so check_manifests.py must see them as the real code makes
 * them. This test runs tessera as `kubectl apply -k deploy/` runs it (tests/support/deployed_cluster.h: two
 * replicas from deploy/'s Deployment, the fake API server, kube-scheduler and kubelet) through a soft share's life
 * up to its reservation, for two shares a user could write:
 *   - "restricted": restricted-clean (non-root, no privilege escalation, capabilities dropped, RuntimeDefault
 *     seccomp) with an init container, as a user in a namespace that enforces restricted must write it;
 *   - "baseline": the plain pod of deploy/examples (no securityContext), baseline-clean only.
 * With TESSERA_ADMISSION_OBJECTS=DIR it writes what it saw, one JSON object per file:
 *   share-<kind>-submitted.json  the pod as the user sent it
 *   share-<kind>-admitted.json   the pod as the API server stored it, the webhook's JSON Patch applied
 *   reservation-pod.json         the reservation pod as the extender created it (status and the fields the
 *                                API server sets, uid, resourceVersion, creationTimestamp, left out);
 *                                check_manifests.py judges every reservation*.json, so another kind of
 *                                reservation (MPS) is covered by writing its own file here
 *   reservation-mps-pod.json     the same for the reservation of an MPS share's GPU (a third share, "mps":
 *                                tessera.io/compute-sharing: mps, uid 1000), which runs the GPU's MPS daemon in
 *                                tessera-node
 * check_manifests.py runs `build/tessera-tests deployed_pods_for_admission` with that variable and evaluates
 * them: the reservation pod at the level of the namespace it names, each admitted share at the level its
 * submitted form met. Without the variable the test checks only that tessera made them.
 */
#include <errno.h>
#include <sys/stat.h>

#include "ext_proc.h"
#include "ext_helpers.h"
#include "extender/base/delivery.h"
#include "tests/support/deployed_cluster.h"

#define GPU_NODE "gpu-1"
#define OUT_ENV "TESSERA_ADMISSION_OBJECTS"


/* The share a user in a restricted namespace writes: every container (init containers too) restricted-clean,
 * the pod's own runAsNonRoot and seccomp inherited by the containers that set neither. */
static const char *const RESTRICTED_SHARE =
    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"share-restricted\",\"namespace\":\"default\","
    "\"annotations\":{\"tessera.io/gpu-fraction\":\"0.25\"}},"
    "\"spec\":{\"schedulerName\":\"%s\","
    "\"securityContext\":{\"runAsNonRoot\":true,\"runAsUser\":1000,\"seccompProfile\":{\"type\":\"RuntimeDefault\"}},"
    "\"initContainers\":[{\"name\":\"fetch\",\"image\":\"busybox:1.36\",\"command\":[\"true\"],"
    "\"securityContext\":{\"allowPrivilegeEscalation\":false,\"capabilities\":{\"drop\":[\"ALL\"]}}}],"
    "\"containers\":[{\"name\":\"app\",\"image\":\"nvidia/cuda:12.4.1-base-ubuntu22.04\","
    "\"securityContext\":{\"allowPrivilegeEscalation\":false,\"capabilities\":{\"drop\":[\"ALL\"]}}},"
    "{\"name\":\"sidecar\",\"image\":\"busybox:1.36\",\"command\":[\"sleep\",\"3600\"],"
    "\"securityContext\":{\"allowPrivilegeEscalation\":false,\"readOnlyRootFilesystem\":true,"
    "\"capabilities\":{\"drop\":[\"ALL\"],\"add\":[\"NET_BIND_SERVICE\"]}}}]}}";

/* The share of deploy/examples/pod-gpu-fraction.yaml: nothing about security, so baseline-clean only. */
static const char *const BASELINE_SHARE =
    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"share-baseline\",\"namespace\":\"default\","
    "\"annotations\":{\"tessera.io/gpu-fraction\":\"0.25\"}},"
    "\"spec\":{\"schedulerName\":\"%s\",\"containers\":[{\"name\":\"app\",\"image\":\"busybox:1.36\"}]}}";

/* An MPS share (issue 27): its GPU's reservation runs the MPS control daemon, in namespace tessera-node. */
static const char *const MPS_SHARE =
    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"share-mps\",\"namespace\":\"default\","
    "\"annotations\":{\"tessera.io/gpu-fraction\":\"0.25\",\"tessera.io/compute-sharing\":\"mps\"}},"
    "\"spec\":{\"schedulerName\":\"%s\",\"securityContext\":{\"runAsUser\":1000},"
    "\"containers\":[{\"name\":\"app\",\"image\":\"nvidia/cuda:12.4.1-base-ubuntu22.04\"}]}}";

/* A reservation pod (detached from the cluster's list; caller deletes) of the MPS kind or not, NULL when none yet. */
static cJSON *reservation_of_kind(deployed_cluster *c, bool mps) {
    cJSON *rs = deployed_cluster_reservations(c), *x, *out = NULL;
    int i = 0;
    cJSON_ArrayForEach(x, rs) {
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(x, "metadata"), "annotations"), EXT_RSV_ANN_MPS);
        if ((cJSON_IsString(m) && !strcmp(m->valuestring, "true")) == mps) {
            out = cJSON_DetachItemFromArray(rs, i);
            break;
        }
        i++;
    }
    cJSON_Delete(rs);
    return out;
}

/* Write o to dir/name; false with err. */
static bool write_json(const char *dir, const char *name, const cJSON *o, char *err, size_t errlen) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *text = cJSON_Print(o);
    FILE *f = text ? fopen(path, "w") : NULL;
    bool ok = f && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
    if (f && fclose(f) != 0) ok = false;
    if (!ok) snprintf(err, errlen, "cannot write %.900s: %s", path, strerror(errno));
    free(text);
    return ok;
}

/* The object as its author sent it: what the API server adds on create (status, uid, resourceVersion,
 * creationTimestamp) goes. */
static void as_created(cJSON *o) {
    cJSON_DeleteItemFromObjectCaseSensitive(o, "status");
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(o, "metadata");
    static const char *const server_set[] = {"uid", "resourceVersion", "creationTimestamp", "generation"};
    for (size_t i = 0; i < sizeof server_set / sizeof *server_set; i++)
        cJSON_DeleteItemFromObjectCaseSensitive(meta, server_set[i]);
}

TEST(deployed_pods_for_admission_checks) {
    char bin[1024], dir[640], err[1024] = "";
    deployed_cluster c = {0};
    bool paths = extender_path(bin, sizeof bin) && deployed_cluster_deploy_dir(dir, sizeof dir);
    cJSON *node = demo_node_as("gpu-a100-whole", GPU_NODE);
    char *nj = cJSON_PrintUnformatted(node);
    cJSON_Delete(node);
    deployed_cluster_config cfg = {.extender_bin = bin, .deploy_dir = dir, .gpu_node_json = nj, .gpus = 8,
                                   .uuid_prefix = "GPU-5eca", .pull_ms = 0};
    bool up = paths && deployed_cluster_start(&c, &cfg) == 0;
    free(nj);
    static const char *const kinds[2] = {"restricted", "baseline"};
    const char *const forms[2] = {RESTRICTED_SHARE, BASELINE_SHARE};
    cJSON *submitted[2] = {NULL, NULL}, *admitted[2] = {NULL, NULL}, *rsv = NULL, *mrsv = NULL;
    for (int i = 0; up && i < 2; i++) {
        char pod[2048];
        snprintf(pod, sizeof pod, forms[i], c.d->scheduler_name);
        submitted[i] = cJSON_Parse(pod);
        admitted[i] = deployed_create_pod(c.api, &c.rep[0], pod, c.err, sizeof c.err);
        if (admitted[i]) as_created(admitted[i]);
    }
    /* bound by the fake kube-scheduler through the extender, then reserved by the background work */
    bool bound = false;
    int64_t t0 = deployed_cluster_now_ms();
    while (admitted[0] && admitted[1] && !bound && deployed_cluster_now_ms() - t0 < TEST_PATIENCE_MS) {
        bound = deployed_cluster_bound(&c, "share-restricted") && deployed_cluster_bound(&c, "share-baseline");
        if (!bound) deployed_cluster_nap(20);
    }
    for (t0 = deployed_cluster_now_ms(); bound && !rsv && deployed_cluster_now_ms() - t0 < TEST_PATIENCE_MS;
         deployed_cluster_nap(20))
        rsv = reservation_of_kind(&c, false);
    if (rsv) as_created(rsv);
    /* the MPS share goes to a GPU of its own (the other two are time-sliced), reserved in tessera-node */
    char mps[1024];
    snprintf(mps, sizeof mps, MPS_SHARE, up ? c.d->scheduler_name : "");
    cJSON *madm = rsv ? deployed_create_pod(c.api, &c.rep[0], mps, c.err, sizeof c.err) : NULL;
    for (t0 = deployed_cluster_now_ms(); madm && !mrsv && deployed_cluster_now_ms() - t0 < 15000; deployed_cluster_nap(20))
        mrsv = reservation_of_kind(&c, true);
    cJSON_Delete(madm);
    if (mrsv) as_created(mrsv);
    const char *out = getenv(OUT_ENV);
    bool written = true;
    if (out && out[0] && rsv) {
        written = (mkdir(out, 0755) == 0 || errno == EEXIST) &&
                  write_json(out, "reservation-pod.json", rsv, err, sizeof err) &&
                  (!mrsv || write_json(out, "reservation-mps-pod.json", mrsv, err, sizeof err));
        for (int i = 0; written && i < 2; i++) {
            char name[64];
            snprintf(name, sizeof name, "share-%s-submitted.json", kinds[i]);
            written = write_json(out, name, submitted[i], err, sizeof err);
            snprintf(name, sizeof name, "share-%s-admitted.json", kinds[i]);
            written = written && write_json(out, name, admitted[i], err, sizeof err);
        }
    }
    const cJSON *rspec = cJSON_GetObjectItemCaseSensitive(rsv, "spec");
    const cJSON *rnode = cJSON_GetObjectItemCaseSensitive(rspec, "nodeName");
    bool on_node = cJSON_IsString(rnode) && !strcmp(rnode->valuestring, GPU_NODE);
    const cJSON *adm = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(admitted[0], "metadata"),
                                                        "annotations");
    bool patched = cJSON_GetObjectItemCaseSensitive(adm, EXT_DLV_ANN_DELIVERY) != NULL, reserved = rsv != NULL;
    for (int i = 0; i < 2; i++) {
        cJSON_Delete(submitted[i]);
        cJSON_Delete(admitted[i]);
    }
    const cJSON *mns = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(mrsv, "metadata"), "namespace");
    char mps_ns[64];
    snprintf(mps_ns, sizeof mps_ns, "%s", cJSON_IsString(mns) ? mns->valuestring : "");
    cJSON_Delete(rsv);
    cJSON_Delete(mrsv);
    deployed_cluster_stop(&c);
    CHECK_MSG(paths, "no build/tessera-extender or deploy/ next to the test binary");
    CHECK_MSG(up, "%s", c.err);
    CHECK_MSG(bound, "the shares were never both bound (%s)", c.err);
    CHECK_MSG(reserved, "no reservation pod was created");
    CHECK_MSG(on_node, "the reservation pod is not on %s", GPU_NODE);
    CHECK_MSG(patched, "the webhook did not mark the restricted share for delivery (no %s)", EXT_DLV_ANN_DELIVERY);
    CHECK_MSG(written, "%s", err);
    CHECK_MSG(mps_ns[0], "no reservation pod was created for the MPS share (%s)", c.err);
    CHECK_STR(mps_ns, EXT_RSV_DEFAULT_MPS_NS);
}
