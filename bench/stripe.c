/*
 * stripe.c - mln-stripe: striped point-to-point (mln_stripe_*) against stock MPI, between
 * pairs of ranks.
 *
 * --lanes SPEC picks the transport of the data messages:
 *   stock      MPI_Isend / MPI_Irecv / MPI_Waitall on the benchmark communicator (baseline)
 *   mpi[:N]    mln_stripe_isend / irecv / waitall, MLN_STRIPE_BACKEND=mpi (N chunks in flight)
 *   tcp:N      the same calls over N TCP lanes per peer (MLN_STRIPE_BACKEND=tcp)
 *   helper:K   the same calls over K helper ranks per node (MLN_STRIPE_BACKEND=helper)
 * The spec becomes MLN_STRIPE_* variables before mln_init reads them (stock sets the mpi
 * backend, so that no helper ranks are taken and the library stays idle).  --local 1 sets
 * MLN_STRIPE_LOCAL=1: stripe between ranks of one site too.
 *
 * Rank pairs (r, r + n/2), as in mln-pt2pt.  Per iteration t:
 *   pingpong  low: irecv, isend, waitall; high: irecv, waitall, isend, waitall
 *                                                               time_us = t / 2 * 1e6
 *   stream    low: W x isend from W slots, waitall, receive a 0-byte MPI ack
 *             high: W x irecv into W slots, waitall, send the ack
 *                                                               bw_Mbps = W * bytes * 8 / t / 1e6
 *   overlap   as stream, with --compute-us of work (a sleep) between posting and waiting
 *                                                               overlap_us = t * 1e6
 * W = min(--window, max(1, --window-bytes / bytes)).  The ack is plain MPI in every mode.
 *
 * Column stream_cpu_s_per_GB: the CPU seconds of all ranks (user + system, every thread) of one
 * stream iteration (median over the repetitions, mln_bench_cpu_per_iter) over the GB it moves,
 * pairs * W * bytes / 10^9: the cost of the transport, link security included, per byte.  The
 * params name the link layer: link_security, link_payload_mac and link_cipher (the AEAD the
 * tcp lanes agreed on; without tcp lanes MLN_LINK_CIPHER as given).
 */
#include "harness.h"
#include "link/link.h"
#include "mln_core.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TAG_DATA 1
#define TAG_ACK 2

#define STRIPE_MAX_LANES 64
#define STRIPE_MAX_HELPERS 16

typedef struct stripe_state stripe_state_t;

/* How the data messages travel: plain MPI or the striped calls (STYLE.md 3). */
typedef struct stripe_xport {
    const char *name;      /* what --lanes starts with */
    const char *backend;   /* MLN_STRIPE_BACKEND */
    const char *count_env; /* variable that ":N" sets; NULL: the spec takes no count */
    int count_required;
    int64_t count_max;
    mln_status_t (*post_send)(mln_bench_t *b, int k, const void *buf, uint64_t bytes);
    mln_status_t (*post_recv)(mln_bench_t *b, int k, void *buf, uint64_t bytes);
    mln_status_t (*waitall)(mln_bench_t *b, int n, uint64_t bytes); /* requests 0 .. n-1 */
} stripe_xport_t;

struct stripe_state {
    const char *lanes;     /* --lanes */
    int64_t window;        /* --window */
    uint64_t window_bytes; /* --window-bytes: cap on window * bytes */
    int64_t local;         /* --local: 1 sets MLN_STRIPE_LOCAL=1 */
    int64_t compute_us;    /* --compute-us: overlap's work between post and wait */
    const stripe_xport_t *xport;
    int64_t count; /* N or K of the spec; 0: not given */
    int peer;      /* -1: this rank sits out */
    int nreqs;     /* size of each request array: max(window, 2) */
    MPI_Request *mpi_reqs;
    mln_request_t *reqs;
    MPI_Status *statuses; /* of mln_stripe_waitall (see lanes_waitall) */
    char ack;
};

/* The effective window at `bytes` (the same on every rank). */
static int stripe_window(const mln_bench_t *b, uint64_t bytes)
{
    const stripe_state_t *s = mln_bench_state(b);
    uint64_t w = bytes ? s->window_bytes / bytes : (uint64_t)s->window;

    if (w > (uint64_t)s->window)
        w = (uint64_t)s->window;
    return w < 1 ? 1 : (int)w;
}

