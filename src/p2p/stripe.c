/*
 * stripe.c - striped point-to-point: requests, the header protocol and the progress engine.
 *
 * A message of more than MLN_STRIPE_THRESHOLD bytes to a peer on another site is sent as a
 * 64-byte header on the user's (comm, tag), so that MPI does the matching (ANY_SOURCE,
 * ANY_TAG, non-overtaking); its payload then goes over the lanes of the configured backend
 * once the receiver has matched the header and answered with a CTS on the control comm
 * (rendezvous: the payload is written in place, never buffered as unexpected data), but for
 * the early chunks [0, e) that tcp lanes carry before the CTS (tcp_early.c: in place, or kept
 * aside while the header has not matched).
 *
 *   sender                                   receiver
 *   Isend(hdr, 64 B, dest, tag, comm)  --->  Irecv(user buf, source, tag, comm) matches it
 *   early chunks [0, e) (tcp)          ===>  in place (or aside until the header matched)
 *                                      <---  CTS {msg id, lanes, accept, tag base} (ctrl)
 *   chunks over lanes (dynamic)        ===>  written in place at their offsets
 *
 * Cost of a striped message of n bytes over L lanes of bandwidth b each, e bytes early:
 *   T = 2 alpha_mpi (header, CTS) + alpha_lane + (n - e) / (L b), or alpha_lane + n / (L b)
 *   once e covers the round trip (e >= RTT L b)
 * Smaller messages are one MPI message: T = alpha_mpi + n / b_mpi, as stock MPI.
 *
 * A user message of exactly 64 bytes to a remote peer goes as a header with MLN_HDR_INLINE and
 * its bytes on the control comm (stripe_inline.c), so a 64-byte wire message on the user's comm
 * from a remote peer is always a header (from a peer of our site, always a plain message).  Control
 * messages, chunk tags and failures are in stripe_ctl.c.
 */
#include "lane_sched.h"
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

int mln_stripe_hdr_valid(const void *p, uint64_t *total)
{
    mln_stripe_hdr_t h;

    if (!hdr_open(p, &h))
        return 0;
    *total = h.total;
    return 1;
}

/* ---- active list ------------------------------------------------------------------------- */

/* Appends: the list is in posting order, which is the order receives must match in. */
void mln_stripe_active_add(mln_stripe_t *s, mln_req_t *r)
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

/* A striped receive from src_world with the sender's msg_id that is DATA or ABORT. */
mln_req_t *mln_stripe_find_recv(mln_stripe_t *s, int src_world, uint64_t msg_id)
{
    for (mln_req_t *r = s->active; r; r = r->next)
        if (!r->is_send && r->peer_world == src_world && r->msg_id == msg_id &&
            (r->state == MLN_REQ_TAGS || r->state == MLN_REQ_DATA || r->state == MLN_REQ_ABORT))
            return r;
    return NULL;
}

/* One of our striped sends to dest_world (any state but DONE). */
mln_req_t *mln_stripe_find_send(mln_stripe_t *s, int dest_world, uint64_t msg_id)
{
    for (mln_req_t *r = s->active; r; r = r->next)
        if (r->is_send && r->peer_world == dest_world && r->msg_id == msg_id &&
            r->state != MLN_REQ_RAW)
            return r;
    return NULL;
}

void mln_stripe_req_finish(mln_stripe_t *s, mln_req_t *r, mln_status_t st)
{
    if (r->state == MLN_REQ_DONE)
        return;
    if (r->result == MLN_OK)
        r->result = st;
    if (r->state == MLN_REQ_DATA && r->result == MLN_OK) {
        s->striped[r->is_send ? 1 : 0][0]++;
        s->striped[r->is_send ? 1 : 0][1] += r->accept;
    }
    r->state = MLN_REQ_DONE;
    mln_stripe_tags_release(s, r);
    mln_stripe_active_del(s, r);
}

