/*
 * bcast.c - mln_bcast: argument checks, the choice of algorithm and its fallbacks (B2), the
 * set-up cached on the communicator (B1), and the two intra-node phases that sme and hier
 * share (B4): the root puts the message into its node's shared window; the inter-node phase
 * (bcast_sme.c, bcast_hier.c) fills the window of every other node; every process copies it
 * out.  Non-contiguous types are packed into the window and unpacked from it (B3).
 *
 * Synchronisation of one call, half h of the window:
 *   root: write h  | node barrier | leaders: inter-node phase into h | node barrier | copy out
 * Call k + 1 uses the other half; call k + 2 writes h again only after both barriers of call
 * k + 1, which every process of the node reaches after its copy of call k: no overwrite, and
 * no barrier at the end of a call.
 */
#include "bcast_int.h"

#include "../p2p/stripe_hooks.h"

#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Inter-node phases, by mln_bcast_algo_t. */
static const struct {
    mln_bcast_algo_t algo;
    mln_bcast_inter_fn inter;
} algorithms[] = {
    {MLN_BCAST_SME, mln_bcast_sme_inter},
    {MLN_BCAST_HIER, mln_bcast_hier_inter},
};

static const char *const algo_names[] = {"auto", "sme", "hier", "mpi"};

/* The set-up cache's keyval: made at the first set-up and kept for the life of the process (not
 * freed by mln_finalize), so that after mln_finalize and mln_init a communicator's cached set-up
 * is found again.  Freeing it at mln_finalize left every set-up cached on a communicator of the
 * caller's in place (attributes stay until their communicator is freed) and made a new one with
 * a new window at the next mln_init: one more shared window per cycle. */
static int keyval = MPI_KEYVAL_INVALID;
static mln_bcast_algo_t last_algo = MLN_BCAST_MPI;
static int last_leaders = 0;
static int setups_alive, windows_alive; /* in the process: mln_bcast_alive, for tests */

int mln_bcast_alive(int *windows)
{
    if (windows != NULL)
        *windows = windows_alive;
    return setups_alive;
}

const char *mln_bcast_algo_name(mln_bcast_algo_t algo)
{
    return (int)algo >= 0 && (size_t)algo < sizeof(algo_names) / sizeof(algo_names[0])
               ? algo_names[algo]
               : NULL;
}

mln_bcast_algo_t mln_bcast_last_algo(int *leaders)
{
    if (leaders)
        *leaders = last_leaders;
    return last_algo;
}

/*
 * MPI_Waitall, or on an oversubscribed node (more processes than cores: `yield`) a loop of
 * MPI_Testall and sched_yield, so that a process with nothing to do leaves the core to those
 * moving data (MPICH spins in its waits; Open MPI has mpi_yield_when_idle for itself).  While
 * striped messages of this process are in flight, the loop moves them too: a peer may wait for
 * one of them before it joins this broadcast (MPI's progress rule; the interposition layer runs
 * programs that do so).  lreqs (may be NULL): the striping engine's requests of the same
 * broadcast, completed too (MLN_REQUEST_NULL where the slot is MPI's).
 */
static mln_status_t wait_all(int n, MPI_Request *reqs, mln_request_t *lreqs, int yield)
{
    mln_status_t st = MLN_OK;
    const int striped = lreqs != NULL || mln_stripe_busy();
    int done = 0;

    if (!yield && !striped) {
        MLN_MPI_CHECK(MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE), st, out);
        goto out;
    }
    for (;;) {
        MLN_MPI_CHECK(MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE), st, out);
        for (int k = 0; lreqs != NULL && k < n; k++) {
            int one = 1;
            if (lreqs[k] != MLN_REQUEST_NULL)
                MLN_CHECK(mln_stripe_test(&lreqs[k], &one, MPI_STATUS_IGNORE), st, out);
            done &= one;
        }
        if (done)
            break;
        if (!striped || !mln_stripe_poll())
            sched_yield();
    }
out:
    return st;
}

