/*
 * diff_exec.c - runs one rank's part of a round through one side: mln_stripe_* on the striped
 * communicators, or MPI on their twins.  Both sides are the same ops table (diff_api_t) with
 * MPI's return codes mapped to mln_status_t, so one loop drives both: post receives, send,
 * receive late, sleep in compute gaps (striped side only), complete groups by wait, waitall or
 * a test loop, and record each operation's status, return code and receive buffer.
 */
#define _DEFAULT_SOURCE
#include "diff.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define UNSET (-424242) /* a status field that the call did not write (not MPI_UNDEFINED) */

/* ---- the striped side ----------------------------------------------------------------------- */

static mln_status_t mln_isend_(const void *buf, int64_t count, MPI_Datatype type, int dest, int tag,
                               MPI_Comm comm, diff_req_t *req)
{
    req->m = MLN_REQUEST_NULL;
    return mln_stripe_isend(buf, count, type, dest, tag, comm, &req->m);
}

static mln_status_t mln_irecv_(void *buf, int64_t count, MPI_Datatype type, int src, int tag,
                               MPI_Comm comm, diff_req_t *req)
{
    req->m = MLN_REQUEST_NULL;
    return mln_stripe_irecv(buf, count, type, src, tag, comm, &req->m);
}

static mln_status_t mln_wait_(diff_req_t *req, MPI_Status *st)
{
    return mln_stripe_wait(&req->m, st);
}

static mln_status_t mln_test_(diff_req_t *req, int *done, MPI_Status *st)
{
    return mln_stripe_test(&req->m, done, st);
}

static mln_status_t mln_waitall_(int n, diff_req_t *reqs, MPI_Status *sts, int *err_in_status)
{
    mln_request_t *r = xmalloc((int64_t)sizeof(*r) * n);
    mln_status_t rc;

    for (int i = 0; i < n; i++)
        r[i] = reqs[i].m;
    rc = mln_stripe_waitall(n, r, sts);
    for (int i = 0; i < n; i++)
        reqs[i].m = r[i];
    free(r);
    *err_in_status = rc != MLN_OK;
    return rc;
}

static int mln_is_null(const diff_req_t *req)
{
    return req->m == MLN_REQUEST_NULL;
}

const diff_api_t diff_api_mln = {.name = "mln_stripe",
                                 .isend = mln_isend_,
                                 .irecv = mln_irecv_,
                                 .send = mln_stripe_send,
                                 .recv = mln_stripe_recv,
                                 .wait = mln_wait_,
                                 .test = mln_test_,
                                 .waitall = mln_waitall_,
                                 .is_null = mln_is_null};

/* ---- the MPI twin ---------------------------------------------------------------------------- */

static mln_status_t from_mpi(int rc)
{
    int cls = MPI_ERR_OTHER;

    if (rc == MPI_SUCCESS)
        return MLN_OK;
    MPI_Error_class(rc, &cls);
    return cls == MPI_ERR_TRUNCATE ? MLN_ERR_TRUNCATE : MLN_ERR_MPI;
}

static mln_status_t mpi_isend_(const void *buf, int64_t count, MPI_Datatype type, int dest, int tag,
                               MPI_Comm comm, diff_req_t *req)
{
    req->r = MPI_REQUEST_NULL;
    return from_mpi(MPI_Isend(buf, (int)count, type, dest, tag, comm, &req->r));
}

static mln_status_t mpi_irecv_(void *buf, int64_t count, MPI_Datatype type, int src, int tag,
                               MPI_Comm comm, diff_req_t *req)
{
    req->r = MPI_REQUEST_NULL;
    return from_mpi(MPI_Irecv(buf, (int)count, type, src, tag, comm, &req->r));
}

static mln_status_t mpi_send_(const void *buf, int64_t count, MPI_Datatype type, int dest, int tag,
                              MPI_Comm comm)
{
    return from_mpi(MPI_Send(buf, (int)count, type, dest, tag, comm));
}

static mln_status_t mpi_recv_(void *buf, int64_t count, MPI_Datatype type, int src, int tag,
                              MPI_Comm comm, MPI_Status *st)
{
    return from_mpi(MPI_Recv(buf, (int)count, type, src, tag, comm, st));
}

