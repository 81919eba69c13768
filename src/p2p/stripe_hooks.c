/*
 * stripe_hooks.c - the engine's answers to the interposition layer (stripe_hooks.h).
 */
#include "stripe_hooks.h"

#include "stripe_int.h"

#include <string.h>

int mln_stripe_busy(void)
{
    mln_stripe_t *s = mln_stripe_engine();

    return s != NULL && (s->active != NULL || mln_mpilane_busy(s));
}

int mln_stripe_poll(void)
{
    mln_stripe_t *s = mln_stripe_engine();
    int moved;

    if (s == NULL)
        return 0;
    mln_stripe_lock(s);
    moved = mln_stripe_progress(s, 0);
    mln_stripe_unlock(s);
    return moved;
}

int mln_stripe_remote(int world_rank)
{
    const mln_stripe_t *s = mln_stripe_engine();

    if (s == NULL || world_rank < 0 || world_rank >= s->wsize)
        return 0;
    return mln_stripe_peer_remote(s, world_rank);
}

int mln_stripe_comm_remote(MPI_Comm comm, int rank)
{
    const mln_stripe_t *s = mln_stripe_engine();

    return s != NULL && mln_stripe_rank_remote(s, comm, rank);
}

uint64_t mln_stripe_threshold(void)
{
    const mln_stripe_t *s = mln_stripe_engine();

    return s != NULL ? s->cfg->stripe_threshold : UINT64_MAX;
}

int mln_stripe_header_total(const void *msg64, uint64_t *total)
{
    return mln_stripe_hdr_valid(msg64, total);
}

mln_status_t mln_stripe_irecv_taken(void *buf, int64_t count, MPI_Datatype datatype, int source,
                                    int tag, MPI_Comm comm, const void *msg64,
                                    mln_request_t *request)
{
    mln_stripe_t *s = mln_stripe_engine();
    mln_req_t *r = NULL;
    mln_status_t st;

    if (request == NULL || msg64 == NULL)
        return MLN_ERR_ARG;
    mln_stripe_lock(s);
    st = mln_stripe_req_new(s, buf, count, datatype, source, tag, comm, 0, &r);
    if (st == MLN_OK) {
        mln_stripe_recv_start_taken(s, r, source, tag, msg64);
        *request = r;
    }
    mln_stripe_unlock(s);
    return st;
}

mln_status_t mln_stripe_cancel(mln_request_t *request, int *cancelled)
{
    mln_stripe_t *s = mln_stripe_engine();

    if (request == NULL || cancelled == NULL)
        return MLN_ERR_ARG;
    *cancelled = 0;
    if (*request == MLN_REQUEST_NULL || s == NULL || (*request)->owner != s)
        return MLN_OK;
    mln_stripe_lock(s);
    *cancelled = mln_stripe_recv_cancel(s, *request);
    mln_stripe_unlock(s);
    return MLN_OK;
}

int mln_stripe_done(mln_request_t request)
{
    return request == MLN_REQUEST_NULL || request->state == MLN_REQ_DONE ||
           request->owner != mln_stripe_engine();
}

void mln_stripe_counters(mln_stripe_counters_t *out)
{
    const mln_stripe_t *s = mln_stripe_engine();

    memset(out, 0, sizeof(*out));
    if (s == NULL)
        return;
    out->send_msgs = s->striped[1][0];
    out->send_bytes = s->striped[1][1];
    out->recv_msgs = s->striped[0][0];
    out->recv_bytes = s->striped[0][1];
}
