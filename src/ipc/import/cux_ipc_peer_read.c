/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reads of another process's memory with a deadline: see cux_ipc_peer_read.h.
 */
#define _GNU_SOURCE
#include "ipc/import/cux_ipc_peer_read.h"

#include <ucs/debug/log.h>
#include <ucs/debug/memtrack_int.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* One read: the caller's until it is done or given up, then whoever is last (the reader or the caller) frees it. */
typedef struct cux_ipc_read_req {
    struct cux_ipc_read_req *next;
    int32_t                 pid;
    uint64_t                address;
    size_t                  len;
    ssize_t                 result;
    int                     error;
    int                     done;      /* the reader finished it */
    int                     abandoned; /* the caller gave up: the reader frees it */
    uint8_t                 buf[];
} cux_ipc_read_req_t;

static struct {
    pthread_mutex_t    lock;
    pthread_cond_t     work;      /* a read was queued */
    pthread_cond_t     done;      /* a read finished */
    cux_ipc_read_req_t *head, **tail;
    unsigned           readers;   /* reader threads, blocked ones included */
    unsigned           idle;      /* readers waiting for work */
    pid_t              pid;       /* the process they belong to: a forked child has none */
    double             timeout;
    int                inline_reads; /* no deadline (timeout inf): read on the calling thread */
} cux_ipc_reads = {
    .lock    = PTHREAD_MUTEX_INITIALIZER,
    .work    = PTHREAD_COND_INITIALIZER,
    .done    = PTHREAD_COND_INITIALIZER,
    .timeout = 1.0
};

void cux_ipc_peer_read_set_timeout(double seconds)
{
    pthread_mutex_lock(&cux_ipc_reads.lock);
    cux_ipc_reads.timeout = seconds;
    __atomic_store_n(&cux_ipc_reads.inline_reads, seconds >= 1e9, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&cux_ipc_reads.lock);
}

double cux_ipc_peer_read_timeout(void)
{
    return cux_ipc_reads.timeout;
}

static void *cux_ipc_reader(void *arg)
{
    cux_ipc_read_req_t *req;
    struct iovec local, remote;

    pthread_mutex_lock(&cux_ipc_reads.lock);
    for (;;) {
        while (cux_ipc_reads.head == NULL) {
            ++cux_ipc_reads.idle;
            pthread_cond_wait(&cux_ipc_reads.work, &cux_ipc_reads.lock);
            --cux_ipc_reads.idle;
        }
        req               = cux_ipc_reads.head;
        cux_ipc_reads.head = req->next;
        if (cux_ipc_reads.head == NULL) {
            cux_ipc_reads.tail = &cux_ipc_reads.head;
        }
        pthread_mutex_unlock(&cux_ipc_reads.lock);

        local       = (struct iovec){req->buf, req->len};
        remote      = (struct iovec){(void*)(uintptr_t)req->address, req->len};
        req->result = process_vm_readv(req->pid, &local, 1, &remote, 1, 0);
        req->error  = errno;

        pthread_mutex_lock(&cux_ipc_reads.lock);
        if (req->abandoned) {
            ucs_free(req);
        } else {
            req->done = 1;
            pthread_cond_broadcast(&cux_ipc_reads.done);
        }
    }
    return NULL;
}

/* A reader for a queued read: an idle one, else a new one while there are fewer than the most. Lock held. */
static void cux_ipc_reader_wake(void)
{
    pthread_attr_t attr;
    pthread_t thread;

    if (cux_ipc_reads.pid != getpid()) { /* a forked child: its parent's readers are not here */
        cux_ipc_reads.pid     = getpid();
        cux_ipc_reads.readers = 0;
        cux_ipc_reads.idle    = 0;
    }
    if (cux_ipc_reads.idle > 0) {
        pthread_cond_signal(&cux_ipc_reads.work);
        return;
    }
    if (cux_ipc_reads.readers >= CUX_IPC_PEER_READERS_MAX) {
        return; /* every reader is busy or blocked: the read waits for one, until its deadline */
    }
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&thread, &attr, cux_ipc_reader, NULL) == 0) {
        ++cux_ipc_reads.readers;
    } else {
        ucs_warn("cuda_ipc: no reader thread for peer proofs (%m)");
    }
    pthread_attr_destroy(&attr);
}

ssize_t cux_ipc_peer_read_bounded(int32_t pid, uint64_t address, void *buf, size_t len)
{
    cux_ipc_read_req_t *req;
    struct timespec deadline;
    struct iovec local, remote;
    ssize_t result;
    int error;

    if (__atomic_load_n(&cux_ipc_reads.inline_reads, __ATOMIC_RELAXED)) {
        /* no deadline asked for: the read costs no thread switch, and a peer can make it block */
        local  = (struct iovec){buf, len};
        remote = (struct iovec){(void*)(uintptr_t)address, len};
        return process_vm_readv(pid, &local, 1, &remote, 1, 0);
    }
    req = ucs_malloc(sizeof(*req) + len, "cux_ipc_read_req");
    if (req == NULL) {
        errno = ENOMEM;
        return -1;
    }
    *req = (cux_ipc_read_req_t){.pid = pid, .address = address, .len = len};

    pthread_mutex_lock(&cux_ipc_reads.lock);
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec  += (time_t)cux_ipc_reads.timeout;
    deadline.tv_nsec += (long)((cux_ipc_reads.timeout - (time_t)cux_ipc_reads.timeout) * 1e9);
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec  += 1;
        deadline.tv_nsec -= 1000000000L;
    }
    if (cux_ipc_reads.tail == NULL) {
        cux_ipc_reads.tail = &cux_ipc_reads.head;
    }
    *cux_ipc_reads.tail = req;
    cux_ipc_reads.tail  = &req->next;
    cux_ipc_reader_wake();

    while (!req->done) {
        if (pthread_cond_timedwait(&cux_ipc_reads.done, &cux_ipc_reads.lock, &deadline) == ETIMEDOUT) {
            break;
        }
    }
    if (!req->done) {
        /* still queued (no reader free) or being read: taken out of the queue, or left to its reader */
        cux_ipc_read_req_t **pp;
        for (pp = &cux_ipc_reads.head; (*pp != NULL) && (*pp != req); pp = &(*pp)->next) {
        }
        if (*pp == req) {
            *pp = req->next;
            if (cux_ipc_reads.tail == &req->next) {
                cux_ipc_reads.tail = pp;
            }
            ucs_free(req);
        } else {
            req->abandoned = 1;
        }
        pthread_mutex_unlock(&cux_ipc_reads.lock);
        ucs_debug("cuda_ipc: reading %zu bytes of pid %d's memory at 0x%" PRIx64 " took longer than %.3f s: "
                  "given up", len, pid, address, cux_ipc_reads.timeout);
        errno = ETIMEDOUT;
        return -1;
    }
    pthread_mutex_unlock(&cux_ipc_reads.lock);

    result = req->result;
    error  = req->error;
    if (result > 0) {
        memcpy(buf, req->buf, result);
    }
    ucs_free(req);
    errno = error;
    return result;
}
