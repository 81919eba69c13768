/*
 * relay.c - mln-relay: the seed-004 benchmark (ALGORITHMS.md section 4, R5): traffic between
 * two sites, direct (one stock MPI job spanning routable sites) or relayed (`multilane grid
 * run`: one MPI job per private site, joined by gateways).
 *
 * A plain MPI program: it links no Multilane library (mln_bench_plain, harness.h "Runtimes")
 * and calls, on MPI_COMM_WORLD, only what the grid's interposition layer carries across
 * sites: point-to-point, MPI_Barrier, MPI_Wtime, MPI_Abort, MPI_Comm_rank/size,
 * MPI_Get_processor_name, MPI_Get_library_version (and Init, Finalize, Get_version,
 * Error_string, which take no communicator).  So the same binary measures both ways.
 *
 * Halves: ranks [0, s) are site a, [s, n) site b, s = --split or n/2 (the grid orders global
 * ranks by site; a direct job on the test bed places its ranks site by site).
 *
 *   pingpong  rank 0: MPI_Send, MPI_Recv; rank s: MPI_Recv, MPI_Send (one round trip)
 *                                                       latency_us = t / 2
 *   stream    rank 0: W x MPI_Isend, MPI_Waitall, receive a 0-byte ack;
 *             rank s: W x MPI_Irecv into W slots, MPI_Waitall, send the ack
 *                                                       stream_Mbps = 8 W bytes / t
 *   alltoall  every rank: one MPI_Irecv from and one MPI_Isend to every rank of the other
 *             half, one MPI_Waitall (only cross-site messages)
 *                                                       alltoall_Mbps = 8 M bytes / t,
 *             M = 2 s (n - s) messages crossing between the sites per iteration
 *
 * t is the time of one iteration, max over ranks; W = min(--window, max(1, --window-bytes /
 * bytes)).  In alltoall each message comes from a send slot of its own (the receiver's index
 * in its half), so a message delivered to the wrong rank fails validation.  Columns: the
 * effective window, M (cross_msgs) and pingpong_Mbps = 8 bytes / latency_us.
 * docs/METRICS.md (relay) defines every number.
 */
#include "harness.h"
#include "mln_core.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#define TAG_DATA 1
#define TAG_ACK 2

typedef struct relay_state {
    int64_t window;        /* --window */
    uint64_t window_bytes; /* --window-bytes: cap on window * bytes */
    int64_t split;         /* --split: first rank of site b; 0 = n/2 */
    int site_b;            /* s: the first rank of site b, as used */
    int rank, nranks;
    int other_first, other_count; /* the other half: ranks other_first .. + other_count - 1 */
    int index;                    /* this rank's index in its own half */
    int *from_each, *slot_each;   /* [other_count]: alltoall's receive plan */
    MPI_Request *reqs;            /* max(window, 2 * other_count) */
    char ack;
} relay_state_t;

/* The effective window of stream at `bytes` (the same on every rank). */
static int relay_window(const mln_bench_t *b, uint64_t bytes)
{
    const relay_state_t *s = mln_bench_state(b);
    uint64_t w = bytes ? s->window_bytes / bytes : (uint64_t)s->window;

    if (w > (uint64_t)s->window)
        w = (uint64_t)s->window;
    return w < 1 ? 1 : (int)w;
}

/* M: messages between the halves per alltoall iteration (both directions). */
static int64_t relay_cross_msgs(const relay_state_t *s)
{
    return 2 * (int64_t)s->site_b * (int64_t)(s->nranks - s->site_b);
}

/* ---- pingpong: rank 0 <-> rank s, blocking ---------------------------------------------- */

static void pingpong_plan(const mln_bench_t *b, uint64_t bytes, mln_bench_plan_t *out)
{
    const relay_state_t *s = mln_bench_state(b);

    (void)bytes;
    if (s->rank == 0 || s->rank == s->site_b)
        *out = (mln_bench_plan_t){
            .send_slots = 1, .recv_slots = 1, .recv_from = s->rank == 0 ? s->site_b : 0};
}

