/*
 * halo.c - mln-halo: the halo exchange (mln_halo_*, docs/HALO.md), one test per mode, on a
 * Cartesian grid of every rank of the benchmark communicator.
 *
 * The grid: --dims D axes (MPI_Dims_create over the ranks), --periodic 0|1 on every axis.
 * Each rank exchanges with the ranks 1 .. --radius R steps down and up each axis: 2 * D * R
 * entries (mln_halo_create_cart; past the edge of a non-periodic axis an entry is
 * MPI_PROC_NULL and moves nothing).  A message size is the bytes of one entry's message each
 * way, whole doubles (MPI_DOUBLE); 1280 B = 160 doubles is the seed's size.
 *
 * Tests p2p, neighbor, rma-fence, rma-pscw, rma-passive, rma-single, auto: the plan's mode.
 * One iteration = one mln_halo_exchange, entry k sending send slot k and receiving into
 * receive slot k, which must then hold send slot peer(k) of neighbour k, where peer swaps
 * down and up: entry 2 * (d * R + h - 1) (h steps down) pairs with the neighbour's next entry
 * (h steps up).  The tests take turns within each repetition (the harness's interleave), so
 * a slow or fast spell of the machine falls on every mode of a row alike.  A plan is made at
 * the first iteration of its (test, size), a warm-up one (creation is collective and auto
 * times every mode in it); a fixed mode's plan is freed when the next test starts, auto's is
 * kept for the size (its choice is made once per size) and freed when the size changes.  A
 * mode that the library disables on this MPI (MLN_HALO_DISABLE or its built-in list) is found
 * at setup with mln_halo_disabled: its test is skipped at every size, rank 0 says so on
 * stderr and the param "disabled" lists it; the other modes are measured.
 *
 * The column auto_mode: the mode the auto test's plan chose at that size (the
 * mln_halo_mode_t value, 1 p2p .. 6 rma-single; 0 where auto did not run at that size), and
 * rank 0 prints that plan's mln_halo_describe line to stderr.
 */
#include "harness.h"
#include "mln_core.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

enum { HALO_MAX_DIMS = 3, HALO_MAX_RADIUS = 4 };

typedef struct halo_state {
    int64_t dims, radius, periodic; /* --dims, --radius, --periodic */
    MPI_Comm cart;                  /* the grid over the benchmark communicator's ranks */
    int nentries;                   /* 2 * dims * radius */
    int *from;             /* [nentries]: rank whose message receive slot k holds; -1: none */
    int *from_slot;        /* [nentries]: its send slot (the partner entry) */
    const void **sendbufs; /* [nentries]: the harness's slots at the plan's size */
    void **recvbufs;
    unsigned char disabled[MLN_HALO_NMODES]; /* refused by the library (setup) */
    mln_halo_plan_t *plan;                   /* of (plan_mode, plan_bytes); NULL: none */
    mln_halo_plan_t *auto_plan;              /* the auto test's, of auto_bytes; NULL: none */
    mln_halo_mode_t plan_mode;
    uint64_t plan_bytes;
    int auto_ran; /* an auto plan was made; the last one's size, choice and description: */
    uint64_t auto_bytes;
    mln_halo_mode_t auto_choice;
    char auto_line[512];
} halo_state_t;

static void halo_plan(const mln_bench_t *b, uint64_t bytes, mln_bench_plan_t *out)
{
    const halo_state_t *s = mln_bench_state(b);

    (void)bytes;
    *out = (mln_bench_plan_t){.send_slots = s->nentries,
                              .recv_slots = s->nentries,
                              .recv_from_each = s->from,
                              .recv_slot_each = s->from_slot};
}

/* The plan of (mode, op->bytes), replacing the last one of a fixed mode, or auto's of another
 * size.  Every rank runs the same test at the same size, so the collective free and create
 * line up. */
