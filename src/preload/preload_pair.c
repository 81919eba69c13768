/*
 * preload_pair.c - MPI_Isendrecv and MPI_Isendrecv_replace (MPI-4) of an unmodified program.
 *
 * A receive that may meet a striped header must go through the engine, so a send-receive whose
 * either side needs the layer is the layer's receive and send (mln_pl_Irecv, mln_pl_Isend) held
 * by one generalized request, complete once both are; while neither does and the engine is
 * idle, it is MPI's own call.  Its status is the receive's.
 */
#include "preload_int.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#if MLN_PL_MPI4

void mln_pl_pairs_progress(void)
{
    for (mln_pl_req_t **pp = &mln_pl.pairs; *pp;) {
        mln_pl_req_t *r = *pp;
        MPI_Status sent;
        int err;

        /* the receive's status is the operation's: kept in r->status */
        if (r->pair[0] != MPI_REQUEST_NULL && mln_pl_test_quiet(&r->pair[0], &r->status))
            r->error = r->error != MPI_SUCCESS ? r->error : r->status.MPI_ERROR;
        if (r->pair[1] != MPI_REQUEST_NULL && mln_pl_test_quiet(&r->pair[1], &sent))
            r->error = r->error != MPI_SUCCESS ? r->error : sent.MPI_ERROR;
        if (r->pair[0] != MPI_REQUEST_NULL || r->pair[1] != MPI_REQUEST_NULL) {
            pp = &r->next_run;
            continue;
        }
        *pp = r->next_run;
        err = r->error;
        mln_pl_req_done(r,
                        err == MPI_ERR_TRUNCATE ? MLN_ERR_TRUNCATE
                        : err == MPI_SUCCESS    ? MLN_OK
                                                : MLN_ERR_PEER,
                        &r->status);
    }
}

static int pair_start(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, int dest,
                      int sendtag, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype,
                      int source, int recvtag, MPI_Comm comm, void *copy, MPI_Request *request)
{
    mln_pl_req_t *r = mln_pl_req_new(MLN_PL_PAIR);
    int rc;

    if (r == NULL) {
        free(copy);
        return mln_pl_error(comm, MLN_ERR_NOMEM);
    }
    r->comm = comm;
    r->copy = copy;
    r->pair[0] = r->pair[1] = MPI_REQUEST_NULL;
    rc = mln_pl_Irecv(recvbuf, recvcount, recvtype, source, recvtag, comm, &r->pair[0]);
    if (rc == MPI_SUCCESS)
        rc = mln_pl_Isend(sendbuf, sendcount, sendtype, dest, sendtag, comm, &r->pair[1]);
    if (rc == MPI_SUCCESS)
        rc = mln_pl_req_greq(r);
    if (rc != MPI_SUCCESS) { /* what was posted completes; nobody hears of it */
        for (int k = 0; k < 2; k++)
            if (r->pair[k] != MPI_REQUEST_NULL) {
                mln_pl_Cancel(&r->pair[k]);
                mln_pl_Wait(&r->pair[k], MPI_STATUS_IGNORE);
            }
        free(copy);
        free(r);
        return rc;
    }
    r->handle = r->greq;
    mln_pl_req_map_add(r);
    r->next_run = mln_pl.pairs;
    mln_pl.pairs = r;
    *request = r->handle;
    return MPI_SUCCESS;
}

static int plain_ok(MPI_Comm comm, int dest, MPI_Count count, MPI_Datatype dtype, int source)
{
    return !MLN_PL_GRID(comm) && !mln_pl_send_engine(comm, dest, count, dtype) &&
           !mln_pl_recv_engine(comm, source) && !mln_stripe_busy() && !mln_pl.running &&
           !mln_pl.pairs;
}

int mln_pl_Isendrecv(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, int dest,
                     int sendtag, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype,
                     int source, int recvtag, MPI_Comm comm, MPI_Request *request)
{
    int rc;

    if (!mln_pl_p2p)
        goto plain;
    MLN_PL_LOCK();
    if (plain_ok(comm, dest, sendcount, sendtype, source)) {
        MLN_PL_UNLOCK();
        goto plain;
    }
    rc = pair_start(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype,
                    source, recvtag, comm, NULL, request);
    MLN_PL_UNLOCK();
    return rc;
plain:
#if MLN_PL_BIGCOUNT
    if (sendcount > INT_MAX || recvcount > INT_MAX)
        return mln_pmpi.Isendrecv_c(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount,
                                    recvtype, source, recvtag, comm, request);
#endif
    return mln_pmpi.Isendrecv(sendbuf, (int)sendcount, sendtype, dest, sendtag, recvbuf,
                              (int)recvcount, recvtype, source, recvtag, comm, request);
}

int mln_pl_Isendrecv_replace(void *buf, MPI_Count count, MPI_Datatype datatype, int dest,
                             int sendtag, int source, int recvtag, MPI_Comm comm,
                             MPI_Request *request)
{
    int size = 0, pos = 0, rc;
    void *copy;

    if (!mln_pl_p2p)
        goto plain;
    MLN_PL_LOCK();
    if (plain_ok(comm, dest, count, datatype, source)) {
        MLN_PL_UNLOCK();
        goto plain;
    }
    /* the outgoing data is packed aside; the buffer then receives while the copy goes out */
    if (count > INT_MAX || MPI_Pack_size((int)count, datatype, comm, &size) != MPI_SUCCESS ||
        (copy = malloc(size > 0 ? (size_t)size : 1)) == NULL) {
        MLN_PL_UNLOCK();
        return mln_pl_error(comm, MLN_ERR_NOMEM);
    }
    rc = MPI_Pack(buf, (int)count, datatype, copy, size, &pos, comm);
    if (rc == MPI_SUCCESS)
        rc = pair_start(copy, pos, MPI_PACKED, dest, sendtag, buf, count, datatype, source, recvtag,
                        comm, copy, request);
    else
        free(copy);
    MLN_PL_UNLOCK();
    return rc;
plain:
#if MLN_PL_BIGCOUNT
    if (count > INT_MAX)
        return mln_pmpi.Isendrecv_replace_c(buf, count, datatype, dest, sendtag, source, recvtag,
                                            comm, request);
#endif
    return mln_pmpi.Isendrecv_replace(buf, (int)count, datatype, dest, sendtag, source, recvtag,
                                      comm, request);
}

#else /* an MPI without MPI_Isendrecv: nothing to do */

void mln_pl_pairs_progress(void)
{
}

#endif
