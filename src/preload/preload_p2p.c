/*
 * preload_p2p.c - point-to-point calls of an unmodified program (docs/PRELOAD.md).
 *
 * A send goes through the striping engine when its peer is remote and it is larger than
 * MLN_STRIPE_THRESHOLD (striped) or exactly 64 bytes (an inline header: the engine's 64-byte
 * wire messages from remote peers are always headers); every other send is MPI's own call.
 * A receive (or probe) goes through the engine when its source may be remote (a remote rank,
 * or MPI_ANY_SOURCE on a communicator that spans sites), since what arrives may be a header.
 * Sends and receives both post at once, in the program's order, so MPI's matching order and
 * the non-overtaking rule hold across plain and striped messages.
 *
 * Blocking calls: MPI's own call while the engine is idle; while it has work (a striped message
 * of this process in flight, a receive that may yet meet a header), the nonblocking form and a
 * wait that moves the engine too, so that no peer waits for ever for our CTS or our chunks.
 */
#include "preload_int.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static void running_add(mln_pl_req_t *r)
{
    r->next_run = mln_pl.running;
    mln_pl.running = r;
}

/* A buffered send: the data is copied (packed) at once, and the copy travels on its own. */
static mln_status_t bsend_detached(const mln_pl_req_t *r)
{
    mln_pl_req_t *d;
    int size = 0, pos = 0;
    mln_status_t st;

    if (r->count > INT_MAX || MPI_Pack_size((int)r->count, r->dtype, r->comm, &size) != MPI_SUCCESS)
        return MLN_ERR_UNSUPPORTED;
    d = mln_pl_req_new(MLN_PL_BSEND);
    if (d == NULL || (d->copy = malloc(size > 0 ? (size_t)size : 1)) == NULL) {
        free(d);
        return MLN_ERR_NOMEM;
    }
    d->detached = 1;
    d->comm = r->comm;
    if (MPI_Pack(r->buf, (int)r->count, r->dtype, d->copy, size, &pos, r->comm) != MPI_SUCCESS) {
        free(d->copy);
        free(d);
        return MLN_ERR_MPI;
    }
    st = mln_stripe_isend_mode(d->copy, pos, MPI_PACKED, r->peer, r->tag, r->comm, 0, &d->eng);
    if (st != MLN_OK) {
        free(d->copy);
        free(d);
        return st;
    }
    running_add(d);
    return MLN_OK;
}

static mln_status_t recv_begin(mln_pl_req_t *r)
{
    mln_pl_comm_t *info = mln_pl_comm(r->comm);
    mln_pl_stash_t *e = info ? mln_pl_stash_take(info, r->peer, r->tag) : NULL;

    if (e != NULL)
        return mln_pl_recv_stashed(r, e);
    return mln_stripe_irecv(r->buf, r->count, r->dtype, r->peer, r->tag, r->comm, &r->eng);
}

int mln_pl_start(mln_pl_req_t *r)
{
    mln_status_t st;
    int rc;

    r->done = 0;
    r->error = MPI_SUCCESS;
    memset(&r->status, 0, sizeof(r->status));
    r->eng = MLN_REQUEST_NULL;
    rc = mln_pl_req_greq(r);
    if (rc != MPI_SUCCESS)
        return rc;
    if (r->persistent)
        r->active = 1;
    if (r->grid) { /* the grid world (preload_grid.c) */
        st = mln_pl_grid_begin(r);
        if (st == MLN_OK)
            return MPI_SUCCESS;
        mln_pl_req_done(r, st, NULL);
        return mln_pl_error(r->comm, st);
    }
    switch (r->op) {
    case MLN_PL_RECV:
        st = recv_begin(r);
        break;
    case MLN_PL_BSEND:
        st = bsend_detached(r);
        if (st == MLN_OK) { /* a buffered send is complete once its data is copied */
            mln_pl_req_done(r, MLN_OK, NULL);
            return MPI_SUCCESS;
        }
        break;
    default:
        st = mln_stripe_isend_mode(r->buf, r->count, r->dtype, r->peer, r->tag, r->comm,
                                   r->op == MLN_PL_SSEND, &r->eng);
        break;
    }
    if (st != MLN_OK) {
        mln_pl_req_done(r, st, NULL);
        return mln_pl_error(r->comm, st);
    }
    if (r->eng != MLN_REQUEST_NULL)
        running_add(r);
    return MPI_SUCCESS;
}