static mln_status_t halo_plan_make(mln_bench_t *b, halo_state_t *s, mln_halo_mode_t mode,
                                   const mln_bench_op_t *op)
{
    mln_halo_plan_t **slot = mode == MLN_HALO_AUTO ? &s->auto_plan : &s->plan;
    mln_status_t st;

    mln_halo_free(slot);
    st = mln_halo_create_cart(s->cart, (int)s->radius, (int64_t)(op->bytes / sizeof(double)),
                              MPI_DOUBLE, mode, slot);
    if (st != MLN_OK) {
        mln_bench_fail(b, "mln_halo_create_cart (%s, %llu bytes per neighbour)",
                       mln_halo_mode_name(mode), (unsigned long long)op->bytes);
        return st;
    }
    if (mode != MLN_HALO_AUTO) {
        s->plan_mode = mode;
        s->plan_bytes = op->bytes;
    }
    /* the harness's buffers stay put for the whole run: the pointers change with the size */
    for (int k = 0; k < s->nentries; k++) {
        s->sendbufs[k] = op->send + (size_t)k * op->bytes;
        s->recvbufs[k] = op->recv + (size_t)k * op->bytes;
    }
    if (mode == MLN_HALO_AUTO) {
        s->auto_ran = 1;
        s->auto_bytes = op->bytes;
        s->auto_choice = mln_halo_mode(s->auto_plan);
        mln_halo_describe(s->auto_plan, s->auto_line, sizeof(s->auto_line));
    }
    return MLN_OK;
}

static mln_status_t halo_iter(mln_bench_t *b, const mln_bench_op_t *op, mln_halo_mode_t mode)
{
    halo_state_t *s = mln_bench_state(b);
    int is_auto = mode == MLN_HALO_AUTO;
    mln_halo_plan_t *plan = is_auto ? s->auto_plan : s->plan;
    mln_status_t st = MLN_OK;

    if (plan == NULL || (is_auto ? s->auto_bytes : s->plan_bytes) != op->bytes ||
        (!is_auto && s->plan_mode != mode)) {
        MLN_CHECK(halo_plan_make(b, s, mode, op), st, out);
        plan = is_auto ? s->auto_plan : s->plan;
    }
    st = mln_halo_exchange(plan, s->sendbufs, s->recvbufs);
    if (st != MLN_OK)
        mln_bench_fail(b, "mln_halo_exchange (%s, %llu bytes per neighbour)",
                       mln_halo_mode_name(mode), (unsigned long long)op->bytes);
out:
    return st;
}

static int halo_runs_at(const mln_bench_t *b, mln_halo_mode_t mode)
{
    const halo_state_t *s = mln_bench_state(b);

    return !s->disabled[mode];
}

/* The harness's hooks do not say which test they serve: one iteration and runs_at per mode. */
#define HALO_MODE_HOOKS(fn, mode)                                                                  \
    static mln_status_t fn##_iter(mln_bench_t *b, const mln_bench_op_t *op)                        \
    {                                                                                              \
        return halo_iter(b, op, mode);                                                             \
    }                                                                                              \
    static int fn##_runs_at(const mln_bench_t *b, uint64_t bytes)                                  \
    {                                                                                              \
        (void)bytes;                                                                               \
        return halo_runs_at(b, mode);                                                              \
    }

HALO_MODE_HOOKS(p2p, MLN_HALO_P2P)
HALO_MODE_HOOKS(neighbor, MLN_HALO_NEIGHBOR)
HALO_MODE_HOOKS(rma_fence, MLN_HALO_RMA_FENCE)
HALO_MODE_HOOKS(rma_pscw, MLN_HALO_RMA_PSCW)
HALO_MODE_HOOKS(rma_passive, MLN_HALO_RMA_PASSIVE)
HALO_MODE_HOOKS(rma_single, MLN_HALO_RMA_SINGLE)
HALO_MODE_HOOKS(auto_mode, MLN_HALO_AUTO)

/* Called once per size after its tests ran: the place to say what auto chose there. */
static double auto_mode_column(const mln_bench_t *b, uint64_t bytes)
{
    const halo_state_t *s = mln_bench_state(b);

    if (!s->auto_ran || s->auto_bytes != bytes)
        return MLN_HALO_AUTO; /* the auto test did not run at this size */
    if (mln_bench_rank(b) == 0)
        fprintf(stderr, "mln-halo: auto at %llu bytes: %s\n", (unsigned long long)bytes,
                s->auto_line);
    return s->auto_choice;
}

/* The grid (not reordered: a cart rank is the benchmark rank that the harness's patterns
 * name), and who sends into each receive slot, from MPI_Cart_shift, apart from the library. */
