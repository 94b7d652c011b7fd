/* leader.c -- the Lease-based leader election of leader.h: one thread that reads and writes the Lease through
 * kube/lease.h, and lock-protected answers for the verbs. Timings follow client-go's leaderelection
 * package (tryAcquireOrRenew, observedTime, ReleaseOnCancel); see leader.h for the rules.
 */
#include "extender/base/leader.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "extender/base/health.h"
#include "kube/lease.h"
#include "kube/log.h"

/* where deploy/rbac.yaml grants the Lease verbs */
#define LEADER_RBAC "tessera-leader-election Role"

struct ext_leader {
    ext_leader_config cfg;
    kube_client *k;
    char host[64];             /* gethostname(): kube-scheduler's identity starts with it, also in a pod whose host
                                  name is not its name (hostNetwork, spec.hostname) */
    char sched_path[256];      /* kube-scheduler's Lease, "" when none is followed */
    pthread_t thr;
    bool started;
    _Atomic int64_t last_call; /* monotonic ms of the latest scheduling call; INT64_MIN/2: none */
    pthread_mutex_t mu;        /* everything below */
    pthread_cond_t cv;         /* CLOCK_MONOTONIC; wakes the thread on stop and on the first call after idling */
    bool stop, stopping;
    bool leading;              /* we won and have not stepped down (validity also needs renewed_at) */
    int64_t renewed_at;        /* start of the latest successful acquire/renew */
    char holder[192];          /* holderIdentity last seen */
    char seen_rv[64];          /* resourceVersion last seen */
    char seen_spec[512];       /* the record's spec as last seen, and when it changed (client-go's observedTime; the
                                  spec rather than the resourceVersion, so a follower's wanted-by note, an
                                  annotation, never makes a dead holder look alive) */
    int64_t seen_at;
    char wanted_by[256];       /* the latest tessera.io/wanted-by note on the record, and when it appeared */
    int64_t wanted_at;
    int64_t wanted_written_at; /* when we last wrote one */
    unsigned wanted_seq;
    int acting;                /* background writes in flight (ext_leader_act_begin/end) */
    bool releasing;            /* release() waits for them; no new one starts */
    int seen_secs;             /* its leaseDurationSeconds */
    int transitions_rec;       /* its leaseTransitions */
    char acquire_time[40];     /* its acquireTime, kept across renewals */
    char written_rv[64];       /* resourceVersion of our latest write */
    bool need_relist;          /* acquired from someone else: bind only after a fresh pod list */
    uint64_t relist_ticket;
    char last_err[512];        /* the latest failed Lease call, "" after a success: said in may_bind's why */
    /* kube-scheduler's Lease as last read (leader thread writes, under mu) */
    int sched_state;           /* KS_* */
    char sched_rv[64], sched_holder[192];
    int64_t sched_seen_at;     /* when its resourceVersion last changed, on our clock */
    int sched_secs;            /* its leaseDurationSeconds */
    int64_t sched_warned_at;   /* the last warning that it cannot be read or is missing */
    int64_t sched_none_since;  /* since when it has had no valid holder (0: it has one) */
    int64_t other_since;       /* when another pod's kube-scheduler took it from ours (0: never seen) */
    ext_leader_stats st;
};

enum { KS_NOT_FOLLOWED = 0, KS_MINE, KS_OTHER, KS_NO_HOLDER, KS_UNKNOWN };

/* holder is "<host>_<uuid>", kube-scheduler's identity, for this host name. */
static bool host_is(const char *holder, const char *host) {
    size_t n = strlen(host);
    return n && !strncmp(holder, host, n) && holder[n] == '_';
}

static const char *sched_state_name(int s) {
    static const char *const n[] = {"", "mine", "other", "none", "unknown"};
    return s >= 0 && s < (int)(sizeof n / sizeof n[0]) ? n[s] : "?";
}


/* ---- small helpers ----------------------------------------------------------------------------------- */

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void cond_wait_ms(ext_leader *l, int ms) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
    pthread_cond_timedwait(&l->cv, &l->mu, &ts);
}

const char *ext_lease_error_name(ext_lease_error e) {
    static const char *n[] = {"conflict", "timeout", "unreachable", "server_error", "denied", "other"};
    return e >= 0 && e < EXT_LEASE_ERR_N ? n[e] : "?";
}

/* A Lease call failed (not 409, which is a race lost, not a fault): health.h and the bind error text. */
static void lease_failed(ext_leader *l, int code, const char *verb, const char *api_msg) {
    char msg[512];
    if (code == 200 || code == 201)
        snprintf(msg, sizeof msg, "cannot %s Lease %s/%s: the answer is not a Lease", verb, l->cfg.ns, l->cfg.name);
    else
        kube_api_msg(msg, sizeof msg, code, verb, "leases", "Lease", l->cfg.ns, l->cfg.name, LEADER_RBAC, api_msg);
    ext_health_fail(EXT_DEP_LEASE, code, code == 200 || code == 201 ? EXT_REASON_BAD_RESPONSE : ext_health_reason_of(code),
                    msg);
    pthread_mutex_lock(&l->mu);
    snprintf(l->last_err, sizeof l->last_err, "%s", msg);
    pthread_mutex_unlock(&l->mu);
}

