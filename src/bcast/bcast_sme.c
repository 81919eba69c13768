/*
 * bcast_sme.c - the multi-endpoint inter-node phase (seed 001, requirement B3): the message is
 * cut into L chunks on element boundaries (the last takes the remainder) and chunk j is
 * broadcast between the nodes by the j-th process of every node, over ep[j], all L at once.
 * Each chunk goes down a segmented binomial tree of point-to-point messages (mln_bcast_bytes),
 * the same on every MPI.
 *
 * With a per-flow cap on the WAN (the seed-000 conditions) L leaders per node are L flows on
 * the bottleneck: T = alpha log(N) + (n / L) / b_flow, against n / b_flow for one leader.
 */
#include "bcast_int.h"

mln_status_t mln_bcast_sme_inter(const mln_bcast_setup_t *b, char *data, uint64_t bytes,
                                 uint64_t esize, int root_node)
{
    const uint64_t count = bytes / esize, per = count / (uint64_t)b->leaders;
    const int j = b->lrank;

    if (j >= b->leaders) /* not a leader: the chunks arrive in the window */
        return MLN_OK;
    uint64_t off = (uint64_t)j * per * esize;
    uint64_t len = j == b->leaders - 1 ? bytes - off : per * esize;
    return mln_bcast_bytes(data + off, len, root_node, b->ep[j], b->yield);
}
