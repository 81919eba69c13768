/*
 * matmul.c - mln-matmul: distributed C = A B, the seed's matrix multiply (seed 003,
 * ALGORITHMS.md M1), each phase timed; docs/METRICS.md (matmul) defines every number.
 *
 * Rank 0 holds A and B (N x N doubles, row-major, small integers: matmul_check.h).  Layouts:
 *   rows       MPI_Bcast(B); MPI_Scatterv of A's row blocks (rank r gets N/P rows, the first
 *              N%P ranks one more; ranks past N get none); local product; MPI_Gatherv of C's
 *              row blocks.  Rank 0 keeps its rows in place (MPI_IN_PLACE).  Any P >= 1.
 *   blocks2x2  the seed's GPU version on exactly 4 ranks: A in row halves A0, A1, B in column
 *              halves B0, B1 (the first half one longer for odd N); rank r = 2i + j receives
 *              (Ai, Bj) from rank 0 (point-to-point, a vector type for the column half), computes
 *              C_ij and sends it back.  There is no broadcast phase.
 * One repetition, on every rank (each phase behind a barrier, so it starts together):
 *   barrier; t0; bcast; barrier; scatter; barrier; local product; barrier; gather; t_end
 * Each phase's time and total = t_end - t0 are the max over ranks.  The local product is
 * OpenBLAS's dgemm_, one thread per rank by default (--blas-threads), or with --gpu cuBLAS
 * through matmul_gpu.h.  Outside the clock: before each repetition every receiving buffer is
 * filled with NaN (so a transfer that delivers nothing leaves NaNs in C), after it rank 0
 * checks the gathered C (matmul_check.c).
 *
 * Cost of the rows layout (alpha-beta, 8-byte words): bcast of N^2 words (a tree:
 * log P alpha + N^2 beta at best), scatter and gather of N^2 (P-1)/P words each through rank 0,
 * product 2 N^3 / P flops per rank.  The broadcast does not shrink with P: that is the seed's
 * observation 4.
 *
 * Exit status: 0 pass, 1 wrong elements, 2 usage or start-up error (memory included), 3
 * failure while running, 77 skipped (--gpu without a usable GPU; no result is written).
 * This file: set-up, memory, the phases and their timing; matmul_io.c: options, table, JSON;
 * matmul_check.c: the matrices and the verification.
 */
#include "matmul.h"
#include "matmul_gpu.h"
#include "mln_core.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* OpenBLAS (Fortran interface, 32-bit integers), declared here: where the headers live varies
 * between distributions and BLAS variants, the symbols do not. */
void dgemm_(const char *transa, const char *transb, const int *m, const int *n, const int *k,
            const double *alpha, const double *a, const int *lda, const double *b, const int *ldb,
            const double *beta, double *c, const int *ldc);
char *openblas_get_config(void);
void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);

/* ---- agreement, set-up ------------------------------------------------------------------ */

/* Every rank says whether it failed; the lowest failing rank prints its one line (so a usage or
 * start-up error never hangs anyone).  Returns 1 when some rank failed. */
static int mm_failed(const mm_t *m, mln_status_t st)
{
    int mine = st != MLN_OK ? m->rank : INT_MAX, lowest = INT_MAX;

    if (MPI_Allreduce(&mine, &lowest, 1, MPI_INT, MPI_MIN, m->comm) != MPI_SUCCESS)
        lowest = st != MLN_OK ? m->rank : INT_MAX;
    if (lowest != INT_MAX && lowest == m->rank)
        fprintf(stderr, "mln-%s: error: %s\n", MM_NAME,
                m->errmsg[0] ? m->errmsg : mln_status_str(st));
    return lowest != INT_MAX;
}

/* A failure while running: the others may wait in a collective, so abort them all. */
static void mm_abort(const mm_t *m, mln_status_t st)
{
    fprintf(stderr, "mln-%s: error: rank %d: %s%s%s; aborting the run\n", MM_NAME, m->rank,
            mln_status_str(st), m->errmsg[0] ? ": " : "", m->errmsg);
    MPI_Abort(m->comm, MLN_BENCH_EXIT_RUNTIME);
}

