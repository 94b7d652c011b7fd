/* test_reserve.c -- tessera-reserve: how it finds the device under each NVIDIA device-plugin strategy
 * (fake NVIDIA_VISIBLE_DEVICES values and temporary /var/run/nvidia-container-devices, /proc/driver/nvidia
 * and /dev trees), and the real build/tessera-reserve binary against the fake API server.
 */
#include "harness.h"
#include "ext_proc.h"
#include "reserve_proc.h"
#include "reserve/device.h"
#include "tests/support/fake_apiserver.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define UUID_A "GPU-8f6d2c1e-0b1a-4c3d-9e8f-0123456789ab"
#define UUID_B "GPU-1a2b3c4d-5e6f-7081-92a3-b4c5d6e7f809"
#define UUID_M "MIG-5c0a9e3b-7d41-5b8e-a0f2-3e9d1c2b4a60"

/* A temporary tree with devices/, proc/ and dev/ under it. */
typedef struct tree {
    char root[256], devices[300], proc[300], dev[300];
} tree;

static void tree_new(tree *t) {
    snprintf(t->root, sizeof t->root, "/tmp/tessera-reserve-XXXXXX");
    if (!mkdtemp(t->root)) abort();
    snprintf(t->devices, sizeof t->devices, "%s/devices", t->root);
    snprintf(t->proc, sizeof t->proc, "%s/proc", t->root);
    snprintf(t->dev, sizeof t->dev, "%s/dev", t->root);
    mkdir(t->devices, 0755);
    mkdir(t->proc, 0755);
    mkdir(t->dev, 0755);
}

static void tree_free(tree *t) {
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", t->root);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", t->root);
}

static void touch(const char *dir, const char *name, const char *text) {
    char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) abort();
    fputs(text ? text : "", f);
    fclose(f);
}

/* proc/gpus/<bus>/information as the driver writes it (tab-separated "Key: \t value"). */
static void proc_gpu(tree *t, const char *bus, const char *uuid, int minor) {
    char dir[600], text[600];
    snprintf(dir, sizeof dir, "%s/gpus", t->proc);
    mkdir(dir, 0755);
    snprintf(dir, sizeof dir, "%s/gpus/%s", t->proc, bus);
    mkdir(dir, 0755);
    snprintf(text, sizeof text,
             "Model: \t\t NVIDIA A100-SXM4-40GB\nIRQ:   \t\t 132\nGPU UUID: \t %s\nVideo BIOS: \t 92.00.45.00.03\n"
             "Bus Type: \t PCIe\nDMA Size: \t 47 bits\nDMA Mask: \t 0x7fffffffffff\nBus Location: \t %s\n"
             "Device Minor: \t %d\nGPU Excluded:\t No\n",
             uuid, bus, minor);
    touch(dir, "information", text);
}

static reserve_env env_of(const tree *t, const char *visible) {
    return (reserve_env){.visible = visible, .devices_dir = t->devices, .proc_root = t->proc, .dev_root = t->dev};
}

TEST(reserve_envvar_uuid_list) {
    tree t;
    tree_new(&t);
    char out[512], why[512];
    reserve_env e = env_of(&t, UUID_A "," UUID_B);
    CHECK_INT(reserve_find_devices(&e, out, sizeof out, why, sizeof why), RESERVE_ENVVAR);
    CHECK_STR(out, UUID_A "," UUID_B);
    e.visible = " " UUID_A " ";
    CHECK_INT(reserve_find_devices(&e, out, sizeof out, why, sizeof why), RESERVE_ENVVAR);
    CHECK_STR(out, UUID_A);
    CHECK_STR(reserve_method_name(RESERVE_ENVVAR), "envvar");
    tree_free(&t);
}

TEST(reserve_envvar_mig_uuid) {
    tree t;
    tree_new(&t);
    char out[512], why[512];
    reserve_env e = env_of(&t, UUID_M);
    CHECK_INT(reserve_find_devices(&e, out, sizeof out, why, sizeof why), RESERVE_ENVVAR);
    CHECK_STR(out, UUID_M);
    tree_free(&t);
}

/* The plugin's replica IDs are "<uuid>::<n>"; deviceIDsFromAnnotatedDeviceIDs strips the suffix, but if it
 * ever came through it must not end up in the annotation, and two replicas of one GPU are one UUID. */
