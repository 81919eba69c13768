/*
 * preload_grid.c - grid mode of the interposition layer (docs/PRELOAD.md, "Grid mode").
 *
 * Under `multilane grid run` every private site runs its own MPI job, and the layer gives an
 * unmodified program ONE MPI_COMM_WORLD of every site's ranks for point-to-point: global rank
 * = the site's first rank + its rank in the site's own world (MLN_GRID_SITES order).
 *
 *   MPI_Send(dest) --same site--> MPI on a private duplicate of the site's world (dest - first)
 *                  --other site--> packed bytes, mln_relay_isend (CTX_WORLD) -> gateways
 *   MPI_Recv(src)  --> the posted queue: a generalized request, matched in posting order
 *
 * Matching.  Every receive on the grid world is posted here, in the program's order; each
 * progress pass (mln_pl_progress, so every wait) walks the queue and gives each receive the
 * first message that matches it among the two origins: same-site messages that MPI holds
 * (MPI_Improbe on the duplicate, source translated, then MPI_Imrecv into the receive's buffer)
 * and messages of other sites that arrived whole (mln_relay_arrived, kept in per-pair order:
 * unpacked, then mln_relay_take, which sends MATCHED to a synchronous sender).  A receive from
 * a given rank looks only where that rank's messages come; MPI_ANY_SOURCE looks at both,
 * alternating which first.  Messages of one pair come by one origin, so MPI's non-overtaking
 * rule holds; messages of different senders have no order to keep.  Probes look the same way
 * without taking; matched probes take (a same-site message keeps MPI's own MPI_Message, one of
 * another site gets a stand-in).
 *
 * Every communicator the program makes from the world that keeps ranks of several sites works
 * the same way, with its own relay contexts (preload_gcomm.c); collectives on them are
 * hierarchical (preload_gcoll.c).  The barriers of MPI_Init and MPI_Finalize: the site's
 * barrier, its rank 0 exchanges one zero-byte message with every other site's rank 0
 * (CTX_LAYER), the site's barrier again.  What the layer cannot do across sites is refused by
 * the generated guards (mln_pl_grid_refuse).
 */
#include "preload_int.h"
#include "preload_grid.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int mln_pl_grid_on;

/* ---- errors -------------------------------------------------------------------------------- */

static int errhandler_fatal(MPI_Comm comm)
{
    MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
    int fatal;

    if (MPI_Comm_get_errhandler(comm, &eh) != MPI_SUCCESS)
        return 1;
    fatal = eh == MPI_ERRORS_ARE_FATAL;
#ifdef MPI_ERRORS_ABORT
    fatal |= eh == MPI_ERRORS_ABORT;
#endif
    MPI_Errhandler_free(&eh);
    return fatal;
}

void mln_pl_grid_error(MPI_Comm comm, int code)
{
    mln_pl_grid_t *g = mln_pl.grid;
    char line[256];

    if (g != NULL && errhandler_fatal(comm)) { /* every site ends, not this one alone */
        char err[MPI_MAX_ERROR_STRING] = "";
        int len = 0;
        MPI_Error_string(code, err, &len);
        snprintf(line, sizeof(line), "MPI_ERRORS_ARE_FATAL on MPI_COMM_WORLD: %s", err);
        mln_relay_abort(g->relay, code, line);
    }
    MPI_Comm_call_errhandler(comm, code);
}

int mln_pl_grid_fail(int code)
{
    mln_pl_grid_error(MPI_COMM_WORLD, code);
    return code;
}

int mln_pl_grid_fail_on(MPI_Comm comm, int code)
{
    mln_pl_grid_error(comm == MPI_COMM_NULL ? MPI_COMM_WORLD : comm, code);
    return code;
}

int mln_pl_grid_refuse(const char *call, int on_world)
{
    mln_pl_grid_t *g = mln_pl.grid;
    int said = 0;

    MLN_PL_LOCK();
    for (int i = 0; g != NULL && i < g->nsaid; i++)
        said |= g->said[i] == call;
    if (!said) {
        fprintf(stderr, "multilane grid: %s%s is not supported yet\n", call,
                on_world ? " on a communicator that spans sites" : " under `multilane grid run`");
        if (g != NULL && g->nsaid < GRID_SAID_MAX)
            g->said[g->nsaid++] = call;
    }
    MLN_PL_UNLOCK();
    return mln_pl_grid_fail(MPI_ERR_UNSUPPORTED_OPERATION);
}

