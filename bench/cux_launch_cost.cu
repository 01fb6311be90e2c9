/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What posting N small device-to-device copies as kernel launches costs the host, by the way the copies' table
 * reaches the kernel (issue 62: a list of 16-64 KB blocks, one allocation each, spends about 44 ns a copy
 * launching 128 copies at a time with a 3 KB parameter block). Built on the GPU host with nvcc:
 *
 *   nvcc -O2 -o cux_launch_cost bench/cux_launch_cost.cu && ./cux_launch_cost [COPIES [BLOCK [REPEATS]]]
 *
 * Ways: "param K": the table by value in the kernel's parameters, K copies a launch (K = 128 is 3 KB, the
 * module's kernel; above 170 needs the large parameters of CUDA 12.1 drivers, up to 32,764 bytes); "mapped K":
 * the table written into pinned host memory that the kernel reads over the bus, K copies a launch; "staged K":
 * the table written into pinned host memory and copied to the GPU ahead of each launch. Prints, per way, the
 * median and spread over REPEATS of the host's time to post all COPIES (writing the table included) and to
 * finish them, per copy, and whether every block arrived.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct desc {
    unsigned long long src, dst, size;
};

template <int K> struct table {
    desc copy[K];
};

#define THREADS 256

__device__ __forceinline__ void copy_one(const desc &c)
{
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    const uint4 *s                  = (const uint4*)c.src;
    uint4 *d                        = (uint4*)c.dst;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < c.size / 16;
         i += stride) {
        d[i] = s[i];
    }
}

template <int K> __global__ void by_param(table<K> t)
{
    copy_one(t.copy[blockIdx.y]);
}

__global__ void by_pointer(const desc *t)
{
    copy_one(t[blockIdx.y]);
}

static double now_ns()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

#define CHECK(x) \
    do { \
        cudaError_t e_ = (x); \
        if (e_ != cudaSuccess) { \
            fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); \
            exit(1); \
        } \
    } while (0)

static unsigned copies, block, grid_x;
static char *src, *dst;
static cudaStream_t stream;

/* Copy i: block i of src to block i of dst, each block one allocation's worth apart (a gap between them, so
 * that nothing is contiguous) */
static desc desc_of(unsigned i)
{
    return desc{(unsigned long long)(src + (size_t)i * 2 * block), (unsigned long long)(dst + (size_t)i * 2 * block),
                block};
}

template <int K> static void post_param()
{
    table<K> t;
    for (unsigned first = 0; first < copies; first += K) {
        unsigned n = (copies - first < K) ? copies - first : K;
        for (unsigned i = 0; i < n; ++i) {
            t.copy[i] = desc_of(first + i);
        }
        by_param<K><<<dim3(grid_x, n), THREADS, 0, stream>>>(t);
    }
}

static desc *host_table, *dev_table;

/* The table written into pinned host memory, k copies a launch; the kernel reads it there over the bus (mapped), or
 * from a copy on the GPU made ahead of each launch (staged). */
static void post_by_pointer(unsigned k, bool staged)
{
    desc *table = dev_table;
    if (!staged) {
        CHECK(cudaHostGetDevicePointer((void**)&table, host_table, 0));
    }
    for (unsigned first = 0; first < copies; first += k) {
        unsigned n = (copies - first < k) ? copies - first : k;
        for (unsigned i = 0; i < n; ++i) {
            host_table[first + i] = desc_of(first + i);
        }
        if (staged) {
            CHECK(cudaMemcpyAsync(dev_table + first, host_table + first, n * sizeof(desc), cudaMemcpyHostToDevice,
                                  stream));
        }
        by_pointer<<<dim3(grid_x, n), THREADS, 0, stream>>>(table + first);
    }
}

static void post_mapped(unsigned k)
{
    post_by_pointer(k, false);
}

static void post_staged(unsigned k)
{
    post_by_pointer(k, true);
}

typedef struct {
    const char *name;
    unsigned k;
    void (*post)(unsigned k);
} way_t;