TEST(reserve_replica_suffix_stripped) {
    tree t;
    tree_new(&t);
    char out[512], why[512];
    reserve_env e = env_of(&t, UUID_A "::3");
    CHECK_INT(reserve_find_devices(&e, out, sizeof out, why, sizeof why), RESERVE_ENVVAR);
    CHECK_STR(out, UUID_A);
    e.visible = UUID_A "::0," UUID_A "::1";
    CHECK_INT(reserve_find_devices(&e, out, sizeof out, why, sizeof why), RESERVE_ENVVAR);
    CHECK_STR(out, UUID_A);
    touch(t.devices, UUID_B "::2", NULL);
    e.visible = t.devices;
    CHECK_INT(reserve_find_devices(&e, out, sizeof out, why, sizeof why), RESERVE_VOLUME_MOUNTS);
    CHECK_STR(out, UUID_B);
    tree_free(&t);
}

TEST(reserve_volume_mounts) {
    tree t;
    tree_new(&t);
    char out[512], why[512];
    /* The plugin sets the literal path; the test's devices_dir stands in for it. */
    reserve_env e = env_of(&t, RESERVE_DEVICES_DIR);
    CHECK_INT(reserve_find_devices(&e, out, sizeof out, why, sizeof why), RESERVE_FAILED);
    CHECK_CONTAINS(why, "volume-mounts");
    CHECK_CONTAINS(why, "is empty");
    touch(t.devices, UUID_B, NULL);
    touch(t.devices, UUID_A, NULL);
    touch(t.devices, ".hidden", NULL);
    CHECK_INT(reserve_find_devices(&e, out, sizeof out, why, sizeof why), RESERVE_VOLUME_MOUNTS);
    CHECK_STR(out, UUID_B "," UUID_A); /* sorted by name: "GPU-1..." before "GPU-8..." */
    e.visible = t.devices;
    CHECK_INT(reserve_find_devices(&e, out, sizeof out, why, sizeof why), RESERVE_VOLUME_MOUNTS);
    tree_free(&t);
}

TEST(reserve_void_empty_all_are_no_answer) {
    tree t;
    tree_new(&t);
    char out[512], why[1024];
    const char *values[] = {"void", "none", "all", "", NULL};
    for (int i = 0; i < 5; i++) {
        reserve_env e = env_of(&t, values[i]);
        CHECK_INT(reserve_find_devices(&e, out, sizeof out, why, sizeof why), RESERVE_FAILED);
        CHECK_CONTAINS(why, "no GPU was handed to this container");
        CHECK_CONTAINS(why, values[i] ? "NVIDIA_VISIBLE_DEVICES=" : "NVIDIA_VISIBLE_DEVICES is not set");
        CHECK_STR(out, "");
    }
    /* A GPU in the host's proc but no device node: the container has no GPU (CDI shows the whole proc). */
    proc_gpu(&t, "0000:07:00.0", UUID_A, 0);
    touch(t.dev, "null", NULL);
    reserve_env e = env_of(&t, "void");
    CHECK_INT(reserve_find_devices(&e, out, sizeof out, why, sizeof why), RESERVE_FAILED);
    CHECK_CONTAINS(why, "are the host's");
    tree_free(&t);
}

/* CDI: NVIDIA_VISIBLE_DEVICES=void, the host's proc lists every GPU, /dev holds only ours. */
TEST(reserve_cdi_device_nodes) {
    tree t;
    tree_new(&t);
    char out[512], why[1024];
    proc_gpu(&t, "0000:07:00.0", UUID_A, 0);
    proc_gpu(&t, "0000:0f:00.0", UUID_B, 1);
    touch(t.dev, "nvidiactl", NULL);
    touch(t.dev, "nvidia-uvm", NULL);
    touch(t.dev, "nvidia-uvm-tools", NULL);
    touch(t.dev, "nvidia1", NULL);
    reserve_env e = env_of(&t, "void");
    CHECK_INT(reserve_find_devices(&e, out, sizeof out, why, sizeof why), RESERVE_DEVICE_NODES);
    CHECK_STR(out, UUID_B);
    CHECK_STR(reserve_method_name(RESERVE_DEVICE_NODES), "cdi-device-nodes");
    /* A node whose minor proc does not know. */
    unlink(strcat(strcpy(why, t.dev), "/nvidia1"));
    touch(t.dev, "nvidia5", NULL);
    CHECK_INT(reserve_find_devices(&e, out, sizeof out, why, sizeof why), RESERVE_FAILED);
    CHECK_CONTAINS(why, "Device Minor");
    tree_free(&t);
}