/* The ranks of this host in rank order: the GPU of a rank is local_rank % devices. */
static mln_status_t mm_local_rank(mm_t *m)
{
    MPI_Comm node = MPI_COMM_NULL;
    mln_status_t st = MLN_OK;

    MLN_MPI_CHECK(MPI_Comm_split_type(m->comm, MPI_COMM_TYPE_SHARED, m->rank, MPI_INFO_NULL, &node),
                  st, out);
    MLN_MPI_CHECK(MPI_Comm_rank(node, &m->local_rank), st, out);
out:
    if (node != MPI_COMM_NULL)
        MPI_Comm_free(&node);
    return st;
}

/*
 * --gpu: every rank asks for its device; if one cannot have it, the lowest such rank's reason
 * goes to rank 0, which prints "mln-matmul: skipped: no GPU (<reason>)", or "no GPU on rank R
 * (<reason>)" when rank 0 has one.  Returns 1 when the run is skipped (every rank agrees), 0
 * when every rank has a GPU, -1 on an MPI error.
 */
static int mm_gpu_skip(mm_t *m)
{
    char why[256] = "", where[32] = "";
    int ok, mine, lowest = INT_MAX;

    if (mm_local_rank(m) != MLN_OK)
        return -1;
    ok = mln_gpu_available(m->local_rank, why, sizeof(why)) == 1;
    m->gpu_ready = ok;
    mine = ok ? INT_MAX : m->rank;
    if (MPI_Allreduce(&mine, &lowest, 1, MPI_INT, MPI_MIN, m->comm) != MPI_SUCCESS)
        return -1;
    if (lowest == INT_MAX)
        return 0;
    why[sizeof(why) - 1] = '\0';
    if (MPI_Bcast(why, (int)sizeof(why), MPI_CHAR, lowest, m->comm) != MPI_SUCCESS)
        return -1;
    if (m->rank == 0) {
        /* the reason may already say "no GPU: ..." */
        const char *r = strncmp(why, "no GPU: ", 8) == 0 ? why + 8 : why;
        if (lowest != 0)
            snprintf(where, sizeof(where), " on rank %d", lowest);
        fprintf(stderr, "mln-%s: skipped: no GPU%s (%s)\n", MM_NAME, where, r);
    }
    return 1;
}

/* OpenBLAS threads of this rank; the params.  Every rank. */
static mln_status_t mm_setup_params(mm_t *m)
{
    const mm_opts_t *o = &m->o;
    mln_status_t st = MLN_OK;
    int got;

    openblas_set_num_threads((int)o->blas_threads);
    got = openblas_get_num_threads();
    if (got != o->blas_threads && m->rank == 0)
        fprintf(stderr, "mln-%s: warning: OpenBLAS runs %d thread(s), not the %lld asked for\n",
                MM_NAME, got, (long long)o->blas_threads);
    MLN_CHECK(mln_kv_set(&m->params, "n", 1, o->n_list, 0), st, out);
    MLN_CHECK(mln_kv_set_int(&m->params, "reps", o->reps), st, out);
    MLN_CHECK(mln_kv_set(&m->params, "layout", 6, mm_layout_names[o->layout], 0), st, out);
    MLN_CHECK(mln_kv_set_int(&m->params, "gpu", o->gpu), st, out);
    MLN_CHECK(mln_kv_set(&m->params, "blas", 4, o->gpu ? "cuBLAS" : openblas_get_config(), 0), st,
              out);
    MLN_CHECK(mln_kv_set_int(&m->params, "blas_threads", got), st, out);
    MLN_CHECK(mln_kv_set_int(&m->params, "exact_max_n", o->exact_max_n), st, out);
    MLN_CHECK(mln_kv_set_int(&m->params, "freivalds_vectors", MLN_MATMUL_FREIVALDS_VECTORS), st,
              out);
    if (o->inject)
        MLN_CHECK(mln_kv_set_int(&m->params, "inject_error", 1), st, out);
out:
    if (st != MLN_OK)
        mm_fail(m, "out of memory");
    return st;
}

