/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The mock driver's shared state and helpers, for its files only (test/mock/): see mock_devices.c for what the
 * mock emulates and the variables that steer it. Built with hidden visibility: only the driver's own names
 * (MOCK_EXPORT) leave the library.
 */
#ifndef MOCK_H_
#define MOCK_H_

#define _GNU_SOURCE
#include "driver/cux_cuda.h"
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <linux/capability.h>

#define MOCK_EXPORT __attribute__((visibility("default")))

#define MOCK_MAX_ALLOCS 16384

typedef struct {
    uintptr_t          start;
    size_t             size;
    int                device;
    int                managed;
    int                host_pinned;
    unsigned long long id;
    int                fd;        /* memfd of device memory, -1 otherwise */
    int                imported;  /* mapped from another process by cuIpcOpenMemHandle */
    int                vmm;       /* a cuMemMap mapping: the handle below owns the memory */
    unsigned long long handle;
    int                sync_memops; /* CU_POINTER_ATTRIBUTE_SYNC_MEMOPS */
    uintptr_t          pool;        /* the memory pool it came from (a CUmemoryPool), 0 if none */
    int                pool_import; /* imported from another process's pool (cuMemPoolImportPointer) */
    uint64_t           source;      /* an import: the inode of the exporter's memfd (which allocation it is) */
    unsigned           opens;       /* a legacy import: cuIpcOpenMemHandle calls not closed yet */
} mock_alloc_t;

/* cuMemCreate / cuMemImportFromShareableHandle allocations: a memfd with a reference count. */
typedef struct {
    int    fd;
    size_t size;
    int    refs;
    int    exportable;
    int    fabric;     /* made with the fabric handle type (mock_vmm.c) */
} mock_vmm_t;

#define MOCK_MAX_VMM 1024

/* cuMemAddressReserve ranges: the driver's range of the memory mapped into one. */
typedef struct {
    uintptr_t start;
    size_t    size;
} mock_range_t;

#define MOCK_MAX_RESERVED 1024

/* The exporting pid at bytes 8-11, where the real driver writes it (what the module's handle binding reads). The
 * driver only compares those bytes with the importer's own pid (equal: refused, as a handle of its own process)
 * and finds the exporter by other bytes (measured on driver 580: any other value opens): the mock finds it by
 * `exporter`, with its PID namespace and broker (mock_broker.c), and does the same. */
typedef struct {
    uint32_t magic;
    int32_t  fd;
    int32_t  pid;
    int32_t  exporter;
    uint64_t size;
    uint64_t ino;
    uint64_t pid_ns;
    uint64_t broker;
} mock_ipc_handle_t;

#define MOCK_IPC_MAGIC 0x4b434f4d

/* A context is shared by threads, as the driver's are: its flags and peers are read and written atomically. */
struct CUctx_st    { int device; unsigned flags; unsigned peers; };

/* A copy issued on a stream with MOCK_CUDA_ASYNC=1: done when an event recorded after it completes. */
typedef struct mock_copy {
    struct mock_copy   *next;
    uintptr_t          dst, src;
    size_t             size;
    unsigned long long dst_id, src_id; /* the allocations at issue time, 0 for untracked memory */
    unsigned long      seq;
} mock_copy_t;

struct CUstream_st {
    int                device;
    pthread_mutex_t    lock;
    mock_copy_t        *head, **tail; /* copies not done yet, oldest first */
    unsigned long      issued;        /* copies issued so far: the sequence of the last one */
    CUresult           error;         /* sticky: a copy whose memory had gone */
    int                destroyed;
    struct CUstream_st *all_next;     /* every stream ever created, so that events never dangle */
};
struct CUevent_st  { int pending; CUstream stream; unsigned long seq; };

#define MOCK_MAX_DEVICES 16

/* ------------------------------------------------------------------ state */
/* mock_state.c */
extern pthread_mutex_t mock_lock;         /* the tables below */
extern int mock_initialized;
extern mock_alloc_t mock_allocs[MOCK_MAX_ALLOCS];
extern unsigned long long mock_next_id;   /* buffer ids */
extern mock_vmm_t mock_vmm[MOCK_MAX_VMM];
extern mock_range_t mock_reserved[MOCK_MAX_RESERVED];
extern struct CUctx_st mock_ctx[MOCK_MAX_DEVICES];
extern int mock_ctx_retained[MOCK_MAX_DEVICES]; /* retains of each primary context */
extern __thread CUcontext mock_current;
extern __thread CUcontext mock_stack[16];
extern __thread int mock_stack_depth;
/* mock_faults.c: counters that tests read through mock_cuda_live() */
extern long mock_live_streams, mock_live_events;
extern long mock_failed_exports; /* cuIpcGetMemHandle and cuMemExportToShareableHandle calls that failed */
extern long mock_issued_copies;  /* copies accepted on a stream, alone or in a batch */
extern long mock_fabric_calls;   /* calls that asked the driver anything of the fabric handle type */
extern long mock_fd_exports;     /* descriptors exported: cuMemExportToShareableHandle, cuMemPoolExportToShareableHandle */
extern long mock_imports;        /* memory of another process imported: cuIpcOpenMemHandle, cuMemImportFromShareableHandle,
                                    cuMemPoolImportFromShareableHandle, cuMemPoolImportPointer */