/* CDI MIG device: the parent's /dev/nvidia<minor> and /dev/nvidia-caps/nvidia-cap<N>; no MIG UUID anywhere. */
TEST(reserve_cdi_mig_names_parent_only) {
    tree t;
    tree_new(&t);
    char out[512], why[1024], caps[400];
    proc_gpu(&t, "0000:07:00.0", UUID_A, 0);
    proc_gpu(&t, "0000:0f:00.0", UUID_B, 1);
    touch(t.dev, "nvidia0", NULL);
    snprintf(caps, sizeof caps, "%s/nvidia-caps", t.dev);
    mkdir(caps, 0755);
    touch(caps, "nvidia-cap21", NULL);
    touch(caps, "nvidia-cap22", NULL);
    reserve_env e = env_of(&t, "void");
    CHECK_INT(reserve_find_devices(&e, out, sizeof out, why, sizeof why), RESERVE_FAILED);
    CHECK_CONTAINS(why, "MIG device of GPU " UUID_A);
    CHECK_CONTAINS(why, "deviceIDStrategy uuid");
    tree_free(&t);
}

/* Fallback: no readable /dev, proc masked by libnvidia-container to the injected GPU. */
TEST(reserve_proc_fallback) {
    tree t;
    tree_new(&t);
    char out[512], why[1024];
    proc_gpu(&t, "0000:0f:00.0", UUID_B, 1);
    reserve_env e = env_of(&t, NULL);
    char missing[400];
    snprintf(missing, sizeof missing, "%s/no-such-dev", t.root);
    e.dev_root = missing;
    CHECK_INT(reserve_find_devices(&e, out, sizeof out, why, sizeof why), RESERVE_PROC_ONLY);
    CHECK_STR(out, UUID_B);
    tree_free(&t);
}

/* deviceIDStrategy=index: resolved when the masked proc shows exactly as many GPUs as indices. */
TEST(reserve_index_strategy) {
    tree t;
    tree_new(&t);
    char out[512], why[1024];
    reserve_env e = env_of(&t, "0");
    CHECK_INT(reserve_find_devices(&e, out, sizeof out, why, sizeof why), RESERVE_FAILED);
    CHECK_CONTAINS(why, "deviceIDStrategy=uuid");
    proc_gpu(&t, "0000:0f:00.0", UUID_B, 1);
    CHECK_INT(reserve_find_devices(&e, out, sizeof out, why, sizeof why), RESERVE_INDEX_PROC);
    CHECK_STR(out, UUID_B);
    e.visible = "0,1";
    CHECK_INT(reserve_find_devices(&e, out, sizeof out, why, sizeof why), RESERVE_FAILED);
    CHECK_CONTAINS(why, "1 GPU(s) for 2 index(es)");
    e.visible = "0:1";
    CHECK_INT(reserve_find_devices(&e, out, sizeof out, why, sizeof why), RESERVE_FAILED);
    CHECK_CONTAINS(why, "MIG device index");
    CHECK_CONTAINS(why, "deviceIDStrategy=uuid");
    e.visible = "gpu0";
    CHECK_INT(reserve_find_devices(&e, out, sizeof out, why, sizeof why), RESERVE_FAILED);
    CHECK_CONTAINS(why, "neither a device UUID");
    tree_free(&t);
}

TEST(reserve_output_too_small) {
    tree t;
    tree_new(&t);
    char out[16], why[256];
    reserve_env e = env_of(&t, UUID_A);
    CHECK_INT(reserve_find_devices(&e, out, sizeof out, why, sizeof why), RESERVE_FAILED);
    CHECK_CONTAINS(why, "does not fit");
    tree_free(&t);
}

/* ---- the real binary ------------------------------------------------------------------------------ */

TEST(reserve_e2e_once_prints_uuid) {
    char bin[600];
    CHECK_MSG(reserve_path(bin, sizeof bin), "tessera-reserve is not built next to the tests (run make)");
    tree t;
    tree_new(&t);
    char out[400], err[400];
    snprintf(out, sizeof out, "%s/out", t.root);
    snprintf(err, sizeof err, "%s/err", t.root);
    char *argv[] = {bin, "--once", "--dev-root", t.dev, "--proc-root", t.proc, "--devices-dir", t.devices, NULL};
    char *envp[] = {"NVIDIA_VISIBLE_DEVICES=" UUID_M, NULL};
    pid_t pid = spawn(argv, envp, out, err);
    CHECK_INT(wait_exit(pid, TEST_PATIENCE_MS), 0);
    char *text = slurp(out);
    CHECK_STR(text, UUID_M "\n");
    free(text);
    char *envp2[] = {"NVIDIA_VISIBLE_DEVICES=void", NULL};
    pid = spawn(argv, envp2, out, err);
    CHECK_INT(wait_exit(pid, TEST_PATIENCE_MS), 1);
    text = slurp(err);
    CHECK_CONTAINS(text, "no GPU was handed");
    free(text);
    tree_free(&t);
}

/* Starts the binary against the fake API with the given NVIDIA_VISIBLE_DEVICES, waits for the PATCH, checks
 * the annotation `key` == want (want NULL: present at all), then SIGTERM -> exit 0. */