/* A Lease call got an answer that shows the Lease works (2xx, 409, 404 on GET). */
static void lease_ok(ext_leader *l) {
    ext_health_ok(EXT_DEP_LEASE);
    pthread_mutex_lock(&l->mu);
    l->last_err[0] = 0;
    pthread_mutex_unlock(&l->mu);
}

static void count_error(ext_leader *l, int code) {
    ext_lease_error e = code == 409                 ? EXT_LEASE_ERR_CONFLICT
                      : code == KUBE_TIMEOUT    ? EXT_LEASE_ERR_TIMEOUT
                      : code == KUBE_UNREACHABLE || code == KUBE_NO_REQUEST ? EXT_LEASE_ERR_UNREACHABLE
                      : code >= 500                 ? EXT_LEASE_ERR_SERVER
                      : code == 401 || code == 403  ? EXT_LEASE_ERR_DENIED
                                                    : EXT_LEASE_ERR_OTHER;
    pthread_mutex_lock(&l->mu);
    l->st.errors[e]++;
    pthread_mutex_unlock(&l->mu);
}

/* ---- configuration ----------------------------------------------------------------------------------- */

static void random_suffix(char *buf, size_t len) {
    unsigned char r[8] = {0};
    FILE *f = fopen("/dev/urandom", "rb");
    size_t n = f ? fread(r, 1, sizeof r, f) : 0;
    if (f) fclose(f);
    if (n != sizeof r) { /* no urandom: time and pid still differ between replicas */
        uint64_t x = (uint64_t)mono_ms() * 6364136223846793005ull ^ (uint64_t)getpid() << 32 ^ (uint64_t)time(NULL);
        memcpy(r, &x, sizeof r);
    }
    snprintf(buf, len, "%02x%02x%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
}

void ext_leader_config_defaults(ext_leader_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    const char *pod = getenv("POD_NAME");
    kube_own_namespace(cfg->ns, sizeof cfg->ns, "tessera");
    snprintf(cfg->name, sizeof cfg->name, "tessera-extender");
    char host[128] = "", sfx[20];
    if (pod && *pod) snprintf(host, sizeof host, "%s", pod);
    else if (gethostname(host, sizeof host - 1) != 0 || !host[0]) snprintf(host, sizeof host, "tessera-extender");
    random_suffix(sfx, sizeof sfx);
    /* like kube-scheduler's "<hostname>_<uuid>": the pod is readable, and a restarted container is a new holder */
    snprintf(cfg->identity, sizeof cfg->identity, "%.150s_%s", host, sfx);
    cfg->lease_ms = 15000;
    cfg->renew_ms = 10000;
    cfg->retry_ms = 2000;
    snprintf(cfg->sched_name, sizeof cfg->sched_name, "tessera-scheduler");
    /* kube-scheduler's identity is os.Hostname() + "_" + a UUID; a pod's host name is its name cut to 63
     * characters (the kubelet's rule). POD_NAME rather than gethostname(): the same in a pod, and it lets two
     * replicas run on one machine (tests) as two pods. */
    if (pod && *pod) snprintf(cfg->pod_host, sizeof cfg->pod_host, "%.63s", pod);
    else if (gethostname(cfg->pod_host, sizeof cfg->pod_host - 1) != 0) cfg->pod_host[0] = 0;
}

int ext_leader_parse_scheduler_lease(ext_leader_config *cfg, const char *s, char *err, size_t errlen) {
    const char *slash = strchr(s, '/');
    char ns[64] = "", name[128] = "";
    if (slash) {
        if ((size_t)(slash - s) >= sizeof ns || strlen(slash + 1) >= sizeof name || !slash[1] || slash == s) {
            snprintf(err, errlen, "--scheduler-lease: NAMESPACE/NAME, NAME or \"\" (got \"%s\")", s);
            return -1;
        }
        memcpy(ns, s, (size_t)(slash - s));
        snprintf(name, sizeof name, "%s", slash + 1);
    } else if (strlen(s) < sizeof name) {
        snprintf(name, sizeof name, "%s", s);
    } else {
        snprintf(err, errlen, "--scheduler-lease: name too long");
        return -1;
    }
    snprintf(cfg->sched_ns, sizeof cfg->sched_ns, "%s", ns);
    snprintf(cfg->sched_name, sizeof cfg->sched_name, "%s", name);
    return 0;
}

static bool name_ok(const char *s) {
    if (!*s || strlen(s) > 63) return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '.')) return false;
    return true;
}

