/*
 * bcast_int.h - internals of mln_bcast (src/bcast): the set-up cached on a communicator, the
 * shared-memory window of a node, and the table of inter-node phases.  ALGORITHMS.md section 2
 * (B1-B5) and docs/BCAST.md describe the design.
 */
#ifndef MLN_BCAST_INT_H
#define MLN_BCAST_INT_H

#include "mln_core.h"

#include <stdint.h>

/* What mln_bcast sets up once per communicator (B1) and caches as an attribute. */
typedef struct mln_bcast_setup {
    MPI_Comm node; /* the processes of my node */
    int rank, size;
    int lrank, lsize; /* my rank in node, its size */
    int nnodes;       /* nodes of the communicator */
    int min_ppn;      /* fewest processes on a node */
    int *node_of;     /* rank in the communicator -> node id (nodes ordered by lowest rank) */
    int leaders;      /* L = min(MLN_BCAST_LEADERS, min_ppn) */
    int yield;        /* my node has more processes than cores: waits yield the core */
    MPI_Comm *ep;     /* ep[j], j < leaders: local rank j of every node, ranked by node id;
                         MPI_COMM_NULL where I am not local rank j */
    int64_t cfg_leaders, cfg_node_size; /* the tunables it was made for (MLN_BCAST_LEADERS,
                                           MLN_NODE_SIZE): made again when they change */

    /* The node's window: two halves of `half` bytes, used by calls in turn, so that a call
     * never writes where the previous one may still be read (B4).  Allocated by local rank 0;
     * every process finds its base through MPI_Win_shared_query(rank 0). */
    MPI_Win win;
    char *base;
    uint64_t half;
    int parity;
} mln_bcast_setup_t;

/* An inter-node phase: moves `bytes` (elements of `esize` bytes) that sit in the root node's
 * window at `data` into the same place of every other node's window.  Called on every
 * process; only the leaders communicate.  root_node: the node id of the root. */
typedef mln_status_t (*mln_bcast_inter_fn)(const mln_bcast_setup_t *b, char *data, uint64_t bytes,
                                           uint64_t esize, int root_node);

mln_status_t mln_bcast_sme_inter(const mln_bcast_setup_t *b, char *data, uint64_t bytes,
                                 uint64_t esize, int root_node);
mln_status_t mln_bcast_hier_inter(const mln_bcast_setup_t *b, char *data, uint64_t bytes,
                                  uint64_t esize, int root_node);

/* Broadcast of `bytes` bytes at `data` from `root` over a leaders' communicator: a binomial tree
 * of point-to-point messages in 1 MiB segments (bcast.c); `yield`: waits leave the core to
 * others between tests. */
mln_status_t mln_bcast_bytes(char *data, uint64_t bytes, int root, MPI_Comm comm, int yield);

/* Set-ups (one per communicator) and shared windows alive in this process, for tests: made and
 * not yet freed, whatever mln_init cycle made them. */
int mln_bcast_alive(int *windows);

/* At mln_finalize: frees the set-up cached on MPI_COMM_WORLD; the keyvals and the set-ups on
 * other communicators stay (freed with their communicators, found again after mln_init). */
void mln_bcast_fini(void);

#endif /* MLN_BCAST_INT_H */
