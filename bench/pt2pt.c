/*
 * pt2pt.c - mln-pt2pt: point-to-point latency and bandwidth between pairs of ranks.
 *
 * Rank r < n/2 pairs with rank r + n/2, so with ranks placed host by host the pairs cross
 * hosts; with an odd n the last rank sits out (it still joins the harness' collectives).
 * Every pair runs at the same time; times are the max over ranks (docs/METRICS.md).
 *
 *   latency  low: MPI_Send, MPI_Recv; high: MPI_Recv, MPI_Send.   latency_us = t / 2
 *   bw       low: W x MPI_Isend, MPI_Waitall, receive a 4-byte ack
 *            high: W x MPI_Irecv into W slots, MPI_Waitall, send the ack
 *                                                                bw_MBps = W * bytes / t
 *   bibw     both: W x MPI_Irecv + W x MPI_Isend, MPI_Waitall.  bibw_MBps = 2 W bytes / t
 *
 * t is the time of one iteration.  The effective window W = min(--window,
 * max(1, --window-bytes / bytes)) keeps the buffers bounded for large messages.
 */
#include "harness.h"
#include "mln_core.h"

#include <stddef.h>
#include <stdlib.h>

#define TAG_DATA 1
#define TAG_ACK 2

typedef enum pt2pt_role { ROLE_IDLE, ROLE_LOW, ROLE_HIGH } pt2pt_role_t;

typedef struct pt2pt_state {
    int64_t window;        /* --window */
    uint64_t window_bytes; /* --window-bytes: cap on window * bytes */
    pt2pt_role_t role;
    int peer;
    MPI_Request *reqs; /* 2 * window */
    char ack[4];
} pt2pt_state_t;

/* The effective window at `bytes` (the same on every rank). */
static int pt2pt_window(const mln_bench_t *b, uint64_t bytes)
{
    const pt2pt_state_t *s = mln_bench_state(b);
    uint64_t w = bytes ? s->window_bytes / bytes : (uint64_t)s->window;

    if (w > (uint64_t)s->window)
        w = (uint64_t)s->window;
    return w < 1 ? 1 : (int)w;
}

static double pt2pt_window_column(const mln_bench_t *b, uint64_t bytes)
{
    return pt2pt_window(b, bytes);
}

/* ---- latency: blocking ping-pong -------------------------------------------------------- */

static void latency_plan(const mln_bench_t *b, uint64_t bytes, mln_bench_plan_t *out)
{
    const pt2pt_state_t *s = mln_bench_state(b);

    (void)bytes;
    if (s->role != ROLE_IDLE)
        *out = (mln_bench_plan_t){.send_slots = 1, .recv_slots = 1, .recv_from = s->peer};
}

static mln_status_t latency_iter(mln_bench_t *b, const mln_bench_op_t *op)
{
    pt2pt_state_t *s = mln_bench_state(b);
    MPI_Comm comm = mln_bench_comm(b);
    int n = (int)op->bytes;
    mln_status_t st = MLN_OK;

    if (s->role == ROLE_LOW) {
        MLN_MPI_CHECK(MPI_Send(op->send, n, MPI_BYTE, s->peer, TAG_DATA, comm), st, out);
        MLN_MPI_CHECK(MPI_Recv(op->recv, n, MPI_BYTE, s->peer, TAG_DATA, comm, MPI_STATUS_IGNORE),
                      st, out);
    } else if (s->role == ROLE_HIGH) {
        MLN_MPI_CHECK(MPI_Recv(op->recv, n, MPI_BYTE, s->peer, TAG_DATA, comm, MPI_STATUS_IGNORE),
                      st, out);
        MLN_MPI_CHECK(MPI_Send(op->send, n, MPI_BYTE, s->peer, TAG_DATA, comm), st, out);
    }
out:
    return st;
}

static double latency_value(const mln_bench_t *b, uint64_t bytes, double seconds)
{
    (void)b;
    (void)bytes;
    return seconds / 2 * 1e6;
}

/* ---- bw: a window of messages one way, then an ack ------------------------------------- */

