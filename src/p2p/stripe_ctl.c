/*
 * stripe_ctl.c - the control channel of striped messages, their chunk tags, and failures.
 *
 * Control messages (mln_stripe_ctl_t) travel both ways on the control comm with one tag, so
 * MPI orders them per pair of ranks.  Every rank but a helper keeps one MPI_ANY_SOURCE
 * receive posted for them.
 *
 *   sender                                    receiver
 *   header on (comm, tag)              --->   matched: lanes set up (chunk tags if mpi/helper)
 *                                      <---   CTS {kind, accept, tag base}   or  NAK {status}
 *   chunks on the lanes                ===>
 *   a failure after the CTS:  SABORT {count}  --->     or     <---  RABORT {status}
 *                                                     --->  SACK {count}
 *   tcp lanes lost before any frame:   SWITCH --->   mpi lanes set up, a second CTS
 *
 * Failure semantics (docs/STRIPE.md "Failures"): a failed message enters MLN_REQ_ABORT.  It
 * moves no new data, its peer is told, and it becomes DONE, so that the user's wait returns
 * its error, only once no MPI operation and no lane uses the user's buffer any more: the
 * sender's chunks in flight have completed, the receiver's chunk receives have landed or been
 * cancelled (the count in SABORT/SACK says which ones the sender posted: none after it will
 * come), and tcp frames already on their way have arrived (an END frame per lane closes a
 * message's stream).  So a failed message leaves nothing behind that could match, or write
 * into, a later one: its chunk tags are retired only then, and other messages with the same
 * peer go on untouched.
 *
 * Chunk tags: a receive of mpi/helper chunks holds [tag_base, tag_base + nchunks) of the
 * control comm from its CTS until it is DONE.  A range is only ever handed out when it
 * overlaps no range held; a receive that finds none free waits (MLN_REQ_TAGS, its CTS not yet
 * sent) and receives get ranges in the order their headers matched.
 */
#include "stripe_int.h"

#include <stdlib.h>
#include <string.h>

static const char *const ctl_names[] = {"?", "CTS", "NAK", "RABORT", "SABORT", "SACK", "SWITCH"};

/* ---- sending and receiving control messages ---------------------------------------------- */

mln_status_t mln_stripe_ctl_send(mln_stripe_t *s, int to, mln_ctl_type_t type, uint64_t msg_id,
                                 mln_lane_kind_t kind, uint64_t value, int tag_base,
                                 mln_status_t why)
{
    mln_status_t st = MLN_OK;
    mln_ctl_out_t *o = calloc(1, sizeof(*o));

    if (o == NULL)
        return MLN_ERR_NOMEM;
    o->msg = (mln_stripe_ctl_t){.type = (uint32_t)type,
                                .kind = (uint32_t)kind,
                                .msg_id = msg_id,
                                .value = value,
                                .tag_base = tag_base,
                                .status = (int32_t)why};
    MLN_MPI_CHECK(
        MPI_Isend(&o->msg, (int)sizeof(o->msg), MPI_BYTE, to, MLN_TAG_CTL, s->ctrl, &o->req), st,
        err);
    o->next = s->ctl_out;
    s->ctl_out = o;
    MLN_TRACE("ctl %s to world %d: message %llu, value %llu", ctl_names[type], to,
              (unsigned long long)msg_id, (unsigned long long)value);
    return MLN_OK;
err:
    free(o);
    return st;
}

/* ---- chunk tags -------------------------------------------------------------------------- */

typedef struct tag_range {
    int lo, n;
} tag_range_t;

static int range_cmp(const void *a, const void *b)
{
    const tag_range_t *x = a, *y = b;
    return (x->lo > y->lo) - (x->lo < y->lo);
}

/* A free range of n chunk tags (first fit from where the last one ended, so that a range is
 * not reused at once), or -1 while none is free. */
