/*
 * preload_gcoll.c - collectives on communicators that span sites (grid mode; docs/PRELOAD.md).
 *
 * Hierarchical, as GridMPI and MPICH-G2 did: inside a site the site's own MPI (its
 * nonblocking collectives on the communicator's private `local`), between sites one message
 * per pair of site leaders (or per pair of ranks for all-to-all) through the gateways, which
 * stripe large ones over every trunk.  The leader of a site is its lowest comm rank; for a
 * rooted collective the root leads its own site.
 *
 *   Barrier        site barrier; leaders exchange zero bytes; site barrier
 *   Bcast          root -> every other site's leader; each site's Ibcast from its leader
 *   (All)reduce    site Ireduce to the leader; leaders exchange partials (or send them to
 *                  the root); each combines the sites' partials in site order, so every rank
 *                  gets the same bits; Allreduce: site Ibcast.  A non-commutative operation:
 *                  the leader gathers its site's inputs and combines all of them in rank order
 *   Gather(v)      root's site: MPI's Igatherv; others: Igatherv of packed bytes to the
 *                  leader, one message to the root
 *   Scatter(v)     the mirror image
 *   Allgather(v)   site Igatherv to the leader; leaders exchange; site Ibcast of the whole
 *   Alltoall(v,w)  MPI's Ialltoallv (w) among the site's ranks; one message per pair of ranks
 *                  on different sites
 *   Reduce_scatter(_block)  Allreduce, then each rank's block; Scan, Exscan: an allgather of
 *                  the inputs, each rank combines in rank order
 *
 * Cost (S sites, n bytes, L the WAN's latency): Barrier 2 L + 2 site barriers; Bcast L + n
 * over the trunks + a site Ibcast; Allreduce L + (S - 1) n per leader + site reduce and bcast.
 *
 * Each collective is a small state machine (gcoll_t: a step, the site's request in flight,
 * the relay sends and receives of the step), moved by every progress pass of the layer, so a
 * nonblocking one moves while the program waits for anything.  Collectives of one
 * communicator run one after another (the site's nonblocking collectives must start in the
 * same order on every rank); the relay tag of a collective's messages is its sequence number
 * on the communicator, its context the communicator's own (cctx).  Data cross sites as MPI_Pack
 * bytes (raw memory for contiguous types; reductions: the typed buffer's span).
 */
#include "preload_grid.h"

#include <stdlib.h>
#include <string.h>

typedef int (*gcoll_fn)(gcoll_t *o);

typedef struct gcoll_recv {
    int src;      /* comm rank */
    uint32_t ctx; /* the relay context and tag it comes with */
    int tag;
    mln_relay_msg_t *m; /* NULL until it arrived */
} gcoll_recv_t;

/* A collective's arguments (the program's, as the grid body got them). */
typedef struct gcoll_args {
    const void *sbuf;
    void *rbuf;
    MPI_Count scount, rcount;
    MPI_Datatype stype, rtype;
    mln_cv_t scounts, sdispls, rcounts, rdispls;
    const MPI_Datatype *stypes, *rtypes;
    MPI_Op op;
    int root; /* -1: none */
} gcoll_args_t;

struct gcoll {
    mln_pl_gcomm_t *c;
    int tag, step, rc;
    gcoll_fn run;
    gcoll_args_t a;
    MPI_Request lreq;   /* the site's collective of this step */
    MPI_Request *lreqs; /* or MPI's point-to-point requests of this step (nlreqs) */
    int nlreqs;
    mln_relay_send_t **sends;
    int nsends, sends_cap;
    gcoll_recv_t *recvs;
    int nrecvs, recvs_cap;
    void **mem; /* scratch, freed at the end */
    int nmem, mem_cap;
    /* state the steps share */
    const void *in; /* the input of a reduction (sbuf, or rbuf for MPI_IN_PLACE) */
    void *out;      /* where a reduction's result goes */
    MPI_Count count;
    void *acc;               /* a leader's partial, typed */
    int first_recv;          /* index of this step's first receive */
    const void *mine;        /* this rank's packed contribution */
    MPI_Count nmine;         /* its bytes */
    MPI_Count *nb;           /* allgather: bytes of each comm rank */
    MPI_Count *off;          /* allgather: where they lie in the whole */
    MPI_Count total;         /* allgather: bytes of the whole */
    unsigned char *whole;    /* allgather: every rank's bytes, comm order */
    unsigned char *blob;     /* a leader's site part */
    MPI_Count *site_off;     /* offsets of the site's members in blob */
    long long nmine_ll;      /* sizes gathered on the site (Gatherv, Scatterv) */
    long long *sizes;        /* the leader's copy of them */
    void (*fin)(gcoll_t *o); /* allgather: what to do with the whole */
    void *fin_out;           /* allgather_bytes: where the whole goes */
    int kind;                /* a shared run's variant (GC_*) */
    int *nb_in;              /* neighbourhood collectives: the sources */
    MPI_Datatype held[2];    /* nonblocking: the layer's duplicates of the program's types */
    int ns, nr;              /* entries of the send and receive arrays (size; neighbours) */
    mln_pl_req_t *req;       /* nonblocking: the program's request; NULL: blocking */
    int done;
    gcoll_t *next;
};

enum { GC_ALLREDUCE, GC_REDUCE, GC_RS, GC_SCAN, GC_EXSCAN, GC_GATHER, GC_GATHERV };

/* ---- the machinery --------------------------------------------------------------------------- */

static void *gc_alloc(gcoll_t *o, size_t n)
{
    void *p;

    if (o->nmem == o->mem_cap) {
        int cap = o->mem_cap ? 2 * o->mem_cap : 8;
        void **mem = realloc(o->mem, (size_t)cap * sizeof(*mem));
        if (mem == NULL) {
            o->rc = MPI_ERR_NO_MEM;
            return NULL;
        }
        o->mem = mem;
        o->mem_cap = cap;
    }
    if ((p = calloc(1, n > 0 ? n : 1)) == NULL) {
        o->rc = MPI_ERR_NO_MEM;
        return NULL;
    }
    o->mem[o->nmem++] = p;
    return p;
}

static void gc_local(gcoll_t *o, int rc)
{
    if (rc != MPI_SUCCESS && o->rc == MPI_SUCCESS)
        o->rc = rc;
}

/* n bytes at data to comm rank dst of another site (data stays until the collective ends),
 * with the relay context and tag given (gc_send: the communicator's collective context and the
 * collective's tag). */
static void gc_send_on(gcoll_t *o, int dst, uint32_t ctx, int tag, const void *data, MPI_Count n)
{
    mln_pl_grid_t *g = mln_pl.grid;
    mln_relay_send_t *s = NULL;
    mln_status_t st;

    if (o->rc != MPI_SUCCESS)
        return;
    if (o->nsends == o->sends_cap) {
        int cap = o->sends_cap ? 2 * o->sends_cap : 8;
        mln_relay_send_t **a = realloc(o->sends, (size_t)cap * sizeof(*a));
        if (a == NULL) {
            o->rc = MPI_ERR_NO_MEM;
            return;
        }
        o->sends = a;
        o->sends_cap = cap;
    }
    st = mln_relay_isend(g->relay, o->c->world[dst], ctx, tag, n > 0 ? data : NULL, (uint64_t)n, 0,
                         &s);
    if (st != MLN_OK) {
        o->rc = st == MLN_ERR_NOMEM ? MPI_ERR_NO_MEM : MPI_ERR_OTHER;
        return;
    }
    o->sends[o->nsends++] = s;
}

static void gc_send(gcoll_t *o, int dst, const void *data, MPI_Count n)
{
    gc_send_on(o, dst, o->c->cctx, o->tag, data, n);
}

/* Expects one message from comm rank src (another site's) with (ctx, tag); its index. */
static int gc_recv_on(gcoll_t *o, int src, uint32_t ctx, int tag)
{
    if (o->nrecvs == o->recvs_cap) {
        int cap = o->recvs_cap ? 2 * o->recvs_cap : 8;
        gcoll_recv_t *a = realloc(o->recvs, (size_t)cap * sizeof(*a));
        if (a == NULL) {
            o->rc = MPI_ERR_NO_MEM;
            return 0;
        }
        o->recvs = a;
        o->recvs_cap = cap;
    }
    o->recvs[o->nrecvs].src = src;
    o->recvs[o->nrecvs].ctx = ctx;
    o->recvs[o->nrecvs].tag = tag;
    o->recvs[o->nrecvs].m = NULL;
    return o->nrecvs++;
}

static int gc_recv(gcoll_t *o, int src)
{
    return gc_recv_on(o, src, o->c->cctx, o->tag);
}

/* The message the receive at index i got (from the rank this step expects it from). */
static mln_relay_msg_t *gc_msg(gcoll_t *o, int i)
{
    return o->recvs[i].m;
}

/* 1 when the step's site request, sends and receives are all complete (or one failed). */
static int gc_ready(gcoll_t *o)
{
    mln_pl_grid_t *g = mln_pl.grid;
    int ready = 1;

    if (o->lreq != MPI_REQUEST_NULL) {
        int flag = 0, rc = mln_pmpi.Test(&o->lreq, &flag, MPI_STATUS_IGNORE);
        gc_local(o, rc);
        if (rc == MPI_SUCCESS && !flag)
            ready = 0;
    }
    for (int i = 0; i < o->nlreqs; i++) { /* MPI's point-to-point of this step */
        int flag = 1, rc = MPI_SUCCESS;
        if (o->lreqs[i] != MPI_REQUEST_NULL)
            rc = mln_pmpi.Test(&o->lreqs[i], &flag, MPI_STATUS_IGNORE);
        gc_local(o, rc);
        if (rc == MPI_SUCCESS && !flag)
            ready = 0;
    }
    for (int i = 0; i < o->nsends; i++) {
        mln_status_t st = MLN_OK;
        if (o->sends[i] == NULL)
            continue;
        if (!mln_relay_send_test(g->relay, o->sends[i], &st)) {
            ready = 0;
            continue;
        }
        o->sends[i] = NULL;
        if (st != MLN_OK)
            gc_local(o, MPI_ERR_OTHER);
    }
    for (int i = 0; i < o->nrecvs; i++) {
        if (o->recvs[i].m != NULL)
            continue;
        for (mln_relay_msg_t *m = mln_relay_arrived(g->relay, o->recvs[i].ctx); m; m = m->next)
            if (m->tag == o->recvs[i].tag && m->src == o->c->world[o->recvs[i].src]) {
                mln_relay_take(g->relay, m);
                o->recvs[i].m = m;
                break;
            }
        if (o->recvs[i].m == NULL)
            ready = 0;
    }
    return ready || o->rc != MPI_SUCCESS;
}

