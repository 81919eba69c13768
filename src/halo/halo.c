/*
 * halo.c - the halo plan (docs/HALO.md): creation with the pairing agreed once, and the p2p
 * mode.  Work in progress (issue 6): neighbor, the RMA modes and auto are refused with
 * MLN_ERR_UNSUPPORTED until they are built.
 */
#include "mln_core.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

struct mln_halo_plan {
    MPI_Comm comm; /* a duplicate of the caller's: tags of its own */
    mln_halo_mode_t mode;
    int nnbrs;
    int *nbrs;       /* [nnbrs] */
    int *peer;       /* [nnbrs]: entry k pairs with entry peer[k] of nbrs[k]'s list */
    int *send_count; /* [nnbrs] elements (fit an int) */
    int *recv_count;
    MPI_Datatype type; /* a duplicate */
    MPI_Request *reqs; /* [2 * nnbrs] */
};

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

/*
 * Every entry tells its neighbour which of the neighbour's entries it pairs with and its
 * counts; each rank checks what it got (mutual pairing, matching counts, every entry paired
 * once), then all agree on the outcome, so a bad plan fails on every rank (MLN_ERR_ARG).
 */
static mln_status_t agree_pairs(mln_halo_plan_t *p, const int *peer_index)
{
    const int n = p->nnbrs;
    int *out = calloc((size_t)n * PAIR_FIELDS + 1, sizeof(int));
    int *in = calloc((size_t)n * PAIR_FIELDS + 1, sizeof(int));
    int *seen = calloc((size_t)n + 1, sizeof(int));
    MPI_Request *reqs = calloc((size_t)2 * n + 1, sizeof(MPI_Request));
    int bad = 0, any_bad = 0;
    mln_status_t st = MLN_OK;

    if (!out || !in || !seen || !reqs) {
        st = MLN_ERR_NOMEM;
        bad = 1;
        goto agree;
    }
    for (int k = 0; k < n; k++) {
        int *t = out + k * PAIR_FIELDS;
        t[0] = k;
        t[1] = occurrence(p->nbrs, k);
        t[2] = peer_index ? peer_index[k] : -1;
        t[3] = p->send_count[k];
        t[4] = p->recv_count[k];
        MLN_MPI_CHECK(MPI_Irecv(in + k * PAIR_FIELDS, PAIR_FIELDS, MPI_INT, p->nbrs[k], PAIR_TAG,
                                p->comm, &reqs[k]),
                      st, failed);
    }
    for (int k = 0; k < n; k++)
        MLN_MPI_CHECK(MPI_Isend(out + k * PAIR_FIELDS, PAIR_FIELDS, MPI_INT, p->nbrs[k], PAIR_TAG,
                                p->comm, &reqs[n + k]),
                      st, failed);
    MLN_MPI_CHECK(MPI_Waitall(2 * n, reqs, MPI_STATUSES_IGNORE), st, failed);
    for (int k = 0; k < n && !bad; k++) {
        const int *t = in + k * PAIR_FIELDS, j = p->nbrs[k];
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
    goto agree;
failed: /* an MPI error: the others must not wait for this rank in the agreement */
    bad = 1;
agree:
    if (MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, p->comm) != MPI_SUCCESS)
        any_bad = 1;
    if (any_bad && st == MLN_OK)
        st = MLN_ERR_ARG;
    free(out);
    free(in);
    free(seen);
    free(reqs);
    return st;
}

static const char *const mode_names[] = {"auto",     "p2p",         "neighbor",  "rma-fence",
                                         "rma-pscw", "rma-passive", "rma-single"};

const char *mln_halo_mode_name(mln_halo_mode_t mode)
{
    return (int)mode >= 0 && (size_t)mode < sizeof(mode_names) / sizeof(mode_names[0])
               ? mode_names[mode]
               : NULL;
}

mln_halo_mode_t mln_halo_mode(const mln_halo_plan_t *plan)
{
    return plan != NULL ? plan->mode : MLN_HALO_AUTO;
}

void mln_halo_free(mln_halo_plan_t **plan)
{
    mln_halo_plan_t *p = plan != NULL ? *plan : NULL;

    if (p == NULL)
        return;
    if (p->comm != MPI_COMM_NULL)
        MPI_Comm_free(&p->comm);
    if (p->type != MPI_DATATYPE_NULL)
        MPI_Type_free(&p->type);
    free(p->nbrs);
    free(p->peer);
    free(p->send_count);
    free(p->recv_count);
    free(p->reqs);
    free(p);
    *plan = NULL;
}