int ext_leader_config_check(const ext_leader_config *c, char *err, size_t errlen) {
    if (!name_ok(c->ns) || !name_ok(c->name) || (c->sched_name[0] && (!name_ok(c->sched_name) ||
                                                                      (c->sched_ns[0] && !name_ok(c->sched_ns))))) {
        snprintf(err, errlen, "leader election: namespace \"%s\", Lease name \"%s\" and kube-scheduler's Lease "
                 "\"%s/%s\" must be DNS names (lower-case letters, digits, '-', '.')", c->ns, c->name,
                 c->sched_ns[0] ? c->sched_ns : c->ns, c->sched_name);
        return -1;
    }
    if (!c->identity[0]) { snprintf(err, errlen, "leader election: empty identity"); return -1; }
    if (c->lease_ms < 1000 || c->retry_ms <= 0 || c->renew_ms >= c->lease_ms || c->renew_ms * 10 <= c->retry_ms * 12) {
        snprintf(err, errlen, "leader election: need lease duration (%d ms, at least 1s) > renew deadline (%d ms) "
                 "> 1.2 x retry period (%d ms) > 0", c->lease_ms, c->renew_ms, c->retry_ms);
        return -1;
    }
    if (c->bind_budget_ms < 0 || c->bind_budget_ms >= c->lease_ms) {
        snprintf(err, errlen, "leader election: a bind may take %d ms, which must be shorter than the lease duration "
                 "(%d ms), or a successor could bind while it is in flight", c->bind_budget_ms, c->lease_ms);
        return -1;
    }
    return 0;
}

/* ---- the Lease --------------------------------------------------------------------------------------- */

/* The annotation a replica that receives scheduling calls but does not hold the Lease writes on it, so that a
 * holder that campaigns only because kube-scheduler's Lease is missing or unreadable (rule (b)) gives way. */
#define LEASE_WANTED_ANN "tessera.io/wanted-by"

/* Our Lease as we write it: holder, duration, times, transitions; rv "" for a create; note a wanted-by note. */
static kube_lease lease_rec_of(const char *rv, const char *holder, int secs, const char *acquire, const char *renew,
                               int transitions, const char *note) {
    kube_lease r = {.secs = secs, .transitions = transitions};
    snprintf(r.rv, sizeof r.rv, "%s", rv);
    snprintf(r.holder, sizeof r.holder, "%s", holder);
    snprintf(r.acquire, sizeof r.acquire, "%s", acquire);
    snprintf(r.renew, sizeof r.renew, "%s", renew);
    snprintf(r.note, sizeof r.note, "%s", note ? note : "");
    return r;
}

/* Write rec as our Lease (kube_lease_write), the answer into *out. */
static int lease_write(ext_leader *l, const kube_lease *rec, kube_lease *out, char *err, size_t errlen);

static int req_timeout(const ext_leader *l) { return l->cfg.renew_ms / 2 > 100 ? l->cfg.renew_ms / 2 : 100; }

static int lease_write(ext_leader *l, const kube_lease *rec, kube_lease *out, char *err, size_t errlen) {
    return kube_lease_write(l->k, l->cfg.ns, l->cfg.name, rec, LEASE_WANTED_ANN, req_timeout(l), out, err, errlen);
}

/* Remember what the API holds now (lock held); a changed record restarts the expiry clock. */
static void observe(ext_leader *l, const kube_lease *r, int64_t now) {
    char spec[512];
    snprintf(spec, sizeof spec, "%s|%s|%s|%d|%d", r->holder, r->acquire, r->renew, r->secs, r->transitions);
    if (strcmp(spec, l->seen_spec) != 0) {
        snprintf(l->seen_spec, sizeof l->seen_spec, "%s", spec);
        l->seen_at = now;
    }
    snprintf(l->seen_rv, sizeof l->seen_rv, "%s", r->rv);
    if (r->note[0] && strcmp(r->note, l->wanted_by) != 0) {
        snprintf(l->wanted_by, sizeof l->wanted_by, "%s", r->note);
        size_t n = strlen(l->cfg.identity);   /* our own note is not a request */
        l->wanted_at = strncmp(r->note, l->cfg.identity, n) == 0 && r->note[n] == ' ' ? 0 : now;
    }
    snprintf(l->holder, sizeof l->holder, "%s", r->holder);
    l->seen_secs = r->secs;
    l->transitions_rec = r->transitions;
    snprintf(l->acquire_time, sizeof l->acquire_time, "%s", r->acquire);
}

/* Lock held. */
static void step_down(ext_leader *l, const char *why) {
    if (!l->leading) return;
    l->leading = false;
    kube_log(strcmp(why, "released") ? KUBE_LOG_WARN : KUBE_LOG_INFO,
             "event=leader-stepped-down lease=%s/%s identity=%s why=\"%s\"", l->cfg.ns, l->cfg.name,
             l->cfg.identity, why);
}

