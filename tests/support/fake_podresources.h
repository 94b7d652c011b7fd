/* fake_podresources.h -- a fake kubelet Pod Resources API (v1 List and GetAllocatableResources) on a unix socket,
 * speaking real HTTP/2 (libnghttp2, server side) and real gRPC framing, so that what a test proves against it holds
 * against a kubelet: the reply is HEADERS (:status 200, content-type application/grpc), DATA (a 5-byte prefix and
 * the message), and trailers with grpc-status; a status other than OK comes "trailers-only" (one HEADERS frame
 * with END_STREAM), as grpc-go sends it; an unknown method gets UNIMPLEMENTED "unknown method M for service
 * v1.PodResourcesLister" (grpc-go's words), a request without content-type application/grpc HTTP 415.
 *
 * One thread accepts and serves one connection at a time (each of the agent's calls is its own connection). All
 * functions are thread-safe.
 */
#ifndef FAKE_PODRESOURCES_H
#define FAKE_PODRESOURCES_H

#include <stddef.h>

typedef struct fake_pr fake_pr;

/* Start on <a fresh temporary directory>/kubelet.sock; NULL with err when it cannot. */
fake_pr *fake_pr_start(char *err, size_t errlen);
/* Stop the thread, remove the socket and its directory, free everything. NULL is fine. */
void fake_pr_stop(fake_pr *f);
const char *fake_pr_socket(const fake_pr *f);

/* Replace what List returns (at once, between calls), one device entry per line:
 *     <namespace>/<pod> <container> <resource> <id>[,<id>...] [numa=<n>[,<n>...]]
 * Lines of the same pod and container add ContainerDevices to that container, in order; pods and containers keep
 * the order of their first line. A <resource> of "-" makes a container with no devices. Blank lines and lines
 * starting with '#' are skipped. 0, or -1 with err naming the line. */
int fake_pr_set_pods(fake_pr *f, const char *spec, char *err, size_t errlen);
/* Replace what GetAllocatableResources returns, one line per resource: <resource> <id>[,<id>...] [numa=...] */
int fake_pr_set_allocatable(fake_pr *f, const char *spec, char *err, size_t errlen);

/* The same texts into decoded messages, without a server (for tests of the pure functions). Free with
 * agent_pr_list_free / agent_pr_allocatable_free; on error (-1) *out is freed and empty. */
struct agent_pr_list;
struct agent_pr_allocatable;
int fake_pr_parse_pods(const char *spec, struct agent_pr_list *out, char *err, size_t errlen);
int fake_pr_parse_allocatable(const char *spec, struct agent_pr_allocatable *out, char *err, size_t errlen);

typedef enum fake_pr_fault {
    FAKE_PR_SERVE = 0,     /* the normal reply */
    FAKE_PR_STATUS,        /* trailers-only: grpc-status `arg`, grpc-message `msg` (percent-encoded on the wire) */
    FAKE_PR_SLOW,          /* the normal reply, `arg` ms late */
    FAKE_PR_GARBAGE,       /* well-framed, grpc-status 0, but the message is `arg` pseudo-random bytes */
    FAKE_PR_SHORT_PREFIX,  /* the prefix announces 100 bytes more than the DATA carries; grpc-status 0 */
    FAKE_PR_CLOSE_MID,     /* HEADERS and half the DATA, then the connection closes without trailers */
    FAKE_PR_NO_STATUS,     /* the normal DATA, then trailers without grpc-status */
    FAKE_PR_HTTP_STATUS,   /* HTTP status `arg` (503...), no body, no gRPC headers: not a gRPC server */
    FAKE_PR_COMPRESSED,    /* the message's prefix says compressed (flag 1), which the client never asked for */
} fake_pr_fault;

/* Answer calls to `method` ("/v1.PodResourcesLister/List"; NULL: every method) with the fault from now on;
 * FAKE_PR_SERVE clears it. */
void fake_pr_set_fault(fake_pr *f, const char *method, fake_pr_fault fault, int arg, const char *msg);

/* Calls received for method (its :path; NULL: all), faulty or not. */
int fake_pr_calls(fake_pr *f, const char *method);
/* The value of request header `name` in the last call (malloc'd), or NULL when it had none. */
char *fake_pr_last_header(fake_pr *f, const char *name);

/* Remove the socket file while the server runs (what a missing hostPath mount looks like to the agent). */
void fake_pr_unlink_socket(fake_pr *f);

#endif