int mln_pl_req_make(mln_pl_op_t op, const void *buf, MPI_Count count, MPI_Datatype dtype, int peer,
                    int tag, MPI_Comm comm, int persistent, MPI_Request *request)
{
    mln_pl_req_t *r = mln_pl_req_new(op);
    int rc;

    if (r == NULL)
        return mln_pl_error(comm, MLN_ERR_NOMEM);
    r->grid = MLN_PL_GRID(comm);
    r->buf = (void *)buf;
    r->count = count;
    r->dtype = dtype;
    r->peer = peer;
    r->tag = tag;
    r->comm = comm;
    r->persistent = persistent;
    if (persistent) { /* a real persistent request of MPI, which the layer starts its own way */
        rc = op == MLN_PL_RECV ? mln_pmpi.Recv_init(NULL, 0, MPI_BYTE, MPI_PROC_NULL, 0,
                                                    MPI_COMM_SELF, &r->handle)
                               : mln_pmpi.Send_init(NULL, 0, MPI_BYTE, MPI_PROC_NULL, 0,
                                                    MPI_COMM_SELF, &r->handle);
    } else {
        rc = mln_pl_start(r);
        r->handle = r->greq;
    }
    if (rc != MPI_SUCCESS && r->handle == MPI_REQUEST_NULL) {
        free(r);
        return rc;
    }
    mln_pl_req_map_add(r);
    *request = r->handle;
    return rc;
}

/* A blocking operation of the layer: started, then waited for (MPI_Wait's own path). */
int mln_pl_blocking(mln_pl_op_t op, void *buf, MPI_Count count, MPI_Datatype dtype, int peer,
                    int tag, MPI_Comm comm, MPI_Status *status)
{
    MPI_Request req = MPI_REQUEST_NULL;
    int rc = mln_pl_req_make(op, buf, count, dtype, peer, tag, comm, 0, &req);

    if (req == MPI_REQUEST_NULL)
        return rc;
    return mln_pl_Wait(&req, status); /* errors: reported (and handled) once, by the wait */
}

/* A plain operation posted by MPI's nonblocking call, waited for while moving the engine. */
static int plain_poll(int rc, MPI_Request *req, MPI_Status *status)
{
    if (rc != MPI_SUCCESS)
        return rc;
    return mln_pl_Wait(req, status);
}

/* ---- sends ------------------------------------------------------------------------------- */

#define MLN_PL_SEND_BODY(OP, FN, IFN)                                                              \
    do {                                                                                           \
        int mln_rc, mln_engine;                                                                    \
        MPI_Request mln_req;                                                                       \
        if (!mln_pl_p2p)                                                                           \
            return MLN_PL_REAL(FN, count, buf, count, datatype, dest, tag, comm);                  \
        MLN_PL_LOCK();                                                                             \
        mln_engine = !MLN_PL_GRID(comm) && mln_pl_send_engine(comm, dest, count, datatype);        \
        if (MLN_PL_GRID(comm)) {                                                                   \
            mln_rc = mln_pl_grid_send(OP, buf, count, datatype, dest, tag, comm, 0, NULL);         \
        } else if (mln_engine) {                                                                   \
            mln_rc = mln_pl_blocking(OP, (void *)buf, count, datatype, dest, tag, comm,            \
                                     MPI_STATUS_IGNORE);                                           \
        } else if (mln_stripe_busy() || mln_pl.running) {                                          \
            mln_rc = MLN_PL_REAL(IFN, count, buf, count, datatype, dest, tag, comm, &mln_req);     \
            mln_rc = plain_poll(mln_rc, &mln_req, MPI_STATUS_IGNORE);                              \
        } else {                                                                                   \
            MLN_PL_UNLOCK();                                                                       \
            return MLN_PL_REAL(FN, count, buf, count, datatype, dest, tag, comm);                  \
        }                                                                                          \
        MLN_PL_UNLOCK();                                                                           \
        return mln_rc;                                                                             \
    } while (0)

#define MLN_PL_ISEND_BODY(OP, IFN)                                                                 \
    do {                                                                                           \
        int mln_rc;                                                                                \
        if (!mln_pl_p2p)                                                                           \
            return MLN_PL_REAL(IFN, count, buf, count, datatype, dest, tag, comm, request);        \
        MLN_PL_LOCK();                                                                             \
        if (MLN_PL_GRID(comm))                                                                     \
            mln_rc = mln_pl_grid_send(OP, buf, count, datatype, dest, tag, comm, 1, request);      \
        else if (mln_pl_send_engine(comm, dest, count, datatype))                                  \
            mln_rc = mln_pl_req_make(OP, buf, count, datatype, dest, tag, comm, 0, request);       \
        else                                                                                       \
            mln_rc = MLN_PL_REAL(IFN, count, buf, count, datatype, dest, tag, comm, request);      \
        MLN_PL_UNLOCK();                                                                           \
        return mln_rc;                                                                             \
    } while (0)

