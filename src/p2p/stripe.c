/*
 * stripe.c - striped point-to-point: the API, the protocol and the progress engine.
 *
 * A message of more than MLN_STRIPE_THRESHOLD bytes to a peer on another site is sent as a
 * 64-byte header on the user's (comm, tag), so that MPI does the matching (ANY_SOURCE,
 * ANY_TAG, non-overtaking); its payload then goes over the lanes of the configured backend
 * once the receiver has matched the header and answered with a CTS on the control comm
 * (rendezvous: the payload is always written in place, never buffered as unexpected data).
 *
 *   sender                                   receiver
 *   Isend(hdr, 64 B, dest, tag, comm)  --->  Irecv(user buf, source, tag, comm) matches it
 *                                      <---  Isend(CTS {msg id, accept, tag base}, ctrl)
 *   chunks over lanes (dynamic)        ===>  written in place at their offsets
 *
 * Cost of a striped message of n bytes over L lanes of bandwidth b each:
 *   T = 2 alpha_mpi (header, CTS) + alpha_lane + n / (L b)
 * Smaller messages are one MPI message: T = alpha_mpi + n / b_mpi, as stock MPI.
 *
 * A user message of exactly 64 bytes goes as a header with MLN_HDR_INLINE and its bytes on
 * the control comm with a tag derived from its message id, so a 64-byte wire message on the
 * user's comm is always a header.
 */
#include "stripe_int.h"

#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double mln_stripe_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- header ------------------------------------------------------------------------------ */

