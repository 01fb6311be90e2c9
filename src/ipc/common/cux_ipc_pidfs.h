/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A process's name that no other process shares: where pidfds live on pidfs (Linux 6.9+), every pidfd of one
 * process has one inode, never another process's while the system runs. A process puts its own in its interface
 * address; a peer compares it with the inode of the pidfd the kernel gives for whoever listens on the address's
 * socket (SO_PEERPIDFD), so that a socket name does not stand for a process.
 */
#ifndef CUX_IPC_PIDFS_H_
#define CUX_IPC_PIDFS_H_

#include <stdint.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#define CUX_IPC_PIDFS_MAGIC 0x50494446 /* "PIDF" */

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

/* The pidfs inode of the process pidfd names; 0 where the kernel gives its pidfds no inode of their own. */
static inline uint64_t cux_ipc_pidfd_inode(int pidfd)
{
    struct statfs fs;
    struct stat st;

    if ((pidfd < 0) || (fstatfs(pidfd, &fs) != 0) || (fs.f_type != CUX_IPC_PIDFS_MAGIC) || (fstat(pidfd, &st) != 0)) {
        return 0;
    }
    return (uint64_t)st.st_ino;
}

/* The same for the calling process. */
static inline uint64_t cux_ipc_own_pidfs_inode(void)
{
    int pidfd      = (int)syscall(SYS_pidfd_open, getpid(), 0);
    uint64_t inode = cux_ipc_pidfd_inode(pidfd);

    if (pidfd >= 0) {
        close(pidfd);
    }
    return inode;
}

#endif