static double stripe_window_column(const mln_bench_t *b, uint64_t bytes)
{
    return stripe_window(b, bytes);
}

/* CPU seconds of all ranks per GB (10^9 B) the stream test moved at `bytes`; NAN (no value)
 * where it did not run or moved nothing. */
static double stripe_stream_cpu_column(const mln_bench_t *b, uint64_t bytes)
{
    const double cpu = mln_bench_cpu_per_iter(b, "stream");
    const double moved =
        (double)(mln_bench_nranks(b) / 2) * stripe_window(b, bytes) * (double)bytes;

    return cpu >= 0 && moved > 0 ? cpu / (moved / 1e9) : NAN;
}

/* ---- transports --------------------------------------------------------------------------- */

static mln_status_t stock_post_send(mln_bench_t *b, int k, const void *buf, uint64_t bytes)
{
    stripe_state_t *s = mln_bench_state(b);
    mln_status_t st = MLN_OK;

    MLN_MPI_CHECK(
        MPI_Isend(buf, (int)bytes, MPI_BYTE, s->peer, TAG_DATA, mln_bench_comm(b), &s->mpi_reqs[k]),
        st, out);
out:
    return st;
}

static mln_status_t stock_post_recv(mln_bench_t *b, int k, void *buf, uint64_t bytes)
{
    stripe_state_t *s = mln_bench_state(b);
    mln_status_t st = MLN_OK;

    MLN_MPI_CHECK(
        MPI_Irecv(buf, (int)bytes, MPI_BYTE, s->peer, TAG_DATA, mln_bench_comm(b), &s->mpi_reqs[k]),
        st, out);
out:
    return st;
}

static mln_status_t stock_waitall(mln_bench_t *b, int n, uint64_t bytes)
{
    stripe_state_t *s = mln_bench_state(b);
    mln_status_t st = MLN_OK;

    (void)bytes;
    MLN_MPI_CHECK(MPI_Waitall(n, s->mpi_reqs, MPI_STATUSES_IGNORE), st, out);
out:
    return st;
}

/* A failed mln_stripe_* call: the iteration returns `st`, the abort message says where. */
static mln_status_t stripe_failed(mln_bench_t *b, mln_status_t st, const char *call, int n,
                                  uint64_t bytes)
{
    const stripe_state_t *s = mln_bench_state(b);

    mln_bench_fail(b, "%s (%d request%s of %llu bytes, peer rank %d, --lanes %s)", call, n,
                   n == 1 ? "" : "s", (unsigned long long)bytes, s->peer, s->lanes);
    return st;
}

static mln_status_t lanes_post_send(mln_bench_t *b, int k, const void *buf, uint64_t bytes)
{
    stripe_state_t *s = mln_bench_state(b);
    mln_status_t st = mln_stripe_isend(buf, (int64_t)bytes, MPI_BYTE, s->peer, TAG_DATA,
                                       mln_bench_comm(b), &s->reqs[k]);

    return st == MLN_OK ? MLN_OK : stripe_failed(b, st, "mln_stripe_isend", 1, bytes);
}

static mln_status_t lanes_post_recv(mln_bench_t *b, int k, void *buf, uint64_t bytes)
{
    stripe_state_t *s = mln_bench_state(b);
    mln_status_t st = mln_stripe_irecv(buf, (int64_t)bytes, MPI_BYTE, s->peer, TAG_DATA,
                                       mln_bench_comm(b), &s->reqs[k]);

    return st == MLN_OK ? MLN_OK : stripe_failed(b, st, "mln_stripe_irecv", 1, bytes);
}

static mln_status_t lanes_waitall(mln_bench_t *b, int n, uint64_t bytes)
{
    stripe_state_t *s = mln_bench_state(b);
    /* Real statuses, not MPI_STATUSES_IGNORE: with MPICH's (MPI_Status *)1 and the
     * `MPI_Status statuses[]` parameter GCC 12 reports -Wstringop-overflow. */
    mln_status_t st = mln_stripe_waitall(n, s->reqs, s->statuses);

    return st == MLN_OK ? MLN_OK : stripe_failed(b, st, "mln_stripe_waitall", n, bytes);
}