/* ---- layout ----------------------------------------------------------------------------- */

static mm_part_t mm_part(const mm_t *m, int n, int r)
{
    mm_part_t p;
    int half = (n + 1) / 2, base = n / m->nranks, extra = n % m->nranks;

    if (m->o.layout == LAYOUT_ROWS) { /* the first N % P ranks one row more */
        p.rows = base + (r < extra);
        p.row0 = r * base + (r < extra ? r : extra);
        p.col0 = 0;
        p.cols = n;
    } else { /* rank 2i + j: row half i, column half j; the first halves one longer */
        p.row0 = r / 2 ? half : 0;
        p.rows = r / 2 ? n - half : half;
        p.col0 = r % 2 ? half : 0;
        p.cols = r % 2 ? n - half : half;
    }
    return p;
}

/* The rank that corrupts C with --inject-error: the last one with a non-empty block. */
static int mm_injector(const mm_t *m, int n)
{
    for (int r = m->nranks - 1; r > 0; r--) {
        mm_part_t p = mm_part(m, n, r);
        if (p.rows > 0 && p.cols > 0)
            return r;
    }
    return 0;
}

static double *mm_doubles(size_t count)
{
    void *p = NULL;

    if (posix_memalign(&p, 4096, (count ? count : 1) * sizeof(double)) != 0)
        return NULL;
    return p;
}

/*
 * What each rank needs for the largest N, and no more: rank 0 A, B and C (in the rows layout it
 * keeps its own blocks in place), the others B and their blocks (rows) or their three blocks
 * (blocks2x2); rank 0's verifier keeps the serial product only up to --exact-max-n.
 */
static mln_status_t mm_alloc(mm_t *m)
{
    int n = m->o.ns[m->o.nn - 1], ref = 0, ok = 1;
    mm_part_t p = mm_part(m, n, m->rank);
    size_t nn = (size_t)n * (size_t)n, a_len = (size_t)p.rows * (size_t)n;
    size_t b_len = (size_t)n * (size_t)p.cols, c_len = (size_t)p.rows * (size_t)p.cols, need;
    int rows = m->o.layout == LAYOUT_ROWS, root = m->rank == 0, blocks = !rows || !root;

    for (int i = 0; i < m->o.nn; i++)
        if (m->o.ns[i] <= m->o.exact_max_n)
            ref = m->o.ns[i];
    need = (root   ? 3 * nn + (size_t)ref * (size_t)ref
            : rows ? nn
                   : 0) +
           (blocks ? a_len + c_len : 0) + (!rows ? b_len : 0);
    if (root)
        ok = (m->A = mm_doubles(nn)) && (m->B = mm_doubles(nn)) && (m->C = mm_doubles(nn)) &&
             mln_matmul_check_alloc(&m->check, n, ref) == MLN_OK;
    else if (rows)
        ok = (m->B = mm_doubles(nn)) != NULL;
    if (ok && blocks)
        ok = (m->Ab = mm_doubles(a_len)) && (m->Cb = mm_doubles(c_len));
    if (ok && !rows)
        ok = (m->Bb = mm_doubles(b_len)) != NULL;
    if (ok && root) {
        m->counts = calloc((size_t)m->nranks, sizeof(int));
        m->displs = calloc((size_t)m->nranks, sizeof(int));
        m->samples = calloc((size_t)M_COUNT * (size_t)m->o.reps, sizeof(double));
        m->rows = calloc((size_t)m->o.nn, sizeof(mm_row_t));
        ok = m->counts && m->displs && m->samples && m->rows;
    }
    if (!ok)
        return mm_fail(m,
                       "rank %d: cannot allocate %.1f MB for N = %d (rank 0: A, B, C; the others: "
                       "%s); try a smaller --n or fewer ranks per host",
                       m->rank, (double)(need * sizeof(double)) / 1e6, n,
                       rows ? "B and their row blocks of A and C" : "their blocks of A, B and C");
    return MLN_OK;
}

