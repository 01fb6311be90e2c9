/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX's device API over cuda_ipc, end to end (issue 33): two processes (GPU0 and GPU1, or both on GPU0), UCP
 * with UCP_FEATURE_DEVICE as an application uses it. The initiator's kernels put into the target's GPU memory at
 * thread, warp and block level (sizes and offsets of every alignment), then signal a counter there; the
 * target's kernel waits for the count and checks every byte before the host looks (a signal that overtook its
 * data fails); kernels also read the target's memory through ucp_device_get_ptr. Every byte is checked.
 *
 *   cux_device_api_check [--bench [MAX]]  (UCX_TLS etc. from the environment; the module is whatever UCX loads)
 *
 * --bench times instead of checking: many small puts from one kernel, and large puts, per level (cudaEvent,
 * median of 5), puts of up to MAX bytes (default: all); the same build's run without it is the data check that
 * makes its figures count.
 * Built with nvcc against an installed UCX 1.21+ (gpu-host/run device-api); the device code comes from
 * UCX's own cuda_ipc.cuh or, for a UCX built without CUDA, from include/uct/cuda/cuda_ipc/cuda_ipc.cuh here.
 * Prints "N passed, M failed" last; exit status 0 only if nothing failed.
 */
#include <ucp/api/ucp.h>
#include <ucp/api/device/ucp_host.h>
#include <ucp/api/device/ucp_device_impl.h>

#include <cuda_runtime.h>
#include <algorithm>
#include <iterator>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK_CUDA(_call) \
    do { \
        cudaError_t _e = (_call); \
        if (_e != cudaSuccess) { \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #_call, cudaGetErrorString(_e)); \
            exit(2); \
        } \
    } while (0)

#define CHECK_UCS(_call) \
    do { \
        ucs_status_t _s = (_call); \
        if (_s != UCS_OK) { \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #_call, ucs_status_string(_s)); \
            exit(2); \
        } \
    } while (0)

namespace {

const size_t region_size    = (4u << 20) + 256; /* data; the counter sits after it */
const size_t counter_offset = region_size;
size_t bench_max            = SIZE_MAX; /* --bench MAX */
int sock                    = -1;
ucp_worker_h worker;

__host__ __device__ uint8_t pattern(uint32_t seed, size_t i)
{
    uint32_t x = seed * 2654435761u + (uint32_t)i * 40503u + (uint32_t)(i >> 16);
    return (uint8_t)(x ^ (x >> 13) ^ (x >> 24));
}

__global__ void fill_kernel(uint8_t *p, size_t n, uint32_t seed)
{
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        p[i] = pattern(seed, i);
    }
}

/* Socket messages, with the worker progressed while waiting (the peer may need us for wire-up). */
void send_all(const void *buf, size_t len)
{
    const char *p = (const char*)buf;
    while (len > 0) {
        ssize_t n = send(sock, p, len, 0);
        if (n <= 0) {
            perror("send");
            exit(2);
        }
        p += n;
        len -= n;
    }
}

void recv_all(void *buf, size_t len)
{
    char *p = (char*)buf;
    while (len > 0) {
        ssize_t n = recv(sock, p, len, MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= n;
        } else if ((n == 0) || ((errno != EAGAIN) && (errno != EWOULDBLOCK))) {
            fprintf(stderr, "peer gone\n");
            exit(2);
        } else if (worker != nullptr) {
            ucp_worker_progress(worker);
        }
    }
}

void send_blob(const void *buf, size_t len)
{
    uint64_t n = len;
    send_all(&n, sizeof(n));
    send_all(buf, len);
}

std::vector<char> recv_blob()
{
    uint64_t n;
    recv_all(&n, sizeof(n));
    std::vector<char> v(n);
    recv_all(v.data(), n);
    return v;
}

