/* mps.h -- tessera-reserve --mps: the NVIDIA MPS control daemon of one GPU, run by that GPU's reservation pod.
 *
 * An MPS share (tessera.io/compute-sharing: mps) runs as a client of a control daemon that the reservation of its GPU
 * runs (round 4's issue 27 contract). The reservation pod, in namespace tessera-node, mounts the host directory
 * /run/tessera/mps at the same path and /run/tessera/mps/shm as its /dev/shm; the share pods mount the same two. For
 * its GPU <UUID> tessera-reserve --mps:
 *   1. makes <root>/<UUID>/pipe and <root>/<UUID>/log, mode 01777 (sticky, like /tmp: an MPS server runs as its
 *      client's uid and writes its pipes and server.log there, and a share may run as any uid), after removing the
 *      pipe directory a previous run left and keeping that run's log as <root>/<UUID>/log.previous; if a daemon still
 *      answers in that pipe directory it refuses instead (it never stops a daemon it did not start). The
 *      shared-memory directory <root>/shm (the pods' /dev/shm: the same host directory) is made mode 01777 too:
 *      hostPath DirectoryOrCreate makes it 0755 root, which a share of another uid cannot write. It is named
 *      through <root>, not /dev/shm, so that one argument (--mps-root) carries every path tessera-reserve uses.
 *   2. starts `nvidia-cuda-mps-control -f` as its child, found on PATH (the NVIDIA container runtime mounts it into
 *      a container whose NVIDIA_DRIVER_CAPABILITIES include compute), with CUDA_VISIBLE_DEVICES=<UUID>,
 *      CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY set to those directories, SIGTERM as its parent-death
 *      signal. The daemon's defaults stay 100 percent active threads and no pinned-memory limit: a client's
 *      CUDA_MPS_ACTIVE_THREAD_PERCENTAGE and CUDA_MPS_PINNED_DEVICE_MEM_LIMIT can only lower them.
 *   3. waits until the daemon answers `get_default_active_thread_percentage` (client mode, as NVIDIA's device plugin
 *      checks its daemon's health), at most timeout_ms. Only then does tessera-reserve publish
 *      tessera.io/gpu-uuid, together with tessera.io/mps-pipe-directory and tessera.io/mps-log-directory (the
 *      directories as the share pods see them: the controller copies them into the share's ConfigMap as
 *      CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY, so it never has to guess --mps-root).
 * A daemon that does not start (not on PATH, exits, never answers): tessera-reserve publishes tessera.io/reserve-error
 * with the reason and the last lines of control.log (the controller treats the reservation as refused, so the GPU is
 * not lost) and keeps holding the device until SIGTERM, so the pod says what happened.
 * A daemon that dies later, under running shares: tessera-reserve starts it again (reserve_mps_restart) in the same
 * directories, after a back-off of 1 s, 2 s, 4 s ... (at most 16 s), logging event=mps-daemon-restarted with why it
 * died and its control.log tail; the UUID stays published, so the shares' ConfigMaps stay right and their new CUDA
 * processes reach the new daemon. Their processes that were clients of the dead one have lost their contexts (CUDA's
 * behaviour when the MPS server goes: their next calls fail), and a process that starts while no daemon answers runs
 * without MPS (the driver's documented fallback), so without its compute cap, until it restarts. At most --mps-restarts
 * restarts (default 5; the count starts again after a daemon ran 10 minutes): then tessera.io/reserve-error is
 * published as for a daemon that does not start, but the UUID stays beside it, because the pod still holds that
 * device and its started shares still run on it (the controller keeps the reservation until they end).
 * On SIGTERM: `quit` to the daemon, wait for it (SIGKILL after 3 s), exit 0.
 *
 * The daemon must be able to start servers as its clients' uids: the reservation pod runs as root (uid 0), which
 * the tessera-node namespace's Pod Security level (privileged) allows.
 */
#ifndef RESERVE_MPS_H
#define RESERVE_MPS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define RESERVE_MPS_ROOT    "/run/tessera/mps"
#define RESERVE_MPS_PROGRAM "nvidia-cuda-mps-control"
#define RESERVE_MPS_TIMEOUT_MS 30000
#define RESERVE_MPS_RESTARTS   5      /* --mps-restarts: restarts of a daemon that died before giving up */

/* The annotations published beside tessera.io/gpu-uuid. */
#define RESERVE_ANN_MPS_PIPE "tessera.io/mps-pipe-directory"
#define RESERVE_ANN_MPS_LOG  "tessera.io/mps-log-directory"

typedef struct reserve_mps_config {
    const char *root;    /* RESERVE_MPS_ROOT: <root>/<UUID>/pipe and /log */
    const char *shm_dir; /* NULL: <root>/shm; made mode 01777 */
    const char *program; /* RESERVE_MPS_PROGRAM: a name searched on PATH, or a path */
    int timeout_ms;      /* how long the daemon may take to answer */
} reserve_mps_config;

typedef struct reserve_mps reserve_mps;

/* The defaults above. */
void reserve_mps_config_defaults(reserve_mps_config *cfg);

/* Steps 1-3 for `uuids`, the device(s) reserve_find_devices found: exactly one whole GPU ("GPU-..."), else refused.
 * Returns the running daemon, or NULL with why set to a sentence an operator can act on (what failed, and the last
 * lines of control.log when the daemon wrote any). Signals: the caller blocks SIGTERM/SIGINT (tessera-reserve does);
 * the child gets an empty mask. */
reserve_mps *reserve_mps_start(const reserve_mps_config *cfg, const char *uuids, char *why, size_t whylen);

const char *reserve_mps_pipe_dir(const reserve_mps *m);
const char *reserve_mps_log_dir(const reserve_mps *m);
pid_t reserve_mps_pid(const reserve_mps *m);

/* false once the daemon has exited (reaped here), with why: its exit status and the last lines of control.log. */
bool reserve_mps_alive(reserve_mps *m, char *why, size_t whylen);

/* After reserve_mps_alive said false: start the daemon again in the same pipe and log directories (the dead one's
 * socket and pid file removed, its control.log kept and appended to) and wait until it answers, at most the
 * configured timeout. 0, or -1 with why (the new daemon is then reaped or killed: call it again later). */
int reserve_mps_restart(reserve_mps *m, char *why, size_t whylen);

/* `quit`, wait for the daemon (SIGKILL after 3 s), free. NULL is fine. */
void reserve_mps_stop(reserve_mps *m);

/* Run `program` in client mode with `command` on stdin and the daemon's environment; its stdout into out.
 * Returns its exit status, -1 when it could not run or took over timeout_ms (then it is killed). */
int reserve_mps_command(const reserve_mps *m, const char *command, char *out, size_t outlen, int timeout_ms);

/* The last n lines of a file, joined by " | " (empty when it cannot be read). */
void reserve_mps_tail(const char *path, int n, char *out, size_t outlen);

#endif
