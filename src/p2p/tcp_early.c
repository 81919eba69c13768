/*
 * tcp_early.c - early frames: the chunks of [0, hdr.early) that a sender puts on its tcp lanes
 * before the receiver's CTS (docs/STRIPE.md "Early chunks"), so that a striped message does
 * not lose the round trip of its rendezvous.
 *
 * An early frame reaches the receiver before or after its message's header has matched a
 * receive.  After: it lands in place like any chunk.  Before: it is read into a stash entry
 * (the lane must go on, other messages' chunks may follow it) and copied into place once the
 * header matches.  The stash of one sender holds at most MLN_STRIPE_EARLY bytes of messages
 * not matched: the sender counts the early bytes of its sends without a CTS against the same
 * limit, so only a sender with another setting (or a broken one) exceeds it, and that closes
 * its lanes with one error line.  Every early frame always comes (a failed send still writes
 * its early chunks), so a receive waits for all of them before it is done and none can arrive
 * after its request is gone.
 *
 * Cost: an early frame that waited in the stash costs one copy (memcpy of at most
 * MLN_STRIPE_EARLY bytes per message); one that came after the header costs nothing.
 */
#include "lane_tcp_int.h"

#include <stdlib.h>
#include <string.h>

uint64_t mln_tcp_frame_index(const mln_req_t *r, uint32_t magic, uint64_t off, uint64_t len)
{
    uint64_t index, want;

    if (r->kind != MLN_LANE_TCP || r->got == NULL || len == 0 || r->chunk == 0 ||
        off % r->chunk != 0)
        return TCP_BAD_INDEX;
    index = off / r->chunk;
    if (magic == TCP_EARLY_MAGIC) { /* cut on the whole message, whatever the receive takes */
        if (off >= r->early)
            return TCP_BAD_INDEX;
        want = r->total - off < r->chunk ? r->total - off : r->chunk;
    } else { /* after the CTS: the accepted bytes beyond the early ones */
        if (magic != TCP_FRAME_MAGIC || !r->cts || off < r->early || index >= r->nchunks)
            return TCP_BAD_INDEX;
        want = mln_stripe_chunk_len(r, index);
    }
    if (len != want || (r->got[index / 8] & (1u << (index % 8))))
        return TCP_BAD_INDEX;
    return index;
}

uint64_t mln_tcp_frame_lands(const mln_req_t *r, uint64_t off, uint64_t len)
{
    if (off >= r->accept)
        return 0;
    return r->accept - off < len ? r->accept - off : len;
}

int mln_tcp_stash_begin(mln_stripe_t *s, tcp_in_t *in, const tcp_frame_t *f)
{
    mln_tcp_state_t *t = s->tcp;
    uint64_t held = f->len;
    tcp_stash_t *e;

    for (e = t->stash; e; e = e->next) {
        if (e->src != in->src)
            continue;
        if (e->msg_id == f->msg_id && e->off == f->offset) {
            MLN_ERROR("tcp: world rank %d sent early chunk %llu of message %llu twice: its lanes "
                      "are closed",
                      in->src, (unsigned long long)f->offset, (unsigned long long)f->msg_id);
            return 0;
        }
        if (!e->matched)
            held += e->len;
    }
    if (f->len == 0 || held > s->cfg->stripe_early) {
        MLN_ERROR("tcp: world rank %d sent %llu early bytes before their headers matched, more "
                  "than MLN_STRIPE_EARLY (%llu) lets a receiver keep (is it the same on every "
                  "rank?): its lanes are closed",
                  in->src, (unsigned long long)held, (unsigned long long)s->cfg->stripe_early);
        return 0;
    }
    e = calloc(1, sizeof(*e));
    if (e != NULL)
        e->data = malloc((size_t)f->len);
    if (e == NULL || e->data == NULL) {
        MLN_ERROR("tcp: no memory for %u early bytes from world rank %d: its lanes are closed",
                  f->len, in->src);
        free(e);
        return 0;
    }
    MLN_TRACE("tcp: early chunk %llu of message %llu from world %d kept aside (no header "
              "matched yet)",
              (unsigned long long)f->offset, (unsigned long long)f->msg_id, in->src);
    e->src = in->src;
    e->msg_id = f->msg_id;
    e->off = f->offset;
    e->len = f->len;
    e->next = t->stash;
    t->stash = e;
    in->stash = e;
    in->req = NULL;
    in->early = 1;
    in->dst = e->data;
    in->left = f->len;
    in->skip = 0;
    in->state = IN_PAYLOAD;
    return 1;
}

