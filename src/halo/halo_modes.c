/*
 * halo_modes.c - the six ways a halo plan moves its data (docs/HALO.md, "One iteration per
 * mode"): p2p, neighbor, and four RMA modes that put into windows from MPI_Win_allocate.
 * The double-buffered ones (fence, pscw, passive) alternate two halves by the parity of the
 * iteration, so the arrival of iteration i + 1's data is also the credit that iteration i's
 * half was read (a symmetric exchange): one synchronisation per iteration (H1-H3).
 */
#include "halo_int.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

#define EMPTY(p, k) ((p)->nbrs[k] == MPI_PROC_NULL)

/* ---- errors in set-up ------------------------------------------------------------------- */

/*
 * The rule of every set-up here (docs/HALO.md, "Errors"): a step that can fail on one rank
 * alone (an allocation, an error handler, a group, the test hook) is agreed before the next
 * call that needs the other ranks (a collective, the neighbours' exchange of slots), so that
 * a failure on one rank fails the set-up on all, at the same step, instead of leaving the
 * others waiting in that call.  An MPI call that needs the other ranks is taken to fail on
 * all of them or to be fatal: after such an error MPI leaves the communicator undefined.
 */
mln_status_t mln_halo_agree(MPI_Comm comm, mln_status_t st)
{
    int mine = (int)st, all = (int)MLN_ERR_MPI;

    if (MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MAX, comm) != MPI_SUCCESS)
        MLN_ERROR("mln_halo: the ranks could not agree on a set-up step's outcome");
    else if (st == MLN_OK && all != MLN_OK)
        MLN_ERROR("mln_halo: a set-up step failed on another rank (%s)",
                  mln_status_str((mln_status_t)all));
    return (mln_status_t)all;
}

/* ---- p2p -------------------------------------------------------------------------------- */

static mln_status_t p2p_setup(mln_halo_plan_t *p)
{
    /* nothing to set up; the test hook's failure is agreed like any other */
    return mln_halo_agree(p->comm, p->fail_setup ? MLN_ERR_NOMEM : MLN_OK);
}

static mln_status_t p2p_exchange(mln_halo_plan_t *p, const void *const *sendbufs,
                                 void *const *recvbufs)
{
    mln_status_t st = MLN_OK;
    const int n = p->nnbrs;

    /* tag = the receiving entry's index: a pair is found by it even when a rank repeats
     * (MPI_PROC_NULL entries complete at once and touch no buffer) */
    for (int k = 0; k < n; k++)
        MLN_MPI_CHECK(
            MPI_Irecv(recvbufs[k], p->recv_count[k], p->type, p->nbrs[k], k, p->comm, &p->reqs[k]),
            st, out);
    for (int k = 0; k < n; k++)
        MLN_MPI_CHECK(MPI_Isend(sendbufs[k], p->send_count[k], p->type, p->nbrs[k],
                                EMPTY(p, k) ? 0 : p->peer[k], p->comm, &p->reqs[n + k]),
                      st, out);
    MLN_MPI_CHECK(MPI_Waitall(2 * n, p->reqs, MPI_STATUSES_IGNORE), st, out);
out:
    return st;
}

static void p2p_teardown(mln_halo_plan_t *p)
{
    (void)p;
}

/* ---- neighbor --------------------------------------------------------------------------- */

static void neighbor_teardown(mln_halo_plan_t *p)
{
    if (p->graph != MPI_COMM_NULL)
        MPI_Comm_free(&p->graph);
    free(p->send_entry);
    free(p->w_counts);
    free(p->w_displs);
    free(p->w_types);
    p->send_entry = NULL;
    p->w_counts = NULL;
    p->w_displs = NULL;
    p->w_types = NULL;
    p->nedges = 0;
}

/*
 * The graph's receive edges are the non-empty entries in order; MPI pairs the j-th send edge
 * to a rank with the j-th receive edge from me at that rank, so my send edges to one rank go
 * in the order of their partners' entries (peer[k] ascending).
 */
