/* fake_apiserver.h -- a small in-memory Kubernetes API server on loopback, for the extender's end-to-end tests.
 *
 * It serves what tessera's client uses (list with limit/continue, watch, pods/binding, and create/get/update/
 * patch/delete of pods, ConfigMaps, Secrets, Leases and MutatingWebhookConfigurations) over plain HTTP on
 * 127.0.0.1, keeps every object under one global resourceVersion like etcd, and lets a test break it on purpose
 * (injected status codes, dropped or expired watches, compaction, the server going away and coming back).
 *
 * Served:
 *   GET  /api/v1/nodes, /api/v1/pods          list; ?limit=N&continue=TOKEN pages in key order (ns/name). A
 *                                             continue token older than the last compaction answers 410.
 *   GET  ...?watch=1&resourceVersion=RV       newline-delimited events after RV, streamed (chunked) until
 *                                             timeoutSeconds (default 60) passes; RV older than the last
 *                                             compaction gets 200 + an ERROR event with code 410, like the
 *                                             real apiserver. BOOKMARKs only when fake_api_bookmark() asks.
 *   GET  /api/v1/namespaces/NS/pods/NAME      one pod.
 *   GET, PUT, PATCH, DELETE /api/v1/nodes/NAME one node (the node agent's GET and merge PATCH of annotations), as
 *                                             for ConfigMaps below; a PATCH keeps the node's status (its
 *                                             subresource). Nodes are created with fake_api_put, not POST.
 *   POST /api/v1/namespaces/NS/pods           create: 201 + the object as stored (name from generateName + 5
 *                                             characters when it has none; uid, creationTimestamp and
 *                                             resourceVersion set; status is the server's: phase Pending);
 *                                             watchers get ADDED. 400 when metadata.namespace is set and differs
 *                                             from NS, 409 AlreadyExists when the name is taken, 422 Invalid
 *                                             without name or generateName.
 *   DELETE /api/v1/namespaces/NS/pods/NAME    200 + the object; watchers get DELETED; 404 NotFound. The
 *                                             ConfigMaps of NS whose metadata.ownerReferences name the pod's uid
 *                                             go with it (the garbage collector, at once).
 *   PATCH /api/v1/namespaces/NS/pods/NAME     Content-Type application/merge-patch+json (else 415): an RFC 7386
 *                                             merge patch (null deletes a key); 200 + the object with a new
 *                                             resourceVersion, watchers get MODIFIED; 404; 400 when the body is
 *                                             not a JSON object or renames the object; 409 Conflict when the
 *                                             patch's metadata.resourceVersion or metadata.uid is set and is not
 *                                             the stored one. name, namespace, uid and creationTimestamp stay.
 *                                             A pod's status is kept (it belongs to the status subresource) and
 *                                             a change of its spec answers 422 Invalid.
 *   POST /api/v1/namespaces/NS/{configmaps,secrets}                 create, as for pods (no status).
 *   GET, PUT, PATCH, DELETE /api/v1/namespaces/NS/{configmaps,secrets}/NAME
 *                                             GET 200 / 404. PUT replaces (200): 404 when absent, 400 when
 *                                             metadata.name differs from NAME, 409 Conflict when the body's
 *                                             metadata.resourceVersion (or uid) is set and not the stored one.
 *                                             PATCH as for pods. DELETE 200 + Status Success naming it; 404.
 *   POST, GET, PUT, PATCH, DELETE /apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations[/NAME]
 *                                             the same, cluster-scoped.
 *   GET /api/v1/namespaces/NAME               one Namespace (tessera's webhook reads an MPS share's Pod Security
 *                                             label), stored with fake_api_put(f, "namespaces", json).
 *   POST /api/v1/namespaces/NS/pods/NAME/binding
 *                                             201 + Status Success: sets spec.nodeName, merges
 *                                             metadata.annotations, emits MODIFIED. 404 if the pod is missing,
 *                                             409 if metadata.uid differs from the pod's ("Precondition failed:
 *                                             UID in precondition...") or the pod is already bound, 400 on a
 *                                             malformed body. Every binding request is recorded.
 *   POST /api/v1/namespaces/NS/events          201 + the Event as stored (name from generateName when it has
 *                                             none, uid, resourceVersion); 400 without involvedObject or when
 *                                             metadata.namespace differs from NS, 409 when the name is taken.
 *                                             Every created Event is recorded (fake_api_events).
 *   POST /apis/coordination.k8s.io/v1/namespaces/NS/leases, GET/PUT/PATCH/DELETE .../leases/NAME
 *                                             Leases, for leader election, as for ConfigMaps.
 * Errors are v1 Status objects, as the apiserver sends them (with details naming the object for NotFound,
 * AlreadyExists and Conflict). Nodes, pods, and resource.k8s.io/v1 resourceslices, resourceclaims (namespaced)
 * and deviceclasses are listed and watched (GET /apis/resource.k8s.io/v1/<plural>); the other kinds are reached
 * by name. An older cluster without resource.k8s.io/v1 is played with
 * fake_api_inject(f, "/apis/resource.k8s.io/", 404, <many>).
 *
 * Request keys, used by fault injection and request counting: "LIST <path>", "WATCH <path>", "GET <path>",
 * "POST <path>", "PUT <path>", "PATCH <path>", "DELETE <path>" (path without the query). A target matches a request when it is a prefix of its key or of its
 * path: "/api/v1/pods" matches list and watch of pods, "WATCH /api/v1/pods" only the watch,
 * "POST /api/v1/namespaces/" every binding and Event.
 *
 * All functions are thread-safe. Objects passed in and returned are JSON text; returned strings are malloc'd.
 */
