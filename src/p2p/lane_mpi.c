/*
 * lane_mpi.c - chunks over plain MPI on the control communicator: the `mpi` lanes (the
 * baseline, and the fallback when tcp lanes cannot be used), and the transport under the
 * `helper` lanes (lane_helper.c), which only choose other routes for the same chunks.
 *
 * The receiver pre-posts one MPI_Irecv per chunk, in place at the chunk's offset, with the
 * tag tag_base + index from its CTS (unique at the receiver, so a chunk may arrive from any
 * rank: the sender itself or a helper).  The sender keeps up to MLN_STRIPE_LANES chunks in
 * flight per peer on the `mpi` lanes, and hands each chunk to the first route with room.
 *
 * Cost: T = 2 alpha + n / b_mpi; over one MPI connection there is no striping gain, which is
 * exactly what makes this the baseline: the protocol's own overhead, measured alone.
 */
#include "stripe_int.h"

#include <stdlib.h>
#include <string.h>

typedef struct mpi_op {
    mln_req_t *req; /* NULL once its request was freed (the op still completes) */
    int peer;
    int route;
    uint64_t len;
    MPI_Request mreq[2]; /* forward header (helper routes), chunk */
    mln_fwd_hdr_t fwd;
    struct mpi_op *next;
} mpi_op_t;

struct mln_mpilane_state {
    mpi_op_t *ops;
};

/* Chunks in flight to `peer` on `route`. */
static int route_load(const mln_stripe_t *s, int peer, int route)
{
    int n = 0;

    for (const mpi_op_t *o = s->mpilane->ops; o; o = o->next)
        if (o->peer == peer && o->route == route)
            n++;
    return n;
}

mln_status_t mln_mpilane_post(mln_stripe_t *s, mln_req_t *r, int route, int via)
{
    mln_status_t st = MLN_OK;
    uint64_t index = r->next_off / r->chunk;
    uint64_t len = mln_stripe_chunk_len(r, index);
    mpi_op_t *o = calloc(1, sizeof(*o));

    if (o == NULL)
        return MLN_ERR_NOMEM;
    o->req = r;
    o->peer = r->peer_world;
    o->route = route;
    o->len = len;
    o->mreq[0] = o->mreq[1] = MPI_REQUEST_NULL;
    if (via >= 0) { /* through a helper: where to, then the bytes */
        o->fwd =
            (mln_fwd_hdr_t){.dest = r->peer_world, .tag = r->tag_base + (int)index, .len = len};
        MLN_MPI_CHECK(MPI_Isend(&o->fwd, (int)sizeof(o->fwd), MPI_BYTE, via, MLN_TAG_FWD_HDR,
                                s->ctrl, &o->mreq[0]),
                      st, err);
        MLN_MPI_CHECK(MPI_Isend(r->buf + r->next_off, (int)len, MPI_BYTE, via, MLN_TAG_FWD_DATA,
                                s->ctrl, &o->mreq[1]),
                      st, err);
    } else {
        MLN_MPI_CHECK(MPI_Isend(r->buf + r->next_off, (int)len, MPI_BYTE, r->peer_world,
                                r->tag_base + (int)index, s->ctrl, &o->mreq[1]),
                      st, err);
    }
    r->next_off += len;
    o->next = s->mpilane->ops;
    s->mpilane->ops = o;
    return MLN_OK;
err:
    free(o);
    return st;
}

mln_status_t mln_mpilane_recv_post(mln_stripe_t *s, mln_req_t *r)
{
    mln_status_t st = MLN_OK;
    int from = r->kind == MLN_LANE_HELPER ? MPI_ANY_SOURCE : r->peer_world;

    r->chunk_reqs = malloc((size_t)(r->nchunks ? r->nchunks : 1) * sizeof(MPI_Request));
    if (r->chunk_reqs == NULL)
        return MLN_ERR_NOMEM;
    for (uint64_t i = 0; i < r->nchunks; i++)
        r->chunk_reqs[i] = MPI_REQUEST_NULL;
    for (uint64_t i = 0; i < r->nchunks; i++)
        MLN_MPI_CHECK(MPI_Irecv(r->buf + i * r->chunk, (int)mln_stripe_chunk_len(r, i), MPI_BYTE,
                                from, r->tag_base + (int)i, s->ctrl, &r->chunk_reqs[i]),
                      st, out);
    r->chunks_left = r->nchunks;
out:
    return st;
}