void mln_stripe_req_progress(mln_stripe_t *s, mln_req_t *r, uint64_t bytes)
{
    r->bytes_done += bytes;
    if (r->state != MLN_REQ_DATA)
        return; /* an aborted request counts what still lands; stripe_ctl.c decides */
    if (mln_fault_strikes(&s->fault, r)) { /* before it could complete */
        mln_stripe_req_fail(s, r, MLN_ERR_SYS);
        return;
    }
    /* early chunks (tcp) all go, and all arrive, even where the receiver accepts fewer bytes */
    if (r->is_send ? r->bytes_done >= (r->accept > r->early ? r->accept : r->early) &&
                         r->next_off >= r->accept
                   : r->bytes_done >= r->accept && r->early_left == 0)
        mln_stripe_req_finish(s, r,
                              r->total > r->accept && !r->is_send ? MLN_ERR_TRUNCATE : MLN_OK);
}

uint64_t mln_stripe_chunk_len(const mln_req_t *r, uint64_t index)
{
    uint64_t off = index * r->chunk;
    return off >= r->accept ? 0 : (r->accept - off < r->chunk ? r->accept - off : r->chunk);
}

/* ---- request set-up ---------------------------------------------------------------------- */

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
    r->owner = s;
    r->is_send = is_send;
    r->ubuf = (void *)buf;
    r->count = count;
    r->dtype = dt;
    r->comm = comm;
    r->peer = peer;
    r->tag = tag;
    r->mreq = r->mreq2 = MPI_REQUEST_NULL;
    r->peer_world = -1;
    r->peer_count = MLN_COUNT_UNKNOWN;
    st = mln_stripe_req_buffer(r, buf, is_send);
    if (st != MLN_OK) {
        free(r->pack);
        free(r);
        return st;
    }
    *out = r;
    return MLN_OK;
}

/* Frees a request.  One with MPI operations still pending on its own memory (the header or
 * an inline payload on their way out) waits on the zombie list until they complete. */
void mln_stripe_req_free(mln_stripe_t *s, mln_req_t *r)
{
    int pending = 0;

    for (int k = 0; k < MLN_LANE_KINDS; k++)
        if (s && s->lanes[k] && s->lanes[k]->req_free)
            s->lanes[k]->req_free(s, r);
    if (s && s->fault.target == r)
        s->fault.target = NULL;
    if (r->mreq != MPI_REQUEST_NULL && !r->is_send) { /* a receive into the user's buffer */
        MPI_Cancel(&r->mreq);
        MPI_Wait(&r->mreq, MPI_STATUS_IGNORE);
    }
    pending = r->mreq != MPI_REQUEST_NULL || r->mreq2 != MPI_REQUEST_NULL;
    free(r->chunk_reqs);
    r->chunk_reqs = NULL;
    free(r->got);
    r->got = NULL;
    if (pending && s) {
        r->next = s->zombies;
        s->zombies = r;
        return;
    }
    if (pending) { /* no engine left to watch them: MPI finishes them on its own */
        if (r->mreq != MPI_REQUEST_NULL)
            MPI_Request_free(&r->mreq);
        if (r->mreq2 != MPI_REQUEST_NULL)
            MPI_Request_free(&r->mreq2);
    }
    free(r->pack);
    free(r);
}

int mln_stripe_zombies_progress(mln_stripe_t *s)
{
    int moved = 0;

    for (mln_req_t **pz = &s->zombies; *pz;) {
        mln_req_t *z = *pz;
        MPI_Request reqs[2] = {z->mreq, z->mreq2};
        int flag = 0;
        if (MPI_Testall(2, reqs, &flag, MPI_STATUSES_IGNORE) != MPI_SUCCESS)
            flag = 1; /* completed in error: nothing refers to the memory any more */
        z->mreq = reqs[0];
        z->mreq2 = reqs[1];
        if (!flag) {
            pz = &z->next;
            continue;
        }
        *pz = z->next;
        free(z->pack);
        free(z);
        moved = 1;
    }
    return moved;
}

/* World rank of `rank` in `comm`: MLN_ERR_UNSUPPORTED for a process outside MPI_COMM_WORLD
 * (a communicator built with MPI_Comm_spawn or connect/accept: no lanes lead there). */