#ifndef FAKE_APISERVER_H
#define FAKE_APISERVER_H

#include <stddef.h>

typedef struct fake_api fake_api;

/* Special "status" values for fake_api_inject besides real HTTP codes (which answer with that code and a
 * Status body whose message is "injected <code>"; 429 answers as the apiserver's priority-and-fairness
 * throttling does: Retry-After: 1 and a plain-text body). */
#define FAKE_API_GONE_EVENT 1410 /* a watch answers 200 + ERROR event {code:410} (a list answers 410) */
#define FAKE_API_GARBAGE    1001 /* 200 with a body that is not JSON (for a watch: one garbage line) */
#define FAKE_API_HANGUP     1002 /* close the connection without answering */

/* Listen on 127.0.0.1:port (0 = any free port). NULL with err on failure. */
fake_api *fake_api_start(int port, char *err, size_t errlen);
/* The same over HTTPS with this PEM certificate and key (for the name "localhost": fake_api_url then gives
 * "https://localhost:PORT"), to test the client's CA file and TLS failures. */
fake_api *fake_api_start_tls(int port, const char *cert_pem, const char *key_pem, char *err, size_t errlen);
int fake_api_port(fake_api *f);
/* "http://127.0.0.1:PORT" (or "https://localhost:PORT" with TLS) into buf. */
void fake_api_url(fake_api *f, char *buf, size_t len);
/* Stop the server and free everything (open watches are cut). NULL is fine. */
void fake_api_free(fake_api *f);

/* Server going away: stop listening and cut every connection (clients get "connection refused"); state is kept
 * and can still be changed through this API. fake_api_up listens again on the same port: 0, or -1 with err. */
void fake_api_down(fake_api *f);
int fake_api_up(fake_api *f, char *err, size_t errlen);

/* kind is "nodes", "pods", "leases", "configmaps", "secrets", "mutatingwebhookconfigurations", "resourceslices",
 * "resourceclaims" or "deviceclasses" (nodes, mutatingwebhookconfigurations, resourceslices and deviceclasses are
 * cluster-scoped: ns is ignored). Add or replace an object by namespace/name
 * (namespaced objects without a namespace go to "default"); the stored copy gets a new metadata.resourceVersion, a metadata.uid if it had none, kind and
 * apiVersion; watchers get ADDED or MODIFIED. Returns the new resourceVersion, or -1 if the JSON is not an
 * object with metadata.name. */
long long fake_api_put(fake_api *f, const char *kind, const char *json_obj);
/* Apply an RFC 7386 merge patch (a JSON object) to a stored object, all of it, status included (this is how the
 * test, or the fake kubelet, plays a controller of the object): new resourceVersion, MODIFIED to watchers; name,
 * namespace and uid stay. Atomic, unlike fake_api_get + fake_api_put. The new resourceVersion, or -1 when the
 * object is absent or the patch is not a JSON object. */
