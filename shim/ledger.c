/* ledger.c -- see ledger.h. Byte 0 of the file is the ledger lock; byte 1 + i is slot i's liveness lock (locks
 * are advisory and independent of the bytes' contents, so they may overlap the header). */
#include "shim/ledger.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define LEDGER_MAGIC "TSLEDGR1"

struct ledger_slot {
    uint64_t in_use;                /* claimed by a process that may since have died */
    uint64_t used[LEDGER_DEVS];     /* bytes, written only by the owner */
};

struct ledger_file {
    char magic[8];
    uint32_t slots, devs, uuid_len;
    uint32_t high;                  /* slots ever claimed: scans stop there (written under the lock) */
    char uuid[LEDGER_DEVS][LEDGER_UUID_LEN];
    struct ledger_slot slot[LEDGER_SLOTS];
};

/* fcntl on one byte; EINTR retried. */
static int lock_byte(int fd, int cmd, short type, off_t at, struct flock *out) {
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    fl.l_start = at;
    fl.l_len = 1;
    int r;
    while ((r = fcntl(fd, cmd, &fl)) < 0 && errno == EINTR) {}
    if (out) *out = fl;
    return r;
}

static int lock_ledger(const ledger *l) { return lock_byte(l->fd, F_OFD_SETLKW, F_WRLCK, 0, NULL); }
static void unlock_ledger(const ledger *l) { lock_byte(l->fd, F_OFD_SETLK, F_UNLCK, 0, NULL); }

