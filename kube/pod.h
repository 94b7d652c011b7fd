/* pod.h -- what a tessera program does because it runs as a container of a pod: it stops on the signal the
 * kubelet sends (SIGTERM, then SIGKILL after the pod's grace period; SIGINT too, for a terminal), taken
 * synchronously by the main thread (sigwaitinfo/sigtimedwait) so that no thread is ever interrupted; and it
 * listens where its flags say for the kubelet's probes and Prometheus (HOST:PORT); its flags give durations the
 * same way in every program.
 */
#ifndef KUBE_POD_H
#define KUBE_POD_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/* Block SIGTERM and SIGINT in the calling thread, and so in every thread started after it (libcurl's,
 * libmicrohttpd's, the program's own), and return them in *stop for sigwaitinfo/sigtimedwait; ignore SIGPIPE (a
 * peer that hangs up must not kill the process). Call first thing in main. */
void kube_pod_block_stop_signals(sigset_t *stop);

/* A listen address, "HOST:PORT" or "[V6]:PORT" (HOST empty: every address), as a socket address for bind(2).
 * numeric: HOST must be an address (no DNS lookup before the probes are served); otherwise a name is resolved.
 * 0; KUBE_POD_LISTEN_MALFORMED when s is not HOST:PORT with a port of 0..65535; KUBE_POD_LISTEN_UNRESOLVED when
 * HOST is not an address (numeric) or does not resolve; the caller words the error for its flag, with HOST
 * (brackets removed) in host when given (hostlen > 0). */
#define KUBE_POD_LISTEN_MALFORMED  (-1)
#define KUBE_POD_LISTEN_UNRESOLVED (-2)
int kube_pod_listen_addr(const char *s, bool numeric, struct sockaddr_storage *ss, socklen_t *sl, char *host,
                         size_t hostlen);

/* A duration flag: "500ms", "5s", "10m", "1h", or a bare number of seconds ("2", "0.5"), rounded to the nearest
 * millisecond; the milliseconds, or -1 when s is malformed or the duration is below 1 ms or above max_ms. The
 * caller words the error for its flag. */
int kube_pod_parse_duration(const char *s, int max_ms);

#endif