template <int K> static void post_param_k(unsigned)
{
    post_param<K>();
}

int main(int argc, char **argv)
{
    copies           = (argc > 1) ? atoi(argv[1]) : 10000;
    block            = (argc > 2) ? atoi(argv[2]) : 16384;
    unsigned repeats = (argc > 3) ? atoi(argv[3]) : 7;
    size_t span      = (size_t)copies * 2 * block;
    way_t ways[]     = {{"param", 128, post_param_k<128>},   {"param", 512, post_param_k<512>},
                        {"param", 1024, post_param_k<1024>}, {"param", 1360, post_param_k<1360>},
                        {"mapped", 128, post_mapped},        {"mapped", 1024, post_mapped},
                        {"mapped", 65535, post_mapped},      {"staged", 1024, post_staged},
                        {"staged", 65535, post_staged}};
    unsigned nways   = sizeof(ways) / sizeof(ways[0]);
    double *post     = (double*)calloc(nways * repeats, sizeof(double));
    double *done     = (double*)calloc(nways * repeats, sizeof(double));
    char *check      = (char*)malloc(span);
    int ok           = 1;

    grid_x = (block / 16 + THREADS - 1) / THREADS;
    grid_x = (grid_x > 64) ? 64 : grid_x;
    CHECK(cudaSetDevice(0));
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CHECK(cudaMalloc((void**)&src, span));
    CHECK(cudaMalloc((void**)&dst, span));
    CHECK(cudaHostAlloc((void**)&host_table, copies * sizeof(desc), cudaHostAllocMapped));
    CHECK(cudaMalloc((void**)&dev_table, copies * sizeof(desc)));
    for (size_t i = 0; i < span; ++i) {
        check[i] = (char)(i * 7 + 1);
    }
    CHECK(cudaMemcpy(src, check, span, cudaMemcpyHostToDevice));

    for (unsigned r = 0; r <= repeats; ++r) { /* round 0 warms every way up, uncounted */
        for (unsigned w = 0; w < nways; ++w) {
            CHECK(cudaMemsetAsync(dst, 0, span, stream));
            CHECK(cudaStreamSynchronize(stream));
            double t0 = now_ns();
            ways[w].post(ways[w].k);
            double t1 = now_ns();
            CHECK(cudaStreamSynchronize(stream));
            double t2 = now_ns();
            CHECK(cudaGetLastError());
            if (r > 0) {
                post[w * repeats + r - 1] = (t1 - t0) / copies;
                done[w * repeats + r - 1] = (t2 - t0) / copies;
            }
            if ((r == 0) || (r == repeats)) {
                char *got = (char*)malloc(span);
                CHECK(cudaMemcpy(got, dst, span, cudaMemcpyDeviceToHost));
                for (unsigned i = 0; i < copies; ++i) {
                    if (memcmp(got + (size_t)i * 2 * block, check + (size_t)i * 2 * block, block) != 0) {
                        fprintf(stderr, "%s %u: block %u differs\n", ways[w].name, ways[w].k, i);
                        ok = 0;
                        break;
                    }
                }
                free(got);
            }
        }
    }
    printf("# %u copies of %u bytes, %u repeats: ns per copy, median [min-max]\n", copies, block, repeats);
    printf("%-8s %6s %24s %24s\n", "way", "k", "post", "done");
    for (unsigned w = 0; w < nways; ++w) {
        double *p = post + w * repeats, *d = done + w * repeats;
        qsort(p, repeats, sizeof(double), cmp);
        qsort(d, repeats, sizeof(double), cmp);
        printf("%-8s %6u %8.1f [%6.1f-%6.1f] %8.1f [%6.1f-%6.1f]\n", ways[w].name, ways[w].k, p[repeats / 2], p[0],
               p[repeats - 1], d[repeats / 2], d[0], d[repeats - 1]);
    }
    printf("data check: %s\n", ok ? "passed" : "FAILED");
    return ok ? 0 : 1;
}
