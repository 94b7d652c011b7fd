/* status.h -- what the node agent reports about itself: which of its dependencies is degraded and why, and
 * its counters, served as GET /healthz, /readyz and /metrics (Prometheus text) over libmicrohttpd.
 *
 *   /healthz  200 while the main loop runs (it has ticked within the last stall_ms), else 503: a stuck agent
 *             is restarted by its liveness probe.
 *   /readyz   200 "ok" when nothing is degraded; else 503 with one line per degraded component and its reason:
 *               nvml           the library or the driver (the topology cannot be read),
 *               pod-resources  the kubelet's Pod Resources socket (holdings cannot be read),
 *               api            the API server (GET or PATCH of the Node failed),
 *               topology       the topology is refused for this node (e.g. a MIG GPU without a "mig" list).
 *             A component not tried yet counts as degraded ("not tried yet"), so a new agent is ready only once
 *             it has read and published.
 *   /metrics  tessera_node_agent_writes_total{annotation}, tessera_node_agent_write_errors_total,
 *             tessera_node_agent_errors_total{component}, tessera_node_agent_degraded{component},
 *             tessera_node_agent_last_success_timestamp_seconds{component}.
 * All functions are thread-safe (the main loop reports, the server's thread reads).
 */
#ifndef AGENT_STATUS_H
#define AGENT_STATUS_H

#include <stddef.h>

typedef enum agent_comp { AGENT_NVML = 0, AGENT_PODRES, AGENT_API, AGENT_TOPOLOGY, AGENT_NCOMP } agent_comp;

const char *agent_comp_name(agent_comp c);   /* "nvml", "pod-resources", "api", "topology" */

void agent_status_ok(agent_comp c);
/* Degraded with this reason; counts an error (a repeat of the same reason still counts: every failure is one). */
void agent_status_fail(agent_comp c, const char *why);
/* A PATCH of the Node: which annotations it carried (ok), or that it failed. */
void agent_status_written(const char *const *annotations, int n);
void agent_status_write_failed(void);
/* The main loop is alive. */
void agent_status_tick(void);

/* Serve on "HOST:PORT" (port 0: any free port); the port bound, or -1 with err. stall_ms: /healthz's limit. */
int agent_status_serve(const char *listen, int stall_ms, char *err, size_t errlen);
void agent_status_stop(void);

#endif
