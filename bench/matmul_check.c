/*
 * matmul_check.c - mln-matmul's matrices and its verification on rank 0 (matmul_check.h).
 *
 * Freivalds' check: C = A B exactly when C r = A (B r) for random r; a wrong C passes one
 * vector with probability at most 1 / (2^16 - 1) (the vector's entries come from 2^16 - 1
 * values), and a row with a single wrong element never passes (its error times r_j != 0).  It
 * costs O(N^2) per vector instead of the N^3 of a product.  All of it is exact in double: the
 * integers stay below 64 N^2 (2^16 - 1) < 2^53 for N <= MLN_MATMUL_MAX_N, and an element of C
 * that is not an integer in range is caught before it enters a sum.
 */
#include "matmul_check.h"
#include "harness_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Seeds of the pattern: A, B and the Freivalds vectors of order n are distinct streams. */
enum { STREAM_R0 = 2 };

static void fill_words(double *v, size_t count, int stream, int n, uint64_t modulus, double base)
{
    uint64_t u;

    mln_pattern_fill(v, count * sizeof(*v), mln_pattern_seed(stream, 0, (uint64_t)n, 0));
    for (size_t i = 0; i < count; i++) { /* each word in place: read it whole, then replace it */
        memcpy(&u, &v[i], sizeof(u));
        v[i] = base + (double)(u % modulus);
    }
}

void mln_matmul_fill(double *m, int n, int which)
{
    fill_words(m, (size_t)n * (size_t)n, which, n, 2 * MLN_MATMUL_VALUE_MAX + 1,
               -(double)MLN_MATMUL_VALUE_MAX);
}

mln_status_t mln_matmul_check_alloc(mln_matmul_check_t *c, int cap, int ref_cap)
{
    size_t len = (size_t)(cap > 0 ? cap : 1);
    int ok = 1;

    memset(c, 0, sizeof(*c));
    c->cap = cap;
    c->ref_cap = ref_cap;
    if (ref_cap > 0)
        ok = (c->ref = malloc((size_t)ref_cap * (size_t)ref_cap * sizeof(double))) != NULL;
    for (int v = 0; v < MLN_MATMUL_FREIVALDS_VECTORS && ok; v++) {
        c->r[v] = malloc(len * sizeof(double));
        c->z[v] = malloc(len * sizeof(double));
        ok = c->r[v] != NULL && c->z[v] != NULL;
    }
    if (ok)
        ok = (c->y = malloc(len * sizeof(double))) != NULL;
    if (!ok) {
        mln_matmul_check_free(c);
        return MLN_ERR_NOMEM;
    }
    return MLN_OK;
}

void mln_matmul_check_free(mln_matmul_check_t *c)
{
    free(c->ref);
    for (int v = 0; v < MLN_MATMUL_FREIVALDS_VECTORS; v++) {
        free(c->r[v]);
        free(c->z[v]);
    }
    free(c->y);
    memset(c, 0, sizeof(*c));
}

/* out[0..n) = M x, M n x n row-major. */
static void mat_vec(const double *M, const double *x, int n, double *out)
{
    for (int i = 0; i < n; i++) {
        const double *row = M + (size_t)i * (size_t)n;
        double s = 0.0;
        for (int j = 0; j < n; j++)
            s += row[j] * x[j];
        out[i] = s;
    }
}

/* out[0..n) = row i of A B, by the serial definition (i-k-j order: B is read row by row). */
static void product_row(const double *A, const double *B, int n, int i, double *out)
{
    const double *a = A + (size_t)i * (size_t)n;

    memset(out, 0, (size_t)n * sizeof(*out));
    for (int k = 0; k < n; k++) {
        const double *b = B + (size_t)k * (size_t)n;
        double aik = a[k];
        for (int j = 0; j < n; j++)
            out[j] += aik * b[j];
    }
}

void mln_matmul_check_prepare(mln_matmul_check_t *c, const double *A, const double *B, int n,
                              int exact)
{
    c->n = n;
    c->A = A;
    c->B = B;
    c->exact = exact && n <= c->ref_cap;
    for (int v = 0; v < MLN_MATMUL_FREIVALDS_VECTORS; v++) {
        fill_words(c->r[v], (size_t)n, STREAM_R0 + v, n, (UINT64_C(1) << 16) - 1, 1.0);
        mat_vec(B, c->r[v], n, c->y); /* |B r| <= 8 n 2^16 */
        mat_vec(A, c->y, n, c->z[v]); /* |A (B r)| <= 64 n^2 2^16 < 2^53 */
    }
    for (int i = 0; c->exact && i < n; i++)
        product_row(A, B, n, i, c->ref + (size_t)i * (size_t)n);
}

static void note_wrong(mln_matmul_verdict_t *out, int i, int j, double got, const double *want)
{
    if (out->first_row >= 0)
        return;
    out->first_row = i;
    out->first_col = j;
    out->first_got = got;
    out->first_want_known = want != NULL;
    out->first_want = want != NULL ? *want : 0.0;
}

/* Elements of a row that are not integers of magnitude <= bound (NaN included). */
static uint64_t row_out_of_range(const double *row, int n, double bound, int *first)
{
    uint64_t bad = 0;

    *first = -1;
    for (int j = 0; j < n; j++) {
        double v = row[j];
        if (!(fabs(v) <= bound && v == floor(v))) {
            if (bad++ == 0)
                *first = j;
        }
    }
    return bad;
}

/* Wrong elements of row i of C against want[0..n) (the exact row). */
static uint64_t row_wrong(const double *row, const double *want, int n, int i,
                          mln_matmul_verdict_t *out)
{
    uint64_t wrong = 0;

    for (int j = 0; j < n; j++)
        if (row[j] != want[j]) { /* NaN != anything: counted */
            note_wrong(out, i, j, row[j], &want[j]);
            wrong++;
        }
    return wrong;
}

void mln_matmul_check_run(const mln_matmul_check_t *c, const double *C, mln_matmul_verdict_t *out)
{
    int n = c->n, first;
    double bound = (double)(MLN_MATMUL_VALUE_MAX * MLN_MATMUL_VALUE_MAX) * n;
    uint64_t recounted = 0;

    memset(out, 0, sizeof(*out));
    out->first_row = out->first_col = -1;
    for (int i = 0; i < n; i++) {
        const double *row = C + (size_t)i * (size_t)n;
        uint64_t bad = row_out_of_range(row, n, bound, &first), wrong;
        int flagged = bad > 0;

        /* Freivalds only on rows of integers in range: then every sum is exact */
        for (int v = 0; v < MLN_MATMUL_FREIVALDS_VECTORS && !flagged; v++) {
            double s = 0.0;
            for (int j = 0; j < n; j++)
                s += row[j] * c->r[v][j];
            flagged = s != c->z[v][i];
        }
        out->flagged += (uint64_t)flagged;
        if (c->exact) {
            wrong = row_wrong(row, c->ref + (size_t)i * (size_t)n, n, i, out);
        } else if (!flagged) {
            continue;
        } else if (recounted < MLN_MATMUL_RECOUNT_ROWS) {
            recounted++;
            product_row(c->A, c->B, n, i, c->y);
            wrong = row_wrong(row, c->y, n, i, out);
        } else { /* at least the out-of-range elements, at least one */
            out->lower_bound = 1;
            if (bad > 0)
                note_wrong(out, i, first, row[first], NULL);
            out->wrong += bad > 0 ? bad : 1;
            continue;
        }
        out->wrong += wrong;
        if (flagged && wrong == 0) { /* Freivalds said wrong, the exact row says right */
            out->inconsistent++;
            out->wrong++;
        }
    }
}