static int tags_alloc(mln_stripe_t *s, uint64_t n)
{
    tag_range_t *used;
    int nused = 0, base = -1;

    used = malloc(((size_t)s->nactive + 1) * sizeof(*used));
    if (used == NULL)
        return -1; /* retried on the next pass */
    for (const mln_req_t *r = s->active; r; r = r->next)
        if (r->tags_held)
            used[nused++] = (tag_range_t){r->tag_base, (int)r->nchunks};
    qsort(used, (size_t)nused, sizeof(*used), range_cmp);
    /* two sweeps: from the cursor to the top, then from the bottom to the cursor */
    for (int sweep = 0; sweep < 2 && base < 0; sweep++) {
        int64_t at = sweep == 0 ? s->data_tag_next : s->data_tag_lo;
        const int64_t end = sweep == 0 ? (int64_t)s->data_tag_hi + 1 : s->data_tag_next;
        for (int i = 0; i <= nused && base < 0; i++) {
            const int64_t gap_end = i < nused ? used[i].lo : end;
            if (i < nused && used[i].lo + used[i].n <= at)
                continue;
            if (gap_end > end ? end - at >= (int64_t)n : gap_end - at >= (int64_t)n)
                base = (int)at;
            else if (i < nused)
                at = used[i].lo + used[i].n;
        }
    }
    free(used);
    if (base >= 0)
        s->data_tag_next = base + (int)n > s->data_tag_hi ? s->data_tag_lo : base + (int)n;
    return base;
}

void mln_stripe_tags_release(mln_stripe_t *s, mln_req_t *r)
{
    (void)s;
    r->tags_held = 0;
}

/* A matched header (TAGS): chunk tags, the lanes' receive, then the CTS. */
void mln_stripe_recv_setup(mln_stripe_t *s, mln_req_t *r)
{
    mln_status_t st;

    if (r->kind != MLN_LANE_TCP && r->nchunks > (uint64_t)(s->data_tag_hi - s->data_tag_lo + 1)) {
        MLN_ERROR("message %llu from world rank %d needs %llu chunk tags, more than this rank "
                  "has (is MLN_STRIPE_TAGS the same on every rank?)",
                  (unsigned long long)r->msg_id, r->peer_world, (unsigned long long)r->nchunks);
        mln_stripe_req_fail(s, r, MLN_ERR_CONFIG); /* a NAK: it could wait for ever */
        return;
    }
    if (r->kind != MLN_LANE_TCP && r->nchunks > 0 && !r->tags_held) {
        const int base = tags_alloc(s, r->nchunks);
        if (base < 0)
            return; /* stays in TAGS: mln_stripe_tags_progress retries */
        r->tag_base = base;
        r->tags_held = 1;
    }
    if (r->kind == MLN_LANE_TCP)
        r->tag_base = 0;
    r->state = MLN_REQ_DATA;
    st = s->lanes[r->kind]->recv_post(s, r);
    if (st == MLN_OK)
        st = mln_stripe_ctl_send(s, r->peer_world, MLN_CTL_CTS, r->msg_id, r->kind, r->accept,
                                 r->tag_base, MLN_OK);
    if (st != MLN_OK) {
        r->state = MLN_REQ_TAGS; /* nothing told yet: a NAK */
        mln_stripe_req_fail(s, r, st);
        return;
    }
    r->cts = 1;
    MLN_TRACE("recv %llu: %llu of %llu bytes from world %d over %s", (unsigned long long)r->msg_id,
              (unsigned long long)r->accept, (unsigned long long)r->total, r->peer_world,
              s->lanes[r->kind]->name);
    if (r->accept == 0 || r->early > 0) /* early frames may all have come before the CTS */
        mln_stripe_req_progress(s, r, 0);
}

int mln_stripe_tags_progress(mln_stripe_t *s)
{
    int moved = 0;
    mln_req_t *next;

    for (mln_req_t *r = s->active; r; r = next) {
        next = r->next;
        if (r->is_send || r->state != MLN_REQ_TAGS)
            continue;
        mln_stripe_recv_setup(s, r);
        if (r->state == MLN_REQ_TAGS)
            break; /* first come, first served: a large message is not overtaken for ever */
        moved = 1;
    }
    return moved;
}

/* ---- failures ---------------------------------------------------------------------------- */