/* The steps of a run: GC_WAIT(n) ends a step, and the run goes on from there once the step's
 * transfers are complete (a failure ends the collective). */
#define GC_BEGIN                                                                                   \
    switch (o->step) {                                                                             \
    case 0:
#define GC_WAIT(n)                                                                                 \
    o->step = n;                                                                                   \
    /* fallthrough */                                                                              \
    case n:                                                                                        \
        if (!gc_ready(o))                                                                          \
            return 0;                                                                              \
        if (o->rc != MPI_SUCCESS)                                                                  \
            return 1;
#define GC_END                                                                                     \
    }                                                                                              \
    return 1;

static void gc_free(gcoll_t *o)
{
    if (o->lreq != MPI_REQUEST_NULL) /* a failed step: the site's requests are left to MPI */
        mln_pmpi.Request_free(&o->lreq);
    for (int i = 0; i < o->nlreqs; i++) /* (the array is scratch: freed below) */
        if (o->lreqs[i] != MPI_REQUEST_NULL)
            mln_pmpi.Request_free(&o->lreqs[i]);
    for (int i = 0; i < 2; i++)
        if (o->held[i] != MPI_DATATYPE_NULL)
            MPI_Type_free(&o->held[i]);
    for (int i = 0; i < o->nrecvs; i++)
        if (o->recvs[i].m != NULL)
            mln_relay_msg_free(o->recvs[i].m);
    for (int i = 0; i < o->nmem; i++)
        free(o->mem[i]);
    free(o->mem);
    free(o->sends);
    free(o->recvs);
    free(o);
}

/* An operation that ended: the program's request completes, or the blocking call returns. */
static void gc_finish(gcoll_t *o)
{
    MPI_Status st;

    if (o->nsends > 0) { /* a failed step may leave sends the relay still holds */
        mln_pl_grid_t *g = mln_pl.grid;
        for (int i = 0; i < o->nsends; i++) {
            mln_status_t s;
            while (o->sends[i] != NULL && !mln_relay_send_test(g->relay, o->sends[i], &s))
                mln_relay_progress(g->relay, 1000);
            o->sends[i] = NULL;
        }
    }
    o->done = 1;
    if (o->req == NULL)
        return;
    memset(&st, 0, sizeof(st));
    st.MPI_SOURCE = MPI_ANY_SOURCE;
    st.MPI_TAG = MPI_ANY_TAG;
    mln_pl_req_done(o->req, o->rc == MPI_SUCCESS ? MLN_OK : MLN_ERR_MPI, &st);
    gc_free(o);
}

/* Runs the communicator's collectives from the oldest on, as far as they go. */
static void gc_kick(mln_pl_gcomm_t *c)
{
    while (c->colls != NULL && c->colls->run(c->colls)) {
        gcoll_t *o = c->colls;
        c->colls = o->next;
        if (c->colls == NULL)
            c->colls_tail = &c->colls;
        gc_finish(o);
    }
}

void mln_pl_gcoll_progress(mln_pl_grid_t *g)
{
    if (g->world.colls != NULL)
        gc_kick(&g->world);
    for (mln_pl_gcomm_t *c = g->comms; c; c = c->next)
        if (c->colls != NULL)
            gc_kick(c);
}

static gcoll_t *gc_new(mln_pl_gcomm_t *c, gcoll_fn run, const gcoll_args_t *a)
{
    gcoll_t *o = calloc(1, sizeof(*o));

    if (o == NULL)
        return NULL;
    o->c = c;
    o->ns = o->nr = c->size;
    o->run = run;
    o->a = *a;
    o->lreq = MPI_REQUEST_NULL;
    o->rc = MPI_SUCCESS;
    o->held[0] = o->held[1] = MPI_DATATYPE_NULL;
    return o;
}

/* A nonblocking collective's count, displacement and type arrays, copied: the program may
 * free its own once the call returns (mpi4py's are temporaries). */
static void hold_view(gcoll_t *o, mln_cv_t *v, int n)
{
    MPI_Count *copy;

    if ((v->i == NULL && v->c == NULL && v->a == NULL) ||
        (copy = gc_alloc(o, (size_t)(n > 0 ? n : 1) * sizeof(MPI_Count))) == NULL)
        return;
    for (int k = 0; k < n; k++)
        copy[k] = mln_cv_at(*v, k);
    v->i = NULL;
    v->a = NULL;
    v->c = copy;
}

static void hold_types(gcoll_t *o, const MPI_Datatype **t, int n)
{
    MPI_Datatype *copy;

    if (*t == NULL || (copy = gc_alloc(o, (size_t)(n > 0 ? n : 1) * sizeof(*copy))) == NULL)
        return;
    memcpy(copy, *t, (size_t)n * sizeof(*copy));
    *t = copy;
}

static void hold_arrays(gcoll_t *o)
{
    hold_view(o, &o->a.scounts, o->ns);
    hold_view(o, &o->a.sdispls, o->ns);
    hold_view(o, &o->a.rcounts, o->nr);
    hold_view(o, &o->a.rdispls, o->nr);
    hold_types(o, &o->a.stypes, o->ns);
    hold_types(o, &o->a.rtypes, o->nr);
}

/* A nonblocking collective's derived datatype (the program may free its own once the call
 * returns): a duplicate of the layer's for the collective's life. */
static void hold_type(gcoll_t *o, int i, MPI_Datatype *t)
{
    int ni = 0, na = 0, nd = 0, combiner = MPI_COMBINER_NAMED;
    MPI_Datatype unset;

    memset(&unset, 0, sizeof(unset)); /* a field the collective has not: all bits 0 */
    if (*t == MPI_DATATYPE_NULL || *t == unset ||
        MPI_Type_get_envelope(*t, &ni, &na, &nd, &combiner) != MPI_SUCCESS ||
        combiner == MPI_COMBINER_NAMED)
        return;
    if (MPI_Type_dup(*t, &o->held[i]) == MPI_SUCCESS)
        *t = o->held[i];
    else
        o->held[i] = MPI_DATATYPE_NULL;
}

/* Starts o (queued behind the communicator's earlier ones); blocking: waits for it.  Nonblocking:
 * *request is the program's. */
static int gc_start(gcoll_t *o, MPI_Request *request)
{
    mln_pl_gcomm_t *c;
    MPI_Comm handle;
    int rc = MPI_SUCCESS, spins = 0;

    if (o == NULL)
        return mln_pl_grid_fail(MPI_ERR_NO_MEM);
    c = o->c;
    handle = c->handle;
    MLN_PL_LOCK();
    o->tag = (int)(c->seq++ & 0x7fffffff);
    if (request != NULL) {
        mln_pl_req_t *r = mln_pl_req_new(MLN_PL_RECV);
        hold_type(o, 0, &o->a.stype);
        hold_type(o, 1, &o->a.rtype);
        hold_arrays(o);
        if (r == NULL || (rc = mln_pl_req_greq(r)) != MPI_SUCCESS) {
            free(r);
            gc_free(o);
            MLN_PL_UNLOCK();
            return mln_pl_grid_fail_on(handle, rc != MPI_SUCCESS ? rc : MPI_ERR_NO_MEM);
        }
        r->grid = 1;
        r->gc = c;
        r->comm = handle;
        r->done = 0;
        r->handle = r->greq;
        mln_pl_req_map_add(r);
        *request = r->handle;
        o->req = r;
    }
    *c->colls_tail = o;
    c->colls_tail = &o->next;
    gc_kick(c);
    if (request == NULL) {
        while (!o->done) {
            mln_pl_progress();
            gc_kick(c); /* a communicator of the moment (Comm_create_group) is on no list */
            if (!o->done)
                mln_pl_idle(&spins);
        }
        rc = o->rc;
        gc_free(o);
    }
    MLN_PL_UNLOCK();
    if (rc != MPI_SUCCESS)
        mln_pl_grid_error(handle, rc);
    return rc;
}

/* ---- data ------------------------------------------------------------------------------------ */

typedef struct tinfo {
    MPI_Count size, lb, extent, tlb, textent;
} tinfo_t;

static void tinfo(MPI_Datatype t, tinfo_t *ti)
{
    memset(ti, 0, sizeof(*ti));
    MPI_Type_size_x(t, &ti->size);
    MPI_Type_get_extent_x(t, &ti->lb, &ti->extent);
    MPI_Type_get_true_extent_x(t, &ti->tlb, &ti->textent);
}

/* Bytes of count x t from its first true byte to its last (a reduction's typed buffer). */
static MPI_Count span(MPI_Count count, MPI_Datatype t)
{
    tinfo_t ti;

    tinfo(t, &ti);
    return count > 0 ? (count - 1) * ti.extent + ti.textent : 0;
}

/* A typed buffer of count x t of the collective's (NULL: no memory); its span starts at the
 * returned pointer + the true lower bound, as MPI expects. */
static void *typed_alloc(gcoll_t *o, MPI_Count count, MPI_Datatype t)
{
    tinfo_t ti;
    char *p;

    tinfo(t, &ti);
    p = gc_alloc(o, (size_t)span(count, t));
    return p != NULL ? p - ti.tlb : NULL;
}