/* A write of ours succeeded (lock held): r is the Lease as written, t0 when it was sent, prior_rv the record it
 * replaced. */
static void won(ext_leader *l, const kube_lease *r, const char *prior_rv, int64_t t0) {
    if (!r->rv[0]) return; /* the answer is not a Lease: treated as not written; the next round re-reads */
    observe(l, r, mono_ms());
    bool from_other = !l->written_rv[0] || strcmp(prior_rv, l->written_rv) != 0;
    snprintf(l->written_rv, sizeof l->written_rv, "%s", r->rv);
    l->renewed_at = t0;
    if (l->leading) return;
    l->leading = true;
    l->st.transitions++;
    if (from_other) {
        /* the previous holder's bindings must be in our cache before we bind: relist pods */
        l->need_relist = true;
        l->relist_ticket = kube_relist(l->k, KUBE_POD);
    }
    kube_log(KUBE_LOG_INFO, "event=leader-acquired lease=%s/%s identity=%s relist=%s", l->cfg.ns, l->cfg.name,
             l->cfg.identity, from_other ? "yes" : "no");
}

/* One round of client-go's tryAcquireOrRenew. */
static void try_acquire_or_renew(ext_leader *l) {
    int64_t t0 = mono_ms();
    char now[40], err[256];
    kube_lease_now(now, sizeof now);
    pthread_mutex_lock(&l->mu);
    if (l->leading && t0 >= l->renewed_at + l->cfg.renew_ms) step_down(l, "no renewal within the renew deadline");
    bool leading = l->leading;
    char rv[64], acquire[40];
    snprintf(rv, sizeof rv, "%s", l->written_rv);
    snprintf(acquire, sizeof acquire, "%s", l->acquire_time);
    int trans = l->transitions_rec, secs = (l->cfg.lease_ms + 999) / 1000;
    pthread_mutex_unlock(&l->mu);

    kube_lease got;
    if (leading) { /* fast path: renew the record we wrote; a 409 means it changed under us */
        kube_lease rec = lease_rec_of(rv, l->cfg.identity, secs, acquire, now, trans, NULL);
        int code = lease_write(l, &rec, &got, err, sizeof err);
        if (code == 200) {
            lease_ok(l);
            pthread_mutex_lock(&l->mu);
            won(l, &got, rv, t0);
            pthread_mutex_unlock(&l->mu);
            return;
        }
        count_error(l, code);
        if (code != 409) {
            lease_failed(l, code, "update", err);
            return;
        }
    }
    kube_lease r;
    int code = kube_lease_get(l->k, l->cfg.ns, l->cfg.name, LEASE_WANTED_ANN, req_timeout(l), &r, err, sizeof err);
    if (code == 404) {
        kube_lease rec = lease_rec_of("", l->cfg.identity, secs, now, now, 0, NULL);
        code = lease_write(l, &rec, &got, err, sizeof err);
        pthread_mutex_lock(&l->mu);
        if (code == 201 || code == 200) won(l, &got, "", t0);
        pthread_mutex_unlock(&l->mu);
        if (code != 201 && code != 200) count_error(l, code); /* 409: another candidate created it first */
        /* the create is where a missing namespace or a missing "create leases" rule shows */
        if (code == 201 || code == 200 || code == 409) lease_ok(l);
        else lease_failed(l, code, "create", err);
        return;
    }
    if (code != 200 || !r.rv[0]) {
        count_error(l, code == 200 ? 0 : code);
        lease_failed(l, code, "get", err);
        return;
    }
    lease_ok(l);   /* the Lease reads fine; whoever holds it */
    int64_t now_ms = mono_ms();
    pthread_mutex_lock(&l->mu);
    observe(l, &r, now_ms);
    bool mine = strcmp(r.holder, l->cfg.identity) == 0;
    bool valid = r.holder[0] && now_ms < l->seen_at + (int64_t)r.secs * 1000;
    if (!mine && r.holder[0]) step_down(l, "the Lease names another holder");
    /* Someone else leads while our kube-scheduler sends us the calls: leave a note on the record, so a holder that
     * campaigns only because kube-scheduler's Lease is missing or unreadable gives way (rule (b) of leader.h).
     * Once per retry period; it leaves the spec alone, so no one's expiry clock restarts. */
    bool note = !mine && valid && now_ms - atomic_load(&l->last_call) < l->cfg.lease_ms &&
                now_ms - l->wanted_written_at >= l->cfg.retry_ms;
    char wanted[256] = "";
    if (note) {
        l->wanted_written_at = now_ms;
        snprintf(wanted, sizeof wanted, "%.190s %u", l->cfg.identity, ++l->wanted_seq);
    }
    pthread_mutex_unlock(&l->mu);
    if (note) {
        kube_lease rec = lease_rec_of(r.rv, r.holder, r.secs, r.acquire, r.renew, r.transitions, wanted);
        code = lease_write(l, &rec, NULL, err, sizeof err);
        if (code != 200) count_error(l, code);   /* 409: the holder renewed first; the next round tries again */
    }
    if (!mine && valid) return; /* someone else leads */
    kube_lease rec = lease_rec_of(r.rv, l->cfg.identity, secs, mine && r.acquire[0] ? r.acquire : now, now,
                                  mine ? r.transitions : r.transitions + 1, NULL);
    code = lease_write(l, &rec, &got, err, sizeof err);
    pthread_mutex_lock(&l->mu);
    if (code == 200) won(l, &got, r.rv, t0);
    else if (code == 409) step_down(l, "conflict: another candidate wrote the Lease first");
    pthread_mutex_unlock(&l->mu);
    if (code != 200) count_error(l, code);
    if (code == 200 || code == 409) lease_ok(l);
    else lease_failed(l, code, "update", err);
}