static void mm_free(mm_t *m)
{
    free(m->A);
    free(m->B);
    free(m->C);
    free(m->Ab);
    free(m->Bb);
    free(m->Cb);
    free(m->counts);
    free(m->displs);
    free(m->samples);
    free(m->rows);
    mln_matmul_check_free(&m->check);
    mln_prov_free(&m->prov);
    mln_kv_free(&m->params);
    mln_kv_free(&m->meta);
    free(m->command);
}

/* Rank 0: the counts and displacements (rows) or datatypes (blocks2x2) of order n. */
static mln_status_t mm_plan(mm_t *m, int n)
{
    mln_status_t st = MLN_OK;

    for (int r = 0; r < m->nranks; r++) {
        mm_part_t p = mm_part(m, n, r);
        if (m->o.layout == LAYOUT_ROWS) { /* N <= 46340: N * N fits an int */
            m->counts[r] = p.rows * n;
            m->displs[r] = p.row0 * n;
            continue;
        }
        if (r < 2 && p.cols > 0) { /* B's column half r: n rows of p.cols, stride n */
            MLN_MPI_CHECK(MPI_Type_vector(n, p.cols, n, MPI_DOUBLE, &m->bcol[r]), st, out);
            MLN_MPI_CHECK(MPI_Type_commit(&m->bcol[r]), st, out);
        }
        if (p.rows > 0 && p.cols > 0) { /* C_ij inside C */
            MLN_MPI_CHECK(MPI_Type_vector(p.rows, p.cols, n, MPI_DOUBLE, &m->cblk[r]), st, out);
            MLN_MPI_CHECK(MPI_Type_commit(&m->cblk[r]), st, out);
        }
    }
out:
    if (st != MLN_OK)
        mm_fail(m, "cannot build the MPI datatypes of N = %d", n);
    return st;
}

static void mm_unplan(mm_t *m)
{
    for (int i = 0; i < 2; i++)
        if (m->bcol[i] != MPI_DATATYPE_NULL)
            MPI_Type_free(&m->bcol[i]);
    for (int i = 0; i < 4; i++)
        if (m->cblk[i] != MPI_DATATYPE_NULL)
            MPI_Type_free(&m->cblk[i]);
}

/* ---- one repetition --------------------------------------------------------------------- */

static void fill_nan(double *v, size_t count)
{
    for (size_t i = 0; i < count; i++)
        v[i] = NAN;
}

/* Outside the clock: whatever a phase should deliver starts as NaN, so a message that does not
 * arrive (or a product that is not written) shows in C instead of last repetition's data. */
static void mm_clear(mm_t *m, int n, const mm_part_t *p)
{
    size_t nn = (size_t)n * (size_t)n;

    if (m->rank == 0)
        fill_nan(m->C, nn);
    else if (m->o.layout == LAYOUT_ROWS)
        fill_nan(m->B, nn);
    if (m->Ab != NULL) {
        fill_nan(m->Ab, (size_t)p->rows * (size_t)n);
        fill_nan(m->Cb, (size_t)p->rows * (size_t)p->cols);
    }
    if (m->Bb != NULL)
        fill_nan(m->Bb, (size_t)n * (size_t)p->cols);
}

/* C (rows x cols) = A (rows x k) B (k x cols), all contiguous row-major.  dgemm_ is
 * column-major, where these arrays read as their transposes: C^T = B^T A^T, so the operands
 * are passed swapped. */
