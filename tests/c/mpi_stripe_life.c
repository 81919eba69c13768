/*
 * mpi_stripe_life.c - the striping engine's life cycle at its edges, one case per run:
 *
 *   mpi_stripe_life helper-config   MLN_STRIPE_BACKEND=helper with a host (MLN_NODE_SIZE: an
 *                                   emulated one) of too few ranks: mln_init returns
 *                                   MLN_ERR_CONFIG on every rank, no rank hangs   (finding 6)
 *   mpi_stripe_life helper-reinit   mln_init after mln_finalize with the helper backend (the
 *                                   helpers have left): MLN_ERR_STATE at once     (finding 15)
 *   mpi_stripe_life orphan          requests never waited for outlive mln_finalize: wait,
 *                                   test and waitall free them with MLN_ERR_NOT_INIT (or
 *                                   MLN_ERR_STATE under a later mln_init), no use after
 *                                   free; calls before mln_init are refused cleanly (16)
 *
 * Rank 0 prints "ok CASE" or "FAIL CASE: why"; a case that hangs is ended by a watchdog that
 * prints FAIL.  The exit status is non-zero on a failure.
 */
#include "multilane.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char verdict[256];

static void on_alarm(int sig)
{
    (void)sig;
    ssize_t n = write(STDOUT_FILENO, verdict, strlen(verdict));
    (void)n;
    _exit(3);
}

/* One line per failed expectation on this rank; 1 when it held. */
static int expect(int rank, int *ok, mln_status_t got, mln_status_t want, const char *what)
{
    if (got == want)
        return 1;
    fprintf(stderr, "mpi_stripe_life: rank %d: %s: %s, expected %s\n", rank, what,
            mln_status_str(got), mln_status_str(want));
    *ok = 0;
    return 0;
}

/* Too few ranks on an emulated host: nodes of 2 ranks at np 3 leave rank 2 alone on its host,
 * and with one helper per host it would be a helper with nobody to serve. */
static int case_helper_config(int rank)
{
    int ok = 1;

    setenv("MLN_STRIPE_BACKEND", "helper", 1);
    setenv("MLN_STRIPE_HELPERS", "1", 1);
    setenv("MLN_NODE_SIZE", "2", 1);
    expect(rank, &ok, mln_init(), MLN_ERR_CONFIG, "mln_init with a host of 1 rank and 1 helper");
    ok &= !mln_initialized();
    return ok;
}

/* The helper ranks never return from the first mln_init; the application ranks' second
 * mln_init is refused at once (no collective with ranks that are gone). */
static int case_helper_reinit(int rank)
{
    int ok = 1;
    MPI_Comm app;

    setenv("MLN_STRIPE_BACKEND", "helper", 1);
    setenv("MLN_STRIPE_HELPERS", "1", 1);
    if (!expect(rank, &ok, mln_init(), MLN_OK, "first mln_init"))
        return 0;
    MPI_Comm_dup(mln_comm_world(), &app);
    expect(rank, &ok, mln_finalize(), MLN_OK, "mln_finalize");
    expect(rank, &ok, mln_init(), MLN_ERR_STATE, "mln_init after the helpers left");
    ok &= !mln_initialized();
    MPI_Barrier(app); /* the application ranks are all still here */
    MPI_Comm_free(&app);
    return ok;
}