static const stripe_xport_t stripe_xports[] = {
    {.name = "stock",
     .backend = "mpi",
     .post_send = stock_post_send,
     .post_recv = stock_post_recv,
     .waitall = stock_waitall},
    {.name = "mpi",
     .backend = "mpi",
     .count_env = "MLN_STRIPE_LANES",
     .count_max = STRIPE_MAX_LANES,
     .post_send = lanes_post_send,
     .post_recv = lanes_post_recv,
     .waitall = lanes_waitall},
    {.name = "tcp",
     .backend = "tcp",
     .count_env = "MLN_STRIPE_LANES",
     .count_required = 1,
     .count_max = STRIPE_MAX_LANES,
     .post_send = lanes_post_send,
     .post_recv = lanes_post_recv,
     .waitall = lanes_waitall},
    {.name = "helper",
     .backend = "helper",
     .count_env = "MLN_STRIPE_HELPERS",
     .count_required = 1,
     .count_max = STRIPE_MAX_HELPERS,
     .post_send = lanes_post_send,
     .post_recv = lanes_post_recv,
     .waitall = lanes_waitall},
    {0},
};

/* "tcp:4" -> the tcp transport and 4, "tcp:auto" -> tcp and 0; NULL on a bad spec. */
static const stripe_xport_t *stripe_spec_parse(const char *spec, int64_t *count)
{
    const char *colon = strchr(spec, ':');
    size_t len = colon ? (size_t)(colon - spec) : strlen(spec);
    const stripe_xport_t *x = stripe_xports;
    int64_t n = 0;

    while (x->name != NULL && !(strlen(x->name) == len && strncmp(x->name, spec, len) == 0))
        x++;
    if (x->name == NULL)
        return NULL;
    if (colon == NULL && x->count_required)
        return NULL;
    if (colon != NULL && strcmp(colon + 1, "auto") == 0 && strcmp(x->name, "tcp") == 0)
        n = 0; /* tcp:auto (MLN_STRIPE_LANES=auto) */
    else if (colon != NULL && (x->count_env == NULL || mln_parse_int(colon + 1, &n) != MLN_OK ||
                               n < 1 || n > x->count_max))
        return NULL;
    *count = n;
    return x;
}

/* ---- pingpong: one round trip ----------------------------------------------------------- */

static void pingpong_plan(const mln_bench_t *b, uint64_t bytes, mln_bench_plan_t *out)
{
    const stripe_state_t *s = mln_bench_state(b);

    (void)bytes;
    if (s->peer >= 0)
        *out = (mln_bench_plan_t){.send_slots = 1, .recv_slots = 1, .recv_from = s->peer};
}

static mln_status_t pingpong_iter(mln_bench_t *b, const mln_bench_op_t *op)
{
    stripe_state_t *s = mln_bench_state(b);
    const stripe_xport_t *x = s->xport;
    mln_status_t st = MLN_OK;

    if (s->peer < 0)
        return MLN_OK;
    if (mln_bench_rank(b) < s->peer) { /* low: ping, then the pong into the pre-posted receive */
        MLN_CHECK(x->post_recv(b, 0, op->recv, op->bytes), st, out);
        MLN_CHECK(x->post_send(b, 1, op->send, op->bytes), st, out);
        MLN_CHECK(x->waitall(b, 2, op->bytes), st, out);
    } else {
        MLN_CHECK(x->post_recv(b, 0, op->recv, op->bytes), st, out);
        MLN_CHECK(x->waitall(b, 1, op->bytes), st, out);
        MLN_CHECK(x->post_send(b, 0, op->send, op->bytes), st, out);
        MLN_CHECK(x->waitall(b, 1, op->bytes), st, out);
    }
out:
    return st;
}

static double pingpong_value(const mln_bench_t *b, uint64_t bytes, double seconds)
{
    (void)b;
    (void)bytes;
    return seconds / 2 * 1e6;
}

/* ---- stream: a window of messages one way, then an ack ---------------------------------- */

static void stream_plan(const mln_bench_t *b, uint64_t bytes, mln_bench_plan_t *out)
{
    const stripe_state_t *s = mln_bench_state(b);
    int w = stripe_window(b, bytes);

    if (s->peer < 0)
        return;
    if (mln_bench_rank(b) < s->peer)
        *out = (mln_bench_plan_t){.send_slots = w};
    else
        *out = (mln_bench_plan_t){.recv_slots = w, .recv_from = s->peer};
}