static mln_status_t pingpong_iter(mln_bench_t *b, const mln_bench_op_t *op)
{
    relay_state_t *s = mln_bench_state(b);
    MPI_Comm comm = mln_bench_comm(b);
    int n = (int)op->bytes;
    mln_status_t st = MLN_OK;

    if (s->rank == 0) {
        MLN_MPI_CHECK(MPI_Send(op->send, n, MPI_BYTE, s->site_b, TAG_DATA, comm), st, out);
        MLN_MPI_CHECK(MPI_Recv(op->recv, n, MPI_BYTE, s->site_b, TAG_DATA, comm, MPI_STATUS_IGNORE),
                      st, out);
    } else if (s->rank == s->site_b) {
        MLN_MPI_CHECK(MPI_Recv(op->recv, n, MPI_BYTE, 0, TAG_DATA, comm, MPI_STATUS_IGNORE), st,
                      out);
        MLN_MPI_CHECK(MPI_Send(op->send, n, MPI_BYTE, 0, TAG_DATA, comm), st, out);
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

/* ---- stream: a window one way (rank 0 -> rank s), then a 0-byte ack -------------------- */

static void stream_plan(const mln_bench_t *b, uint64_t bytes, mln_bench_plan_t *out)
{
    const relay_state_t *s = mln_bench_state(b);
    int w = relay_window(b, bytes);

    if (s->rank == 0)
        *out = (mln_bench_plan_t){.send_slots = w};
    else if (s->rank == s->site_b)
        *out = (mln_bench_plan_t){.recv_slots = w, .recv_from = 0};
}

static mln_status_t stream_iter(mln_bench_t *b, const mln_bench_op_t *op)
{
    relay_state_t *s = mln_bench_state(b);
    MPI_Comm comm = mln_bench_comm(b);
    int n = (int)op->bytes, w = relay_window(b, op->bytes);
    mln_status_t st = MLN_OK;

    if (s->rank == 0) {
        for (int k = 0; k < w; k++)
            MLN_MPI_CHECK(MPI_Isend(op->send + (size_t)k * op->bytes, n, MPI_BYTE, s->site_b,
                                    TAG_DATA, comm, &s->reqs[k]),
                          st, out);
        MLN_MPI_CHECK(MPI_Waitall(w, s->reqs, MPI_STATUSES_IGNORE), st, out);
        MLN_MPI_CHECK(MPI_Recv(&s->ack, 0, MPI_BYTE, s->site_b, TAG_ACK, comm, MPI_STATUS_IGNORE),
                      st, out);
    } else if (s->rank == s->site_b) {
        for (int k = 0; k < w; k++)
            MLN_MPI_CHECK(MPI_Irecv(op->recv + (size_t)k * op->bytes, n, MPI_BYTE, 0, TAG_DATA,
                                    comm, &s->reqs[k]),
                          st, out);
        MLN_MPI_CHECK(MPI_Waitall(w, s->reqs, MPI_STATUSES_IGNORE), st, out);
        MLN_MPI_CHECK(MPI_Send(&s->ack, 0, MPI_BYTE, 0, TAG_ACK, comm), st, out);
    }
out:
    return st;
}

static double stream_value(const mln_bench_t *b, uint64_t bytes, double seconds)
{
    return seconds > 0 ? (double)relay_window(b, bytes) * (double)bytes * 8 / seconds / 1e6 : 0.0;
}

/* ---- alltoall: every rank with every rank of the other half ----------------------------- */

static void alltoall_plan(const mln_bench_t *b, uint64_t bytes, mln_bench_plan_t *out)
{
    const relay_state_t *s = mln_bench_state(b);

    (void)bytes;
    *out = (mln_bench_plan_t){.send_slots = s->other_count,
                              .recv_slots = s->other_count,
                              .recv_from_each = s->from_each,
                              .recv_slot_each = s->slot_each};
}

static mln_status_t alltoall_iter(mln_bench_t *b, const mln_bench_op_t *op)
{
    relay_state_t *s = mln_bench_state(b);
    MPI_Comm comm = mln_bench_comm(b);
    int n = (int)op->bytes, m = s->other_count;
    mln_status_t st = MLN_OK;

    for (int k = 0; k < m; k++)
        MLN_MPI_CHECK(MPI_Irecv(op->recv + (size_t)k * op->bytes, n, MPI_BYTE, s->other_first + k,
                                TAG_DATA, comm, &s->reqs[k]),
                      st, out);
    for (int k = 0; k < m; k++) /* send slot k: for the rank of index k in the other half */
        MLN_MPI_CHECK(MPI_Isend(op->send + (size_t)k * op->bytes, n, MPI_BYTE, s->other_first + k,
                                TAG_DATA, comm, &s->reqs[m + k]),
                      st, out);
    MLN_MPI_CHECK(MPI_Waitall(2 * m, s->reqs, MPI_STATUSES_IGNORE), st, out);
out:
    return st;
}

static double alltoall_value(const mln_bench_t *b, uint64_t bytes, double seconds)
{
    const relay_state_t *s = mln_bench_state(b);

    return seconds > 0 ? (double)relay_cross_msgs(s) * (double)bytes * 8 / seconds / 1e6 : 0.0;
}

/* ---- columns ---------------------------------------------------------------------------- */

static double relay_window_column(const mln_bench_t *b, uint64_t bytes)
{
    return relay_window(b, bytes);
}

static double relay_cross_column(const mln_bench_t *b, uint64_t bytes)
{
    (void)bytes;
    return (double)relay_cross_msgs(mln_bench_state(b));
}

/* The ping-pong's bandwidth: 8 bytes / one-way time (bits per us = Mbit/s); "-" without it. */
static double relay_pingpong_mbps(const mln_bench_t *b, uint64_t bytes)
{
    double us = mln_bench_median(b, "pingpong");

    if (!isfinite(us))
        return NAN;
    return us > 0 ? (double)bytes * 8 / us : 0.0;
}

/* ---- the benchmark ---------------------------------------------------------------------- */

static mln_status_t relay_setup(mln_bench_t *b)
{
    relay_state_t *s = mln_bench_state(b);
    int n = mln_bench_nranks(b), a_side;
    size_t nreq;
    char text[160];
    mln_status_t st = MLN_OK;

    s->rank = mln_bench_rank(b);
    s->nranks = n;
    if (s->split != 0 && s->split >= n)
        return mln_bench_fail(b,
                              "--split %lld: site b must have ranks (expected 1 to %d, or 0 "
                              "for n/2 = %d)",
                              (long long)s->split, n - 1, n / 2);
    s->site_b = s->split != 0 ? (int)s->split : n / 2;
    a_side = s->rank < s->site_b;
    s->other_first = a_side ? s->site_b : 0;
    s->other_count = a_side ? n - s->site_b : s->site_b;
    s->index = a_side ? s->rank : s->rank - s->site_b;
    nreq = (size_t)(s->window > 2 * s->other_count ? s->window : 2 * s->other_count);
    s->reqs = malloc(nreq * sizeof(*s->reqs));
    s->from_each = malloc((size_t)s->other_count * sizeof(*s->from_each));
    s->slot_each = malloc((size_t)s->other_count * sizeof(*s->slot_each));
    if (s->reqs == NULL || s->from_each == NULL || s->slot_each == NULL)
        return mln_bench_fail(b, "rank %d: out of memory", s->rank);
    for (int k = 0; k < s->other_count; k++) {
        s->from_each[k] = s->other_first + k;
        s->slot_each[k] = s->index; /* the sender's slot for this rank */
    }
    snprintf(text, sizeof(text), "a = ranks 0..%d, b = ranks %d..%d", s->site_b - 1, s->site_b,
             n - 1);
    MLN_CHECK(mln_bench_param_str(b, "halves", text), st, out);
    snprintf(text, sizeof(text), "0,%d", s->site_b);
    MLN_CHECK(mln_bench_param_str(b, "pair", text), st, out);
    MLN_CHECK(mln_bench_param_int(b, "cross_msgs", relay_cross_msgs(s)), st, out);
    MLN_CHECK(mln_bench_param_str(b, "collectives", mln_bench_collectives(b)), st, out);
out:
    return st;
}

static void relay_teardown(mln_bench_t *b)
{
    relay_state_t *s = mln_bench_state(b);

    free(s->reqs);
    free(s->from_each);
    free(s->slot_each);
    s->reqs = NULL;
    s->from_each = s->slot_each = NULL;
}

static const mln_bench_test_t relay_tests[] = {
    {.name = "pingpong",
     .metric = {.name = "latency_us",
                .unit = "us",
                .statistic = "median",
                .description = "one-way time between the sites: half the round trip of a "
                               "blocking MPI_Send/MPI_Recv ping-pong of rank 0 and the first "
                               "rank of site b",
                .higher_is_better = 0},
     .plan = pingpong_plan,
     .iter = pingpong_iter,
     .value = pingpong_value},
    {.name = "stream",
     .metric = {.name = "stream_Mbps",
                .unit = "Mbit/s",
                .statistic = "median",
                .description = "bandwidth from rank 0 to the first rank of site b: 8 * window * "
                               "bytes / time of a window of MPI_Isend and a 0-byte ack "
                               "(Mbit = 10^6 bits)",
                .higher_is_better = 1},
     .plan = stream_plan,
     .iter = stream_iter,
     .value = stream_value},
    {.name = "alltoall",
     .metric = {.name = "alltoall_Mbps",
                .unit = "Mbit/s",
                .statistic = "median",
                .description = "aggregate cross-site bandwidth: every rank exchanges one "
                               "message with every rank of the other site (MPI_Isend/MPI_Irecv, "
                               "MPI_Waitall); 8 * cross_msgs * bytes / time (Mbit = 10^6 bits)",
                .higher_is_better = 1},
     .plan = alltoall_plan,
     .iter = alltoall_iter,
     .value = alltoall_value},
};

static const mln_bench_option_t relay_options[] = {
    {.name = "window",
     .type = MLN_BENCH_OPT_INT,
     .default_value = "8",
     .help = "messages in flight per iteration of stream",
     .offset = offsetof(relay_state_t, window),
     .min = 1,
     .max = 1 << 16},
    {.name = "window-bytes",
     .type = MLN_BENCH_OPT_SIZE,
     .default_value = "64M",
     .help = "cap on window * message size; above it the window shrinks to max(1, cap / size)",
     .offset = offsetof(relay_state_t, window_bytes),
     .min = 1,
     .max = INT64_C(1) << 40},
    {.name = "split",
     .type = MLN_BENCH_OPT_INT,
     .default_value = "0",
     .help = "first rank of site b: ranks below it are site a (0: n/2)",
     .offset = offsetof(relay_state_t, split),
     .min = 0,
     .max = 1 << 24},
};

static const mln_bench_column_t relay_columns[] = {
    {.name = "window", .unit = "msgs", .value = relay_window_column},
    {.name = "cross_msgs", .unit = "msgs", .value = relay_cross_column},
    {.name = "pingpong_Mbps", .unit = "Mbit/s", .value = relay_pingpong_mbps},
};

static const mln_bench_desc_t relay_desc = {
    .name = "relay",
    .description = "traffic between two sites, direct or relayed (seed 004): ping-pong of "
                   "rank 0 and the first rank of site b, streaming, all-to-all across sites",
    .tests = relay_tests,
    .ntests = sizeof(relay_tests) / sizeof(relay_tests[0]),
    .options = relay_options,
    .noptions = sizeof(relay_options) / sizeof(relay_options[0]),
    .columns = relay_columns,
    .ncolumns = sizeof(relay_columns) / sizeof(relay_columns[0]),
    .min_ranks = 2,
    .state_size = sizeof(relay_state_t),
    .setup = relay_setup,
    .teardown = relay_teardown,
};

int main(int argc, char **argv)
{
    return mln_bench_main(&relay_desc, argc, argv);
}