static mln_status_t node_barrier(const mln_bcast_setup_t *b)
{
    mln_status_t st = MLN_OK;
    MPI_Request req = MPI_REQUEST_NULL;

    if (!b->yield && !mln_stripe_busy()) {
        MLN_MPI_CHECK(MPI_Barrier(b->node), st, out);
        goto out;
    }
    MLN_MPI_CHECK(MPI_Ibarrier(b->node, &req), st, out);
    MLN_CHECK(wait_all(1, &req, NULL, 1), st, out);
out:
    return st;
}

/*
 * The inter-node broadcast of one chunk over a leaders' communicator (B3), in point-to-point
 * messages of BCAST_SEGMENT bytes: a chunk of one segment goes down a binomial tree (a
 * k-nomial with k = 2, for small chunks); a larger one down a pipelined chain, every node
 * passing each segment on to the next as soon as it is in (bandwidth-optimal for any number
 * of nodes).  Every receive is posted first, so that no segment waits a round trip for its
 * rendezvous.  With nodes numbered site by site and the root on the first node, a chunk
 * crosses a WAN between two sites once, in both shapes.  Our own trees rather than MPI_Bcast:
 * MPI libraries pick scatter + ring allgather for large messages on a few processes (MPICH),
 * which crosses the WAN several times on one flow.
 */
#define BCAST_SEGMENT (512u << 10)
#define BCAST_TAG 1

/* My parent (-1 for the root) and children, farthest first, in the tree for `nseg` segments. */
static int bcast_tree(int rank, int size, int root, uint64_t nseg, int *parent, int *children)
{
    int vr = (rank - root + size) % size, mask = 1, n = 0;

    *parent = -1;
    if (nseg > 1) { /* chain */
        if (vr > 0)
            *parent = (rank - 1 + size) % size;
        if (vr + 1 < size)
            children[n++] = (rank + 1) % size;
        return n;
    }
    while (mask < size) { /* binomial: the parent is my rank without its lowest set bit */
        if (vr & mask) {
            *parent = (vr - mask + root) % size;
            break;
        }
        mask <<= 1;
    }
    for (mask >>= 1; mask > 0; mask >>= 1) /* children below that bit, farthest first */
        if (vr + mask < size)
            children[n++] = (vr + mask + root) % size;
    return n;
}

/* The inter-node broadcast's messages to and from a peer on another site travel as striped
 * messages (mln_stripe_isend/irecv: every segment above MLN_STRIPE_THRESHOLD over the lanes,
 * seed 000), the others as MPI's; slot k of reqs or lreqs holds each. */
