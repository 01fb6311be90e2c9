/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * SipHash-2-4 (Aumasson and Bernstein), 64-bit output: a keyed hash that whoever lacks the 128-bit key can neither
 * predict nor forge. cuda_ipc's keys carry one of their allocation under the exporter's random key, and a peer
 * answers a challenge with one under its address's secret (cux_ipc_proof.h).
 */
#ifndef CUX_SIPHASH_H_
#define CUX_SIPHASH_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define CUX_SIPHASH_ROTL(_x, _b) (uint64_t)(((_x) << (_b)) | ((_x) >> (64 - (_b))))

static inline void cux_siphash_round(uint64_t v[4])
{
    v[0] += v[1]; v[1] = CUX_SIPHASH_ROTL(v[1], 13); v[1] ^= v[0]; v[0] = CUX_SIPHASH_ROTL(v[0], 32);
    v[2] += v[3]; v[3] = CUX_SIPHASH_ROTL(v[3], 16); v[3] ^= v[2];
    v[0] += v[3]; v[3] = CUX_SIPHASH_ROTL(v[3], 21); v[3] ^= v[0];
    v[2] += v[1]; v[1] = CUX_SIPHASH_ROTL(v[1], 17); v[1] ^= v[2]; v[2] = CUX_SIPHASH_ROTL(v[2], 32);
}

static inline uint64_t cux_siphash(const uint64_t key[2], const void *data, size_t len)
{
    const uint8_t *in = (const uint8_t*)data;
    uint64_t v[4]     = {key[0] ^ 0x736f6d6570736575ull, key[1] ^ 0x646f72616e646f6dull,
                         key[0] ^ 0x6c7967656e657261ull, key[1] ^ 0x7465646279746573ull};
    uint64_t m, last  = (uint64_t)len << 56;
    size_t i;

    for (i = 0; i + 8 <= len; i += 8) {
        memcpy(&m, in + i, 8);
        v[3] ^= m;
        cux_siphash_round(v);
        cux_siphash_round(v);
        v[0] ^= m;
    }
    for (; i < len; ++i) {
        last |= (uint64_t)in[i] << (8 * (i % 8));
    }
    v[3] ^= last;
    cux_siphash_round(v);
    cux_siphash_round(v);
    v[0] ^= last;
    v[2] ^= 0xff;
    for (i = 0; i < 4; ++i) {
        cux_siphash_round(v);
    }
    return v[0] ^ v[1] ^ v[2] ^ v[3];
}

#endif
