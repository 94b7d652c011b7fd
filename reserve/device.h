/* device.h -- which NVIDIA device(s) the device plugin handed this container, as UUIDs.
 *
 * Pure: reads only the environment value and the directories named in reserve_env, so tests
 * point them at temporary trees. tessera-reserve (reserve/main.c) publishes the answer on its
 * own pod object; see reserve/device.c for what each NVIDIA device-plugin strategy puts in a
 * container and where that was read.
 */
#ifndef RESERVE_DEVICE_H
#define RESERVE_DEVICE_H

#include <stddef.h>

/* Where things are in a real container. */
#define RESERVE_DEVICES_DIR "/var/run/nvidia-container-devices" /* volume-mounts strategy */
#define RESERVE_PROC_ROOT   "/proc/driver/nvidia"
#define RESERVE_DEV_ROOT    "/dev"

typedef struct reserve_env {
    const char *visible;     /* value of NVIDIA_VISIBLE_DEVICES, NULL when unset */
    const char *devices_dir; /* RESERVE_DEVICES_DIR */
    const char *proc_root;   /* RESERVE_PROC_ROOT: gpus/<PCI bus id>/information */
    const char *dev_root;    /* RESERVE_DEV_ROOT: nvidia<minor>, nvidia-caps/ */
} reserve_env;

/* How the answer was found (the return value of reserve_find_devices). */
typedef enum reserve_method {
    RESERVE_FAILED = -1,
    RESERVE_ENVVAR = 1,    /* NVIDIA_VISIBLE_DEVICES held UUIDs */
    RESERVE_VOLUME_MOUNTS, /* file names under RESERVE_DEVICES_DIR were UUIDs */
    RESERVE_INDEX_PROC,    /* indices (deviceIDStrategy=index), resolved through proc */
    RESERVE_DEVICE_NODES,  /* CDI: /dev/nvidia<minor> matched to proc's "Device Minor" */
    RESERVE_PROC_ONLY      /* fallback: every gpus/<bus>/information visible in proc */
} reserve_method;

/* The real paths and getenv("NVIDIA_VISIBLE_DEVICES"). */
void reserve_env_from_process(reserve_env *env);

/* Fill out with the comma list of UUIDs ("GPU-...", "MIG-..."; a time-slicing replica suffix
 * "::<n>" removed; duplicates dropped) and return the method that found them, or
 * RESERVE_FAILED with why set to a sentence an operator can act on (it names the strategy
 * seen and what to change, and the parent GPU's UUID when only that could be found). */
int reserve_find_devices(const reserve_env *env, char *out, size_t outlen, char *why, size_t whylen);

/* "envvar", "volume-mounts", "index+proc", "cdi-device-nodes", "proc", "none". */
const char *reserve_method_name(int method);

#endif