static mln_status_t world_rank_of(MPI_Comm comm, int rank, int *out)
{
    mln_status_t st = MLN_OK;
    MPI_Group g, wg;
    int w = MPI_UNDEFINED;

    MLN_MPI_CHECK(MPI_Comm_group(comm, &g), st, out);
    MLN_MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &wg), st, free_g);
    MLN_MPI_CHECK(MPI_Group_translate_ranks(g, 1, &rank, wg, &w), st, free_wg);
    if (w == MPI_UNDEFINED || w < 0) {
        MLN_ERROR("mln_stripe: rank %d of the communicator is not in this MPI_COMM_WORLD "
                  "(spawned or connected processes are not supported)",
                  rank);
        st = MLN_ERR_UNSUPPORTED;
    }
    *out = w;
free_wg:
    MPI_Group_free(&wg);
free_g:
    MPI_Group_free(&g);
out:
    return st;
}

/* ---- send -------------------------------------------------------------------------------- */

/* The lanes a new striped message to dest_world proposes.  tcp lanes are opened without
 * blocking (tcp_conn.c); if they cannot be, the message moves to the mpi lanes at its CTS. */
static mln_lane_kind_t send_kind(mln_stripe_t *s, int dest_world)
{
    if (s->backend == MLN_STRIPE_HELPER)
        return MLN_LANE_HELPER;
    if (s->backend == MLN_STRIPE_MPI || s->tcp_failed[dest_world] ||
        !s->lanes[MLN_LANE_TCP]->ready(s, dest_world))
        return MLN_LANE_MPI;
    return MLN_LANE_TCP;
}

/* The lanes a message to peer_world goes over: helper routes, mpi lanes (MLN_STRIPE_LANES, 8
 * for auto), or the tcp lanes now in use (auto: its choice so far; before they are up, the
 * mpi count). */
static int lanes_of(const mln_stripe_t *s, mln_lane_kind_t kind, int peer_world)
{
    int n;

    if (kind == MLN_LANE_HELPER)
        return 2 * (int)s->cfg->stripe_helpers + 1;
    if (kind == MLN_LANE_TCP && (n = mln_tcp_lanes_active(s, peer_world)) > 0)
        return n;
    return mln_stripe_lanes_fixed(s);
}

/*
 * Bytes of a new striped message that go on the lanes before its CTS (docs/STRIPE.md "Early
 * chunks"): at most one chunk per lane, and no more than MLN_STRIPE_EARLY leaves for that peer
 * once the early bytes of our sends to it that have no CTS yet are counted (what its receiver
 * may have to keep aside); whole chunks, or the whole message.
 */
static uint64_t early_bytes(const mln_stripe_t *s, const mln_req_t *r, int lanes)
{
    uint64_t used = 0, room, want = (uint64_t)lanes * r->chunk;

    if (s->lanes[r->kind]->send_early == NULL || s->cfg->stripe_early == 0)
        return 0;
    for (const mln_req_t *o = s->active; o; o = o->next)
        if (o->is_send && o->peer_world == r->peer_world && o->early > 0 && !o->cts)
            used += o->early;
    room = s->cfg->stripe_early > used ? s->cfg->stripe_early - used : 0;
    if (r->total <= want && r->total <= room)
        return r->total;
    want = want < room ? want : room;
    return want - want % r->chunk;
}

/* Chunks per lane of a large message: the lanes end it within about one chunk's time of each
 * other, so a k-th of a lane's share is the tail where fewer lanes carry it.  With 4, the last
 * 5% of a 64 MiB message over 32 lanes on wan-lossy (loss-bound lanes at ~30 Mbit/s, a 512 KiB
 * chunk 130 ms each) took 150-200 ms of its 0.7-0.8 s; with 16 (128 KiB), 80-110 ms. */
#define STRIPE_CHUNKS_PER_LANE 16

/*
 * Payload bytes per chunk for a message of `total` bytes: n / (STRIPE_CHUNKS_PER_LANE lanes),
 * within [64 KiB (down to 16 KiB so that every lane gets a chunk), MLN_STRIPE_CHUNK], and large
 * enough that the chunks of one message take at most a quarter of the chunk tags (a receiver
 * holds a message's tags until it is retired), and small enough for one int-counted MPI message.
 * 0 when no such chunk exists (a message too large for the tags).
 */