mln_status_t mln_bcast_bytes(char *data, uint64_t bytes, int root, MPI_Comm comm, int yield)
{
    mln_status_t st = MLN_OK;
    int rank = 0, size = 0, parent = -1, nchild = 0, children[32], lanes_in = 0, lanes_out[32];
    int any_lanes = 0;
    uint64_t nseg = (bytes + BCAST_SEGMENT - 1) / BCAST_SEGMENT;
    MPI_Request *reqs = NULL;
    mln_request_t *lreqs = NULL;
    size_t nreq = 0, nslots;

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (size == 1 || bytes == 0)
        return MLN_OK;
    nchild = bcast_tree(rank, size, root, nseg, &parent, children);
    if (parent >= 0)
        any_lanes |= lanes_in = mln_stripe_comm_remote(comm, parent);
    for (int c = 0; c < nchild; c++)
        any_lanes |= lanes_out[c] = mln_stripe_comm_remote(comm, children[c]);
    nslots = (size_t)nseg * (size_t)(nchild + 1);
    reqs = malloc(nslots * sizeof(*reqs));
    if (any_lanes)
        lreqs = calloc(nslots, sizeof(*lreqs)); /* MLN_REQUEST_NULL */
    if (reqs == NULL || (any_lanes && lreqs == NULL)) {
        free(reqs);
        return MLN_ERR_NOMEM;
    }
    if (parent >= 0)
        for (uint64_t k = 0; k < nseg; k++) {
            uint64_t off = k * BCAST_SEGMENT,
                     n = bytes - off < BCAST_SEGMENT ? bytes - off : BCAST_SEGMENT;
            reqs[k] = MPI_REQUEST_NULL;
            if (lanes_in)
                MLN_CHECK(mln_stripe_irecv(data + off, (int64_t)n, MPI_BYTE, parent, BCAST_TAG,
                                           comm, &lreqs[k]),
                          st, out);
            else
                MLN_MPI_CHECK(
                    MPI_Irecv(data + off, (int)n, MPI_BYTE, parent, BCAST_TAG, comm, &reqs[k]), st,
                    out);
            nreq = k + 1;
        }
    for (uint64_t k = 0; k < nseg; k++) {
        uint64_t off = k * BCAST_SEGMENT,
                 n = bytes - off < BCAST_SEGMENT ? bytes - off : BCAST_SEGMENT;
        if (parent >= 0)
            MLN_CHECK(wait_all(1, &reqs[k], lreqs ? &lreqs[k] : NULL, yield), st, out);
        for (int c = 0; c < nchild; c++) {
            reqs[nreq] = MPI_REQUEST_NULL;
            if (lanes_out[c])
                MLN_CHECK(mln_stripe_isend(data + off, (int64_t)n, MPI_BYTE, children[c], BCAST_TAG,
                                           comm, &lreqs[nreq]),
                          st, out);
            else
                MLN_MPI_CHECK(MPI_Isend(data + off, (int)n, MPI_BYTE, children[c], BCAST_TAG, comm,
                                        &reqs[nreq]),
                              st, out);
            nreq++;
        }
    }
    MLN_CHECK(wait_all((int)nreq, reqs, lreqs, yield), st, out);
    nreq = 0;
out:
    if (st != MLN_OK) { /* receives still posted are cancelled; nothing is left in flight */
        for (size_t k = 0; parent >= 0 && k < nseg && k < nreq; k++)
            if (reqs[k] != MPI_REQUEST_NULL)
                MPI_Cancel(&reqs[k]);
        MPI_Waitall((int)nreq, reqs, MPI_STATUSES_IGNORE);
        for (size_t k = 0; lreqs != NULL && k < nreq; k++)
            if (lreqs[k] != MLN_REQUEST_NULL) {
                int cancelled = 0;
                mln_stripe_cancel(&lreqs[k], &cancelled);
                mln_stripe_wait(&lreqs[k], MPI_STATUS_IGNORE);
            }
    }
    free(reqs);
    free(lreqs);
    return st;
}

/* ---- the set-up, cached on the communicator ------------------------------------------------ */

static void window_free(mln_bcast_setup_t *b)
{
    if (b->win == MPI_WIN_NULL)
        return;
    MPI_Win_unlock_all(b->win);
    MPI_Win_free(&b->win);
    windows_alive--;
    b->base = NULL;
    b->half = 0;
}

static void setup_free(mln_bcast_setup_t *b)
{
    if (b == NULL)
        return;
    window_free(b);
    for (int j = 0; b->ep != NULL && j < b->leaders; j++)
        if (b->ep[j] != MPI_COMM_NULL)
            MPI_Comm_free(&b->ep[j]);
    if (b->node != MPI_COMM_NULL)
        MPI_Comm_free(&b->node);
    free(b->ep);
    free(b->node_of);
    free(b);
    setups_alive--;
}

static int setup_delete(MPI_Comm comm, int key, void *value, void *extra)
{
    (void)comm;
    (void)key;
    (void)extra;
    setup_free(value);
    return MPI_SUCCESS;
}

/* Node ids: nodes ordered by their lowest rank in comm. */
static mln_status_t number_nodes(mln_bcast_setup_t *b, MPI_Comm comm)
{
    mln_status_t st = MLN_OK;
    int first = b->rank, *firsts = malloc((size_t)b->size * sizeof(int));

    if (firsts == NULL)
        return MLN_ERR_NOMEM;
    MLN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, b->node), st, out);
    MLN_MPI_CHECK(MPI_Allgather(&first, 1, MPI_INT, firsts, 1, MPI_INT, comm), st, out);
    b->nnodes = 0;
    for (int r = 0; r < b->size; r++) { /* firsts[r] == r exactly for each node's first rank */
        b->nnodes += firsts[r] == r;
        b->node_of[r] = -1;
    }
    for (int r = 0, id = 0; r < b->size; r++)
        if (firsts[r] == r)
            b->node_of[r] = id++;
    for (int r = 0; r < b->size; r++)
        b->node_of[r] = b->node_of[firsts[r]];
