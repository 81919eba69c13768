/*
 * matmul_gpu.c - the local product of mln-matmul --gpu (bench/matmul_gpu.h): cuBLAS DGEMM on
 * row-major host matrices.
 *
 * cuBLAS is column-major.  A row-major r x c matrix is, byte for byte, its c x r transpose in
 * column-major order, so C = A B (row-major) is C^T = B^T A^T (column-major), which cuBLAS
 * computes from the same bytes with the operands swapped and no transposition:
 *
 *     cublasDgemm(N, N, n, m, k, 1, B, ldb = n, A, lda = k, 0, C, ldc = n)
 *
 * Cost per product: h2d (m k + k n) * 8 bytes, kernel 2 m n k flops, d2h m n * 8 bytes; each
 * part is timed on its own with the device synchronised before and after it.  The device
 * buffers are kept between products and grown when a product needs more.
 *
 * The API of matmul_gpu.h has no handle (one process drives one device), so this file keeps
 * its state in one static context struct, set up by mln_gpu_available and freed by
 * mln_gpu_release.
 */
#include "matmul_gpu.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

typedef struct gpu_ctx {
    int ready;  /* mln_gpu_available succeeded and mln_gpu_release was not called since */
    int device; /* local rank % device count */
    cublasHandle_t handle;
    double *dA, *dB, *dC;
    size_t capA, capB, capC; /* elements allocated in each */
} gpu_ctx_t;

static gpu_ctx_t gpu_ctx;

