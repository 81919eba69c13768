/*
 * bcast_hier.c - the single-leader inter-node phase: local rank 0 of every node broadcasts
 * the whole message over ep[0], as the two-level broadcasts of Open MPI (coll/han) and
 * MPICH (smp) do.  The control for sme: the same intra-node phases, one flow per node.
 *
 * T = alpha log(N) + n / b_flow on a per-flow capped WAN.
 */
#include "bcast_int.h"

mln_status_t mln_bcast_hier_inter(const mln_bcast_setup_t *b, char *data, uint64_t bytes,
                                  uint64_t esize, int root_node)
{
    (void)esize;
    if (b->lrank != 0)
        return MLN_OK;
    return mln_bcast_bytes(data, bytes, root_node, b->ep[0], b->yield);
}