static mln_status_t mm_product(mm_t *m, int rows, int cols, int k, const double *A, const double *B,
                               double *C, double t[T_COUNT])
{
    const double one = 1.0, zero = 0.0;
    mln_gpu_times_t gt = {0};
    char why[256];

    if (rows == 0 || cols == 0)
        return MLN_OK; /* an empty block: nothing to compute (and dgemm_ wants ld >= 1) */
    if (!m->o.gpu) {
        dgemm_("N", "N", &cols, &rows, &k, &one, B, &cols, A, &k, &zero, C, &cols);
        return MLN_OK;
    }
    if (mln_gpu_dgemm(rows, cols, k, A, B, C, &gt, why, sizeof(why)) != 0) {
        mm_fail(m, "mln_gpu_dgemm (%d x %d x %d): %s", rows, cols, k, why);
        return MLN_ERR_UNSUPPORTED;
    }
    t[T_H2D] = gt.h2d;
    t[T_KERNEL] = gt.kernel;
    t[T_D2H] = gt.d2h;
    return MLN_OK;
}

static mln_status_t mm_scatter_blocks(mm_t *m, int n, const mm_part_t *p)
{
    MPI_Request req[10];
    int nreq = 0;
    mln_status_t st = MLN_OK;

    if (p->rows > 0)
        MLN_MPI_CHECK(MPI_Irecv(m->Ab, p->rows * n, MPI_DOUBLE, 0, TAG_A, m->comm, &req[nreq++]),
                      st, out);
    if (p->cols > 0)
        MLN_MPI_CHECK(MPI_Irecv(m->Bb, n * p->cols, MPI_DOUBLE, 0, TAG_B, m->comm, &req[nreq++]),
                      st, out);
    for (int r = 0; m->rank == 0 && r < m->nranks; r++) {
        mm_part_t q = mm_part(m, n, r);
        if (q.rows > 0)
            MLN_MPI_CHECK(MPI_Isend(m->A + (size_t)q.row0 * (size_t)n, q.rows * n, MPI_DOUBLE, r,
                                    TAG_A, m->comm, &req[nreq++]),
                          st, out);
        if (q.cols > 0)
            MLN_MPI_CHECK(
                MPI_Isend(m->B + q.col0, 1, m->bcol[r % 2], r, TAG_B, m->comm, &req[nreq++]), st,
                out);
    }
    MLN_MPI_CHECK(MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE), st, out);
out:
    return st;
}

static mln_status_t mm_gather_blocks(mm_t *m, int n, const mm_part_t *p)
{
    MPI_Request req[5];
    int nreq = 0;
    mln_status_t st = MLN_OK;

    if (p->rows > 0 && p->cols > 0)
        MLN_MPI_CHECK(
            MPI_Isend(m->Cb, p->rows * p->cols, MPI_DOUBLE, 0, TAG_C, m->comm, &req[nreq++]), st,
            out);
    for (int r = 0; m->rank == 0 && r < m->nranks; r++) {
        mm_part_t q = mm_part(m, n, r);
        if (q.rows > 0 && q.cols > 0)
            MLN_MPI_CHECK(MPI_Irecv(m->C + (size_t)q.row0 * (size_t)n + q.col0, 1, m->cblk[r], r,
                                    TAG_C, m->comm, &req[nreq++]),
                          st, out);
    }
    MLN_MPI_CHECK(MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE), st, out);
out:
    return st;
}