/* Before MPI_Abort ends the site's job: its launcher kills the site's other ranks at once
 * (hydra within a millisecond), so a short wait lets those that heard the same news (ABORT or
 * FAIL through their own gateway connections) print their own line first.  The rank that
 * called MPI_Abort waits longer: its ABORT reaches its gateways before its site-mates die, so
 * that no gateway takes their deaths for the cause. */
#define GRID_LINGER_FATAL_S 0.1
#define GRID_LINGER_ABORT_S 0.25

/* The relay's fatal events (an ABORT of any rank, a gateway lost): one line, the site ends. */
static void grid_fatal(int code, const char *line, void *arg)
{
    mln_pl_grid_t *g = arg;

    if (!g->fatal) {
        g->fatal = 1;
        fprintf(stderr, "%s\n", line);
        fflush(stderr);
        mln_pl_linger(GRID_LINGER_FATAL_S);
        mln_pmpi.Abort(MPI_COMM_WORLD, code);
    }
    _exit(code);
}

/* ---- datatypes ------------------------------------------------------------------------------ */

/* 1 when count x dtype is one block of bytes at buf + *lb. */
int mln_pl_dtype_block(MPI_Datatype dtype, MPI_Count count, MPI_Aint *lb)
{
    MPI_Count size = 0, tlb = 0, text = 0, elb = 0, ext = 0;

    if (MPI_Type_size_x(dtype, &size) != MPI_SUCCESS ||
        MPI_Type_get_true_extent_x(dtype, &tlb, &text) != MPI_SUCCESS ||
        MPI_Type_get_extent_x(dtype, &elb, &ext) != MPI_SUCCESS)
        return 0;
    *lb = (MPI_Aint)tlb;
    return size == text && (count <= 1 || ext == size);
}

/* The bytes of a send: buf itself (*copy NULL) or packed into *copy. */
static mln_status_t send_bytes(const mln_pl_req_t *r, int always_copy, const void **data,
                               uint64_t *n, void **copy)
{
    MPI_Aint lb = 0;
    int size = 0, pos = 0;

    *copy = NULL;
    *n = (uint64_t)mln_pl_bytes(r->count, r->dtype);
    if (mln_pl_dtype_block(r->dtype, r->count, &lb)) {
        *data = (const char *)r->buf + lb;
        if (!always_copy || *n == 0)
            return MLN_OK;
        if ((*copy = malloc(*n)) == NULL)
            return MLN_ERR_NOMEM;
        memcpy(*copy, *data, *n);
        *data = *copy;
        return MLN_OK;
    }
    if (r->count > INT_MAX ||
        MPI_Pack_size((int)r->count, r->dtype, MPI_COMM_WORLD, &size) != MPI_SUCCESS)
        return MLN_ERR_UNSUPPORTED;
    if ((*copy = malloc(size > 0 ? (size_t)size : 1)) == NULL)
        return MLN_ERR_NOMEM;
    if (MPI_Pack(r->buf, (int)r->count, r->dtype, *copy, size, &pos, MPI_COMM_WORLD) !=
        MPI_SUCCESS) {
        free(*copy);
        *copy = NULL;
        return MLN_ERR_MPI;
    }
    *data = *copy;
    *n = (uint64_t)pos;
    return MLN_OK;
}

/* Another site's message into a receive's buffer (whole elements, as MPI would write them);
 * *got: the bytes taken.  MLN_ERR_TRUNCATE when it is longer than the buffer. */
