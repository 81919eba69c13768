/*
 * harness.h - the shared benchmark harness (STYLE.md 13-16).
 *
 * A benchmark is a thin main() that passes a descriptor to mln_bench_main().  The descriptor
 * lists the tests (an ops struct each: plan, one iteration, metric conversion) and the
 * benchmark's own options; the harness owns everything else: option parsing, the size sweep,
 * iteration scaling, warm-up, timing (max over ranks), repetitions and their statistics,
 * buffers, data validation, the provenance block, the table and the JSON result.
 *
 * Start-up: MPI_Init; options (all of them, on every rank of MPI_COMM_WORLD); the descriptor's
 * before_init hook; the runtime's start; setup; buffers.
 *
 * Runtimes (chosen when the program is linked; harness_int.h):
 *   mln_bench_harness  libmultilane: mln_init; the benchmark communicator = a duplicate of
 *                      mln_comm_world() (the application's ranks: helper ranks of
 *                      MLN_STRIPE_BACKEND=helper never return from mln_init); the harness's
 *                      collectives are MPI's (MPI_Allreduce, MPI_Bcast, MPI_Gather)
 *   mln_bench_plain    no Multilane library (mln-relay): the benchmark communicator is
 *                      MPI_COMM_WORLD; the harness's collectives are point-to-point through
 *                      rank 0 (coll.h), tags from MLN_BENCH_COLL_TAG up reserved, so the
 *                      program runs under `multilane grid run`, where only point-to-point and
 *                      a few calls cross sites
 *
 * Per size, test and repetition the harness does, on every rank:
 *   fill send slots with the pattern (seed: rank, rep, size, slot)
 *   warm-up iterations; clear the receive slots; MPI_Barrier
 *   c0 = CPU time; t0 = MPI_Wtime(); `iters` timed iterations;
 *   t = (MPI_Wtime() - t0) / iters; c = (CPU time - c0) / iters
 *   check every receive slot against its sender's pattern (wrong bytes; see mln_bench_plan_t)
 *   allreduce(MAX) of t, allreduce(SUM) of wrong bytes and of c; metric = test->value(t)
 * and reports the median, min and max of the metric over the repetitions (and keeps the median
 * of c for the columns: mln_bench_cpu_per_iter).  docs/METRICS.md
 * defines every rule.
 *
 * Exit codes of mln_bench_main: 0 pass, 1 wrong data, 2 usage or start-up error (one line on
 * stderr from rank 0), 3 failure during the run (MPI error, out of memory, result not written),
 * 77 the run cannot happen on this machine (mln_bench_skip: e.g. no GPU; ctest's skip code).
 */
#ifndef MLN_HARNESS_H
#define MLN_HARNESS_H

#include "harness_util.h"

#include <mpi.h>

enum {
    MLN_BENCH_EXIT_PASS = 0,
    MLN_BENCH_EXIT_FAIL = 1,
    MLN_BENCH_EXIT_USAGE = 2,
    MLN_BENCH_EXIT_RUNTIME = 3,
    MLN_BENCH_EXIT_SKIP = 77 /* automake's and ctest's (SKIP_RETURN_CODE) "skipped" */
};

/* The running benchmark: options, communicator, buffers, results.  Opaque to benchmarks. */
typedef struct mln_bench mln_bench_t;

/* A metric as published in the JSON "metrics" list and as a table column group. */
typedef struct mln_bench_metric {
    const char *name;        /* "latency_us": [A-Za-z][A-Za-z0-9_]* */
    const char *unit;        /* "us", "MB/s" */
    const char *statistic;   /* "median": of the repetitions (min and max come along) */
    const char *description; /* one sentence: what exactly is measured */
    int higher_is_better;
} mln_bench_metric_t;

/*
 * What this rank does in one test at one message size (the test's plan hook fills it).
 * Receive slot k must hold the pattern of send slot recv_slot_each[k] of rank
 * recv_from_each[k]; without those arrays (NULL), of send slot k of rank recv_from.  A sender
 * below 0 means the slot receives nothing: it must keep the zeros it was cleared to.
 */
typedef struct mln_bench_plan {
    int send_slots; /* messages sent per iteration, each from its own slot of the send buffer */
    int recv_slots; /* messages received per iteration, each into its own slot */
    int recv_from;  /* rank whose pattern the receive slots must hold (when recv_slots > 0) */
    const int *recv_from_each; /* [recv_slots] or NULL: the sender of each slot (many senders) */
    const int *recv_slot_each; /* [recv_slots] or NULL: the sender's slot for each slot */
} mln_bench_plan_t;