static uint32_t crc32_bytes(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint32_t crc = 0xffffffffu;

    for (size_t i = 0; i < len; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

static void hdr_seal(mln_stripe_hdr_t *h)
{
    h->crc = crc32_bytes(h, offsetof(mln_stripe_hdr_t, crc));
}

/* 1 when the 64 bytes at p are a valid header (copied to out). */
static int hdr_open(const void *p, mln_stripe_hdr_t *out)
{
    mln_stripe_hdr_t h;

    memcpy(&h, p, sizeof(h));
    if (h.magic != MLN_STRIPE_MAGIC || h.version != MLN_STRIPE_VERSION ||
        h.crc != crc32_bytes(&h, offsetof(mln_stripe_hdr_t, crc)) || h.kind >= MLN_LANE_KINDS)
        return 0;
    *out = h;
    return 1;
}

_Static_assert(sizeof(mln_stripe_hdr_t) == MLN_STRIPE_HDR_SIZE, "header is 64 bytes");

/* ---- active list ------------------------------------------------------------------------- */

/* Appends: the list is in posting order, which is the order receives must match in. */
static void active_add(mln_stripe_t *s, mln_req_t *r)
{
    r->next = NULL;
    r->prev = s->active_tail;
    if (s->active_tail)
        s->active_tail->next = r;
    else
        s->active = r;
    s->active_tail = r;
    s->nactive++;
}

void mln_stripe_active_del(mln_stripe_t *s, mln_req_t *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else if (s->active == r)
        s->active = r->next;
    if (r->next)
        r->next->prev = r->prev;
    else if (s->active_tail == r)
        s->active_tail = r->prev;
    r->prev = r->next = NULL;
    s->nactive--;
}

mln_req_t *mln_stripe_find_recv(mln_stripe_t *s, int src_world, uint64_t msg_id)
{
    for (mln_req_t *r = s->active; r; r = r->next)
        if (!r->is_send && r->state == MLN_REQ_DATA && r->peer_world == src_world &&
            r->msg_id == msg_id)
            return r;
    return NULL;
}

static void req_finish(mln_stripe_t *s, mln_req_t *r, mln_status_t st)
{
    if (r->state == MLN_REQ_DONE)
        return;
    if (r->result == MLN_OK)
        r->result = st;
    r->state = MLN_REQ_DONE;
    mln_stripe_active_del(s, r);
}

void mln_stripe_req_fail(mln_stripe_t *s, mln_req_t *r, mln_status_t st)
{
    MLN_WARN("striped %s of %llu bytes %s world rank %d (message %llu) failed: %s",
             r->is_send ? "send" : "receive", (unsigned long long)r->total,
             r->is_send ? "to" : "from", r->peer_world, (unsigned long long)r->msg_id,
             mln_status_str(st));
    req_finish(s, r, st);
}

void mln_stripe_req_progress(mln_stripe_t *s, mln_req_t *r, uint64_t bytes)
{
    r->bytes_done += bytes;
    r->last_progress = mln_stripe_now();
    s->peer_moved[r->peer_world] = r->last_progress;
    if (r->bytes_done >= r->accept && (!r->is_send || r->next_off >= r->accept) &&
        r->state == MLN_REQ_DATA && (r->is_send || r->ctsreq == MPI_REQUEST_NULL))
        req_finish(s, r, r->total > r->accept && !r->is_send ? MLN_ERR_TRUNCATE : MLN_OK);
}

uint64_t mln_stripe_chunk_len(const mln_req_t *r, uint64_t index)
{
    uint64_t off = index * r->chunk;
    return off >= r->accept ? 0 : (r->accept - off < r->chunk ? r->accept - off : r->chunk);
}

/* ---- request set-up ---------------------------------------------------------------------- */

/* Bytes of (count, dtype) and where they start; packs non-contiguous types. */
static mln_status_t req_buffer(mln_req_t *r, const void *buf, int is_send)
{
    mln_status_t st = MLN_OK;
    MPI_Count size, offset = 0;
    int isize = 0, pos = 0;

    MLN_MPI_CHECK(MPI_Type_size_x(r->dtype, &size), st, out);
    if (size < 0 || (size > 0 && (uint64_t)r->count > UINT64_MAX / (uint64_t)size)) {
        MLN_ERROR("striped message: count %lld x type size %lld overflows", (long long)r->count,
                  (long long)size);
        return MLN_ERR_ARG;
    }
    r->cap = (uint64_t)r->count * (uint64_t)size;
    if (mln_type_contiguous(r->dtype, r->count, &offset)) {
        r->buf = (char *)buf + offset; /* the bytes are in place */
        return MLN_OK;
    }
    if (r->count > INT_MAX || r->cap > INT_MAX) {
        MLN_ERROR("striped message: a non-contiguous datatype is packed, and %llu bytes are "
                  "over the 2^31 - 1 bytes MPI_Pack can handle",
                  (unsigned long long)r->cap);
        return MLN_ERR_UNSUPPORTED;
    }
    MLN_MPI_CHECK(MPI_Pack_size((int)r->count, r->dtype, r->comm, &isize), st, out);
    r->pack = malloc((size_t)isize > 0 ? (size_t)isize : 1);
    if (r->pack == NULL)
        return MLN_ERR_NOMEM;
    r->packed = 1;
    r->buf = r->pack;
    if (is_send) {
        MLN_MPI_CHECK(MPI_Pack(buf, (int)r->count, r->dtype, r->pack, isize, &pos, r->comm), st,
                      out);
        r->cap = (uint64_t)pos;
    } else {
        r->cap = (uint64_t)isize;
    }
out:
    return st;
}

mln_status_t mln_stripe_req_new(mln_stripe_t *s, const void *buf, int64_t count, MPI_Datatype dt,
                                int peer, int tag, MPI_Comm comm, int is_send, mln_req_t **out)
{
    mln_status_t st;
    int inter = 0, size = 0;
    mln_req_t *r;

    if (s == NULL) {
        MLN_ERROR("mln_stripe_%s: call mln_init first", is_send ? "isend" : "irecv");
        return MLN_ERR_NOT_INIT;
    }
    if (count < 0 || (buf == NULL && count > 0) || dt == MPI_DATATYPE_NULL ||
        comm == MPI_COMM_NULL || out == NULL) {
        MLN_ERROR("mln_stripe_%s: invalid argument (count %lld, buffer %p)",
                  is_send ? "isend" : "irecv", (long long)count, buf);
        return MLN_ERR_ARG;
    }
    if (MPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS ||
        MPI_Comm_size(comm, &size) != MPI_SUCCESS)
        return MLN_ERR_MPI;
    if (inter) {
        MLN_ERROR("mln_stripe: intercommunicators are not supported");
        return MLN_ERR_UNSUPPORTED;
    }
    if (peer != MPI_PROC_NULL && !(peer == MPI_ANY_SOURCE && !is_send) &&
        (peer < 0 || peer >= size)) {
        MLN_ERROR("mln_stripe_%s: rank %d is not in the communicator (size %d)",
                  is_send ? "isend" : "irecv", peer, size);
        return MLN_ERR_ARG;
    }
    if ((is_send && tag < 0) || (!is_send && tag < 0 && tag != MPI_ANY_TAG) || tag > s->tag_ub) {
        MLN_ERROR("mln_stripe_%s: invalid tag %d", is_send ? "isend" : "irecv", tag);
        return MLN_ERR_ARG;
    }
    r = calloc(1, sizeof(*r));
    if (r == NULL)
        return MLN_ERR_NOMEM;
    r->is_send = is_send;
    r->ubuf = (void *)buf;
    r->count = count;
    r->dtype = dt;
    r->comm = comm;
    r->peer = peer;
    r->tag = tag;
    r->mreq = r->ctsreq = MPI_REQUEST_NULL;
    r->peer_world = -1;
    st = req_buffer(r, buf, is_send);
    if (st != MLN_OK) {
        free(r->pack);
        free(r);
        return st;
    }
    *out = r;
    return MLN_OK;
}

/* Frees a request.  One that failed with MPI operations still pending on its own memory
 * (header, CTS) is kept until mln_finalize, so that MPI never writes into freed memory. */
void mln_stripe_req_free(mln_stripe_t *s, mln_req_t *r)
{
    int pending = 0;

    for (int k = 0; k < MLN_LANE_KINDS; k++)
        if (s && s->lanes[k] && s->lanes[k]->req_free)
            s->lanes[k]->req_free(s, r);
    if (r->mreq != MPI_REQUEST_NULL && !r->is_send && r->state != MLN_REQ_DONE)
        MPI_Cancel(&r->mreq);
    if (r->mreq != MPI_REQUEST_NULL) {
        MPI_Request_free(&r->mreq);
        pending = 1;
    }
    if (r->ctsreq != MPI_REQUEST_NULL) {
        MPI_Request_free(&r->ctsreq);
        pending = 1;
    }
    free(r->chunk_reqs);
    r->chunk_reqs = NULL;
    if (pending && s) {
        r->next = s->zombies;
        s->zombies = r;
        return;
    }
    free(r->pack);
    free(r);
}

/* World rank of `rank` in `comm`. */
static mln_status_t world_rank_of(MPI_Comm comm, int rank, int *out)
{
    mln_status_t st = MLN_OK;
    MPI_Group g, wg;

    MLN_MPI_CHECK(MPI_Comm_group(comm, &g), st, out);
    MLN_MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &wg), st, free_g);
    MLN_MPI_CHECK(MPI_Group_translate_ranks(g, 1, &rank, wg, out), st, free_wg);
free_wg:
    MPI_Group_free(&wg);
free_g:
    MPI_Group_free(&g);
out:
    return st;
}