static mln_status_t unpack(const mln_relay_msg_t *m, void *buf, MPI_Count count, MPI_Datatype dtype,
                           MPI_Count *got)
{
    MPI_Count room = mln_pl_bytes(count, dtype), n = (MPI_Count)m->len, size = 0;
    MPI_Aint lb = 0;
    int pos = 0;

    if (n > room)
        n = room;
    *got = n;
    MPI_Type_size_x(dtype, &size);
    if (n > 0 && mln_pl_dtype_block(dtype, count, &lb))
        memcpy((char *)buf + lb, m->data, (size_t)n);
    else if (n > 0 && size > 0 && n / size > 0 && n <= INT_MAX)
        MPI_Unpack(m->data, (int)n, &pos, buf, (int)(n / size), dtype, MPI_COMM_WORLD);
    else if (n > INT_MAX)
        return MLN_ERR_UNSUPPORTED; /* a non-contiguous receive of more than 2 GiB */
    return (uint64_t)n < m->len ? MLN_ERR_TRUNCATE : MLN_OK;
}

void mln_pl_grid_remote_status(const mln_pl_gcomm_t *c, const mln_relay_msg_t *m, MPI_Count got,
                               MPI_Status *st)
{
    st->MPI_SOURCE = c->of_global[m->src];
    st->MPI_TAG = m->tag;
    MPI_Status_set_elements_x(st, MPI_BYTE, got);
    MPI_Status_set_cancelled(st, 0);
}

/* ---- sends ---------------------------------------------------------------------------------- */

/* A send to a rank of this site: MPI's own, on the communicator's private one (blocking: its
 * nonblocking form waited for while the relay moves). */
static int local_send(mln_pl_op_t op, const void *buf, MPI_Count count, MPI_Datatype dtype,
                      int dest, int tag, MPI_Comm c, int mode, MPI_Request *request)
{
    MPI_Request req = MPI_REQUEST_NULL, *out = mode == 0 ? &req : request;
    int rc;

    switch (op) {
    case MLN_PL_SSEND:
        rc = mode == 2 ? MLN_PL_REAL(Ssend_init, count, buf, count, dtype, dest, tag, c, out)
                       : MLN_PL_REAL(Issend, count, buf, count, dtype, dest, tag, c, out);
        break;
    case MLN_PL_BSEND:
        rc = mode == 2 ? MLN_PL_REAL(Bsend_init, count, buf, count, dtype, dest, tag, c, out)
                       : MLN_PL_REAL(Ibsend, count, buf, count, dtype, dest, tag, c, out);
        break;
    case MLN_PL_RSEND:
        rc = mode == 2 ? MLN_PL_REAL(Rsend_init, count, buf, count, dtype, dest, tag, c, out)
                       : MLN_PL_REAL(Irsend, count, buf, count, dtype, dest, tag, c, out);
        break;
    default:
        rc = mode == 2 ? MLN_PL_REAL(Send_init, count, buf, count, dtype, dest, tag, c, out)
                       : MLN_PL_REAL(Isend, count, buf, count, dtype, dest, tag, c, out);
        break;
    }
    if (rc == MPI_SUCCESS && mode == 0)
        rc = mln_pl_poll(&req);
    return rc == MPI_SUCCESS ? rc : mln_pl_grid_fail(rc);
}

int mln_pl_grid_send(mln_pl_op_t op, const void *buf, MPI_Count count, MPI_Datatype dtype, int dest,
                     int tag, MPI_Comm comm, int mode, MPI_Request *request)
{
    mln_pl_gcomm_t *c = mln_pl_gcomm(comm);

    if (dest != MPI_PROC_NULL && (dest < 0 || dest >= c->size))
        return mln_pl_grid_fail(MPI_ERR_RANK);
    if (dest == MPI_PROC_NULL || mln_pl_grid_is_local(c, dest))
        return local_send(op, buf, count, dtype, dest == MPI_PROC_NULL ? dest : c->lrank[dest], tag,
                          c->local, mode, request);
    if (tag < 0)
        return mln_pl_grid_fail(MPI_ERR_TAG);
    if (mode == 0)
        return mln_pl_blocking(op, (void *)buf, count, dtype, dest, tag, comm, MPI_STATUS_IGNORE);
    return mln_pl_req_make(op, buf, count, dtype, dest, tag, comm, mode == 2, request);
}