void flush_ep(ucp_ep_h ep)
{
    ucp_request_param_t param = {};
    void *req                 = ucp_ep_flush_nbx(ep, &param);
    if (UCS_PTR_IS_ERR(req)) {
        CHECK_UCS(UCS_PTR_STATUS(req));
    }
    if (req != nullptr) {
        while (ucp_request_check_status(req) == UCS_INPROGRESS) {
            ucp_worker_progress(worker);
        }
        CHECK_UCS(ucp_request_check_status(req));
        ucp_request_free(req);
    }
}

struct put_case {
    size_t src_off, dst_off, length;
};

/* Offsets of every alignment against each other, lengths across the word sizes and the four-words unroll. */
std::vector<put_case> put_cases()
{
    std::vector<put_case> v;
    const size_t lengths[] = {1, 3, 8, 15, 16, 17, 64, 100, 511, 4096, 4099, 65536 + 7, 1u << 20, (3u << 20) + 5};
    /* src and dst agreeing modulo 16, 8, 4, 2 and nothing */
    const size_t offs[][2] = {{0, 0}, {1, 1}, {8, 0}, {3, 5}, {16, 32}, {4, 12}, {7, 129}, {2, 6}, {1, 4}};
    for (size_t len : lengths) {
        for (auto &o : offs) {
            v.push_back({o[0], o[1], len});
        }
    }
    return v;
}

template<ucs_device_level_t level>
__global__ void put_kernel(ucp_device_local_mem_list_h local, ucp_device_remote_mem_list_h remote, put_case c,
                           int signal, ucs_status_t *status)
{
    ucs_status_t s = ucp_device_put<level>(local, 0, c.src_off, remote, 0, c.dst_off, c.length, 0, 0, nullptr);
    if ((s == UCS_OK) && signal) {
        s = ucp_device_counter_inc<level>(1, remote, 1, 0, 0, 0, nullptr);
    }
    if (s != UCS_OK) {
        *status = s;
    }
}

/* Many puts in one kernel: count of length each, to consecutive places. */
template<ucs_device_level_t level>
__global__ void many_puts_kernel(ucp_device_local_mem_list_h local, ucp_device_remote_mem_list_h remote,
                                 size_t length, unsigned count, ucs_status_t *status)
{
    for (unsigned i = 0; i < count; ++i) {
        size_t off     = (size_t)i * length % (region_size - length);
        ucs_status_t s = ucp_device_put<level>(local, 0, off, remote, 0, off, length, 0, 0, nullptr);
        if (s != UCS_OK) {
            *status = s;
        }
    }
}

/* Reads the peer's memory through the pointer the device API gives; per-thread copy into local memory. */
__global__ void get_kernel(ucp_device_remote_mem_list_h remote, size_t off, size_t length, uint8_t *dst,
                           ucs_status_t *status)
{
    void *p        = nullptr;
    ucs_status_t s = ucp_device_get_ptr(remote, 0, &p);
    if (s != UCS_OK) {
        *status = s;
        return;
    }
    const uint8_t *src = (const uint8_t*)p + off;
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < length; i += gridDim.x * blockDim.x) {
        dst[i] = src[i];
    }
}

/* Target side: wait for the count, then check the bytes of the put (a signal ahead of its data is a failure). */
__global__ void wait_and_check_kernel(const uint8_t *region, put_case c, uint32_t seed, unsigned long long *bad,
                                      int *timed_out)
{
    __shared__ int go;
    if (threadIdx.x == 0) {
        long long start = clock64();
        go              = 0;
        while (ucp_device_counter_read(region + counter_offset) < 1) {
            if (clock64() - start > 20000000000ll) { /* some 10 s */
                *timed_out = 1;
                break;
            }
        }
        go = !*timed_out;
    }
    __syncthreads();
    if (!go) {
        return;
    }
    for (size_t i = threadIdx.x; i < c.length; i += blockDim.x) {
        if (region[c.dst_off + i] != pattern(seed, c.src_off + i)) {
            atomicAdd(bad, 1ull);
        }
    }
}

int passed = 0, failed = 0;

void verdict(bool ok, const char *what)
{
    if (ok) {
        ++passed;
    } else {
        ++failed;
        printf("FAIL %s\n", what);
        fflush(stdout);
    }
}