/* Tag of a header-sized payload on the control comm. */
static int inline_tag(const mln_stripe_t *s, uint64_t msg_id)
{
    return MLN_TAG_INLINE + (int)(msg_id % (uint64_t)s->inline_tags);
}

/* ---- send -------------------------------------------------------------------------------- */

static mln_lane_kind_t send_kind(mln_stripe_t *s, int dest_world)
{
    mln_lane_kind_t kind = s->backend == MLN_STRIPE_TCP      ? MLN_LANE_TCP
                           : s->backend == MLN_STRIPE_HELPER ? MLN_LANE_HELPER
                                                             : MLN_LANE_MPI;

    if (kind == MLN_LANE_TCP &&
        (s->tcp_failed[dest_world] || !s->lanes[kind]->ready(s, dest_world))) {
        if (!s->tcp_failed[dest_world])
            MLN_WARN("tcp lanes to world rank %d unavailable: striping over MPI instead",
                     dest_world);
        s->tcp_failed[dest_world] = 1;
        kind = MLN_LANE_MPI;
    }
    return kind;
}

/* Payload bytes per chunk for a message of `total` bytes. */
static uint64_t choose_chunk(const mln_stripe_t *s, uint64_t total, int lanes)
{
    uint64_t chunk = total / ((uint64_t)lanes * 4u);
    uint64_t max_chunks = (uint64_t)(s->tag_ub - s->data_tag_lo) / 4u;

    if (chunk > s->cfg->stripe_chunk)
        chunk = s->cfg->stripe_chunk;
    if (chunk < 65536)
        chunk = 65536;
    if (max_chunks > 0 && total / chunk >= max_chunks) /* keep chunk tags within tag_ub */
        chunk = total / max_chunks + 1;
    return chunk;
}