/* Give the Lease up if we hold it: holder "", 1 s, as client-go's release. */
static void release(ext_leader *l) {
    pthread_mutex_lock(&l->mu);
    bool held = l->leading || strcmp(l->holder, l->cfg.identity) == 0;
    /* no new background write may start, and the ones in flight end before a successor can take over (each is
     * bounded by its request timeout; renewDeadline bounds the wait) */
    l->releasing = true;
    step_down(l, "released");
    for (int64_t until = mono_ms() + l->cfg.renew_ms; l->acting > 0 && mono_ms() < until;) cond_wait_ms(l, 50);
    l->releasing = false;
    char rv[64];
    snprintf(rv, sizeof rv, "%s", l->written_rv);
    int trans = l->transitions_rec;
    pthread_mutex_unlock(&l->mu);
    if (!held || !rv[0]) return;
    char now[40], err[256];
    kube_lease_now(now, sizeof now);
    kube_lease rec = lease_rec_of(rv, "", 1, now, now, trans, NULL), r;
    int code = lease_write(l, &rec, &r, err, sizeof err);
    pthread_mutex_lock(&l->mu);
    if (code == 200) {
        if (r.rv[0]) {
            observe(l, &r, mono_ms());
            snprintf(l->written_rv, sizeof l->written_rv, "%s", r.rv);
        }
        kube_log(KUBE_LOG_INFO, "event=leader-released lease=%s/%s identity=%s", l->cfg.ns, l->cfg.name, l->cfg.identity);
    }
    if (code == 409) l->holder[0] = 0; /* someone else wrote it since: it is not ours to release any more */
    pthread_mutex_unlock(&l->mu);
    if (code != 200) {
        count_error(l, code);
        kube_log(KUBE_LOG_WARN, "event=lease-release-failed lease=%s/%s code=%d err=\"%s\"", l->cfg.ns, l->cfg.name,
                 code, err);
    }
}

/* ---- following kube-scheduler's Lease (leader.h, "Who campaigns") ------------------------------------------ */