void mln_stripe_req_fail(mln_stripe_t *s, mln_req_t *r, mln_status_t st)
{
    if (r->state == MLN_REQ_DONE || r->state == MLN_REQ_ABORT)
        return;
    if (r->state == MLN_REQ_DATA || r->state == MLN_REQ_TAGS || r->state == MLN_REQ_CTS)
        MLN_WARN("striped %s of %llu bytes %s world rank %d (message %llu) failed: %s",
                 r->is_send ? "send" : "receive", (unsigned long long)r->total,
                 r->is_send ? "to" : "from", r->peer_world, (unsigned long long)r->msg_id,
                 mln_status_str(st));
    if (r->result == MLN_OK)
        r->result = st;
    if (r->state == MLN_REQ_TAGS) { /* matched, no CTS yet: the sender waits for a word */
        if (!r->abort_told)
            mln_stripe_ctl_send(s, r->peer_world, MLN_CTL_NAK, r->msg_id, r->kind, 0, 0, st);
        r->abort_told = 1;
        if (r->early > 0) { /* its early frames still come: done once they are in */
            r->state = MLN_REQ_ABORT;
            return;
        }
        mln_stripe_req_finish(s, r, st);
        return;
    }
    /* plain, header, inline, or a send before its CTS with nothing on the lanes */
    if (r->state != MLN_REQ_DATA && !(r->state == MLN_REQ_CTS && r->early > 0)) {
        mln_stripe_req_finish(s, r, st);
        return;
    }
    r->state = MLN_REQ_ABORT; /* a send: its early chunks, if any, still go (all of them) */
    if (r->is_send) {
        const uint64_t count = s->lanes[r->kind]->send_abort(s, r);
        if (!r->abort_told)
            mln_stripe_ctl_send(s, r->peer_world, MLN_CTL_SABORT, r->msg_id, r->kind, count, 0, st);
        r->peer_count = count; /* kept for a RABORT that crosses our SABORT */
    } else if (!r->abort_told) {
        mln_stripe_ctl_send(s, r->peer_world, MLN_CTL_RABORT, r->msg_id, r->kind, 0, 0, st);
    }
    r->abort_told = 1;
}

int mln_stripe_abort_progress(mln_stripe_t *s)
{
    int moved = 0;
    mln_req_t *next;

    for (mln_req_t *r = s->active; r; r = next) {
        next = r->next;
        if (r->state != MLN_REQ_ABORT)
            continue;
        if (s->lanes[r->kind]->quiet(s, r)) {
            mln_stripe_req_finish(s, r, r->result);
            moved = 1;
        }
    }
    return moved;
}

/* ---- what the peer says ------------------------------------------------------------------ */

/* A CTS for one of our sends. */
static void on_cts(mln_stripe_t *s, const mln_stripe_ctl_t *c, int from)
{
    mln_req_t *r = mln_stripe_find_send(s, from, c->msg_id);

    if (r == NULL || r->state != MLN_REQ_CTS) {
        /* we gave the message up (or never knew it): the receiver must not wait for it */
        MLN_DEBUG("CTS from world rank %d for message %llu that is not waiting for one: answered "
                  "with SABORT",
                  from, (unsigned long long)c->msg_id);
        mln_stripe_ctl_send(s, from, MLN_CTL_SABORT, c->msg_id, (mln_lane_kind_t)c->kind, 0, 0,
                            MLN_ERR_PEER);
        return;
    }
    /* (a message whose early chunks are on the tcp lanes cannot move off them) */
    if (c->value > r->total || c->kind >= MLN_LANE_KINDS || s->lanes[c->kind] == NULL ||
        (c->kind != r->kind &&
         (r->early > 0 || !(r->kind == MLN_LANE_TCP && c->kind == MLN_LANE_MPI)))) {
        const int told = r->early > 0; /* such a send tells its peer itself (SABORT) */
        MLN_ERROR("invalid CTS from world rank %d for message %llu (kind %u, accept %llu)", from,
                  (unsigned long long)c->msg_id, c->kind, (unsigned long long)c->value);
        mln_stripe_req_fail(s, r, MLN_ERR_DATA);
        if (!told)
            mln_stripe_ctl_send(s, from, MLN_CTL_SABORT, c->msg_id, (mln_lane_kind_t)c->kind, 0, 0,
                                MLN_ERR_DATA);
        return;
    }
    if (c->kind != r->kind) { /* the receiver cannot take our tcp lanes: mpi for good */
        MLN_DEBUG("world rank %d takes message %llu over mpi lanes, not tcp", from,
                  (unsigned long long)c->msg_id);
        s->tcp_failed[from] = 1;
        r->kind = MLN_LANE_MPI;
    }
    r->accept = c->value;
    r->tag_base = c->tag_base;
    r->nchunks = r->accept ? (r->accept + r->chunk - 1) / r->chunk : 0;
    if (r->kind == MLN_LANE_TCP && r->accept > 0 &&
        (r->tcp_reset || s->tcp_failed[from] || !s->lanes[MLN_LANE_TCP]->ready(s, from))) {
        r->kind = MLN_LANE_MPI; /* our lanes failed before a frame of it went out */
        r->tcp_reset = 0;
        r->early = r->next_off = 0; /* its early chunks went with the lanes, unwritten */
        if (mln_stripe_ctl_send(s, from, MLN_CTL_SWITCH, r->msg_id, MLN_LANE_MPI, 0, 0, MLN_OK) !=
            MLN_OK)
            mln_stripe_req_finish(s, r, MLN_ERR_MPI);
        return; /* a second CTS follows, for the mpi lanes */
    }
    r->state = MLN_REQ_DATA;
    r->cts = 1;
    mln_fault_begin(&s->fault, r);
    if (r->accept == 0 && r->early == 0)
        mln_stripe_req_finish(s, r, MLN_OK);
    else if (r->early > 0) /* the early chunks may be all it takes, and all be written */
        mln_stripe_req_progress(s, r, 0);
}