static uint64_t choose_chunk(const mln_stripe_t *s, uint64_t total, int lanes)
{
    /* at least one chunk per lane where chunks of 16 KiB allow it (1 MiB over 32 lanes) */
    const uint64_t per_lane = total / (uint64_t)(lanes > 0 ? lanes : 1);
    const uint64_t min = per_lane > 65536 ? 65536 : per_lane < 16384 ? 16384 : per_lane;
    uint64_t chunk =
        mln_sched_chunk(total, lanes, STRIPE_CHUNKS_PER_LANE, min, s->cfg->stripe_chunk);
    const uint64_t max_chunks = (uint64_t)(s->data_tag_hi - s->data_tag_lo + 1) / 4u;

    if (max_chunks > 0 && (total + chunk - 1) / chunk > max_chunks)
        chunk = (total + max_chunks - 1) / max_chunks;
    return chunk <= MLN_STRIPE_CHUNK_MAX ? chunk : 0;
}

mln_status_t mln_stripe_send_start(mln_stripe_t *s, mln_req_t *r)
{
    mln_status_t st = MLN_OK;
    int dest_world = -1, striped, remote, rc;

    if (r->peer == MPI_PROC_NULL) {
        r->state = MLN_REQ_DONE;
        return MLN_OK;
    }
    MLN_CHECK(world_rank_of(r->comm, r->peer, &dest_world), st, out);
    r->peer_world = dest_world;
    remote = mln_stripe_peer_remote(s, dest_world);
    striped = r->cap > s->cfg->stripe_threshold && remote;
    if (!striped && (r->cap != MLN_STRIPE_HDR_SIZE || !remote)) {
        /* a plain message; over 2 GiB as one element of a byte type (datatype.c) */
        r->state = MLN_REQ_RAW;
        MLN_MPI_CHECK(mln_mpi_isend_bytes(r->buf, r->cap, r->peer, r->tag, r->comm, &r->mreq), st,
                      out);
        mln_stripe_active_add(s, r);
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
        MLN_CHECK(mln_stripe_inline_send(s, r, dest_world), st, out);
        mln_stripe_active_add(s, r);
        return MLN_OK;
    }
    r->kind = send_kind(s, dest_world);
    if (r->kind == MLN_LANE_TCP)
        mln_tcp_auto_message(s, dest_world, r->total);
    r->chunk = choose_chunk(s, r->total, lanes_of(s, r->kind, dest_world));
    if (r->chunk == 0) {
        MLN_ERROR("mln_stripe_isend: %llu bytes need more chunk tags than MPI_TAG_UB leaves",
                  (unsigned long long)r->total);
        return MLN_ERR_UNSUPPORTED;
    }
    r->hdr.kind = (uint32_t)r->kind;
    r->hdr.chunk = r->chunk;
    r->state = MLN_REQ_CTS;
    mln_stripe_active_add(s, r);
    r->early = early_bytes(s, r, lanes_of(s, r->kind, dest_world));
    if (r->early > 0) /* queued now, written as the lanes take them */
        r->early = s->lanes[r->kind]->send_early(s, r, r->early);
    r->hdr.early = r->next_off = r->early;
    hdr_seal(&r->hdr);
    rc = MPI_Isend(&r->hdr, MLN_STRIPE_HDR_SIZE, MPI_BYTE, r->peer, r->tag, r->comm, &r->mreq);
    if (rc != MPI_SUCCESS) {
        MLN_ERROR("MPI_Isend of a striped message's header failed (error %d)", rc);
        if (r->early == 0) {
            mln_stripe_active_del(s, r);
            return MLN_ERR_MPI;
        }
        mln_stripe_req_fail(s, r, MLN_ERR_MPI); /* done once its early chunks are written */
        return MLN_OK;
    }
    MLN_TRACE("send %llu: %llu bytes to world %d over %s, chunk %llu, %llu early",
              (unsigned long long)r->msg_id, (unsigned long long)r->total, dest_world,
              s->lanes[r->kind]->name, (unsigned long long)r->chunk, (unsigned long long)r->early);
out:
    return st;
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
    r->state = MLN_REQ_HDR;
    MLN_MPI_CHECK(mln_mpi_irecv_bytes(into, room, r->peer, r->tag, r->comm, &r->mreq), st, out);
    mln_stripe_active_add(s, r);
out:
    return st;
}