/* The arguments of one iteration.  Slot k of a buffer starts at k * bytes. */
typedef struct mln_bench_op {
    uint64_t bytes;
    const mln_bench_plan_t *plan;
    const char *send; /* plan->send_slots slots, filled with this rank's pattern */
    char *recv;       /* plan->recv_slots slots, validated after the timed iterations */
    int64_t index;    /* timed iteration 0 .. iters-1 of a repetition; -1: warm-up, priming */
} mln_bench_op_t;

/* One test of a benchmark: an ops struct. */
typedef struct mln_bench_test {
    const char *name; /* "latency": what --tests selects */
    mln_bench_metric_t metric;
    /* This rank's role at `bytes` (all zero: the rank sits this test out). */
    void (*plan)(const mln_bench_t *b, uint64_t bytes, mln_bench_plan_t *out);
    /* One iteration; called for the warm-up and for the timed loop. */
    mln_status_t (*iter)(mln_bench_t *b, const mln_bench_op_t *op);
    /* The metric from the time of one iteration (seconds, max over ranks); finite, >= 0. */
    double (*value)(const mln_bench_t *b, uint64_t bytes, double seconds);
    /* 0 where the test does not run at `bytes` (the same answer on every rank): its metric is
     * left out of that row (the table prints "-").  NULL: every size. */
    int (*runs_at)(const mln_bench_t *b, uint64_t bytes);
    /*
     * For iterations that move data the harness cannot see (device buffers: mln-gpu-transfer);
     * NULL for every other test.  Untimed, once per repetition, on every rank.  before_timed:
     * after the warm-up and the clearing of the receive slots, before the barrier that starts
     * the clock: copy op->send to where the iterations read it, clear where they write.
     * after_timed: after the clock stopped, before the validation (and --inject-error): copy
     * what the iterations received into op->recv, which the harness then checks.
     */
    mln_status_t (*before_timed)(mln_bench_t *b, const mln_bench_op_t *op);
    mln_status_t (*after_timed)(mln_bench_t *b, const mln_bench_op_t *op);
} mln_bench_test_t;

/* An option of one benchmark: --NAME VALUE, stored into its state struct at `offset`. */
typedef enum mln_bench_opt_type {
    MLN_BENCH_OPT_INT,   /* int64_t field, mln_parse_int */
    MLN_BENCH_OPT_SIZE,  /* uint64_t field, mln_parse_size (4K, 64M) */
    MLN_BENCH_OPT_STRING /* const char * field (the argument itself); the hooks check it */
} mln_bench_opt_type_t;

typedef struct mln_bench_option {
    const char *name; /* "window" -> --window, and the "window" key of the params */
    mln_bench_opt_type_t type;
    const char *default_value; /* text, parsed like the command line */
    const char *help;
    size_t offset;
    int64_t min, max;    /* inclusive bounds (INT, SIZE) */
    const char *metavar; /* --help's name of the value; NULL: N, SIZE or TEXT by type */
} mln_bench_option_t;

/* An extra numeric column of every row (e.g. the effective window at this size), computed on
 * every rank after the size's tests ran (rank 0 prints it).  A value that is not finite (NAN)
 * means none at this size: the table prints "-" and the JSON row has no key. */
typedef struct mln_bench_column {
    const char *name; /* row key in the JSON, column name in the table */
    const char *unit;
    double (*value)(const mln_bench_t *b, uint64_t bytes);
} mln_bench_column_t;

typedef struct mln_bench_desc {
    const char *name;        /* "pt2pt": program mln-pt2pt, JSON "benchmark" */
    const char *description; /* one line for --help and the provenance block */
    const mln_bench_test_t *tests;
    size_t ntests;
    const mln_bench_option_t *options; /* may be NULL */
    size_t noptions;
    const mln_bench_column_t *columns; /* may be NULL */
    size_t ncolumns;
    int min_ranks;
    const char *default_sizes; /* --sizes when not given; NULL: "1:4M" */
    uint64_t size_unit;        /* > 1: every size must be a multiple of it (e.g. an element) */
    int64_t min_warmup;        /* 0, or 1 where the first iteration at a size sets the test up
                                * (--warmup 0 is then an error; the automatic one is >= 1) */
    int interleave;            /* 1: each repetition runs every test in turn (rep-major), so
                                * that the tests of a row share the machine's slow and fast
                                * spells; 0: all repetitions of a test, then the next test */
    size_t state_size;         /* calloc'ed, options applied; see mln_bench_state */
    /*
     * After option parsing and before mln_init (which reads the MLN_* tunables once): check
     * the options that choose tunables and set them with setenv.  Runs on every rank of
     * MPI_COMM_WORLD; mln_bench_comm, params and buffers are not there yet.  May be NULL.
     */
    mln_status_t (*before_init)(mln_bench_t *b);
    /* After mln_init, before buffers: check the world, add params. May be NULL. */
    mln_status_t (*setup)(mln_bench_t *b);
    void (*teardown)(mln_bench_t *b);
} mln_bench_desc_t;