static mln_status_t send_begin(mln_pl_grid_t *g, mln_pl_req_t *r)
{
    mln_pl_req_t *d = r;
    const void *data = NULL;
    uint64_t n = 0;
    void *copy = NULL;
    mln_status_t st;

    free(r->copy); /* a persistent request's copy of its last start */
    r->copy = NULL;
    st = send_bytes(r, r->op == MLN_PL_BSEND, &data, &n, &copy);
    if (st != MLN_OK)
        return st;
    if (r->op == MLN_PL_BSEND) { /* the copy travels on its own; r is complete now */
        d = mln_pl_req_new(MLN_PL_BSEND);
        if (d == NULL) {
            free(copy);
            return MLN_ERR_NOMEM;
        }
        d->detached = d->grid = 1;
        d->comm = r->comm;
    }
    d->copy = copy;
    st = mln_relay_isend(g->relay, r->gc->world[r->peer], r->gc->ctx, r->tag, data, n,
                         r->op == MLN_PL_SSEND, &d->rsend);
    if (st != MLN_OK) {
        if (d != r) {
            free(d->copy);
            free(d);
        }
        return st;
    }
    d->next_grid = g->sends;
    g->sends = d;
    if (d != r)
        mln_pl_req_done(r, MLN_OK, NULL);
    return MLN_OK;
}

static void sends_progress(mln_pl_grid_t *g)
{
    for (mln_pl_req_t **pp = &g->sends; *pp;) {
        mln_pl_req_t *r = *pp;
        mln_status_t st = MLN_OK;
        if (!mln_relay_send_test(g->relay, r->rsend, &st)) {
            pp = &r->next_grid;
            continue;
        }
        *pp = r->next_grid;
        r->rsend = NULL;
        mln_pl_req_done(r, st, NULL); /* a detached one is freed there */
    }
}

/* ---- receives ------------------------------------------------------------------------------- */

int mln_pl_grid_recv(void *buf, MPI_Count count, MPI_Datatype dtype, int source, int tag,
                     MPI_Comm comm, int mode, MPI_Request *request, MPI_Status *status)
{
    mln_pl_gcomm_t *gc = mln_pl_gcomm(comm);
    MPI_Comm c = gc->local;
    int rc;

    if (source == MPI_PROC_NULL) { /* MPI's own answer (source MPI_PROC_NULL, no data) */
        if (mode == 0)
            rc = MLN_PL_REAL(Recv, count, buf, count, dtype, source, tag, c, status);
        else if (mode == 1)
            rc = MLN_PL_REAL(Irecv, count, buf, count, dtype, source, tag, c, request);
        else
            rc = MLN_PL_REAL(Recv_init, count, buf, count, dtype, source, tag, c, request);
        return rc == MPI_SUCCESS ? rc : mln_pl_grid_fail(rc);
    }
    if (source != MPI_ANY_SOURCE && (source < 0 || source >= gc->size))
        return mln_pl_grid_fail(MPI_ERR_RANK);
    if (tag < 0 && tag != MPI_ANY_TAG)
        return mln_pl_grid_fail(MPI_ERR_TAG);
    if (mode == 0)
        return mln_pl_blocking(MLN_PL_RECV, buf, count, dtype, source, tag, comm, status);
    return mln_pl_req_make(MLN_PL_RECV, buf, count, dtype, source, tag, comm, mode == 2, request);
}

mln_status_t mln_pl_grid_begin(mln_pl_req_t *r)
{
    mln_pl_grid_t *g = mln_pl.grid;

    if (g == NULL || (r->gc = mln_pl_gcomm(r->comm)) == NULL)
        return MLN_ERR_ARG;
    r->mreq = MPI_REQUEST_NULL;
    if (r->op != MLN_PL_RECV)
        return send_begin(g, r);
    r->next_grid = NULL;
    *g->posted_tail = r;
    g->posted_tail = &r->next_grid;
    return MLN_OK;
}

static void posted_del(mln_pl_grid_t *g, mln_pl_req_t *r)
{
    for (mln_pl_req_t **pp = &g->posted; *pp; pp = &(*pp)->next_grid)
        if (*pp == r) {
            *pp = r->next_grid;
            if (g->posted_tail == &r->next_grid)
                g->posted_tail = pp;
            r->next_grid = NULL;
            return;
        }
}