/* A header matched (its 64 bytes are in r->small): inline, or a striped message. */
static void recv_header(mln_stripe_t *s, mln_req_t *r)
{
    if (!hdr_open(r->small, &r->hdr) || r->hdr.src_world < 0 || r->hdr.src_world >= s->wsize) {
        MLN_ERROR("a %d-byte message from rank %d tag %d is not a valid Multilane header: does "
                  "the sender use mln_stripe_send?",
                  MLN_STRIPE_HDR_SIZE, r->st_source, r->st_tag);
        mln_stripe_req_finish(s, r, MLN_ERR_DATA);
        return;
    }
    r->peer_world = r->hdr.src_world;
    r->msg_id = r->hdr.msg_id;
    r->total = r->hdr.total;
    r->kind = (mln_lane_kind_t)r->hdr.kind;
    r->chunk = r->hdr.chunk;
    if (r->hdr.flags & MLN_HDR_INLINE) {
        mln_stripe_inline_expect(s, r);
        return;
    }
    r->accept = r->total < r->cap ? r->total : r->cap;
    r->st_bytes = r->accept;
    r->state = MLN_REQ_TAGS;
    if (r->chunk == 0 || r->chunk > MLN_STRIPE_CHUNK_MAX || s->lanes[r->kind] == NULL) {
        MLN_ERROR("header from world rank %d: its lanes (kind %d, chunk %llu) are not set up "
                  "here (is MLN_STRIPE_BACKEND the same on every rank?)",
                  r->peer_world, (int)r->kind, (unsigned long long)r->chunk);
        mln_stripe_req_fail(s, r, MLN_ERR_CONFIG); /* a NAK: the sender must not wait */
        return;
    }
    r->nchunks = r->accept ? (r->accept + r->chunk - 1) / r->chunk : 0;
    if (r->hdr.early > 0) {
        if (r->kind != MLN_LANE_TCP || s->lanes[r->kind]->recv_early == NULL ||
            r->hdr.early > r->total || (r->hdr.early % r->chunk != 0 && r->hdr.early != r->total)) {
            MLN_ERROR("header from world rank %d: %llu early bytes of a %llu-byte message in "
                      "chunks of %llu over %s lanes cannot be",
                      r->peer_world, (unsigned long long)r->hdr.early, (unsigned long long)r->total,
                      (unsigned long long)r->chunk,
                      s->lanes[r->kind] ? s->lanes[r->kind]->name : "no");
            mln_stripe_req_fail(s, r, MLN_ERR_DATA);
            return;
        }
        r->early = r->hdr.early;
        if (s->lanes[r->kind]->recv_early(s, r) != MLN_OK) { /* cannot count them: a NAK */
            r->early = 0;
            mln_stripe_req_fail(s, r, MLN_ERR_NOMEM);
            return;
        }
    }
    if (mln_fault_begin(&s->fault, r)) {
        mln_stripe_req_fail(s, r, MLN_ERR_NOMEM);
        return;
    }
    mln_stripe_recv_setup(s, r);
}

int mln_stripe_peer_remote(const mln_stripe_t *s, int world_rank)
{
    return s->cfg->stripe_local || s->site_of[world_rank] != s->site_of[s->wrank];
}

/* 1 when rank `rank` of comm is a remote peer (its 64-byte messages are headers); a process
 * outside MPI_COMM_WORLD is none (no lanes lead there: it sends plain messages). */