/* count x t at buf as bytes: buf itself when they are one block, else packed. */
static int pack(gcoll_t *o, const void *buf, MPI_Count count, MPI_Datatype t, const void **p,
                MPI_Count *n)
{
    MPI_Aint lb = 0;
    int size = 0, pos = 0;
    void *copy;

    *n = mln_pl_bytes(count, t);
    if (mln_pl_dtype_block(t, count, &lb)) {
        *p = (const char *)buf + lb;
        return MPI_SUCCESS;
    }
    if (count > INT_MAX || MPI_Pack_size((int)count, t, MPI_COMM_SELF, &size) != MPI_SUCCESS)
        return MPI_ERR_COUNT;
    if ((copy = gc_alloc(o, (size_t)size)) == NULL)
        return MPI_ERR_NO_MEM;
    if (MPI_Pack(buf, (int)count, t, copy, size, &pos, MPI_COMM_SELF) != MPI_SUCCESS)
        return MPI_ERR_TYPE;
    *p = copy;
    *n = pos;
    return MPI_SUCCESS;
}

/* n bytes at p into count x t at buf (MPI_ERR_TRUNCATE when they are more than it holds). */
static int unpack(const void *p, MPI_Count n, void *buf, MPI_Count count, MPI_Datatype t)
{
    MPI_Count room = mln_pl_bytes(count, t), size = 0;
    MPI_Aint lb = 0;
    int pos = 0;

    if (n > room)
        return MPI_ERR_TRUNCATE;
    if (n == 0)
        return MPI_SUCCESS;
    if (mln_pl_dtype_block(t, count, &lb)) {
        memcpy((char *)buf + lb, p, (size_t)n);
        return MPI_SUCCESS;
    }
    MPI_Type_size_x(t, &size);
    if (n > INT_MAX || size <= 0)
        return MPI_ERR_COUNT;
    return MPI_Unpack(p, (int)n, &pos, buf, (int)(n / size), t, MPI_COMM_SELF);
}

/* count x t from typed buffer src into dst (holes of dst untouched). */
static int copy_typed(gcoll_t *o, const void *src, void *dst, MPI_Count count, MPI_Datatype t)
{
    const void *p;
    MPI_Count n;
    int rc = pack(o, src, count, t, &p, &n);

    return rc == MPI_SUCCESS ? unpack(p, n, dst, count, t) : rc;
}

/* v[k], or `same` where v is no array (the forms with one count for every rank). */
static MPI_Count cv_or(mln_cv_t v, int k, MPI_Count same)
{
    return v.i != NULL || v.c != NULL || v.a != NULL ? mln_cv_at(v, k) : same;
}

/* The site's collectives take int counts. */
static int fits(MPI_Count n)
{
    return n >= 0 && n <= INT_MAX;
}

static int *int_array(gcoll_t *o, int n)
{
    return gc_alloc(o, (size_t)(n > 0 ? n : 1) * sizeof(int));
}

/* The site's leader of a collective on site k: the root on its own site, else the lowest. */
static int leader_of(const gcoll_t *o, int k)
{
    const mln_pl_gcomm_t *c = o->c;

    return o->a.root >= 0 && c->site_k[o->a.root] == k ? o->a.root : c->site_members[k][0];
}

static int lroot(const gcoll_t *o)
{
    return o->c->site_pos[leader_of(o, o->c->ksite)];
}

static int is_leader(const gcoll_t *o)
{
    return leader_of(o, o->c->ksite) == o->c->rank;
}

/* ---- Barrier --------------------------------------------------------------------------------- */

static int run_barrier(gcoll_t *o)
{
    mln_pl_gcomm_t *c = o->c;

    GC_BEGIN
    gc_local(o, mln_pmpi.Ibarrier(c->local, &o->lreq));
    GC_WAIT(1)
    if (is_leader(o))
        for (int k = 0; k < c->nsites; k++)
            if (k != c->ksite) {
                gc_send(o, c->site_members[k][0], NULL, 0);
                gc_recv(o, c->site_members[k][0]);
            }
    GC_WAIT(2)
    gc_local(o, mln_pmpi.Ibarrier(c->local, &o->lreq));
    GC_WAIT(3)
    GC_END
}

int mln_pl_grid_Barrier(MPI_Comm comm)
{
    gcoll_args_t a = {.root = -1};

    return gc_start(gc_new(mln_pl_gcomm(comm), run_barrier, &a), NULL);
}

int mln_pl_grid_Ibarrier(MPI_Comm comm, MPI_Request *request)
{
    gcoll_args_t a = {.root = -1};

    return gc_start(gc_new(mln_pl_gcomm(comm), run_barrier, &a), request);
}

/* ---- Bcast ----------------------------------------------------------------------------------- */

static int run_bcast(gcoll_t *o)
{
    mln_pl_gcomm_t *c = o->c;
    const int kr = c->site_k[o->a.root];
    mln_relay_msg_t *m;

    GC_BEGIN
    if (!fits(o->a.rcount)) {
        o->rc = MPI_ERR_COUNT;
        return 1;
    }
    if (c->rank == o->a.root) {
        gc_local(o, pack(o, o->a.rbuf, o->a.rcount, o->a.rtype, &o->mine, &o->nmine));
        for (int k = 0; k < c->nsites; k++)
            if (k != kr)
                gc_send(o, c->site_members[k][0], o->mine, o->nmine);
    }
    if (c->ksite == kr)
        gc_local(o, mln_pmpi.Ibcast(o->a.rbuf, (int)o->a.rcount, o->a.rtype, lroot(o), c->local,
                                    &o->lreq));
    else if (is_leader(o))
        gc_recv(o, o->a.root);
    GC_WAIT(1)
    if (c->ksite != kr) {
        if (is_leader(o) && (m = gc_msg(o, 0)) != NULL)
            gc_local(o, unpack(m->data, (MPI_Count)m->len, o->a.rbuf, o->a.rcount, o->a.rtype));
        if (o->rc == MPI_SUCCESS)
            gc_local(
                o, mln_pmpi.Ibcast(o->a.rbuf, (int)o->a.rcount, o->a.rtype, 0, c->local, &o->lreq));
    }
    GC_WAIT(2)
    GC_END
}

int mln_pl_grid_bcast(void *buffer, MPI_Count count, MPI_Datatype datatype, int root, MPI_Comm comm,
                      MPI_Request *request)
{
    mln_pl_gcomm_t *c = mln_pl_gcomm(comm);
    gcoll_args_t a = {.rbuf = buffer, .rcount = count, .rtype = datatype, .root = root};

    if (root < 0 || root >= c->size)
        return mln_pl_grid_fail_on(comm, MPI_ERR_ROOT);
    return gc_start(gc_new(mln_pl_gcomm(comm), run_bcast, &a), request);
}

int mln_pl_grid_Ibcast(void *buffer, MPI_Count count, MPI_Datatype datatype, int root,
                       MPI_Comm comm, MPI_Request *request)
{
    return mln_pl_grid_bcast(buffer, count, datatype, root, comm, request);
}

/* ---- reductions -------------------------------------------------------------------------------
 */

/* The partial of site k at a leader: its own (acc) or another leader's message, as a typed
 * buffer; commutative: one per site; else `pos` picks a member's input in the site's block. */
static void *partial(gcoll_t *o, int k, int pos, int first, MPI_Count len)
{
    tinfo_t ti;
    unsigned char *base;

    tinfo(o->a.rtype, &ti);
    if (k == o->c->ksite) {
        base = o->acc;
        return pos == 0 && o->blob == NULL ? base : o->blob + pos * len - ti.tlb;
    }
    base = gc_msg(o, first + (k < o->c->ksite ? k : k - 1))->data;
    return base + pos * len - ti.tlb;
}

/* Combines the sites' partials (commutative) or every rank's input (in rank order) into one
 * typed buffer, returned. */
static void *combine(gcoll_t *o, int commute, MPI_Count len)
{
    mln_pl_gcomm_t *c = o->c;
    void *cur = NULL;
    int n = commute ? c->nsites : c->size;

    for (int i = 0; i < n && o->rc == MPI_SUCCESS; i++) {
        void *p = commute ? partial(o, i, 0, o->first_recv, len)
                          : partial(o, c->site_k[i], c->site_pos[i], o->first_recv, len);
        if (cur != NULL)
            gc_local(o, MPI_Reduce_local(cur, p, (int)o->count, o->a.rtype, o->a.op));
        cur = p;
    }
    return cur;
}