/* Read kube-scheduler's Lease once and judge it on our clock, as we judge our own. */
static void poll_scheduler(ext_leader *l) {
    if (!l->sched_path[0]) return;
    char err[256];
    /* a short timeout: a slow answer here must not eat into the time the holder has to renew its own Lease */
    int timeout = l->cfg.retry_ms / 2 > 100 ? l->cfg.retry_ms / 2 : 100;
    kube_lease r;
    int code = kube_lease_get(l->k, l->cfg.sched_ns[0] ? l->cfg.sched_ns : l->cfg.ns, l->cfg.sched_name, NULL,
                              timeout, &r, err, sizeof err);
    bool parsed = code == 200 && r.rv[0];
    int64_t now = mono_ms();
    pthread_mutex_lock(&l->mu);
    int before = l->sched_state;
    if (code == 404) {
        l->sched_state = KS_NO_HOLDER;
        l->sched_holder[0] = l->sched_rv[0] = 0;
    } else if (!parsed) {
        l->sched_state = KS_UNKNOWN;
        if (now - l->sched_warned_at >= 60000 || before != KS_UNKNOWN) {
            l->sched_warned_at = now;
            kube_log(KUBE_LOG_WARN, "event=scheduler-lease-unreadable lease=%s code=%d err=\"%s\" effect=\"campaigning for "
                     "%s/%s regardless, so background work goes on; the replica whose kube-scheduler is active takes "
                     "the Lease only when its binds are refused: give tessera get on that Lease (deploy/rbac.yaml)\"",
                     l->sched_path, code, code == 200 ? "not a Lease" : err, l->cfg.ns, l->cfg.name);
        }
    } else {
        if (strcmp(r.rv, l->sched_rv) != 0) {
            snprintf(l->sched_rv, sizeof l->sched_rv, "%s", r.rv);
            l->sched_seen_at = now;
        }
        snprintf(l->sched_holder, sizeof l->sched_holder, "%s", r.holder);
        l->sched_secs = r.secs;
        bool mine = host_is(r.holder, l->cfg.pod_host) || host_is(r.holder, l->host);
        bool valid = r.holder[0] && now < l->sched_seen_at + (int64_t)r.secs * 1000;
        l->sched_state = !valid ? KS_NO_HOLDER : mine ? KS_MINE : KS_OTHER;
    }
    if (l->sched_state != before)
        kube_log(KUBE_LOG_INFO, "event=scheduler-lease lease=%s state=%s holder=%s", l->sched_path,
                 sched_state_name(l->sched_state), l->sched_holder[0] ? l->sched_holder : "-");
    /* our kube-scheduler lost its Lease to another: calls it made before no longer count (rule (c)); a replica
     * that never saw its own kube-scheduler lead counts every call */
    if (l->sched_state == KS_OTHER && before == KS_MINE) l->other_since = now;
    if (l->sched_state != KS_NO_HOLDER) l->sched_none_since = 0;
    else if (!l->sched_none_since) l->sched_none_since = now;
    /* kube-scheduler renews its Lease every few seconds: none for long means --scheduler-lease names another one */
    if (l->sched_none_since && now - l->sched_none_since >= 4LL * l->cfg.lease_ms && now - l->sched_warned_at >= 600000) {
        l->sched_warned_at = now;
        kube_log(KUBE_LOG_WARN, "event=scheduler-lease-missing lease=%s for_s=%lld effect=\"no kube-scheduler is seen "
                 "leading; every replica campaigns, and the one whose kube-scheduler is active takes the Lease only when "
                 "its binds are refused\" hint=\"--scheduler-lease must name kube-scheduler's leaderElection "
                 "resourceNamespace/resourceName; \\\"\\\" if it runs without leader election\"", l->sched_path,
                 (long long)((now - l->sched_none_since) / 1000));
    }
    pthread_mutex_unlock(&l->mu);
}

/* Not campaigning: still read our Lease, so a holder that dies is replaced leaseDuration after its last
 * renewal rather than leaseDuration after we started to look. */
static void observe_only(ext_leader *l) {
    char err[256];
    kube_lease r;
    int code = kube_lease_get(l->k, l->cfg.ns, l->cfg.name, LEASE_WANTED_ANN, req_timeout(l), &r, err, sizeof err);
    if (code == 200 && r.rv[0]) {
        pthread_mutex_lock(&l->mu);
        observe(l, &r, mono_ms());
        pthread_mutex_unlock(&l->mu);
    }
}

/* ---- the thread ---------------------------------------------------------------------------------------- */

/* Lock held. The rules (a)-(d) of leader.h. Once another pod's kube-scheduler took its Lease from ours, only
 * calls made after that count (ours lost it: its last calls must not keep the new one's extender waiting); rule
 * (b) gives way to a replica that receives calls and asked for the Lease (LEASE_WANTED_ANN). */
static bool campaigning_locked(ext_leader *l, int64_t now) {
    int64_t last = atomic_load(&l->last_call);
    bool calls = now - last < l->cfg.lease_ms && (l->sched_state != KS_OTHER || last > l->other_since);
    if (!l->sched_path[0] || l->sched_state == KS_MINE || calls) return true;
    if (l->sched_state == KS_OTHER) return false;
    bool wanted = l->wanted_at && now - l->wanted_at < l->cfg.lease_ms;   /* (b), unless another replica asks */
    return !wanted;
}

static bool campaigning(ext_leader *l, int64_t now) {
    pthread_mutex_lock(&l->mu);
    bool c = campaigning_locked(l, now);
    pthread_mutex_unlock(&l->mu);
    return c;
}

/* Lock held. How long to sleep. The leader renews every retry period (base). A follower reads the Leases four
 * times as often, and wakes just after a record held by someone else (ours, or kube-scheduler's while it decides
 * whether we campaign) would expire on our clock: an expiry is judged from when we SAW the holder's last
 * renewal, so reading every retry period would replace a dead holder up to a retry period late (17 s instead of
 * 15 s as deployed). A follower's cost: two GETs per 500 ms. */
static int next_wait_ms(ext_leader *l, int base) {
    if (l->leading) return base;
    base = base / 4 > 50 ? base / 4 : 50;
    int64_t now = mono_ms(), expiry = INT64_MAX;
    if (l->holder[0] && strcmp(l->holder, l->cfg.identity) != 0 && l->seen_rv[0])
        expiry = l->seen_at + (int64_t)l->seen_secs * 1000;
    if (l->sched_state == KS_OTHER && l->sched_seen_at + (int64_t)l->sched_secs * 1000 < expiry)
        expiry = l->sched_seen_at + (int64_t)l->sched_secs * 1000;
    int64_t until = expiry - now + 10;
    return until > 0 && until < base ? (int)until : base;
}