/* SWITCH: the sender's tcp lanes failed before a frame of this message went out. */
static void on_switch(mln_stripe_t *s, mln_req_t *r)
{
    if (r == NULL || r->state == MLN_REQ_ABORT)
        return; /* we gave it up already; our RABORT answers the sender */
    if (r->state != MLN_REQ_DATA || r->kind != MLN_LANE_TCP || r->bytes_done > 0) {
        MLN_ERROR("SWITCH from world rank %d for message %llu that cannot switch", r->peer_world,
                  (unsigned long long)r->msg_id);
        mln_stripe_req_fail(s, r, MLN_ERR_DATA);
        return;
    }
    s->lanes[MLN_LANE_TCP]->req_free(s, r);
    r->early = r->early_left = 0; /* none was written: the sender's lanes failed first */
    r->kind = MLN_LANE_MPI;
    r->state = MLN_REQ_TAGS;
    mln_stripe_recv_setup(s, r);
}

static void ctl_dispatch(mln_stripe_t *s, const mln_stripe_ctl_t *c, int from)
{
    mln_req_t *r;

    MLN_TRACE("ctl %s from world %d: message %llu, value %llu",
              c->type < sizeof(ctl_names) / sizeof(ctl_names[0]) ? ctl_names[c->type] : "?", from,
              (unsigned long long)c->msg_id, (unsigned long long)c->value);
    switch ((mln_ctl_type_t)c->type) {
    case MLN_CTL_CTS:
        on_cts(s, c, from);
        return;
    case MLN_CTL_NAK: /* the receive failed before its CTS: no data moved */
        r = mln_stripe_find_send(s, from, c->msg_id);
        if (r != NULL && r->state == MLN_REQ_CTS) {
            MLN_WARN("world rank %d refused message %llu: %s", from, (unsigned long long)c->msg_id,
                     mln_status_str((mln_status_t)c->status));
            r->abort_told = 1;
            mln_stripe_req_fail(s, r, MLN_ERR_PEER);
        }
        return;
    case MLN_CTL_RABORT: { /* the receive failed after its CTS: stop, say what is in flight */
        uint64_t count = MLN_COUNT_UNKNOWN; /* a message we finished: all of it was sent */
        r = mln_stripe_find_send(s, from, c->msg_id);
        if (r != NULL && r->state != MLN_REQ_ABORT) {
            count = 0; /* in CTS state it switched lanes: nothing is on its way yet */
            r->abort_told = 1;
            mln_stripe_req_fail(s, r, MLN_ERR_PEER);
        }
        if (r != NULL && r->state == MLN_REQ_ABORT)
            count = r->peer_count;
        mln_stripe_ctl_send(s, from, MLN_CTL_SACK, c->msg_id, (mln_lane_kind_t)c->kind, count, 0,
                            MLN_OK);
        return;
    }
    case MLN_CTL_SABORT: /* the send failed after our CTS */
    case MLN_CTL_SACK:
        r = mln_stripe_find_recv(s, from, c->msg_id);
        if (r == NULL)
            return;
        if (r->state == MLN_REQ_DATA || r->state == MLN_REQ_TAGS) {
            r->abort_told = 1;
            mln_stripe_req_fail(s, r, MLN_ERR_PEER);
        }
        if (r->state == MLN_REQ_ABORT && !r->peer_count_known) {
            r->peer_count = c->value;
            r->peer_count_known = 1;
        }
        return;
    case MLN_CTL_SWITCH:
        on_switch(s, mln_stripe_find_recv(s, from, c->msg_id));
        return;
    }
    MLN_ERROR("control message of unknown type %u from world rank %d: ignored", c->type, from);
}