/* Reduce, Allreduce and what builds on them: o->in, o->out (typed), o->count; kind. */
static int run_reduce(gcoll_t *o)
{
    mln_pl_gcomm_t *c = o->c;
    const int all = o->kind != GC_REDUCE, lead = is_leader(o), n = c->site_n[c->ksite];
    const MPI_Count len = span(o->count, o->a.rtype);
    int commute = 1;
    tinfo_t ti;
    void *res;

    MPI_Op_commutative(o->a.op, &commute);
    tinfo(o->a.rtype, &ti);
    GC_BEGIN
    if (!fits(o->count) || !fits(len * n)) {
        o->rc = MPI_ERR_COUNT;
        return 1;
    }
    if (commute) {
        if (lead && (o->acc = typed_alloc(o, o->count, o->a.rtype)) == NULL)
            return 1;
        gc_local(o, mln_pmpi.Ireduce(o->in, lead ? o->acc : NULL, (int)o->count, o->a.rtype,
                                     o->a.op, lroot(o), c->local, &o->lreq));
    } else { /* the site's inputs, in rank order, to the leader */
        if (lead && (o->blob = gc_alloc(o, (size_t)(len * n))) == NULL)
            return 1;
        gc_local(o, mln_pmpi.Igather((const char *)o->in + ti.tlb, (int)len, MPI_BYTE, o->blob,
                                     (int)len, MPI_BYTE, lroot(o), c->local, &o->lreq));
    }
    GC_WAIT(1)
    o->first_recv = o->nrecvs;
    if (lead) {
        const void *data = commute ? (const char *)o->acc + ti.tlb : (const void *)o->blob;
        const MPI_Count bytes = commute ? len : len * n;
        for (int k = 0; k < c->nsites; k++) {
            if (k == c->ksite)
                continue;
            if (all || c->rank != o->a.root) {
                if (all || k == c->site_k[o->a.root])
                    gc_send(o, leader_of(o, k), data, bytes);
            }
            if (all || c->rank == o->a.root)
                gc_recv(o, leader_of(o, k));
        }
    }
    GC_WAIT(2)
    if (lead && (all || c->rank == o->a.root)) {
        for (int i = o->first_recv; i < o->nrecvs; i++) { /* every partial as long as expected */
            int k = c->site_k[o->recvs[i].src];
            if ((MPI_Count)gc_msg(o, i)->len != (commute ? len : len * c->site_n[k]))
                o->rc = MPI_ERR_TRUNCATE;
        }
        res = o->rc == MPI_SUCCESS ? combine(o, commute, len) : NULL;
        if (res != NULL)
            gc_local(o, copy_typed(o, res, o->out, o->count, o->a.rtype));
    }
    if (all && o->rc == MPI_SUCCESS)
        gc_local(o, mln_pmpi.Ibcast(o->out, (int)o->count, o->a.rtype, 0, c->local, &o->lreq));
    GC_WAIT(3)
    if (o->kind == GC_RS) { /* this rank's block of the whole */
        MPI_Count first = 0;
        for (int i = 0; i < c->rank; i++)
            first += cv_or(o->a.rcounts, i, o->a.rcount);
        gc_local(o, copy_typed(o, (char *)o->out + first * ti.extent, o->a.rbuf,
                               cv_or(o->a.rcounts, c->rank, o->a.rcount), o->a.rtype));
    }
    GC_END
}

static int reduce_start(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype,
                        MPI_Op op, int root, MPI_Comm comm, int kind, MPI_Request *request)
{
    mln_pl_gcomm_t *c = mln_pl_gcomm(comm);
    gcoll_args_t a = {.sbuf = sendbuf, .rbuf = recvbuf, .rtype = datatype, .op = op, .root = root};
    gcoll_t *o;

    if (kind == GC_REDUCE && (root < 0 || root >= c->size))
        return mln_pl_grid_fail_on(comm, MPI_ERR_ROOT);
    if (count < 0)
        return mln_pl_grid_fail_on(comm, MPI_ERR_COUNT);
    if ((o = gc_new(mln_pl_gcomm(comm), run_reduce, &a)) == NULL)
        return mln_pl_grid_fail_on(comm, MPI_ERR_NO_MEM);
    o->kind = kind;
    o->count = count;
    o->in = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    o->out = recvbuf;
    if (kind == GC_REDUCE && c->rank != root)
        o->out = NULL;
    return gc_start(o, request);
}

int mln_pl_grid_Reduce(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype,
                       MPI_Op op, int root, MPI_Comm comm)
{
    return reduce_start(sendbuf, recvbuf, count, datatype, op, root, comm, GC_REDUCE, NULL);
}

int mln_pl_grid_Ireduce(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype,
                        MPI_Op op, int root, MPI_Comm comm, MPI_Request *request)
{
    return reduce_start(sendbuf, recvbuf, count, datatype, op, root, comm, GC_REDUCE, request);
}

int mln_pl_grid_Allreduce(const void *sendbuf, void *recvbuf, MPI_Count count,
                          MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    return reduce_start(sendbuf, recvbuf, count, datatype, op, -1, comm, GC_ALLREDUCE, NULL);
}

int mln_pl_grid_Iallreduce(const void *sendbuf, void *recvbuf, MPI_Count count,
                           MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request)
{
    return reduce_start(sendbuf, recvbuf, count, datatype, op, -1, comm, GC_ALLREDUCE, request);
}

/* Reduce_scatter(_block): the Allreduce of every block into a buffer of the layer's, then this
 * rank's block (counts: NULL views for the _block form, whose count is recvcount). */
static int rs_start(const void *sendbuf, void *recvbuf, mln_cv_t counts, MPI_Count recvcount,
                    MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request)
{
    mln_pl_gcomm_t *c = mln_pl_gcomm(comm);
    gcoll_args_t a = {.sbuf = sendbuf,
                      .rbuf = recvbuf,
                      .rcount = recvcount,
                      .rcounts = counts,
                      .rtype = datatype,
                      .op = op,
                      .root = -1};
    gcoll_t *o = gc_new(mln_pl_gcomm(comm), run_reduce, &a);
    MPI_Count total = 0;

    if (o == NULL)
        return mln_pl_grid_fail_on(comm, MPI_ERR_NO_MEM);
    for (int i = 0; i < c->size; i++)
        total += cv_or(counts, i, recvcount);
    o->kind = GC_RS;
    o->count = total;
    o->in = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    if ((o->out = typed_alloc(o, total, datatype)) == NULL) {
        gc_free(o);
        return mln_pl_grid_fail_on(comm, MPI_ERR_NO_MEM);
    }
    return gc_start(o, request);
}

static const mln_cv_t no_counts = {NULL, NULL, NULL};

int mln_pl_grid_Reduce_scatter_block(const void *sendbuf, void *recvbuf, MPI_Count recvcount,
                                     MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    return rs_start(sendbuf, recvbuf, no_counts, recvcount, datatype, op, comm, NULL);
}

int mln_pl_grid_Ireduce_scatter_block(const void *sendbuf, void *recvbuf, MPI_Count recvcount,
                                      MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                                      MPI_Request *request)
{
    return rs_start(sendbuf, recvbuf, no_counts, recvcount, datatype, op, comm, request);
}

int mln_pl_grid_Reduce_scatter(const void *sendbuf, void *recvbuf, mln_cv_t recvcounts,
                               MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    return rs_start(sendbuf, recvbuf, recvcounts, 0, datatype, op, comm, NULL);
}

int mln_pl_grid_Ireduce_scatter(const void *sendbuf, void *recvbuf, mln_cv_t recvcounts,
                                MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                                MPI_Request *request)
{
    return rs_start(sendbuf, recvbuf, recvcounts, 0, datatype, op, comm, request);
}

/* ---- Gather(v), Scatter(v) --------------------------------------------------------------------
 */

/* The count and displacement (in elements) of comm rank i's block at the root. */
static MPI_Count rcount_of(const gcoll_t *o, int i)
{
    return cv_or(o->a.rcounts, i, o->a.rcount);
}

static MPI_Count rdispl_of(const gcoll_t *o, int i)
{
    return cv_or(o->a.rdispls, i, i * o->a.rcount);
}

static MPI_Count scount_of(const gcoll_t *o, int i)
{
    return cv_or(o->a.scounts, i, o->a.scount);
}

static MPI_Count sdispl_of(const gcoll_t *o, int i)
{
    return cv_or(o->a.sdispls, i, i * o->a.scount);
}

/* The root's MPI collective on its own site takes the program's counts and displacements of
 * the site's members: *cnt, *dsp (int arrays of the collective's). */
static int site_arrays(gcoll_t *o, int send, int **cnt, int **dsp)
{
    mln_pl_gcomm_t *c = o->c;
    const int n = c->site_n[c->ksite];

    *cnt = int_array(o, n);
    *dsp = int_array(o, n);
    if (*cnt == NULL || *dsp == NULL)
        return 0;
    for (int l = 0; l < n; l++) {
        int i = c->site_members[c->ksite][l];
        MPI_Count k = send ? scount_of(o, i) : rcount_of(o, i);
        MPI_Count d = send ? sdispl_of(o, i) : rdispl_of(o, i);
        if (!fits(k) || d < INT_MIN || d > INT_MAX) {
            o->rc = MPI_ERR_COUNT;
            return 0;
        }
        (*cnt)[l] = (int)k;
        (*dsp)[l] = (int)d;
    }
    return 1;
}

/* The leader's counts and offsets of its site's byte blocks (sizes gathered, or all `same`). */
static int byte_arrays(gcoll_t *o, MPI_Count same, int **cnt, int **dsp, MPI_Count *total)
{
    const int n = o->c->site_n[o->c->ksite];

    *cnt = int_array(o, n);
    *dsp = int_array(o, n);
    *total = 0;
    if (*cnt == NULL || *dsp == NULL)
        return 0;
    for (int l = 0; l < n; l++) {
        MPI_Count k = o->sizes != NULL ? o->sizes[l] : same;
        if (!fits(k) || !fits(*total)) {
            o->rc = MPI_ERR_COUNT;
            return 0;
        }
        (*cnt)[l] = (int)k;
        (*dsp)[l] = (int)*total;
        *total += k;
    }
    return fits(*total) || (o->rc = MPI_ERR_COUNT, 0);
}