static mln_status_t halo_grid(mln_bench_t *b, halo_state_t *s)
{
    int dims = (int)s->dims, radius = (int)s->radius;
    int shape[HALO_MAX_DIMS] = {0}, periods[HALO_MAX_DIMS];
    char grid[64] = "";
    mln_status_t st = MLN_OK;

    for (int d = 0; d < dims; d++)
        periods[d] = (int)s->periodic;
    MLN_MPI_CHECK(MPI_Dims_create(mln_bench_nranks(b), dims, shape), st, out);
    MLN_MPI_CHECK(MPI_Cart_create(mln_bench_comm(b), dims, shape, periods, 0, &s->cart), st, out);
    s->nentries = 2 * dims * radius;
    s->from = calloc((size_t)s->nentries, sizeof(int));
    s->from_slot = calloc((size_t)s->nentries, sizeof(int));
    s->sendbufs = calloc((size_t)s->nentries, sizeof(void *));
    s->recvbufs = calloc((size_t)s->nentries, sizeof(void *));
    if (!s->from || !s->from_slot || !s->sendbufs || !s->recvbufs)
        return mln_bench_fail(b, "out of memory for %d neighbour entries", s->nentries);
    for (int d = 0; d < dims; d++) {
        for (int h = 1; h <= radius; h++) {
            int e = 2 * (d * radius + h - 1), down, up;
            MLN_MPI_CHECK(MPI_Cart_shift(s->cart, d, h, &down, &up), st, out);
            s->from[e] = down == MPI_PROC_NULL ? -1 : down;
            s->from_slot[e] = e + 1; /* the rank below sends its "up" entry down to me */
            s->from[e + 1] = up == MPI_PROC_NULL ? -1 : up;
            s->from_slot[e + 1] = e;
        }
        snprintf(grid + strlen(grid), sizeof(grid) - strlen(grid), "%s%d", d ? "x" : "", shape[d]);
    }
    MLN_CHECK(mln_bench_param_str(b, "grid", grid), st, out);
    MLN_CHECK(mln_bench_param_int(b, "neighbors", s->nentries), st, out);
out:
    return st;
}

/* Which modes the library refuses here (mln_halo_disabled: the same answer on every rank);
 * rank 0 names each one on stderr. */
static mln_status_t halo_probe(mln_bench_t *b, halo_state_t *s)
{
    char disabled[128] = "";

    for (int m = MLN_HALO_P2P; m < MLN_HALO_NMODES; m++) {
        const char *name = mln_halo_mode_name((mln_halo_mode_t)m);
        int off = 0;
        mln_status_t st = mln_halo_disabled((mln_halo_mode_t)m, &off, NULL);
        if (st != MLN_OK)
            return mln_bench_fail(b, "mln_halo_disabled (%s): %s", name, mln_status_str(st));
        if (!off)
            continue;
        s->disabled[m] = 1;
        snprintf(disabled + strlen(disabled), sizeof(disabled) - strlen(disabled), "%s%s",
                 disabled[0] ? "," : "", name);
        if (mln_bench_rank(b) == 0)
            fprintf(stderr,
                    "mln-halo: %s: disabled on this MPI (MLN_HALO_DISABLE=%s, docs/HALO.md): "
                    "test %s skipped\n",
                    name, mln_context()->cfg.halo_disable, name);
    }
    return mln_bench_param_str(b, "disabled", disabled);
}

static mln_status_t halo_setup(mln_bench_t *b)
{
    halo_state_t *s = mln_bench_state(b);
    const mln_config_t *cfg = &mln_context()->cfg;
    const char *mode;
    char ids[128] = "";
    mln_status_t st = MLN_OK;

    s->cart = MPI_COMM_NULL; /* before anything can fail: the teardown frees what is set */
    MLN_CHECK(halo_grid(b, s), st, out);
    for (int m = 1; m < MLN_HALO_NMODES; m++) /* what the column auto_mode's numbers mean */
        snprintf(ids + strlen(ids), sizeof(ids) - strlen(ids), "%s%d=%s", m > 1 ? "," : "", m,
                 mln_halo_mode_name((mln_halo_mode_t)m));
    MLN_CHECK(mln_bench_param_str(b, "mode_ids", ids), st, out);
    /* the tunables as the library read them: MLN_HALO_MODE replaces what the auto test runs */
    mode = mln_halo_mode_name((mln_halo_mode_t)cfg->halo_mode);
    MLN_CHECK(mln_bench_param_str(b, "halo_mode", mode), st, out);
    MLN_CHECK(mln_bench_param_str(b, "halo_disable", cfg->halo_disable), st, out);
    MLN_CHECK(mln_bench_param_int(b, "halo_auto_iters", cfg->halo_auto_iters), st, out);
    MLN_CHECK(halo_probe(b, s), st, out);
out:
    return st;
}

