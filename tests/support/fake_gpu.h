/* fake_gpu.h -- the fake node's GPUs, shared by the fake driver (fake_cuda.c) and the fake NVML (fake_nvml.c) so both
 * see the same devices with the same UUIDs and the same memory in use.
 *
 *   FAKE_CUDA_DEVICES=GPU-<uuid>:<MiB>[:<SMs>],...   the node's GPUs in PCI order (SMs default 108, an A100)
 *   FAKE_CUDA_STATE=PATH                             the node's device memory in use, a ledger (shim/ledger.h) every
 *                                                    process on the fake node shares; without it, each process
 *                                                    sees only its own allocations
 *   NVIDIA_VISIBLE_DEVICES                           what the NVIDIA container runtime puts in the container: unset
 *                                                    or "all": every GPU; "none", "void" or empty: none; else a
 *                                                    comma list of UUIDs or indices. The runtime only exposes
 *                                                    device nodes, so the driver still enumerates in PCI order.
 * Static functions: each fake includes this header and is a library of its own.
 */
#ifndef TESTS_FAKE_GPU_H
#define TESTS_FAKE_GPU_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_GPU_MAX 16

typedef struct fake_gpu {
    char uuid[64];
    unsigned long long mib;
    int sms;
    int node_index; /* its index in FAKE_CUDA_DEVICES */
} fake_gpu;

/* Whether s is GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx (hex), and its 16 bytes. */
static __attribute__((unused)) int fake_gpu_uuid_bytes(const char *s, unsigned char out[16]) {
    if (strncmp(s, "GPU-", 4) != 0 || strlen(s) != 40) return 0;
    static const int dash[] = {12, 17, 22, 27};
    int b = 0, hi = -1;
    for (int i = 4; i < 40; i++) {
        if (i == dash[0] || i == dash[1] || i == dash[2] || i == dash[3]) {
            if (s[i] != '-') return 0;
            continue;
        }
        int v = s[i] >= '0' && s[i] <= '9' ? s[i] - '0' : s[i] >= 'a' && s[i] <= 'f' ? s[i] - 'a' + 10
              : s[i] >= 'A' && s[i] <= 'F' ? s[i] - 'A' + 10 : -1;
        if (v < 0) return 0;
        if (hi < 0) hi = v;
        else {
            out[b++] = (unsigned char)(hi << 4 | v);
            hi = -1;
        }
    }
    return b == 16;
}

/* Whether NVIDIA_VISIBLE_DEVICES shows GPU g (its UUID or its node index). */
static __attribute__((unused)) int fake_gpu_visible(const char *visible, const fake_gpu *g) {
    if (!visible || !strcmp(visible, "all")) return 1;
    if (!*visible || !strcmp(visible, "none") || !strcmp(visible, "void")) return 0;
    const char *p = visible;
    while (*p) {
        size_t n = strcspn(p, ",");
        char idx[16];
        snprintf(idx, sizeof idx, "%d", g->node_index);
        if ((n == strlen(g->uuid) && !strncmp(p, g->uuid, n)) || (n == strlen(idx) && !strncmp(p, idx, n))) return 1;
        p += n;
        if (*p == ',') p++;
    }
    return 0;
}

/* The GPUs this process's container shows, in the node's order: their count, or -1 with why filled. */
static __attribute__((unused)) int fake_gpus(fake_gpu *out, char *why, size_t len) {
    const char *spec = getenv("FAKE_CUDA_DEVICES");
    if (!spec || !*spec) {
        snprintf(why, len, "FAKE_CUDA_DEVICES is not set: the fake node has no GPU");
        return -1;
    }
    const char *visible = getenv("NVIDIA_VISIBLE_DEVICES");
    int n = 0, node = 0;
    for (const char *p = spec; *p; node++) {
        size_t l = strcspn(p, ",");
        char item[128];
        snprintf(item, sizeof item, "%.*s", (int)(l < sizeof item ? l : sizeof item - 1), p);
        p += l;
        if (*p == ',') p++;
        fake_gpu g;
        memset(&g, 0, sizeof g);
        char whole[128];
        memcpy(whole, item, sizeof whole);
        char *colon = strchr(item, ':');
        unsigned char bytes[16];
        if (!colon) {
            snprintf(why, len, "FAKE_CUDA_DEVICES entry \"%s\" is not GPU-<uuid>:<MiB>[:<SMs>]", whole);
            return -1;
        }
        *colon = 0;
        char *end;
        g.mib = strtoull(colon + 1, &end, 10);
        g.sms = 108;
        if (*end == ':') g.sms = (int)strtol(end + 1, &end, 10);
        if (!fake_gpu_uuid_bytes(item, bytes) || g.mib == 0 || g.sms <= 0 || *end) {
            snprintf(why, len, "FAKE_CUDA_DEVICES entry \"%s\" is not GPU-<uuid>:<MiB>[:<SMs>]", whole);
            return -1;
        }
        snprintf(g.uuid, sizeof g.uuid, "%.40s", item); /* 40: the length fake_gpu_uuid_bytes checked */
        g.node_index = node;
        if (node >= FAKE_GPU_MAX) {
            snprintf(why, len, "FAKE_CUDA_DEVICES lists more than %d GPUs", FAKE_GPU_MAX);
            return -1;
        }
        if (fake_gpu_visible(visible, &g)) out[n++] = g;
    }
    return n;
}

#endif