int mln_stripe_rank_remote(const mln_stripe_t *s, MPI_Comm comm, int rank)
{
    MPI_Group g, wg;
    int w = MPI_UNDEFINED;

    if (s->cfg->stripe_local)
        return 1;
    if (MPI_Comm_group(comm, &g) != MPI_SUCCESS)
        return 1;
    if (MPI_Comm_group(MPI_COMM_WORLD, &wg) == MPI_SUCCESS) {
        MPI_Group_translate_ranks(g, 1, &rank, wg, &w);
        MPI_Group_free(&wg);
    }
    MPI_Group_free(&g);
    return w != MPI_UNDEFINED && w >= 0 && w < s->wsize && mln_stripe_peer_remote(s, w);
}

/* The Irecv of a receive in MLN_REQ_HDR completed: a plain message, or a header. */
static void recv_matched(mln_stripe_t *s, mln_req_t *r, const MPI_Status *mst)
{
    MPI_Count n = 0;

    MPI_Get_elements_x(mst, MPI_BYTE, &n);
    r->st_source = mst->MPI_SOURCE;
    r->st_tag = mst->MPI_TAG;
    if (n == MLN_STRIPE_HDR_SIZE && mln_stripe_rank_remote(s, r->comm, mst->MPI_SOURCE)) {
        if (!r->use_small)
            memcpy(r->small, r->buf, MLN_STRIPE_HDR_SIZE);
        recv_header(s, r);
        return;
    }
    r->st_bytes = (uint64_t)n;
    if (r->use_small) { /* a plain message of up to 64 bytes, into a smaller buffer */
        r->st_bytes = (uint64_t)n < r->cap ? (uint64_t)n : r->cap;
        if (r->st_bytes > 0) /* an empty receive may have no buffer at all (NULL) */
            memcpy(r->buf, r->small, (size_t)r->st_bytes);
        mln_stripe_req_finish(s, r, (uint64_t)n > r->cap ? MLN_ERR_TRUNCATE : MLN_OK);
        return;
    }
    mln_stripe_req_finish(s, r, MLN_OK);
}

/* MPI's error on a request: truncation keeps its meaning, the rest is MLN_ERR_MPI. */
static mln_status_t mpi_error(int rc)
{
    int cls = MPI_ERR_OTHER;

    MPI_Error_class(rc, &cls);
    return cls == MPI_ERR_TRUNCATE ? MLN_ERR_TRUNCATE : MLN_ERR_MPI;
}

/* ---- progress ---------------------------------------------------------------------------- */

/* r->mreq completed with MPI's return code rc and status mst (its request is now null). */
static void mreq_done(mln_stripe_t *s, mln_req_t *r, int rc, const MPI_Status *mst)
{
    if (rc != MPI_SUCCESS) { /* only with MPI_ERRORS_RETURN on the user's communicator */
        if (!r->is_send && r->state == MLN_REQ_HDR && mpi_error(rc) == MLN_ERR_TRUNCATE) {
            MPI_Count n = (MPI_Count)r->cap;
            /* the count MPI gives a truncated message is its own choice (Open MPI: the
             * message's size; MPICH: the buffer's): passed on as it is */
            MPI_Get_elements_x(mst, MPI_BYTE, &n);
            if (r->use_small && n <= MLN_STRIPE_HDR_SIZE) /* MPI's buffer was our header room */
                n = (MPI_Count)r->cap;
            r->st_source = mst->MPI_SOURCE;
            r->st_tag = mst->MPI_TAG;
            r->st_bytes = n >= 0 ? (uint64_t)n : r->cap;
            if (r->use_small && r->cap > 0) /* the first bytes landed in the header room */
                memcpy(r->buf, r->small, (size_t)r->cap);
            mln_stripe_req_finish(s, r, MLN_ERR_TRUNCATE);
        } else {
            mln_stripe_req_fail(s, r, mpi_error(rc));
        }
        return;
    }
    if (r->state == MLN_REQ_RAW)
        mln_stripe_req_finish(s, r, MLN_OK);
    else if (r->state == MLN_REQ_HDR)
        recv_matched(s, r, mst);
}