/* One timed repetition (see the top of the file); t: this rank's times. */
static mln_status_t mm_rep(mm_t *m, int n, double t[T_COUNT])
{
    mm_part_t p = mm_part(m, n, m->rank);
    int rows = m->o.layout == LAYOUT_ROWS, root = m->rank == 0;
    /* rank 0's row block stays in A and C (MPI_IN_PLACE); everyone else works on its own */
    const double *a = rows && root ? m->A : m->Ab, *b = rows ? m->B : m->Bb;
    double *c = rows && root ? m->C : m->Cb;
    double t0, ts;
    mln_status_t st = MLN_OK;

    memset(t, 0, T_COUNT * sizeof(double));
    mm_clear(m, n, &p);
    MLN_MPI_CHECK(MPI_Barrier(m->comm), st, out);
    t0 = MPI_Wtime();
    if (rows) {
        MLN_MPI_CHECK(MPI_Bcast(m->B, n * n, MPI_DOUBLE, 0, m->comm), st, out);
        t[T_BCAST] = MPI_Wtime() - t0;
        MLN_MPI_CHECK(MPI_Barrier(m->comm), st, out);
        ts = MPI_Wtime();
        MLN_MPI_CHECK(MPI_Scatterv(m->A, m->counts, m->displs, MPI_DOUBLE,
                                   root ? MPI_IN_PLACE : m->Ab, p.rows * n, MPI_DOUBLE, 0, m->comm),
                      st, out);
    } else {
        ts = t0;
        MLN_CHECK(mm_scatter_blocks(m, n, &p), st, out);
    }
    t[T_SCATTER] = MPI_Wtime() - ts;
    MLN_MPI_CHECK(MPI_Barrier(m->comm), st, out);
    ts = MPI_Wtime();
    MLN_CHECK(mm_product(m, p.rows, p.cols, n, a, b, c, t), st, out);
    t[T_DGEMM] = MPI_Wtime() - ts;
    if (m->o.inject && m->rank == mm_injector(m, n) && p.rows > 0 && p.cols > 0)
        c[(size_t)p.rows * (size_t)p.cols / 2] += 1.0; /* one wrong element, before the gather */
    MLN_MPI_CHECK(MPI_Barrier(m->comm), st, out);
    ts = MPI_Wtime();
    if (rows)
        MLN_MPI_CHECK(MPI_Gatherv(root ? MPI_IN_PLACE : m->Cb, p.rows * n, MPI_DOUBLE, m->C,
                                  m->counts, m->displs, MPI_DOUBLE, 0, m->comm),
                      st, out);
    else
        MLN_CHECK(mm_gather_blocks(m, n, &p), st, out);
    t[T_GATHER] = MPI_Wtime() - ts;
    t[T_TOTAL] = MPI_Wtime() - t0;
out:
    return st;
}

/* ---- one N ------------------------------------------------------------------------------ */

/* Rank 0: the metrics of repetition `rep` from the times (max over ranks). */
static void mm_record(mm_t *m, int n, int rep, const double tmax[T_COUNT])
{
    double *s = m->samples, total = tmax[T_TOTAL], comm;
    size_t reps = (size_t)m->o.reps;

    for (int k = 0; k < T_COUNT; k++) /* M_TOTAL .. M_D2H are T_TOTAL .. T_D2H */
        s[(size_t)k * reps + (size_t)rep] = tmax[k];
    comm = tmax[T_BCAST] + tmax[T_SCATTER] + tmax[T_GATHER];
    s[(size_t)M_GFLOPS * reps + (size_t)rep] =
        total > 0 ? 2.0 * (double)n * (double)n * (double)n / total / 1e9 : 0.0;
    s[(size_t)M_COMM * reps + (size_t)rep] = total > 0 ? comm / total : 0.0;
}

/* Rank 0: checks repetition `rep`'s C; the wrong elements, with a line on stderr if any. */
static uint64_t mm_verify(mm_t *m, int n, int rep, int say)
{
    mln_matmul_verdict_t v;
    char want[64] = "not an integer in [-64 N, 64 N]";

    mln_matmul_check_run(&m->check, m->C, &v);
    if (v.inconsistent > 0)
        fprintf(stderr,
                "mln-%s: error: N = %d, repetition %d: Freivalds' check flagged %llu row(s) that "
                "the exact comparison found right (a verifier fault; counted as wrong)\n",
                MM_NAME, n, rep, (unsigned long long)v.inconsistent);
    if (v.wrong == 0 || !say)
        return v.wrong;
    if (v.first_want_known)
        snprintf(want, sizeof(want), "expected %.17g", v.first_want);
    fprintf(stderr,
            "mln-%s: error: N = %d, repetition %d: %s%llu wrong element(s) of C in %llu row(s) "
            "(first: C[%d][%d] = %.17g, %s)\n",
            MM_NAME, n, rep, v.lower_bound ? "at least " : "", (unsigned long long)v.wrong,
            (unsigned long long)v.flagged, v.first_row, v.first_col, v.first_got, want);
    return v.wrong;
}