static uint64_t load(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static void store(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

static void fail(char *why, size_t len, const char *what, const char *path) {
    if (why) snprintf(why, len, "%s %s: %s", what, path, strerror(errno));
}

int ledger_open(ledger *l, const char *path, char *why, size_t whylen) {
    l->fd = -1;
    l->map = NULL;
    l->slot = -1;
    /* O_CLOEXEC: a program this process execs must not inherit the description, or it would keep this process's
     * slot locked (alive) after this process died. */
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) {
        fail(why, whylen, "cannot open", path);
        return -1;
    }
    l->fd = fd;
    /* Containers of other uids join the file: 0666 whatever the umask. Only the owner may chmod; for the others
     * this fails harmlessly. */
    (void)fchmod(fd, 0666);
    if (lock_ledger(l) < 0) {
        fail(why, whylen, "cannot lock (OFD locks)", path);
        ledger_close(l);
        return -1;
    }
    /* Under the lock: the first process sizes and stamps the file, the others check the stamp. */
    /* The size by lseek, not fstat: fstat is a GLIBC_2.33 symbol, newer than the images the shim must load in. */
    int rc = -1;
    off_t size = lseek(fd, 0, SEEK_END);
    if (size < 0) {
        fail(why, whylen, "cannot size", path);
    } else if (size == 0) {
        /* the header alone: the whole file is 140 KiB, too much for the stack of a thread in someone's program */
        struct { char magic[8]; uint32_t slots, devs, uuid_len, high; } head = {
            LEDGER_MAGIC, LEDGER_SLOTS, LEDGER_DEVS, LEDGER_UUID_LEN, 0};
        if (ftruncate(fd, (off_t)sizeof(struct ledger_file)) < 0 || pwrite(fd, &head, sizeof head, 0) < 0)
            fail(why, whylen, "cannot initialise", path);
        else
            rc = 0;
    } else if (size != (off_t)sizeof(struct ledger_file)) {
        if (why) snprintf(why, whylen, "%s is %lld bytes, not a ledger of this version (%zu bytes)", path,
                          (long long)size, sizeof(struct ledger_file));
    } else {
        rc = 0;
    }
    if (rc == 0) {
        void *m = mmap(NULL, sizeof(struct ledger_file), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) {
            fail(why, whylen, "cannot map", path);
            rc = -1;
        } else {
            l->map = m;
            if (memcmp(l->map->magic, LEDGER_MAGIC, 8) != 0 || l->map->slots != LEDGER_SLOTS ||
                l->map->devs != LEDGER_DEVS || l->map->uuid_len != LEDGER_UUID_LEN) {
                if (why) snprintf(why, whylen, "%s is not a ledger of this version", path);
                rc = -1;
            }
        }
    }
    unlock_ledger(l);
    if (rc < 0) {
        ledger_close(l);
        return -1;
    }
    /* Claim the first slot nobody holds. A slot whose owner died is free to take; its counters are zeroed below,
     * which is how a dead process's memory is given back when nobody reclaimed it before. */
    for (int i = 0; i < LEDGER_SLOTS && l->slot < 0; i++) {
        if (lock_byte(fd, F_OFD_SETLK, F_WRLCK, 1 + i, NULL) == 0) l->slot = i;
        else if (errno != EAGAIN && errno != EACCES) break;
    }
    if (l->slot < 0) {
        if (why) snprintf(why, whylen, "no free slot in %s (%d processes hold one)", path, LEDGER_SLOTS);
        ledger_close(l);
        return -1;
    }
    if (lock_ledger(l) < 0) {
        fail(why, whylen, "cannot lock", path);
        ledger_close(l);
        return -1;
    }
    struct ledger_slot *s = &l->map->slot[l->slot];
    for (int d = 0; d < LEDGER_DEVS; d++) store(&s->used[d], 0);
    store(&s->in_use, 1);
    if (l->map->high < (uint32_t)l->slot + 1) __atomic_store_n(&l->map->high, (uint32_t)l->slot + 1, __ATOMIC_RELEASE);
    unlock_ledger(l);
    return 0;
}

void ledger_close(ledger *l) {
    if (l->map) munmap(l->map, sizeof(struct ledger_file));
    if (l->fd >= 0) close(l->fd);
    l->map = NULL;
    l->fd = -1;
    l->slot = -1;
}

int ledger_device(ledger *l, const char *uuid) {
    size_t n = strlen(uuid);
    if (n == 0 || n >= LEDGER_UUID_LEN) return -1;
    /* Entries are written once, under the lock, into zeroed bytes: an entry read without the lock either matches
     * completely or not at all. */
    for (int d = 0; d < LEDGER_DEVS; d++)
        if (!strcmp(l->map->uuid[d], uuid)) return d;
    if (lock_ledger(l) < 0) return -1;
    int found = -1;
    for (int d = 0; d < LEDGER_DEVS && found < 0; d++) {
        if (!strcmp(l->map->uuid[d], uuid)) found = d;
        else if (!l->map->uuid[d][0]) {
            memcpy(l->map->uuid[d], uuid, n + 1);
            found = d;
        }
    }
    unlock_ledger(l);
    return found;
}

/* With the ledger lock held: the use of dev over claimed slots. reclaim: first ask the kernel whether each slot's
 * owner is alive (one fcntl per slot holding some of dev) and give dead slots' memory back; otherwise dead slots
 * still count, which can only overstate the use: a reservation that fits without reclaiming fits with it. */
static ledger_usage sum_live(ledger *l, int dev, bool reclaim) {
    ledger_usage u = {0, 0};
    uint32_t high = __atomic_load_n(&l->map->high, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < high && i < LEDGER_SLOTS; i++) {
        struct ledger_slot *s = &l->map->slot[i];
        if (!load(&s->in_use)) continue;
        uint64_t b = load(&s->used[dev]);
        if (!b) continue;
        if (reclaim && (int)i != l->slot) {
            struct flock fl;
            if (lock_byte(l->fd, F_OFD_GETLK, F_WRLCK, 1 + i, &fl) == 0 && fl.l_type == F_UNLCK) {
                /* Nobody holds the slot: its process died. Its memory is given back, every device at once. */
                for (int d = 0; d < LEDGER_DEVS; d++) store(&s->used[d], 0);
                store(&s->in_use, 0);
                continue;
            }
        }
        u.used += b;
        u.procs++;
    }
    return u;
}

bool ledger_reserve(ledger *l, int dev, uint64_t bytes, uint64_t limit, ledger_usage *seen) {
    if (dev < 0 || dev >= LEDGER_DEVS || lock_ledger(l) < 0) {
        if (seen) *seen = (ledger_usage){0, -1};
        return false;
    }
    /* the cheap sum first (no system call per slot); the liveness checks only when that does not fit */
    ledger_usage u = sum_live(l, dev, false);
    bool ok = u.used <= limit && bytes <= limit - u.used;
    if (!ok) {
        u = sum_live(l, dev, true);
        ok = u.used <= limit && bytes <= limit - u.used;
    }
    if (ok) __atomic_fetch_add(&l->map->slot[l->slot].used[dev], bytes, __ATOMIC_ACQ_REL);
    unlock_ledger(l);
    if (!ok && seen) *seen = u;
    return ok;
}

void ledger_release(ledger *l, int dev, uint64_t bytes) {
    if (dev < 0 || dev >= LEDGER_DEVS) return;
    uint64_t *p = &l->map->slot[l->slot].used[dev];
    uint64_t cur = load(p);
    /* Only this process writes its counters and its caller serialises its threads, so load-then-store cannot lose
     * another writer's update. */
    store(p, bytes > cur ? 0 : cur - bytes);
}

ledger_usage ledger_used(ledger *l, int dev) {
    ledger_usage u = {0, 0};
    if (dev < 0 || dev >= LEDGER_DEVS || lock_ledger(l) < 0) return u;
    u = sum_live(l, dev, true);
    unlock_ledger(l);
    return u;
}

uint64_t ledger_own(const ledger *l, int dev) {
    if (dev < 0 || dev >= LEDGER_DEVS || !l->map) return 0;
    return load(&l->map->slot[l->slot].used[dev]);
}