static void bw_plan(const mln_bench_t *b, uint64_t bytes, mln_bench_plan_t *out)
{
    const pt2pt_state_t *s = mln_bench_state(b);
    int w = pt2pt_window(b, bytes);

    if (s->role == ROLE_LOW)
        *out = (mln_bench_plan_t){.send_slots = w};
    else if (s->role == ROLE_HIGH)
        *out = (mln_bench_plan_t){.recv_slots = w, .recv_from = s->peer};
}

static mln_status_t bw_iter(mln_bench_t *b, const mln_bench_op_t *op)
{
    pt2pt_state_t *s = mln_bench_state(b);
    MPI_Comm comm = mln_bench_comm(b);
    int n = (int)op->bytes, w = pt2pt_window(b, op->bytes);
    mln_status_t st = MLN_OK;

    if (s->role == ROLE_LOW) {
        for (int k = 0; k < w; k++)
            MLN_MPI_CHECK(MPI_Isend(op->send + (size_t)k * op->bytes, n, MPI_BYTE, s->peer,
                                    TAG_DATA, comm, &s->reqs[k]),
                          st, out);
        MLN_MPI_CHECK(MPI_Waitall(w, s->reqs, MPI_STATUSES_IGNORE), st, out);
        MLN_MPI_CHECK(MPI_Recv(s->ack, 4, MPI_BYTE, s->peer, TAG_ACK, comm, MPI_STATUS_IGNORE), st,
                      out);
    } else if (s->role == ROLE_HIGH) {
        for (int k = 0; k < w; k++)
            MLN_MPI_CHECK(MPI_Irecv(op->recv + (size_t)k * op->bytes, n, MPI_BYTE, s->peer,
                                    TAG_DATA, comm, &s->reqs[k]),
                          st, out);
        MLN_MPI_CHECK(MPI_Waitall(w, s->reqs, MPI_STATUSES_IGNORE), st, out);
        MLN_MPI_CHECK(MPI_Send(s->ack, 4, MPI_BYTE, s->peer, TAG_ACK, comm), st, out);
    }
out:
    return st;
}

static double bw_value(const mln_bench_t *b, uint64_t bytes, double seconds)
{
    return seconds > 0 ? (double)pt2pt_window(b, bytes) * (double)bytes / seconds / 1e6 : 0.0;
}

/* ---- bibw: both ranks send and receive a window at once --------------------------------- */

static void bibw_plan(const mln_bench_t *b, uint64_t bytes, mln_bench_plan_t *out)
{
    const pt2pt_state_t *s = mln_bench_state(b);
    int w = pt2pt_window(b, bytes);

    if (s->role != ROLE_IDLE)
        *out = (mln_bench_plan_t){.send_slots = w, .recv_slots = w, .recv_from = s->peer};
}

static mln_status_t bibw_iter(mln_bench_t *b, const mln_bench_op_t *op)
{
    pt2pt_state_t *s = mln_bench_state(b);
    MPI_Comm comm = mln_bench_comm(b);
    int n = (int)op->bytes, w = pt2pt_window(b, op->bytes);
    mln_status_t st = MLN_OK;

    if (s->role == ROLE_IDLE)
        return MLN_OK;
    for (int k = 0; k < w; k++)
        MLN_MPI_CHECK(MPI_Irecv(op->recv + (size_t)k * op->bytes, n, MPI_BYTE, s->peer, TAG_DATA,
                                comm, &s->reqs[k]),
                      st, out);
    for (int k = 0; k < w; k++)
        MLN_MPI_CHECK(MPI_Isend(op->send + (size_t)k * op->bytes, n, MPI_BYTE, s->peer, TAG_DATA,
                                comm, &s->reqs[w + k]),
                      st, out);
    MLN_MPI_CHECK(MPI_Waitall(2 * w, s->reqs, MPI_STATUSES_IGNORE), st, out);
out:
    return st;
}

static double bibw_value(const mln_bench_t *b, uint64_t bytes, double seconds)
{
    return 2 * bw_value(b, bytes, seconds);
}

/* ---- the benchmark ---------------------------------------------------------------------- */

