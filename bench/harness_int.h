/*
 * harness_int.h - internals shared by harness.c (options, sweep) and harness_report.c
 * (provenance, table, JSON).  Benchmarks include harness.h only.
 */
#ifndef MLN_HARNESS_INT_H
#define MLN_HARNESS_INT_H

#include "coll.h"
#include "harness.h"
#include "result.h"

struct mln_bench {
    const mln_bench_desc_t *desc;
    MPI_Comm comm;
    int rank, nranks;
    void *state;
    char errmsg[512]; /* first usage or setup error of this rank */
    int skip;         /* errmsg is why this rank skips the run (mln_bench_skip), not an error */
    int skip_agreed;  /* the ranks agreed to skip the run: exit MLN_BENCH_EXIT_SKIP */

    /* options */
    const char *sizes_spec;
    mln_size_list_t sizes;
    int64_t reps;
    mln_iter_rule_t rule;
    unsigned char *selected; /* per desc test: 1 = run it */
    int tests_named;         /* --tests was given (mln_bench_selected) */
    const char *json_path;
    int quiet, help, version;
    int inject;
    uint64_t inject_bytes;
    mln_kv_list_t params, meta; /* the provenance's "params" and "meta" (result.h) */
    char *command;

    /* provenance, filled by mln_bench_report_collect */
    mln_prov_t prov;

    /* buffers */
    char *send, *recv;

    /* results: row i, test j at [i * ntests + j] (all ranks hold the same values) */
    double *values;   /* reps scratch */
    double *cpu;      /* reps scratch: CPU seconds per iteration, sum over ranks */
    double *cpu_iter; /* median of cpu (mln_bench_cpu_per_iter); < 0: the test did not run */
    size_t row;       /* the row being run, or just run (the columns') */
    int64_t *row_iters;
    double *row_columns;
    mln_stats_t *stats;
    uint64_t *errors;
    unsigned char *skipped; /* [size][test]: runs_at said no */
    uint64_t total_errors;
    double t_start; /* MPI_Wtime at the start of the sweep */
};

/*
 * The runtime of a program: how MPI starts, what the benchmark communicator is, and the
 * collectives of the harness.  One definition per harness library, chosen at link time:
 *   harness_mln.c   (mln_bench_harness) libmultilane: mln_init, a duplicate of
 *                   mln_comm_world(), MPI's collectives
 *   harness_plain.c (mln_bench_plain)   no Multilane library: MPI_COMM_WORLD itself and
 *                   point-to-point collectives (coll_p2p.c), for mln-relay under the grid
 */
typedef struct mln_bench_rt {
    const char *name; /* "multilane", "plain" */
    const mln_bench_coll_t *coll;
    /* MPI_Init (or MPI_Init_thread); MPI's error code. */
    int (*mpi_init)(int *argc, char ***argv);
    /* After the options and before_init: the library and b->comm, b->rank, b->nranks.  A
     * failure leaves one line in b->errmsg (all ranks then agree on it); *inited = 1 when fini
     * must undo what init did. */
    mln_status_t (*init)(mln_bench_t *b, int *inited);
    /* Frees b->comm where init made it, and the library (inited). */
    void (*fini)(mln_bench_t *b, int inited);
} mln_bench_rt_t;

extern const mln_bench_rt_t mln_bench_rt;

/* Library, standard, date and the distinct host names (collective: every rank calls it). */
mln_status_t mln_bench_report_collect(mln_bench_t *b);
/* Rank 0: the '#' provenance block, the two header lines, one row, the footer. */
void mln_bench_report_provenance(const mln_bench_t *b);
void mln_bench_report_header(const mln_bench_t *b);
void mln_bench_report_row(const mln_bench_t *b, size_t row);
void mln_bench_report_footer(const mln_bench_t *b);
/* Checks that `path` can be written (creates and removes PATH.tmp); message into b->errmsg. */
mln_status_t mln_bench_report_probe(mln_bench_t *b, const char *path);
/* Writes the JSON result to PATH.tmp, then renames it to PATH; message into b->errmsg. */
mln_status_t mln_bench_report_json(mln_bench_t *b, const char *path);

#endif /* MLN_HARNESS_INT_H */