out:
    free(firsts);
    return st;
}

static mln_status_t setup_new(MPI_Comm comm, const mln_config_t *cfg, mln_bcast_setup_t **out)
{
    mln_status_t st = MLN_OK;
    long cores;
    mln_bcast_setup_t *b = calloc(1, sizeof(*b));

    if (b == NULL)
        return MLN_ERR_NOMEM;
    setups_alive++;
    b->node = MPI_COMM_NULL;
    b->win = MPI_WIN_NULL;
    b->cfg_leaders = cfg->bcast_leaders;
    b->cfg_node_size = cfg->node_size;
    MPI_Comm_rank(comm, &b->rank);
    MPI_Comm_size(comm, &b->size);
    MLN_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, b->rank, MPI_INFO_NULL, &b->node),
                  st, err);
    if (cfg->node_size > 0) { /* emulated nodes: blocks of node_size ranks of a real node */
        MPI_Comm real = b->node;
        int rc;
        MPI_Comm_rank(real, &b->lrank);
        b->node = MPI_COMM_NULL;
        rc = MPI_Comm_split(real, (int)(b->lrank / cfg->node_size), b->rank, &b->node);
        MPI_Comm_free(&real);
        MLN_MPI_CHECK(rc, st, err);
    }
    MPI_Comm_rank(b->node, &b->lrank);
    MPI_Comm_size(b->node, &b->lsize);
    b->node_of = malloc((size_t)b->size * sizeof(int));
    if (b->node_of == NULL) {
        st = MLN_ERR_NOMEM;
        goto err;
    }
    MLN_CHECK(number_nodes(b, comm), st, err);
    MLN_MPI_CHECK(MPI_Allreduce(&b->lsize, &b->min_ppn, 1, MPI_INT, MPI_MIN, comm), st, err);
    b->leaders = cfg->bcast_leaders < b->min_ppn ? (int)cfg->bcast_leaders : b->min_ppn;
    b->ep = malloc((size_t)b->leaders * sizeof(MPI_Comm));
    if (b->ep == NULL) {
        st = MLN_ERR_NOMEM;
        goto err;
    }
    for (int j = 0; j < b->leaders; j++)
        b->ep[j] = MPI_COMM_NULL;
    for (int j = 0; j < b->leaders; j++)
        MLN_MPI_CHECK(
            MPI_Comm_split(comm, b->lrank == j ? 0 : MPI_UNDEFINED, b->node_of[b->rank], &b->ep[j]),
            st, err);
    cores = sysconf(_SC_NPROCESSORS_ONLN);
    b->yield = cores > 0 && b->lsize > cores;
    MLN_DEBUG("mln_bcast set-up: %d ranks, %d nodes, %d to %d per node, %d leaders per node%s",
              b->size, b->nnodes, b->min_ppn, b->lsize, b->leaders,
              b->yield ? "; more processes than cores here: waits yield" : "");
    *out = b;
    return MLN_OK;
err:
    setup_free(b);
    return st;
}

/*
 * The set-up of comm: from its attribute, else made now (collective) and cached.  One cached
 * under other tunables (an mln_init since, with another MLN_BCAST_LEADERS or MLN_NODE_SIZE) is
 * freed and made again: every rank of comm has the same tunables, so all do it in the same call.
 */
static mln_status_t setup_get(MPI_Comm comm, const mln_config_t *cfg, mln_bcast_setup_t **out)
{
    mln_status_t st = MLN_OK;
    int flag = 0;

    if (keyval == MPI_KEYVAL_INVALID)
        MLN_MPI_CHECK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, setup_delete, &keyval, NULL),
                      st, out);
    MLN_MPI_CHECK(MPI_Comm_get_attr(comm, keyval, out, &flag), st, out);
    if (flag && (*out)->cfg_leaders == cfg->bcast_leaders &&
        (*out)->cfg_node_size == cfg->node_size)
        return MLN_OK;
    if (flag) {
        MLN_DEBUG("mln_bcast: the set-up cached on the communicator was made for other tunables: "
                  "made again");
        MLN_MPI_CHECK(MPI_Comm_delete_attr(comm, keyval), st, out); /* setup_delete frees it */
    }
    MLN_CHECK(setup_new(comm, cfg, out), st, out);
    if (MPI_Comm_set_attr(comm, keyval, *out) != MPI_SUCCESS) {
        setup_free(*out);
        MLN_ERROR("mln_bcast: cannot cache the set-up on the communicator");
        st = MLN_ERR_MPI;
    }