static mln_status_t stream_iter(mln_bench_t *b, const mln_bench_op_t *op)
{
    stripe_state_t *s = mln_bench_state(b);
    const stripe_xport_t *x = s->xport;
    MPI_Comm comm = mln_bench_comm(b);
    int w = stripe_window(b, op->bytes);
    mln_status_t st = MLN_OK;

    if (s->peer < 0)
        return MLN_OK;
    if (mln_bench_rank(b) < s->peer) {
        for (int k = 0; k < w; k++)
            MLN_CHECK(x->post_send(b, k, op->send + (size_t)k * op->bytes, op->bytes), st, out);
        MLN_CHECK(x->waitall(b, w, op->bytes), st, out);
        MLN_MPI_CHECK(MPI_Recv(&s->ack, 0, MPI_BYTE, s->peer, TAG_ACK, comm, MPI_STATUS_IGNORE), st,
                      out);
    } else {
        for (int k = 0; k < w; k++)
            MLN_CHECK(x->post_recv(b, k, op->recv + (size_t)k * op->bytes, op->bytes), st, out);
        MLN_CHECK(x->waitall(b, w, op->bytes), st, out);
        MLN_MPI_CHECK(MPI_Send(&s->ack, 0, MPI_BYTE, s->peer, TAG_ACK, comm), st, out);
    }
out:
    return st;
}

/* ---- overlap: the stream's window with --compute-us of "work" between posting and waiting - */

/* Posts the window, sleeps --compute-us (work done on another core, which leaves this one to
 * the library's progress thread if there is one), then waits and acks as stream does. */
static mln_status_t overlap_iter(mln_bench_t *b, const mln_bench_op_t *op)
{
    stripe_state_t *s = mln_bench_state(b);
    const stripe_xport_t *x = s->xport;
    MPI_Comm comm = mln_bench_comm(b);
    int w = stripe_window(b, op->bytes);
    struct timespec work = {(time_t)(s->compute_us / 1000000),
                            (long)(s->compute_us % 1000000) * 1000};
    mln_status_t st = MLN_OK;

    if (s->peer < 0)
        return MLN_OK;
    for (int k = 0; k < w; k++) {
        if (mln_bench_rank(b) < s->peer)
            MLN_CHECK(x->post_send(b, k, op->send + (size_t)k * op->bytes, op->bytes), st, out);
        else
            MLN_CHECK(x->post_recv(b, k, op->recv + (size_t)k * op->bytes, op->bytes), st, out);
    }
    while (nanosleep(&work, &work) == -1 && errno == EINTR)
        ;
    MLN_CHECK(x->waitall(b, w, op->bytes), st, out);
    if (mln_bench_rank(b) < s->peer)
        MLN_MPI_CHECK(MPI_Recv(&s->ack, 0, MPI_BYTE, s->peer, TAG_ACK, comm, MPI_STATUS_IGNORE), st,
                      out);
    else
        MLN_MPI_CHECK(MPI_Send(&s->ack, 0, MPI_BYTE, s->peer, TAG_ACK, comm), st, out);
out:
    return st;
}

static double stream_value(const mln_bench_t *b, uint64_t bytes, double seconds)
{
    return seconds > 0 ? (double)stripe_window(b, bytes) * (double)bytes * 8 / seconds / 1e6 : 0.0;
}

/* ---- the benchmark ---------------------------------------------------------------------- */

/* --lanes and --local become MLN_STRIPE_* variables before mln_init reads them. */
static mln_status_t stripe_before_init(mln_bench_t *b)
{
    stripe_state_t *s = mln_bench_state(b);
    mln_status_t st = MLN_OK;

    s->xport = stripe_spec_parse(s->lanes, &s->count);
    if (s->xport == NULL)
        return mln_bench_fail(b,
                              "--lanes: invalid spec '%s' (expected stock, mpi, mpi:N, tcp:auto "
                              "or tcp:N with N lanes from 1 to %d, or helper:K with K from 1 to "
                              "%d)",
                              s->lanes, STRIPE_MAX_LANES, STRIPE_MAX_HELPERS);
    MLN_CHECK(mln_bench_setenv(b, "MLN_STRIPE_BACKEND", s->xport->backend), st, out);
    if (s->xport->count_env != NULL && s->count == 0 && strcmp(s->xport->name, "tcp") == 0)
        MLN_CHECK(mln_bench_setenv(b, "MLN_STRIPE_LANES", "auto"), st, out);
    else if (s->xport->count_env != NULL)
        MLN_CHECK(mln_bench_setenv_count(b, s->xport->count_env, s->count), st, out);
    if (s->local)
        MLN_CHECK(mln_bench_setenv(b, "MLN_STRIPE_LOCAL", "1"), st, out);
out:
    return st;
}