const char *level_name(ucs_device_level_t l)
{
    return (l == UCS_DEVICE_LEVEL_THREAD) ? "thread" : (l == UCS_DEVICE_LEVEL_WARP) ? "warp" : "block";
}

unsigned level_threads(ucs_device_level_t l)
{
    return (l == UCS_DEVICE_LEVEL_THREAD) ? 1 : (l == UCS_DEVICE_LEVEL_WARP) ? 32 : 256;
}

/* Calls launch(std::integral_constant<ucs_device_level_t, L>) for the level l names: kernels are templates of it. */
template<typename F> void at_level(ucs_device_level_t l, F launch)
{
    if (l == UCS_DEVICE_LEVEL_THREAD) {
        launch(std::integral_constant<ucs_device_level_t, UCS_DEVICE_LEVEL_THREAD>());
    } else if (l == UCS_DEVICE_LEVEL_WARP) {
        launch(std::integral_constant<ucs_device_level_t, UCS_DEVICE_LEVEL_WARP>());
    } else {
        launch(std::integral_constant<ucs_device_level_t, UCS_DEVICE_LEVEL_BLOCK>());
    }
}

void launch_put(ucs_device_level_t l, ucp_device_local_mem_list_h local, ucp_device_remote_mem_list_h remote,
                put_case c, int signal, ucs_status_t *status)
{
    at_level(l, [&](auto level) {
        put_kernel<decltype(level)::value><<<1, level_threads(l)>>>(local, remote, c, signal, status);
    });
}

void launch_many(ucs_device_level_t l, ucp_device_local_mem_list_h local, ucp_device_remote_mem_list_h remote,
                 size_t length, unsigned count, ucs_status_t *status)
{
    at_level(l, [&](auto level) {
        many_puts_kernel<decltype(level)::value><<<1, level_threads(l)>>>(local, remote, length, count, status);
    });
}

const ucs_device_level_t levels[] = {UCS_DEVICE_LEVEL_THREAD, UCS_DEVICE_LEVEL_WARP, UCS_DEVICE_LEVEL_BLOCK};

void target(ucp_context_h ctx, ucp_ep_h ep)
{
    uint8_t *region;
    CHECK_CUDA(cudaMalloc(&region, region_size + 64));
    ucp_mem_map_params_t mp = {};
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address    = region;
    mp.length     = region_size + 64;
    ucp_mem_h memh;
    CHECK_UCS(ucp_mem_map(ctx, &mp, &memh));
    void *rkey_buf;
    size_t rkey_len;
    CHECK_UCS(ucp_rkey_pack(ctx, memh, &rkey_buf, &rkey_len));
    uint64_t base = (uint64_t)(uintptr_t)region;
    send_blob(&base, sizeof(base));
    send_blob(rkey_buf, rkey_len);
    ucp_rkey_buffer_release(rkey_buf);

    unsigned long long *bad;
    int *timed_out;
    CHECK_CUDA(cudaMallocManaged(&bad, sizeof(*bad)));
    CHECK_CUDA(cudaMallocManaged(&timed_out, sizeof(*timed_out)));
    cudaStream_t stream;
    CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    for (;;) {
        char op;
        recv_all(&op, 1);
        if (op == 'P') { /* a put with its signal: zero, wait, check */
            put_case c;
            uint32_t seed;
            recv_all(&c, sizeof(c));
            recv_all(&seed, sizeof(seed));
            CHECK_CUDA(cudaMemset(region, 0, region_size + 64));
            CHECK_CUDA(cudaDeviceSynchronize());
            *bad = 0;
            *timed_out = 0;
            wait_and_check_kernel<<<1, 256, 0, stream>>>(region, c, seed, bad, timed_out);
            send_all("r", 1);
            CHECK_CUDA(cudaStreamSynchronize(stream));
            std::vector<uint8_t> host(region_size + 8);
            CHECK_CUDA(cudaMemcpy(host.data(), region, host.size(), cudaMemcpyDeviceToHost));
            uint64_t count;
            memcpy(&count, host.data() + counter_offset, sizeof(count));
            size_t wrong = 0;
            for (size_t i = 0; i < region_size; ++i) {
                bool inside  = (i >= c.dst_off) && (i < c.dst_off + c.length);
                uint8_t want = inside ? pattern(seed, c.src_off + (i - c.dst_off)) : 0;
                wrong += (host[i] != want);
            }
            uint64_t result[4] = {*bad, (uint64_t)*timed_out, wrong, count};
            send_all(result, sizeof(result));
        } else if (op == 'G') { /* fill for the initiator's reads */
            uint32_t seed;
            recv_all(&seed, sizeof(seed));
            fill_kernel<<<256, 256>>>(region, region_size, seed);
            CHECK_CUDA(cudaDeviceSynchronize());
            send_all("r", 1);
        } else {
            break;
        }
    }
    flush_ep(ep);
    CHECK_UCS(ucp_mem_unmap(ctx, memh));
    CHECK_CUDA(cudaFree(region));
}