static int run_gather(gcoll_t *o)
{
    mln_pl_gcomm_t *c = o->c;
    const int kr = c->site_k[o->a.root], lead = is_leader(o), n = c->site_n[c->ksite];
    const int in_place = c->rank == o->a.root && o->a.sbuf == MPI_IN_PLACE;
    int *cnt = NULL, *dsp = NULL, idx = 0;
    tinfo_t rt;

    GC_BEGIN
    if (!fits(o->a.scount)) {
        o->rc = MPI_ERR_COUNT;
        return 1;
    }
    if (c->ksite == kr && c->rank == o->a.root) {
        if (!site_arrays(o, 0, &cnt, &dsp))
            return 1;
        gc_local(o, mln_pmpi.Igatherv(in_place ? MPI_IN_PLACE : o->a.sbuf, (int)o->a.scount,
                                      o->a.stype, o->a.rbuf, cnt, dsp, o->a.rtype, lroot(o),
                                      c->local, &o->lreq));
        for (int k = 0; k < c->nsites; k++)
            if (k != kr)
                gc_recv(o, c->site_members[k][0]);
    } else if (c->ksite == kr) {
        gc_local(o, mln_pmpi.Igatherv(o->a.sbuf, (int)o->a.scount, o->a.stype, NULL, NULL, NULL,
                                      o->a.stype, lroot(o), c->local, &o->lreq));
    } else {
        gc_local(o, pack(o, o->a.sbuf, o->a.scount, o->a.stype, &o->mine, &o->nmine));
        o->nmine_ll = o->nmine;
        if (o->kind == GC_GATHERV && lead &&
            (o->sizes = gc_alloc(o, (size_t)n * sizeof(*o->sizes))) == NULL)
            return 1;
        if (o->kind == GC_GATHERV && o->rc == MPI_SUCCESS)
            gc_local(o, mln_pmpi.Igather(&o->nmine_ll, 1, MPI_LONG_LONG, o->sizes, 1, MPI_LONG_LONG,
                                         0, c->local, &o->lreq));
    }
    GC_WAIT(1)
    if (c->ksite != kr) {
        if (lead && (!byte_arrays(o, o->nmine, &cnt, &dsp, &o->total) ||
                     (o->blob = gc_alloc(o, (size_t)o->total)) == NULL))
            return 1;
        gc_local(o, mln_pmpi.Igatherv(o->mine, (int)o->nmine, MPI_BYTE, o->blob, cnt, dsp, MPI_BYTE,
                                      0, c->local, &o->lreq));
    }
    GC_WAIT(2)
    if (c->ksite != kr && lead)
        gc_send(o, o->a.root, o->blob, o->total);
    GC_WAIT(3)
    if (c->rank != o->a.root)
        return 1;
    tinfo(o->a.rtype, &rt);
    for (int k = 0; k < c->nsites && o->rc == MPI_SUCCESS; k++) {
        mln_relay_msg_t *m;
        MPI_Count at = 0;
        if (k == kr)
            continue;
        m = gc_msg(o, idx++);
        for (int p = 0; p < c->site_n[k] && o->rc == MPI_SUCCESS; p++) {
            int i = c->site_members[k][p];
            MPI_Count nb = rcount_of(o, i) * rt.size;
            if (at + nb > (MPI_Count)m->len) {
                o->rc = MPI_ERR_TRUNCATE;
                break;
            }
            gc_local(o, unpack(m->data + at, nb, (char *)o->a.rbuf + rdispl_of(o, i) * rt.extent,
                               rcount_of(o, i), o->a.rtype));
            at += nb;
        }
        if (o->rc == MPI_SUCCESS && at != (MPI_Count)m->len)
            o->rc = MPI_ERR_TRUNCATE;
    }
    GC_END
}

static int run_scatter(gcoll_t *o)
{
    mln_pl_gcomm_t *c = o->c;
    const int kr = c->site_k[o->a.root], lead = is_leader(o), n = c->site_n[c->ksite];
    const int in_place = c->rank == o->a.root && o->a.rbuf == MPI_IN_PLACE;
    int *cnt = NULL, *dsp = NULL;
    mln_relay_msg_t *m;
    tinfo_t st, rt;

    tinfo(o->a.stype, &st);
    tinfo(o->a.rtype, &rt);
    GC_BEGIN
    if (!fits(o->a.rcount)) {
        o->rc = MPI_ERR_COUNT;
        return 1;
    }
    if (c->rank == o->a.root) { /* each other site's blocks, in rank order, to its leader */
        for (int k = 0; k < c->nsites && o->rc == MPI_SUCCESS; k++) {
            MPI_Count total = 0, at = 0;
            unsigned char *blob;
            if (k == kr)
                continue;
            for (int p = 0; p < c->site_n[k]; p++)
                total += scount_of(o, c->site_members[k][p]) * st.size;
            if ((blob = gc_alloc(o, (size_t)total)) == NULL)
                return 1;
            for (int p = 0; p < c->site_n[k] && o->rc == MPI_SUCCESS; p++) {
                int i = c->site_members[k][p];
                const void *data;
                MPI_Count nb;
                gc_local(o, pack(o, (const char *)o->a.sbuf + sdispl_of(o, i) * st.extent,
                                 scount_of(o, i), o->a.stype, &data, &nb));
                if (o->rc == MPI_SUCCESS)
                    memcpy(blob + at, data, (size_t)nb);
                at += nb;
            }
            gc_send(o, c->site_members[k][0], blob, at);
        }
        if (!site_arrays(o, 1, &cnt, &dsp))
            return 1;
        gc_local(o, mln_pmpi.Iscatterv(o->a.sbuf, cnt, dsp, o->a.stype,
                                       in_place ? MPI_IN_PLACE : o->a.rbuf, (int)o->a.rcount,
                                       o->a.rtype, lroot(o), c->local, &o->lreq));
    } else if (c->ksite == kr) {
        gc_local(o, mln_pmpi.Iscatterv(NULL, NULL, NULL, o->a.rtype, o->a.rbuf, (int)o->a.rcount,
                                       o->a.rtype, lroot(o), c->local, &o->lreq));
    } else {
        o->nmine = o->a.rcount * rt.size;
        o->nmine_ll = o->nmine;
        if (lead)
            gc_recv(o, o->a.root);
        if (o->kind == GC_GATHERV && lead &&
            (o->sizes = gc_alloc(o, (size_t)n * sizeof(*o->sizes))) == NULL)
            return 1;
        if (o->kind == GC_GATHERV)
            gc_local(o, mln_pmpi.Igather(&o->nmine_ll, 1, MPI_LONG_LONG, o->sizes, 1, MPI_LONG_LONG,
                                         0, c->local, &o->lreq));
    }
    GC_WAIT(1)
    if (c->ksite != kr) {
        const void *from = NULL;
        if ((o->blob = gc_alloc(o, (size_t)o->nmine)) == NULL)
            return 1;
        if (lead) {
            m = gc_msg(o, 0);
            if (!byte_arrays(o, o->nmine, &cnt, &dsp, &o->total))
                return 1;
            if (o->total != (MPI_Count)m->len) {
                o->rc = MPI_ERR_TRUNCATE;
                return 1;
            }
            from = m->data;
        }
        gc_local(o, mln_pmpi.Iscatterv(from, cnt, dsp, MPI_BYTE, o->blob, (int)o->nmine, MPI_BYTE,
                                       0, c->local, &o->lreq));
    }
    GC_WAIT(2)
    if (c->ksite != kr)
        gc_local(o, unpack(o->blob, o->nmine, o->a.rbuf, o->a.rcount, o->a.rtype));
    GC_END
}

static int rooted_start(gcoll_fn run, int kind, const gcoll_args_t *a, MPI_Comm comm,
                        MPI_Request *request)
{
    mln_pl_gcomm_t *c = mln_pl_gcomm(comm);
    gcoll_t *o;

    if (a->root < 0 || a->root >= c->size)
        return mln_pl_grid_fail_on(comm, MPI_ERR_ROOT);
    if ((o = gc_new(mln_pl_gcomm(comm), run, a)) == NULL)
        return mln_pl_grid_fail_on(comm, MPI_ERR_NO_MEM);
    o->kind = kind;
    return gc_start(o, request);
}

#define GATHER_ARGS(SC, ST, RC, RT)                                                                \
    {                                                                                              \
        .sbuf = sendbuf, .rbuf = recvbuf, .scount = SC, .stype = ST, .rcount = RC, .rtype = RT,    \
        .root = root                                                                               \
    }

int mln_pl_grid_Gather(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                       void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int root,
                       MPI_Comm comm)
{
    gcoll_args_t a = GATHER_ARGS(sendcount, sendtype, recvcount, recvtype);

    return rooted_start(run_gather, GC_GATHER, &a, comm, NULL);
}

int mln_pl_grid_Igather(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                        void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int root,
                        MPI_Comm comm, MPI_Request *request)
{
    gcoll_args_t a = GATHER_ARGS(sendcount, sendtype, recvcount, recvtype);

    return rooted_start(run_gather, GC_GATHER, &a, comm, request);
}

int mln_pl_grid_Gatherv(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                        void *recvbuf, mln_cv_t recvcounts, mln_cv_t displs, MPI_Datatype recvtype,
                        int root, MPI_Comm comm)
{
    gcoll_args_t a = GATHER_ARGS(sendcount, sendtype, 0, recvtype);

    a.rcounts = recvcounts;
    a.rdispls = displs;
    return rooted_start(run_gather, GC_GATHERV, &a, comm, NULL);
}

int mln_pl_grid_Igatherv(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                         void *recvbuf, mln_cv_t recvcounts, mln_cv_t displs, MPI_Datatype recvtype,
                         int root, MPI_Comm comm, MPI_Request *request)
{
    gcoll_args_t a = GATHER_ARGS(sendcount, sendtype, 0, recvtype);

    a.rcounts = recvcounts;
    a.rdispls = displs;
    return rooted_start(run_gather, GC_GATHERV, &a, comm, request);
}

int mln_pl_grid_Scatter(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                        void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int root,
                        MPI_Comm comm)
{
    gcoll_args_t a = GATHER_ARGS(sendcount, sendtype, recvcount, recvtype);

    return rooted_start(run_scatter, GC_GATHER, &a, comm, NULL);
}

int mln_pl_grid_Iscatter(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                         void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int root,
                         MPI_Comm comm, MPI_Request *request)
{
    gcoll_args_t a = GATHER_ARGS(sendcount, sendtype, recvcount, recvtype);

    return rooted_start(run_scatter, GC_GATHER, &a, comm, request);
}