out:
    return st;
}

/* Both halves of the window hold at least `bytes` (collective over the node). */
static mln_status_t window_reserve(mln_bcast_setup_t *b, uint64_t bytes)
{
    mln_status_t st = MLN_OK;
    MPI_Aint size = 0;
    int disp = 0;
    uint64_t half = bytes < 4096 ? 4096 : (bytes + 4095) / 4096 * 4096;

    if (b->win != MPI_WIN_NULL && b->half >= bytes)
        return MLN_OK;
    if (b->win != MPI_WIN_NULL) /* nobody reads the old one any more */
        MLN_MPI_CHECK(MPI_Barrier(b->node), st, out);
    window_free(b);
    MLN_MPI_CHECK(MPI_Win_allocate_shared(b->lrank == 0 ? (MPI_Aint)(2 * half) : 0, 1,
                                          MPI_INFO_NULL, b->node, &b->base, &b->win),
                  st, out);
    windows_alive++;
    /* Local rank 0 holds the memory; its address here (SimGrid SMPI returns the segment's base
     * for every rank, which is rank 0's: the same answer). */
    MLN_MPI_CHECK(MPI_Win_shared_query(b->win, 0, &size, &disp, &b->base), st, out);
    MLN_MPI_CHECK(MPI_Win_lock_all(MPI_MODE_NOCHECK, b->win), st, out);
    b->half = half;
    b->parity = 0;
out:
    return st;
}

/* ---- the call ------------------------------------------------------------------------------ */

static mln_status_t mpi_bcast(void *buf, int64_t count, MPI_Datatype dt, int root, MPI_Comm comm)
{
    mln_status_t st = MLN_OK;
    MPI_Aint lb = 0, extent = 0;
    int64_t done = 0;

    last_algo = MLN_BCAST_MPI;
    last_leaders = 0;
    if (count <= INT_MAX) { /* one call, nothing else: see the small path below */
        MLN_MPI_CHECK(MPI_Bcast(buf, (int)count, dt, root, comm), st, out);
        return MLN_OK;
    }
    MPI_Type_get_extent(dt, &lb, &extent);
    do { /* in pieces that fit an int count */
        int n = (int)(count - done < INT_MAX ? count - done : INT_MAX);
        MLN_MPI_CHECK(MPI_Bcast((char *)buf + done * extent, n, dt, root, comm), st, out);
        done += n;
    } while (done < count);
out:
    return st;
}

/*
 * The small path.  Below the threshold mln_bcast is MPI_Bcast and must cost no more.  On a
 * node where processes wait for a core every call and cache line touched before MPI_Bcast is
 * paid again by each of them: with 16 ranks on 2 cores, the four MPI queries before MPI_Bcast
 * (check_args' three, and MPI_Type_get_extent here) made a 1K broadcast 5.5-8% slower than
 * MPI_Bcast alone (docs/RESULTS.md).  So the common case
 * is checked from caches that need no MPI call: the size of a predefined type (small_types,
 * filled once) and the size of an intracommunicator that passed check_args before
 * (small_comms).  An entry carries an attribute whose delete callback drops it when the
 * communicator is freed, so a handle that MPI reuses is never taken for the old communicator.
 * Anything else (a derived type, an unseen communicator, a bad argument) takes the full path.
 */
enum { SMALL_COMMS = 8 };
static struct {
    MPI_Comm comm; /* MPI_COMM_NULL: free */
    int size;
} small_comms[SMALL_COMMS];
static int small_keyval = MPI_KEYVAL_INVALID;
static int small_victim; /* next entry to replace when all are taken */

