/*
 * mpi_stripe_faults.c - the fault sub-tests of mpi_stripe that need the test bed (issue 17,
 * "Faults, tested"; tests/python/test_stripe_faults.py runs them between two sites):
 *
 *   blackhole  the delay line silently drops one tcp lane of a 64 MiB message mid-way
 *              (mln-delayline --blackhole, on the port MLN_STRIPE_PORT fixes): an error on
 *              both sides within MLN_STRIPE_TIMEOUT + 20 s, later messages whole
 *   kill       rank 1 SIGKILLs itself once part of a 64 MiB message landed: rank 0's send
 *              ends with an error (printed, then rank 0 aborts the job) unless the launcher
 *              ends the job first; never a completed send
 *   stranger   a long verified exchange in rounds while the test connects strangers to rank
 *              1's lane port; rank 0 prints a genuine hello for the stranger to replay.  It
 *              runs until the file of --until exists (3 rounds without it): every byte right
 *              and the lanes between the ranks still up at the end
 *
 * The lines that the Python test reads carry a wall-clock time ("at T", seconds since the
 * epoch): the ranks run in namespaces of one machine, so their clocks are the test's.
 */
#include "stripe_check.h"
#include "stripe_hooks.h"
#include "stripe_int.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define KILL_SIZE (64 * MIB + 3)
#define STRANGER_SIZE (4 * MIB + 3)
#define STRANGER_LIMIT_S 60.0 /* the --until file must appear within this */

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void t_blackhole(tctx_t *t)
{
    /* more than the socket buffers hold, so the send is still writing when its lane goes */
    if (!pair_only(t, "blackhole"))
        lane_fault_run(t, "blackhole", 64 * MIB + 5);
}

/* About how many bytes of message 0 from rank 0 have landed in buf: the share of sampled
 * offsets that hold their pattern byte (the buffer starts zeroed; offsets whose pattern byte is
 * 0 are not sampled). */
static int64_t landed(const uint8_t *buf, int64_t n)
{
    int64_t samples = 0, hits = 0;

    for (int64_t i = 0; i < n; i += 65536 + 7) {
        const uint8_t want = pat(0, 0, (uint64_t)i);
        if (want == 0)
            continue;
        samples++;
        hits += buf[i] == want;
    }
    return samples ? hits * n / samples : 0;
}

/* Rank 1: receives until a quarter of the message landed, then dies at once. */
static void kill_receiver(tctx_t *t, uint8_t *buf)
{
    mln_request_t req = MLN_REQUEST_NULL;
    const double t0 = MPI_Wtime();
    int64_t got = 0;
    int done = 0;

    memset(buf, 0, (size_t)KILL_SIZE);
    if (!expect(t, mln_stripe_irecv(buf, KILL_SIZE, MPI_BYTE, 0, t->tag, t->comm, &req), MLN_OK,
                "kill: irecv"))
        return;
    while (!done && (got = landed(buf, KILL_SIZE)) < KILL_SIZE / 4 && MPI_Wtime() - t0 < 20.0)
        if (mln_stripe_test(&req, &done, MPI_STATUS_IGNORE) != MLN_OK)
            break;
    if (done) { /* too fast to die mid-message: say so (the test wants a larger message) */
        printf("FAIL kill: rank 1: the message completed before rank 1 could die mid-way\n");
        fflush(stdout);
    }
    printf("mpi_stripe: rank 1: kill: SIGKILL now, about %lld of %lld bytes landed, at %.3f\n",
           (long long)got, (long long)KILL_SIZE, wall_now());
    fflush(stdout);
    fflush(stderr);
    raise(SIGKILL);
}

/* Rank 0: its send to the dead rank must end with an error; then it ends the job. */
static void kill_sender(tctx_t *t, uint8_t *buf)
{
    mln_request_t req = MLN_REQUEST_NULL;
    mln_status_t rc;
    double t0;

    fill(buf, KILL_SIZE, 0, 0);
    rc = mln_stripe_isend(buf, KILL_SIZE, MPI_BYTE, 1, t->tag, t->comm, &req);
    t0 = MPI_Wtime();
    if (rc == MLN_OK)
        rc = mln_stripe_wait(&req, MPI_STATUS_IGNORE);
    printf("mpi_stripe: rank 0: kill: the send ended with %s after %.2f s, at %.3f\n",
           mln_status_str(rc), MPI_Wtime() - t0, wall_now());
    if (rc == MLN_OK)
        printf("FAIL kill: rank 0: the send to the killed rank completed MLN_OK\n");
    printf("mpi_stripe: rank 0: kill: aborting the job (its peer is dead)\n");
    fflush(stdout);
    /* MPI_Abort ends the launcher's forwarding at once: give it a moment to pass these lines
     * on (Hydra lost them once, keeping only the library's warning on stderr). */
    const struct timespec pause = {0, 300 * 1000 * 1000};
    nanosleep(&pause, NULL);
    MPI_Abort(MPI_COMM_WORLD, 3);
}

