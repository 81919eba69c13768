/*
 * mpi_stripe_edges.c - the edge sub-tests of mpi_stripe: argument errors and intercommunicators,
 * a message over 2^31 bytes (64-bit counts), and a tcp lane reset in the middle of a message.
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, MAP_NORESERVE */
#include "stripe_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Argument checks, intercommunicators, non-contiguous messages over 2^31 - 1 bytes. */
void t_args(tctx_t *t)
{
    uint8_t byte = 0;
    mln_request_t req = MLN_REQUEST_NULL;
    const int peer = t->partner >= 0 ? t->partner : 0;
    MPI_Comm local, inter;
    MPI_Datatype huge;
    MPI_Status st;
    const size_t span = ((size_t)1 << 32) + 4096;
    void *zero;

    if (strcmp(mln_stripe_backend_name(), t->opt->backend) != 0)
        fail(t, "args: mln_stripe_backend_name() is '%s', expected '%s'", mln_stripe_backend_name(),
             t->opt->backend);
    if (strcmp(t->opt->backend, "tcp") == 0 && mln_stripe_lanes() != t->opt->lanes)
        fail(t, "args: mln_stripe_lanes() is %d, expected %d", mln_stripe_lanes(), t->opt->lanes);
    expect(t, mln_stripe_isend(&byte, -1, MPI_BYTE, peer, t->tag, t->comm, &req), MLN_ERR_ARG,
           "args: isend count -1");
    expect(t, mln_stripe_irecv(&byte, -1, MPI_BYTE, peer, t->tag, t->comm, &req), MLN_ERR_ARG,
           "args: irecv count -1");
    req = MLN_REQUEST_NULL;
    expect(t, mln_stripe_wait(&req, MPI_STATUS_IGNORE), MLN_OK, "args: wait on a null request");
    expect(t, mln_stripe_waitall(0, &req, &st), MLN_OK, "args: waitall of 0");

    /* an intercommunicator between the even and the odd ranks */
    MPI_Comm_split(t->comm, t->rank % 2, t->rank, &local);
    MPI_Intercomm_create(local, 0, t->comm, t->rank % 2 ? 0 : 1, t->tag, &inter);
    req = MLN_REQUEST_NULL;
    if (!expect(t, mln_stripe_isend(&byte, 1, MPI_BYTE, 0, t->tag, inter, &req),
                MLN_ERR_UNSUPPORTED, "args: isend on an intercommunicator"))
        req = MLN_REQUEST_NULL; /* not waited: nobody receives it */
    if (!expect(t, mln_stripe_irecv(&byte, 1, MPI_BYTE, 0, t->tag, inter, &req),
                MLN_ERR_UNSUPPORTED, "args: irecv on an intercommunicator"))
        req = MLN_REQUEST_NULL;
    MPI_Barrier(t->comm);
    MPI_Comm_free(&inter);
    MPI_Comm_free(&local);

    /* 2^31 + 4 bytes in a vector: refused before a byte is read (the source is a mapping of
     * zero pages; nothing is received, so a message that went out would be a failure) */
    zero = t->rank != 0
               ? MAP_FAILED
               : mmap(NULL, span, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (t->rank == 0 && zero == MAP_FAILED)
        fprintf(stderr, "mpi_stripe: args: no 4 GiB mapping here: check skipped\n");
    if (zero != MAP_FAILED) {
        MPI_Type_vector((1 << 29) + 1, 1, 2, MPI_INT, &huge);
        MPI_Type_commit(&huge);
        req = MLN_REQUEST_NULL;
        expect(t, mln_stripe_isend(zero, 1, huge, peer, t->tag + 1, t->comm, &req),
               MLN_ERR_UNSUPPORTED, "args: non-contiguous message of 2^31 + 4 bytes");
        MPI_Type_free(&huge);
        munmap(zero, span);
    }
    /* last: a library that writes through the NULL crashes here */
    expect(t, mln_stripe_isend(&byte, 1, MPI_BYTE, peer, t->tag, t->comm, NULL), MLN_ERR_ARG,
           "args: isend without a request");
}

/* A message over 2^31 bytes (64-bit count), rank 0 to rank 1. */
void t_big(tctx_t *t)
{
    const int64_t n = ((int64_t)1 << 31) + 12345;
    uint8_t *buf;

    if (t->rank > 1)
        return;
    buf = xmalloc(n);
    if (t->rank == 0) {
        fill(buf, n, 0, 0);
        expect(t, mln_stripe_send(buf, n, MPI_BYTE, 1, t->tag, t->comm), MLN_OK, "big: send");
    } else {
        MPI_Status st;
        memset(buf, 0, (size_t)n);
        if (expect(t, mln_stripe_recv(buf, n, MPI_BYTE, 0, t->tag, t->comm, &st), MLN_OK,
                   "big: recv") &&
            check_status(t, &st, 0, t->tag, n, "big"))
            check(t, buf, n, 0, 0, "big");
    }
    free(buf);
}

/* MLN_STRIPE_FAULT=reset:LANE:BYTES on rank 0: its 16 MiB message to rank 1 fails on both sides
 * with MLN_ERR_PEER or MLN_ERR_TIMEOUT within bounded time; later large messages both ways (the
 * mpi lane) arrive whole.  With mute:LANE:BYTES (the lane stops hearing rank 1's host) only the
 * kernel's evidence can tell: rank 0's send (64 MiB, more than the socket buffers hold, so it
 * is still writing) must end within the bound, with MLN_ERR_TIMEOUT from its own lane or
 * MLN_ERR_PEER when the receiver's side of the lane timed out first and said so (which of the
 * two timers fires first is the machine's timing).  The body, lane_fault_run, serves the
 * blackhole sub-test too (mpi_stripe_faults.c): there the network fails the lane. */
void t_fault(tctx_t *t)
{
    const int mute = strncmp(t->opt->fault, "mute:", 5) == 0;

    /* muted: more than the socket buffers can take, so the send is still writing */
    lane_fault_run(t, "fault", (mute ? 64 : 16) * MIB + 5);
}

void lane_fault_run(tctx_t *t, const char *what, int64_t n)
{
    const double bound = t->opt->stripe_timeout + 20.0;
    uint8_t *buf;
    mln_request_t req = MLN_REQUEST_NULL;
    mln_status_t rc;
    double t0;

    if (t->rank <= 1) {
        buf = xmalloc(n);
        memset(buf, 0, (size_t)n);
        if (t->rank == 0) {
            fill(buf, n, 0, 0);
            rc = mln_stripe_isend(buf, n, MPI_BYTE, 1, t->tag, t->comm, &req);
        } else {
            rc = mln_stripe_irecv(buf, n, MPI_BYTE, 0, t->tag, t->comm, &req);
        }
        if (expect(t, rc, MLN_OK, "fault: post")) {
            t0 = MPI_Wtime();
            rc = mln_stripe_wait(&req, MPI_STATUS_IGNORE);
            if (rc != MLN_ERR_PEER && rc != MLN_ERR_TIMEOUT) {
                int whole = t->rank == 1 && rc == MLN_OK;
                for (int64_t i = 0; whole && i < n; i++)
                    whole = buf[i] == pat(0, 0, (uint64_t)i);
                fail(t, "%s: the %s of the message on the failed lane completed %s%s", what,
                     t->rank ? "receive" : "send", mln_status_str(rc),
                     t->rank ? (whole ? " (data whole)" : " (data WRONG)") : "");
            } else if (MPI_Wtime() - t0 > bound) {
                fail(t, "%s: the error took %.1f s (bound %.0f s)", what, MPI_Wtime() - t0, bound);
            } else {
                fprintf(stderr, "mpi_stripe: rank %d: %s: %s after %.2f s, as expected\n", t->rank,
                        what, mln_status_str(rc), MPI_Wtime() - t0);
            }
        }
        free(buf);
    }
    MPI_Barrier(t->comm);
    if (t->rank > 1)
        return;
    t0 = MPI_Wtime();
    for (int round = 1; round <= 2; round++) { /* 4 MiB both ways at once, then + 1 byte */
        const int64_t m = 4 * MIB + (round - 1);
        uint8_t *out = xmalloc(m), *in = xmalloc(m);
        mln_request_t reqs[2] = {MLN_REQUEST_NULL, MLN_REQUEST_NULL};
        MPI_Status st[2];
        const int peer = 1 - t->rank, tag = t->tag + round;

        fill(out, m, t->rank, round);
        if (expect(t, mln_stripe_irecv(in, m, MPI_BYTE, peer, tag, t->comm, &reqs[0]), MLN_OK,
                   "fault: later irecv") &&
            expect(t, mln_stripe_isend(out, m, MPI_BYTE, peer, tag, t->comm, &reqs[1]), MLN_OK,
                   "fault: later isend") &&
            expect(t, mln_stripe_waitall(2, reqs, st), MLN_OK, "fault: 4 MiB after the fault") &&
            check_status(t, &st[0], peer, tag, m, "fault: after the fault"))
            check(t, in, m, peer, round, "fault: after the fault");
        free(out);
        free(in);
    }
    if (MPI_Wtime() - t0 > bound)
        fail(t, "%s: the messages after the fault took %.1f s", what, MPI_Wtime() - t0);
    else if (t->rank == 0)
        fprintf(stderr, "mpi_stripe: %s: 2 x 4 MiB both ways after it, whole, in %.2f s\n", what,
                MPI_Wtime() - t0);
}