/* The oldest message of another site that (source, tag) matches, or NULL. */
mln_relay_msg_t *mln_pl_grid_arrived(mln_pl_grid_t *g, mln_pl_gcomm_t *c, int source, int tag)
{
    const int src = source == MPI_ANY_SOURCE ? -1 : c->world[source];

    for (mln_relay_msg_t *m = mln_relay_arrived(g->relay, c->ctx); m; m = m->next)
        if ((src < 0 || m->src == src) && (tag == MPI_ANY_TAG || m->tag == tag))
            return m;
    return NULL;
}

/* MPI's probe of a same-site message that (source, tag) matches (matched: takes it). */
int mln_pl_grid_local_probe(mln_pl_gcomm_t *c, int source, int tag, int matched, int *flag,
                            MPI_Message *msg, MPI_Status *st)
{
    int src = source == MPI_ANY_SOURCE ? source : c->lrank[source];
    int rc = matched ? mln_pmpi.Improbe(src, tag, c->local, flag, msg, st)
                     : mln_pmpi.Iprobe(src, tag, c->local, flag, st);

    if (rc == MPI_SUCCESS && *flag && st->MPI_SOURCE >= 0)
        st->MPI_SOURCE = c->of_local[st->MPI_SOURCE];
    return rc;
}

/* A receive matched to a same-site message: MPI's Imrecv into its buffer. */
void mln_pl_grid_local_deliver(mln_pl_grid_t *g, mln_pl_req_t *r, MPI_Message *msg)
{
    int rc = MLN_PL_REAL(Imrecv, r->count, r->buf, r->count, r->dtype, msg, &r->mreq);

    if (rc != MPI_SUCCESS) {
        mln_pl_req_done(r, MLN_ERR_MPI, NULL);
        return;
    }
    r->next_grid = g->mrecvs;
    g->mrecvs = r;
}

/* Another site's message m into receive r (taken: a matched probe took it already). */
void mln_pl_grid_remote_deliver(mln_pl_grid_t *g, mln_pl_req_t *r, mln_relay_msg_t *m, int taken)
{
    MPI_Status st;
    MPI_Count got = 0;
    mln_status_t s;

    memset(&st, 0, sizeof(st));
    s = unpack(m, r->buf, r->count, r->dtype, &got);
    mln_pl_grid_remote_status(r->gc, m, got, &st);
    if (!taken)
        mln_relay_take(g->relay, m);
    mln_relay_msg_free(m);
    mln_pl_req_done(r, s, &st);
}

/* Gives r the first message that matches it, if any: 1 when it did. */
static int match_one(mln_pl_grid_t *g, mln_pl_req_t *r)
{
    const int any = r->peer == MPI_ANY_SOURCE;
    const int look_local = any || mln_pl_grid_is_local(r->gc, r->peer),
              look_remote = any || !look_local;

    for (int pass = 0; pass < 2; pass++) {
        int remote = pass == 0 ? g->remote_first : !g->remote_first;
        if (remote && look_remote) {
            mln_relay_msg_t *m = mln_pl_grid_arrived(g, r->gc, r->peer, r->tag);
            if (m == NULL)
                continue;
            posted_del(g, r);
            mln_pl_grid_remote_deliver(g, r, m, 0);
        } else if (!remote && look_local) {
            MPI_Message msg;
            MPI_Status st;
            int flag = 0;
            if (mln_pl_grid_local_probe(r->gc, r->peer, r->tag, 1, &flag, &msg, &st) !=
                    MPI_SUCCESS ||
                !flag)
                continue;
            posted_del(g, r);
            mln_pl_grid_local_deliver(g, r, &msg);
        } else {
            continue;
        }
        if (any) /* the next wildcard looks at the other origin first */
            g->remote_first = !remote;
        return 1;
    }
    return 0;
}