static void stash_unlink(mln_tcp_state_t *t, tcp_stash_t *e)
{
    for (tcp_stash_t **pe = &t->stash; *pe; pe = &(*pe)->next)
        if (*pe == e) {
            *pe = e->next;
            break;
        }
    free(e->data);
    free(e);
}

/* A whole entry into receive r: 1, or 0 when it does not fit r. */
static int stash_apply(mln_stripe_t *s, mln_req_t *r, const tcp_stash_t *e)
{
    const uint64_t index = mln_tcp_frame_index(r, TCP_EARLY_MAGIC, e->off, e->len);
    uint64_t lands;

    if (index == TCP_BAD_INDEX) {
        MLN_ERROR("tcp: an early frame from world rank %d does not fit message %llu (offset "
                  "%llu, length %llu): its lanes are closed",
                  e->src, (unsigned long long)e->msg_id, (unsigned long long)e->off,
                  (unsigned long long)e->len);
        return 0;
    }
    r->got[index / 8] |= (uint8_t)(1u << (index % 8));
    lands = mln_tcp_frame_lands(r, e->off, e->len);
    MLN_TRACE("tcp: early chunk %llu of message %llu from world %d taken from aside (%llu bytes "
              "land)",
              (unsigned long long)e->off, (unsigned long long)e->msg_id, e->src,
              (unsigned long long)lands);
    if (lands > 0)
        memcpy(r->buf + e->off, e->data, (size_t)lands);
    r->early_left--;
    mln_stripe_req_progress(s, r, lands);
    return 1;
}

int mln_tcp_stash_done(mln_stripe_t *s, int src, tcp_stash_t *e)
{
    mln_req_t *r = mln_stripe_find_recv(s, src, e->msg_id);
    int ok = 1;

    if (r == NULL || r->early == 0)
        return 1; /* its header has not matched: kept */
    ok = stash_apply(s, r, e);
    stash_unlink(s->tcp, e);
    return ok;
}

mln_status_t mln_tcp_got_alloc(mln_req_t *r)
{
    const uint64_t early_n = r->early ? (r->early + r->chunk - 1) / r->chunk : 0;
    const uint64_t frames = early_n > r->nchunks ? early_n : r->nchunks;

    if (r->got == NULL)
        r->got = calloc((size_t)(frames / 8 + 1), 1);
    return r->got != NULL ? MLN_OK : MLN_ERR_NOMEM;
}

mln_status_t mln_tcp_recv_early(mln_stripe_t *s, mln_req_t *r)
{
    mln_tcp_state_t *t = s->tcp;
    tcp_stash_t *e, *next;

    if (mln_tcp_got_alloc(r) != MLN_OK)
        return MLN_ERR_NOMEM;
    r->early_left = (r->early + r->chunk - 1) / r->chunk;
    for (e = t->stash; e; e = next) {
        next = e->next;
        if (e->src != r->peer_world || e->msg_id != r->msg_id)
            continue;
        e->matched = 1;
        for (int i = 0; i < t->nin && e != NULL; i++)
            if (t->ins[i]->stash == e)
                e = NULL; /* a lane is reading it: handed over once whole */
        if (e == NULL)
            continue;
        if (!stash_apply(s, r, e)) {
            mln_tcp_in_lost(s, r->peer_world, MLN_ERR_DATA);
            return MLN_ERR_DATA;
        }
        stash_unlink(t, e);
    }
    return MLN_OK;
}

void mln_tcp_stash_drop(mln_tcp_state_t *t, int src)
{
    for (tcp_stash_t **pe = &t->stash; *pe;) {
        tcp_stash_t *e = *pe;
        if (src >= 0 && e->src != src) {
            pe = &e->next;
            continue;
        }
        *pe = e->next;
        free(e->data);
        free(e);
    }
}