static mln_status_t neighbor_setup(mln_halo_plan_t *p)
{
    const int n = p->nnbrs;
    int *src = calloc((size_t)n + 1, sizeof(int)), *dst = calloc((size_t)n + 1, sizeof(int));
    int e = 0;
    mln_status_t st = MLN_OK;

    p->send_entry = calloc((size_t)n + 1, sizeof(int));
    p->w_counts = calloc((size_t)2 * n + 1, sizeof(int));
    p->w_displs = calloc((size_t)2 * n + 1, sizeof(MPI_Aint));
    p->w_types = calloc((size_t)2 * n + 1, sizeof(MPI_Datatype));
    if (!src || !dst || !p->send_entry || !p->w_counts || !p->w_displs || !p->w_types ||
        p->fail_setup)
        st = MLN_ERR_NOMEM;
    /* before the graph's collective creation */
    MLN_CHECK(mln_halo_agree(p->comm, st), st, out);
    for (int k = 0; k < n; k++)
        if (!EMPTY(p, k))
            p->send_entry[e++] = k;
    p->nedges = e;
    /* insertion sort by (rank, partner's entry): lists are short */
    for (int i = 1; i < e; i++) {
        int k = p->send_entry[i], j = i - 1;
        while (j >= 0 && (p->nbrs[p->send_entry[j]] > p->nbrs[k] ||
                          (p->nbrs[p->send_entry[j]] == p->nbrs[k] &&
                           p->peer[p->send_entry[j]] > p->peer[k]))) {
            p->send_entry[j + 1] = p->send_entry[j];
            j--;
        }
        p->send_entry[j + 1] = k;
    }
    e = 0;
    for (int k = 0; k < n; k++)
        if (!EMPTY(p, k))
            src[e++] = p->nbrs[k];
    for (int j = 0; j < e; j++) {
        dst[j] = p->nbrs[p->send_entry[j]];
        p->w_counts[j] = p->send_count[p->send_entry[j]];
        p->w_types[j] = p->type;
        p->w_types[e + j] = p->type;
    }
    for (int k = 0, j = 0; k < n; k++)
        if (!EMPTY(p, k))
            p->w_counts[e + j++] = p->recv_count[k];
/* Open MPI's MPI_UNWEIGHTED points at an empty array, which GCC takes for a read overrun */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-overread"
#endif
    MLN_MPI_CHECK(MPI_Dist_graph_create_adjacent(p->comm, e, src, MPI_UNWEIGHTED, e, dst,
                                                 MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &p->graph),
                  st, out);
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
out:
    free(src);
    free(dst);
    if (st != MLN_OK)
        neighbor_teardown(p);
    return st;
}

/* One MPI_Neighbor_alltoallw with MPI_BOTTOM: each buffer's address is its displacement, so
 * the caller's separate buffers need no copy into one array. */
static mln_status_t neighbor_exchange(mln_halo_plan_t *p, const void *const *sendbufs,
                                      void *const *recvbufs)
{
    const int e = p->nedges;
    mln_status_t st = MLN_OK;

    for (int j = 0; j < e; j++)
        MLN_MPI_CHECK(MPI_Get_address(sendbufs[p->send_entry[j]], &p->w_displs[j]), st, out);
    for (int k = 0, j = 0; k < p->nnbrs; k++)
        if (!EMPTY(p, k))
            MLN_MPI_CHECK(MPI_Get_address(recvbufs[k], &p->w_displs[e + j++]), st, out);
    MLN_MPI_CHECK(MPI_Neighbor_alltoallw(MPI_BOTTOM, p->w_counts, p->w_displs, p->w_types,
                                         MPI_BOTTOM, p->w_counts + e, p->w_displs + e,
                                         p->w_types + e, p->graph),
                  st, out);
out:
    return st;
}

/* ---- RMA: windows and slots (H1) -------------------------------------------------------- */

enum { TARGET_TAG = 2, TARGET_FIELDS = 4 };