static MPI_Datatype small_types[22];
static int small_type_sizes[22];
static int small_ntypes; /* 0 until small_types_fill */

static int small_delete(MPI_Comm comm, int kv, void *value, void *extra)
{
    (void)kv;
    (void)value;
    (void)extra;
    for (int i = 0; i < SMALL_COMMS; i++)
        if (small_comms[i].comm == comm)
            small_comms[i].comm = MPI_COMM_NULL;
    return MPI_SUCCESS;
}

static void small_types_fill(void)
{
    const MPI_Datatype types[] = {
        MPI_BYTE,     MPI_CHAR,           MPI_SIGNED_CHAR, MPI_UNSIGNED_CHAR,
        MPI_SHORT,    MPI_UNSIGNED_SHORT, MPI_INT,         MPI_UNSIGNED,
        MPI_LONG,     MPI_UNSIGNED_LONG,  MPI_LONG_LONG,   MPI_UNSIGNED_LONG_LONG,
        MPI_FLOAT,    MPI_DOUBLE,         MPI_INT8_T,      MPI_INT16_T,
        MPI_INT32_T,  MPI_INT64_T,        MPI_UINT8_T,     MPI_UINT16_T,
        MPI_UINT32_T, MPI_UINT64_T,
    };
    int n = 0;

    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if (MPI_Type_size(types[i], &small_type_sizes[n]) == MPI_SUCCESS)
            small_types[n++] = types[i];
    small_ntypes = n;
}

/* comm passed check_args with `size` processes: remember it (a failure only costs speed). */
static void small_remember(MPI_Comm comm, int size)
{
    int i;

    if (small_ntypes == 0)
        small_types_fill();
    if (small_keyval == MPI_KEYVAL_INVALID &&
        MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, small_delete, &small_keyval, NULL) !=
            MPI_SUCCESS)
        return;
    for (i = 0; i < SMALL_COMMS && small_comms[i].comm != MPI_COMM_NULL; i++)
        if (small_comms[i].comm == comm)
            return;
    if (i == SMALL_COMMS) /* all taken: the old entry's attribute stays, harmless */
        i = small_victim++ % SMALL_COMMS;
    small_comms[i].comm = MPI_COMM_NULL;
    /* set before the entry: replacing an earlier attribute of ours runs small_delete */
    if (MPI_Comm_set_attr(comm, small_keyval, NULL) != MPI_SUCCESS)
        return;
    small_comms[i].size = size;
    small_comms[i].comm = comm;
}

/* 1 and *st set when the call went to MPI_Bcast here; 0: take the full path. */
static int small_bcast(void *buf, int64_t count, MPI_Datatype dt, int root, MPI_Comm comm,
                       const mln_config_t *cfg, mln_status_t *st)
{
    int esize = -1, size = -1;

    if (count < 0 || count > INT_MAX || root < 0 || comm == MPI_COMM_NULL)
        return 0;
    for (int i = 0; i < small_ntypes && esize < 0; i++)
        if (small_types[i] == dt)
            esize = small_type_sizes[i];
    for (int i = 0; i < SMALL_COMMS && size < 0; i++)
        if (small_comms[i].comm == comm)
            size = small_comms[i].size;
    if (esize < 0 || root >= size || (buf == NULL && count > 0 && esize > 0))
        return 0;
    if (cfg->bcast_algo != MLN_BCAST_MPI &&
        (uint64_t)count * (uint64_t)esize >= cfg->bcast_threshold && esize > 0)
        return 0;
    if (cfg->log_level >= MLN_LOG_DEBUG) /* MLN_DEBUG's test, without its call */
        mln_log_write(MLN_LOG_DEBUG, __FILE__, __LINE__,
                      "mln_bcast: %llu bytes, under MLN_BCAST_THRESHOLD (%llu) or algo mpi: "
                      "MPI_Bcast",
                      (unsigned long long)count * (unsigned long long)esize,
                      (unsigned long long)cfg->bcast_threshold);
    *st = mpi_bcast(buf, count, dt, root, comm);
    return 1;
}

/* small_keyval stays for the life of the process, as `keyval` does: a new one at each mln_init
 * would leave one more attribute of the last one on every communicator remembered. */
