/*
 * matmul.h - the parts of mln-matmul (bench/matmul.c: set-up, phases, timing; matmul_io.c:
 * options, --help, the table and the JSON rows; matmul_check.c: data and verification) share
 * these types.  Not a library interface: only mln-matmul includes it.
 */
#ifndef MLN_MATMUL_H
#define MLN_MATMUL_H

#include "harness.h"
#include "matmul_check.h"
#include "result.h"

#include <mpi.h>
#include <stdint.h>

#define MM_NAME "matmul"
#define MM_DESCRIPTION                                                                             \
    "distributed matrix multiply C = A B: broadcast B, scatter row blocks of A, local DGEMM, "     \
    "gather C; every phase timed, C verified"
#define MM_MAX_NS 64       /* orders in one --n list */
#define MM_PROGRESS_N 4000 /* from this N on, a progress line per repetition */
#define MM_ERROR_LINES 3   /* repetitions with wrong elements described on stderr, per N */
#define MM_MAX_BLAS_THREADS 256

enum { TAG_A = 1, TAG_B = 2, TAG_C = 3 };

typedef enum mm_layout { LAYOUT_ROWS, LAYOUT_BLOCKS } mm_layout_t;
extern const char *const mm_layout_names[2]; /* "rows", "blocks2x2" */

/* The per-rank times of one repetition (seconds), reduced with MAX to rank 0. */
enum { T_TOTAL, T_BCAST, T_SCATTER, T_DGEMM, T_GATHER, T_H2D, T_KERNEL, T_D2H, T_COUNT };

/* The metrics, in the result's order: times (T_* of the same index), then the derived ones. */
enum {
    M_TOTAL,
    M_BCAST,
    M_SCATTER,
    M_DGEMM,
    M_GATHER,
    M_H2D,
    M_KERNEL,
    M_D2H,
    M_GFLOPS,
    M_COMM,
    M_COUNT
};

/* Their definitions (matmul_io.c): name, unit, statistic, description, higher is better. */
extern const mln_bench_metric_t mm_metrics[M_COUNT];

typedef struct mm_opts {
    int ns[MM_MAX_NS]; /* ascending, distinct */
    int nn;
    char n_list[MM_MAX_NS * 7];
    int64_t reps, blas_threads, exact_max_n;
    mm_layout_t layout;
    int gpu, inject, quiet, help, version;
    const char *json_path;
} mm_opts_t;

/* This rank's block of C (and of the operands): rows [row0, row0 + rows), cols [col0, ...). */
typedef struct mm_part {
    int row0, rows, col0, cols;
} mm_part_t;

typedef struct mm_row {
    int n, exact;
    uint64_t errors;
    mln_stats_t stats[M_COUNT];
} mm_row_t;

typedef struct mm {
    MPI_Comm comm;
    int rank, nranks, local_rank;
    mm_opts_t o;
    char errmsg[512]; /* this rank's first usage or start-up error */
    char *command;
    mln_kv_list_t params, meta;
    mln_prov_t prov;
    int active[M_COUNT]; /* metrics of this run (layout, --gpu) */
    int gpu_ready;

    /* buffers, sized for the largest N (see mm_alloc) */
    double *A, *B, *C;    /* rank 0: A, B, C; rows layout: every rank has B */
    double *Ab, *Bb, *Cb; /* this rank's blocks (rows: Ab, Cb off rank 0; blocks2x2: all) */
    int *counts, *displs; /* rank 0, rows layout: MPI_Scatterv/Gatherv in elements */
    MPI_Datatype bcol[2], cblk[4]; /* rank 0, blocks2x2: B's column halves, C's blocks */
    mln_matmul_check_t check;      /* rank 0 */

    /* results (rank 0) */
    double *samples; /* [M_COUNT][reps] of the current N */
    mm_row_t *rows;
    uint64_t total_errors;
    double t_start;
} mm_t;

/* ---- matmul_io.c ------------------------------------------------------------------------ */

/* A usage or start-up error of this rank: the first message is kept in m->errmsg. */
mln_status_t mm_fail(mm_t *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Parses argv (identically on every rank) into m->o and m->meta; defaults first. */
mln_status_t mm_parse(mm_t *m, int argc, char **argv);
/* --help on stdout. */
void mm_usage(void);
/* Rank 0, stdout: the two header lines (names, then units), and one row of the table. */
void mm_print_header(const mm_t *m);
void mm_print_row(const mm_t *m, const mm_row_t *r);
/* Rank 0: the JSON result to m->o.json_path (result.c); the reason in m->errmsg on failure. */
mln_status_t mm_write_json(mm_t *m);

#endif /* MLN_MATMUL_H */