static void rma_free(mln_halo_plan_t *p)
{
    for (int w = 0; w < p->windows; w++)
        MPI_Win_free(&p->win[w]);
    p->windows = 0;
    if (p->group != MPI_GROUP_NULL)
        MPI_Group_free(&p->group);
    free(p->off);
    free(p->target);
    p->off = NULL;
    p->target = NULL;
}

/*
 * Allocates `nwin` windows of `halves` halves (my receive slots, back to back) each, plus
 * counters[2][nnbrs] of int64 in the first when `counters`; then every entry learns where its
 * partner's slot is (offset, half, counter of parity 0, stride of the counters).  Collective.
 */
static mln_status_t rma_setup(mln_halo_plan_t *p, int nwin, int halves, int counters)
{
    const int n = p->nnbrs;
    int64_t *mine = NULL;
    MPI_Aint at = 0;
    MPI_Info info = MPI_INFO_NULL;
    mln_status_t st = MLN_OK;

    p->off = calloc((size_t)n + 1, sizeof(MPI_Aint));
    p->target = calloc((size_t)TARGET_FIELDS * n + 1, sizeof(int64_t));
    mine = calloc((size_t)TARGET_FIELDS * n + 1, sizeof(int64_t));
    if (!p->off || !p->target || !mine || p->fail_setup) {
        st = MLN_ERR_NOMEM;
        goto prepared;
    }
    for (int k = 0; k < n; k++) {
        p->off[k] = at;
        at += (MPI_Aint)p->recv_count[k] * p->esize;
    }
    p->half = (at + 7) / 8 * 8;
    p->ctr = (MPI_Aint)halves * p->half;
    MLN_MPI_CHECK(MPI_Info_create(&info), st, prepared);
    MLN_MPI_CHECK(MPI_Info_set(info, "same_disp_unit", "true"), st, prepared);
    if (!counters)
        MLN_MPI_CHECK(MPI_Info_set(info, "no_locks", "true"), st, prepared);
prepared: /* before the windows' collective allocation */
    MLN_CHECK(mln_halo_agree(p->comm, st), st, out);
    for (int w = 0; w < nwin; w++) {
        MPI_Aint bytes = (MPI_Aint)halves * p->half + (counters && w == 0 ? 16 * (MPI_Aint)n : 0);
        MLN_MPI_CHECK(MPI_Win_allocate(bytes, 1, info, p->comm, &p->base[w], &p->win[w]), st, out);
        p->windows++;
    }
    for (int w = 0; w < nwin; w++)
        MLN_MPI_CHECK(MPI_Win_set_errhandler(p->win[w], MPI_ERRORS_RETURN), st, allocated);
allocated: /* before the neighbours wait for each other's slots */
    MLN_CHECK(mln_halo_agree(p->comm, st), st, out);
    for (int k = 0; k < n; k++) {
        int64_t *t = mine + TARGET_FIELDS * k;
        t[0] = p->off[k];
        t[1] = p->half;
        t[2] = p->ctr + 8 * (int64_t)k;
        t[3] = 8 * (int64_t)n;
    }
    /* what I send for entry k is where its partner's entry peer[k] puts: tag = that entry */
    for (int k = 0; k < n; k++)
        MLN_MPI_CHECK(MPI_Irecv(p->target + TARGET_FIELDS * k, TARGET_FIELDS, MPI_INT64_T,
                                p->nbrs[k], TARGET_TAG + k, p->comm, &p->reqs[k]),
                      st, out);
    for (int k = 0; k < n; k++)
        MLN_MPI_CHECK(MPI_Isend(mine + TARGET_FIELDS * k, TARGET_FIELDS, MPI_INT64_T, p->nbrs[k],
                                TARGET_TAG + (EMPTY(p, k) ? 0 : p->peer[k]), p->comm,
                                &p->reqs[n + k]),
                      st, out);
    MLN_MPI_CHECK(MPI_Waitall(2 * n, p->reqs, MPI_STATUSES_IGNORE), st, out);
out:
    if (info != MPI_INFO_NULL)
        MPI_Info_free(&info);
    free(mine);
    if (st != MLN_OK)
        rma_free(p);
    return st;
}

