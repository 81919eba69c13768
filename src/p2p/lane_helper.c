/*
 * lane_helper.c - helper lanes: the design of seed 000 (MPIBlib), with non-blocking forwarding.
 *
 * The job is launched with MLN_STRIPE_HELPERS = k extra ranks per node (ordinary ranks of
 * the same mpiexec, not MPI_Comm_spawn): the last k ranks of every host become helpers and
 * stay inside mln_init; the application runs on mln_comm_world().  A chunk from s to t takes
 * one of 2k+1 routes, each a distinct process pair across the WAN, hence its own connection:
 *
 *   route 0          s ---------------------------> t
 *   routes 1..k      s ------------> h_t,i ---(shm)--> t      (helper i on t's host)
 *   routes k+1..2k   s --(shm)--> h_s,i -------------> t      (helper i on s's host)
 *
 * Routes are chosen dynamically (at most two chunks in flight per route).  A helper receives
 * a forward header {dest, tag, length} and then the chunk from the same sender, and passes it
 * on with MPI_Isend: every step is non-blocking, with a few slots in flight, so a
 * simultaneous A<->B exchange cannot deadlock (the seed's blocking Recv-then-Send could).
 * Helpers leave when the application ranks call mln_finalize (a barrier on the control comm).
 *
 * Cost: T = 2 alpha + n / min((2k + 1) b, link), plus one shm copy for 2k/(2k+1) of the bytes.
 */
#include "stripe_int.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HELPER_SLOTS 4
#define HELPER_ROUTE_DEPTH 2

struct mln_helper_state {
    int k;
    int is_helper;
    int *helpers; /* host id * k + i -> world rank of helper i on that host */
};

int mln_helper_is_helper(const mln_stripe_t *s)
{
    return s->helper != NULL && s->helper->is_helper;
}

static mln_status_t helper_open(mln_stripe_t *s)
{
    mln_status_t st = MLN_OK;
    mln_helper_state_t *h;
    int k = (int)s->cfg->stripe_helpers, bad = 0, any_bad = 0;

    MLN_CHECK(mln_mpilane_open(s), st, out);
    h = calloc(1, sizeof(*h));
    if (h == NULL)
        return MLN_ERR_NOMEM;
    s->helper = h;
    h->k = k;
    h->helpers = malloc((size_t)s->nhosts * (size_t)k * sizeof(int));
    if (h->helpers == NULL)
        return MLN_ERR_NOMEM;
    for (int i = 0; i < s->nhosts * k; i++)
        h->helpers[i] = -1;
    /* On every host, the k highest world ranks are its helpers. */
    for (int host = 0; host < s->nhosts; host++) {
        int found = 0;
        for (int r = s->wsize - 1; r >= 0 && found < k; r--)
            if (s->host_of[r] == host)
                h->helpers[host * k + (k - 1 - found++)] = r;
        int on_host = 0;
        for (int r = 0; r < s->wsize; r++)
            on_host += s->host_of[r] == host;
        if (on_host <= k)
            bad = 1;
    }
    for (int i = 0; i < k; i++)
        if (h->helpers[s->host_of[s->wrank] * k + i] == s->wrank)
            h->is_helper = 1;
    MLN_MPI_CHECK(MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD), st, out);
    if (any_bad) {
        if (s->wrank == 0)
            MLN_ERROR("MLN_STRIPE_BACKEND=helper with MLN_STRIPE_HELPERS=%d needs more than %d "
                      "ranks on every host (the last %d of each host become helpers)",
                      k, k, k);
        return MLN_ERR_CONFIG;
    }
    MLN_MPI_CHECK(
        MPI_Comm_split(MPI_COMM_WORLD, h->is_helper ? MPI_UNDEFINED : 0, s->wrank, &s->app), st,
        out);
    if (h->is_helper)
        MLN_DEBUG("world rank %d is a helper (%d per host)", s->wrank, k);
out:
    return st;
}

static int helper_ready(mln_stripe_t *s, int peer)
{
    (void)s;
    (void)peer;
    return 1;
}

static void helper_send_fill(mln_stripe_t *s, mln_req_t *r)
{
    mln_helper_state_t *h = s->helper;
    int k = h->k, routes = 2 * k + 1;

    for (int route = 0; route < routes && r->next_off < r->accept; route++) {
        int via = -1;
        if (route >= 1 && route <= k)
            via = h->helpers[s->host_of[r->peer_world] * k + (route - 1)];
        else if (route > k)
            via = h->helpers[s->host_of[s->wrank] * k + (route - k - 1)];
        while (r->next_off < r->accept &&
               mln_mpilane_route_load(s, r->peer_world, route) < HELPER_ROUTE_DEPTH) {
            if (mln_mpilane_post(s, r, route, via) != MLN_OK) {
                mln_stripe_req_fail(s, r, MLN_ERR_MPI);
                return;
            }
        }
    }
}

static int helper_progress(mln_stripe_t *s, int timeout_us)
{
    (void)timeout_us;
    return mln_mpilane_progress(s);
}

