/*
 * halo_pairs.c - which send meets which receive (docs/HALO.md): at creation every entry of a
 * halo plan learns the entry of its neighbour's list it pairs with, and the plan is refused on
 * every rank when the lists are not mutual (lengths, pairing or counts).
 */
#include "halo_int.h"

#include <sched.h>
#include <stdlib.h>

enum { PAIR_TAG = 1, PAIR_FIELDS = 5 }; /* k, occurrence, claimed peer or -1, send, recv */

/* The occurrence of nbrs[k] among nbrs[0..k] (0 for its first). */
static int occurrence(const int *nbrs, int k)
{
    int o = 0;

    for (int i = 0; i < k; i++)
        o += nbrs[i] == nbrs[k];
    return o;
}

/* Entry of my list that is the o-th occurrence of rank j, or -1. */
static int nth_entry(const int *nbrs, int n, int j, int o)
{
    for (int i = 0; i < n; i++)
        if (nbrs[i] == j && o-- == 0)
            return i;
    return -1;
}

/* How many of the n values in a are v. */
static int count_of(const int *a, int n, int v)
{
    int c = 0;

    for (int i = 0; i < n; i++)
        c += a[i] == v;
    return c;
}

/*
 * Every non-empty entry sends its record to its neighbour, and each rank receives every record
 * sent to it, however many come: a neighbour may list me fewer or more times than I list it (a
 * plan to refuse, not a receive that never matches).  NBX (Hoefler, Siebert and Lumsdaine,
 * PPoPP 2010): synchronous sends; receive whatever arrives; once my sends are matched, enter a
 * non-blocking barrier; when it completes every rank's sends are matched, so every record for
 * me is in.  O(neighbours) messages and one barrier, where an MPI_Alltoall of per-rank counts
 * would cost every rank O(P) memory and time however few neighbours it has.  Records go into
 * in[0 .. n) with their senders in from[]; those past n (a wrong plan) all into in[n], from[n]
 * the last one's sender.  *got: records received.
 */
static mln_status_t pair_records(mln_halo_plan_t *p, const int *out, int *in, int *from, int *got)
{
    const int n = p->nnbrs;
    MPI_Request barrier = MPI_REQUEST_NULL;
    int in_barrier = 0, done = 0;
    mln_status_t st = MLN_OK;

    *got = 0;
    for (int k = 0; k < n; k++) {
        p->reqs[k] = MPI_REQUEST_NULL;
        if (p->nbrs[k] != MPI_PROC_NULL)
            MLN_MPI_CHECK(MPI_Issend(out + k * PAIR_FIELDS, PAIR_FIELDS, MPI_INT, p->nbrs[k],
                                     PAIR_TAG, p->comm, &p->reqs[k]),
                          st, failed);
    }
    while (!done) {
        MPI_Message msg;
        MPI_Status status;
        int arrived = 0, i = *got < n ? *got : n;

        MLN_MPI_CHECK(MPI_Improbe(MPI_ANY_SOURCE, PAIR_TAG, p->comm, &arrived, &msg, &status), st,
                      failed);
        if (arrived) {
            MLN_MPI_CHECK(
                MPI_Mrecv(in + i * PAIR_FIELDS, PAIR_FIELDS, MPI_INT, &msg, MPI_STATUS_IGNORE), st,
                failed);
            from[i] = status.MPI_SOURCE;
            ++*got;
            continue;
        }
        if (!in_barrier) {
            MLN_MPI_CHECK(MPI_Testall(n, p->reqs, &in_barrier, MPI_STATUSES_IGNORE), st, failed);
            if (in_barrier)
                MLN_MPI_CHECK(MPI_Ibarrier(p->comm, &barrier), st, failed);
        } else {
            MLN_MPI_CHECK(MPI_Test(&barrier, &done, MPI_STATUS_IGNORE), st, failed);
        }
        if (!done)
            sched_yield(); /* an oversubscribed node: let the others send */
    }
    return MLN_OK;
failed: /* the others wait for this rank's sends or its barrier: an MPI error here is fatal to
           the plan's communicator, as it would be in any collective */
    return st;
}