static void *leader_thread(void *arg) {
    ext_leader *l = arg;
    unsigned seed = (unsigned)mono_ms() ^ (unsigned)(uintptr_t)l;
    for (;;) {
        pthread_mutex_lock(&l->mu);
        bool stop = l->stop;
        pthread_mutex_unlock(&l->mu);
        if (stop) break;
        pthread_mutex_lock(&l->mu);
        bool was_leading = l->leading;
        pthread_mutex_unlock(&l->mu);
        /* The holder renews first, and the retry period counts from the end of its renewal, as in client-go:
         * reading kube-scheduler's Lease must not delay the next renewal. */
        if (was_leading) try_acquire_or_renew(l);
        int64_t renewed_end = mono_ms();
        poll_scheduler(l);
        if (!campaigning(l, mono_ms())) {
            release(l); /* another replica's kube-scheduler is active: let it take over at once */
            observe_only(l);
            pthread_mutex_lock(&l->mu);
            bool had_err = l->last_err[0] != 0;
            l->last_err[0] = 0;
            pthread_mutex_unlock(&l->mu);
            if (had_err) ext_health_idle(EXT_DEP_LEASE);   /* no attempt would ever clear it: do not stay unready */
            pthread_mutex_lock(&l->mu);
            if (!l->stop && !campaigning_locked(l, mono_ms())) cond_wait_ms(l, next_wait_ms(l, l->cfg.retry_ms));
            pthread_mutex_unlock(&l->mu);
            continue;
        }
        if (!was_leading) try_acquire_or_renew(l);
        pthread_mutex_lock(&l->mu);
        /* followers retry with client-go's jitter (1.2), so candidates do not hit the API in step */
        int wait = l->cfg.retry_ms;
        if (!l->leading) wait += (int)(rand_r(&seed) % (unsigned)(l->cfg.retry_ms / 5 + 1)) * 4;
        else if (was_leading) wait -= (int)(mono_ms() - renewed_end < wait ? mono_ms() - renewed_end : wait);
        if (!l->stop) cond_wait_ms(l, next_wait_ms(l, wait));
        pthread_mutex_unlock(&l->mu);
    }
    release(l);
    return NULL;
}

/* ---- public API -------------------------------------------------------------------------------------- */

ext_leader *ext_leader_new(const ext_leader_config *cfg, kube_client *k, char *err, size_t errlen) {
    if (!cfg || !k) { snprintf(err, errlen, "leader election: no configuration or API client"); return NULL; }
    if (ext_leader_config_check(cfg, err, errlen) != 0) return NULL;
    ext_leader *l = calloc(1, sizeof *l);
    if (!l) { snprintf(err, errlen, "out of memory"); return NULL; }
    l->cfg = *cfg;
    if (gethostname(l->host, sizeof l->host - 1) != 0) l->host[0] = 0;
    l->k = k;
    if (cfg->sched_name[0])
        kube_lease_path(l->sched_path, sizeof l->sched_path, cfg->sched_ns[0] ? cfg->sched_ns : cfg->ns, cfg->sched_name);
    l->sched_state = cfg->sched_name[0] ? KS_UNKNOWN : KS_NOT_FOLLOWED;
    atomic_init(&l->last_call, INT64_MIN / 2);
    pthread_mutex_init(&l->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&l->cv, &ca);
    pthread_condattr_destroy(&ca);
    return l;
}

int ext_leader_start(ext_leader *l, char *err, size_t errlen) {
    if (l->started) { snprintf(err, errlen, "leader election already started"); return -1; }
    int rc = pthread_create(&l->thr, NULL, leader_thread, l);
    if (rc != 0) { snprintf(err, errlen, "cannot start the leader election thread: %s", strerror(rc)); return -1; }
    l->started = true;
    kube_log(KUBE_LOG_INFO, "event=leader-election lease=%s/%s identity=%s lease_ms=%d renew_ms=%d retry_ms=%d "
             "follows=%s scheduler_identity=%s_*", l->cfg.ns, l->cfg.name, l->cfg.identity, l->cfg.lease_ms,
             l->cfg.renew_ms, l->cfg.retry_ms, l->sched_path[0] ? l->sched_path : "-(campaigns always)", l->cfg.pod_host);
    return 0;
}

void ext_leader_stop(ext_leader *l) {
    if (!l) return;
    pthread_mutex_lock(&l->mu);
    l->stopping = true;
    pthread_mutex_unlock(&l->mu);
}