static void small_fini(void)
{
    void *value = NULL;
    int flag = 0;

    /* MPI_Finalize need not delete MPI_COMM_WORLD's attributes (MPI keeps the record) */
    if (small_keyval != MPI_KEYVAL_INVALID &&
        MPI_Comm_get_attr(MPI_COMM_WORLD, small_keyval, &value, &flag) == MPI_SUCCESS && flag)
        MPI_Comm_delete_attr(MPI_COMM_WORLD, small_keyval);
    for (int i = 0; i < SMALL_COMMS; i++)
        small_comms[i].comm = MPI_COMM_NULL;
    small_ntypes = 0;
}

/* The root's data into the window (packed when not contiguous), or the window into buf. */
static mln_status_t stage(void *buf, int64_t count, MPI_Datatype dt, int packed, char *win,
                          uint64_t bytes, MPI_Comm comm, int into_window)
{
    mln_status_t st = MLN_OK;
    int pos = 0;

    if (!packed) {
        if (into_window)
            memcpy(win, buf, (size_t)bytes);
        else
            memcpy(buf, win, (size_t)bytes);
        return MLN_OK;
    }
    if (into_window)
        MLN_MPI_CHECK(MPI_Pack(buf, (int)count, dt, win, (int)bytes, &pos, comm), st, out);
    else
        MLN_MPI_CHECK(MPI_Unpack(win, (int)bytes, &pos, buf, (int)count, dt, comm), st, out);
out:
    return st;
}

static mln_status_t two_level(mln_bcast_setup_t *b, mln_bcast_inter_fn inter, void *buf,
                              int64_t count, MPI_Datatype dt, uint64_t bytes, uint64_t esize,
                              int packed, int root, MPI_Comm comm)
{
    mln_status_t st = MLN_OK;
    char *win;

    MLN_CHECK(window_reserve(b, bytes), st, out);
    win = b->base + (uint64_t)b->parity * b->half;
    b->parity ^= 1;
    if (b->rank == root)
        MLN_CHECK(stage(buf, count, dt, packed, win, bytes, comm, 1), st, out);
    MLN_MPI_CHECK(MPI_Win_sync(b->win), st, out);
    MLN_CHECK(node_barrier(b), st, out);
    MLN_MPI_CHECK(MPI_Win_sync(b->win), st, out);
    MLN_CHECK(inter(b, win, bytes, esize, b->node_of[root]), st, out);
    MLN_MPI_CHECK(MPI_Win_sync(b->win), st, out);
    MLN_CHECK(node_barrier(b), st, out);
    MLN_MPI_CHECK(MPI_Win_sync(b->win), st, out);
    if (b->rank != root)
        MLN_CHECK(stage(buf, count, dt, packed, win, bytes, comm, 0), st, out);
out:
    return st;
}

static mln_status_t check_args(const void *buf, int64_t count, MPI_Datatype dt, int root,
                               MPI_Comm comm, int *size, int *csize_out)
{
    int inter = 0, csize = 0;

    if (comm == MPI_COMM_NULL || dt == MPI_DATATYPE_NULL) {
        MLN_ERROR("mln_bcast: %s is null", comm == MPI_COMM_NULL ? "the communicator" : "the type");
        return MLN_ERR_ARG;
    }
    MPI_Comm_test_inter(comm, &inter);
    if (inter) {
        MLN_ERROR("mln_bcast: intercommunicators are not supported");
        return MLN_ERR_UNSUPPORTED;
    }
    MPI_Comm_size(comm, &csize);
    MPI_Type_size(dt, size);
    if (count < 0 || root < 0 || root >= csize || (buf == NULL && count > 0 && *size > 0)) {
        MLN_ERROR("mln_bcast: invalid argument (count %lld, root %d of %d, buffer %p)",
                  (long long)count, root, csize, buf);
        return MLN_ERR_ARG;
    }
    *csize_out = csize;
    return MLN_OK;
}