/*
 * Every entry tells its neighbour which of the neighbour's entries it pairs with and its
 * counts; each rank checks what it got (as many records from each rank as it has entries
 * naming that rank, mutual pairing, matching counts, every entry paired once), then all agree
 * on the outcome, so a bad plan fails on every rank (MLN_ERR_ARG).
 */
mln_status_t mln_halo_pair(mln_halo_plan_t *p, const int *peer_index)
{
    const int n = p->nnbrs;
    int *out = calloc((size_t)n * PAIR_FIELDS + 1, sizeof(int));
    int *in = calloc((size_t)(n + 1) * PAIR_FIELDS, sizeof(int));
    int *from = calloc((size_t)n + 1, sizeof(int));
    int *seen = calloc((size_t)n + 1, sizeof(int));
    int bad = 0, got = 0, kept = 0, entries = 0, culprit = MPI_PROC_NULL;
    mln_status_t st = MLN_OK;

    if (!out || !in || !from || !seen) {
        st = MLN_ERR_NOMEM;
        goto agree;
    }
    for (int k = 0; k < n; k++) {
        int *t = out + k * PAIR_FIELDS;
        t[0] = k;
        t[1] = occurrence(p->nbrs, k);
        t[2] = peer_index ? peer_index[k] : -1;
        t[3] = p->send_count[k];
        t[4] = p->recv_count[k];
        entries += p->nbrs[k] != MPI_PROC_NULL;
        p->peer[k] = -1; /* an empty edge: nothing comes, nothing pairs */
    }
    MLN_CHECK(pair_records(p, out, in, from, &got), st, agree);
    kept = got < n ? got : n;
    /* as many records from each rank as I have entries naming it: the first rank that differs
     * (the senders past n are not kept: with more records than entries, the last one's is) */
    for (int i = 0; i < kept + n && culprit == MPI_PROC_NULL; i++) {
        const int j = i < kept ? from[i] : p->nbrs[i - kept];
        if (j != MPI_PROC_NULL && count_of(from, kept, j) != count_of(p->nbrs, n, j))
            culprit = j;
    }
    if (culprit == MPI_PROC_NULL && got != entries)
        culprit = from[n];
    if (culprit != MPI_PROC_NULL) {
        const int theirs = count_of(from, kept, culprit) + (got > n && from[n] == culprit);
        MLN_ERROR("mln_halo_create: rank %d lists this rank %s%d time(s), this rank lists it %d "
                  "time(s) (the neighbour lists are not mutual)",
                  culprit, got > n ? "at least " : "", theirs, count_of(p->nbrs, n, culprit));
        bad = 1;
    }
    for (int i = 0; i < got && !bad; i++) {
        const int *t = in + i * PAIR_FIELDS, j = from[i];
        /* what j's entry t[0] names as its partner among my entries */
        int mine = t[2] >= 0 ? t[2] : nth_entry(p->nbrs, n, j, t[1]);
        if (mine < 0 || mine >= n || p->nbrs[mine] != j || seen[mine] ||
            (peer_index && peer_index[mine] != t[0]) || t[3] != p->recv_count[mine] ||
            t[4] != p->send_count[mine]) {
            MLN_ERROR("mln_halo_create: rank %d's entry %d does not pair with an entry of mine "
                      "(named %d; counts %d/%d)",
                      j, t[0], mine, t[3], t[4]);
            bad = 1;
            break;
        }
        seen[mine] = 1;
        p->peer[mine] = t[0];
    }
agree: /* a bad pairing, or st: memory or an MPI error, which the others must learn too */
    st = mln_halo_agree(p->comm, st != MLN_OK ? st : bad ? MLN_ERR_ARG : MLN_OK);
    free(out);
    free(in);
    free(from);
    free(seen);
    return st;
}