int mln_pl_grid_Scatterv(const void *sendbuf, mln_cv_t sendcounts, mln_cv_t displs,
                         MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount,
                         MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    gcoll_args_t a = GATHER_ARGS(0, sendtype, recvcount, recvtype);

    a.scounts = sendcounts;
    a.sdispls = displs;
    return rooted_start(run_scatter, GC_GATHERV, &a, comm, NULL);
}

int mln_pl_grid_Iscatterv(const void *sendbuf, mln_cv_t sendcounts, mln_cv_t displs,
                          MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount,
                          MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request)
{
    gcoll_args_t a = GATHER_ARGS(0, sendtype, recvcount, recvtype);

    a.scounts = sendcounts;
    a.sdispls = displs;
    return rooted_start(run_scatter, GC_GATHERV, &a, comm, request);
}

/* ---- Allgather(v), Scan, Exscan ---------------------------------------------------------------
 */

static int run_allgather(gcoll_t *o)
{
    mln_pl_gcomm_t *c = o->c;
    const int lead = c->site_pos[c->rank] == 0, n = c->site_n[c->ksite];
    int *cnt = NULL, *dsp = NULL, idx = 0;

    GC_BEGIN
    if (o->nmine != o->nb[c->rank]) {
        o->rc = MPI_ERR_TRUNCATE;
        return 1;
    }
    if (lead) {
        MPI_Count total = 0;
        if ((cnt = int_array(o, n)) == NULL || (dsp = int_array(o, n)) == NULL)
            return 1;
        for (int l = 0; l < n; l++) {
            cnt[l] = (int)o->nb[c->site_members[c->ksite][l]];
            dsp[l] = (int)total;
            total += o->nb[c->site_members[c->ksite][l]];
        }
        o->total = total;
        if ((o->blob = gc_alloc(o, (size_t)total)) == NULL)
            return 1;
    }
    gc_local(o, mln_pmpi.Igatherv(o->mine, (int)o->nmine, MPI_BYTE, o->blob, cnt, dsp, MPI_BYTE, 0,
                                  c->local, &o->lreq));
    GC_WAIT(1)
    if (lead)
        for (int k = 0; k < c->nsites; k++)
            if (k != c->ksite) {
                gc_send(o, c->site_members[k][0], o->blob, o->total);
                gc_recv(o, c->site_members[k][0]);
            }
    GC_WAIT(2)
    {
        MPI_Count all = 0;
        for (int i = 0; i < c->size; i++)
            all += o->nb[i];
        if ((o->whole = gc_alloc(o, (size_t)all)) == NULL)
            return 1;
        o->total = all;
    }
    for (int k = 0; lead && k < c->nsites && o->rc == MPI_SUCCESS; k++) {
        const unsigned char *from = o->blob;
        MPI_Count len = 0, at = 0;
        if (k != c->ksite) {
            mln_relay_msg_t *m = gc_msg(o, idx++);
            from = m->data;
            len = (MPI_Count)m->len;
        }
        for (int p = 0; p < c->site_n[k]; p++) {
            int i = c->site_members[k][p];
            if (k != c->ksite && at + o->nb[i] > len) {
                o->rc = MPI_ERR_TRUNCATE;
                break;
            }
            memcpy(o->whole + o->off[i], from + at, (size_t)o->nb[i]);
            at += o->nb[i];
        }
    }
    gc_local(o, mln_pmpi.Ibcast(o->whole, (int)o->total, MPI_BYTE, 0, c->local, &o->lreq));
    GC_WAIT(3)
    o->fin(o);
    GC_END
}

/* Starts an allgather of every rank's nb[i] bytes (this rank's: mine, nmine); fin takes the
 * whole (comm order). */
static int allgather_start(gcoll_t *o, MPI_Count (*nb_of)(const gcoll_t *o, int i),
                           MPI_Request *request)
{
    mln_pl_gcomm_t *c = o->c;
    MPI_Count total = 0;

    o->nb = gc_alloc(o, (size_t)c->size * sizeof(MPI_Count));
    o->off = gc_alloc(o, (size_t)c->size * sizeof(MPI_Count));
    for (int i = 0; o->rc == MPI_SUCCESS && i < c->size; i++) {
        o->nb[i] = nb_of(o, i);
        o->off[i] = total;
        total += o->nb[i];
    }
    if (o->rc == MPI_SUCCESS && !fits(total))
        o->rc = MPI_ERR_COUNT;
    if (o->rc != MPI_SUCCESS) {
        int rc = o->rc;
        MPI_Comm handle = c->handle;
        gc_free(o);
        return mln_pl_grid_fail_on(handle, rc);
    }
    return gc_start(o, request);
}

static MPI_Count nb_recv(const gcoll_t *o, int i)
{
    tinfo_t rt;

    tinfo(o->a.rtype, &rt);
    return rcount_of(o, i) * rt.size;
}

static void fin_allgather(gcoll_t *o)
{
    tinfo_t rt;

    tinfo(o->a.rtype, &rt);
    for (int i = 0; i < o->c->size && o->rc == MPI_SUCCESS; i++)
        gc_local(o, unpack(o->whole + o->off[i], o->nb[i],
                           (char *)o->a.rbuf + rdispl_of(o, i) * rt.extent, rcount_of(o, i),
                           o->a.rtype));
}

static int allgather_user(const gcoll_args_t *a, MPI_Comm comm, MPI_Request *request)
{
    gcoll_t *o = gc_new(mln_pl_gcomm(comm), run_allgather, a);
    int rc;
    tinfo_t rt;

    if (o == NULL)
        return mln_pl_grid_fail_on(comm, MPI_ERR_NO_MEM);
    tinfo(a->rtype, &rt);
    if (a->sbuf == MPI_IN_PLACE) /* this rank's block is in place already */
        rc = pack(o, (const char *)a->rbuf + rdispl_of(o, o->c->rank) * rt.extent,
                  rcount_of(o, o->c->rank), a->rtype, &o->mine, &o->nmine);
    else
        rc = pack(o, a->sbuf, a->scount, a->stype, &o->mine, &o->nmine);
    if (rc != MPI_SUCCESS) {
        gc_free(o);
        return mln_pl_grid_fail_on(comm, rc);
    }
    o->fin = fin_allgather;
    return allgather_start(o, nb_recv, request);
}

int mln_pl_grid_Allgather(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                          void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    const int root = -1;
    gcoll_args_t a = GATHER_ARGS(sendcount, sendtype, recvcount, recvtype);

    return allgather_user(&a, comm, NULL);
}

int mln_pl_grid_Iallgather(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                           void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                           MPI_Request *request)
{
    const int root = -1;
    gcoll_args_t a = GATHER_ARGS(sendcount, sendtype, recvcount, recvtype);

    return allgather_user(&a, comm, request);
}

int mln_pl_grid_Allgatherv(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                           void *recvbuf, mln_cv_t recvcounts, mln_cv_t displs,
                           MPI_Datatype recvtype, MPI_Comm comm)
{
    const int root = -1;
    gcoll_args_t a = GATHER_ARGS(sendcount, sendtype, 0, recvtype);

    a.rcounts = recvcounts;
    a.rdispls = displs;
    return allgather_user(&a, comm, NULL);
}

int mln_pl_grid_Iallgatherv(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                            void *recvbuf, mln_cv_t recvcounts, mln_cv_t displs,
                            MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
    const int root = -1;
    gcoll_args_t a = GATHER_ARGS(sendcount, sendtype, 0, recvtype);

    a.rcounts = recvcounts;
    a.rdispls = displs;
    return allgather_user(&a, comm, request);
}

static MPI_Count nb_same(const gcoll_t *o, int i)
{
    (void)i;
    return o->nmine;
}

static void fin_bytes(gcoll_t *o)
{
    memcpy(o->fin_out, o->whole, (size_t)o->total);
}

int mln_pl_gcoll_allgather_bytes(mln_pl_gcomm_t *c, const void *in, int n, void *out)
{
    gcoll_args_t a = {.root = -1};
    gcoll_t *o = gc_new(c, run_allgather, &a);

    if (o == NULL)
        return MPI_ERR_NO_MEM;
    o->mine = in;
    o->nmine = n;
    o->fin = fin_bytes;
    o->fin_out = out;
    return allgather_start(o, nb_same, NULL);
}

/* Scan and Exscan: every rank's input (its typed span), combined in rank order up to this
 * rank (Exscan: up to the one before; rank 0's recvbuf is left alone). */
static void fin_scan(gcoll_t *o)
{
    const int last = o->kind == GC_SCAN ? o->c->rank : o->c->rank - 1;
    tinfo_t ti;
    unsigned char *cur = NULL;

    tinfo(o->a.rtype, &ti);
    for (int i = 0; i <= last && o->rc == MPI_SUCCESS; i++) {
        unsigned char *p = o->whole + o->off[i] - ti.tlb;
        if (cur != NULL)
            gc_local(o, MPI_Reduce_local(cur, p, (int)o->count, o->a.rtype, o->a.op));
        cur = p;
    }
    if (cur != NULL && o->rc == MPI_SUCCESS)
        gc_local(o, copy_typed(o, cur, o->a.rbuf, o->count, o->a.rtype));
}

static int scan_start(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype,
                      MPI_Op op, MPI_Comm comm, int kind, MPI_Request *request)
{
    gcoll_args_t a = {.sbuf = sendbuf, .rbuf = recvbuf, .rtype = datatype, .op = op, .root = -1};
    gcoll_t *o = gc_new(mln_pl_gcomm(comm), run_allgather, &a);
    tinfo_t ti;

    if (o == NULL)
        return mln_pl_grid_fail_on(comm, MPI_ERR_NO_MEM);
    if (!fits(count)) {
        gc_free(o);
        return mln_pl_grid_fail_on(comm, MPI_ERR_COUNT);
    }
    tinfo(datatype, &ti);
    o->kind = kind;
    o->count = count;
    o->mine = (const char *)(sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf) + ti.tlb;
    o->nmine = span(count, datatype);
    o->fin = fin_scan;
    return allgather_start(o, nb_same, request);
}