static mln_status_t pt2pt_setup(mln_bench_t *b)
{
    pt2pt_state_t *s = mln_bench_state(b);
    int rank = mln_bench_rank(b), n = mln_bench_nranks(b), half = n / 2;
    char pairing[128];
    mln_status_t st = MLN_OK;

    s->role = rank < half ? ROLE_LOW : rank < 2 * half ? ROLE_HIGH : ROLE_IDLE;
    s->peer = s->role == ROLE_LOW ? rank + half : s->role == ROLE_HIGH ? rank - half : -1;
    s->reqs = malloc(2 * (size_t)s->window * sizeof(*s->reqs));
    if (s->reqs == NULL)
        return mln_bench_fail(b, "out of memory");
    snprintf(pairing, sizeof(pairing), "rank r with rank r + %d for r < %d", half, half);
    MLN_CHECK(mln_bench_param_int(b, "pairs", half), st, out);
    MLN_CHECK(mln_bench_param_str(b, "pairing", pairing), st, out);
    if (n % 2) /* odd: the last rank sits out, and the provenance says so */
        MLN_CHECK(mln_bench_param_int(b, "idle_rank", n - 1), st, out);
out:
    return st;
}

static void pt2pt_teardown(mln_bench_t *b)
{
    pt2pt_state_t *s = mln_bench_state(b);

    free(s->reqs);
    s->reqs = NULL;
}

static const mln_bench_test_t pt2pt_tests[] = {
    {.name = "latency",
     .metric = {.name = "latency_us",
                .unit = "us",
                .statistic = "median",
                .description = "one-way latency: half the round-trip time of a blocking "
                               "MPI_Send/MPI_Recv ping-pong between the ranks of a pair",
                .higher_is_better = 0},
     .plan = latency_plan,
     .iter = latency_iter,
     .value = latency_value},
    {.name = "bw",
     .metric = {.name = "bw_MBps",
                .unit = "MB/s",
                .statistic = "median",
                .description = "unidirectional bandwidth of a pair: window * bytes / time of a "
                               "window of MPI_Isend completed by MPI_Waitall and a 4-byte ack "
                               "(MB = 10^6 bytes)",
                .higher_is_better = 1},
     .plan = bw_plan,
     .iter = bw_iter,
     .value = bw_value},
    {.name = "bibw",
     .metric = {.name = "bibw_MBps",
                .unit = "MB/s",
                .statistic = "median",
                .description = "bidirectional bandwidth of a pair: 2 * window * bytes / time of "
                               "both ranks sending and receiving a window at once "
                               "(MB = 10^6 bytes)",
                .higher_is_better = 1},
     .plan = bibw_plan,
     .iter = bibw_iter,
     .value = bibw_value},
};

static const mln_bench_option_t pt2pt_options[] = {
    {.name = "window",
     .type = MLN_BENCH_OPT_INT,
     .default_value = "64",
     .help = "messages in flight per iteration of bw and bibw",
     .offset = offsetof(pt2pt_state_t, window),
     .min = 1,
     .max = 1 << 16},
    {.name = "window-bytes",
     .type = MLN_BENCH_OPT_SIZE,
     .default_value = "16M",
     .help = "cap on window * message size; above it the window shrinks to max(1, cap / size)",
     .offset = offsetof(pt2pt_state_t, window_bytes),
     .min = 1,
     .max = INT64_C(1) << 40},
};

static const mln_bench_column_t pt2pt_columns[] = {
    {.name = "window", .unit = "msgs", .value = pt2pt_window_column},
};

static const mln_bench_desc_t pt2pt_desc = {
    .name = "pt2pt",
    .description = "point-to-point latency and bandwidth between rank pairs (r, r + n/2)",
    .tests = pt2pt_tests,
    .ntests = sizeof(pt2pt_tests) / sizeof(pt2pt_tests[0]),
    .options = pt2pt_options,
    .noptions = sizeof(pt2pt_options) / sizeof(pt2pt_options[0]),
    .columns = pt2pt_columns,
    .ncolumns = sizeof(pt2pt_columns) / sizeof(pt2pt_columns[0]),
    .min_ranks = 2,
    .state_size = sizeof(pt2pt_state_t),
    .setup = pt2pt_setup,
    .teardown = pt2pt_teardown,
};

int main(int argc, char **argv)
{
    return mln_bench_main(&pt2pt_desc, argc, argv);
}
