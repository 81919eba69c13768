/*
 * bcast.c - mln-bcast: the multi-endpoint broadcast (mln_bcast) against the MPI's own
 * MPI_Bcast, one root to every rank of the benchmark communicator.
 *
 * --algo picks who broadcasts:
 *   stock   MPI_Bcast on the benchmark communicator (the MPI's own choice of algorithm, or the
 *           one its variables force: OMPI_MCA_coll_tuned_bcast_algorithm, coll/han,
 *           MPIR_CVAR_BCAST_INTRA_ALGORITHM; those set are recorded as the param "mpi_env")
 *   mpi     mln_bcast with MLN_BCAST_ALGO=mpi (MPI_Bcast behind the library's entry point)
 *   sme     mln_bcast, MLN_BCAST_ALGO=sme: L = --leaders leaders per node at once
 *   hier    mln_bcast, MLN_BCAST_ALGO=hier: one leader per node
 *   auto    mln_bcast, MLN_BCAST_ALGO=auto
 * --leaders L sets MLN_BCAST_LEADERS and --node-size N MLN_NODE_SIZE (0: leave them as the
 * environment has them).
 *
 * Per iteration: one broadcast of `bytes` from --root (the root's send slot, filled with its
 * pattern; every other rank's receive slot, checked against that pattern after the timed
 * iterations).  time_us = the time of one broadcast, max over ranks (back-to-back broadcasts
 * when an iteration count above 1 is used; from 1M up the default is one per repetition).
 * The column "leaders" says what the last call at that size ran on the root: 0 = MPI_Bcast
 * (stock, mpi, or a fallback), 1 = one leader per node (hier), L = sme with L leaders.
 */
#include "harness.h"
#include "mln_core.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef struct bcast_state {
    const char *algo;  /* --algo */
    int64_t leaders;   /* --leaders: MLN_BCAST_LEADERS; 0 leaves it alone */
    int64_t root;      /* --root */
    int64_t node_size; /* --node-size: MLN_NODE_SIZE; 0 leaves it alone */
    int64_t spin_ns;   /* --paired-spin: busy time added to the --algo call of paired */
    int stock;         /* --algo stock: MPI_Bcast directly */
    int last_leaders;  /* what the last call ran (see the header comment) */
    double *calls[2];  /* test paired, this repetition: call times of mln_bcast, MPI_Bcast */
    int64_t ncalls;    /* entries of each */
    int64_t cap;       /* room in each */
} bcast_state_t;

/* --algo values, and the MLN_BCAST_ALGO each sets (NULL: stock, plain MPI_Bcast). */
static const struct {
    const char *name;
    const char *env;
} bcast_algos[] = {
    {"stock", NULL}, {"mpi", "mpi"}, {"sme", "sme"}, {"hier", "hier"}, {"auto", "auto"},
};

/* Variables that choose the MPI's own broadcast: recorded when set. */
static const char *const mpi_env_prefixes[] = {
    "OMPI_MCA_coll",
    "MPIR_CVAR_BCAST",
    "MPIR_CVAR_ENABLE_SMP",
};

static void bcast_plan(const mln_bench_t *b, uint64_t bytes, mln_bench_plan_t *out)
{
    const bcast_state_t *s = mln_bench_state(b);

    (void)bytes;
    if (mln_bench_rank(b) == s->root)
        *out = (mln_bench_plan_t){.send_slots = 1};
    else
        *out = (mln_bench_plan_t){.recv_slots = 1, .recv_from = (int)s->root};
}

/* MPI_Bcast itself: --algo stock, and the control beside mln_bcast (tests stock, paired). */
static mln_status_t stock_iter(mln_bench_t *b, const mln_bench_op_t *op)
{
    bcast_state_t *s = mln_bench_state(b);
    char *buf = mln_bench_rank(b) == s->root ? (char *)op->send : op->recv;
    mln_status_t st = MLN_OK;

    /* sizes fit an int: bcast_setup (stock) and stock_runs_at (the control) checked them */
    MLN_MPI_CHECK(MPI_Bcast(buf, (int)op->bytes, MPI_BYTE, (int)s->root, mln_bench_comm(b)), st,
                  out);
out:
    return st;
}

