/* pod.h -- what a tessera program does because it runs as a container of a pod: it stops on the signal the
 * kubelet sends (SIGTERM, then SIGKILL after the pod's grace period; SIGINT too, for a terminal), taken
 * synchronously by the main thread (sigwaitinfo/sigtimedwait) so that no thread is ever interrupted.
 */
#ifndef KUBE_POD_H
#define KUBE_POD_H

#include <signal.h>

/* Block SIGTERM and SIGINT in the calling thread, and so in every thread started after it (libcurl's,
 * libmicrohttpd's, the program's own), and return them in *stop for sigwaitinfo/sigtimedwait; ignore SIGPIPE (a
 * peer that hangs up must not kill the process). Call first thing in main. */
void kube_pod_block_stop_signals(sigset_t *stop);

#endif