mln_status_t mln_bcast(void *buf, int64_t count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    mln_status_t st = MLN_OK;
    mln_context_t *ctx = mln_context();
    mln_bcast_setup_t *b = NULL;
    mln_bcast_algo_t algo;
    mln_bcast_inter_fn inter = NULL;
    int esize = 0, csize = 0, packed;
    MPI_Count offset = 0;
    uint64_t bytes;

    if (ctx == NULL) {
        MLN_ERROR("mln_bcast before mln_init");
        return MLN_ERR_NOT_INIT;
    }
    if (small_bcast(buf, count, datatype, root, comm, &ctx->cfg, &st))
        return st;
    MLN_CHECK(check_args(buf, count, datatype, root, comm, &esize, &csize), st, out);
    small_remember(comm, csize);
    bytes = (uint64_t)count * (uint64_t)esize;
    algo = ctx->cfg.bcast_algo == MLN_BCAST_AUTO ? MLN_BCAST_SME
                                                 : (mln_bcast_algo_t)ctx->cfg.bcast_algo;
    if (algo == MLN_BCAST_MPI)
        return mpi_bcast(buf, count, datatype, root, comm);
    if (bytes < ctx->cfg.bcast_threshold || esize == 0) {
        MLN_DEBUG("mln_bcast: %llu bytes, under MLN_BCAST_THRESHOLD (%llu): MPI_Bcast",
                  (unsigned long long)bytes, (unsigned long long)ctx->cfg.bcast_threshold);
        return mpi_bcast(buf, count, datatype, root, comm);
    }
    packed = !mln_type_contiguous(datatype, count, &offset);
    if (packed) {
        int psize = 0;
        if (count > INT_MAX || MPI_Pack_size((int)count, datatype, comm, &psize) != MPI_SUCCESS ||
            (uint64_t)psize < bytes) {
            MLN_ERROR("mln_bcast: a non-contiguous type is packed, and %llu bytes are over what "
                      "MPI_Pack can handle",
                      (unsigned long long)bytes);
            return MLN_ERR_UNSUPPORTED;
        }
    }
    MLN_CHECK(setup_get(comm, &ctx->cfg, &b), st, out);
    if (b->nnodes == 1) {
        MLN_DEBUG("mln_bcast: one node: MPI_Bcast");
        return mpi_bcast(buf, count, datatype, root, comm);
    }
    if (algo == MLN_BCAST_SME && b->leaders == 1) {
        MLN_DEBUG("mln_bcast: 1 leader per node (MLN_BCAST_LEADERS %lld, fewest ranks on a node "
                  "%d): hier",
                  (long long)ctx->cfg.bcast_leaders, b->min_ppn);
        algo = MLN_BCAST_HIER;
    }
    for (size_t i = 0; i < sizeof(algorithms) / sizeof(algorithms[0]); i++)
        if (algorithms[i].algo == algo)
            inter = algorithms[i].inter;
    /* contiguous: the bytes start at the type's true lower bound */
    MLN_CHECK(two_level(b, inter, packed ? buf : (char *)buf + offset, count, datatype, bytes,
                        (uint64_t)esize, packed, root, comm),
              st, out);
    last_algo = algo;
    last_leaders = algo == MLN_BCAST_SME ? b->leaders : 1;
out:
    return st;
}

/*
 * The keyvals stay (see `keyval`): set-ups cached on the caller's communicators live until
 * those are freed, and are found again after the next mln_init.  A set-up refers to nothing
 * mln_finalize frees (its communicators, window and arrays are its own; it keeps the tunables
 * it was made for as values), so its delete callback may run at any time, library up or down.
 */
void mln_bcast_fini(void)
{
    void *cached = NULL;
    int flag = 0;

    small_fini();
    if (keyval == MPI_KEYVAL_INVALID)
        return;
    MPI_Comm_get_attr(MPI_COMM_WORLD, keyval, &cached, &flag);
    if (flag) /* freed here, while MPI still runs (MPI_Finalize need not free it) */
        MPI_Comm_delete_attr(MPI_COMM_WORLD, keyval);
}

static void bcast_module_fini(mln_context_t *ctx)
{
    (void)ctx;
    mln_bcast_fini();
}

const mln_module_t mln_module_bcast = {.name = "bcast", .init = NULL, .fini = bcast_module_fini};