/* Chunk receives of r that completed: their bytes count (a cancelled one counts nothing). */
static int recv_test(mln_stripe_t *s, mln_req_t *r)
{
    int moved = 0, nidx = 0;

    for (uint64_t base = 0; base < r->nchunks && r->chunks_left > 0; base += 1024) {
        const int n = r->nchunks - base < 1024 ? (int)(r->nchunks - base) : 1024;
        int idx[1024];
        MPI_Status sts[1024];
        uint64_t bytes = 0;
        int rc = MPI_Testsome(n, r->chunk_reqs + base, &nidx, idx, sts);

        if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) {
            mln_stripe_req_fail(s, r, MLN_ERR_MPI);
            return 1;
        }
        if (nidx == MPI_UNDEFINED || nidx == 0)
            continue;
        moved = 1;
        for (int k = 0; k < nidx; k++) {
            int cancelled = 0;
            if (rc == MPI_ERR_IN_STATUS && sts[k].MPI_ERROR != MPI_SUCCESS) {
                mln_stripe_req_fail(s, r, MLN_ERR_MPI);
                continue;
            }
            MPI_Test_cancelled(&sts[k], &cancelled);
            if (!cancelled)
                bytes += mln_stripe_chunk_len(r, base + (uint64_t)idx[k]);
        }
        r->chunks_left -= (uint64_t)nidx;
        mln_stripe_req_progress(s, r, bytes);
        if (r->state == MLN_REQ_DONE)
            break;
    }
    return moved;
}

int mln_mpilane_progress(mln_stripe_t *s)
{
    int moved = 0, flag = 0;
    mpi_op_t **po = &s->mpilane->ops;
    mln_req_t *r, *next;

    while (*po) { /* sends */
        mpi_op_t *o = *po;
        if (MPI_Testall(2, o->mreq, &flag, MPI_STATUSES_IGNORE) != MPI_SUCCESS) {
            if (o->req)
                mln_stripe_req_fail(s, o->req, MLN_ERR_MPI);
            flag = 1; /* completed, in error: MPI holds no reference any more */
        }
        if (!flag) {
            po = &o->next;
            continue;
        }
        *po = o->next;
        moved = 1;
        if (o->req)
            mln_stripe_req_progress(s, o->req, o->len);
        free(o);
    }
    for (r = s->active; r; r = next) { /* receives, in DATA or winding down in ABORT */
        next = r->next;
        if (!r->is_send && r->kind != MLN_LANE_TCP && r->chunks_left > 0 &&
            (r->state == MLN_REQ_DATA || r->state == MLN_REQ_ABORT))
            moved |= recv_test(s, r);
    }
    return moved;
}

/* A send failed: no more chunks go out (send_fill is no longer called); the receiver gets
 * chunks [0, posted), which complete on their own. */
uint64_t mln_mpilane_send_abort(mln_stripe_t *s, mln_req_t *r)
{
    (void)s;
    return r->next_off >= r->accept ? r->nchunks : r->next_off / r->chunk;
}

/*
 * Quiet when no chunk operation of r uses its buffer.  A send: its chunks in flight have
 * completed.  A receive: once the sender said how many chunks it posted (SABORT/SACK), the
 * receives of the others are cancelled (no message can match them: nobody sends those tags);
 * the rest land.  Only then are its tags retired (stripe_ctl.c).
 */