void initiator(ucp_context_h ctx, ucp_ep_h ep, bool bench)
{
    uint64_t base;
    auto b = recv_blob();
    memcpy(&base, b.data(), sizeof(base));
    auto rkey_buf = recv_blob();
    ucp_rkey_h rkey;
    CHECK_UCS(ucp_ep_rkey_unpack(ep, rkey_buf.data(), &rkey));

    uint8_t *src, *dst;
    const uint32_t seed = 0x5eed;
    CHECK_CUDA(cudaMalloc(&src, region_size));
    CHECK_CUDA(cudaMalloc(&dst, region_size));
    fill_kernel<<<256, 256>>>(src, region_size, seed);
    CHECK_CUDA(cudaDeviceSynchronize());
    ucp_mem_map_params_t mp = {};
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address    = src;
    mp.length     = region_size;
    ucp_mem_h memh;
    CHECK_UCS(ucp_mem_map(ctx, &mp, &memh));

    ucp_device_mem_list_elem_t local_elem = {};
    local_elem.field_mask = UCP_DEVICE_MEM_LIST_ELEM_FIELD_MEMH | UCP_DEVICE_MEM_LIST_ELEM_FIELD_LOCAL_ADDR;
    local_elem.memh       = memh;
    local_elem.local_addr = src;
    ucp_device_mem_list_params_t lp = {};
    lp.field_mask   = UCP_DEVICE_MEM_LIST_PARAMS_FIELD_ELEMENTS | UCP_DEVICE_MEM_LIST_PARAMS_FIELD_ELEMENT_SIZE |
                      UCP_DEVICE_MEM_LIST_PARAMS_FIELD_NUM_ELEMENTS | UCP_DEVICE_MEM_LIST_PARAMS_FIELD_WORKER;
    lp.elements     = &local_elem;
    lp.element_size = sizeof(local_elem);
    lp.num_elements = 1;
    lp.worker       = worker;
    ucp_device_local_mem_list_h local;
    CHECK_UCS(ucp_device_local_mem_list_create(&lp, &local));

    ucp_device_mem_list_elem_t remote_elems[2] = {};
    for (int i = 0; i < 2; ++i) {
        remote_elems[i].field_mask  = UCP_DEVICE_MEM_LIST_ELEM_FIELD_EP | UCP_DEVICE_MEM_LIST_ELEM_FIELD_RKEY |
                                      UCP_DEVICE_MEM_LIST_ELEM_FIELD_REMOTE_ADDR;
        remote_elems[i].ep          = ep;
        remote_elems[i].rkey        = rkey;
        remote_elems[i].remote_addr = base + ((i == 1) ? counter_offset : 0);
    }
    ucp_device_mem_list_params_t rp = lp;
    rp.elements                     = remote_elems;
    rp.element_size                 = sizeof(remote_elems[0]);
    rp.num_elements                 = 2;
    ucp_device_remote_mem_list_h remote;
    ucs_status_t st;
    do { /* the device lanes come with wire-up */
        st = ucp_device_remote_mem_list_create(&rp, &remote);
        ucp_worker_progress(worker);
    } while (st == UCS_ERR_NOT_CONNECTED);
    CHECK_UCS(st);

    ucs_status_t *status;
    CHECK_CUDA(cudaMallocManaged(&status, sizeof(*status)));
    char what[160];
    for (ucs_device_level_t l : bench ? std::vector<ucs_device_level_t>() :
                                std::vector<ucs_device_level_t>(std::begin(levels), std::end(levels))) {
        for (const put_case &c : put_cases()) {
            send_all("P", 1);
            send_all(&c, sizeof(c));
            send_all(&seed, sizeof(seed));
            char r;
            recv_all(&r, 1); /* the target is waiting for the count */
            *status = UCS_OK;
            launch_put(l, local, remote, c, 1, status);
            CHECK_CUDA(cudaDeviceSynchronize());
            uint64_t result[4];
            recv_all(result, sizeof(result));
            snprintf(what, sizeof(what),
                     "put+signal %s src+%zu dst+%zu %zu B: status %s, %llu bytes wrong when the count came%s, "
                     "%llu wrong after, count %llu",
                     level_name(l), c.src_off, c.dst_off, c.length, ucs_status_string(*status),
                     (unsigned long long)result[0], result[1] ? " (timed out)" : "", (unsigned long long)result[2],
                     (unsigned long long)result[3]);
            verdict((*status == UCS_OK) && !result[0] && !result[1] && !result[2] && (result[3] == 1), what);
        }
        printf("put+signal at %s level: %d passed, %d failed so far\n", level_name(l), passed, failed);
        fflush(stdout);
    }

    const uint32_t gseed = 0x9e7;
    send_all("G", 1);
    send_all(&gseed, sizeof(gseed));
    char r;
    recv_all(&r, 1);
    for (const put_case &c : bench ? std::vector<put_case>() : put_cases()) {
        *status = UCS_OK;
        CHECK_CUDA(cudaMemset(dst, 0, c.length));
        get_kernel<<<64, 256>>>(remote, c.src_off, c.length, dst, status);
        CHECK_CUDA(cudaDeviceSynchronize());
        std::vector<uint8_t> host(c.length);
        CHECK_CUDA(cudaMemcpy(host.data(), dst, c.length, cudaMemcpyDeviceToHost));
        size_t wrong = 0;
        for (size_t i = 0; i < c.length; ++i) {
            wrong += (host[i] != pattern(gseed, c.src_off + i));
        }
        snprintf(what, sizeof(what), "get_ptr read +%zu %zu B: status %s, %zu bytes wrong", c.src_off, c.length,
                 ucs_status_string(*status), wrong);
        verdict((*status == UCS_OK) && !wrong, what);
    }
    printf("get_ptr reads: %d passed, %d failed so far\n", passed, failed);

    if (bench) {
        cudaEvent_t e0, e1;
        CHECK_CUDA(cudaEventCreate(&e0));
        CHECK_CUDA(cudaEventCreate(&e1));
        struct { size_t length; unsigned count; } shapes[] = {{8, 10000}, {64, 10000}, {1024, 10000}, {16384, 2000},
                                                             {1u << 20, 100}, {4u << 20, 20}};
        for (ucs_device_level_t l : levels) {
            for (auto &s : shapes) {
                if ((s.length > region_size) || (s.length > bench_max)) {
                    continue;
                }
                std::vector<float> ms;
                for (int rep = 0; rep < 6; ++rep) {
                    *status = UCS_OK;
                    CHECK_CUDA(cudaEventRecord(e0));
                    launch_many(l, local, remote, s.length, s.count, status);
                    CHECK_CUDA(cudaEventRecord(e1));
                    CHECK_CUDA(cudaEventSynchronize(e1));
                    float t;
                    CHECK_CUDA(cudaEventElapsedTime(&t, e0, e1));
                    if (rep > 0) { /* the first is a warm-up */
                        ms.push_back(t);
                    }
                }
                std::sort(ms.begin(), ms.end());
                double med = ms[ms.size() / 2];
                printf("bench %s %zu B x %u: median %.3f ms (%.3f-%.3f), %.3f us per put, %.2f GB/s\n",
                       level_name(l), s.length, s.count, med, ms.front(), ms.back(), med * 1e3 / s.count,
                       (double)s.length * s.count / (med * 1e-3) / 1e9);
                verdict(*status == UCS_OK, "bench status");
            }
        }
    }

    send_all("Q", 1);
    ucp_device_mem_list_release(remote);
    ucp_device_mem_list_release(local);
    ucp_rkey_destroy(rkey);
    flush_ep(ep);
    CHECK_UCS(ucp_mem_unmap(ctx, memh));
    CHECK_CUDA(cudaFree(src));
    CHECK_CUDA(cudaFree(dst));
}

} // namespace