/* Never returns on ranks 0 and 1 (one dies, the other aborts the job). */
void t_kill(tctx_t *t)
{
    uint8_t *buf;

    if (pair_only(t, "kill"))
        return;
    buf = xmalloc(KILL_SIZE);
    if (t->rank == 1)
        kill_receiver(t, buf);
    else
        kill_sender(t, buf);
    free(buf); /* only after a failed post on rank 1: the sub-test reports it */
}

/* One round of the stranger sub-test: STRANGER_SIZE + round bytes both ways, checked. */
static void stranger_round(tctx_t *t, uint8_t *out, uint8_t *in, int round)
{
    const int64_t m = STRANGER_SIZE + round;
    const int peer = 1 - t->rank, tag = t->tag + round % 500;
    mln_request_t reqs[2] = {MLN_REQUEST_NULL, MLN_REQUEST_NULL};
    MPI_Status st[2];

    fill(out, m, t->rank, round);
    memset(in, 0, (size_t)m);
    if (expect(t, mln_stripe_irecv(in, m, MPI_BYTE, peer, tag, t->comm, &reqs[0]), MLN_OK,
               "stranger: irecv") &&
        expect(t, mln_stripe_isend(out, m, MPI_BYTE, peer, tag, t->comm, &reqs[1]), MLN_OK,
               "stranger: isend") &&
        expect(t, mln_stripe_waitall(2, reqs, st), MLN_OK, "stranger: exchange") &&
        check_status(t, &st[0], peer, tag, m, "stranger"))
        check(t, in, m, peer, round, "stranger");
}

/* After the first round (the lanes are open): rank 0 prints rank 1's lane port and the hello
 * it would send rank 1 on lane 0. */
static void stranger_announce(tctx_t *t, mln_stripe_t *s)
{
    unsigned char hello[72];
    int port = t->rank == 1 ? mln_tcp_listen_port(s) : 0;

    MPI_Bcast(&port, 1, MPI_INT, 1, t->comm);
    if (t->rank != 0)
        return;
    if (mln_tcp_test_hello(s, 1, 0, hello) != 0) {
        fail(t, "stranger: mln_tcp_test_hello gave no hello for lane 0 to rank 1");
        return;
    }
    printf("mpi_stripe: stranger: rank 1 listens on port %d\nmpi_stripe: stranger: hello ", port);
    for (size_t i = 0; i < sizeof(hello); i++)
        printf("%02x", hello[i]);
    printf("\n");
    fflush(stdout);
}

void t_stranger(tctx_t *t)
{
    mln_stripe_t *s = mln_stripe_engine();
    const double t0 = MPI_Wtime();
    uint8_t *out, *in;
    int round = 0, end = 0;

    if (pair_only(t, "stranger"))
        return;
    out = xmalloc(STRANGER_SIZE + 1000);
    in = xmalloc(STRANGER_SIZE + 1000);
    while (!end) {
        int mine;
        stranger_round(t, out, in, round++);
        if (round == 1)
            stranger_announce(t, s);
        /* rank 0 decides when to stop; any rank's failure stops it too */
        mine = !t->ok;
        if (t->rank == 0)
            mine |= t->opt->until
                        ? access(t->opt->until, F_OK) == 0 || MPI_Wtime() - t0 > STRANGER_LIMIT_S
                        : round >= 3;
        MPI_Allreduce(&mine, &end, 1, MPI_INT, MPI_MAX, t->comm);
    }
    if (t->rank == 0 && t->opt->until && access(t->opt->until, F_OK) != 0)
        fail(t, "stranger: %s did not appear within %.0f s", t->opt->until, STRANGER_LIMIT_S);
    if (!mln_tcp_lanes_up(s, 1 - t->rank))
        fail(t, "stranger: rank %d's tcp lanes to rank %d are down", t->rank, 1 - t->rank);
    if (t->rank == 0)
        fprintf(stderr,
                "mpi_stripe: stranger: %d rounds of %lld+ bytes both ways in %.2f s, every byte "
                "checked\n",
                round, (long long)STRANGER_SIZE, MPI_Wtime() - t0);
    free(out);
    free(in);
}