/* All repetitions of order n: data and plan, then per repetition the phases, the times reduced
 * to rank 0, and rank 0's check of C. */
static mln_status_t mm_run_n(mm_t *m, int i)
{
    int n = m->o.ns[i], exact = n <= m->o.exact_max_n;
    mm_row_t *row = m->rank == 0 ? &m->rows[i] : NULL;
    double t[T_COUNT], tmax[T_COUNT], t_n = MPI_Wtime();
    uint64_t wrong;
    int bad_reps = 0;
    mln_status_t st = MLN_OK;

    if (m->rank == 0) {
        mln_matmul_fill(m->A, n, MLN_MATMUL_A);
        mln_matmul_fill(m->B, n, MLN_MATMUL_B);
        mln_matmul_check_prepare(&m->check, m->A, m->B, n, exact);
        MLN_CHECK(mm_plan(m, n), st, out);
        *row = (mm_row_t){.n = n, .exact = exact};
    }
    for (int rep = 0; rep < m->o.reps; rep++) {
        MLN_CHECK(mm_rep(m, n, t), st, out);
        MLN_MPI_CHECK(MPI_Reduce(t, tmax, T_COUNT, MPI_DOUBLE, MPI_MAX, 0, m->comm), st, out);
        if (m->rank != 0)
            continue;
        mm_record(m, n, rep, tmax);
        wrong = mm_verify(m, n, rep, bad_reps < MM_ERROR_LINES);
        row->errors += wrong;
        bad_reps += wrong > 0;
        if (n >= MM_PROGRESS_N && !m->o.quiet)
            fprintf(stderr, "mln-%s: N = %d, repetition %d/%lld: total %.3f s\n", MM_NAME, n,
                    rep + 1, (long long)m->o.reps, tmax[T_TOTAL]);
    }
    if (m->rank == 0) {
        for (int k = 0; k < M_COUNT; k++)
            MLN_CHECK(mln_stats_compute(m->samples + (size_t)k * (size_t)m->o.reps,
                                        (size_t)m->o.reps, &row->stats[k]),
                      st, out);
        m->total_errors += row->errors;
        if (bad_reps > MM_ERROR_LINES)
            fprintf(stderr,
                    "mln-%s: error: N = %d: wrong elements in %d of %lld repetitions (the first "
                    "%d shown), %llu in all\n",
                    MM_NAME, n, bad_reps, (long long)m->o.reps, MM_ERROR_LINES,
                    (unsigned long long)row->errors);
        if (!m->o.quiet) {
            mm_print_row(m, row);
            fprintf(stderr,
                    "mln-%s: N = %d done in %.1f s: total_s %.4g, %.4g GFLOP/s, %llu wrong "
                    "element(s) (%s)\n",
                    MM_NAME, n, MPI_Wtime() - t_n, row->stats[M_TOTAL].median,
                    row->stats[M_GFLOPS].median, (unsigned long long)row->errors,
                    exact ? "exact comparison and Freivalds" : "Freivalds' check");
        }
    }
out:
    if (m->rank == 0)
        mm_unplan(m);
    return st;
}

/* ---- main ------------------------------------------------------------------------------- */

/* Options, GPU, memory, JSON path: every rank agrees on each step.  Returns the exit status
 * when the run must not go on, -1 when it is ready. */