static mln_status_t mpi_wait_(diff_req_t *req, MPI_Status *st)
{
    return from_mpi(MPI_Wait(&req->r, st));
}

static mln_status_t mpi_test_(diff_req_t *req, int *done, MPI_Status *st)
{
    return from_mpi(MPI_Test(&req->r, done, st));
}

/* MPI_ERR_IN_STATUS: the statuses say which failed (MPI_ERR_PENDING ones are waited again); the
 * result is the first failure in array order, as mln_stripe_waitall returns it. */
static mln_status_t mpi_waitall_(int n, diff_req_t *reqs, MPI_Status *sts, int *err_in_status)
{
    MPI_Request *r = xmalloc((int64_t)sizeof(*r) * n);
    mln_status_t first = MLN_OK;
    int rc, cls = MPI_SUCCESS;

    for (int i = 0; i < n; i++)
        r[i] = reqs[i].r;
    rc = MPI_Waitall(n, r, sts);
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &cls);
    *err_in_status = cls == MPI_ERR_IN_STATUS;
    for (int i = 0; i < n && *err_in_status; i++) {
        if (sts[i].MPI_ERROR == MPI_ERR_PENDING)
            sts[i].MPI_ERROR = MPI_Wait(&r[i], &sts[i]);
        if (first == MLN_OK)
            first = from_mpi(sts[i].MPI_ERROR);
    }
    for (int i = 0; i < n; i++)
        reqs[i].r = r[i];
    free(r);
    return *err_in_status ? first : from_mpi(rc);
}

static int mpi_is_null(const diff_req_t *req)
{
    return req->r == MPI_REQUEST_NULL;
}

const diff_api_t diff_api_mpi = {.name = "MPI",
                                 .isend = mpi_isend_,
                                 .irecv = mpi_irecv_,
                                 .send = mpi_send_,
                                 .recv = mpi_recv_,
                                 .wait = mpi_wait_,
                                 .test = mpi_test_,
                                 .waitall = mpi_waitall_,
                                 .is_null = mpi_is_null};

/* ---- buffers ------------------------------------------------------------------------------------
 */

/* Re-lays out data between two type maps of the same base elements (one MPI copy on self). */
static void relayout(const diff_ctx_t *c, const void *in, int64_t nin, MPI_Datatype tin, void *out,
                     int64_t nout, MPI_Datatype tout)
{
    MPI_Sendrecv(in, (int)nin, tin, 0, 0, out, (int)nout, tout, 0, 0, c->self, MPI_STATUS_IGNORE);
}

const uint8_t *diff_stream(const diff_ctx_t *c, const uint8_t *buf, int base, int lay,
                           int64_t count, uint8_t **tmp)
{
    const int64_t n = count * diff_k[lay];

    *tmp = NULL;
    if (diff_contig[lay])
        return buf + c->types.lb[base][lay];
    *tmp = xmalloc(n * diff_bsize[base]);
    relayout(c, buf, count, c->types.t[base][lay], *tmp, n, c->types.t[base][LAY_PLAIN]);
    return *tmp;
}

uint8_t **diff_send_buffers(const diff_ctx_t *c, const diff_round_t *r)
{
    uint8_t **bufs = calloc((size_t)r->nmsg + 1, sizeof(*bufs));

    for (int i = 0; i < r->nmsg; i++) {
        const diff_msg_t *m = &r->msg[i];
        const int64_t span = diff_span(&c->types, m->base, m->lay, m->count);
        const int64_t bytes = m->n * diff_bsize[m->base];
        if (m->src != c->rank)
            continue;
        bufs[i] = xmalloc(span);
        fill(bufs[i], span, 0x77, (int)m->id); /* what is not the message's: holes, slack */
        if (diff_contig[m->lay]) {
            fill(bufs[i] + c->types.lb[m->base][m->lay], bytes, m->src, diff_pattern_id(m->id));
        } else {
            uint8_t *stream = xmalloc(bytes);
            fill(stream, bytes, m->src, diff_pattern_id(m->id));
            relayout(c, stream, m->n, c->types.t[m->base][LAY_PLAIN], bufs[i], m->count,
                     c->types.t[m->base][m->lay]);
            free(stream);
        }
    }
    return bufs;
}