int mln_stripe_ctl_progress(mln_stripe_t *s)
{
    int moved = 0, flag = 0;
    MPI_Status mst;

    for (mln_ctl_out_t **po = &s->ctl_out; *po;) { /* ours, on their way */
        mln_ctl_out_t *o = *po;
        if (MPI_Test(&o->req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            flag = 1;
        if (!flag) {
            po = &o->next;
            continue;
        }
        *po = o->next;
        free(o);
    }
    while (s->ctl_req != MPI_REQUEST_NULL) { /* theirs */
        if (MPI_Test(&s->ctl_req, &flag, &mst) != MPI_SUCCESS || !flag)
            break;
        moved = 1;
        ctl_dispatch(s, &s->ctl_in, mst.MPI_SOURCE);
        if (MPI_Irecv(&s->ctl_in, (int)sizeof(s->ctl_in), MPI_BYTE, MPI_ANY_SOURCE, MLN_TAG_CTL,
                      s->ctrl, &s->ctl_req) != MPI_SUCCESS) {
            MLN_ERROR("cannot post the control receive: striped messages stop here");
            s->ctl_req = MPI_REQUEST_NULL;
        }
    }
    return moved;
}

/* At finalize: our control messages complete (they are small: MPI sends them eagerly). */
void mln_stripe_ctl_fini(mln_stripe_t *s)
{
    while (s->ctl_out) {
        mln_ctl_out_t *o = s->ctl_out;
        s->ctl_out = o->next;
        MPI_Wait(&o->req, MPI_STATUS_IGNORE);
        free(o);
    }
    if (s->ctl_req != MPI_REQUEST_NULL) {
        MPI_Cancel(&s->ctl_req);
        MPI_Wait(&s->ctl_req, MPI_STATUS_IGNORE);
    }
}

void mln_stripe_tcp_lost(mln_stripe_t *s, int peer_world, mln_status_t st)
{
    mln_req_t *next;

    s->tcp_failed[peer_world] = 1;
    for (mln_req_t *r = s->active; r; r = next) {
        next = r->next;
        if (!r->is_send || r->peer_world != peer_world || r->kind != MLN_LANE_TCP)
            continue;
        if (r->state == MLN_REQ_CTS && r->bytes_done > 0) {
            mln_stripe_req_fail(s, r, st); /* early bytes of it went out: its stream is cut */
        } else if (r->state == MLN_REQ_CTS) {
            r->tcp_reset = 1; /* switched at its CTS */
        } else if (r->state == MLN_REQ_DATA && r->bytes_done == 0) {
            /* nothing of it reached a socket: the receiver sets up mpi lanes, a new CTS */
            r->kind = MLN_LANE_MPI;
            r->early = r->next_off = 0;
            r->state = MLN_REQ_CTS;
            if (mln_stripe_ctl_send(s, peer_world, MLN_CTL_SWITCH, r->msg_id, MLN_LANE_MPI, 0, 0,
                                    MLN_OK) != MLN_OK)
                mln_stripe_req_finish(s, r, MLN_ERR_MPI);
        } else if (r->state == MLN_REQ_DATA) {
            mln_stripe_req_fail(s, r, st);
        }
    }
}
