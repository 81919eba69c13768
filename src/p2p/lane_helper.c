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
    int opened;   /* helper_open succeeded on every rank: the helpers wait for the release */
    int *helpers; /* host id * k + i -> world rank of helper i on that host */
};

int mln_helper_is_helper(const mln_stripe_t *s)
{
    return s->helper != NULL && s->helper->is_helper;
}

/* Helper i of `host`: the k highest world ranks of every host, in order.  0 when the host
 * has no more than k ranks (no application rank would be left on it). */
static int helpers_of_host(const mln_stripe_t *s, int host, int k, int *helpers)
{
    int found = 0, on_host = 0;

    for (int r = s->wsize - 1; r >= 0; r--) {
        if (s->host_of[r] != host)
            continue;
        on_host++;
        if (found < k)
            helpers[k - 1 - found++] = r;
    }
    return on_host > k;
}

static mln_status_t helper_open(mln_stripe_t *s)
{
    mln_status_t st = MLN_OK;
    mln_helper_state_t *h;
    int k = (int)s->cfg->stripe_helpers, bad = 0, any_bad = 0;

    st = mln_mpilane_open(s);
    h = st == MLN_OK ? calloc(1, sizeof(*h)) : NULL;
    if (h != NULL) {
        s->helper = h;
        h->k = k;
        h->helpers = malloc((size_t)s->nhosts * (size_t)k * sizeof(int));
    }
    /* 2: out of memory here; 1: too few ranks on some host.  Agreed before any rank moves on,
     * so that every rank returns the error and none waits in a collective. */
    if (h == NULL || h->helpers == NULL) {
        bad = 2;
    } else {
        for (int i = 0; i < s->nhosts * k; i++)
            h->helpers[i] = -1;
        for (int host = 0; host < s->nhosts; host++)
            if (!helpers_of_host(s, host, k, h->helpers + host * k))
                bad = 1;
        for (int i = 0; i < k; i++)
            if (h->helpers[s->host_of[s->wrank] * k + i] == s->wrank)
                h->is_helper = 1;
    }
    MLN_MPI_CHECK(MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD), st, out);
    if (any_bad == 2) {
        MLN_ERROR("helper lanes: out of memory on %s", bad == 2 ? "this rank" : "another rank");
        return MLN_ERR_NOMEM;
    }
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
    h->opened = 1;
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
    /* Releases the helpers (an Ibarrier only matches an Ibarrier).  Only once they serve: when
     * helper_open failed, every rank returns its error from mln_init and no helper waits. */
    if (h->opened && !h->is_helper) {
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

/* One posted header receive per application rank, never one MPI_ANY_SOURCE receive: with
 * MPICH (ch4, 5.0.2), a helper whose MPI_ANY_SOURCE receive was fed both through shared memory
 * (senders on its host) and through the network (senders on the other hosts) was seen to stop
 * completing its own sends, and the forwarding stalled (tests/python/test_stripe.py, "many"). */
typedef struct helper_src {
    int rank;
    MPI_Request req;
    mln_fwd_hdr_t in;
} helper_src_t;

static mln_status_t post_hdr(mln_stripe_t *s, helper_src_t *src)
{
    mln_status_t st = MLN_OK;

    MLN_MPI_CHECK(MPI_Irecv(&src->in, (int)sizeof(src->in), MPI_BYTE, src->rank, MLN_TAG_FWD_HDR,
                            s->ctrl, &src->req),
                  st, out);
out:
    return st;
}

/* A forward header comes from a rank of the job, but is checked all the same: a bad one would
 * make MPI fail on the control comm, which is fatal for every rank the helper serves. */
static int fwd_valid(const mln_stripe_t *s, const mln_fwd_hdr_t *f)
{
    return f->dest >= 0 && f->dest < s->wsize && f->dest != s->wrank && f->tag >= s->data_tag_lo &&
           f->tag <= s->data_tag_hi && f->len > 0 && f->len <= MLN_STRIPE_CHUNK_MAX;
}

/* A header from src matched: its chunk goes into slot sl (received now, sent on later). */
static mln_status_t slot_take(mln_stripe_t *s, helper_slot_t *sl, const helper_src_t *src)
{
    mln_status_t st = MLN_OK;

    if (!fwd_valid(s, &src->in)) {
        MLN_ERROR("helper: invalid forward header from world rank %d (to %d, tag %d, %llu "
                  "bytes): ignored",
                  src->rank, src->in.dest, src->in.tag, (unsigned long long)src->in.len);
        return MLN_OK;
    }
    if (src->in.len > sl->cap) {
        free(sl->buf);
        sl->buf = malloc((size_t)src->in.len);
        sl->cap = sl->buf ? src->in.len : 0;
        if (sl->buf == NULL)
            return MLN_ERR_NOMEM;
    }
    sl->fwd = src->in;
    sl->src = src->rank;
    /* Posted right after its header matched: chunks from one sender stay paired. */
    MLN_MPI_CHECK(MPI_Irecv(sl->buf, (int)sl->fwd.len, MPI_BYTE, sl->src, MLN_TAG_FWD_DATA, s->ctrl,
                            &sl->req),
                  st, out);
    sl->state = SLOT_DATA;
out:
    return st;
}

/* Moves every slot on: *moved = 1 when one did, *busy = 1 while one is in use. */
static mln_status_t slots_progress(mln_stripe_t *s, helper_slot_t *slots, int *moved, int *busy,
                                   uint64_t *forwarded)
{
    mln_status_t st = MLN_OK;
    int flag = 0;

    *busy = 0;
    for (int i = 0; i < HELPER_SLOTS; i++) {
        helper_slot_t *sl = &slots[i];
        if (sl->state == SLOT_FREE)
            continue;
        MLN_MPI_CHECK(MPI_Test(&sl->req, &flag, MPI_STATUS_IGNORE), st, out);
        if (flag && sl->state == SLOT_DATA) {
            MLN_MPI_CHECK(MPI_Isend(sl->buf, (int)sl->fwd.len, MPI_BYTE, sl->fwd.dest, sl->fwd.tag,
                                    s->ctrl, &sl->req),
                          st, out);
            sl->state = SLOT_SEND;
            *moved = 1;
        } else if (flag) {
            sl->state = SLOT_FREE;
            *forwarded += sl->fwd.len;
            *moved = 1;
        }
        *busy |= sl->state != SLOT_FREE;
    }
out:
    return st;
}

/* Every application rank's header receive. */
static mln_status_t srcs_open(mln_stripe_t *s, helper_src_t **out, int *n)
{
    mln_status_t st = MLN_OK;
    helper_src_t *srcs = calloc((size_t)s->wsize, sizeof(*srcs));
    int app_ranks = 0;

    if (srcs == NULL)
        return MLN_ERR_NOMEM;
    for (int r = 0; r < s->wsize; r++) {
        int helper = 0;
        for (int i = 0; i < s->nhosts * s->helper->k; i++)
            helper |= s->helper->helpers[i] == r;
        if (!helper)
            srcs[app_ranks++] = (helper_src_t){.rank = r, .req = MPI_REQUEST_NULL};
    }
    for (int i = 0; i < app_ranks; i++)
        MLN_CHECK(post_hdr(s, &srcs[i]), st, out);
out:
    *out = srcs;
    *n = app_ranks;
    return st;
}

static void srcs_close(helper_src_t *srcs, int n)
{
    for (int i = 0; srcs != NULL && i < n; i++) {
        if (srcs[i].req == MPI_REQUEST_NULL)
            continue;
        MPI_Cancel(&srcs[i].req);
        MPI_Wait(&srcs[i].req, MPI_STATUS_IGNORE);
    }
    free(srcs);
}

mln_status_t mln_helper_serve(mln_stripe_t *s)
{
    mln_status_t st = MLN_OK;
    helper_slot_t slots[HELPER_SLOTS] = {0};
    helper_src_t *srcs = NULL;
    MPI_Request bar_req = MPI_REQUEST_NULL;
    int flag = 0, idle = 0, leaving = 0, nsrcs = 0, next_src = 0;
    uint64_t forwarded = 0;

    for (int i = 0; i < HELPER_SLOTS; i++)
        slots[i].req = MPI_REQUEST_NULL;
    MLN_CHECK(srcs_open(s, &srcs, &nsrcs), st, out);
    MLN_MPI_CHECK(MPI_Ibarrier(s->ctrl, &bar_req), st, out);
    for (;;) {
        int moved = 0, busy = 0;

        MLN_CHECK(slots_progress(s, slots, &moved, &busy, &forwarded), st, out);
        /* New headers while a slot is free, from the senders in turn (none starves). */
        for (int n = 0, i = 0; n < nsrcs && i < HELPER_SLOTS && !leaving; n++) {
            helper_src_t *src = &srcs[(next_src + n) % nsrcs];
            while (i < HELPER_SLOTS && slots[i].state != SLOT_FREE)
                i++;
            if (i == HELPER_SLOTS)
                break;
            MLN_MPI_CHECK(MPI_Test(&src->req, &flag, MPI_STATUS_IGNORE), st, out);
            if (!flag)
                continue;
            MLN_CHECK(slot_take(s, &slots[i], src), st, out);
            MLN_CHECK(post_hdr(s, src), st, out);
            moved = busy = 1;
        }
        next_src = nsrcs > 0 ? (next_src + 1) % nsrcs : 0;
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
    MLN_DEBUG("helper: forwarded %llu bytes", (unsigned long long)forwarded);
out:
    srcs_close(srcs, nsrcs);
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
    .send_abort = mln_mpilane_send_abort,
    .quiet = mln_mpilane_quiet,
    .req_free = mln_mpilane_req_free,
    .close = helper_close,
};