extern long mock_ptr_exports;    /* pool allocations exported: cuMemPoolExportPointer */
void mock_count(long *counter);  /* one more (mock_fd_exports, mock_imports, mock_ptr_exports), kept in
                                    MOCK_CUDA_COUNTS_DIR */

/* ------------------------------------------------------------------ entry points (m_*) and helpers, by file */
/* mock_devices.c */
const char *mock_mode(void);
int mock_event_delay(void);
int mock_current_device(void);
CUresult m_cuDriverGetVersion(int *v);
CUresult m_cuGetErrorName(CUresult e, const char **s);
CUresult m_cuGetErrorString(CUresult e, const char **s);
CUresult m_cuDeviceGetCount(int *n);
CUresult m_cuDeviceGet(CUdevice *d, int ordinal);
CUresult m_cuDeviceGetName(char *name, int len, CUdevice d);
CUresult m_cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d);
CUresult m_cuDeviceGetPCIBusId(char *s, int len, CUdevice d);
CUresult m_cuDeviceGetUuid(CUuuid *u, CUdevice d);
CUresult m_cuDeviceCanAccessPeer(int *can, CUdevice a, CUdevice b);
CUresult m_cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d);
CUresult m_cuDevicePrimaryCtxGetState(CUdevice d, unsigned *flags, int *active);
CUresult m_cuDevicePrimaryCtxRelease(CUdevice d);
CUresult m_cuCtxGetCurrent(CUcontext *c);
CUresult m_cuCtxSetCurrent(CUcontext c);
CUresult m_cuCtxPushCurrent(CUcontext c);
CUresult m_cuCtxPopCurrent(CUcontext *c);
CUresult m_cuCtxGetFlags(unsigned *flags);
CUresult m_cuCtxSetFlags(unsigned flags);
CUresult m_cuCtxSynchronize(void);
CUresult m_cuCtxGetDevice(CUdevice *d);
CUresult m_cuCtxEnablePeerAccess(CUcontext peer, unsigned flags);
CUresult m_cuCtxDisablePeerAccess(CUcontext peer);
/* mock_memory.c */
mock_alloc_t *mock_find(uintptr_t p);
/* What [p, p + n) starts in: a known allocation or pinned range, whether pinned host memory, whether it ends
 * inside it too. Takes mock_lock. */
typedef struct { int known, host_pinned, fits; } mock_where_t;
mock_where_t mock_where(uintptr_t p, size_t n);
/* An import of the allocation whose memfd has inode source: a legacy one on device (pool 0), or one from pool.
 * Caller holds mock_lock. */
mock_alloc_t *mock_find_import(uint64_t source, int device, uintptr_t pool);
CUresult mock_track(uintptr_t start, size_t size, int device, int managed, int pinned, int fd, int imported);
CUresult mock_untrack(uintptr_t start, int kind);
void mock_late_land(void);
CUresult mock_sync_copy(CUdeviceptr dst, CUdeviceptr src, size_t n);
CUresult mock_alloc(CUdeviceptr *p, size_t n, int managed);
/* the stream-ordered allocator and its per-thread default stream twins (mock_pools.c) */
CUresult m_cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice d);
CUresult m_cuMemAllocAsync(CUdeviceptr *p, size_t n, CUstream s);
CUresult m_cuMemAllocAsync_ptsz(CUdeviceptr *p, size_t n, CUstream s);
CUresult m_cuMemAllocFromPoolAsync(CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream s);
CUresult m_cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream s);
CUresult m_cuMemFreeAsync(CUdeviceptr p, CUstream s);
CUresult m_cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s);
CUresult m_cuMemAlloc(CUdeviceptr *p, size_t n);
CUresult m_cuMemAllocManaged(CUdeviceptr *p, size_t n, unsigned f);
CUresult m_cuMemFree(CUdeviceptr p);
CUresult m_cuMemGetInfo(size_t *free_bytes, size_t *total);
CUresult m_cuMemHostRegister(void *p, size_t n, unsigned flags);
CUresult m_cuMemHostUnregister(void *p);
CUresult m_cuMemHostAlloc(void **p, size_t n, unsigned flags);
CUresult m_cuMemFreeHost(void *p);
CUresult m_cuPointerGetAttributes(unsigned n, CUpointer_attribute *attrs, void **data, CUdeviceptr p);
CUresult m_cuPointerSetAttribute(const void *value, CUpointer_attribute attr, CUdeviceptr p);
CUresult m_cuMemGetAddressRange(CUdeviceptr *base, size_t *size, CUdeviceptr p);
/* mock_streams.c */
CUresult mock_ctx_streams_run(int device);
CUresult m_cuStreamCreate(CUstream *s, unsigned flags);
CUresult m_cuStreamDestroy(CUstream s);
CUresult m_cuStreamSynchronize(CUstream s);
CUresult m_cuStreamQuery(CUstream s);
CUresult m_cuEventCreate(CUevent *e, unsigned flags);
CUresult m_cuEventDestroy(CUevent e);
CUresult m_cuEventRecord(CUevent e, CUstream s);
CUresult m_cuEventQuery(CUevent e);
CUresult m_cuLaunchHostFunc(CUstream s, CUhostFn fn, void *arg);
CUresult m_cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s);
CUresult m_cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s);
CUresult m_cuMemcpyBatchAsync(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count, CUmemcpyAttributes *attrs, size_t *attr_idxs, size_t num_attrs, CUstream s);
/* mock_ipc.c */
CUresult m_cuIpcGetMemHandle(CUipcMemHandle *handle, CUdeviceptr p);
int mock_open_as_driver(const char *path);
CUresult mock_map_peer_memory(pid_t pid, uint64_t pid_ns, uint64_t broker, int fd, uint64_t ino, uint64_t size,
                              CUresult gone, CUdeviceptr *p);
