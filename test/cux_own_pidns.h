/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * For tests and benchmarks (root): the calling process, just forked, goes on as pid 1 of a PID namespace of its
 * own with its own mount namespace and /proc, as a container without a shared PID namespace sees it.
 */
#ifndef CUX_OWN_PIDNS_H_
#define CUX_OWN_PIDNS_H_

#ifndef _GNU_SOURCE
#error "cux_own_pidns.h needs _GNU_SOURCE (unshare) before the first include"
#endif
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* extra: more namespaces (CLONE_NEWIPC | CLONE_NEWUTS for two pods). The process that calls stays outside,
 * waits for the one inside and ends with its status (128 + the signal that killed it); the one inside dies with
 * it, and returns 0. -1 (errno set) where a step is not allowed; then nothing was forked, or the process inside
 * returns -1 before running anything. The mock driver imports across namespaces only through its broker, which
 * is turned on (the driver needs nothing). */
static inline int cux_enter_own_pid_namespace(int extra)
{
    pid_t inner;
    int st;

    if (unshare(CLONE_NEWPID | CLONE_NEWNS | extra) != 0) {
        return -1;
    }
    inner = fork();
    if (inner < 0) {
        return -1;
    }
    if (inner > 0) {
        _exit((waitpid(inner, &st, 0) == inner) ? (WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st)) : 1);
    }
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    setenv("MOCK_CUDA_BROKER", "1", 1);
    if ((mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) ||
        (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)) {
        return -1;
    }
    return 0;
}

#endif