static int lanes_of(const mln_stripe_t *s, mln_lane_kind_t kind)
{
    if (kind == MLN_LANE_HELPER)
        return 2 * (int)s->cfg->stripe_helpers + 1;
    return (int)s->cfg->stripe_lanes;
}

mln_status_t mln_stripe_send_start(mln_stripe_t *s, mln_req_t *r)
{
    mln_status_t st = MLN_OK;
    int dest_world = -1, striped;

    if (r->peer == MPI_PROC_NULL) {
        r->state = MLN_REQ_DONE;
        return MLN_OK;
    }
    MLN_CHECK(world_rank_of(r->comm, r->peer, &dest_world), st, out);
    r->peer_world = dest_world;
    striped = r->cap > s->cfg->stripe_threshold &&
              (s->cfg->stripe_local || s->site_of[dest_world] != s->site_of[s->wrank]);
    if (!striped && r->cap != MLN_STRIPE_HDR_SIZE) {
        r->state = MLN_REQ_RAW;
        MLN_MPI_CHECK(MPI_Isend(r->buf, (int)r->cap, MPI_BYTE, r->peer, r->tag, r->comm, &r->mreq),
                      st, out);
        active_add(s, r);
        return MLN_OK;
    }
    r->msg_id = s->next_msg_id++;
    r->total = r->cap;
    r->hdr.magic = MLN_STRIPE_MAGIC;
    r->hdr.version = MLN_STRIPE_VERSION;
    r->hdr.src_world = s->wrank;
    r->hdr.msg_id = r->msg_id;
    r->hdr.total = r->total;
    if (!striped) {
        r->hdr.flags = MLN_HDR_INLINE;
        r->hdr.kind = MLN_LANE_MPI;
        hdr_seal(&r->hdr);
        r->state = MLN_REQ_INLINE;
        MLN_MPI_CHECK(
            MPI_Isend(&r->hdr, MLN_STRIPE_HDR_SIZE, MPI_BYTE, r->peer, r->tag, r->comm, &r->mreq),
            st, out);
        MLN_MPI_CHECK(MPI_Isend(r->buf, MLN_STRIPE_HDR_SIZE, MPI_BYTE, dest_world,
                                inline_tag(s, r->msg_id), s->ctrl, &r->ctsreq),
                      st, out);
        active_add(s, r);
        return MLN_OK;
    }
    r->kind = send_kind(s, dest_world);
    r->chunk = choose_chunk(s, r->total, lanes_of(s, r->kind));
    r->hdr.kind = (uint32_t)r->kind;
    r->hdr.chunk = r->chunk;
    hdr_seal(&r->hdr);
    r->state = MLN_REQ_CTS;
    MLN_MPI_CHECK(
        MPI_Isend(&r->hdr, MLN_STRIPE_HDR_SIZE, MPI_BYTE, r->peer, r->tag, r->comm, &r->mreq), st,
        out);
    active_add(s, r);
    MLN_TRACE("send %llu: %llu bytes to world %d over %s, chunk %llu",
              (unsigned long long)r->msg_id, (unsigned long long)r->total, dest_world,
              s->lanes[r->kind]->name, (unsigned long long)r->chunk);
out:
    return st;
}

