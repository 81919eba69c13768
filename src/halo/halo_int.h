/*
 * halo_int.h - internals of the halo plan (src/halo): the plan, and the table of modes that
 * halo_modes.c implements.  docs/HALO.md describes the design; ALGORITHMS.md section 3 (H1-H5)
 * the requirements.
 */
#ifndef MLN_HALO_INT_H
#define MLN_HALO_INT_H

#include "mln_core.h"

#include <stdint.h>

struct mln_halo_plan {
    MPI_Comm comm; /* a duplicate of the caller's: tags and windows of its own */
    int rank;
    mln_halo_mode_t mode; /* the mode that runs (after auto: its choice) */
    const char *why;      /* how the mode was chosen: "asked for", "MLN_HALO_MODE", "auto" */
    int nnbrs;
    int *nbrs;       /* [nnbrs]; MPI_PROC_NULL: an empty edge */
    int *peer;       /* [nnbrs]: entry k pairs with entry peer[k] of nbrs[k]'s list (-1: empty) */
    int *send_count; /* [nnbrs] elements (fit an int) */
    int *recv_count;
    MPI_Datatype type;   /* a duplicate */
    int esize;           /* bytes of one element */
    int contiguous;      /* count elements are count * esize bytes from the address: RMA usable */
    MPI_Request *reqs;   /* [2 * nnbrs] */
    int64_t iter;        /* exchanges since the mode was set up: its parity picks the half */
    mln_status_t failed; /* an exchange failed (MLN_OK: none): the plan refuses any other */
    int64_t failed_iter; /* which one */
    int64_t iters_auto;  /* MLN_HALO_AUTO_ITERS */

    /* MLN_HALO_FAULT, a test hook (docs/HALO.md): fault_rank fails the set-up of fault_mode
     * (AUTO: of every mode) before the mode's first collective call, or its exchange fault_iter
     * after the data moved; fault_rank -1: no fault.  fail_setup: the set-up running now fails
     * here (mode_start sets it). */
    int fault_rank;
    mln_halo_mode_t fault_mode;
    int64_t fault_iter; /* -1: a set-up fault */
    int fail_setup;

    /* neighbor: a distributed graph of the non-empty entries, receive edges in entry order,
     * send edges ordered so that each pairs with its partner's receive edge (docs/HALO.md) */
    MPI_Comm graph;
    int nedges;
    int *send_entry; /* [nedges]: the entry of the e-th send edge */
    int *w_counts;   /* [2 * nedges]: send counts, then receive counts */
    MPI_Aint *w_displs;
    MPI_Datatype *w_types;

    /* RMA: the windows (two by parity for pscw, else one) and where things are in them */
    MPI_Win win[2];
    char *base[2];
    MPI_Aint half;   /* bytes of one parity's receive slots in my window */
    MPI_Aint *off;   /* [nnbrs]: byte offset of my receive slot k within a half */
    MPI_Aint ctr;    /* rma-passive: byte offset of my counters[2][nnbrs] (int64) */
    int64_t *target; /* [4 * nnbrs]: for entry k, the partner's slot: offset, half, counter
                        of parity 0, counter stride between parities */
    MPI_Group group; /* the distinct neighbours (pscw) */
    int windows;     /* windows allocated */

    /* what auto found, by mode */
    mln_halo_state_t state[MLN_HALO_NMODES];
    double seconds[MLN_HALO_NMODES];
};

/* One mode: set-up (collective over comm: the same status on every rank, and on failure
 * nothing left), one exchange, tear-down (collective).  A mode's resources exist between a
 * successful setup and its teardown. */
typedef struct mln_halo_ops {
    mln_status_t (*setup)(mln_halo_plan_t *p);
    mln_status_t (*exchange)(mln_halo_plan_t *p, const void *const *sendbufs,
                             void *const *recvbufs);
    void (*teardown)(mln_halo_plan_t *p);
} mln_halo_ops_t;

/* The operations of `mode` (P2P .. RMA_SINGLE); NULL for AUTO or out of range. */
const mln_halo_ops_t *mln_halo_ops(mln_halo_mode_t mode);

/* Collective over the plan's communicator: fills p->peer, entry k's partner among the entries
 * of nbrs[k]'s list (peer_index NULL: the occurrence rule), or refuses the lists on every rank
 * (MLN_ERR_ARG) when they are not mutual (halo_pairs.c). */
mln_status_t mln_halo_pair(mln_halo_plan_t *p, const int *peer_index);

/* Collective over comm: the outcome of a set-up step on every rank (the highest status code),
 * so that a step that failed on one rank fails on all before the next call that needs them
 * all (halo_modes.c has the rule). */
mln_status_t mln_halo_agree(MPI_Comm comm, mln_status_t st);

/* 1 for the modes that put into a window (need a contiguous type). */
static inline int mln_halo_is_rma(mln_halo_mode_t mode)
{
    return mode >= MLN_HALO_RMA_FENCE && mode <= MLN_HALO_RMA_SINGLE;
}

#endif /* MLN_HALO_INT_H */
