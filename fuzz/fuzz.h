/*
 * fuzz.h - what the fuzz targets share: a cursor over libFuzzer's input that hands out numbers
 * and exact-size heap copies (AddressSanitizer then sees a read one byte past what a parser was
 * given), and the check that ends the run with abort() so that libFuzzer keeps the input.
 */
#ifndef MLN_FUZZ_H
#define MLN_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A property of the code under test that must hold for every input: else abort (a crash). */
#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);         \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* The input not consumed yet. */
typedef struct fuzz_in {
    const uint8_t *p;
    size_t n;
} fuzz_in_t;

/* The next `bytes` bytes (at most 8) as a little-endian number; missing bytes read as 0. */
static inline uint64_t fuzz_uint(fuzz_in_t *in, size_t bytes)
{
    uint64_t v = 0;

    for (size_t i = 0; i < bytes && in->n > 0; i++, in->p++, in->n--)
        v |= (uint64_t)in->p[0] << (8 * i);
    return v;
}

/* A length of at most max, from `bytes` bytes of input. */
static inline size_t fuzz_len(fuzz_in_t *in, size_t bytes, size_t max)
{
    return (size_t)(fuzz_uint(in, bytes) % ((uint64_t)max + 1));
}

/* A heap copy of exactly n bytes (the next n of the input; zeros where it ends): never NULL,
 * also for n = 0, so that any access past the end is a finding. */
static inline uint8_t *fuzz_take(fuzz_in_t *in, size_t n)
{
    uint8_t *p = malloc(n); /* n = 0: a block of size 0, which ASan lets nothing touch */
    const size_t k = n < in->n ? n : in->n;

    FUZZ_CHECK(p != NULL);
    if (k > 0)
        memcpy(p, in->p, k);
    if (n > k)
        memset(p + k, 0, n - k);
    in->p += k;
    in->n -= k;
    return p;
}

#endif /* MLN_FUZZ_H */