/* Runs the benchmark (MPI_Init to MPI_Finalize); returns the process exit code. */
int mln_bench_main(const mln_bench_desc_t *desc, int argc, char **argv);

/* ---- for the hooks ---------------------------------------------------------------------- */

void *mln_bench_state(const mln_bench_t *b);
/* The benchmark communicator (see Runtimes above). */
MPI_Comm mln_bench_comm(const mln_bench_t *b);
int mln_bench_rank(const mln_bench_t *b);
int mln_bench_nranks(const mln_bench_t *b);
/* Largest message size of the sweep. */
uint64_t mln_bench_max_bytes(const mln_bench_t *b);

/*
 * Rank pairs (r, r + n/2) for r < n/2 of the benchmark communicator, so that with ranks placed
 * host by host the pairs cross hosts; with an odd n the last rank sits out.  Records the params
 * "pairs", "pairing" and (odd n) "idle_rank"; *peer = this rank's partner, or -1 when it sits
 * out (setup only).
 */
mln_status_t mln_bench_pairs(mln_bench_t *b, int *peer);

/*
 * CPU seconds of one timed iteration of test `name` at the size just run (for a column's value
 * hook), summed over the ranks of the benchmark communicator: getrusage(RUSAGE_SELF) user +
 * system time of each process (all its threads: a progress thread, the lanes' work) around
 * the timed loop, divided by the iterations; the median over the repetitions.  Negative where
 * the test did not run at that size (not selected, runs_at said no) or no size ran yet.
 * Helper ranks (MLN_STRIPE_BACKEND=helper) are not in the communicator and not counted.
 */
double mln_bench_cpu_per_iter(const mln_bench_t *b, const char *name);

/* The median (over the repetitions) of test `name`'s metric at the size just run, for a
 * column's value hook (e.g. a bandwidth derived from a latency); NAN where the test did not
 * run at that size or no size ran yet. */
double mln_bench_median(const mln_bench_t *b, const char *name);

/* Which collectives the harness uses in this program: "mpi" or "p2p" (coll.h). */
const char *mln_bench_collectives(const mln_bench_t *b);

/* A test's `value` when its metric is the iteration's time in microseconds. */
double mln_bench_value_us(const mln_bench_t *b, uint64_t bytes, double seconds);

/* Adds a run parameter to the provenance ("params"), e.g. the rank pairs (setup only). */
mln_status_t mln_bench_param_int(mln_bench_t *b, const char *key, int64_t value);
mln_status_t mln_bench_param_str(mln_bench_t *b, const char *key, const char *value);
/* A usage or setup error (hooks: before_init, setup): records "<message>" for this rank and
 * returns MLN_ERR_ARG; the lowest failing rank prints "mln-NAME: error: <message>", all exit 2.
 * In an iteration (which then returns its own status) it adds context to the abort message. */
mln_status_t mln_bench_fail(mln_bench_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The run cannot happen here (setup only; e.g. no GPU): records "<reason>" for this rank and
 * returns MLN_ERR_UNSUPPORTED.  When the lowest rank that stops at setup skipped (rather than
 * failed), it prints "mln-NAME: skipped: <reason>" on stderr and every rank exits 77.  A setup
 * that skips on some ranks only must first agree across ranks: the others may be waiting in
 * a collective of the same setup. */
mln_status_t mln_bench_skip(mln_bench_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* How test `name` came to run: 0 not selected (or no such test), 1 selected because --tests
 * was not given (every test), 2 named in --tests.  A test this MPI or machine cannot run may
 * then be skipped with a note (1) or refused as a usage error (2). */
int mln_bench_selected(const mln_bench_t *b, const char *name);

/* setenv for before_init (a tunable chosen by an option); a failure is a setup error. */
mln_status_t mln_bench_setenv(mln_bench_t *b, const char *name, const char *value);
/* The same with a count, only when it is > 0 (an option's 0 leaves the variable alone). */
mln_status_t mln_bench_setenv_count(mln_bench_t *b, const char *name, int64_t value);
/* A tunable as this run sees it, for the params: the environment, else `def` (the library's
 * default). */
const char *mln_bench_tunable(const char *name, const char *def);

#endif /* MLN_HARNESS_H */