static mln_status_t bcast_iter(mln_bench_t *b, const mln_bench_op_t *op)
{
    bcast_state_t *s = mln_bench_state(b);
    /* the root's slot is only read: a broadcast does not write the root's buffer */
    char *buf = mln_bench_rank(b) == s->root ? (char *)op->send : op->recv;
    mln_status_t st = MLN_OK;

    if (s->stock) {
        s->last_leaders = 0;
        return stock_iter(b, op);
    }
    st = mln_bcast(buf, (int64_t)op->bytes, MPI_BYTE, (int)s->root, mln_bench_comm(b));
    if (st != MLN_OK) {
        mln_bench_fail(b, "mln_bcast of %llu bytes from root %lld (--algo %s)",
                       (unsigned long long)op->bytes, (long long)s->root, s->algo);
        goto out;
    }
    mln_bcast_last_algo(&s->last_leaders);
out:
    return st;
}

/* Test paired: slot 0 goes out by the benchmarked broadcast (--algo), slot 1 by MPI_Bcast, so
 * each call's bytes are checked; the root sends both slots, every other rank receives them. */
static void paired_plan(const mln_bench_t *b, uint64_t bytes, mln_bench_plan_t *out)
{
    bcast_plan(b, bytes, out);
    out->send_slots *= 2;
    out->recv_slots *= 2;
}

/* Room for one more timed call of each (the same on every rank: it fails on all or none). */
static mln_status_t paired_room(mln_bench_t *b, bcast_state_t *s)
{
    if (s->ncalls < s->cap)
        return MLN_OK;
    int64_t cap = s->cap ? 2 * s->cap : 1024;
    for (int k = 0; k < 2; k++) {
        double *p = realloc(s->calls[k], (size_t)cap * sizeof(double));
        if (p == NULL)
            return mln_bench_fail(b, "out of memory for %lld call times", (long long)cap);
        s->calls[k] = p;
    }
    s->cap = cap;
    return MLN_OK;
}

/*
 * One iteration of paired: the benchmarked broadcast (slot 0) and MPI_Bcast (slot 1) in turn,
 * the benchmarked one first at even iterations, each started from a barrier.  A call's time is
 * the max over ranks from barrier exit to return; the times of the timed iterations are kept
 * for paired_value.  Only the call (bcast_iter or stock_iter) sits between the clock reads,
 * and for the --algo call the busy wait of --paired-spin (0: none).
 */
static mln_status_t paired_iter(mln_bench_t *b, const mln_bench_op_t *op)
{
    bcast_state_t *s = mln_bench_state(b);
    MPI_Comm comm = mln_bench_comm(b);
    char *base = mln_bench_rank(b) == s->root ? (char *)op->send : op->recv;
    mln_bench_op_t half = *op;
    double t[2], tmax[2], t0;
    mln_status_t st = MLN_OK;

    for (int n = 0; n < 2; n++) {
        int which = op->index % 2 == 0 ? n : 1 - n;
        half.send = half.recv = base + (size_t)which * op->bytes; /* bcast_iter picks its side */
        MLN_MPI_CHECK(MPI_Barrier(comm), st, out);
        t0 = MPI_Wtime();
        if (which == 0 && s->spin_ns > 0) /* a known per-call cost (calibration) */
            for (double end = t0 + (double)s->spin_ns * 1e-9; MPI_Wtime() < end;)
                ;
        MLN_CHECK(which == 0 ? bcast_iter(b, &half) : stock_iter(b, &half), st, out);
        t[which] = MPI_Wtime() - t0;
    }
    MLN_MPI_CHECK(MPI_Allreduce(t, tmax, 2, MPI_DOUBLE, MPI_MAX, comm), st, out);
    if (op->index < 0) /* warm-up */
        goto out;
    if (op->index == 0)
        s->ncalls = 0;
    MLN_CHECK(paired_room(b, s), st, out);
    s->calls[0][s->ncalls] = tmax[0];
    s->calls[1][s->ncalls] = tmax[1];
    s->ncalls++;
out:
    return st;
}

/* The median call time of the benchmarked broadcast over MPI_Bcast's, in this repetition. */
static double paired_value(const mln_bench_t *b, uint64_t bytes, double seconds)
{
    const bcast_state_t *s = mln_bench_state(b);
    mln_stats_t mine, stock;

    (void)bytes;
    (void)seconds;
    if (s->ncalls < 1 || mln_stats_compute(s->calls[0], (size_t)s->ncalls, &mine) != MLN_OK ||
        mln_stats_compute(s->calls[1], (size_t)s->ncalls, &stock) != MLN_OK || stock.median <= 0)
        return 0.0;
    return mine.median / stock.median;
}

