/* The random-weight generator every test writer and its Python reference
 * share (see tests/whisper-writer.h for the formula):
 *
 *     u(name, i) = rlx_test_uniform(rlx_test_fnv1a64(name), i)   in [-1, 1)
 *
 * splitmix64 of fnv1a64(name) + (i + 1) * 0x9e3779b97f4a7c15, its top 24 bits
 * k as (k - 2^23) / 2^23: exact in float32. Thread safety: pure functions. */
#ifndef RLX_TESTS_NAME_HASH_H
#define RLX_TESTS_NAME_HASH_H

#include <stdint.h>

static inline uint64_t rlx_test_fnv1a64(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

static inline float rlx_test_uniform(uint64_t seed, int64_t i)
{
    uint64_t z = seed + (uint64_t)(i + 1) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (float)((int32_t)(z >> 40) - (1 << 23)) / 8388608.0f;
}

#endif