static void helper_close(mln_stripe_t *s)
{
    mln_helper_state_t *h = s->helper;

    if (h == NULL)
        return;
    if (!h->is_helper) { /* releases the helpers; an Ibarrier only matches an Ibarrier */
        MPI_Request req;
        if (MPI_Ibarrier(s->ctrl, &req) == MPI_SUCCESS)
            MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    mln_mpilane_close(s);
    free(h->helpers);
    free(h);
    s->helper = NULL;
}

/* ---- the helpers' loop ------------------------------------------------------------------- */

typedef struct helper_slot {
    enum { SLOT_FREE, SLOT_DATA, SLOT_SEND } state;
    mln_fwd_hdr_t fwd;
    int src;
    char *buf;
    uint64_t cap;
    MPI_Request req;
} helper_slot_t;

mln_status_t mln_helper_serve(mln_stripe_t *s)
{
    mln_status_t st = MLN_OK;
    helper_slot_t slots[HELPER_SLOTS] = {0};
    mln_fwd_hdr_t in;
    MPI_Request hdr_req = MPI_REQUEST_NULL, bar_req = MPI_REQUEST_NULL;
    MPI_Status mst;
    int flag = 0, idle = 0, leaving = 0;
    uint64_t forwarded = 0;

    for (int i = 0; i < HELPER_SLOTS; i++)
        slots[i].req = MPI_REQUEST_NULL;
    MLN_MPI_CHECK(MPI_Ibarrier(s->ctrl, &bar_req), st, out);
    for (;;) {
        int moved = 0, busy = 0, free_slot = -1;

        for (int i = 0; i < HELPER_SLOTS; i++) {
            helper_slot_t *sl = &slots[i];
            if (sl->state != SLOT_FREE) {
                MLN_MPI_CHECK(MPI_Test(&sl->req, &flag, MPI_STATUS_IGNORE), st, out);
                if (flag && sl->state == SLOT_DATA) {
                    MLN_MPI_CHECK(MPI_Isend(sl->buf, (int)sl->fwd.len, MPI_BYTE, sl->fwd.dest,
                                            sl->fwd.tag, s->ctrl, &sl->req),
                                  st, out);
                    sl->state = SLOT_SEND;
                    moved = 1;
                } else if (flag) {
                    sl->state = SLOT_FREE;
                    forwarded += sl->fwd.len;
                    moved = 1;
                }
            }
            if (sl->state == SLOT_FREE && free_slot < 0)
                free_slot = i;
            busy |= sl->state != SLOT_FREE;
        }
        if (hdr_req == MPI_REQUEST_NULL && free_slot >= 0 && !leaving)
            MLN_MPI_CHECK(MPI_Irecv(&in, (int)sizeof(in), MPI_BYTE, MPI_ANY_SOURCE, MLN_TAG_FWD_HDR,
                                    s->ctrl, &hdr_req),
                          st, out);
        if (hdr_req != MPI_REQUEST_NULL) {
            MLN_MPI_CHECK(MPI_Test(&hdr_req, &flag, &mst), st, out);
            if (flag) { /* free_slot >= 0: a header is only awaited with a slot free */
                helper_slot_t *sl = &slots[free_slot];
                if (in.len > sl->cap) {
                    free(sl->buf);
                    sl->buf = malloc((size_t)in.len);
                    sl->cap = sl->buf ? in.len : 0;
                    if (sl->buf == NULL) {
                        st = MLN_ERR_NOMEM;
                        goto out;
                    }
                }
                sl->fwd = in;
                sl->src = mst.MPI_SOURCE;
                /* Posted right after its header matched: chunks from one sender stay paired. */
                MLN_MPI_CHECK(MPI_Irecv(sl->buf, (int)in.len, MPI_BYTE, sl->src, MLN_TAG_FWD_DATA,
                                        s->ctrl, &sl->req),
                              st, out);
                sl->state = SLOT_DATA;
                moved = busy = 1;
            }
        }
        if (!leaving) {
            MLN_MPI_CHECK(MPI_Test(&bar_req, &flag, MPI_STATUS_IGNORE), st, out);
            leaving = flag;
        }
        if (leaving && !busy)
            break;
        if (leaving) { /* every application rank is in mln_finalize: what is left was for
                          requests that failed; drop it rather than wait for it forever */
            for (int i = 0; i < HELPER_SLOTS; i++) {
                if (slots[i].state == SLOT_DATA)
                    MPI_Cancel(&slots[i].req);
                if (slots[i].state != SLOT_FREE) {
                    MPI_Request_free(&slots[i].req);
                    slots[i].buf = NULL; /* MPI may still read it: left to the process exit */
                }
            }
            MLN_WARN("helper: forwards still pending at shutdown dropped (their requests failed)");
            break;
        }
        idle = moved ? 0 : idle + 1;
        if (idle > 2000) { /* share the cores with the application */
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
    }
    if (hdr_req != MPI_REQUEST_NULL) {
        MPI_Cancel(&hdr_req);
        MPI_Wait(&hdr_req, MPI_STATUS_IGNORE);
    }
    MLN_DEBUG("helper: forwarded %llu bytes", (unsigned long long)forwarded);
out:
    for (int i = 0; i < HELPER_SLOTS; i++)
        free(slots[i].buf);
    return st;
}

const mln_lane_ops_t mln_lane_helper_ops = {
    .name = "helper",
    .kind = MLN_LANE_HELPER,
    .open = helper_open,
    .ready = helper_ready,
    .recv_post = mln_mpilane_recv_post,
    .send_fill = helper_send_fill,
    .progress = helper_progress,
    .req_free = mln_mpilane_req_free,
    .close = helper_close,
};
