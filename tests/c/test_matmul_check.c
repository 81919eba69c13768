/*
 * test_matmul_check.c - the verifier of mln-matmul (bench/matmul_check.c) on its own, without
 * MPI or BLAS: a correct C passes at every order, on the exact path and on Freivalds' alone;
 * one wrong element (off by 1, off by a fraction, NaN, out of range) is found and counted, in
 * any row and column; many wrong rows are counted as a lower bound; the matrices are the same
 * from one fill to the next and hold integers in range.
 */
#include "matmul_check.h"
#include "mln_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { CAP = 70 };

/* The product by the definition, in a different loop order from the verifier's. */
static void product(const double *A, const double *B, double *C, int n)
{
    memset(C, 0, sizeof(double) * (size_t)n * (size_t)n);
    for (int k = 0; k < n; k++)
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                C[(size_t)i * n + j] += A[(size_t)i * n + k] * B[(size_t)k * n + j];
}

static mln_matmul_verdict_t check(mln_matmul_check_t *c, const double *A, const double *B,
                                  const double *C, int n, int exact)
{
    mln_matmul_verdict_t v;

    mln_matmul_check_prepare(c, A, B, n, exact);
    memset(&v, 0xff, sizeof(v)); /* every field must be written */
    mln_matmul_check_run(c, C, &v);
    return v;
}

/* The fill: integers in [-8, 8], the same on a second fill, A differs from B. */
static void t_fill(double *A, double *B, double *X, int n)
{
    size_t nn = (size_t)n * (size_t)n;
    int differs = 0;

    mln_matmul_fill(A, n, MLN_MATMUL_A);
    mln_matmul_fill(B, n, MLN_MATMUL_B);
    mln_matmul_fill(X, n, MLN_MATMUL_A);
    MLN_TEST_ASSERT(memcmp(A, X, nn * sizeof(double)) == 0);
    for (size_t i = 0; i < nn; i++) {
        MLN_TEST_ASSERT(A[i] == floor(A[i]) && fabs(A[i]) <= MLN_MATMUL_VALUE_MAX);
        MLN_TEST_ASSERT(B[i] == floor(B[i]) && fabs(B[i]) <= MLN_MATMUL_VALUE_MAX);
        differs |= A[i] != B[i];
    }
    MLN_TEST_ASSERT(differs || n == 1);
}

/* One element of C changed to `bad`: found by both paths, counted as exactly one. */
static void t_one_wrong(mln_matmul_check_t *c, const double *A, const double *B, double *C, int n,
                        int row, int col, double bad)
{
    double good = C[(size_t)row * n + col];

    C[(size_t)row * n + col] = bad;
    for (int exact = 0; exact <= 1; exact++) {
        mln_matmul_verdict_t v = check(c, A, B, C, n, exact);
        MLN_TEST_ASSERT(v.wrong == 1 && v.lower_bound == 0 && v.flagged == 1);
        MLN_TEST_ASSERT(v.first_row == row && v.first_col == col);
        MLN_TEST_ASSERT(v.inconsistent == 0);
        if (v.first_want_known)
            MLN_TEST_ASSERT(v.first_want == good);
    }
    C[(size_t)row * n + col] = good;
}

int main(void)
{
    static const int orders[] = {1, 2, 3, 7, 16, 33, 64, CAP};
    size_t cap2 = (size_t)CAP * CAP;
    double *A = malloc(cap2 * sizeof(double)), *B = malloc(cap2 * sizeof(double));
    double *C = malloc(cap2 * sizeof(double)), *X = malloc(cap2 * sizeof(double));
    mln_matmul_check_t c;

    MLN_TEST_ASSERT(A && B && C && X);
    MLN_TEST_ASSERT(mln_matmul_check_alloc(&c, CAP, CAP) == MLN_OK);
    for (size_t t = 0; t < sizeof(orders) / sizeof(orders[0]); t++) {
        int n = orders[t];

        t_fill(A, B, X, n);
        product(A, B, C, n);
        for (int exact = 0; exact <= 1; exact++) { /* a correct product passes */
            mln_matmul_verdict_t v = check(&c, A, B, C, n, exact);
            MLN_TEST_ASSERT(v.wrong == 0 && v.flagged == 0 && v.lower_bound == 0);
            MLN_TEST_ASSERT(v.first_row == -1 && v.first_col == -1);
        }
        /* one wrong element anywhere: corners, the middle, off by 1, 0.5, NaN, out of range */
        t_one_wrong(&c, A, B, C, n, 0, 0, C[0] + 1.0);
        t_one_wrong(&c, A, B, C, n, n - 1, n - 1, C[(size_t)n * n - 1] - 1.0);
        t_one_wrong(&c, A, B, C, n, n / 2, n / 3, C[(size_t)(n / 2) * n + n / 3] + 0.5);
        t_one_wrong(&c, A, B, C, n, n - 1, 0, NAN);
        t_one_wrong(&c, A, B, C, n, 0, n - 1, 1e9);
    }
    /* More wrong rows than are recounted: every one is flagged, the count is a lower bound
     * on the Freivalds-only path and exact on the exact path. */
    {
        int n = CAP, rows = MLN_MATMUL_RECOUNT_ROWS + 10;
        mln_matmul_verdict_t v;

        t_fill(A, B, X, n);
        product(A, B, C, n);
        for (int i = 0; i < rows; i++) { /* two wrong elements in each of these rows */
            C[(size_t)i * n + 1] += 1.0;
            C[(size_t)i * n + 2] += 3.0;
        }
        v = check(&c, A, B, C, n, 0);
        MLN_TEST_ASSERT(v.flagged == (uint64_t)rows && v.lower_bound == 1);
        MLN_TEST_ASSERT(v.wrong >= (uint64_t)rows && v.wrong <= (uint64_t)(2 * rows));
        MLN_TEST_ASSERT(v.first_row == 0 && v.first_col == 1);
        v = check(&c, A, B, C, n, 1);
        MLN_TEST_ASSERT(v.wrong == (uint64_t)(2 * rows) && v.lower_bound == 0);
    }
    mln_matmul_check_free(&c);
    free(A);
    free(B);
    free(C);
    free(X);
    puts("test_matmul_check: ok");
    return 0;
}