int main(int argc, char **argv)
{
    bool bench = (argc > 1) && !strcmp(argv[1], "--bench");
    if (bench && (argc > 2)) {
        bench_max = strtoull(argv[2], nullptr, 0);
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
        perror("socketpair");
        return 2;
    }
    pid_t child = fork();
    bool is_target = (child != 0);
    sock           = is_target ? sv[0] : sv[1];
    close(is_target ? sv[1] : sv[0]);

    int ndev = 0;
    CHECK_CUDA(cudaGetDeviceCount(&ndev));
    int dev = (!is_target && (ndev > 1) && !getenv("CUX_DEVICE_API_ONE_GPU")) ? 1 : 0;
    CHECK_CUDA(cudaSetDevice(dev));
    CHECK_CUDA(cudaFree(nullptr)); /* the primary context, current on this thread */

    ucp_params_t params = {};
    params.field_mask   = UCP_PARAM_FIELD_FEATURES;
    params.features     = UCP_FEATURE_RMA | UCP_FEATURE_DEVICE;
    /* UCP calls an endpoint remote-connected only after a wire-up exchange, which lanes that all connect to
     * interfaces (sm, cuda_ipc) never make unless told to resolve the peer's endpoint; device memory lists answer
     * NOT_CONNECTED until then (UCX 1.22) */
    ucp_config_t *config;
    CHECK_UCS(ucp_config_read(nullptr, nullptr, &config));
    CHECK_UCS(ucp_config_modify(config, "RESOLVE_REMOTE_EP_ID", "y"));
    ucp_context_h ctx;
    CHECK_UCS(ucp_init(&params, config, &ctx));
    ucp_config_release(config);
    ucp_worker_params_t wp = {};
    wp.field_mask          = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode         = UCS_THREAD_MODE_SINGLE;
    CHECK_UCS(ucp_worker_create(ctx, &wp, &worker));
    ucp_address_t *addr;
    size_t addr_len;
    CHECK_UCS(ucp_worker_get_address(worker, &addr, &addr_len));
    send_blob(addr, addr_len);
    ucp_worker_release_address(worker, addr);
    auto peer = recv_blob();
    ucp_ep_params_t ep_params = {};
    ep_params.field_mask      = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep_params.address         = (const ucp_address_t*)peer.data();
    ucp_ep_h ep;
    CHECK_UCS(ucp_ep_create(worker, &ep_params, &ep));
    flush_ep(ep);

    if (is_target) {
        target(ctx, ep);
    } else {
        initiator(ctx, ep, bench);
    }

    ucp_request_param_t cp = {};
    void *req              = ucp_ep_close_nbx(ep, &cp);
    if ((req != nullptr) && !UCS_PTR_IS_ERR(req)) {
        while (ucp_request_check_status(req) == UCS_INPROGRESS) {
            ucp_worker_progress(worker);
        }
        ucp_request_free(req);
    }
    ucp_worker_destroy(worker);
    ucp_cleanup(ctx);
    if (is_target) {
        int wst = 0;
        waitpid(child, &wst, 0);
        return (WIFEXITED(wst) ? WEXITSTATUS(wst) : 3);
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