int mln_pl_grid_Scan(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype,
                     MPI_Op op, MPI_Comm comm)
{
    return scan_start(sendbuf, recvbuf, count, datatype, op, comm, GC_SCAN, NULL);
}

int mln_pl_grid_Iscan(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype,
                      MPI_Op op, MPI_Comm comm, MPI_Request *request)
{
    return scan_start(sendbuf, recvbuf, count, datatype, op, comm, GC_SCAN, request);
}

int mln_pl_grid_Exscan(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype,
                       MPI_Op op, MPI_Comm comm)
{
    return scan_start(sendbuf, recvbuf, count, datatype, op, comm, GC_EXSCAN, NULL);
}

int mln_pl_grid_Iexscan(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype,
                        MPI_Op op, MPI_Comm comm, MPI_Request *request)
{
    return scan_start(sendbuf, recvbuf, count, datatype, op, comm, GC_EXSCAN, request);
}

/* ---- Alltoall(v, w) ---------------------------------------------------------------------------
 */

enum { A2A, A2AV, A2AW };

/* Block j of the send (send) or receive side: its address, count and type. */
static void *block(const gcoll_t *o, int send, int j, MPI_Count *count, MPI_Datatype *type)
{
    const char *base = send ? o->a.sbuf : o->a.rbuf;
    tinfo_t ti;

    if (o->kind == A2AW) {
        *type = send ? o->a.stypes[j] : o->a.rtypes[j];
        *count = mln_cv_at(send ? o->a.scounts : o->a.rcounts, j);
        return (char *)base + mln_cv_at(send ? o->a.sdispls : o->a.rdispls, j);
    }
    *type = send ? o->a.stype : o->a.rtype;
    *count = send ? scount_of(o, j) : rcount_of(o, j);
    tinfo(*type, &ti);
    return (char *)base + (send ? sdispl_of(o, j) : rdispl_of(o, j)) * ti.extent;
}

/* The site's part: MPI's Ialltoallv (w) with the blocks of this site's ranks. */
static void a2a_site(gcoll_t *o)
{
    mln_pl_gcomm_t *c = o->c;
    const int n = c->nlocal;
    int *sc = int_array(o, n), *sd = int_array(o, n), *rc = int_array(o, n), *rd = int_array(o, n);
    MPI_Datatype *st = gc_alloc(o, (size_t)n * sizeof(MPI_Datatype)),
                 *rt = gc_alloc(o, (size_t)n * sizeof(MPI_Datatype));

    if (sc == NULL || sd == NULL || rc == NULL || rd == NULL || st == NULL || rt == NULL)
        return;
    for (int l = 0; l < n; l++) {
        int j = c->of_local[l];
        MPI_Count ks, kr, ds, dr;
        if (o->kind == A2AW) {
            ks = mln_cv_at(o->a.scounts, j);
            kr = mln_cv_at(o->a.rcounts, j);
            ds = mln_cv_at(o->a.sdispls, j);
            dr = mln_cv_at(o->a.rdispls, j);
            st[l] = o->a.stypes[j];
            rt[l] = o->a.rtypes[j];
        } else {
            ks = scount_of(o, j);
            kr = rcount_of(o, j);
            ds = sdispl_of(o, j);
            dr = rdispl_of(o, j);
        }
        if (!fits(ks) || !fits(kr) || !fits(ds) || !fits(dr)) {
            o->rc = MPI_ERR_COUNT;
            return;
        }
        sc[l] = (int)ks;
        rc[l] = (int)kr;
        sd[l] = (int)ds;
        rd[l] = (int)dr;
    }
    if (o->kind == A2AW)
        gc_local(o, mln_pmpi.Ialltoallw(o->a.sbuf, sc, sd, st, o->a.rbuf, rc, rd, rt, c->local,
                                        &o->lreq));
    else
        gc_local(o, mln_pmpi.Ialltoallv(o->a.sbuf, sc, sd, o->a.stype, o->a.rbuf, rc, rd,
                                        o->a.rtype, c->local, &o->lreq));
}

static int run_alltoall(gcoll_t *o)
{
    mln_pl_gcomm_t *c = o->c;
    MPI_Count count;
    MPI_Datatype type;
    int idx = 0;

    GC_BEGIN
    for (int j = 0; j < c->size && o->rc == MPI_SUCCESS; j++) {
        const void *data;
        MPI_Count n;
        void *at;
        if (mln_pl_grid_is_local(c, j))
            continue;
        at = block(o, 1, j, &count, &type);
        gc_local(o, pack(o, at, count, type, &data, &n));
        gc_send(o, j, data, n);
        gc_recv(o, j);
    }
    if (o->rc == MPI_SUCCESS)
        a2a_site(o);
    GC_WAIT(1)
    for (int j = 0; j < c->size && o->rc == MPI_SUCCESS; j++) {
        mln_relay_msg_t *m;
        void *at;
        if (mln_pl_grid_is_local(c, j))
            continue;
        m = gc_msg(o, idx++);
        at = block(o, 0, j, &count, &type);
        gc_local(o, unpack(m->data, (MPI_Count)m->len, at, count, type));
    }
    GC_END
}

/* MPI_IN_PLACE: the send side is a copy of the receive side as it is now. */
static int a2a_in_place(gcoll_t *o)
{
    MPI_Count end = 0;
    char *copy;

    for (int j = 0; j < o->c->size; j++) {
        MPI_Count count;
        MPI_Datatype type;
        char *at = block(o, 0, j, &count, &type);
        tinfo_t ti;
        tinfo(type, &ti);
        if (count > 0 && at - (char *)o->a.rbuf + ti.tlb + span(count, type) > end)
            end = at - (char *)o->a.rbuf + ti.tlb + span(count, type);
    }
    if ((copy = gc_alloc(o, (size_t)end)) == NULL)
        return MPI_ERR_NO_MEM;
    memcpy(copy, o->a.rbuf, (size_t)end);
    o->a.sbuf = copy;
    o->a.scount = o->a.rcount;
    o->a.scounts = o->a.rcounts;
    o->a.sdispls = o->a.rdispls;
    o->a.stype = o->a.rtype;
    o->a.stypes = o->a.rtypes;
    return MPI_SUCCESS;
}

static int a2a_start(int kind, const gcoll_args_t *a, MPI_Comm comm, MPI_Request *request)
{
    gcoll_t *o = gc_new(mln_pl_gcomm(comm), run_alltoall, a);
    int rc;

    if (o == NULL)
        return mln_pl_grid_fail_on(comm, MPI_ERR_NO_MEM);
    o->kind = kind;
    if (a->sbuf == MPI_IN_PLACE && (rc = a2a_in_place(o)) != MPI_SUCCESS) {
        gc_free(o);
        return mln_pl_grid_fail_on(comm, rc);
    }
    return gc_start(o, request);
}

int mln_pl_grid_Alltoall(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                         void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    const int root = -1;
    gcoll_args_t a = GATHER_ARGS(sendcount, sendtype, recvcount, recvtype);

    return a2a_start(A2A, &a, comm, NULL);
}

int mln_pl_grid_Ialltoall(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                          void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                          MPI_Request *request)
{
    const int root = -1;
    gcoll_args_t a = GATHER_ARGS(sendcount, sendtype, recvcount, recvtype);

    return a2a_start(A2A, &a, comm, request);
}

#define A2AV_ARGS                                                                                  \
    {                                                                                              \
        .sbuf = sendbuf, .rbuf = recvbuf, .scounts = sendcounts, .sdispls = sdispls,               \
        .rcounts = recvcounts, .rdispls = rdispls, .root = -1                                      \
    }

int mln_pl_grid_Alltoallv(const void *sendbuf, mln_cv_t sendcounts, mln_cv_t sdispls,
                          MPI_Datatype sendtype, void *recvbuf, mln_cv_t recvcounts,
                          mln_cv_t rdispls, MPI_Datatype recvtype, MPI_Comm comm)
{
    gcoll_args_t a = A2AV_ARGS;

    a.stype = sendtype;
    a.rtype = recvtype;
    return a2a_start(A2AV, &a, comm, NULL);
}

int mln_pl_grid_Ialltoallv(const void *sendbuf, mln_cv_t sendcounts, mln_cv_t sdispls,
                           MPI_Datatype sendtype, void *recvbuf, mln_cv_t recvcounts,
                           mln_cv_t rdispls, MPI_Datatype recvtype, MPI_Comm comm,
                           MPI_Request *request)
{
    gcoll_args_t a = A2AV_ARGS;

    a.stype = sendtype;
    a.rtype = recvtype;
    return a2a_start(A2AV, &a, comm, request);
}

int mln_pl_grid_Alltoallw(const void *sendbuf, mln_cv_t sendcounts, mln_cv_t sdispls,
                          const MPI_Datatype sendtypes[], void *recvbuf, mln_cv_t recvcounts,
                          mln_cv_t rdispls, const MPI_Datatype recvtypes[], MPI_Comm comm)
{
    gcoll_args_t a = A2AV_ARGS;

    a.stypes = sendtypes;
    a.rtypes = recvtypes;
    return a2a_start(A2AW, &a, comm, NULL);
}

int mln_pl_grid_Ialltoallw(const void *sendbuf, mln_cv_t sendcounts, mln_cv_t sdispls,
                           const MPI_Datatype sendtypes[], void *recvbuf, mln_cv_t recvcounts,
                           mln_cv_t rdispls, const MPI_Datatype recvtypes[], MPI_Comm comm,
                           MPI_Request *request)
{
    gcoll_args_t a = A2AV_ARGS;

    a.stypes = sendtypes;
    a.rtypes = recvtypes;
    return a2a_start(A2AW, &a, comm, request);
}

/* ---- neighbourhood collectives ----------------------------------------------------------------
 */