/* Puts every non-empty entry's data to its partner's slot in window w, at half `half`. */
static mln_status_t rma_put_all(mln_halo_plan_t *p, int w, int half, const void *const *sendbufs)
{
    mln_status_t st = MLN_OK;

    for (int k = 0; k < p->nnbrs; k++) {
        const int64_t *t = p->target + TARGET_FIELDS * k;
        if (EMPTY(p, k) || p->send_count[k] == 0)
            continue;
        MLN_MPI_CHECK(MPI_Put(sendbufs[k], p->send_count[k], p->type, p->nbrs[k],
                              (MPI_Aint)(t[0] + half * t[1]), p->send_count[k], p->type, p->win[w]),
                      st, out);
    }
out:
    return st;
}

/* Copies my receive slots of window w, half `half`, out to the caller (never into them, H3). */
static void rma_copy_out(const mln_halo_plan_t *p, int w, int half, void *const *recvbufs)
{
    const char *from = p->base[w] + (MPI_Aint)half * p->half;

    for (int k = 0; k < p->nnbrs; k++)
        if (!EMPTY(p, k) && p->recv_count[k] > 0)
            memcpy(recvbufs[k], from + p->off[k], (size_t)p->recv_count[k] * (size_t)p->esize);
}

/* ---- rma-fence and rma-single ----------------------------------------------------------- */

/*
 * fence: puts to half i & 1, one fence, copy out.  Iteration i + 1 writes the other half;
 * iteration i + 2's writes into this half come after the fence of i + 1, which every rank
 * enters only after its copy-out of i.  single: one half, and a second fence after the
 * copy-out says that it is free again.
 */
static mln_status_t fence_open(mln_halo_plan_t *p, int halves)
{
    mln_status_t st;

    MLN_CHECK(rma_setup(p, 1, halves, 0), st, out);
    MLN_MPI_CHECK(MPI_Win_fence(MPI_MODE_NOPRECEDE, p->win[0]), st, out);
out:
    if (st != MLN_OK)
        rma_free(p);
    return st;
}

static mln_status_t fence_setup(mln_halo_plan_t *p)
{
    return fence_open(p, 2);
}

static mln_status_t single_setup(mln_halo_plan_t *p)
{
    return fence_open(p, 1);
}

static mln_status_t fence_exchange(mln_halo_plan_t *p, const void *const *sendbufs,
                                   void *const *recvbufs)
{
    const int half = (int)(p->iter & 1);
    mln_status_t st;

    MLN_CHECK(rma_put_all(p, 0, half, sendbufs), st, out);
    MLN_MPI_CHECK(MPI_Win_fence(MPI_MODE_NOSTORE, p->win[0]), st, out);
    rma_copy_out(p, 0, half, recvbufs);
out:
    return st;
}

static mln_status_t single_exchange(mln_halo_plan_t *p, const void *const *sendbufs,
                                    void *const *recvbufs)
{
    mln_status_t st;

    MLN_CHECK(rma_put_all(p, 0, 0, sendbufs), st, out);
    MLN_MPI_CHECK(MPI_Win_fence(MPI_MODE_NOSTORE, p->win[0]), st, out); /* arrived */
    rma_copy_out(p, 0, 0, recvbufs);
    MLN_MPI_CHECK(MPI_Win_fence(MPI_MODE_NOSTORE, p->win[0]), st, out); /* free again */
out:
    return st;
}

static void fence_teardown(mln_halo_plan_t *p)
{
    if (p->windows > 0)
        MPI_Win_fence(MPI_MODE_NOSUCCEED, p->win[0]);
    rma_free(p);
}

/* ---- rma-pscw --------------------------------------------------------------------------- */