long long fake_api_patch(fake_api *f, const char *kind, const char *ns, const char *name, const char *merge_patch);
/* Remove an object; watchers get DELETED. A pod takes the ConfigMaps it owns along (see DELETE above).
 * 0, or -1 if absent. */
int fake_api_delete(fake_api *f, const char *kind, const char *ns, const char *name);
/* A copy of a stored object, or NULL. */
char *fake_api_get(fake_api *f, const char *kind, const char *ns, const char *name);
/* A JSON array with copies of every stored object of the kind, in key order. */
char *fake_api_list(fake_api *f, const char *kind);
/* The current global resourceVersion. */
long long fake_api_rv(fake_api *f);

/* The next `count` requests matching target are answered with `status` (see above) instead of normally;
 * status 0 answers normally (so "0 x1, then 410 x1" fails only the second page of a list). A request uses up
 * the first rule that matches it and has count left; at most 32 rules. */
void fake_api_inject(fake_api *f, const char *target, int status, int count);
/* The same with the Status a real API server would send: reason ("NotFound", "Forbidden") and message
 * ("namespaces \"tessera\" not found"); status must be 400..599. */
void fake_api_inject_msg(fake_api *f, const char *target, int status, const char *reason, const char *message,
                         int count);
/* The next `count` requests matching target are held for ms milliseconds (the client sees a stalled server),
 * then answered normally. Shares the rules of fake_api_inject. */
void fake_api_inject_stall(fake_api *f, const char *target, int ms, int count);
/* The next `count` requests matching target take effect at once (the object is stored, watchers get its event)
 * but their answers are held until fake_api_release_replies (or a minute): a client whose reply comes after the
 * watch already showed later changes, as on a loaded machine. Shares the rules of fake_api_inject. */
void fake_api_inject_late_reply(fake_api *f, const char *target, int count);
void fake_api_release_replies(fake_api *f);
void fake_api_clear_injections(fake_api *f);

/* Open watches: cut them mid-stream (the client sees a broken transfer), end them normally (as if
 * timeoutSeconds passed), or send them an ERROR event with code 410 and end them. */
void fake_api_drop_watches(fake_api *f);
void fake_api_end_watches(fake_api *f);
void fake_api_expire_watches(fake_api *f);
/* Forget history up to now: watches and continue tokens from an older resourceVersion get 410. */
void fake_api_compact(fake_api *f);
/* Send a BOOKMARK with the current resourceVersion to open watches of the kind. */
void fake_api_bookmark(fake_api *f, const char *kind);
/* Send a raw line (a newline is appended) to open watches of the kind: malformed or oversized events. */
void fake_api_watch_raw(fake_api *f, const char *kind, const char *line);
/* Open watch streams of the kind (a stream the client hung up on is noticed within ~50 ms). To know that a
 * new watch is open, e.g. before fake_api_watch_raw, wait on fake_api_requests(f, "WATCH /api/v1/pods"). */
int fake_api_watchers(fake_api *f, const char *kind);

/* Requests that matched target so far (same matching as fake_api_inject; "" counts all). */
int fake_api_requests(fake_api *f, const char *target);
/* Binding requests received (whatever their outcome), and a copy of the i-th body (NULL if out of range). */
int fake_api_bindings(fake_api *f);
char *fake_api_binding_body(fake_api *f, int i);
/* Forget the request log and the binding bodies recorded so far (counts start again from 0), so a long run
 * (the soak) does not grow the fake's memory with them. */
void fake_api_forget_records(fake_api *f);
/* The Events created so far, as a JSON array in creation order, and how many there are. Injected faults answer
 * before an Event is created, so a failed post is not recorded. */
char *fake_api_events(fake_api *f);
int fake_api_event_count(fake_api *f);
/* The Authorization header of the latest request ("" when it had none). */
char *fake_api_last_auth(fake_api *f);
/* Require "Authorization: Bearer <token>" on every request (401 otherwise); NULL or "" turns it off. */
void fake_api_require_token(fake_api *f, const char *token);

#endif