enum { NB_ALLGATHER, NB_ALLGATHERV, NB_ALLTOALL, NB_ALLTOALLV, NB_ALLTOALLW };

/* Block k of the send (send) or receive side of a neighbourhood collective. */
static void *nb_block(const gcoll_t *o, int send, int k, MPI_Count *count, MPI_Datatype *type)
{
    const char *base = send ? o->a.sbuf : o->a.rbuf;
    tinfo_t ti;

    if (o->kind == NB_ALLTOALLW) {
        *type = send ? o->a.stypes[k] : o->a.rtypes[k];
        *count = mln_cv_at(send ? o->a.scounts : o->a.rcounts, k);
        return (char *)base + mln_cv_at(send ? o->a.sdispls : o->a.rdispls, k);
    }
    *type = send ? o->a.stype : o->a.rtype;
    tinfo(*type, &ti);
    if (send && (o->kind == NB_ALLGATHER || o->kind == NB_ALLGATHERV)) {
        *count = o->a.scount; /* the same block to every neighbour */
        return (char *)base;
    }
    *count = send ? scount_of(o, k) : rcount_of(o, k);
    return (char *)base + (send ? sdispl_of(o, k) : rdispl_of(o, k)) * ti.extent;
}

/* The tags of a Cartesian neighbour's blocks: sent in direction 2d (negative) or 2d + 1
 * (positive) of dimension d, so that the block a rank sends in the positive direction is the
 * one its neighbour there receives as from the negative (and the other way round), as MPI-4
 * orders them even where both neighbours are one rank (a periodic dimension of 2); graphs: 0. */
static int nb_tag(const gcoll_t *o, int k, int recv)
{
    if (mln_pl_gtopo_cart_dims(o->c) < 0)
        return 0;
    return recv ? (k ^ 1) : k;
}

static int run_neighbor(gcoll_t *o)
{
    mln_pl_gcomm_t *c = o->c;
    MPI_Comm nbr = mln_pl_gtopo_comm(c);
    int nin = 0, nout = 0, *in = NULL, *out = NULL, idx = 0;
    MPI_Count count;
    MPI_Datatype type;
    void *at;

    mln_pl_gtopo_neighbors(c, NULL, &nin, NULL, &nout);
    in = o->nb_in;
    GC_BEGIN
    if ((in = o->nb_in = int_array(o, nin)) == NULL || (out = int_array(o, nout)) == NULL ||
        (o->lreqs = gc_alloc(o, (size_t)(nin + nout + 1) * sizeof(MPI_Request))) == NULL)
        return 1;
    mln_pl_gtopo_neighbors(c, in, &nin, out, &nout);
    for (int i = 0; i < nin && o->rc == MPI_SUCCESS; i++) { /* receives first */
        if (in[i] == MPI_PROC_NULL)
            continue;
        at = nb_block(o, 0, i, &count, &type);
        if (!mln_pl_grid_is_local(c, in[i]))
            gc_recv_on(o, in[i], c->nctx, nb_tag(o, i, 1));
        else if (!fits(count))
            o->rc = MPI_ERR_COUNT;
        else
            gc_local(o, mln_pmpi.Irecv(at, (int)count, type, c->lrank[in[i]], nb_tag(o, i, 1), nbr,
                                       &o->lreqs[o->nlreqs++]));
    }
    for (int j = 0; j < nout && o->rc == MPI_SUCCESS; j++) {
        const void *data;
        MPI_Count n;
        if (out[j] == MPI_PROC_NULL)
            continue;
        at = nb_block(o, 1, j, &count, &type);
        if (mln_pl_grid_is_local(c, out[j])) {
            if (!fits(count))
                o->rc = MPI_ERR_COUNT;
            else
                gc_local(o, mln_pmpi.Isend(at, (int)count, type, c->lrank[out[j]], nb_tag(o, j, 0),
                                           nbr, &o->lreqs[o->nlreqs++]));
            continue;
        }
        gc_local(o, pack(o, at, count, type, &data, &n));
        gc_send_on(o, out[j], c->nctx, nb_tag(o, j, 0), data, n);
    }
    GC_WAIT(1)
    for (int i = 0; i < nin && o->rc == MPI_SUCCESS; i++) {
        mln_relay_msg_t *m;
        if (in[i] == MPI_PROC_NULL || mln_pl_grid_is_local(c, in[i]))
            continue;
        m = gc_msg(o, idx++);
        at = nb_block(o, 0, i, &count, &type);
        gc_local(o, unpack(m->data, (MPI_Count)m->len, at, count, type));
    }
    GC_END
}

static int nb_start(int kind, const gcoll_args_t *a, MPI_Comm comm, MPI_Request *request)
{
    mln_pl_gcomm_t *c = mln_pl_gcomm(comm);
    gcoll_t *o;

    if (c->topo == NULL)
        return mln_pl_grid_fail_on(comm, MPI_ERR_TOPOLOGY);
    if ((o = gc_new(c, run_neighbor, a)) == NULL)
        return mln_pl_grid_fail_on(comm, MPI_ERR_NO_MEM);
    o->kind = kind;
    mln_pl_gtopo_neighbors(c, NULL, &o->nr, NULL, &o->ns);
    return gc_start(o, request);
}

int mln_pl_grid_Neighbor_allgather(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                                   void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype,
                                   MPI_Comm comm)
{
    const int root = -1;
    gcoll_args_t a = GATHER_ARGS(sendcount, sendtype, recvcount, recvtype);

    return nb_start(NB_ALLGATHER, &a, comm, NULL);
}

int mln_pl_grid_Ineighbor_allgather(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                                    void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype,
                                    MPI_Comm comm, MPI_Request *request)
{
    const int root = -1;
    gcoll_args_t a = GATHER_ARGS(sendcount, sendtype, recvcount, recvtype);

    return nb_start(NB_ALLGATHER, &a, comm, request);
}

int mln_pl_grid_Neighbor_allgatherv(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                                    void *recvbuf, mln_cv_t recvcounts, mln_cv_t displs,
                                    MPI_Datatype recvtype, MPI_Comm comm)
{
    const int root = -1;
    gcoll_args_t a = GATHER_ARGS(sendcount, sendtype, 0, recvtype);

    a.rcounts = recvcounts;
    a.rdispls = displs;
    return nb_start(NB_ALLGATHERV, &a, comm, NULL);
}

int mln_pl_grid_Ineighbor_allgatherv(const void *sendbuf, MPI_Count sendcount,
                                     MPI_Datatype sendtype, void *recvbuf, mln_cv_t recvcounts,
                                     mln_cv_t displs, MPI_Datatype recvtype, MPI_Comm comm,
                                     MPI_Request *request)
{
    const int root = -1;
    gcoll_args_t a = GATHER_ARGS(sendcount, sendtype, 0, recvtype);

    a.rcounts = recvcounts;
    a.rdispls = displs;
    return nb_start(NB_ALLGATHERV, &a, comm, request);
}

int mln_pl_grid_Neighbor_alltoall(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                                  void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype,
                                  MPI_Comm comm)
{
    const int root = -1;
    gcoll_args_t a = GATHER_ARGS(sendcount, sendtype, recvcount, recvtype);

    return nb_start(NB_ALLTOALL, &a, comm, NULL);
}

int mln_pl_grid_Ineighbor_alltoall(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                                   void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype,
                                   MPI_Comm comm, MPI_Request *request)
{
    const int root = -1;
    gcoll_args_t a = GATHER_ARGS(sendcount, sendtype, recvcount, recvtype);

    return nb_start(NB_ALLTOALL, &a, comm, request);
}

int mln_pl_grid_Neighbor_alltoallv(const void *sendbuf, mln_cv_t sendcounts, mln_cv_t sdispls,
                                   MPI_Datatype sendtype, void *recvbuf, mln_cv_t recvcounts,
                                   mln_cv_t rdispls, MPI_Datatype recvtype, MPI_Comm comm)
{
    gcoll_args_t a = A2AV_ARGS;

    a.stype = sendtype;
    a.rtype = recvtype;
    return nb_start(NB_ALLTOALLV, &a, comm, NULL);
}

int mln_pl_grid_Ineighbor_alltoallv(const void *sendbuf, mln_cv_t sendcounts, mln_cv_t sdispls,
                                    MPI_Datatype sendtype, void *recvbuf, mln_cv_t recvcounts,
                                    mln_cv_t rdispls, MPI_Datatype recvtype, MPI_Comm comm,
                                    MPI_Request *request)
{
    gcoll_args_t a = A2AV_ARGS;

    a.stype = sendtype;
    a.rtype = recvtype;
    return nb_start(NB_ALLTOALLV, &a, comm, request);
}

int mln_pl_grid_Neighbor_alltoallw(const void *sendbuf, mln_cv_t sendcounts, mln_cv_t sdispls,
                                   const MPI_Datatype sendtypes[], void *recvbuf,
                                   mln_cv_t recvcounts, mln_cv_t rdispls,
                                   const MPI_Datatype recvtypes[], MPI_Comm comm)
{
    gcoll_args_t a = A2AV_ARGS;

    a.stypes = sendtypes;
    a.rtypes = recvtypes;
    return nb_start(NB_ALLTOALLW, &a, comm, NULL);
}

int mln_pl_grid_Ineighbor_alltoallw(const void *sendbuf, mln_cv_t sendcounts, mln_cv_t sdispls,
                                    const MPI_Datatype sendtypes[], void *recvbuf,
                                    mln_cv_t recvcounts, mln_cv_t rdispls,
                                    const MPI_Datatype recvtypes[], MPI_Comm comm,
                                    MPI_Request *request)
{
    gcoll_args_t a = A2AV_ARGS;

    a.stypes = sendtypes;
    a.rtypes = recvtypes;
    return nb_start(NB_ALLTOALLW, &a, comm, request);
}