/* A CTS arrived: the payload of that send may go. */
static void send_cts(mln_stripe_t *s, const mln_stripe_cts_t *c, int from)
{
    mln_req_t *r;

    for (r = s->active; r; r = r->next)
        if (r->is_send && r->state == MLN_REQ_CTS && r->peer_world == from &&
            r->msg_id == c->msg_id)
            break;
    if (r == NULL) {
        MLN_ERROR("CTS from world rank %d for unknown message %llu: ignored", from,
                  (unsigned long long)c->msg_id);
        return;
    }
    if (c->accept > r->total) {
        mln_stripe_req_fail(s, r, MLN_ERR_DATA);
        return;
    }
    r->accept = c->accept;
    r->tag_base = c->tag_base;
    r->nchunks = r->accept ? (r->accept + r->chunk - 1) / r->chunk : 0;
    r->state = MLN_REQ_DATA;
    r->last_progress = mln_stripe_now();
    if (r->accept == 0)
        req_finish(s, r, MLN_OK);
}

/* ---- receive ----------------------------------------------------------------------------- */

/*
 * A receive is posted at once as MPI_Irecv on (source, tag, comm), into the user's buffer (or
 * the 64-byte header room when the buffer is smaller), so that MPI itself does the matching,
 * in posting order.  What lands is a plain message or, if exactly 64 bytes, a header.
 */
mln_status_t mln_stripe_recv_start(mln_stripe_t *s, mln_req_t *r)
{
    mln_status_t st = MLN_OK;
    uint64_t room = r->cap;
    void *into = r->buf;

    if (r->peer == MPI_PROC_NULL) {
        r->st_source = MPI_PROC_NULL;
        r->st_tag = MPI_ANY_TAG;
        r->state = MLN_REQ_DONE;
        return MLN_OK;
    }
    if (room < MLN_STRIPE_HDR_SIZE) { /* a header must fit: receive small ones aside */
        r->use_small = 1;
        into = r->small;
        room = MLN_STRIPE_HDR_SIZE;
    }
    if (room > INT_MAX) /* a plain message is at most the threshold (<= 1 GiB) */
        room = INT_MAX;
    r->state = MLN_REQ_HDR;
    MLN_MPI_CHECK(MPI_Irecv(into, (int)room, MPI_BYTE, r->peer, r->tag, r->comm, &r->mreq), st,
                  out);
    active_add(s, r);
out:
    return st;
}

/* Next free range of `n` chunk tags. */
static int alloc_tags(mln_stripe_t *s, uint64_t n)
{
    int base;

    if ((uint64_t)(s->tag_ub - s->data_tag_next) < n)
        s->data_tag_next = s->data_tag_lo;
    base = s->data_tag_next;
    s->data_tag_next += (int)n;
    return base;
}

/* A header matched (its 64 bytes are in r->small): inline, or a striped message. */
static mln_status_t recv_header(mln_stripe_t *s, mln_req_t *r)
{
    mln_status_t st = MLN_OK;

    if (!hdr_open(r->small, &r->hdr) || r->hdr.src_world < 0 || r->hdr.src_world >= s->wsize) {
        MLN_ERROR("a %d-byte message from rank %d tag %d is not a valid Multilane header: does "
                  "the sender use mln_stripe_send?",
                  MLN_STRIPE_HDR_SIZE, r->st_source, r->st_tag);
        req_finish(s, r, MLN_ERR_DATA);
        return MLN_OK;
    }
    r->peer_world = r->hdr.src_world;
    r->msg_id = r->hdr.msg_id;
    r->total = r->hdr.total;
    r->kind = (mln_lane_kind_t)r->hdr.kind;
    r->chunk = r->hdr.chunk;
    if (r->hdr.flags & MLN_HDR_INLINE) {
        void *into = r->cap >= MLN_STRIPE_HDR_SIZE ? (void *)r->buf : (void *)r->small;
        r->use_small = r->cap < MLN_STRIPE_HDR_SIZE;
        r->state = MLN_REQ_INLINE;
        MLN_MPI_CHECK(MPI_Irecv(into, MLN_STRIPE_HDR_SIZE, MPI_BYTE, r->peer_world,
                                inline_tag(s, r->msg_id), s->ctrl, &r->mreq),
                      st, out);
        return MLN_OK;
    }
    if (r->chunk == 0 || s->lanes[r->kind] == NULL) {
        MLN_ERROR("header from world rank %d: its lanes (kind %d) are not set up here (is "
                  "MLN_STRIPE_BACKEND the same on every rank?)",
                  r->peer_world, (int)r->kind);
        req_finish(s, r, MLN_ERR_CONFIG);
        return MLN_OK;
    }
    r->accept = r->total < r->cap ? r->total : r->cap;
    r->st_bytes = r->accept;
    r->nchunks = r->accept ? (r->accept + r->chunk - 1) / r->chunk : 0;
    r->tag_base = r->kind == MLN_LANE_TCP ? 0 : alloc_tags(s, r->nchunks);
    r->state = MLN_REQ_DATA;
    r->last_progress = mln_stripe_now();
    MLN_CHECK(s->lanes[r->kind]->recv_post(s, r), st, out);
    r->cts.msg_id = r->msg_id;
    r->cts.accept = r->accept;
    r->cts.tag_base = r->tag_base;
    MLN_MPI_CHECK(MPI_Isend(&r->cts, (int)sizeof(r->cts), MPI_BYTE, r->peer_world, MLN_TAG_CTS,
                            s->ctrl, &r->ctsreq),
                  st, out);
    MLN_TRACE("recv %llu: %llu of %llu bytes from world %d over %s", (unsigned long long)r->msg_id,
              (unsigned long long)r->accept, (unsigned long long)r->total, r->peer_world,
              s->lanes[r->kind]->name);
out:
    return st;
}

