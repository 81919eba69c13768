/*
 * matmul_gpu.h - the local product of mln-matmul on a GPU (cuBLAS), for `mln-matmul --gpu`.
 *
 * bench/gpu/matmul_gpu.c implements it when CMake finds the CUDA toolkit (MLN_HAVE_CUDA);
 * without the toolkit bench/matmul_nogpu.c answers every call with "not built with CUDA".
 * Matrices are row-major doubles on the host, as everywhere in mln-matmul.
 */
#ifndef MLN_MATMUL_GPU_H
#define MLN_MATMUL_GPU_H

#include <stddef.h>

/* Seconds spent in one product's parts, each timed with the device synchronised around it. */
typedef struct mln_gpu_times {
    double h2d;    /* A and B to the device */
    double kernel; /* the cuBLAS DGEMM */
    double d2h;    /* C back to the host */
} mln_gpu_times_t;

/*
 * 1 when this process can run products on a GPU: built with CUDA and a device is visible
 * (the device is picked as local rank % device count and initialised); 0 otherwise, with the
 * reason in why ("not built with CUDA", "no GPU: cudaGetDeviceCount: ...").
 */
int mln_gpu_available(int local_rank, char *why, size_t len);

/*
 * C (m x n) = A (m x k) * B (k x n), row-major, host pointers; copies to the device, runs
 * cublasDgemm, copies C back.  0 on success; -1 with the reason in why.  times may be NULL.
 */
int mln_gpu_dgemm(int m, int n, int k, const double *A, const double *B, double *C,
                  mln_gpu_times_t *times, char *why, size_t len);

/* Frees what mln_gpu_available and mln_gpu_dgemm set up (a no-op without CUDA). */
void mln_gpu_release(void);

#endif