/* The distinct neighbours: the access and the exposure group (the exchange is symmetric). */
static mln_status_t pscw_group(mln_halo_plan_t *p)
{
    int *ranks = calloc((size_t)p->nnbrs + 1, sizeof(int)), m = 0;
    MPI_Group all = MPI_GROUP_NULL;
    mln_status_t st = MLN_OK;

    if (ranks == NULL)
        return MLN_ERR_NOMEM;
    for (int k = 0; k < p->nnbrs; k++) {
        int dup = EMPTY(p, k);
        for (int j = 0; j < m && !dup; j++)
            dup = ranks[j] == p->nbrs[k];
        if (!dup)
            ranks[m++] = p->nbrs[k];
    }
    MLN_MPI_CHECK(MPI_Comm_group(p->comm, &all), st, out);
    MLN_MPI_CHECK(MPI_Group_incl(all, m, ranks, &p->group), st, out);
out:
    if (all != MPI_GROUP_NULL)
        MPI_Group_free(&all);
    free(ranks);
    return st;
}

/* Two windows by parity, both exposed at once; iteration i re-exposes window i & 1 for
 * iteration i + 2 after its copy-out, off the critical path. */
static mln_status_t pscw_setup(mln_halo_plan_t *p)
{
    mln_status_t st;

    MLN_CHECK(rma_setup(p, 2, 1, 0), st, out);
    /* before the posts, which the neighbours' first exchange waits for */
    MLN_CHECK(mln_halo_agree(p->comm, pscw_group(p)), st, out);
    for (int w = 0; w < 2; w++)
        MLN_MPI_CHECK(MPI_Win_post(p->group, MPI_MODE_NOSTORE, p->win[w]), st, out);
out:
    if (st != MLN_OK)
        rma_free(p);
    return st;
}

static mln_status_t pscw_exchange(mln_halo_plan_t *p, const void *const *sendbufs,
                                  void *const *recvbufs)
{
    const int w = (int)(p->iter & 1);
    mln_status_t st;

    MLN_MPI_CHECK(MPI_Win_start(p->group, 0, p->win[w]), st, out);
    MLN_CHECK(rma_put_all(p, w, 0, sendbufs), st, out);
    MLN_MPI_CHECK(MPI_Win_complete(p->win[w]), st, out);
    MLN_MPI_CHECK(MPI_Win_wait(p->win[w]), st, out);
    rma_copy_out(p, w, 0, recvbufs);
    MLN_MPI_CHECK(MPI_Win_post(p->group, MPI_MODE_NOSTORE, p->win[w]), st, out);
out:
    return st;
}

/* Both windows stand exposed: close each with an empty access epoch, in the same order on
 * every rank, before they are freed. */
static void pscw_teardown(mln_halo_plan_t *p)
{
    for (int w = 0; w < p->windows && p->group != MPI_GROUP_NULL; w++) {
        MPI_Win_start(p->group, 0, p->win[w]);
        MPI_Win_complete(p->win[w]);
        MPI_Win_wait(p->win[w]);
    }
    rma_free(p);
}

/* ---- rma-passive ------------------------------------------------------------------------ */

static void passive_teardown(mln_halo_plan_t *p)
{
    if (p->windows > 0) /* where lock_all failed this fails too, harmlessly */
        MPI_Win_unlock_all(p->win[0]);
    rma_free(p);
}

/*
 * One passive epoch for the plan's life (lock_all).  Iteration i: put the data to half i & 1,
 * flush, then write the sequence number i + 1 into the partner's (parity, slot) counter with
 * MPI_Accumulate(REPLACE); wait until my counters of parity i & 1 read i + 1 (atomic reads of
 * my own window, MPI_Win_sync before the data are read), copy out.  Counters only grow, so
 * nothing is reset (H3), and every entry writes one even when its count is 0: the counters are
 * the credits.
 */