static int mm_start(mm_t *m, int argc, char **argv)
{
    mln_status_t st = MLN_OK;
    int skip;

    m->command = mln_command_line(argc, argv);
    if (m->command == NULL)
        st = mm_fail(m, "out of memory");
    if (st == MLN_OK)
        st = mm_parse(m, argc, argv);
    if (mm_failed(m, st))
        return MLN_BENCH_EXIT_USAGE;
    if (m->o.help || m->o.version) {
        if (m->rank == 0 && m->o.help)
            mm_usage();
        else if (m->rank == 0)
            printf("mln-%s (multilane %s)\n", MM_NAME, mln_version_string());
        return MLN_BENCH_EXIT_PASS;
    }
    for (int k = 0; k < M_COUNT; k++)
        m->active[k] = (k != M_BCAST || m->o.layout == LAYOUT_ROWS) &&
                       ((k != M_H2D && k != M_KERNEL && k != M_D2H) || m->o.gpu);
    if (m->o.gpu) {
        skip = mm_gpu_skip(m);
        if (skip < 0) /* some ranks may wait in the agreement */
            mm_abort(m, MLN_ERR_MPI);
        if (skip > 0)
            return MLN_BENCH_EXIT_SKIP;
    }
    st = mm_setup_params(m);
    if (st == MLN_OK)
        st = mm_alloc(m);
    if (st == MLN_OK && m->rank == 0 && m->o.json_path != NULL &&
        mln_result_probe(m->o.json_path, m->errmsg, sizeof(m->errmsg)) != MLN_OK)
        st = MLN_ERR_ARG;
    if (mm_failed(m, st))
        return MLN_BENCH_EXIT_USAGE;
    return -1;
}

int main(int argc, char **argv)
{
    mm_t mm = {.comm = MPI_COMM_NULL};
    mm_t *m = &mm;
    int rc, mpi_up = 0;
    mln_status_t st;

    for (int i = 0; i < 2; i++)
        m->bcol[i] = MPI_DATATYPE_NULL;
    for (int i = 0; i < 4; i++)
        m->cblk[i] = MPI_DATATYPE_NULL;
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
        fprintf(stderr, "mln-%s: error: MPI_Init failed\n", MM_NAME);
        return MLN_BENCH_EXIT_USAGE;
    }
    if (MPI_Comm_dup(MPI_COMM_WORLD, &m->comm) != MPI_SUCCESS ||
        MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN) != MPI_SUCCESS ||
        MPI_Comm_rank(m->comm, &m->rank) != MPI_SUCCESS ||
        MPI_Comm_size(m->comm, &m->nranks) != MPI_SUCCESS) {
        fprintf(stderr, "mln-%s: error: cannot set up the MPI communicator\n", MM_NAME);
        MPI_Abort(MPI_COMM_WORLD, MLN_BENCH_EXIT_USAGE);
    }
    rc = mm_start(m, argc, argv);
    if (rc >= 0)
        goto out;
    st = mln_prov_collect(m->comm, &mln_bench_coll_mpi, &m->prov);
    if (st != MLN_OK)
        mm_abort(m, st);
    if (m->rank == 0 && !m->o.quiet) {
        mln_prov_print(&m->prov, MM_NAME, MM_DESCRIPTION, m->command, &m->params, &m->meta);
        mm_print_header(m);
    }
    m->t_start = MPI_Wtime();
    for (int i = 0; i < m->o.nn; i++) {
        st = mm_run_n(m, i);
        if (st != MLN_OK)
            mm_abort(m, st);
    }
    if (m->rank == 0) {
        printf("# wall_time_s: %.1f\n# errors: %llu\n# verdict: %s\n", MPI_Wtime() - m->t_start,
               (unsigned long long)m->total_errors, m->total_errors ? "FAIL" : "PASS");
        fflush(stdout);
        rc = m->total_errors ? MLN_BENCH_EXIT_FAIL : MLN_BENCH_EXIT_PASS;
        if (m->o.json_path != NULL && mm_write_json(m) != MLN_OK) {
            fprintf(stderr, "mln-%s: error: %s\n", MM_NAME, m->errmsg);
            rc = MLN_BENCH_EXIT_RUNTIME;
        }
    }
    if (MPI_Bcast(&rc, 1, MPI_INT, 0, m->comm) != MPI_SUCCESS)
        rc = MLN_BENCH_EXIT_RUNTIME;
out:
    if (m->gpu_ready)
        mln_gpu_release();
    mm_free(m);
    if (m->comm != MPI_COMM_NULL)
        MPI_Comm_free(&m->comm);
    if (MPI_Initialized(&mpi_up) == MPI_SUCCESS && mpi_up)
        MPI_Finalize();
    return rc;
}