/* The Irecv of a receive in MLN_REQ_HDR completed: a plain message, or a header. */
static void recv_matched(mln_stripe_t *s, mln_req_t *r, const MPI_Status *mst)
{
    mln_status_t st;
    MPI_Count n = 0;

    MPI_Get_elements_x(mst, MPI_BYTE, &n);
    r->st_source = mst->MPI_SOURCE;
    r->st_tag = mst->MPI_TAG;
    if (n == MLN_STRIPE_HDR_SIZE) {
        if (!r->use_small)
            memcpy(r->small, r->buf, MLN_STRIPE_HDR_SIZE);
        st = recv_header(s, r);
        if (st != MLN_OK)
            mln_stripe_req_fail(s, r, st);
        return;
    }
    r->st_bytes = (uint64_t)n;
    if (r->use_small) { /* a plain message of up to 64 bytes, into a smaller buffer */
        r->st_bytes = (uint64_t)n < r->cap ? (uint64_t)n : r->cap;
        memcpy(r->buf, r->small, (size_t)r->st_bytes);
        req_finish(s, r, (uint64_t)n > r->cap ? MLN_ERR_TRUNCATE : MLN_OK);
        return;
    }
    req_finish(s, r, MLN_OK);
}

/* MPI's error on a request: truncation keeps its meaning, the rest is MLN_ERR_MPI. */
static mln_status_t mpi_error(int rc)
{
    int cls = MPI_ERR_OTHER;

    MPI_Error_class(rc, &cls);
    return cls == MPI_ERR_TRUNCATE ? MLN_ERR_TRUNCATE : MLN_ERR_MPI;
}

/* ---- progress ---------------------------------------------------------------------------- */

/* Tests the MPI side of one request; returns 1 when something happened. */
/* r->mreq completed with MPI's return code rc and status mst (its request is now null). */
static void mreq_done(mln_stripe_t *s, mln_req_t *r, int rc, const MPI_Status *mst)
{
    if (rc != MPI_SUCCESS) { /* only with MPI_ERRORS_RETURN on the user's communicator */
        if (!r->is_send && mpi_error(rc) == MLN_ERR_TRUNCATE) {
            r->st_source = mst->MPI_SOURCE;
            r->st_tag = mst->MPI_TAG;
            r->st_bytes = r->cap;
            if (r->use_small) /* the first 64 bytes landed in the header room */
                memcpy(r->buf, r->small, (size_t)r->cap);
            req_finish(s, r, MLN_ERR_TRUNCATE);
        } else {
            mln_stripe_req_fail(s, r, mpi_error(rc));
        }
        return;
    }
    if (r->state == MLN_REQ_RAW) {
        req_finish(s, r, MLN_OK);
    } else if (r->state == MLN_REQ_HDR) {
        recv_matched(s, r, mst);
    } else if (r->state == MLN_REQ_INLINE && !r->is_send) {
        if (r->cap < MLN_STRIPE_HDR_SIZE)
            memcpy(r->buf, r->small, r->cap);
        r->st_bytes = r->cap < MLN_STRIPE_HDR_SIZE ? r->cap : MLN_STRIPE_HDR_SIZE;
        req_finish(s, r, r->cap < MLN_STRIPE_HDR_SIZE ? MLN_ERR_TRUNCATE : MLN_OK);
    }
}