void mln_stripe_recv_start_taken(mln_stripe_t *s, mln_req_t *r, int source, int tag,
                                 const void *msg64)
{
    MPI_Status mst;

    memset(&mst, 0, sizeof(mst));
    mst.MPI_SOURCE = source;
    mst.MPI_TAG = tag;
    mst.MPI_ERROR = MPI_SUCCESS;
    MPI_Status_set_elements_x(&mst, MPI_BYTE, MLN_STRIPE_HDR_SIZE);
    r->state = MLN_REQ_HDR;
    mln_stripe_active_add(s, r);
    if (r->cap < MLN_STRIPE_HDR_SIZE)
        r->use_small = 1;
    memcpy(r->use_small ? (void *)r->small : (void *)r->buf, msg64, MLN_STRIPE_HDR_SIZE);
    recv_matched(s, r, &mst);
}

int mln_stripe_recv_cancel(mln_stripe_t *s, mln_req_t *r)
{
    MPI_Status mst;
    int cancelled = 0, rc;

    if (r->is_send || r->state != MLN_REQ_HDR || r->mreq == MPI_REQUEST_NULL)
        return 0;
    MPI_Cancel(&r->mreq);
    rc = MPI_Wait(&r->mreq, &mst);
    r->mreq = MPI_REQUEST_NULL;
    if (rc == MPI_SUCCESS)
        MPI_Test_cancelled(&mst, &cancelled);
    if (!cancelled) { /* its message came first: on as usual */
        mreq_done(s, r, rc, &mst);
        return 0;
    }
    r->cancelled = 1;
    mln_stripe_req_finish(s, r, MLN_OK);
    return 1;
}

/* Tests the MPI side of one request; returns 1 when something happened. */
static int req_test_mpi(mln_stripe_t *s, mln_req_t *r)
{
    MPI_Status mst;
    int flag = 0, moved = 0;

    if (r->mreq != MPI_REQUEST_NULL) {
        int rc = MPI_Test(&r->mreq, &flag, &mst);
        if (rc != MPI_SUCCESS || flag) {
            r->mreq = MPI_REQUEST_NULL;
            mreq_done(s, r, rc, &mst);
            moved = 1;
        }
    }
    if (r->mreq2 != MPI_REQUEST_NULL) {
        if (MPI_Test(&r->mreq2, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
            r->mreq2 = MPI_REQUEST_NULL;
            mln_stripe_req_fail(s, r, MLN_ERR_MPI);
            return 1;
        }
        moved |= flag;
    }
    /* an inline send is done when both its header and its payload are out */
    if (r->is_send && r->state == MLN_REQ_INLINE && r->mreq == MPI_REQUEST_NULL &&
        r->mreq2 == MPI_REQUEST_NULL)
        mln_stripe_req_finish(s, r, MLN_OK);
    return moved;
}

/* One pass: control messages, MPI requests, chunk scheduling, lane I/O (blocking up to
 * wait_us), and aborted requests that became quiet. */
int mln_stripe_progress(mln_stripe_t *s, int wait_us)
{
    int moved = mln_stripe_ctl_progress(s), need_mpi = mln_mpilane_busy(s) || s->ctl_out != NULL;
    mln_req_t *r, *next;

    moved |= mln_stripe_zombies_progress(s);
    for (r = s->active; r; r = next) {
        next = r->next;
        moved |= req_test_mpi(s, r);
    }
    moved |= mln_stripe_inline_progress(s);
    moved |= mln_stripe_tags_progress(s);
    for (r = s->active; r; r = next) {
        next = r->next;
        if (r->state != MLN_REQ_DATA || r->kind != MLN_LANE_TCP)
            need_mpi = 1; /* something only MPI_Test can move */
        if (r->state != MLN_REQ_DATA)
            continue;
        if (r->is_send && r->next_off < r->accept)
            s->lanes[r->kind]->send_fill(s, r);
        if (mln_fault_strikes(&s->fault, r))
            mln_stripe_req_fail(s, r, MLN_ERR_SYS);
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
    moved |= mln_stripe_abort_progress(s);
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

    if (s->thread_on || mln_mpilane_busy(s) || mln_tcp_auto_watching(s))
        return NULL;
    for (const mln_req_t *r = s->active; r; r = r->next) {
        if ((r->state != MLN_REQ_RAW && r->state != MLN_REQ_HDR) || r->mreq == MPI_REQUEST_NULL)
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