static mln_status_t passive_setup(mln_halo_plan_t *p)
{
    mln_status_t st;

    MLN_CHECK(rma_setup(p, 1, 2, 1), st, out);
    MLN_MPI_CHECK(MPI_Win_lock_all(0, p->win[0]), st, locked);
    /* the counters start at 0: stored before anyone can reach them (the agreement, which no
     * rank leaves before all have entered it), the one local store into the window (none
     * without neighbours: the window may then be empty, and its base NULL) */
    if (p->nnbrs > 0)
        memset(p->base[0] + p->ctr, 0, 16 * (size_t)p->nnbrs);
    MLN_MPI_CHECK(MPI_Win_sync(p->win[0]), st, locked);
locked:
    st = mln_halo_agree(p->comm, st);
out:
    if (st != MLN_OK)
        passive_teardown(p);
    return st;
}

static mln_status_t passive_exchange(mln_halo_plan_t *p, const void *const *sendbufs,
                                     void *const *recvbufs)
{
    const int half = (int)(p->iter & 1);
    const int64_t seq = p->iter + 1;
    MPI_Win win = p->win[0];
    mln_status_t st;

    MLN_CHECK(rma_put_all(p, 0, half, sendbufs), st, out);
    MLN_MPI_CHECK(MPI_Win_flush_all(win), st, out);
    for (int k = 0; k < p->nnbrs; k++) {
        const int64_t *t = p->target + TARGET_FIELDS * k;
        if (!EMPTY(p, k))
            MLN_MPI_CHECK(MPI_Accumulate(&seq, 1, MPI_INT64_T, p->nbrs[k],
                                         (MPI_Aint)(t[2] + half * t[3]), 1, MPI_INT64_T,
                                         MPI_REPLACE, win),
                          st, out);
    }
    MLN_MPI_CHECK(MPI_Win_flush_all(win), st, out);
    for (int k = 0; k < p->nnbrs; k++) {
        const MPI_Aint at = p->ctr + 8 * ((MPI_Aint)half * p->nnbrs + k);
        int64_t got = 0;
        if (EMPTY(p, k))
            continue;
        for (;;) {
            MLN_MPI_CHECK(MPI_Fetch_and_op(NULL, &got, MPI_INT64_T, p->rank, at, MPI_NO_OP, win),
                          st, out);
            MLN_MPI_CHECK(MPI_Win_flush(p->rank, win), st, out);
            if (got >= seq)
                break;
            sched_yield(); /* an oversubscribed node: let the sender run */
        }
        if (got != seq) { /* a partner two iterations ahead: the protocol is broken */
            MLN_ERROR("mln_halo_exchange (rma-passive): entry %d's counter reads %lld in "
                      "iteration %lld (expected %lld)",
                      k, (long long)got, (long long)p->iter, (long long)seq);
            st = MLN_ERR_STATE;
            goto out;
        }
    }
    MLN_MPI_CHECK(MPI_Win_sync(win), st, out);
    rma_copy_out(p, 0, half, recvbufs);
out:
    return st;
}

/* ---- the table -------------------------------------------------------------------------- */

static const mln_halo_ops_t ops_table[MLN_HALO_NMODES] = {
    [MLN_HALO_P2P] = {p2p_setup, p2p_exchange, p2p_teardown},
    [MLN_HALO_NEIGHBOR] = {neighbor_setup, neighbor_exchange, neighbor_teardown},
    [MLN_HALO_RMA_FENCE] = {fence_setup, fence_exchange, fence_teardown},
    [MLN_HALO_RMA_PSCW] = {pscw_setup, pscw_exchange, pscw_teardown},
    [MLN_HALO_RMA_PASSIVE] = {passive_setup, passive_exchange, passive_teardown},
    [MLN_HALO_RMA_SINGLE] = {single_setup, single_exchange, fence_teardown},
};

const mln_halo_ops_t *mln_halo_ops(mln_halo_mode_t mode)
{
    return mode > MLN_HALO_AUTO && mode < MLN_HALO_NMODES ? &ops_table[mode] : NULL;
}