/* The arguments every rank can check alone (each rank then agrees with the others). */
static int args_bad(MPI_Comm comm, int nnbrs, const int *nbrs, const int64_t *send_counts,
                    const int64_t *recv_counts, MPI_Datatype type, mln_halo_mode_t mode)
{
    int size = 0, inter = 0;

    if (comm == MPI_COMM_NULL || type == MPI_DATATYPE_NULL || nnbrs < 0 ||
        mln_halo_mode_name(mode) == NULL || (nnbrs > 0 && (!nbrs || !send_counts || !recv_counts)))
        return 1;
    MPI_Comm_test_inter(comm, &inter);
    if (inter)
        return 1;
    MPI_Comm_size(comm, &size);
    for (int k = 0; k < nnbrs; k++)
        if (nbrs[k] < 0 || nbrs[k] >= size || send_counts[k] < 0 || recv_counts[k] < 0 ||
            send_counts[k] > INT_MAX || recv_counts[k] > INT_MAX)
            return 1;
    return 0;
}

/* A plan with room for n entries (NULL if memory is short). */
static mln_halo_plan_t *plan_new(int n, mln_halo_mode_t mode)
{
    mln_halo_plan_t *p = calloc(1, sizeof(*p));

    if (p == NULL)
        return NULL;
    p->comm = MPI_COMM_NULL;
    p->type = MPI_DATATYPE_NULL;
    p->mode = mode;
    p->nnbrs = n;
    p->nbrs = calloc((size_t)n + 1, sizeof(int));
    p->peer = calloc((size_t)n + 1, sizeof(int));
    p->send_count = calloc((size_t)n + 1, sizeof(int));
    p->recv_count = calloc((size_t)n + 1, sizeof(int));
    p->reqs = calloc((size_t)2 * n + 1, sizeof(MPI_Request));
    if (!p->nbrs || !p->peer || !p->send_count || !p->recv_count || !p->reqs)
        mln_halo_free(&p);
    return p;
}

mln_status_t mln_halo_create(MPI_Comm comm, int nnbrs, const int *nbrs, const int *peer_index,
                             const int64_t *send_counts, const int64_t *recv_counts,
                             MPI_Datatype type, mln_halo_mode_t mode, mln_halo_plan_t **plan)
{
    mln_halo_plan_t *p = NULL;
    int bad, any_bad = 0;
    mln_status_t st = MLN_OK;

    if (plan == NULL || comm == MPI_COMM_NULL) { /* nobody to agree with */
        MLN_ERROR("mln_halo_create: %s is NULL", plan == NULL ? "plan" : "the communicator");
        return MLN_ERR_ARG;
    }
    bad = args_bad(comm, nnbrs, nbrs, send_counts, recv_counts, type, mode);
    if (!bad && mode == MLN_HALO_P2P && (p = plan_new(nnbrs, mode)) == NULL)
        bad = 2;
    /* every rank learns the outcome before any other collective call */
    MLN_MPI_CHECK(MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, comm), st, out);
    if (any_bad) {
        if (bad == 2)
            MLN_ERROR("mln_halo_create: out of memory for %d neighbours", nnbrs);
        else
            MLN_ERROR("mln_halo_create: invalid arguments on %s (neighbours, counts, type, "
                      "mode or an intercommunicator)",
                      bad ? "this rank" : "another rank");
        st = bad == 2 ? MLN_ERR_NOMEM : MLN_ERR_ARG;
        goto out;
    }
    if (mode != MLN_HALO_P2P) {
        MLN_ERROR("mln_halo_create: mode %s is not implemented yet (issue 6)",
                  mln_halo_mode_name(mode));
        return MLN_ERR_UNSUPPORTED;
    }
    for (int k = 0; k < nnbrs; k++) {
        p->nbrs[k] = nbrs[k];
        p->send_count[k] = (int)send_counts[k];
        p->recv_count[k] = (int)recv_counts[k];
    }
    MLN_MPI_CHECK(MPI_Comm_dup(comm, &p->comm), st, out);
    MLN_MPI_CHECK(MPI_Type_dup(type, &p->type), st, out);
    MLN_CHECK(agree_pairs(p, peer_index), st, out);
    *plan = p;
    return MLN_OK;
out:
    mln_halo_free(&p);
    return st;
}

mln_status_t mln_halo_exchange(mln_halo_plan_t *p, const void *const *sendbufs,
                               void *const *recvbufs)
{
    mln_status_t st = MLN_OK;
    const int n = p != NULL ? p->nnbrs : 0;

    if (p == NULL || (n > 0 && (sendbufs == NULL || recvbufs == NULL))) {
        MLN_ERROR("mln_halo_exchange: %s is NULL", p == NULL ? "the plan" : "a buffer list");
        return MLN_ERR_ARG;
    }
    /* tag = the receiving entry's index: a pair is found by it even when a rank repeats */
    for (int k = 0; k < n; k++)
        MLN_MPI_CHECK(
            MPI_Irecv(recvbufs[k], p->recv_count[k], p->type, p->nbrs[k], k, p->comm, &p->reqs[k]),
            st, out);
    for (int k = 0; k < n; k++)
        MLN_MPI_CHECK(MPI_Isend(sendbufs[k], p->send_count[k], p->type, p->nbrs[k], p->peer[k],
                                p->comm, &p->reqs[n + k]),
                      st, out);
    MLN_MPI_CHECK(MPI_Waitall(2 * n, p->reqs, MPI_STATUSES_IGNORE), st, out);
out:
    return st;
}