static mln_status_t stripe_setup(mln_bench_t *b)
{
    stripe_state_t *s = mln_bench_state(b);
    int stock = s->xport->post_send == stock_post_send;
    const char *cipher;
    mln_status_t st = MLN_OK;

    MLN_CHECK(mln_bench_pairs(b, &s->peer), st, out);
    MLN_CHECK(mln_bench_param_str(b, "backend", stock ? "stock" : mln_stripe_backend_name()), st,
              out);
    if (!stock)
        MLN_CHECK(mln_stripe_lanes() > 0
                      ? mln_bench_param_int(b, "stripe_lanes", mln_stripe_lanes())
                      : mln_bench_param_str(b, "stripe_lanes", "auto"),
                  st, out); /* 0: MLN_STRIPE_LANES=auto */
    if (s->xport->count_env != NULL && strcmp(s->xport->count_env, "MLN_STRIPE_HELPERS") == 0)
        MLN_CHECK(mln_bench_param_int(b, "stripe_helpers", s->count), st, out);
    MLN_CHECK(mln_bench_param_str(b, "stripe_threshold",
                                  mln_bench_tunable("MLN_STRIPE_THRESHOLD", "256K")),
              st, out);
    MLN_CHECK(mln_bench_param_str(b, "stripe_chunk", mln_bench_tunable("MLN_STRIPE_CHUNK", "1M")),
              st, out);
    MLN_CHECK(mln_bench_param_str(b, "stripe_local", mln_bench_tunable("MLN_STRIPE_LOCAL", "0")),
              st, out);
    MLN_CHECK(
        mln_bench_param_str(b, "link_security", mln_bench_tunable("MLN_LINK_SECURITY", "auth")), st,
        out);
    MLN_CHECK(
        mln_bench_param_str(b, "link_payload_mac", mln_bench_tunable("MLN_LINK_PAYLOAD_MAC", "0")),
        st, out);
    cipher = mln_link_cipher_in_use();
    MLN_CHECK(mln_bench_param_str(b, "link_cipher",
                                  cipher ? cipher : mln_bench_tunable("MLN_LINK_CIPHER", "auto")),
              st, out);
    s->nreqs = s->window > 2 ? (int)s->window : 2;
    s->mpi_reqs = malloc((size_t)s->nreqs * sizeof(*s->mpi_reqs));
    s->reqs = calloc((size_t)s->nreqs, sizeof(*s->reqs));
    s->statuses = malloc((size_t)s->nreqs * sizeof(*s->statuses));
    if (s->mpi_reqs == NULL || s->reqs == NULL || s->statuses == NULL)
        return mln_bench_fail(b, "out of memory");
out:
    return st;
}

static void stripe_teardown(mln_bench_t *b)
{
    stripe_state_t *s = mln_bench_state(b);

    free(s->mpi_reqs);
    free(s->reqs);
    free(s->statuses);
    s->mpi_reqs = NULL;
    s->reqs = NULL;
    s->statuses = NULL;
}

static const mln_bench_test_t stripe_tests[] = {
    {.name = "pingpong",
     .metric = {.name = "time_us",
                .unit = "us",
                .statistic = "median",
                .description = "one-way time: half the round trip of a message to the pair's "
                               "other rank and back (pre-posted receive, send, wait)",
                .higher_is_better = 0},
     .plan = pingpong_plan,
     .iter = pingpong_iter,
     .value = pingpong_value},
    {.name = "stream",
     .metric = {.name = "bw_Mbps",
                .unit = "Mbit/s",
                .statistic = "median",
                .description = "unidirectional bandwidth of a pair: window * bytes * 8 / time "
                               "of a window of sends completed by waitall and a 0-byte MPI ack "
                               "(Mbit = 10^6 bits)",
                .higher_is_better = 1},
     .plan = stream_plan,
     .iter = stream_iter,
     .value = stream_value},
    {.name = "overlap",
     .metric = {.name = "overlap_us",
                .unit = "us",
                .statistic = "median",
                .description = "time of the stream's window posted, --compute-us of work (a "
                               "sleep), then waitall and the ack: compute + transfer when "
                               "nothing overlaps, max(compute, transfer) when all does",
                .higher_is_better = 0},
     .plan = stream_plan,
     .iter = overlap_iter,
     .value = mln_bench_value_us},
};