void diff_buffers_free(uint8_t **bufs, int n)
{
    for (int i = 0; i < n; i++)
        free(bufs[i]);
    free(bufs);
}

/* Receive buffers hold the same sentinel on both sides: what MPI leaves alone must stay. */
void diff_side_alloc(const diff_ctx_t *c, const diff_round_t *r, diff_side_t *side)
{
    side->recv = calloc((size_t)r->nrecv + 1, sizeof(*side->recv));
    side->send = calloc((size_t)r->nmsg + 1, sizeof(*side->send));
    for (int j = 0; j < r->nrecv; j++) {
        const diff_recv_t *v = &r->recv[j];
        diff_result_t *res = &side->recv[j];
        if (v->dst != c->rank)
            continue;
        res->span = diff_span(&c->types, v->base, v->lay, v->count);
        res->buf = xmalloc(res->span);
        /* the same per ANY_SOURCE class: any receive of it may hold any of its messages */
        fill(res->buf, res->span, 0x5e, r->index * 131 + (v->cls >= 0 ? r->nrecv + v->cls : j));
    }
}

void diff_side_free(const diff_round_t *r, diff_side_t *side)
{
    for (int j = 0; j < r->nrecv; j++)
        free(side->recv[j].buf);
    free(side->recv);
    free(side->send);
    side->recv = side->send = NULL;
}

/* ---- running -----------------------------------------------------------------------------------
 */

static void status_reset(MPI_Status *st)
{
    memset(st, 0, sizeof(*st));
    st->MPI_SOURCE = st->MPI_TAG = st->MPI_ERROR = UNSET;
    MPI_Status_set_elements_x(st, MPI_BYTE, (MPI_Count)UNSET & 0x7fffffff);
}

/* The error class in a status, or the raw value when it is not an MPI error code. */
static int err_class(int code)
{
    int cls = code;

    if (code >= MPI_SUCCESS && code <= MPI_ERR_LASTCODE)
        MPI_Error_class(code, &cls);
    return cls;
}

typedef struct run {
    const diff_ctx_t *c;
    const diff_round_t *r;
    const diff_rank_plan_t *rp;
    diff_side_t *side;
    diff_req_t *reqs;
    int *slot_op; /* op index of each slot */
} run_t;

static void record(run_t *u, int op, mln_status_t rc, const MPI_Status *st, int method, int left,
                   int err_defined)
{
    const diff_op_t *o = &u->rp->ops[op];
    diff_result_t *res;

    if (o->kind == OP_ISEND || o->kind == OP_SEND) {
        res = &u->side->send[o->index];
    } else {
        const diff_recv_t *v = &u->r->recv[o->index];
        const MPI_Datatype type = u->c->types.t[v->base][v->lay];
        res = &u->side->recv[o->index];
        res->src = st->MPI_SOURCE;
        res->tag = st->MPI_TAG;
        MPI_Get_count(st, type, &res->count);
        MPI_Get_elements_x(st, type, &res->elems);
    }
    res->rc = rc;
    res->method = method;
    res->left = left;
    res->err = err_class(st->MPI_ERROR);
    res->err_defined = err_defined;
    /* a waitall's return is the group's: each request's own outcome is in its MPI_ERROR */
    res->ok = err_defined ? res->err == MPI_SUCCESS : rc == MLN_OK;
}