static void mrecvs_progress(mln_pl_grid_t *g)
{
    for (mln_pl_req_t **pp = &g->mrecvs; *pp;) {
        mln_pl_req_t *r = *pp;
        MPI_Status st;
        int flag = 0, rc;
        memset(&st, 0, sizeof(st));
        rc = mln_pmpi.Test(&r->mreq, &flag, &st);
        if (rc == MPI_SUCCESS && !flag) {
            pp = &r->next_grid;
            continue;
        }
        *pp = r->next_grid;
        if (st.MPI_SOURCE >= 0)
            st.MPI_SOURCE = r->gc->of_local[st.MPI_SOURCE];
        if (rc != MPI_SUCCESS) /* a code (MPICH's carry more than the class) */
            MPI_Error_class(rc, &rc);
        mln_pl_req_done(r,
                        rc == MPI_SUCCESS        ? MLN_OK
                        : rc == MPI_ERR_TRUNCATE ? MLN_ERR_TRUNCATE
                                                 : MLN_ERR_MPI,
                        &st);
    }
}

void mln_pl_grid_progress(void)
{
    mln_pl_grid_t *g = mln_pl.grid;

    mln_relay_progress(g->relay, 0);
    if (g->sends)
        sends_progress(g);
    mln_pl_gcoll_progress(g);
    for (mln_pl_req_t *r = g->posted, *next; r; r = next) {
        next = r->next_grid;
        match_one(g, r);
    }
    if (g->mrecvs)
        mrecvs_progress(g);
}

void mln_pl_grid_cancel(mln_pl_req_t *r)
{
    mln_pl_grid_t *g = mln_pl.grid;
    MPI_Status st;

    for (mln_pl_req_t *p = g->posted; p; p = p->next_grid)
        if (p == r) { /* not matched yet: cancelled */
            posted_del(g, r);
            memset(&st, 0, sizeof(st));
            st.MPI_SOURCE = MPI_ANY_SOURCE;
            st.MPI_TAG = MPI_ANY_TAG;
            MPI_Status_set_cancelled(&st, 1);
            mln_pl_req_done(r, MLN_OK, &st);
            return;
        }
}

/* ---- the barrier ---------------------------------------------------------------------------- */

static int site_barrier(mln_pl_grid_t *g)
{
    MPI_Request req;
    int rc = mln_pmpi.Ibarrier(g->local, &req);

    return rc == MPI_SUCCESS ? mln_pl_poll(&req) : rc;
}

/* Rank 0 of each site: one zero-byte message to every other site's rank 0, one from each. */
static int sites_exchange(mln_pl_grid_t *g)
{
    mln_relay_send_t **sends = calloc((size_t)g->nsites, sizeof(*sends));
    unsigned char *got = calloc((size_t)g->nsites, 1);
    int left = 0, spins = 0;
    mln_status_t st = MLN_OK;

    if (sends == NULL || got == NULL) {
        free(sends);
        free(got);
        return MPI_ERR_NO_MEM;
    }
    for (int s = 0; s < g->nsites && st == MLN_OK; s++) {
        sends[s] = NULL;
        got[s] = s == g->site;
        if (s == g->site)
            continue;
        st = mln_relay_isend(g->relay, mln_relay_site_first(g->relay, s), MLN_RELAY_CTX_LAYER,
                             GRID_TAG_BARRIER, NULL, 0, 0, &sends[s]);
        left += st == MLN_OK ? 2 : 0;
    }
    if (st != MLN_OK) /* no barrier: the error goes to the program (its handler) */
        left = 0;
    while (left > 0) {
        mln_pl_progress();
        for (int s = 0; s < g->nsites; s++) {
            mln_status_t sst = MLN_OK;
            if (sends[s] != NULL && mln_relay_send_test(g->relay, sends[s], &sst)) {
                sends[s] = NULL;
                left--;
                st = st != MLN_OK ? st : sst;
            }
        }
        for (mln_relay_msg_t *m = mln_relay_arrived(g->relay, MLN_RELAY_CTX_LAYER), *next; m;
             m = next) {
            int s = mln_relay_site_of_rank(g->relay, m->src);
            next = m->next;
            if (m->tag != GRID_TAG_BARRIER || s < 0 || got[s] ||
                m->src != mln_relay_site_first(g->relay, s))
                continue;
            got[s] = 1;
            left--;
            mln_relay_take(g->relay, m);
            mln_relay_msg_free(m);
        }
        if (left > 0)
            mln_pl_idle(&spins);
    }
    free(sends);
    free(got);
    return st == MLN_OK ? MPI_SUCCESS : MPI_ERR_OTHER;
}