#define MLN_PL_INIT_BODY(OP, IFN)                                                                  \
    do {                                                                                           \
        int mln_rc;                                                                                \
        if (!mln_pl_p2p)                                                                           \
            return MLN_PL_REAL(IFN, count, buf, count, datatype, dest, tag, comm, request);        \
        MLN_PL_LOCK();                                                                             \
        if (MLN_PL_GRID(comm))                                                                     \
            mln_rc = mln_pl_grid_send(OP, buf, count, datatype, dest, tag, comm, 2, request);      \
        else if (mln_pl_send_engine(comm, dest, count, datatype))                                  \
            mln_rc = mln_pl_req_make(OP, buf, count, datatype, dest, tag, comm, 1, request);       \
        else                                                                                       \
            mln_rc = MLN_PL_REAL(IFN, count, buf, count, datatype, dest, tag, comm, request);      \
        MLN_PL_UNLOCK();                                                                           \
        return mln_rc;                                                                             \
    } while (0)

int mln_pl_Send(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag,
                MPI_Comm comm)
{
    MLN_PL_SEND_BODY(MLN_PL_SEND, Send, Isend);
}

int mln_pl_Ssend(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag,
                 MPI_Comm comm)
{
    MLN_PL_SEND_BODY(MLN_PL_SSEND, Ssend, Issend);
}

int mln_pl_Bsend(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag,
                 MPI_Comm comm)
{
    MLN_PL_SEND_BODY(MLN_PL_BSEND, Bsend, Ibsend);
}

int mln_pl_Rsend(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag,
                 MPI_Comm comm)
{
    MLN_PL_SEND_BODY(MLN_PL_RSEND, Rsend, Irsend);
}

int mln_pl_Isend(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag,
                 MPI_Comm comm, MPI_Request *request)
{
    MLN_PL_ISEND_BODY(MLN_PL_SEND, Isend);
}

int mln_pl_Issend(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag,
                  MPI_Comm comm, MPI_Request *request)
{
    MLN_PL_ISEND_BODY(MLN_PL_SSEND, Issend);
}

int mln_pl_Ibsend(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag,
                  MPI_Comm comm, MPI_Request *request)
{
    MLN_PL_ISEND_BODY(MLN_PL_BSEND, Ibsend);
}

int mln_pl_Irsend(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag,
                  MPI_Comm comm, MPI_Request *request)
{
    MLN_PL_ISEND_BODY(MLN_PL_RSEND, Irsend);
}

int mln_pl_Send_init(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag,
                     MPI_Comm comm, MPI_Request *request)
{
    MLN_PL_INIT_BODY(MLN_PL_SEND, Send_init);
}

int mln_pl_Ssend_init(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag,
                      MPI_Comm comm, MPI_Request *request)
{
    MLN_PL_INIT_BODY(MLN_PL_SSEND, Ssend_init);
}

int mln_pl_Bsend_init(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag,
                      MPI_Comm comm, MPI_Request *request)
{
    MLN_PL_INIT_BODY(MLN_PL_BSEND, Bsend_init);
}

int mln_pl_Rsend_init(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag,
                      MPI_Comm comm, MPI_Request *request)
{
    MLN_PL_INIT_BODY(MLN_PL_RSEND, Rsend_init);
}

/* ---- receives ---------------------------------------------------------------------------- */

int mln_pl_Recv(void *buf, MPI_Count count, MPI_Datatype datatype, int source, int tag,
                MPI_Comm comm, MPI_Status *status)
{
    MPI_Request req;
    int rc;

    if (!mln_pl_p2p)
        return MLN_PL_REAL(Recv, count, buf, count, datatype, source, tag, comm, status);
    MLN_PL_LOCK();
    if (MLN_PL_GRID(comm)) {
        rc = mln_pl_grid_recv(buf, count, datatype, source, tag, comm, 0, NULL, status);
    } else if (mln_pl_recv_engine(comm, source)) {
        rc = mln_pl_blocking(MLN_PL_RECV, buf, count, datatype, source, tag, comm, status);
    } else if (mln_stripe_busy() || mln_pl.running) {
        rc = MLN_PL_REAL(Irecv, count, buf, count, datatype, source, tag, comm, &req);
        rc = plain_poll(rc, &req, status);
    } else {
        MLN_PL_UNLOCK();
        return MLN_PL_REAL(Recv, count, buf, count, datatype, source, tag, comm, status);
    }
    MLN_PL_UNLOCK();
    return rc;
}