static void bcast_teardown(mln_bench_t *b)
{
    bcast_state_t *s = mln_bench_state(b);

    free(s->calls[0]);
    free(s->calls[1]);
}

/* The stock test runs below mln_bcast's threshold only (where mln_bcast is MPI_Bcast and the
 * two must take the same time); above it the stock runs of a comparison measure MPI_Bcast. */
static int stock_runs_at(const mln_bench_t *b, uint64_t bytes)
{
    (void)b;
    return bytes < mln_context()->cfg.bcast_threshold && bytes <= INT_MAX;
}

static double leaders_column(const mln_bench_t *b, uint64_t bytes)
{
    const bcast_state_t *s = mln_bench_state(b);

    (void)bytes;
    return s->last_leaders;
}

/* --algo and --leaders become MLN_BCAST_* variables before mln_init reads them. */
static mln_status_t bcast_before_init(mln_bench_t *b)
{
    bcast_state_t *s = mln_bench_state(b);
    const char *env = NULL;
    size_t i, n = sizeof(bcast_algos) / sizeof(bcast_algos[0]);
    mln_status_t st = MLN_OK;

    for (i = 0; i < n && strcmp(bcast_algos[i].name, s->algo) != 0; i++)
        ;
    if (i == n)
        return mln_bench_fail(b, "--algo: unknown '%s' (expected stock, mpi, sme, hier or auto)",
                              s->algo);
    env = bcast_algos[i].env;
    s->stock = env == NULL;
    MLN_CHECK(mln_bench_setenv(b, "MLN_BCAST_ALGO", env != NULL ? env : "mpi"), st, out);
    MLN_CHECK(mln_bench_setenv_count(b, "MLN_BCAST_LEADERS", s->leaders), st, out);
    MLN_CHECK(mln_bench_setenv_count(b, "MLN_NODE_SIZE", s->node_size), st, out);
out:
    return st;
}

/* "NAME=VALUE NAME=VALUE" of the set variables that choose MPI's broadcast ("" if none). */
static void mpi_env_text(char *out, size_t len)
{
    extern char **environ;
    size_t used = 0;

    out[0] = '\0';
    for (char **e = environ; *e != NULL; e++)
        for (size_t i = 0; i < sizeof(mpi_env_prefixes) / sizeof(mpi_env_prefixes[0]); i++) {
            if (strncmp(*e, mpi_env_prefixes[i], strlen(mpi_env_prefixes[i])) != 0)
                continue;
            int w = snprintf(out + used, len - used, "%s%s", used ? " " : "", *e);
            if (w < 0 || (size_t)w >= len - used) {
                out[used] = '\0'; /* what fits, whole */
                return;
            }
            used += (size_t)w;
            break;
        }
}

static mln_status_t bcast_setup(mln_bench_t *b)
{
    bcast_state_t *s = mln_bench_state(b);
    char text[1024];
    mln_status_t st = MLN_OK;

    if (s->root >= mln_bench_nranks(b))
        return mln_bench_fail(b, "--root %lld: the run has %d ranks (0 .. %d)", (long long)s->root,
                              mln_bench_nranks(b), mln_bench_nranks(b) - 1);
    if (s->stock && mln_bench_max_bytes(b) > INT_MAX)
        return mln_bench_fail(b, "--algo stock: sizes above %d bytes need mln_bcast (--algo mpi)",
                              INT_MAX);
    mpi_env_text(text, sizeof(text));
    MLN_CHECK(mln_bench_param_str(b, "mpi_env", text), st, out);
    if (!s->stock) { /* the tunables as the library read them */
        const mln_config_t *cfg = &mln_context()->cfg;
        MLN_CHECK(mln_bench_param_int(b, "bcast_leaders", cfg->bcast_leaders), st, out);
        MLN_CHECK(mln_bench_param_int(b, "bcast_threshold", (int64_t)cfg->bcast_threshold), st,
                  out);
    }
out:
    return st;
}