static void halo_teardown(mln_bench_t *b)
{
    halo_state_t *s = mln_bench_state(b);

    mln_halo_free(&s->plan);
    mln_halo_free(&s->auto_plan);
    if (s->cart != MPI_COMM_NULL)
        MPI_Comm_free(&s->cart);
    free(s->from);
    free(s->from_slot);
    free(s->sendbufs);
    free(s->recvbufs);
}

/* One test per mode: its hooks (HALO_MODE_HOOKS fn) and its metric, "<mode>_us". */
#define HALO_TEST(test, fn, metric_name, how)                                                      \
    {                                                                                              \
        .name = test,                                                                              \
        .metric = {.name = metric_name,                                                            \
                   .unit = "us",                                                                   \
                   .statistic = "median",                                                          \
                   .description = "time of one halo exchange (mln_halo_exchange with every "       \
                                  "neighbour entry) in mode " test ": " how ", max over ranks",    \
                   .higher_is_better = 0},                                                         \
        .plan = halo_plan, .iter = fn##_iter, .value = mln_bench_value_us, .runs_at = fn##_runs_at \
    }

static const mln_bench_test_t halo_tests[] = {
    HALO_TEST("p2p", p2p, "p2p_us", "MPI_Irecv, MPI_Isend, MPI_Waitall"),
    HALO_TEST("neighbor", neighbor, "neighbor_us",
              "MPI_Neighbor_alltoallw on a distributed-graph communicator"),
    HALO_TEST("rma-fence", rma_fence, "rma_fence_us", "double-buffered puts, one fence"),
    HALO_TEST("rma-pscw", rma_pscw, "rma_pscw_us",
              "double-buffered puts, post/start/complete/wait"),
    HALO_TEST("rma-passive", rma_passive, "rma_passive_us",
              "double-buffered puts under lock_all, sequence numbers"),
    HALO_TEST("rma-single", rma_single, "rma_single_us",
              "single-buffered puts, two fences (the control)"),
    HALO_TEST("auto", auto_mode, "auto_us",
              "the mode the plan chose by timing the usable ones at creation (column "
              "auto_mode), or the one MLN_HALO_MODE names"),
};

static const mln_bench_option_t halo_options[] = {
    {.name = "dims",
     .type = MLN_BENCH_OPT_INT,
     .default_value = "2",
     .help = "axes of the grid of ranks (1, 2, 3: MPI_Dims_create over all ranks)",
     .offset = offsetof(halo_state_t, dims),
     .min = 1,
     .max = HALO_MAX_DIMS},
    {.name = "radius",
     .type = MLN_BENCH_OPT_INT,
     .default_value = "1",
     .help = "neighbours per side of each axis: the ranks 1 .. R steps away (2 * dims * R "
             "entries per rank)",
     .offset = offsetof(halo_state_t, radius),
     .min = 1,
     .max = HALO_MAX_RADIUS,
     .metavar = "R"},
    {.name = "periodic",
     .type = MLN_BENCH_OPT_INT,
     .default_value = "1",
     .help = "1: every axis wraps around; 0: edge ranks have fewer neighbours (MPI_PROC_NULL "
             "entries)",
     .offset = offsetof(halo_state_t, periodic),
     .min = 0,
     .max = 1,
     .metavar = "0|1"},
};

static const mln_bench_column_t halo_columns[] = {
    {.name = "auto_mode", .unit = "mode", .value = auto_mode_column},
};

static const mln_bench_desc_t halo_desc = {
    .name = "halo",
    .description = "halo exchange (mln_halo_exchange) on a Cartesian grid of ranks in each mode: "
                   "p2p, neighbor, four RMA modes, auto; sizes are bytes per neighbour, whole "
                   "doubles; modes disabled on this MPI are skipped",
    .tests = halo_tests,
    .ntests = sizeof(halo_tests) / sizeof(halo_tests[0]),
    .options = halo_options,
    .noptions = sizeof(halo_options) / sizeof(halo_options[0]),
    .columns = halo_columns,
    .ncolumns = sizeof(halo_columns) / sizeof(halo_columns[0]),
    .min_ranks = 1,
    .default_sizes = "8:1M,1280",
    .size_unit = sizeof(double),
    .min_warmup = 1,
    .interleave = 1,
    .state_size = sizeof(halo_state_t),
    .setup = halo_setup,
    .teardown = halo_teardown,
};

int main(int argc, char **argv)
{
    return mln_bench_main(&halo_desc, argc, argv);
}
