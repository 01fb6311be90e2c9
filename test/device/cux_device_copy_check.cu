/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The copy of our device header (include/uct/cuda/cuda_ipc/cuda_ipc.cuh), run on the host: for every pair of
 * source and destination alignments, lengths around every piece and word size and a few large ones, and groups
 * of 1, 2, 3, 32 and 256 lanes, the lanes together write every byte of the destination exactly once, with the
 * source's value, and nothing outside it; a misaligned word aborts (the header checks on the host). Built and
 * run by test_ipc_device_api.cc with nvcc; prints "N cases passed" or the first failure.
 */
#include <uct/cuda/cuda_ipc/cuda_ipc.cuh>

#include <cstdio>
#include <cstring>
#include <vector>

namespace {

const size_t guard = 64;

bool check(size_t dst_off, size_t src_off, size_t length, unsigned lanes)
{
    std::vector<unsigned char> src(length + src_off + guard + 16), covered(length + dst_off + 2 * guard);
    alignas(16) static unsigned char dst_store[(1 << 17) + 512];
    unsigned char *dst = dst_store + guard; /* 16-aligned, so dst_off is the destination's alignment */
    unsigned char *s   = src.data() + ((16 - (uintptr_t)src.data() % 16) % 16); /* and src_off the source's */
    for (size_t i = 0; i < length + src_off; ++i) {
        s[i] = (unsigned char)(1 + (i * 131 + length) % 251); /* never 0 */
    }
    std::fill(covered.begin(), covered.end(), 0);
    for (unsigned lane = 0; lane < lanes; ++lane) {
        memset(dst_store, 0, dst_off + length + 2 * guard);
        cux_device::copy(dst + dst_off, s + src_off, length, lane, lanes);
        for (size_t i = 0; i < dst_off + length + guard; ++i) {
            if (dst[i] != 0) {
                bool inside = (i >= dst_off) && (i < dst_off + length);
                if (!inside || (dst[i] != s[src_off + i - dst_off])) {
                    printf("dst +%zu src +%zu length %zu lanes %u: lane %u wrote byte %zu %s\n", dst_off, src_off,
                           length, lanes, lane, i, inside ? "wrong" : "outside the destination");
                    return false;
                }
                ++covered[i];
            }
        }
        for (size_t i = 0; i < guard; ++i) {
            if (dst_store[i] != 0) {
                printf("dst +%zu src +%zu length %zu lanes %u: lane %u wrote before the destination\n", dst_off,
                       src_off, length, lanes, lane);
                return false;
            }
        }
    }
    for (size_t i = dst_off; i < dst_off + length; ++i) {
        if (covered[i] != 1) {
            printf("dst +%zu src +%zu length %zu lanes %u: byte %zu written %u times\n", dst_off, src_off, length,
                   lanes, i - dst_off, covered[i]);
            return false;
        }
    }
    return true;
}

} // namespace

int main()
{
    std::vector<size_t> lengths;
    for (size_t l = 0; l <= 80; ++l) {
        lengths.push_back(l);
    }
    for (size_t l : {127, 128, 129, 255, 1000, 1024, 4099, 16384, 65539}) {
        lengths.push_back(l);
    }
    unsigned passed = 0;
    for (unsigned lanes : {1u, 2u, 3u, 32u, 256u}) {
        for (size_t d = 0; d <= 17; ++d) {
            for (size_t s = 0; s <= 17; ++s) {
                for (size_t length : lengths) {
                    if ((length > 4099) && ((lanes == 256) || (d % 5) || (s % 3))) {
                        continue; /* large lengths: a sample of alignments */
                    }
                    if (!check(d, s, length, lanes)) {
                        return 1;
                    }
                    ++passed;
                }
            }
        }
    }
    printf("%u cases passed\n", passed);
    return 0;
}