int mln_pl_Irecv(void *buf, MPI_Count count, MPI_Datatype datatype, int source, int tag,
                 MPI_Comm comm, MPI_Request *request)
{
    int rc;

    if (!mln_pl_p2p)
        return MLN_PL_REAL(Irecv, count, buf, count, datatype, source, tag, comm, request);
    MLN_PL_LOCK();
    if (MLN_PL_GRID(comm))
        rc = mln_pl_grid_recv(buf, count, datatype, source, tag, comm, 1, request, NULL);
    else if (mln_pl_recv_engine(comm, source))
        rc = mln_pl_req_make(MLN_PL_RECV, buf, count, datatype, source, tag, comm, 0, request);
    else
        rc = MLN_PL_REAL(Irecv, count, buf, count, datatype, source, tag, comm, request);
    MLN_PL_UNLOCK();
    return rc;
}

int mln_pl_Recv_init(void *buf, MPI_Count count, MPI_Datatype datatype, int source, int tag,
                     MPI_Comm comm, MPI_Request *request)
{
    int rc;

    if (!mln_pl_p2p)
        return MLN_PL_REAL(Recv_init, count, buf, count, datatype, source, tag, comm, request);
    MLN_PL_LOCK();
    if (MLN_PL_GRID(comm))
        rc = mln_pl_grid_recv(buf, count, datatype, source, tag, comm, 2, request, NULL);
    else if (mln_pl_recv_engine(comm, source))
        rc = mln_pl_req_make(MLN_PL_RECV, buf, count, datatype, source, tag, comm, 1, request);
    else
        rc = MLN_PL_REAL(Recv_init, count, buf, count, datatype, source, tag, comm, request);
    MLN_PL_UNLOCK();
    return rc;
}

/* ---- send and receive together ----------------------------------------------------------- */

int mln_pl_Sendrecv(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, int dest,
                    int sendtag, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype,
                    int source, int recvtag, MPI_Comm comm, MPI_Status *status)
{
    MPI_Request reqs[2];
    MPI_Status sts[2];
    int rc;

    if (!mln_pl_p2p ||
        (!MLN_PL_GRID(comm) && !mln_pl_send_engine(comm, dest, sendcount, sendtype) &&
         !mln_pl_recv_engine(comm, source) && !mln_stripe_busy() && !mln_pl.running)) {
#if MLN_PL_BIGCOUNT
        if (sendcount > INT_MAX || recvcount > INT_MAX)
            return mln_pmpi.Sendrecv_c(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf,
                                       recvcount, recvtype, source, recvtag, comm, status);
#endif
        return mln_pmpi.Sendrecv(sendbuf, (int)sendcount, sendtype, dest, sendtag, recvbuf,
                                 (int)recvcount, recvtype, source, recvtag, comm, status);
    }
    rc = mln_pl_Irecv(recvbuf, recvcount, recvtype, source, recvtag, comm, &reqs[0]);
    if (rc != MPI_SUCCESS)
        return rc;
    rc = mln_pl_Isend(sendbuf, sendcount, sendtype, dest, sendtag, comm, &reqs[1]);
    if (rc != MPI_SUCCESS) {
        mln_pl_Cancel(&reqs[0]);
        mln_pl_Wait(&reqs[0], MPI_STATUS_IGNORE);
        return rc;
    }
    rc = mln_pl_Waitall(2, reqs, sts);
    if (status != MPI_STATUS_IGNORE)
        *status = sts[0];
    if (rc == MPI_ERR_IN_STATUS)
        rc = sts[0].MPI_ERROR != MPI_SUCCESS ? sts[0].MPI_ERROR : sts[1].MPI_ERROR;
    return rc;
}

int mln_pl_Sendrecv_replace(void *buf, MPI_Count count, MPI_Datatype datatype, int dest,
                            int sendtag, int source, int recvtag, MPI_Comm comm, MPI_Status *status)
{
    int size = 0, pos = 0, rc;
    void *copy;

    if (!mln_pl_p2p || (!MLN_PL_GRID(comm) && !mln_pl_send_engine(comm, dest, count, datatype) &&
                        !mln_pl_recv_engine(comm, source) && !mln_stripe_busy() && !mln_pl.running))
        return MLN_PL_REAL(Sendrecv_replace, count, buf, count, datatype, dest, sendtag, source,
                           recvtag, comm, status);
    /* the outgoing data is packed aside, then the buffer receives while the copy goes out */
    if (count > INT_MAX || MPI_Pack_size((int)count, datatype, comm, &size) != MPI_SUCCESS)
        return mln_pl_error(comm, MLN_ERR_UNSUPPORTED);
    copy = malloc(size > 0 ? (size_t)size : 1);
    if (copy == NULL)
        return mln_pl_error(comm, MLN_ERR_NOMEM);
    rc = MPI_Pack(buf, (int)count, datatype, copy, size, &pos, comm);
    if (rc == MPI_SUCCESS)
        rc = mln_pl_Sendrecv(copy, pos, MPI_PACKED, dest, sendtag, buf, count, datatype, source,
                             recvtag, comm, status);
    free(copy);
    return rc;
}
