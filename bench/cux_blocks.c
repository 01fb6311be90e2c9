/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cux_blocks: many-block transfers between GPU processes through UCP, as inference servers move KV cache
 * (NIXL, vLLM, Dynamo): a transfer is COUNT blocks of SIZE bytes, each written with ucp_put_nbx (or read with
 * ucp_get_nbx), then one worker flush.
 *
 *   cux_blocks [-n PROCESSES] [-g GPUS] [-s SIZES] [-k COUNTS] [-l one,many] [-o put,get] [-p one|all]
 *              [-r REPEATS] [-f FIRST_REPEATS] [-M MAX_BYTES] [-G]
 *   cux_blocks -F SIZE [-T SECONDS] [-g GPUS]
 *
 * -n processes (default 2), forked by this program, rank r on GPU r % GPUS (-g: default every GPU the
 * driver shows). -p one: rank 0 transfers to rank 1 (default); all: every rank to every other at once.
 * -G (UCX 1.22+, puts): each target's blocks go as one ucp_put_nbx of UCP's scatter-gather datatype
 * (ucp_dt_make_sgl(), a local and a remote list), which UCP hands to a transport's scatter-gather put where a
 * lane offers one; the lists are built in the posting time, as an application builds them.
 * -l one: the blocks of a transfer lie in one large allocation; many: one allocation per block. Sizes take
 * k and m suffixes. A case whose memory on one rank (blocks exposed to every source) exceeds -M (default
 * 1 GiB) is skipped.
 *
 * Per case: one warm-up transfer, then -r timed transfers to the same buffers (default 5), then -f first
 * transfers (default 2), each to freshly allocated target memory with new remote keys (every mapping new).
 * Every transfer is data-checked: each block carries a pattern of its source, target, index and repeat,
 * filled by plain synchronous copies; the target (put) or the initiator (get) reads every byte back after
 * every operation of the transfer has completed and the worker is flushed. Buffers are registered with ucp_mem_map
 * and passed to UCP with their memory handles, as NIXL does.
 *
 * A transfer is done when UCP has completed every request it returned, not merely when the worker flush says so:
 * UCP's flush can return while operations still wait in a transport's pending queue (see transfer()). How often
 * that happened is reported ("UCP's flush came first N times", flush_early=N): it is UCP's, not a data error.
 *
 * While a rank waits for the others it progresses its worker, as a serving process does.
 *
 * -F SIZE asks instead whether a buffer a peer has read stays allocated after its owner frees it (issue 22,
 * item 5): rank 1 allocates SIZE bytes and a 4 KB buffer; rank 0 reads 4 KB of the large one (the transport
 * maps the whole allocation) and destroys its key; rank 1 frees the large buffer. Rank 0 then reads the small
 * buffer every 100 ms for -T seconds (default 15), as an application that goes on working does, and prints
 * the GPU memory in use (the whole device, cuMemGetInfo) at each step and when it came back ("FREED" line).
 * Both ranks run on the first GPU, so that the device's figures include the exporter's buffer.
 *
 * Prints one line per case and a machine-readable "RESULT key=value ..." line: time of a transfer (median),
 * GB/s and blocks/s over all initiators (bytes moved / the slowest initiator's time), posting time per block
 * (the ucp_*_nbx calls alone), CPU time per block (the initiator process's, every thread, posting to done),
 * and the first transfer's time and its cost per new allocation (first - warm, divided by the target
 * allocations one initiator touches). Exits 1 on any data error.
 *
 * With bench/cux_drvcount as the driver's injection library (CUDA_INJECTION64_PATH), rank 0 also prints the
 * driver calls its timed transfers made per block ("DRVCALLS" lines); its times are then not measurements.
 *
 * The driver is opened at run time (CUX_DRIVER_PATH picks another, such as the tests' mock) and called through
 * the global symbol scope, as a program linked with libcuda is.
 */
#define _GNU_SOURCE
#include "driver/cux_cuda.h"
#include "cux_bench_clock.h"
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#define BLOCKS_MAX_LIST 16

/* ------------------------------------------------------------------ options */

static struct {
    int      nprocs;
    int      ngpus;
    size_t   sizes[BLOCKS_MAX_LIST];
    int      nsizes;
    size_t   counts[BLOCKS_MAX_LIST];
    int      ncounts;
    int      layouts; /* bit 0: one allocation, bit 1: many */
    int      ops;     /* bit 0: put, bit 1: get */
    int      all_to_all;
    int      repeats;
    int      first_repeats;
    size_t   max_bytes;
    size_t   freed_size;    /* -F: the freed-memory check instead of the transfers */
    double   freed_seconds; /* -T */
    int      sgl;           /* -G: one scatter-gather put per target */
} opt = {2, 0, {16 << 10, 64 << 10, 256 << 10, 1 << 20}, 4, {1, 10, 100, 1000, 10000}, 5, 3, 3, 0, 5, 2,
         1ul << 30, 0, 15, 0};

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cux_blocks: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(2);
}

/* Allocations that cannot fail quietly: a benchmark without memory has nothing to measure. */
static void *xalloc(size_t count, size_t size)
{
    void *p = ((count < (1ul << 40)) && (size < (1ul << 40))) ? calloc(count ? count : 1, size ? size : 1) : NULL;
    if (p == NULL) {
        die("out of memory (%zu x %zu bytes)", count, size);
    }
    return p;
}

static void *xrealloc(void *p, size_t size)
{
    p = realloc(p, size);
    if (p == NULL) {
        die("out of memory (%zu bytes)", size);
    }
    return p;
}

static size_t parse_size(const char *s)
{
    char *end;
    size_t v = strtoull(s, &end, 0);
    if ((*end == 'k') || (*end == 'K')) {
        v <<= 10, ++end;
    } else if ((*end == 'm') || (*end == 'M')) {
        v <<= 20, ++end;
    } else if ((*end == 'g') || (*end == 'G')) {
        v <<= 30, ++end;
    }
    if ((*end != '\0') || (v == 0)) {
        die("bad size '%s'", s);
    }
    return v;
}

static int parse_list(const char *arg, size_t *list)
{
    char *copy = strdup(arg), *save = NULL, *tok;
    int n      = 0;
    for (tok = strtok_r(copy, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        if (n == BLOCKS_MAX_LIST) {
            die("at most %d values in '%s'", BLOCKS_MAX_LIST, arg);
        }
        list[n++] = parse_size(tok);
    }
    free(copy);
    return n;
}

static int parse_names(const char *arg, const char *first, const char *second)
{
    int bits = 0;
    char *copy = strdup(arg), *save = NULL, *tok;
    for (tok = strtok_r(copy, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        if (!strcmp(tok, first)) {
            bits |= 1;
        } else if (!strcmp(tok, second)) {
            bits |= 2;
        } else {
            die("'%s': expected %s or %s", tok, first, second);
        }
    }
    free(copy);
    return bits;
}

static void parse_options(int argc, char **argv)
{
    int c;
    while ((c = getopt(argc, argv, "n:g:s:k:l:o:p:r:f:M:F:T:Gh")) != -1) {
        switch (c) {
        case 'n': opt.nprocs = atoi(optarg); break;
        case 'g': opt.ngpus = atoi(optarg); break;
        case 's': opt.nsizes = parse_list(optarg, opt.sizes); break;
        case 'k': opt.ncounts = parse_list(optarg, opt.counts); break;
        case 'l': opt.layouts = parse_names(optarg, "one", "many"); break;
        case 'o': opt.ops = parse_names(optarg, "put", "get"); break;
        case 'p': opt.all_to_all = (parse_names(optarg, "one", "all") == 2); break;
        case 'r': opt.repeats = atoi(optarg); break;
        case 'f': opt.first_repeats = atoi(optarg); break;
        case 'M': opt.max_bytes = parse_size(optarg); break;
        case 'F': opt.freed_size = parse_size(optarg); break;
        case 'T': opt.freed_seconds = atof(optarg); break;
        case 'G': opt.sgl = 1; break;
        default:
            fprintf(stderr, "usage: cux_blocks [-n PROCESSES] [-g GPUS] [-s SIZES] [-k COUNTS] [-l one,many] "
                            "[-o put,get] [-p one|all] [-r REPEATS] [-f FIRST_REPEATS] [-M MAX_BYTES] [-G]\n"
                            "       cux_blocks -F SIZE [-T SECONDS] [-g GPUS]\n");
            exit(c == 'h' ? 0 : 2);
        }
    }
    if ((opt.nprocs < 2) || (opt.ngpus < 0) || (opt.repeats < 1) || (opt.first_repeats < 0)) {
        die("need -n >= 2, -g >= 0, -r >= 1, -f >= 0");
    }
#ifdef ucp_dt_make_sgl
    if (opt.sgl && (opt.ops & 2)) {
        die("-G posts puts only (UCP's scatter-gather gets are not offered here)");
    }
#else
    if (opt.sgl) {
        die("-G needs a UCP with the scatter-gather datatype (UCX 1.22+)");
    }
#endif
}

/* ------------------------------------------------------------------ CUDA, through the global scope */

static struct {
    CUresult (*init)(unsigned);
    CUresult (*device_count)(int*);
    CUresult (*ctx_retain)(CUcontext*, CUdevice);
    CUresult (*ctx_set)(CUcontext);
    CUresult (*alloc)(CUdeviceptr*, size_t);
    CUresult (*free)(CUdeviceptr);
    CUresult (*copy)(CUdeviceptr, CUdeviceptr, size_t);
    CUresult (*ctx_sync)(void);
    CUresult (*mem_info)(size_t*, size_t*);
} cu;

static int cuda_device_count(void)
{
    const char *path = getenv("CUX_DRIVER_PATH");
    int count        = 0;

    if (dlopen(path ? path : "libcuda.so.1", RTLD_NOW | RTLD_GLOBAL) == NULL) {
        die("no CUDA driver: %s", dlerror());
    }
    *(void**)&cu.init         = dlsym(RTLD_DEFAULT, "cuInit");
    *(void**)&cu.device_count = dlsym(RTLD_DEFAULT, "cuDeviceGetCount");
    *(void**)&cu.ctx_retain   = dlsym(RTLD_DEFAULT, "cuDevicePrimaryCtxRetain");
    *(void**)&cu.ctx_set      = dlsym(RTLD_DEFAULT, "cuCtxSetCurrent");
    *(void**)&cu.alloc        = dlsym(RTLD_DEFAULT, "cuMemAlloc_v2");
    *(void**)&cu.free         = dlsym(RTLD_DEFAULT, "cuMemFree_v2");
    *(void**)&cu.copy         = dlsym(RTLD_DEFAULT, "cuMemcpy");
    *(void**)&cu.ctx_sync     = dlsym(RTLD_DEFAULT, "cuCtxSynchronize");
    *(void**)&cu.mem_info     = dlsym(RTLD_DEFAULT, "cuMemGetInfo_v2");
    if (!cu.init || !cu.device_count || !cu.ctx_retain || !cu.ctx_set || !cu.alloc || !cu.free || !cu.copy ||
        !cu.ctx_sync || !cu.mem_info || cu.init(0) || cu.device_count(&count) || (count == 0)) {
        die("the CUDA driver lacks an entry point, does not initialise or shows no GPU");
    }
    return count;
}

#define CU_CHECK(_call) \
    do { \
        CUresult _r = (_call); \
        if (_r != CUDA_SUCCESS) { \
            die("%s failed: %d", #_call, (int)_r); \
        } \
    } while (0)

/* ------------------------------------------------------------------ the processes: a star through the parent */

static int coord_fd = -1; /* a rank's socket to the parent */

static void write_all(int fd, const void *buf, size_t len)
{
    for (size_t done = 0; done < len;) {
        ssize_t n = write(fd, (const char*)buf + done, len - done);
        if (n <= 0) {
            if ((n < 0) && (errno == EINTR)) {
                continue;
            }
            die("write to the coordinator: %s", strerror(errno));
        }
        done += n;
    }
}

static int read_all(int fd, void *buf, size_t len)
{
    for (size_t done = 0; done < len;) {
        ssize_t n = read(fd, (char*)buf + done, len - done);
        if (n == 0) {
            return 0;
        } else if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            die("read from the coordinator: %s", strerror(errno));
        }
        done += n;
    }
    return 1;
}

static ucp_worker_h progress_worker; /* progressed while a rank waits for the others, as a serving process does */

/* Waits for the coordinator's answer, progressing the worker meanwhile. */
static void wait_readable(int fd)
{
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    while (poll(&pfd, 1, (progress_worker != NULL) ? 0 : -1) == 0) {
        ucp_worker_progress(progress_worker);
    }
}

/* Every rank's message, in rank order, to every rank: all[r] (malloc'ed, one block), len[r]. */
static void allgather(const void *mine, size_t mine_len, void ***all, size_t **lens)
{
    uint64_t len = mine_len, total = 0;
    char *data;

    write_all(coord_fd, &len, sizeof(len));
    write_all(coord_fd, mine, mine_len);
    wait_readable(coord_fd);
    *lens = xalloc(opt.nprocs, sizeof(**lens));
    *all  = xalloc(opt.nprocs, sizeof(**all));
    if (!read_all(coord_fd, &total, sizeof(total)) || ((data = xalloc(total + 1, 1)) == NULL) ||
        !read_all(coord_fd, data, total)) {
        die("the coordinator went away");
    }
    for (int r = 0; r < opt.nprocs; ++r) {
        memcpy(&len, data, sizeof(len));
        (*all)[r]  = data + sizeof(len);
        (*lens)[r] = len;
        data      += sizeof(len) + len;
    }
}

static void allgather_free(void **all, size_t *lens)
{
    free((char*)all[0] - sizeof(uint64_t));
    free(all);
    free(lens);
}

static void barrier(void)
{
    void **all;
    size_t *lens;
    allgather(NULL, 0, &all, &lens);
    allgather_free(all, lens);
}

/* The parent: gathers one message from every rank, sends all of them to each, until the ranks are gone. */
static int coordinate(const int *fds, const pid_t *pids)
{
    int failed = 0, status;

    for (;;) {
        size_t total = 0, cap = 0;
        char *data   = NULL;
        int open     = 0;
        for (int r = 0; r < opt.nprocs; ++r) {
            uint64_t len;
            if (!read_all(fds[r], &len, sizeof(len))) {
                continue;
            }
            ++open;
            if (total + sizeof(len) + len > cap) {
                cap  = 2 * (total + sizeof(len) + len);
                data = xrealloc(data, cap);
            }
            memcpy(data + total, &len, sizeof(len));
            if (!read_all(fds[r], data + total + sizeof(len), len)) {
                die("rank %d went away mid-message", r);
            }
            total += sizeof(len) + len;
        }
        if (open == 0) {
            break;
        } else if (open != opt.nprocs) {
            fprintf(stderr, "cux_blocks: %d of %d ranks ended early\n", opt.nprocs - open, opt.nprocs);
            for (int r = 0; r < opt.nprocs; ++r) {
                kill(pids[r], SIGTERM);
            }
            failed = 1;
            break;
        }
        uint64_t t = total;
        for (int r = 0; r < opt.nprocs; ++r) {
            write_all(fds[r], &t, sizeof(t));
            write_all(fds[r], data, total);
        }
        free(data);
    }
    for (int r = 0; r < opt.nprocs; ++r) {
        waitpid(pids[r], &status, 0);
        if (!WIFEXITED(status) || (WEXITSTATUS(status) != 0)) {
            fprintf(stderr, "cux_blocks: rank %d %s %d\n", r, WIFEXITED(status) ? "exited with" : "killed by signal",
                    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
            failed = 1;
        }
    }
    return failed;
}

/* ------------------------------------------------------------------ a rank */

static struct {
    int           rank;
    ucp_context_h context;
    ucp_worker_h  worker;
    ucp_ep_h      *eps;
} me;

/* bench/cux_drvcount, when the driver loaded it: counts this thread's driver calls while enabled. */
static struct {
    void (*enable)(int on);
    void (*report)(FILE *f, double per);
} drvcount;

static void drvcount_open(void)
{
    const char *path = getenv("CUDA_INJECTION64_PATH");
    void *handle     = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
    if (handle != NULL) {
        *(void**)&drvcount.enable = dlsym(handle, "cux_drvcount_enable");
        *(void**)&drvcount.report = dlsym(handle, "cux_drvcount_report");
    }
    if (!drvcount.enable || !drvcount.report) {
        drvcount.enable = NULL;
    }
}

static double clock_us(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static double now_us(void)
{
    return clock_us(CLOCK_MONOTONIC);
}

/* the process's CPU time, every thread */
static double cpu_us(void)
{
    return clock_us(CLOCK_PROCESS_CPUTIME_ID);
}

/* Who sends to whom: rank 0 to rank 1, or every rank to every other. */
static int sends_to(int from, int to)
{
    return (from != to) && (opt.all_to_all || ((from == 0) && (to == 1)));
}

static int sources_of(int target)
{
    int n = 0;
    for (int r = 0; r < opt.nprocs; ++r) {
        n += sends_to(r, target);
    }
    return n;
}

/* The index of source's slot among the blocks that target exposes. */
static int slot_of(int source, int target)
{
    int n = 0;
    for (int r = 0; r < source; ++r) {
        n += sends_to(r, target);
    }
    return n;
}

/* Blocks in one or many allocations, registered with UCP. */
typedef struct {
    size_t      block, nblocks;
    int         nallocs;
    CUdeviceptr *alloc;
    ucp_mem_h   *memh;
} blocks_t;

static void blocks_alloc(blocks_t *b, size_t block, size_t nblocks, int many)
{
    b->block   = block;
    b->nblocks = nblocks;
    b->nallocs = many ? (int)nblocks : (nblocks > 0);
    b->alloc   = xalloc(b->nallocs, sizeof(*b->alloc));
    b->memh    = xalloc(b->nallocs, sizeof(*b->memh));
    for (int i = 0; i < b->nallocs; ++i) {
        size_t len             = many ? block : block * nblocks;
        ucp_mem_map_params_t p = {.field_mask  = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                                                 UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE,
                                  .length      = len,
                                  .memory_type = UCS_MEMORY_TYPE_CUDA};
        ucs_status_t status;
        CU_CHECK(cu.alloc(&b->alloc[i], len));
        p.address = (void*)b->alloc[i];
        status    = ucp_mem_map(me.context, &p, &b->memh[i]);
        if (status != UCS_OK) {
            die("ucp_mem_map of %zu bytes of GPU memory: %s", len, ucs_status_string(status));
        }
    }
}

static void blocks_free(blocks_t *b)
{
    for (int i = 0; i < b->nallocs; ++i) {
        ucp_mem_unmap(me.context, b->memh[i]);
        CU_CHECK(cu.free(b->alloc[i]));
    }
    free(b->alloc);
    free(b->memh);
    memset(b, 0, sizeof(*b));
}

static CUdeviceptr block_addr(const blocks_t *b, size_t i)
{
    return (b->nallocs == (int)b->nblocks) ? b->alloc[i] : b->alloc[0] + i * b->block;
}

static ucp_mem_h block_memh(const blocks_t *b, size_t i)
{
    return b->memh[(b->nallocs == (int)b->nblocks) ? i : 0];
}

/* The pattern of word w in block i between initiator source and target at repeat n, for put and get alike. */
static uint32_t pattern(int source, int target, size_t i, int n, size_t w)
{
    uint32_t h = (uint32_t)(n + 1) * 2654435761u ^ (uint32_t)source << 24 ^ (uint32_t)target << 16;
    h ^= (uint32_t)i * 40503u;
    return h + (uint32_t)w * 2246822519u;
}

static void fill_pattern(uint32_t *host, size_t block, int source, int target, size_t i, int n)
{
    for (size_t w = 0; w < block / 4; ++w) {
        host[w] = pattern(source, target, i, n, w);
    }
}

/* Blocks [first, first + count) of b get source's pattern for target: plain synchronous copies, one per
 * allocation (host holds count blocks). */
static void blocks_fill(const blocks_t *b, size_t first, size_t count, int source, int target, int n,
                        uint32_t *host)
{
    int one = (b->nallocs != (int)b->nblocks);
    for (size_t i = 0; i < count; ++i) {
        uint32_t *dst = one ? host + i * (b->block / 4) : host;
        fill_pattern(dst, b->block, source, target, i, n);
        if (!one) {
            CU_CHECK(cu.copy(block_addr(b, first + i), (CUdeviceptr)host, b->block));
        }
    }
    if (one && (count > 0)) {
        CU_CHECK(cu.copy(block_addr(b, first), (CUdeviceptr)host, count * b->block));
    }
}

/* Blocks [first, first + count) of b hold the pattern of initiator and target (the rank whose memory is
 * remote); returns the number of bad blocks. */
static size_t blocks_check(const blocks_t *b, size_t first, size_t count, int source, int target, int n,
                           uint32_t *host, uint32_t *expect)
{
    int one   = (b->nallocs != (int)b->nblocks);
    size_t bad = 0;
    if (one && (count > 0)) {
        CU_CHECK(cu.copy((CUdeviceptr)host, block_addr(b, first), count * b->block));
    }
    for (size_t i = 0; i < count; ++i) {
        const uint32_t *got = one ? host + i * (b->block / 4) : host;
        if (!one) {
            CU_CHECK(cu.copy((CUdeviceptr)host, block_addr(b, first + i), b->block));
        }
        fill_pattern(expect, b->block, source, target, i, n);
        if (memcmp(got, expect, b->block & ~(size_t)3)) {
            if (bad++ == 0) {
                fprintf(stderr, "cux_blocks: rank %d: block %zu of rank %d -> rank %d (repeat %d) holds wrong data\n",
                        me.rank, i, source, target, n);
            }
        }
    }
    return bad;
}

/* One target's exposed allocations as an initiator sees them: base addresses and unpacked keys. */
typedef struct {
    int         many;    /* one allocation per block (base[i], rkey[i]); else base[0] holds every slot */
    int         nallocs;
    uint64_t    *base;
    ucp_rkey_h  *rkey;
} remote_t;

/* Where this rank's block i of a transfer lands at target t (its slot in a shared allocation, or its own), and the
 * key that reaches it. */
static uint64_t remote_block(const remote_t *remote, int t, size_t count, size_t i, size_t block, ucp_rkey_h *rkey)
{
    int ri = remote[t].many ? (int)i : 0;

    *rkey = remote[t].rkey[ri];
    return remote[t].base[ri] + (remote[t].many ? 0 : (slot_of(me.rank, t) * count + i) * block);
}

/* Packs the keys of b's allocations, exchanges them, and unpacks the ones of each target this rank sends to. */
static double exchange_keys(const blocks_t *b, int many, size_t count, remote_t *remote)
{
    size_t cap = 16, len = sizeof(int32_t), *lens;
    char *msg  = xalloc(cap, 1);
    void **all;
    double t0;

    memcpy(msg, &b->nallocs, sizeof(int32_t));
    for (int i = 0; i < b->nallocs; ++i) {
        void *packed;
        size_t packed_len;
        uint64_t base = b->alloc[i];
        uint32_t l32;
        ucs_status_t status = ucp_rkey_pack(me.context, b->memh[i], &packed, &packed_len);
        if (status != UCS_OK) {
            die("ucp_rkey_pack: %s", ucs_status_string(status));
        }
        if (len + 12 + packed_len > cap) {
            cap = 2 * (len + 12 + packed_len);
            msg = xrealloc(msg, cap);
        }
        l32 = packed_len;
        memcpy(msg + len, &base, 8);
        memcpy(msg + len + 8, &l32, 4);
        memcpy(msg + len + 12, packed, packed_len);
        len += 12 + packed_len;
        ucp_rkey_buffer_release(packed);
    }
    allgather(msg, len, &all, &lens);
    free(msg);

    t0 = now_us();
    for (int t = 0; t < opt.nprocs; ++t) {
        const char *p = all[t];
        int32_t nallocs;
        if (!sends_to(me.rank, t)) {
            continue;
        }
        memcpy(&nallocs, p, sizeof(nallocs));
        p += sizeof(nallocs);
        /* only the allocations of this rank's slot */
        int first        = many ? slot_of(me.rank, t) * (int)count : 0;
        int mine         = many ? (int)count : nallocs;
        remote[t].many    = many;
        remote[t].nallocs = mine;
        remote[t].base    = xalloc(mine, sizeof(uint64_t));
        remote[t].rkey    = xalloc(mine, sizeof(ucp_rkey_h));
        for (int i = 0; i < nallocs; ++i) {
            uint32_t l32;
            memcpy(&l32, p + 8, 4);
            if ((i >= first) && (i < first + mine)) {
                ucs_status_t status;
                memcpy(&remote[t].base[i - first], p, 8);
                status = ucp_ep_rkey_unpack(me.eps[t], p + 12, &remote[t].rkey[i - first]);
                if (status != UCS_OK) {
                    die("ucp_ep_rkey_unpack: %s", ucs_status_string(status));
                }
            }
            p += 12 + l32;
        }
    }
    allgather_free(all, lens);
    return now_us() - t0;
}

static void remote_release(remote_t *remote)
{
    for (int t = 0; t < opt.nprocs; ++t) {
        for (int i = 0; i < remote[t].nallocs; ++i) {
            ucp_rkey_destroy(remote[t].rkey[i]);
        }
        free(remote[t].base);
        free(remote[t].rkey);
        memset(&remote[t], 0, sizeof(remote[t]));
    }
}

static void wait_request(void *request, const char *what)
{
    ucs_status_t status;
    if (UCS_PTR_IS_ERR(request)) {
        die("%s: %s", what, ucs_status_string(UCS_PTR_STATUS(request)));
    } else if (request == NULL) {
        return;
    }
    while ((status = ucp_request_check_status(request)) == UCS_INPROGRESS) {
        ucp_worker_progress(me.worker);
    }
    ucp_request_free(request);
    if (status != UCS_OK) {
        die("%s: %s", what, ucs_status_string(status));
    }
}

/* The requests of one transfer: how many UCP returned, and how many completed since. */
typedef struct {
    size_t       posted, done;
    ucs_status_t status;
} transfer_reqs_t;

static void transfer_req_done(void *request, ucs_status_t status, void *arg)
{
    transfer_reqs_t *reqs = arg;
    ++reqs->done;
    if (status != UCS_OK) {
        reqs->status = status;
    }
    ucp_request_free(request);
}

static void flush_worker(void)
{
    ucp_request_param_t param = {.op_attr_mask = 0};
    wait_request(ucp_worker_flush_nbx(me.worker, &param), "ucp_worker_flush_nbx");
}

/* -G: one target's blocks as UCP's scatter-gather lists, kept until the transfer is complete (UCP does not copy
 * the arrays). */
typedef struct {
    void       **buffers;
    size_t     *lengths;
    ucp_mem_h  *memhs;
    uint64_t   *remote_addrs;
    ucp_rkey_h *rkeys;
} sgl_lists_t;

static void sgl_lists_free(sgl_lists_t *l)
{
    free(l->buffers);
    free(l->lengths);
    free(l->memhs);
    free(l->remote_addrs);
    free(l->rkeys);
}

static void transfer_req_done(void *request, ucs_status_t status, void *arg);

/* The operation's name in the report: -G's puts are "put-sgl". */
static const char *op_name(int put)
{
    return !put ? "get" : opt.sgl ? "put-sgl" : "put";
}

static void post_sgl(sgl_lists_t *l, int t, const blocks_t *local, const remote_t *remote, size_t count,
                     int peer_index, transfer_reqs_t *reqs)
{
#ifdef ucp_dt_make_sgl
    ucp_request_param_t param;
    ucp_dt_local_sgl_t lsgl;
    ucp_dt_remote_sgl_t rsgl;
    void *request;

    l->buffers      = malloc(count * sizeof(*l->buffers));
    l->lengths      = malloc(count * sizeof(*l->lengths));
    l->memhs        = malloc(count * sizeof(*l->memhs));
    l->remote_addrs = malloc(count * sizeof(*l->remote_addrs));
    l->rkeys        = malloc(count * sizeof(*l->rkeys));
    if (!l->buffers || !l->lengths || !l->memhs || !l->remote_addrs || !l->rkeys) {
        die("out of memory for a list of %zu blocks", count);
    }
    for (size_t i = 0; i < count; ++i) {
        size_t li          = peer_index * count + i;
        l->buffers[i]      = (void*)block_addr(local, li);
        l->lengths[i]      = local->block;
        l->memhs[i]        = block_memh(local, li);
        l->remote_addrs[i] = remote_block(remote, t, count, i, local->block, &l->rkeys[i]);
    }
    lsgl.field_mask      = UCP_DT_LOCAL_SGL_FIELD_BUFFERS | UCP_DT_LOCAL_SGL_FIELD_LENGTHS |
                           UCP_DT_LOCAL_SGL_FIELD_MEMHS;
    lsgl.buffers         = l->buffers;
    lsgl.lengths         = l->lengths;
    lsgl.memhs           = l->memhs;
    lsgl.counts          = NULL;
    lsgl.strides         = NULL;
    rsgl.field_mask      = UCP_DT_REMOTE_SGL_FIELD_REMOTE_ADDRS | UCP_DT_REMOTE_SGL_FIELD_LENGTHS |
                           UCP_DT_REMOTE_SGL_FIELD_RKEYS;
    rsgl.remote_addrs    = l->remote_addrs;
    rsgl.lengths         = l->lengths;
    rsgl.rkeys           = l->rkeys;
    param.op_attr_mask   = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_REMOTE_DATATYPE | UCP_OP_ATTR_FIELD_REMOTE |
                           UCP_OP_ATTR_FIELD_REMOTE_COUNT | UCP_OP_ATTR_FIELD_MEMORY_TYPE |
                           UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.datatype        = ucp_dt_make_sgl();
    param.remote_datatype = ucp_dt_make_sgl();
    param.remote          = &rsgl;
    param.remote_count    = count;
    param.memory_type     = UCS_MEMORY_TYPE_CUDA;
    param.cb.send         = transfer_req_done;
    param.user_data       = reqs;
    request = ucp_put_nbx(me.eps[t], &lsgl, count, UCP_REMOTE_ADDR_INVALID, UCP_RKEY_INVALID, &param);
    if (UCS_PTR_IS_ERR(request)) {
        die("ucp_put_nbx of a %zu-block list: %s", count, ucs_status_string(UCS_PTR_STATUS(request)));
    }
    reqs->posted += (request != NULL);
#else
    die("-G needs UCX 1.22+");
#endif
}

/* Transfers whose worker flush returned before every operation posted ahead of it had completed. */
static uint64_t early_flushes;

/* Posts every block to every target, then flushes. Returns the posting time; *total the whole, *cpu the CPU time
 * the process spent meanwhile (every thread: a transport's own progress thread counts too).
 *
 * The flush alone is not trusted: UCP's worker flush (1.13 to 1.22 at least) returns as soon as no operation it
 * has sent is outstanding and every transport's interface flush says done, and operations that still wait in a
 * transport's pending queue (a shared-memory FIFO full of other ranks' traffic) are neither. Every request is
 * counted to its completion instead; when the flush came first, the rest is awaited and the worker flushed
 * again, so that puts sent late complete at their targets too. */
static double transfer(int put, const blocks_t *local, const remote_t *remote, size_t count, double *total,
                       double *cpu)
{
    double c0 = cpu_us(), t0 = now_us(), t1;
    transfer_reqs_t reqs = {0, 0, UCS_OK};
    ucp_request_param_t param;
    sgl_lists_t *lists = opt.sgl ? xalloc(opt.nprocs, sizeof(*lists)) : NULL;
    int peer_index = 0;

    for (int t = 0; t < opt.nprocs; ++t) {
        if (!sends_to(me.rank, t)) {
            continue;
        }
        if (opt.sgl) {
            post_sgl(&lists[peer_index], t, local, remote, count, peer_index, &reqs);
            ++peer_index;
            continue;
        }
        for (size_t i = 0; i < count; ++i) {
            size_t li       = peer_index * count + i;
            ucp_rkey_h rkey;
            uint64_t raddr  = remote_block(remote, t, count, i, local->block, &rkey);
            void *request;
            param.op_attr_mask = UCP_OP_ATTR_FIELD_MEMORY_TYPE | UCP_OP_ATTR_FIELD_MEMH |
                                 UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
            param.memory_type  = UCS_MEMORY_TYPE_CUDA;
            param.memh         = block_memh(local, li);
            param.cb.send      = transfer_req_done;
            param.user_data    = &reqs;
            request = put ? ucp_put_nbx(me.eps[t], (void*)block_addr(local, li), local->block, raddr, rkey, &param)
                          : ucp_get_nbx(me.eps[t], (void*)block_addr(local, li), local->block, raddr, rkey, &param);
            if (UCS_PTR_IS_ERR(request)) {
                die("ucp_%s_nbx: %s", put ? "put" : "get", ucs_status_string(UCS_PTR_STATUS(request)));
            }
            reqs.posted += (request != NULL); /* freed by transfer_req_done */
        }
        ++peer_index;
    }
    t1 = now_us();
    flush_worker();
    if (reqs.done < reqs.posted) {
        ++early_flushes;
        while (reqs.done < reqs.posted) {
            ucp_worker_progress(me.worker);
        }
        flush_worker();
    }
    if (reqs.status != UCS_OK) {
        die("ucp_%s_nbx completed with %s", put ? "put" : "get", ucs_status_string(reqs.status));
    }
    *total = now_us() - t0;
    *cpu   = cpu_us() - c0;
    for (int i = 0; opt.sgl && (i < peer_index); ++i) {
        sgl_lists_free(&lists[i]);
    }
    free(lists);
    return t1 - t0;
}

typedef struct {
    double total, post, unpack, cpu;
    uint64_t bad, early; /* blocks with wrong data; transfers whose worker flush came before their operations */
} timing_t;

static double median(double *v, int n)
{
    qsort(v, n, sizeof(*v), cux_bench_cmp_double);
    return (n % 2) ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* One repeat: fill, transfer, check; the slowest initiator's time and the posting time per block, over ranks. */
static timing_t repeat_once(int put, size_t count, blocks_t *local, blocks_t *exposed,
                            remote_t *remote, int n, uint32_t *host, uint32_t *expect, double unpack, int counted)
{
    int ntargets = 0;
    timing_t mine = {.unpack = unpack}, out = {0};
    uint64_t early = early_flushes;
    void **all;
    size_t *lens;
    int initiators = 0;

    for (int t = 0; t < opt.nprocs; ++t) {
        if (sends_to(me.rank, t)) {
            if (put) {
                blocks_fill(local, ntargets * count, count, me.rank, t, n, host);
            }
            ++ntargets;
        }
        if (!put && sends_to(t, me.rank)) {
            blocks_fill(exposed, slot_of(t, me.rank) * count, count, t, me.rank, n, host);
        }
    }
    CU_CHECK(cu.ctx_sync());
    barrier();
    if (ntargets > 0) {
        if (drvcount.enable && counted) {
            drvcount.enable(1);
        }
        mine.post  = transfer(put, local, remote, count, &mine.total, &mine.cpu) / (ntargets * count);
        mine.cpu  /= ntargets * count;
        mine.early = early_flushes - early;
        if (drvcount.enable) {
            drvcount.enable(0);
        }
    }
    barrier();
    ntargets = 0;
    for (int t = 0; t < opt.nprocs; ++t) {
        if (put && sends_to(t, me.rank)) {
            mine.bad += blocks_check(exposed, slot_of(t, me.rank) * count, count, t, me.rank, n, host, expect);
        }
        if (sends_to(me.rank, t)) {
            if (!put) {
                mine.bad += blocks_check(local, ntargets * count, count, me.rank, t, n, host, expect);
            }
            ++ntargets;
        }
    }
    allgather(&mine, sizeof(mine), &all, &lens);
    for (int r = 0; r < opt.nprocs; ++r) {
        const timing_t *t = all[r];
        out.bad   += t->bad;
        out.early += t->early;
        if (t->total > 0) {
            out.total   = (t->total > out.total) ? t->total : out.total;
            out.post   += t->post;
            out.cpu    += t->cpu;
            out.unpack += t->unpack;
            ++initiators;
        }
    }
    out.post   /= initiators;
    out.cpu    /= initiators;
    out.unpack /= initiators;
    allgather_free(all, lens);
    return out;
}

static int run_case(int put, int many, size_t size, size_t count, uint32_t *host, uint32_t *expect)
{
    int nsrc = sources_of(me.rank), ntargets = 0;
    size_t exposure, max_exposure = 0;
    blocks_t local, exposed;
    remote_t *remote = xalloc(opt.nprocs, sizeof(*remote));
    double *totals   = xalloc(opt.repeats + opt.first_repeats, sizeof(double));
    double *posts    = xalloc(opt.repeats, sizeof(double));
    double *cpus     = xalloc(opt.repeats, sizeof(double));
    double *firsts   = xalloc(opt.first_repeats + 1, sizeof(double));
    double *unpacks  = xalloc(opt.first_repeats + 1, sizeof(double));
    uint64_t bad     = 0, early = 0;
    timing_t t;
    double unpack;
    int initiators = 0;

    for (int r = 0; r < opt.nprocs; ++r) {
        exposure     = (size_t)sources_of(r) * count * size;
        max_exposure = (exposure > max_exposure) ? exposure : max_exposure;
        ntargets    += sends_to(me.rank, r);
        initiators  += sends_to(r, (r + 1) % opt.nprocs); /* every initiator sends to its successor */
    }
    if (max_exposure > opt.max_bytes) {
        if (me.rank == 0) {
            printf("%s %-4s %8zu x %5zu: skipped, %zu MB exposed on a rank is over -M\n", op_name(put),
                   many ? "many" : "one", size, count, max_exposure >> 20);
            fflush(stdout);
        }
        free(remote), free(totals), free(posts), free(cpus), free(firsts), free(unpacks);
        return 0;
    }

    blocks_alloc(&local, size, ntargets * count, many);
    blocks_alloc(&exposed, size, nsrc * count, many);
    unpack = exchange_keys(&exposed, many, count, remote);

    /* warm-up (connects, maps), then the timed repeats on the same memory */
    t      = repeat_once(put, count, &local, &exposed, remote, 0, host, expect, unpack, 0);
    bad   += t.bad;
    early += t.early;
    for (int n = 0; n < opt.repeats; ++n) {
        t         = repeat_once(put, count, &local, &exposed, remote, n + 1, host, expect, 0, 1);
        totals[n] = t.total;
        posts[n]  = t.post;
        cpus[n]   = t.cpu;
        bad      += t.bad;
        early    += t.early;
    }
    /* first transfers: new target memory every time */
    for (int n = 0; n < opt.first_repeats; ++n) {
        remote_release(remote);
        blocks_free(&exposed);
        blocks_alloc(&exposed, size, nsrc * count, many);
        unpack     = exchange_keys(&exposed, many, count, remote);
        t          = repeat_once(put, count, &local, &exposed, remote, opt.repeats + n + 1, host, expect,
                                 unpack, 0);
        firsts[n]  = t.total;
        unpacks[n] = t.unpack;
        bad       += t.bad;
        early     += t.early;
    }
    remote_release(remote);
    barrier(); /* no rank frees memory a peer still reads */
    blocks_free(&exposed);
    blocks_free(&local);

    if (me.rank == 0) {
        double warm   = median(totals, opt.repeats);
        double post   = median(posts, opt.repeats);
        double cpu    = median(cpus, opt.repeats);
        double spread = (totals[opt.repeats - 1] - totals[0]) / warm * 100; /* sorted by median() */
        double bytes  = (double)initiators * (opt.all_to_all ? opt.nprocs - 1 : 1) * count * size;
        double first  = opt.first_repeats ? median(firsts, opt.first_repeats) : 0;
        double unp    = opt.first_repeats ? median(unpacks, opt.first_repeats) : 0;
        int allocs    = many ? (int)count : 1; /* target allocations one initiator touches, per target */
        double per    = opt.first_repeats ? (first - warm) / allocs : 0;
        printf("%s %-4s %8zu x %5zu: %8.1f us, %7.2f GB/s, %10.0f blocks/s, post %6.2f us/block, cpu %6.2f "
               "us/block, spread %4.1f%%", op_name(put), many ? "many" : "one", size, count, warm,
               bytes / warm / 1e3, bytes / size / warm * 1e6, post, cpu, spread);
        if (opt.first_repeats) {
            printf(", first %9.1f us (%7.1f us per new allocation, unpack %7.1f us)", first, per, unp);
        }
        if (early) {
            printf(", UCP's flush came first %" PRIu64 " times", early);
        }
        printf(", data %s\n", bad ? "BAD" : "ok");
        if (drvcount.enable) {
            printf("DRVCALLS op=%s layout=%s size=%zu count=%zu per block:", op_name(put),
                   many ? "many" : "one", size, count);
            drvcount.report(stdout, (double)opt.repeats * ntargets * count);
            printf("\n");
        }
        printf("RESULT op=%s layout=%s size=%zu count=%zu ranks=%d initiators=%d pattern=%s time_us=%.2f "
               "gbps=%.4f blocks_per_s=%.0f post_us=%.4f cpu_us=%.4f spread_pct=%.2f first_us=%.2f "
               "first_per_alloc_us=%.2f unpack_us=%.2f flush_early=%" PRIu64 " data=%s\n",
               op_name(put), many ? "many" : "one", size, count, opt.nprocs, initiators,
               opt.all_to_all ? "all" : "one", warm, bytes / warm / 1e3, bytes / size / warm * 1e6, post, cpu, spread,
               first, per, unp, early, bad ? "bad" : "ok");
        fflush(stdout);
    }
    free(remote), free(totals), free(posts), free(cpus), free(firsts), free(unpacks);
    return bad != 0;
}

static void rank_setup(int device)
{
    ucp_params_t params = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_RMA};
    ucp_worker_params_t wparams = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                                   .thread_mode = UCS_THREAD_MODE_SINGLE};
    ucp_address_t *address;
    size_t address_len, *lens;
    void **all;
    CUcontext ctx;
    ucs_status_t status;

    CU_CHECK(cu.ctx_retain(&ctx, device));
    CU_CHECK(cu.ctx_set(ctx));
    if ((status = ucp_init(&params, NULL, &me.context)) != UCS_OK ||
        (status = ucp_worker_create(me.context, &wparams, &me.worker)) != UCS_OK ||
        (status = ucp_worker_get_address(me.worker, &address, &address_len)) != UCS_OK) {
        die("UCP setup: %s", ucs_status_string(status));
    }
    allgather(address, address_len, &all, &lens);
    ucp_worker_release_address(me.worker, address);
    progress_worker = me.worker;
    me.eps = xalloc(opt.nprocs, sizeof(*me.eps));
    for (int r = 0; r < opt.nprocs; ++r) {
        ucp_ep_params_t ep_params = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS,
                                     .address    = all[r]};
        if ((r != me.rank) && (status = ucp_ep_create(me.worker, &ep_params, &me.eps[r])) != UCS_OK) {
            die("ucp_ep_create: %s", ucs_status_string(status));
        }
    }
    allgather_free(all, lens);
}

static void rank_teardown(void)
{
    ucp_request_param_t param = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = UCP_EP_CLOSE_FLAG_FORCE};
    barrier();
    for (int r = 0; r < opt.nprocs; ++r) {
        if (me.eps[r] != NULL) {
            void *request = ucp_ep_close_nbx(me.eps[r], &param);
            if (!UCS_PTR_IS_ERR(request) && (request != NULL)) {
                while (ucp_request_check_status(request) == UCS_INPROGRESS) {
                    ucp_worker_progress(me.worker);
                }
                ucp_request_free(request);
            }
        }
    }
    progress_worker = NULL;
    barrier();
    free(me.eps);
    ucp_worker_destroy(me.worker);
    ucp_cleanup(me.context);
}

/* The most bytes one slot (the blocks of one initiator and target) holds: the host copy of a whole slot. */
static size_t max_bytes_per_slot(void)
{
    size_t most = 0;
    for (int s = 0; s < opt.nsizes; ++s) {
        for (int k = 0; k < opt.ncounts; ++k) {
            size_t bytes = opt.sizes[s] * opt.counts[k];
            if ((bytes > most) && (bytes <= opt.max_bytes)) {
                most = bytes;
            }
        }
    }
    return most;
}

/* GPU memory in use on this rank's device, by every process, in MiB. */
static double device_used_mib(void)
{
    size_t free_bytes, total;
    CU_CHECK(cu.mem_info(&free_bytes, &total));
    return (double)(total - free_bytes) / (1 << 20);
}

/* -F: see the top of the file. Only ranks 0 and 1 take part. */
static int freed_memory_check(void)
{
    blocks_t large = {0}, small = {0}, none = {0}, local = {0};
    remote_t *remote_large = xalloc(opt.nprocs, sizeof(*remote_large));
    remote_t *remote_small = xalloc(opt.nprocs, sizeof(*remote_small));
    double before = 0, mapped = 0, after_free = 0, now = 0, t_free = 0, back_after = -1;
    double total, cpu;
    int reads = 0;

    barrier();
    if (me.rank == 0) {
        before = device_used_mib();
        blocks_alloc(&local, 4096, 1, 0);
    }
    if (me.rank == 1) {
        blocks_alloc(&large, opt.freed_size, 1, 0);
        blocks_alloc(&small, 4096, 1, 0);
    }
    exchange_keys((me.rank == 1) ? &large : &none, 0, 1, remote_large);
    exchange_keys((me.rank == 1) ? &small : &none, 0, 1, remote_small);
    if (me.rank == 0) {
        transfer(0, &local, remote_large, 1, &total, &cpu); /* maps the large allocation */
        mapped = device_used_mib();
        remote_release(remote_large);                 /* done with it, as an application would be */
    }
    barrier();
    if (me.rank == 1) {
        blocks_free(&large);
    }
    barrier();
    if (me.rank == 0) {
        t_free     = now_us();
        after_free = device_used_mib();
        printf("FREED-STEP size=%zu t=0 used_mib=%.0f (before %.0f, mapped %.0f)\n", opt.freed_size,
               after_free, before, mapped);
        while ((now = (now_us() - t_free) / 1e6) < opt.freed_seconds) {
            struct timespec pause = {0, 100 * 1000 * 1000};
            double used;
            nanosleep(&pause, NULL);
            transfer(0, &local, remote_small, 1, &total, &cpu);
            ++reads;
            used = device_used_mib();
            if ((back_after < 0) && (used < before + opt.freed_size / 2.0 / (1 << 20) + 8)) {
                back_after = (now_us() - t_free) / 1e6;
                printf("FREED-STEP size=%zu t=%.1f used_mib=%.0f: back\n", opt.freed_size, back_after, used);
            }
        }
        printf("FREED size_mib=%.0f before_mib=%.0f mapped_mib=%.0f after_free_mib=%.0f end_mib=%.0f "
               "back_after_s=%s%.1f reads=%d\n", opt.freed_size / 1048576.0, before, mapped, after_free,
               device_used_mib(), (back_after < 0) ? ">" : "", (back_after < 0) ? opt.freed_seconds : back_after,
               reads);
        fflush(stdout);
        remote_release(remote_small);
        blocks_free(&local);
    }
    barrier();
    if (me.rank == 1) {
        blocks_free(&small);
    }
    free(remote_large), free(remote_small);
    return 0;
}

static int rank_main(int ngpus)
{
    size_t max_size = 0;
    uint32_t *host, *expect;
    int failed = 0;

    rank_setup(me.rank % ngpus);
    drvcount_open();
    if (opt.freed_size > 0) {
        failed = freed_memory_check();
        rank_teardown();
        return failed;
    }
    for (int s = 0; s < opt.nsizes; ++s) {
        max_size = (opt.sizes[s] > max_size) ? opt.sizes[s] : max_size;
    }
    host   = xalloc(max_bytes_per_slot(), 1);
    expect = xalloc(max_size, 1);
    for (int o = 0; o < 2; ++o) {
        for (int l = 0; l < 2; ++l) {
            for (int s = 0; s < opt.nsizes; ++s) {
                for (int k = 0; k < opt.ncounts; ++k) {
                    if ((opt.ops & (1 << o)) && (opt.layouts & (1 << l))) {
                        failed |= run_case(o == 0, l == 1, opt.sizes[s], opt.counts[k], host, expect);
                    }
                }
            }
        }
    }
    free(host);
    free(expect);
    rank_teardown();
    return failed;
}

int main(int argc, char **argv)
{
    int *fds, ngpus, failed;
    pid_t *pids;

    parse_options(argc, argv);
    if (opt.freed_size > 0) {
        opt.nprocs = 2;
    }
    fds  = xalloc(opt.nprocs, sizeof(*fds));
    pids = xalloc(opt.nprocs, sizeof(*pids));
    for (int r = 0; r < opt.nprocs; ++r) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
            die("socketpair: %s", strerror(errno));
        }
        pids[r] = fork();
        if (pids[r] == 0) {
            for (int q = 0; q < r; ++q) {
                close(fds[q]);
            }
            close(sv[0]);
            coord_fd = sv[1];
            me.rank  = r;
            ngpus    = cuda_device_count(); /* after the fork: the driver does not survive one */
            if ((opt.ngpus > 0) && (opt.ngpus < ngpus)) {
                ngpus = opt.ngpus;
            }
            if (opt.freed_size > 0) {
                ngpus = 1;
                opt.nprocs = 2;
            }
            if ((r == 0) && (opt.freed_size > 0)) {
                printf("cux_blocks: freed-memory check, 2 processes on GPU0, %zu bytes, %.1f s\n", opt.freed_size,
                       opt.freed_seconds);
                fflush(stdout);
            } else if (r == 0) {
                printf("cux_blocks: %d processes on %d GPU%s, %s, %d timed + %d first transfers per case\n",
                       opt.nprocs, ngpus, (ngpus == 1) ? "" : "s",
                       opt.all_to_all ? "every rank to every other" : "rank 0 to rank 1", opt.repeats,
                       opt.first_repeats);
                fflush(stdout);
            }
            exit(rank_main(ngpus));
        }
        close(sv[1]);
        fds[r] = sv[0];
    }
    failed = coordinate(fds, pids);
    printf("cux_blocks: %s\n", failed ? "FAILED" : "done");
    return failed;
}