void ext_leader_free(ext_leader *l) {
    if (!l) return;
    pthread_mutex_lock(&l->mu);
    l->stop = l->stopping = true;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    if (l->started) pthread_join(l->thr, NULL); /* the thread releases the Lease on its way out */
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

void ext_leader_note_call(ext_leader *l) {
    if (!l) return;
    int64_t now = mono_ms(), prev = atomic_exchange(&l->last_call, now);
    if (now - prev >= l->cfg.lease_ms) { /* calls start: campaign now if we did not (rule (c)) */
        pthread_mutex_lock(&l->mu);
        pthread_cond_broadcast(&l->cv);
        pthread_mutex_unlock(&l->mu);
    }
}

/* Lock held. */
static bool valid_locked(ext_leader *l) { return l->leading && mono_ms() < l->renewed_at + l->cfg.renew_ms; }

bool ext_leader_is_leader(ext_leader *l) {
    if (!l) return true;
    pthread_mutex_lock(&l->mu);
    bool v = valid_locked(l);
    pthread_mutex_unlock(&l->mu);
    return v;
}

bool ext_leader_may_bind(ext_leader *l, int wait_ms, char *why, size_t whylen) {
    if (whylen) why[0] = 0;
    if (!l) return true;
    int64_t deadline = mono_ms() + (wait_ms < 0 ? l->cfg.retry_ms : wait_ms);
    for (;;) {
        pthread_mutex_lock(&l->mu);
        bool ok = false;
        if (l->stopping) {
            snprintf(why, whylen, "tessera-extender %s is shutting down; kube-scheduler will retry", l->cfg.identity);
        } else if (!valid_locked(l) && l->last_err[0]) {
            /* the Lease itself fails: say why, or the user only sees "not the leader" for ever */
            snprintf(why, whylen, "not the tessera leader: %s; kube-scheduler will retry", l->last_err);
        } else if (!valid_locked(l)) {
            snprintf(why, whylen, "not the tessera leader (leader is %s); kube-scheduler will retry",
                     l->holder[0] && strcmp(l->holder, l->cfg.identity) != 0 ? l->holder : "unknown");
        } else if (l->cfg.bind_budget_ms && mono_ms() + l->cfg.bind_budget_ms >= l->renewed_at + l->cfg.lease_ms) {
            snprintf(why, whylen, "the tessera leader last renewed its Lease too long ago to finish a bind before "
                     "the Lease could pass on (API server slow?); kube-scheduler will retry");
        } else if (l->need_relist && !kube_relisted(l->k, KUBE_POD, l->relist_ticket)) {
            snprintf(why, whylen, "tessera became the leader and is re-reading pods from the API server before it "
                     "binds; kube-scheduler will retry");
        } else {
            l->need_relist = false;
            ok = true;
        }
        pthread_mutex_unlock(&l->mu);
        if (ok) { if (whylen) why[0] = 0; return true; }
        if (mono_ms() >= deadline) return false;
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* Lock held. */
static bool may_act_locked(ext_leader *l) {
    return !l->stopping && !l->releasing && valid_locked(l) &&
           (!l->need_relist || kube_relisted(l->k, KUBE_POD, l->relist_ticket));
}

bool ext_leader_may_act(ext_leader *l) {
    if (!l) return true;
    pthread_mutex_lock(&l->mu);
    bool ok = may_act_locked(l);
    pthread_mutex_unlock(&l->mu);
    return ok;
}

bool ext_leader_act_begin(ext_leader *l) {
    if (!l) return true;
    pthread_mutex_lock(&l->mu);
    bool ok = may_act_locked(l);
    if (ok) l->acting++;
    pthread_mutex_unlock(&l->mu);
    return ok;
}

void ext_leader_act_end(ext_leader *l) {
    if (!l) return;
    pthread_mutex_lock(&l->mu);
    if (l->acting > 0) l->acting--;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

const char *ext_leader_scheduler_state(ext_leader *l) {
    if (!l) return "";
    pthread_mutex_lock(&l->mu);
    const char *s = sched_state_name(l->sched_state);
    pthread_mutex_unlock(&l->mu);
    return s;
}

void ext_leader_holder(ext_leader *l, char *buf, size_t len) {
    if (!l) { snprintf(buf, len, "%s", ""); return; }
    pthread_mutex_lock(&l->mu);
    snprintf(buf, len, "%s", l->holder);
    pthread_mutex_unlock(&l->mu);
}

const char *ext_leader_identity(const ext_leader *l) { return l ? l->cfg.identity : ""; }

void ext_leader_get_stats(ext_leader *l, ext_leader_stats *out) {
    memset(out, 0, sizeof *out);
    if (!l) { out->leader = true; return; }
    pthread_mutex_lock(&l->mu);
    *out = l->st;
    out->leader = valid_locked(l);
    pthread_mutex_unlock(&l->mu);
}