static void complete_group(run_t *u, const diff_group_t *g)
{
    const diff_api_t *api = u->side->api;
    const int *slots = u->rp->slots + g->first;
    MPI_Status *sts = xmalloc((int64_t)sizeof(*sts) * (g->len + 1));
    diff_req_t *reqs = xmalloc((int64_t)sizeof(*reqs) * (g->len + 1));
    int *done = calloc((size_t)g->len + 1, sizeof(int)), left = g->len, err_in = 0;
    mln_status_t rc;

    for (int i = 0; i < g->len; i++)
        status_reset(&sts[i]);
    switch (g->method) {
    case HOW_WAIT:
        for (int i = 0; i < g->len; i++) {
            rc = api->wait(&u->reqs[slots[i]], &sts[i]);
            record(u, u->slot_op[slots[i]], rc, &sts[i], HOW_WAIT,
                   !api->is_null(&u->reqs[slots[i]]), 0);
        }
        break;
    case HOW_WAITALL:
        for (int i = 0; i < g->len; i++)
            reqs[i] = u->reqs[slots[i]];
        rc = api->waitall(g->len, reqs, sts, &err_in);
        for (int i = 0; i < g->len; i++) {
            u->reqs[slots[i]] = reqs[i];
            record(u, u->slot_op[slots[i]], rc, &sts[i], HOW_WAITALL, !api->is_null(&reqs[i]),
                   err_in);
        }
        break;
    default: /* a test loop, starting one further each sweep */
        for (int sweep = 0; left > 0; sweep++) {
            for (int j = 0; j < g->len; j++) {
                const int i = (j + sweep) % g->len;
                int flag = 0;
                if (done[i])
                    continue;
                rc = api->test(&u->reqs[slots[i]], &flag, &sts[i]);
                if (flag || rc != MLN_OK) {
                    record(u, u->slot_op[slots[i]], rc, &sts[i], HOW_TEST,
                           !api->is_null(&u->reqs[slots[i]]), 0);
                    done[i] = 1;
                    left--;
                }
            }
        }
    }
    free(done);
    free(reqs);
    free(sts);
}

static void gap(double seconds)
{
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};

    while (nanosleep(&ts, &ts) != 0)
        ;
}

void diff_exec_round(const diff_ctx_t *c, const diff_round_t *r, uint8_t *const *sendbufs,
                     diff_side_t *side)
{
    const diff_rank_plan_t *rp = &r->rank[c->rank];
    const diff_api_t *api = side->api;
    run_t u = {.c = c, .r = r, .rp = rp, .side = side};
    MPI_Status st;

    u.reqs = calloc((size_t)rp->nslots + 1, sizeof(*u.reqs));
    u.slot_op = calloc((size_t)rp->nslots + 1, sizeof(int));
    for (int i = 0; i < rp->nops; i++) {
        const diff_op_t *op = &rp->ops[i];
        if (op->kind == OP_IRECV || op->kind == OP_RECV) {
            const diff_recv_t *v = &r->recv[op->index];
            diff_result_t *res = &side->recv[op->index];
            const MPI_Datatype type = c->types.t[v->base][v->lay];
            const MPI_Comm comm = side->comm[v->comm];
            if (op->kind == OP_IRECV) {
                u.slot_op[op->slot] = i;
                res->post =
                    api->irecv(res->buf, v->count, type, v->src, v->tag, comm, &u.reqs[op->slot]);
            } else {
                status_reset(&st);
                record(&u, i, api->recv(res->buf, v->count, type, v->src, v->tag, comm, &st), &st,
                       HOW_BLOCKING, 0, 0);
            }
        } else if (op->kind == OP_ISEND || op->kind == OP_SEND) {
            const diff_msg_t *m = &r->msg[op->index];
            const MPI_Datatype type = c->types.t[m->base][m->lay];
            const MPI_Comm comm = side->comm[m->comm];
            if (op->kind == OP_ISEND) {
                u.slot_op[op->slot] = i;
                side->send[op->index].post = api->isend(sendbufs[op->index], m->count, type, m->dst,
                                                        m->tag, comm, &u.reqs[op->slot]);
            } else {
                status_reset(&st);
                record(&u, i, api->send(sendbufs[op->index], m->count, type, m->dst, m->tag, comm),
                       &st, HOW_BLOCKING, 0, 0);
            }
        } else if (op->kind == OP_GAP) {
            if (side->gaps)
                gap(op->gap);
        } else {
            complete_group(&u, &rp->groups[op->index]);
        }
    }
    free(u.reqs);
    free(u.slot_op);
}