/* Tests the MPI side of one request; returns 1 when something happened. */
static int req_test_mpi(mln_stripe_t *s, mln_req_t *r)
{
    MPI_Status mst;
    int flag = 0, moved = 0;

    if (r->mreq != MPI_REQUEST_NULL) {
        int rc = MPI_Test(&r->mreq, &flag, &mst);
        if (rc != MPI_SUCCESS || flag) {
            mreq_done(s, r, rc, &mst);
            moved = 1;
        }
    }
    if (r->state == MLN_REQ_DONE)
        return moved;
    if (r->ctsreq != MPI_REQUEST_NULL) {
        if (MPI_Test(&r->ctsreq, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
            mln_stripe_req_fail(s, r, MLN_ERR_MPI);
            return 1;
        }
        if (flag) {
            moved = 1;
            if (r->state == MLN_REQ_DATA) /* all data may already be in */
                mln_stripe_req_progress(s, r, 0);
        }
    }
    if (r->is_send && r->state == MLN_REQ_INLINE && r->mreq == MPI_REQUEST_NULL &&
        r->ctsreq == MPI_REQUEST_NULL)
        req_finish(s, r, MLN_OK);
    return moved;
}

static int poll_cts(mln_stripe_t *s)
{
    MPI_Status mst;
    int flag = 0, moved = 0;

    while (s->cts_req != MPI_REQUEST_NULL) {
        if (MPI_Test(&s->cts_req, &flag, &mst) != MPI_SUCCESS || !flag)
            break;
        moved = 1;
        send_cts(s, &s->cts_in, mst.MPI_SOURCE);
        if (MPI_Irecv(&s->cts_in, (int)sizeof(s->cts_in), MPI_BYTE, MPI_ANY_SOURCE, MLN_TAG_CTS,
                      s->ctrl, &s->cts_req) != MPI_SUCCESS)
            s->cts_req = MPI_REQUEST_NULL;
    }
    return moved;
}

/* Since when r has been waiting for its peer: the later of its own last progress and the
 * last bytes moved with that peer for any message (chunks go out in posting order, so the
 * 50th message in flight to one peer gets none while the first 49 move). */
static double stalled_since(const mln_stripe_t *s, const mln_req_t *r)
{
    const double peer = s->peer_moved[r->peer_world];

    return peer > r->last_progress ? peer : r->last_progress;
}

/* One pass: MPI requests, CTS, chunk scheduling, lane I/O (blocking up to wait_us). */
int mln_stripe_progress(mln_stripe_t *s, int wait_us)
{
    int moved = poll_cts(s), need_mpi = mln_mpilane_busy(s);
    double now = mln_stripe_now();
    mln_req_t *r, *next;

    for (r = s->active; r; r = next) {
        next = r->next;
        moved |= req_test_mpi(s, r);
    }
    for (r = s->active; r; r = next) {
        next = r->next;
        if (r->state != MLN_REQ_DATA || r->kind != MLN_LANE_TCP || r->ctsreq != MPI_REQUEST_NULL)
            need_mpi = 1; /* something only MPI_Test can move */
        if (r->state != MLN_REQ_DATA)
            continue;
        if (r->is_send && r->next_off < r->accept)
            s->lanes[r->kind]->send_fill(s, r);
        if (now - stalled_since(s, r) > (double)s->cfg->stripe_timeout) {
            MLN_ERROR("striped %s of message %llu with world rank %d: nothing moved to or from "
                      "that rank for %lld s (MLN_STRIPE_TIMEOUT)",
                      r->is_send ? "send" : "receive", (unsigned long long)r->msg_id, r->peer_world,
                      (long long)s->cfg->stripe_timeout);
            mln_stripe_req_fail(s, r, MLN_ERR_TIMEOUT);
        }
    }
    /* Only tcp lanes left to move: sleep in poll() until a socket is ready (no CPU spent
     * spinning, which the delay line and the peer need on a small host).  Anything MPI must
     * move is polled like MPI's own wait does: spinning, yielding the core when idle. */
    wait_us = need_mpi ? 0 : (s->active != NULL ? 2000 : wait_us);
    if (s->thread_on) /* never sleep holding the engine lock: the other thread waits on it */
        wait_us = 0;
    for (int k = 0; k < MLN_LANE_KINDS; k++)
        if (s->lanes[k])
            moved |= s->lanes[k]->progress(s, wait_us);
    if (!moved && wait_us > 0 && s->lanes[MLN_LANE_TCP] == NULL) { /* tcp sleeps in poll() */
        struct timespec ts = {0, (long)wait_us * 1000L};
        nanosleep(&ts, NULL);
    }
    return moved;
}

/*
 * The request of reqs that may be waited for in MPI_Wait, or NULL.  That is so when every
 * active request is one plain MPI operation (a small message, or a receive whose message has
 * not arrived) and no active request but that one could still turn into a striped message:
 * then nothing else needs the engine while MPI waits, as in a stock MPI program.  A receive
 * not yet matched is the one that could (its message may be a header); it must be the one
 * waited for, so that MPI_Wait returns when its header lands.  Were another one waiting, a
 * peer blocked in a striped send to us for want of our CTS could never post the receive our
 * waited send needs.  MPICH's MPI_Wait reacts faster on a WAN than a loop of MPI_Test
 * (measured: 6.91 against 7.16-7.42 ms for a 100 KiB ping-pong on wan-2site).
 */
static mln_req_t *plain_wait_target(const mln_stripe_t *s, mln_req_t **reqs, int n)
{
    const mln_req_t *unmatched = NULL;

    if (s->thread_on || mln_mpilane_busy(s))
        return NULL;
    for (const mln_req_t *r = s->active; r; r = r->next) {
        if ((r->state != MLN_REQ_RAW && r->state != MLN_REQ_HDR) || r->mreq == MPI_REQUEST_NULL ||
            r->ctsreq != MPI_REQUEST_NULL)
            return NULL;
        if (r->state == MLN_REQ_HDR) {
            if (unmatched != NULL)
                return NULL;
            unmatched = r;
        }
    }
    for (int i = 0; i < n; i++)
        if (reqs[i] != NULL && reqs[i]->state != MLN_REQ_DONE &&
            (unmatched == NULL || reqs[i] == unmatched))
            return reqs[i];
    return NULL;
}

/* Progress until every request in reqs is done (failures complete requests too). */
void mln_stripe_progress_until(mln_stripe_t *s, mln_req_t **reqs, int n)
{
    mln_req_t *plain;
    int idle = 0;

    while ((plain = plain_wait_target(s, reqs, n)) != NULL) {
        MPI_Status mst;
        int rc = MPI_Wait(&plain->mreq, &mst); /* errors: as MPI_Test would report them */
        plain->mreq = MPI_REQUEST_NULL;
        mreq_done(s, plain, rc, &mst);
    }
    for (;;) {
        int all = 1;
        for (int i = 0; i < n; i++)
            if (reqs[i] && reqs[i]->state != MLN_REQ_DONE)
                all = 0;
        if (all)
            return;
        if (mln_stripe_progress(s, 0))
            idle = 0;
        else if (++idle > 1000 || s->thread_on) {
            mln_stripe_unlock(s); /* let the progress thread in */
            sched_yield();        /* as Open MPI's mpi_yield_when_idle: helper ranks and the
                                     rest of an oversubscribed host need the core */
            mln_stripe_lock(s);
        }
    }
}

void mln_stripe_lock(mln_stripe_t *s)
{
    if (s != NULL && s->thread_on)
        pthread_mutex_lock(&s->lock);
}

void mln_stripe_unlock(mln_stripe_t *s)
{
    if (s != NULL && s->thread_on)
        pthread_mutex_unlock(&s->lock);
}