int mln_mpilane_quiet(mln_stripe_t *s, mln_req_t *r)
{
    if (r->is_send) {
        for (const mpi_op_t *o = s->mpilane->ops; o; o = o->next)
            if (o->req == r)
                return 0;
        return 1;
    }
    if (!r->peer_count_known)
        return 0;
    if (r->peer_count != MLN_COUNT_UNKNOWN && r->chunk_reqs != NULL) {
        for (uint64_t i = r->peer_count; i < r->nchunks; i++)
            if (r->chunk_reqs[i] != MPI_REQUEST_NULL)
                MPI_Cancel(&r->chunk_reqs[i]);
        r->peer_count = MLN_COUNT_UNKNOWN; /* cancelled once */
    }
    if (r->chunks_left > 0)
        recv_test(s, r);
    return r->chunks_left == 0;
}

/* The request goes away (mln_finalize, or its completion): no chunk operation may keep
 * pointing into it.  Receives still posted are cancelled and waited for; sends still in flight
 * are left to MPI (only mln_finalize with requests never waited for gets here with any). */
void mln_mpilane_req_free(mln_stripe_t *s, mln_req_t *r)
{
    if (s->mpilane == NULL)
        return;
    for (mpi_op_t *o = s->mpilane->ops; o; o = o->next)
        if (o->req == r)
            o->req = NULL;
    if (r->chunk_reqs == NULL)
        return;
    for (uint64_t i = 0; i < r->nchunks; i++) {
        if (r->chunk_reqs[i] == MPI_REQUEST_NULL)
            continue;
        MPI_Cancel(&r->chunk_reqs[i]);
        MPI_Wait(&r->chunk_reqs[i], MPI_STATUS_IGNORE);
    }
}

int mln_mpilane_busy(const mln_stripe_t *s)
{
    return s->mpilane != NULL && s->mpilane->ops != NULL;
}

mln_status_t mln_mpilane_open(mln_stripe_t *s)
{
    if (s->mpilane != NULL)
        return MLN_OK;
    s->mpilane = calloc(1, sizeof(*s->mpilane));
    return s->mpilane ? MLN_OK : MLN_ERR_NOMEM;
}

void mln_mpilane_close(mln_stripe_t *s)
{
    if (s->mpilane == NULL)
        return;
    while (s->mpilane->ops) { /* only after failures: let MPI finish them on its own */
        mpi_op_t *o = s->mpilane->ops;
        s->mpilane->ops = o->next;
        for (int i = 0; i < 2; i++)
            if (o->mreq[i] != MPI_REQUEST_NULL)
                MPI_Request_free(&o->mreq[i]);
        free(o); /* the forward header may still be read: only after a failure */
    }
    free(s->mpilane);
    s->mpilane = NULL;
}

/* ---- the `mpi` lanes: MLN_STRIPE_LANES chunks in flight, all straight to the peer ---------- */

static int mpi_ready(mln_stripe_t *s, int peer)
{
    (void)s;
    (void)peer;
    return 1;
}

static void mpi_send_fill(mln_stripe_t *s, mln_req_t *r)
{
    int lanes = mln_stripe_lanes_fixed(s);

    for (int route = 0; route < lanes && r->next_off < r->accept; route++) {
        if (route_load(s, r->peer_world, route) > 0)
            continue;
        if (mln_mpilane_post(s, r, route, -1) != MLN_OK) {
            mln_stripe_req_fail(s, r, MLN_ERR_MPI);
            return;
        }
    }
}

static int mpi_progress(mln_stripe_t *s, int timeout_us)
{
    (void)timeout_us; /* never sleeps: the engine does when nothing moved */
    return mln_mpilane_progress(s);
}

const mln_lane_ops_t mln_lane_mpi_ops = {
    .name = "mpi",
    .kind = MLN_LANE_MPI,
    .open = mln_mpilane_open,
    .ready = mpi_ready,
    .recv_post = mln_mpilane_recv_post,
    .send_fill = mpi_send_fill,
    .progress = mpi_progress,
    .send_abort = mln_mpilane_send_abort,
    .quiet = mln_mpilane_quiet,
    .req_free = mln_mpilane_req_free,
    .close = mln_mpilane_close,
};

int mln_mpilane_route_load(const mln_stripe_t *s, int peer, int route)
{
    return route_load(s, peer, route);
}