/* Receives nobody sends to: rank 0 posts some, finalizes, and completes them afterwards. */
static int case_orphan(int rank, int size)
{
    int ok = 1, done = 0;
    char small[16], *big = malloc(1 << 20);
    mln_request_t req[4] = {MLN_REQUEST_NULL}, keep = MLN_REQUEST_NULL;
    MPI_Status st[4];

    /* before mln_init: clean refusals, never a crash */
    expect(rank, &ok, mln_stripe_wait(&req[0], &st[0]), MLN_OK, "wait on a null request");
    expect(rank, &ok, mln_stripe_test(&req[0], &done, &st[0]), MLN_OK, "test on a null request");
    expect(rank, &ok, mln_stripe_waitall(4, req, st), MLN_OK, "waitall on null requests");
    expect(rank, &ok, mln_stripe_isend(small, 1, MPI_CHAR, 0, 0, MPI_COMM_WORLD, &req[0]),
           MLN_ERR_NOT_INIT, "isend before mln_init");
    if (!expect(rank, &ok, mln_init(), MLN_OK, "mln_init"))
        return 0;
    if (rank == 0 && size > 1) {
        expect(rank, &ok, mln_stripe_irecv(small, 16, MPI_CHAR, 1, 99, MPI_COMM_WORLD, &req[0]),
               MLN_OK, "irecv");
        expect(rank, &ok, mln_stripe_irecv(big, 1 << 20, MPI_CHAR, 1, 98, MPI_COMM_WORLD, &req[1]),
               MLN_OK, "irecv");
        expect(
            rank, &ok,
            mln_stripe_irecv(big, 1 << 20, MPI_CHAR, MPI_ANY_SOURCE, 97, MPI_COMM_WORLD, &req[2]),
            MLN_OK, "irecv");
        expect(rank, &ok, mln_stripe_irecv(small, 16, MPI_CHAR, 1, 96, MPI_COMM_WORLD, &keep),
               MLN_OK, "irecv");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    expect(rank, &ok, mln_finalize(), MLN_OK, "mln_finalize with requests still posted");
    if (rank == 0 && size > 1) {
        expect(rank, &ok, mln_stripe_wait(&req[0], &st[0]), MLN_ERR_NOT_INIT,
               "wait after mln_finalize");
        ok &= req[0] == MLN_REQUEST_NULL;
        expect(rank, &ok, mln_stripe_test(&req[1], &done, &st[1]), MLN_ERR_NOT_INIT,
               "test after mln_finalize");
        ok &= done == 1 && req[1] == MLN_REQUEST_NULL;
    }
    if (!expect(rank, &ok, mln_init(), MLN_OK, "mln_init again"))
        return 0;
    if (rank == 0 && size > 1) {
        expect(rank, &ok, mln_stripe_waitall(4, req, st), MLN_ERR_STATE,
               "waitall on a request of the previous instance");
        ok &= req[2] == MLN_REQUEST_NULL;
        expect(rank, &ok, mln_stripe_wait(&keep, MPI_STATUS_IGNORE), MLN_ERR_STATE,
               "wait on a request of the previous instance");
    }
    expect(rank, &ok, mln_finalize(), MLN_OK, "mln_finalize");
    free(big);
    return ok;
}

int main(int argc, char **argv)
{
    int rank, size, ok = 0, all = 0;
    const char *name = argc > 1 ? argv[1] : "";

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    setenv("MLN_LOG", "error", 1);
    snprintf(verdict, sizeof(verdict), "FAIL %s: rank %d: not done within 60 s (hang)\n", name,
             rank);
    signal(SIGALRM, on_alarm);
    alarm(60);
    if (!strcmp(name, "helper-config")) {
        ok = case_helper_config(rank);
    } else if (!strcmp(name, "helper-reinit")) {
        ok = case_helper_reinit(rank); /* helper ranks never come back from mln_init */
    } else if (!strcmp(name, "orphan")) {
        ok = case_orphan(rank, size);
    } else {
        if (rank == 0)
            fprintf(stderr, "usage: mpi_stripe_life helper-config|helper-reinit|orphan\n");
        MPI_Finalize();
        return 2;
    }
    /* the helper-reinit case has no MPI_COMM_WORLD collective left (its helpers are gone) */
    if (!strcmp(name, "helper-reinit")) {
        alarm(0);
        printf("%s %s: rank %d\n", ok ? "ok" : "FAIL", name, rank);
        fflush(stdout);
        MPI_Finalize();
        return ok ? 0 : 1;
    }
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    alarm(0);
    if (rank == 0) {
        printf("%s %s (%d ranks)\n", all ? "ok" : "FAIL", name, size);
        fflush(stdout);
    }
    MPI_Finalize();
    return all ? 0 : 1;
}