static void e2e_publish(const char *visible, const char *key, const char *want) {
    char bin[600], errbuf[256], url[128];
    CHECK_MSG(reserve_path(bin, sizeof bin), "tessera-reserve is not built next to the tests (run make)");
    fake_api *f = fake_api_start(0, errbuf, sizeof errbuf);
    CHECK_MSG(f, "fake API: %s", errbuf);
    fake_api_url(f, url, sizeof url);
    fake_api_put(f, "pods", "{\"metadata\":{\"name\":\"tessera-rsv-n1-g0-1\",\"namespace\":\"tessera\"}}");
    fake_api_require_token(f, "s3cret");
    tree t;
    tree_new(&t);
    char out[400], err[400], token[400], envv[600];
    snprintf(out, sizeof out, "%s/out", t.root);
    snprintf(err, sizeof err, "%s/err", t.root);
    touch(t.root, "token", "s3cret\n");
    snprintf(token, sizeof token, "%s/token", t.root);
    snprintf(envv, sizeof envv, "NVIDIA_VISIBLE_DEVICES=%s", visible);
    char *argv[] = {bin, "--kube-api", url, "--token-file", token, "--dev-root", t.dev, "--proc-root", t.proc,
                    "--devices-dir", t.devices, NULL};
    char *envp[] = {envv, "POD_NAME=tessera-rsv-n1-g0-1", "POD_NAMESPACE=tessera", NULL};
    pid_t pid = spawn(argv, envp, out, err);

    const char *marks[] = {"event=published"};
    int seen = wait_log(err, marks, 1, TEST_PATIENCE_MS);
    bool ok = seen == 0;
    if (ok) {
        char *got = pod_annotation(f, "tessera", "tessera-rsv-n1-g0-1", key);
        ok = got && (!want || strcmp(got, want) == 0);
        if (!ok) test_fail(__FILE__, __LINE__, "annotation %s == \"%s\", expected \"%s\"", key, got ? got : "(null)",
                           want ? want : "(any)");
        free(got);
        char *auth = fake_api_last_auth(f);
        ok = ok && auth && strcmp(auth, "Bearer s3cret") == 0;
        free(auth);
        ok = ok && wait_log(err, (const char *[]){"event=waiting"}, 1, TEST_PATIENCE_MS) == 0;
    }
    kill(pid, SIGTERM);
    int rc = wait_exit(pid, TEST_PATIENCE_MS);
    if (rc < 0) kill(pid, SIGKILL), waitpid(pid, NULL, 0);
    char *log = slurp(err);
    if (!ok || rc != 0) fprintf(stdout, "    tessera-reserve log:\n%s", log);
    free(log);
    fake_api_free(f);
    tree_free(&t);
    CHECK_MSG(seen == 0, "tessera-reserve did not publish");
    CHECK(ok);
    CHECK_INT(rc, 0);
}

TEST(reserve_e2e_publishes_uuid) { e2e_publish(UUID_A "::1", "tessera.io/gpu-uuid", UUID_A); }

TEST(reserve_e2e_publishes_error) { e2e_publish("void", "tessera.io/reserve-error", NULL); }

/* API server away: the program backs off (no busy loop) and still stops at once on SIGTERM. */
TEST(reserve_e2e_backoff_then_sigterm) {
    char bin[600];
    CHECK_MSG(reserve_path(bin, sizeof bin), "tessera-reserve is not built next to the tests (run make)");
    tree t;
    tree_new(&t);
    char out[400], err[400];
    snprintf(out, sizeof out, "%s/out", t.root);
    snprintf(err, sizeof err, "%s/err", t.root);
    char *argv[] = {bin, "--kube-api", "http://127.0.0.1:1", NULL};
    char *envp[] = {"NVIDIA_VISIBLE_DEVICES=" UUID_A, "POD_NAME=p", "POD_NAMESPACE=tessera", NULL};
    pid_t pid = spawn(argv, envp, out, err);
    int seen = wait_log(err, (const char *[]){"retry_in_s=2"}, 1, TEST_PATIENCE_MS); /* 1 s, then 2 s */
    kill(pid, SIGTERM);
    int rc = wait_exit(pid, 2000);   /* at once: not after the 2 s back-off it sleeps in */
    if (rc < 0) kill(pid, SIGKILL), waitpid(pid, NULL, 0);
    char *log = slurp(err);
    int attempts = 0;
    for (char *p = log; (p = strstr(p, "event=patch-failed")); p++) attempts++;
    free(log);
    tree_free(&t);
    CHECK_INT(seen, 0);
    CHECK_INT(rc, 0);
    CHECK(attempts >= 2 && attempts <= 3);
}