static const mln_bench_test_t bcast_tests[] = {
    {.name = "bcast",
     .metric = {.name = "time_us",
                .unit = "us",
                .statistic = "median",
                .description = "time of one broadcast from the root to every rank, max over "
                               "ranks (iterations back to back, timed from a barrier)",
                .higher_is_better = 0},
     .plan = bcast_plan,
     .iter = bcast_iter,
     .value = mln_bench_value_us},
    {.name = "stock",
     .metric = {.name = "stock_time_us",
                .unit = "us",
                .statistic = "median",
                .description = "MPI_Bcast itself, the same way, in the same run right after "
                               "the bcast test: only below MLN_BCAST_THRESHOLD, where mln_bcast "
                               "calls MPI_Bcast (the control of its overhead)",
                .higher_is_better = 0},
     .plan = bcast_plan,
     .iter = stock_iter,
     .value = mln_bench_value_us,
     .runs_at = stock_runs_at},
    {.name = "paired",
     .metric = {.name = "paired_ratio",
                .unit = "x",
                .statistic = "median",
                .description = "the benchmarked broadcast's time over MPI_Bcast's, the two "
                               "called in turn in every iteration (order alternating), each "
                               "from a barrier, a call's time the max over ranks: the ratio of "
                               "their median call times in a repetition; only below "
                               "MLN_BCAST_THRESHOLD (with --algo stock: MPI_Bcast against "
                               "itself, the method's own spread)",
                .higher_is_better = 0},
     .plan = paired_plan,
     .iter = paired_iter,
     .value = paired_value,
     .runs_at = stock_runs_at},
};

static const mln_bench_option_t bcast_options[] = {
    {.name = "algo",
     .type = MLN_BENCH_OPT_STRING,
     .default_value = "sme",
     .help = "who broadcasts: stock (MPI_Bcast, the baseline), mpi (mln_bcast forced to "
             "MPI_Bcast), sme (L leaders per node), hier (one leader per node), auto",
     .offset = offsetof(bcast_state_t, algo),
     .metavar = "NAME"},
    {.name = "leaders",
     .type = MLN_BENCH_OPT_INT,
     .default_value = "0",
     .help = "leaders per node L for sme (MLN_BCAST_LEADERS); 0 leaves the environment's "
             "value or the library's default",
     .offset = offsetof(bcast_state_t, leaders),
     .min = 0,
     .max = 1024},
    {.name = "node-size",
     .type = MLN_BENCH_OPT_INT,
     .default_value = "0",
     .help = "N > 0: blocks of N ranks of a host are one node (MLN_NODE_SIZE: emulated nodes "
             "on one host, for tests); 0 leaves MLN_NODE_SIZE alone",
     .offset = offsetof(bcast_state_t, node_size),
     .min = 0,
     .max = 1 << 20},
    {.name = "paired-spin",
     .type = MLN_BENCH_OPT_INT,
     .default_value = "0",
     .help = "test paired: busy-wait NS nanoseconds on every rank at the start of each --algo "
             "call (a known per-call cost: with --algo stock, what such a cost measures as here)",
     .offset = offsetof(bcast_state_t, spin_ns),
     .min = 0,
     .max = 1000000000,
     .metavar = "NS"},
    {.name = "root",
     .type = MLN_BENCH_OPT_INT,
     .default_value = "0",
     .help = "rank that broadcasts",
     .offset = offsetof(bcast_state_t, root),
     .min = 0,
     .max = INT32_MAX},
};

static const mln_bench_column_t bcast_columns[] = {
    {.name = "leaders", .unit = "per node", .value = leaders_column},
};

static const mln_bench_desc_t bcast_desc = {
    .name = "bcast",
    .description = "multi-endpoint broadcast (mln_bcast: sme, hier) vs the MPI's MPI_Bcast",
    .tests = bcast_tests,
    .ntests = sizeof(bcast_tests) / sizeof(bcast_tests[0]),
    .options = bcast_options,
    .noptions = sizeof(bcast_options) / sizeof(bcast_options[0]),
    .columns = bcast_columns,
    .ncolumns = sizeof(bcast_columns) / sizeof(bcast_columns[0]),
    .min_ranks = 2,
    .state_size = sizeof(bcast_state_t),
    .before_init = bcast_before_init,
    .setup = bcast_setup,
    .teardown = bcast_teardown,
};

int main(int argc, char **argv)
{
    return mln_bench_main(&bcast_desc, argc, argv);
}