static int grid_barrier(mln_pl_grid_t *g)
{
    int rc = site_barrier(g), lrank = g->rank - g->first;

    if (rc == MPI_SUCCESS && lrank == 0 && g->nsites > 1)
        rc = sites_exchange(g);
    if (rc == MPI_SUCCESS)
        rc = site_barrier(g);
    return rc;
}

/* ---- MPI_Abort ------------------------------------------------------------------------------ */

int mln_pl_Abort(MPI_Comm comm, int errorcode)
{
    mln_pl_grid_t *g = mln_pl.grid;
    char line[160];

    /* every site ends, whatever the communicator; the others say "multilane grid: rank R of
     * site S called MPI_Abort(CODE): " and this line */
    if (g != NULL) {
        snprintf(line, sizeof(line), "MPI_Abort(%s, %d) in the program",
                 comm == MPI_COMM_WORLD  ? "MPI_COMM_WORLD"
                 : comm == MPI_COMM_SELF ? "MPI_COMM_SELF"
                                         : "a communicator",
                 errorcode);
        mln_relay_abort(g->relay, errorcode, line);
        mln_pl_linger(GRID_LINGER_ABORT_S);
    }
    return mln_pmpi.Abort(MPI_COMM_WORLD, errorcode);
}

/* ---- MPI_Wtime --------------------------------------------------------------------------------
 */

/* One clock for every site: the hosts' real time (synchronized by NTP on real sites, one clock
 * on the test bed), where each MPI's own may count from its process's start. */
