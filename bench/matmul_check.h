/*
 * matmul_check.h - the data and the verification of mln-matmul (bench/matmul.c), without MPI.
 *
 * A and B hold small integers (-8 .. 8), so every element of C = A B is an integer of
 * magnitude <= 64 N, and every sum below stays an integer under 2^53: double arithmetic is then
 * exact, whatever order a BLAS or a GPU adds in, and C can be compared for equality.
 * docs/METRICS.md (matmul) has the whole argument.
 */
#ifndef MLN_MATMUL_CHECK_H
#define MLN_MATMUL_CHECK_H

#include "multilane.h"

#include <stddef.h>
#include <stdint.h>

/* Largest N: N * N elements fit an MPI count (a C int), and Freivalds' sums stay exact
 * (64 N^2 (2^16 - 1) < 2^53 up to N = 46341). */
#define MLN_MATMUL_MAX_N 46340
/* Elements of A and B are integers from -MLN_MATMUL_VALUE_MAX to MLN_MATMUL_VALUE_MAX. */
#define MLN_MATMUL_VALUE_MAX 8
/* Freivalds' vectors: integers from 1 to 2^16 - 1 (never 0, so that a row of C with exactly
 * one wrong element is always caught), two of them. */
#define MLN_MATMUL_FREIVALDS_VECTORS 2
/* Rows flagged by Freivalds whose wrong elements are counted exactly, per check (each costs
 * one row of the product, N^2 multiply-adds); further flagged rows count as at least one. */
#define MLN_MATMUL_RECOUNT_ROWS 32

enum { MLN_MATMUL_A = 0, MLN_MATMUL_B = 1 };

/* Fills m (n x n, row-major) with matrix `which` (MLN_MATMUL_A or _B) of order n: the
 * harness's data pattern (mln_pattern_fill) seeded by (which, n), each 8-byte word mapped to
 * an integer in [-8, 8].  The same n gives the same matrices on every run. */
void mln_matmul_fill(double *m, int n, int which);

/* Rank 0's verifier for one N: A and B (not owned), Freivalds' vectors r and z = A (B r), and
 * for N <= the exact bound the serial product. */
typedef struct mln_matmul_check {
    int n;
    const double *A, *B;
    int exact;   /* 1: ref holds the serial triple-loop product A B */
    double *ref; /* room for ref_cap^2 doubles */
    double *r[MLN_MATMUL_FREIVALDS_VECTORS];
    double *z[MLN_MATMUL_FREIVALDS_VECTORS];
    double *y;   /* scratch: B r, then one recounted row */
    int ref_cap; /* largest n whose product fits ref (0: none) */
    int cap;     /* largest n of the vectors */
} mln_matmul_check_t;

/* The outcome of one check of C. */
typedef struct mln_matmul_verdict {
    uint64_t wrong;           /* wrong elements found */
    int lower_bound;          /* 1: rows past MLN_MATMUL_RECOUNT_ROWS counted as one each */
    uint64_t flagged;         /* rows that failed Freivalds' check or the integer-range check */
    uint64_t inconsistent;    /* rows Freivalds flagged that the exact comparison found right
                               * (impossible in exact arithmetic: a verifier fault, counted wrong) */
    int first_row, first_col; /* the first wrong element, -1 if none */
    double first_got, first_want;
    int first_want_known; /* first_want is the exact value (else only "not an integer in range") */
} mln_matmul_verdict_t;

/* Buffers for orders up to `cap`, the serial product up to `ref_cap` (<= cap).  On
 * MLN_ERR_NOMEM nothing is left allocated. */
mln_status_t mln_matmul_check_alloc(mln_matmul_check_t *c, int cap, int ref_cap);
void mln_matmul_check_free(mln_matmul_check_t *c);
/* For order n (<= cap): Freivalds' vectors, z = A (B r), and with `exact` (n <= ref_cap) the
 * serial product.  A and B must hold the matrices of n and stay unchanged. */
void mln_matmul_check_prepare(mln_matmul_check_t *c, const double *A, const double *B, int n,
                              int exact);
/* Checks C (n x n): every element an integer with |c| <= 64 n; Freivalds (C r == z for each
 * vector, exactly); with `exact`, every element against the serial product.  Wrong elements are
 * counted exactly where the serial product or a recount of the row is available. */
void mln_matmul_check_run(const mln_matmul_check_t *c, const double *C, mln_matmul_verdict_t *out);

#endif /* MLN_MATMUL_CHECK_H */
