/*
 * matmul_nogpu.c - matmul_gpu.h for a build without the CUDA toolkit (bench/CMakeLists.txt
 * compiles it into mln-matmul when bench/gpu/ defines no mln_matmul_gpu target): there is no
 * GPU to offer, and every call says why, so `mln-matmul --gpu` is skipped with that reason.
 */
#include "matmul_gpu.h"

#include <stdio.h>

#define NO_CUDA "not built with CUDA"

int mln_gpu_available(int local_rank, char *why, size_t len)
{
    (void)local_rank;
    if (why != NULL && len > 0)
        snprintf(why, len, "%s", NO_CUDA);
    return 0;
}

int mln_gpu_dgemm(int m, int n, int k, const double *A, const double *B, double *C,
                  mln_gpu_times_t *times, char *why, size_t len)
{
    (void)m;
    (void)n;
    (void)k;
    (void)A;
    (void)B;
    (void)C;
    if (times != NULL)
        *times = (mln_gpu_times_t){0};
    if (why != NULL && len > 0)
        snprintf(why, len, "%s", NO_CUDA);
    return -1;
}

void mln_gpu_release(void)
{
}
