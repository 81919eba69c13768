/*
 * mpi_stripe_spawn.c - a communicator with a process outside MPI_COMM_WORLD (finding 12).
 *
 * The job spawns one more process (MPI_Comm_spawn of this program) and merges the
 * intercommunicator into an intracommunicator that holds it.  The child has no world rank in
 * the parents' MPI_COMM_WORLD, so no lane leads to it: mln_stripe_isend to it must be refused
 * with MLN_ERR_UNSUPPORTED for every size (the engine once used MPI_UNDEFINED as an index), and
 * messages between the parents on the same communicator still work.  The child takes no part
 * in Multilane; it only joins the merge and the final barrier.
 */
#include "multilane.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void on_alarm(int sig)
{
    static const char msg[] = "FAIL spawn: not done within 120 s (hang)\n";
    (void)sig;
    ssize_t n = write(STDOUT_FILENO, msg, sizeof(msg) - 1);
    (void)n;
    _exit(3);
}

int main(int argc, char **argv)
{
    MPI_Comm parent, inter, merged;
    int rank, size, mrank, msize, ok = 1, all = 0;
    static const int64_t sizes[] = {1, 64, 1000, 1 << 20};

    MPI_Init(&argc, &argv);
    signal(SIGALRM, on_alarm);
    alarm(120);
    MPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL) { /* the child */
        MPI_Intercomm_merge(parent, 1, &merged);
        MPI_Barrier(merged);
        MPI_Comm_free(&merged);
        MPI_Comm_disconnect(&parent);
        MPI_Finalize();
        return 0;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    setenv("MLN_LOG", "none", 1); /* the refusals are expected */
    if (mln_init() != MLN_OK) {
        printf("FAIL spawn: mln_init\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter,
                   MPI_ERRCODES_IGNORE);
    MPI_Intercomm_merge(inter, 0, &merged);
    MPI_Comm_rank(merged, &mrank);
    MPI_Comm_size(merged, &msize); /* the child is the last rank */
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        char *buf = calloc(1, (size_t)sizes[i]);
        mln_request_t req = MLN_REQUEST_NULL;
        mln_status_t st = mln_stripe_isend(buf, sizes[i], MPI_BYTE, msize - 1, 5, merged, &req);
        if (st != MLN_ERR_UNSUPPORTED) {
            fprintf(stderr,
                    "mpi_stripe_spawn: rank %d: isend of %lld bytes to the spawned "
                    "process: %s, expected %s\n",
                    rank, (long long)sizes[i], mln_status_str(st),
                    mln_status_str(MLN_ERR_UNSUPPORTED));
            ok = 0;
            if (st == MLN_OK)
                mln_stripe_wait(&req, MPI_STATUS_IGNORE);
        }
        if (size > 1) { /* between the parents, on the same communicator: as usual */
            const int peer = rank ^ 1;
            if (peer < size) {
                mln_request_t r[2];
                char *in = calloc(1, (size_t)sizes[i]);
                memset(buf, 'a' + (int)i, (size_t)sizes[i]);
                ok &= mln_stripe_irecv(in, sizes[i], MPI_BYTE, peer, 6, merged, &r[0]) == MLN_OK;
                ok &= mln_stripe_isend(buf, sizes[i], MPI_BYTE, peer, 6, merged, &r[1]) == MLN_OK;
                ok &= mln_stripe_waitall(2, r, MPI_STATUSES_IGNORE) == MLN_OK;
                ok &= memcmp(in, buf, (size_t)sizes[i]) == 0;
                free(in);
            }
        }
        free(buf);
    }
    MPI_Barrier(merged);
    MPI_Comm_free(&merged);
    MPI_Comm_disconnect(&inter);
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (rank == 0)
        printf("%s spawn (%d parents and 1 spawned process)\n", all ? "ok" : "FAIL", size);
    fflush(stdout);
    mln_finalize();
    alarm(0);
    MPI_Finalize();
    return all ? 0 : 1;
}