double mln_pl_Wtime(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double mln_pl_Wtick(void)
{
    struct timespec ts;

    clock_getres(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- life cycle ------------------------------------------------------------------------------ */

static void start_failed(const char *why, int lrank)
{
    fprintf(stderr, "multilane grid: rank %d of this site: %s\n", lrank, why);
    fflush(stderr);
    mln_pl_linger(MLN_PL_LINGER_START_S);
    mln_pmpi.Abort(MPI_COMM_WORLD, 1);
}

void mln_pl_grid_start(void)
{
    mln_pl_grid_t *g = calloc(1, sizeof(*g));
    int lrank = 0, lsize = 0;
    char why[256];

    mln_pmpi.Comm_rank(MPI_COMM_WORLD, &lrank);
    mln_pmpi.Comm_size(MPI_COMM_WORLD, &lsize);
    if (g == NULL)
        start_failed("out of memory", lrank);
    if (mln_relay_open(lrank, NULL, &g->relay) != MLN_OK)
        start_failed("cannot join the grid (the line above says why)", lrank);
    g->rank = mln_relay_rank(g->relay);
    g->size = mln_relay_size(g->relay);
    g->site = mln_relay_site(g->relay);
    g->nsites = mln_relay_nsites(g->relay);
    g->first = mln_relay_site_first(g->relay, g->site);
    g->nlocal = mln_relay_site_size(g->relay, g->site);
    if (g->nlocal != lsize || g->rank != g->first + lrank) {
        snprintf(why, sizeof(why), "MLN_GRID_SITES gives site %s %d ranks, but its MPI job has %d",
                 mln_relay_site_name(g->relay, g->site), g->nlocal, lsize);
        start_failed(why, lrank);
    }
    mln_relay_on_fatal(g->relay, grid_fatal, g);
    if (mln_pmpi.Comm_dup(MPI_COMM_WORLD, &g->local) != MPI_SUCCESS)
        start_failed("MPI refused a duplicate of the site's MPI_COMM_WORLD", lrank);
    MPI_Comm_set_errhandler(g->local, MPI_ERRORS_RETURN);
    if (mln_pl_gcomm_world(g) != MPI_SUCCESS)
        start_failed("out of memory", lrank);
    g->posted_tail = &g->posted;
    mln_pl.grid = g;
    mln_pl_grid_on = 1;
    mln_pl_p2p = 1;
    if (grid_barrier(g) != MPI_SUCCESS) /* every site is up before the program runs */
        start_failed("the grid's first barrier failed", lrank);
}

void mln_pl_grid_finish(void)
{
    mln_pl_grid_t *g = mln_pl.grid;
    int spins = 0, left = 1;

    while (left) { /* buffered sends still on their way */
        left = 0;
        mln_pl_progress();
        for (mln_pl_req_t *r = g->sends; r; r = r->next_grid)
            left |= r->detached;
        if (left)
            mln_pl_idle(&spins);
    }
    if (grid_barrier(g) != MPI_SUCCESS)
        fprintf(stderr, "multilane grid: rank %d: the barrier of MPI_Finalize failed\n", g->rank);
}

void mln_pl_grid_stop(void)
{
    mln_pl_grid_t *g = mln_pl.grid;

    mln_pl_grid_on = 0;
    mln_pl.grid = NULL;
    if (g == NULL)
        return;
    if (g->posted || g->mrecvs || g->sends || g->msgs)
        fprintf(stderr,
                "multilane grid: rank %d: MPI_Finalize with operations on MPI_COMM_WORLD "
                "still pending\n",
                g->rank);
    mln_relay_close(g->relay);
    while (g->comms) {
        mln_pl_gcomm_t *c = g->comms;
        g->comms = c->next;
        mln_pl_gcomm_fini(c);
        free(c);
    }
    mln_pl_gcomm_fini(&g->world);
    mln_pl_ggroup_fini();
    MPI_Comm_free(&g->local);
    while (g->msgs) {
        grid_msg_t *gm = g->msgs;
        g->msgs = gm->next;
        if (gm->m != NULL)
            mln_relay_msg_free(gm->m);
        free(gm);
    }
    free(g);
}

/* A wait that found nothing to do.  Small messages: give the core away (sched_yield: the
 * gateways, the delay line and the other ranks of an oversubscribed host run at once) and
 * sleep in the relay's poll only after a long wait (GRID_IDLE_SPINS passes): a sleeping rank is
 * slow to wake (a virtual machine's idle CPU: ~50-100 us, measured here), which a ping-pong
 * pays at every message (sleeping every 16th pass: ~100 us one way on loopback; yielding: ~26).
 * While large messages move (mln_relay_bulk), sleep after GRID_BULK_SPINS passes: the cores are
 * the gateways' and the delay line's, whose share sets the bandwidth. */
#define GRID_IDLE_SPINS 4096
#define GRID_BULK_SPINS 16
#define GRID_IDLE_SLEEP_US 200

void mln_pl_grid_idle(int *spins)
{
    mln_pl_grid_t *g = mln_pl.grid;
    const int limit = g != NULL && mln_relay_bulk(g->relay) ? GRID_BULK_SPINS : GRID_IDLE_SPINS;

    if (*spins < GRID_IDLE_SPINS)
        ++*spins;
    if (*spins < limit || g == NULL || mln_pl.threaded) {
        sched_yield();
        return;
    }
    mln_relay_progress(g->relay, GRID_IDLE_SLEEP_US); /* wakes for the relay's bytes */
}

void mln_pl_grid_stats(char *out, size_t len, int *rank, int *size)
{
    mln_pl_grid_t *g = mln_pl.grid;
    mln_relay_stats_t s;

    out[0] = '\0';
    if (g == NULL)
        return;
    memset(&s, 0, sizeof(s));
    mln_relay_get_stats(g->relay, &s);
    *rank = g->rank;
    *size = g->size;
    snprintf(out, len,
             " relayed_send_msgs=%llu relayed_send_bytes=%llu relayed_recv_msgs=%llu "
             "relayed_recv_bytes=%llu",
             (unsigned long long)s.msgs_out, (unsigned long long)s.bytes_out,
             (unsigned long long)s.msgs_in, (unsigned long long)s.bytes_in);
}