static const mln_bench_option_t stripe_options[] = {
    {.name = "lanes",
     .type = MLN_BENCH_OPT_STRING,
     .default_value = "tcp:8",
     .help = "transport of the data: stock (plain MPI, the baseline), mpi or mpi:N (striped "
             "over MPI, N chunks in flight), tcp:N (N TCP lanes per peer, 1-64), tcp:auto (the "
             "lane count found per peer, MLN_STRIPE_LANES=auto), helper:K (K helper ranks per "
             "node, 1-16)",
     .offset = offsetof(stripe_state_t, lanes),
     .metavar = "SPEC"},
    {.name = "window",
     .type = MLN_BENCH_OPT_INT,
     .default_value = "8",
     .help = "messages in flight per iteration of stream",
     .offset = offsetof(stripe_state_t, window),
     .min = 1,
     .max = 1 << 16},
    {.name = "window-bytes",
     .type = MLN_BENCH_OPT_SIZE,
     .default_value = "64M",
     .help = "cap on window * message size; above it the window shrinks to max(1, cap / size)",
     .offset = offsetof(stripe_state_t, window_bytes),
     .min = 1,
     .max = INT64_C(1) << 40},
    {.name = "compute-us",
     .type = MLN_BENCH_OPT_INT,
     .default_value = "0",
     .help = "overlap: microseconds of work (a sleep) between posting the window and waiting",
     .offset = offsetof(stripe_state_t, compute_us),
     .min = 0,
     .max = 600000000},
    {.name = "local",
     .type = MLN_BENCH_OPT_INT,
     .default_value = "0",
     .help = "1: set MLN_STRIPE_LOCAL=1, so that ranks on one host stripe too (tests, "
             "loopback); 0: leave MLN_STRIPE_LOCAL as it is",
     .offset = offsetof(stripe_state_t, local),
     .metavar = "0|1",
     .min = 0,
     .max = 1},
};

/* The lanes this rank's striped messages to its partner went over at the end of the size
 * (MLN_STRIPE_LANES=auto: its choice by then); NAN for stock MPI or a rank that sits out. */
static double stripe_lanes_used_column(const mln_bench_t *b, uint64_t bytes)
{
    const stripe_state_t *s = mln_bench_state(b);
    MPI_Group g, world;
    int peer_world = MPI_UNDEFINED, n;

    (void)bytes;
    if (s->peer < 0 || s->xport->post_send == stock_post_send)
        return NAN;
    MPI_Comm_group(mln_bench_comm(b), &g);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_translate_ranks(g, 1, &s->peer, world, &peer_world);
    MPI_Group_free(&g);
    MPI_Group_free(&world);
    n = peer_world == MPI_UNDEFINED ? 0 : mln_stripe_lanes_used(peer_world);
    return n > 0 ? n : NAN;
}

static const mln_bench_column_t stripe_columns[] = {
    {.name = "window", .unit = "msgs", .value = stripe_window_column},
    {.name = "lanes_used", .unit = "lanes", .value = stripe_lanes_used_column},
    {.name = "stream_cpu_s_per_GB", .unit = "s/GB", .value = stripe_stream_cpu_column},
};

static const mln_bench_desc_t stripe_desc = {
    .name = "stripe",
    .description = "striped point-to-point (mln_stripe_*) vs stock MPI between rank pairs "
                   "(r, r + n/2)",
    .tests = stripe_tests,
    .ntests = sizeof(stripe_tests) / sizeof(stripe_tests[0]),
    .options = stripe_options,
    .noptions = sizeof(stripe_options) / sizeof(stripe_options[0]),
    .columns = stripe_columns,
    .ncolumns = sizeof(stripe_columns) / sizeof(stripe_columns[0]),
    .min_ranks = 2,
    .state_size = sizeof(stripe_state_t),
    .before_init = stripe_before_init,
    .setup = stripe_setup,
    .teardown = stripe_teardown,
};

int main(int argc, char **argv)
{
    return mln_bench_main(&stripe_desc, argc, argv);
}