/* Writes the reason into why (if any room) and returns -1. */
static int gpu_fail(char *why, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int gpu_fail(char *why, size_t len, const char *fmt, ...)
{
    va_list ap;

    if (why != NULL && len > 0) {
        va_start(ap, fmt);
        vsnprintf(why, len, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* The failing call's text and the runtime's error string into why, then -1. */
#define GPU_CUDA_TRY(call, why, len, label)                                                        \
    do {                                                                                           \
        cudaError_t gpu_rc_ = (call);                                                              \
        if (gpu_rc_ != cudaSuccess) {                                                              \
            gpu_fail((why), (len), "%s failed: %s (%s)", #call, cudaGetErrorString(gpu_rc_),       \
                     cudaGetErrorName(gpu_rc_));                                                   \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)

#define GPU_CUBLAS_TRY(call, why, len, label)                                                      \
    do {                                                                                           \
        cublasStatus_t gpu_st_ = (call);                                                           \
        if (gpu_st_ != CUBLAS_STATUS_SUCCESS) {                                                    \
            gpu_fail((why), (len), "%s failed: %s (%d)", #call, cublasGetStatusString(gpu_st_),    \
                     (int)gpu_st_);                                                                \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)

static double gpu_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int mln_gpu_available(int local_rank, char *why, size_t len)
{
    int count = 0, device;
    cudaError_t rc;

    if (local_rank < 0) {
        gpu_fail(why, len, "invalid local rank %d (expected 0 or more)", local_rank);
        return 0;
    }
    rc = cudaGetDeviceCount(&count);
    if (rc != cudaSuccess) {
        gpu_fail(why, len, "no GPU: cudaGetDeviceCount: %s", cudaGetErrorString(rc));
        return 0;
    }
    if (count <= 0) {
        gpu_fail(why, len, "no GPU: cudaGetDeviceCount: no device");
        return 0;
    }
    device = local_rank % count;
    if (gpu_ctx.ready && gpu_ctx.device == device)
        return 1;
    mln_gpu_release();
    GPU_CUDA_TRY(cudaSetDevice(device), why, len, err);
    /* cudaFree(NULL) creates the context now, so that no product's h2d time pays for it */
    GPU_CUDA_TRY(cudaFree(NULL), why, len, err);
    GPU_CUBLAS_TRY(cublasCreate(&gpu_ctx.handle), why, len, err);
    gpu_ctx.device = device;
    gpu_ctx.ready = 1;
    return 1;

err:
    return 0;
}

/* Room for `need` doubles in *buf (capacity *cap): reallocated when smaller, old data lost. */
static int gpu_reserve(double **buf, size_t *cap, size_t need, const char *name, char *why,
                       size_t len)
{
    cudaError_t rc;

    if (need <= *cap)
        return 0;
    if (*buf != NULL)
        cudaFree(*buf); /* an error here would come back from the cudaMalloc below */
    *buf = NULL;
    *cap = 0;
    rc = cudaMalloc((void **)buf, need * sizeof(double));
    if (rc != cudaSuccess)
        return gpu_fail(why, len, "cudaMalloc of %s (%zu bytes) failed: %s (%s)", name,
                        need * sizeof(double), cudaGetErrorString(rc), cudaGetErrorName(rc));
    *cap = need;
    return 0;
}

int mln_gpu_dgemm(int m, int n, int k, const double *A, const double *B, double *C,
                  mln_gpu_times_t *times, char *why, size_t len)
{
    const double one = 1.0, zero = 0.0;
    size_t na = (size_t)m * (size_t)k, nb = (size_t)k * (size_t)n, nc = (size_t)m * (size_t)n;
    mln_gpu_times_t t = {0, 0, 0};
    double t0, t1, t2, t3;

    if (!gpu_ctx.ready)
        return gpu_fail(why, len, "no GPU set up: mln_gpu_available was not called or failed");
    if (m < 0 || n < 0 || k < 0 || A == NULL || B == NULL || C == NULL)
        return gpu_fail(why, len,
                        "invalid product: m %d, n %d, k %d (expected >= 0) and matrices %p, %p, "
                        "%p (expected non-NULL)",
                        m, n, k, (const void *)A, (const void *)B, (void *)C);
    if (nc == 0)
        goto done; /* nothing to compute */
    if (k == 0) {  /* an empty sum: cuBLAS' leading dimensions need k >= 1 */
        for (size_t i = 0; i < nc; i++)
            C[i] = 0.0;
        goto done;
    }
    if (gpu_reserve(&gpu_ctx.dA, &gpu_ctx.capA, na, "A", why, len) != 0 ||
        gpu_reserve(&gpu_ctx.dB, &gpu_ctx.capB, nb, "B", why, len) != 0 ||
        gpu_reserve(&gpu_ctx.dC, &gpu_ctx.capC, nc, "C", why, len) != 0)
        return -1;

    GPU_CUDA_TRY(cudaDeviceSynchronize(), why, len, err);
    t0 = gpu_now();
    GPU_CUDA_TRY(cudaMemcpy(gpu_ctx.dA, A, na * sizeof(double), cudaMemcpyHostToDevice), why, len,
                 err);
    GPU_CUDA_TRY(cudaMemcpy(gpu_ctx.dB, B, nb * sizeof(double), cudaMemcpyHostToDevice), why, len,
                 err);
    GPU_CUDA_TRY(cudaDeviceSynchronize(), why, len, err);
    t1 = gpu_now();
    /* row-major C = A B is column-major C^T = B^T A^T: B first, n and m swapped */
    GPU_CUBLAS_TRY(cublasDgemm(gpu_ctx.handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, gpu_ctx.dB,
                               n, gpu_ctx.dA, k, &zero, gpu_ctx.dC, n),
                   why, len, err);
    GPU_CUDA_TRY(cudaDeviceSynchronize(), why, len, err);
    t2 = gpu_now();
    GPU_CUDA_TRY(cudaMemcpy(C, gpu_ctx.dC, nc * sizeof(double), cudaMemcpyDeviceToHost), why, len,
                 err);
    GPU_CUDA_TRY(cudaDeviceSynchronize(), why, len, err);
    t3 = gpu_now();
    t = (mln_gpu_times_t){.h2d = t1 - t0, .kernel = t2 - t1, .d2h = t3 - t2};
done:
    if (times != NULL)
        *times = t;
    return 0;

err:
    return -1;
}

void mln_gpu_release(void)
{
    /* Only what was made (a CUDA call on a machine without a GPU would try to start the
     * runtime); errors are ignored: this is the way out, nothing can be done about them. */
    if (gpu_ctx.dA != NULL)
        cudaFree(gpu_ctx.dA);
    if (gpu_ctx.dB != NULL)
        cudaFree(gpu_ctx.dB);
    if (gpu_ctx.dC != NULL)
        cudaFree(gpu_ctx.dC);
    if (gpu_ctx.handle != NULL)
        cublasDestroy(gpu_ctx.handle);
    gpu_ctx = (gpu_ctx_t){0};
}
