/* ledger.h -- device memory in use, per process and per device, in one file that many processes map: the pod's
 * accounting of libtessera-cuda.so (state/memory.v1 beside the library) and, reused by the fake driver, a fake
 * node's physical GPU memory (FAKE_CUDA_STATE).
 *
 * Why a file and file locks: the processes of one pod live in different containers, hence different PID
 * namespaces, so a PID says nothing about whether its process is alive. Each process instead holds an open file
 * description (OFD) lock on one byte of the file, its slot; the kernel drops that lock the moment the process dies,
 * however it dies (SIGKILL, OOM kill, crash), and the next process that takes the ledger's lock finds the slot
 * unlocked and gives its memory back. The same lock kind, on byte 0, serialises every check-and-reserve, so two
 * processes can never both pass the limit; a process that dies holding it loses it too.
 *
 * In-process threads are serialised by the caller (OFD locks do not exclude two threads of one process: they share
 * the open file description). Only the slot's owner writes its counters, with atomic stores; readers that do not
 * hold the ledger lock may see a counter a moment old, never a torn one.
 *
 * Nothing here allocates, prints or keeps global state: the shim calls it from hooks in arbitrary processes.
 */
#ifndef SHIM_LEDGER_H
#define SHIM_LEDGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LEDGER_DEVS  16   /* devices one ledger tracks (a pod's share spans one GPU; a node has at most 16) */
#define LEDGER_SLOTS 1024 /* processes at once */
#define LEDGER_UUID_LEN 64

typedef struct ledger {
    int fd;                     /* -1: closed */
    struct ledger_file *map;
    int slot;                   /* this process's slot */
} ledger;

/* What ledger_reserve saw when it refused, for the message. */
typedef struct ledger_usage {
    uint64_t used;              /* bytes in use on the device, all live slots */
    int procs;                  /* live slots with memory on the device */
} ledger_usage;

/* Open (creating it, mode 0666 whatever the umask, so containers of other uids can join) and map path, and claim a
 * slot. 0, or -1 with why filled ("cannot open /x/state/memory.v1: Permission denied"). */
int ledger_open(ledger *l, const char *path, char *why, size_t whylen);

/* Unmap and close. The slot is freed when the last reference to the file description goes: in a fork child that
 * calls this, the parent keeps its slot. */
void ledger_close(ledger *l);

/* The index of the device named uuid, registering it on first use; -1 when LEDGER_DEVS are taken. */
int ledger_device(ledger *l, const char *uuid);

/* Add bytes to this process's use of dev if every live process's use plus bytes stays within limit; false (and
 * *seen filled, when not NULL) otherwise. Dead slots are reclaimed when, counted, they would make it refuse. */
bool ledger_reserve(ledger *l, int dev, uint64_t bytes, uint64_t limit, ledger_usage *seen);

/* Take bytes off this process's use of dev (a free, or a reservation the driver then refused). */
void ledger_release(ledger *l, int dev, uint64_t bytes);

/* Every live process's use of dev, dead slots reclaimed first. */
ledger_usage ledger_used(ledger *l, int dev);

/* This process's own use of dev. */
uint64_t ledger_own(const ledger *l, int dev);

#endif