CUresult m_cuIpcOpenMemHandle(CUdeviceptr *p, CUipcMemHandle handle, unsigned flags);
CUresult m_cuIpcCloseMemHandle(CUdeviceptr p);
/* mock_vmm.c */
mock_vmm_t *mock_vmm_get(CUmemGenericAllocationHandle h);
/* The handle types a VMM allocation may be exported as (ALLOWED_HANDLE_TYPES); 0 for no live allocation. */
unsigned long long mock_vmm_handle_types(CUmemGenericAllocationHandle h);
int mock_imex_channel(void);
CUresult m_cuMemCreate(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *prop, unsigned long long flags);
CUresult m_cuMemRelease(CUmemGenericAllocationHandle h);
CUresult m_cuMemAddressReserve(CUdeviceptr *p, size_t size, size_t align, CUdeviceptr addr, unsigned long long flags);
CUresult m_cuMemAddressFree(CUdeviceptr p, size_t size);
CUresult m_cuMemMap(CUdeviceptr p, size_t size, size_t offset, CUmemGenericAllocationHandle h, unsigned long long flags);
CUresult m_cuMemUnmap(CUdeviceptr p, size_t size);
CUresult m_cuMemSetAccess(CUdeviceptr p, size_t size, const CUmemAccessDesc *desc, size_t count);
CUresult m_cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *h, void *p);
CUresult m_cuMemExportToShareableHandle(void *out, CUmemGenericAllocationHandle h, CUmemAllocationHandleType type, unsigned long long flags);
CUresult m_cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *h, void *os_handle, CUmemAllocationHandleType type);
CUresult m_cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop, CUmemAllocationGranularity_flags option);
CUresult mock_export_fd(int target, void *out);
int mock_import_fd(int exported, pid_t *pid_p, uint64_t *pid_ns_p, uint64_t *broker_p);
CUresult m_cuMemGetHandleForAddressRange(void *handle, CUdeviceptr dptr, size_t size, CUmemRangeHandleType type, unsigned long long flags);
/* mock_pools.c */
unsigned long long mock_pool_handle_types(uintptr_t pool);
long mock_imported_pools(void);
CUresult m_cuMemPoolExportToShareableHandle(void *out, CUmemoryPool pool, CUmemAllocationHandleType type, unsigned long long flags);
CUresult m_cuMemPoolExportPointer(CUmemPoolPtrExportData *data, CUdeviceptr p);
CUresult m_cuMemPoolImportFromShareableHandle(CUmemoryPool *pool, void *os_handle, CUmemAllocationHandleType type, unsigned long long flags);
CUresult m_cuMemPoolImportPointer(CUdeviceptr *p, CUmemoryPool pool, CUmemPoolPtrExportData *data);
CUresult m_cuMemPoolGetAccess(CUmemAccess_flags *flags, CUmemoryPool pool, CUmemLocation *location);
CUresult m_cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc *desc, size_t count);
CUresult m_cuMemPoolDestroy(CUmemoryPool pool);
/* mock_broker.c */
uint64_t mock_broker_token(void);
uint64_t mock_pid_namespace(void);
/* The exporter's descriptor fd, opened here: through /proc in its PID namespace, else from its broker. */
int mock_open_exporter_fd(pid_t pid, uint64_t pid_ns, uint64_t broker, int fd);
/* mock_kernels.c */
extern long mock_kernel_launches, mock_kernel_launches_large;
extern long mock_event_records;
CUresult m_cuModuleLoadData(CUmodule *module, const void *image);
CUresult m_cuModuleGetFunction(CUfunction *function, CUmodule module, const char *name);
CUresult m_cuLaunchKernel(CUfunction function, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shared, CUstream s, void **params, void **extra);
/* mock_faults.c */
CUresult mock_injected(const char *name, CUresult error);

#endif
