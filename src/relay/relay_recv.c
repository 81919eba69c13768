/*
 * relay_recv.c - frames in, at a rank (relay.h): DATA reassembled into whole messages and
 * delivered in per-pair order, ACK and MATCHED for the sending side, ABORT and FAIL.  No MPI.
 *
 *   DATA (src, seq, offset, len) --> rx[src].ring[seq % cap]: the message's buffer (total bytes,
 *        allocated at its first frame, whichever trunk brought it), payload copied at offset,
 *        its byte ranges kept so that an overlap is caught --> complete and seq = next_seq:
 *        delivered to its context's arrived list, then seq + 1, ... as far as they are complete
 *   credit: per trunk t, units[t] += len + MLN_RELAY_FRAME_COST; an ACK on trunk t (cumulative,
 *        that trunk's units) once units[t] is WINDOW / 4 / K past the last one (K trunks), and
 *        on every trunk with units unacknowledged when a message of STRIPE_MIN bytes or more ends
 *
 * A frame that contradicts its message (envelope, overlap, a message already delivered) is a
 * protocol error: fatal, with a line naming the source and what was wrong.
 * Cost per frame: O(1) but the overlap check, O(ranges) (1 when frames come in order).
 */
#include "relay_rank_int.h"

#include "mln_core.h"

#include <stdlib.h>
#include <string.h>

#define RING_MAX ((uint64_t)1 << 24) /* messages of one source in progress, at most */

static void protocol_error(mln_relay_t *r, int t, const mln_relay_hdr_t *h, const char *what)
{
    mln_relay_fail(r, 1,
                   "multilane grid: rank %d: a bad frame from rank %d (message %llu) through "
                   "gateway %d of site %s: %s: the run cannot go on",
                   r->me, (int)h->src, (unsigned long long)h->seq, t, r->sites.name[r->site], what);
}

/* The printable part of a text payload (FAIL, ABORT) into out: no trailing white space, any
 * other byte that is not printable ASCII as '?'. */
static void text_of(const unsigned char *p, uint32_t len, char *out, size_t cap)
{
    size_t n = len < cap - 1 ? len : cap - 1;

    while (n > 0 && (p[n - 1] == '\n' || p[n - 1] == '\r' || p[n - 1] == ' ' || p[n - 1] == '\t'))
        n--;
    for (size_t i = 0; i < n; i++)
        out[i] = p[i] >= 0x20 && p[i] < 0x7f ? (char)p[i] : '?';
    out[n] = '\0';
}

/* ---- reassembly -------------------------------------------------------------------------- */

/* Adds [a, b) to x's ranges: 0, -1 when it overlaps one, -2 out of memory. */
static int range_add(relay_part_t *x, uint64_t a, uint64_t b)
{
    int i = 0, n = x->niv, prev, next;

    if (n > 0 && x->iv[n - 1][1] == a) { /* in order: the common case */
        x->iv[n - 1][1] = b;
        return 0;
    }
    while (i < n && x->iv[i][1] <= a)
        i++;
    if (i < n && x->iv[i][0] < b)
        return -1;
    prev = i > 0 && x->iv[i - 1][1] == a;
    next = i < n && x->iv[i][0] == b;
    if (prev && next) {
        x->iv[i - 1][1] = x->iv[i][1];
        memmove(&x->iv[i], &x->iv[i + 1], (size_t)(n - i - 1) * sizeof(x->iv[0]));
        x->niv--;
    } else if (prev) {
        x->iv[i - 1][1] = b;
    } else if (next) {
        x->iv[i][0] = a;
    } else {
        if (n == x->ivcap) {
            int cap = x->ivcap ? 2 * x->ivcap : 4;
            void *iv = realloc(x->iv, (size_t)cap * sizeof(x->iv[0]));
            if (iv == NULL)
                return -2;
            x->iv = iv;
            x->ivcap = cap;
        }
        memmove(&x->iv[i + 1], &x->iv[i], (size_t)(n - i) * sizeof(x->iv[0]));
        x->iv[i][0] = a;
        x->iv[i][1] = b;
        x->niv++;
    }
    return 0;
}

static void part_free(relay_part_t *x, int with_msg)
{
    if (with_msg)
        mln_relay_msg_free(x->m);
    free(x->iv);
    free(x);
}

/* Makes room in p's ring for seq (> next_seq - 1); 0 when it cannot be. */
static int ring_fit(relay_rx_t *p, uint64_t seq)
{
    uint64_t cap = p->cap ? p->cap : 16;
    relay_part_t **ring;

    if (seq - p->next_seq < p->cap)
        return 1;
    while (seq - p->next_seq >= cap)
        cap *= 2;
    if (cap > RING_MAX)
        return 0;
    ring = calloc((size_t)cap, sizeof(*ring));
    if (ring == NULL)
        return 0;
    for (uint64_t i = 0; i < p->cap; i++)
        if (p->ring[i] != NULL)
            ring[p->ring[i]->m->seq & (cap - 1)] = p->ring[i];
    free(p->ring);
    p->ring = ring;
    p->cap = cap;
    return 1;
}

static relay_ctx_t *ctx_find(mln_relay_t *r, uint32_t context, int create)
{
    for (int i = 0; i < r->nctx; i++)
        if (r->ctxs[i].context == context)
            return &r->ctxs[i];
    if (!create)
        return NULL;
    if (r->nctx == r->ctxcap) {
        int cap = r->ctxcap ? 2 * r->ctxcap : 4;
        relay_ctx_t *c = realloc(r->ctxs, (size_t)cap * sizeof(*c));
        if (c == NULL)
            return NULL;
        r->ctxs = c;
        r->ctxcap = cap;
    }
    r->ctxs[r->nctx] = (relay_ctx_t){.context = context};
    return &r->ctxs[r->nctx++];
}

/* Delivers the complete messages of p from next_seq on, in order. */
static void deliver(mln_relay_t *r, relay_rx_t *p)
{
    relay_part_t *x;

    while (p->cap && (x = p->ring[p->next_seq & (p->cap - 1)]) != NULL && x->complete) {
        relay_ctx_t *c = ctx_find(r, x->m->context, 1);

        if (c == NULL) {
            mln_relay_fail(r, 1, "multilane grid: rank %d: no memory for a context", r->me);
            return;
        }
        p->ring[p->next_seq & (p->cap - 1)] = NULL;
        p->next_seq++;
        x->m->next = NULL;
        if (c->tail)
            c->tail->next = x->m;
        else
            c->head = x->m;
        c->tail = x->m;
        r->stats.msgs_in++;
        r->stats.bytes_in += x->m->len;
        part_free(x, 0);
    }
}

/* A DATA frame; NULL, or what is wrong with it. */
static const char *on_data(mln_relay_t *r, int t, const mln_relay_hdr_t *h,
                           const unsigned char *payload)
{
    const int ssite = mln_relay_site_of(&r->sites, h->src);
    const int sync = (h->flags & MLN_RELAY_F_SYNC) != 0;
    relay_rx_t *p;
    relay_part_t *x;
    int rc, complete;

    if (ssite < 0 || ssite == r->site || h->dst != r->me)
        return "not a pair of ranks of two sites ending here";
    if (h->total >= r->stripe_min)
        r->bulk_at = mln_relay_now();
    if (h->offset > h->total || h->len > h->total - h->offset)
        return "bytes beyond the message's end";
    if (h->len == 0 && h->total > 0)
        return "an empty frame of a message that is not empty";
    p = &r->rx[h->src];
    if (h->seq < p->next_seq)
        return "a message that was delivered already";
    if (!ring_fit(p, h->seq))
        return "too far ahead of the messages delivered";
    x = p->ring[h->seq & (p->cap - 1)];
    if (x == NULL) {
        mln_relay_msg_t *m = calloc(1, sizeof(*m));

        x = calloc(1, sizeof(*x));
        if (m != NULL && h->total > 0)
            m->data = malloc((size_t)h->total);
        if (m == NULL || x == NULL || (h->total > 0 && m->data == NULL)) {
            mln_relay_msg_free(m);
            free(x);
            mln_relay_fail(r, 1,
                           "multilane grid: rank %d: no memory for a message of %llu "
                           "bytes from rank %d",
                           r->me, (unsigned long long)h->total, h->src);
            return NULL;
        }
        *m = (mln_relay_msg_t){.src = h->src,
                               .context = h->context,
                               .tag = h->tag,
                               .seq = h->seq,
                               .len = h->total,
                               .data = m->data,
                               .sync = sync};
        x->m = m;
        p->ring[h->seq & (p->cap - 1)] = x;
    } else if (x->m->context != h->context || x->m->tag != h->tag || x->m->len != h->total ||
               x->m->sync != sync) {
        return "its envelope differs from its message's first frame";
    } else if (x->complete) {
        return "a frame of a message that is complete";
    }
    rc = h->len ? range_add(x, h->offset, h->offset + h->len) : 0;
    if (rc == -1)
        return "bytes that arrived already (overlap)";
    if (rc == -2) {
        mln_relay_fail(r, 1, "multilane grid: rank %d: no memory", r->me);
        return NULL;
    }
    if (h->len)
        memcpy(x->m->data + h->offset, payload, h->len);
    x->got += h->len;
    x->complete = complete = x->got == h->total;
    p->t_units[t] += (uint64_t)h->len + MLN_RELAY_FRAME_COST;
    if (complete)
        deliver(r, p); /* x may be gone now */
    /* An ACK per trunk, on that trunk, of what came through it: the sender sees each trunk's
     * pace and stripes by it.  Every quarter window over the trunks, not every message (a
     * ping-pong's small messages cost no ACK), and never later than the sender needs it: once
     * every frame it sent is in, what is left unacknowledged on all trunks together plus its
     * largest frame (chunk + cost) must fit the window, or it waits for ever (the tightest
     * window, chunk + cost: an ACK per frame).  At the end of a striped-size message, every
     * trunk that brought some of it: the sender's count of each trunk's load starts from zero
     * when the next one does. */
    const uint64_t room = r->window - (r->chunk + MLN_RELAY_FRAME_COST);
    const uint64_t every = (room < r->window / 4 ? room : r->window / 4) / (uint64_t)r->trunks;
    const int all = complete && h->total >= r->stripe_min;

    for (int u = all ? 0 : t; u < (all ? r->trunks : t + 1); u++) {
        if (p->t_units[u] > p->t_acked[u] && (all || p->t_units[u] - p->t_acked[u] >= every)) {
            p->t_acked[u] = p->t_units[u];
            mln_relay_queue_ctl(r, u, MLN_RELAY_ACK, h->src, 0, p->t_units[u]);
        }
    }
    return NULL;
}

/* ---- the sending side's answers ---------------------------------------------------------- */

static const char *on_ack(mln_relay_t *r, int t, const mln_relay_hdr_t *h)
{
    relay_tx_t *p;
    uint64_t more;

    if (mln_relay_site_of(&r->sites, h->src) < 0 || h->dst != r->me)
        return "an ACK of no pair of ours";
    p = &r->tx[h->src];
    if (h->offset < p->t_acked[t] || h->offset > p->t_sent[t])
        return "an ACK of credit never used on its trunk or taken back";
    more = h->offset - p->t_acked[t];
    p->t_acked[t] = h->offset;
    p->acked += more;
    r->out[t] -= more;
    if (more > 0) { /* the trunk's pace: units per second since its last ACK (or busy) */
        const double now = mln_relay_now(), dt = now - r->ack_at[t];

        if (dt > 0) {
            const double sample = (double)more / dt;
            r->rate[t] = r->rate[t] > 0 ? 0.75 * r->rate[t] + 0.25 * sample : sample;
        }
        r->ack_at[t] = now;
    }
    return NULL;
}

static const char *on_matched(mln_relay_t *r, const mln_relay_hdr_t *h)
{
    relay_tx_t *p;

    if (mln_relay_site_of(&r->sites, h->src) < 0 || h->dst != r->me)
        return "a MATCHED of no pair of ours";
    p = &r->tx[h->src];
    for (mln_relay_send_t **q = &p->sync_wait; *q; q = &(*q)->sync_next) {
        if ((*q)->seq == h->seq) {
            (*q)->matched = 1;
            *q = (*q)->sync_next;
            return NULL;
        }
    }
    return "a MATCHED of no synchronous send waiting";
}

void mln_relay_on_frame(mln_relay_t *r, int t, const mln_relay_hdr_t *h,
                        const unsigned char *payload)
{
    char text[MLN_RELAY_TEXT_MAX + 1];
    const char *bad = NULL;
    int site;

    switch (h->type) {
    case MLN_RELAY_DATA:
        bad = on_data(r, t, h, payload);
        break;
    case MLN_RELAY_ACK:
        bad = on_ack(r, t, h);
        break;
    case MLN_RELAY_MATCHED:
        bad = on_matched(r, h);
        break;
    case MLN_RELAY_ABORT:
        text_of(payload, h->len, text, sizeof(text));
        site = mln_relay_site_of(&r->sites, h->src);
        mln_relay_fail(r, h->tag, "multilane grid: rank %d of site %s called MPI_Abort(%d): %s",
                       (int)h->src, site >= 0 ? r->sites.name[site] : "?", (int)h->tag, text);
        return;
    case MLN_RELAY_FAIL:
        text_of(payload, h->len, text, sizeof(text));
        mln_relay_fail(r, 1, "%s", text[0] ? text : "multilane grid: a gateway failed");
        return;
    default: /* BYE from a gateway: it closes next, and is lost unless we are leaving */
        return;
    }
    if (bad != NULL)
        protocol_error(r, t, h, bad);
}

/* ---- the caller's side ------------------------------------------------------------------- */

mln_relay_msg_t *mln_relay_arrived(mln_relay_t *r, uint32_t context)
{
    const relay_ctx_t *c = r ? ctx_find(r, context, 0) : NULL;

    return c ? c->head : NULL;
}

void mln_relay_take(mln_relay_t *r, mln_relay_msg_t *m)
{
    relay_ctx_t *c;
    mln_relay_msg_t *prev = NULL;

    if (r == NULL || m == NULL || (c = ctx_find(r, m->context, 0)) == NULL)
        return;
    for (mln_relay_msg_t *q = c->head; q != NULL; prev = q, q = q->next) {
        if (q != m)
            continue;
        if (prev)
            prev->next = m->next;
        else
            c->head = m->next;
        if (c->tail == m)
            c->tail = prev;
        m->next = NULL;
        if (m->sync && !r->dead)
            mln_relay_queue_ctl(r, -1, MLN_RELAY_MATCHED, m->src, m->seq, 0);
        return;
    }
}

void mln_relay_msg_free(mln_relay_msg_t *m)
{
    if (m == NULL)
        return;
    free(m->data);
    free(m);
}

void mln_relay_recv_free(mln_relay_t *r)
{
    for (int i = 0; r->rx != NULL && i < r->sites.nranks; i++) {
        relay_rx_t *p = &r->rx[i];
        for (uint64_t k = 0; k < p->cap; k++)
            if (p->ring[k] != NULL)
                part_free(p->ring[k], 1);
        free(p->ring);
    }
    for (int i = 0; i < r->nctx; i++) {
        for (mln_relay_msg_t *m = r->ctxs[i].head, *next; m != NULL; m = next) {
            next = m->next;
            mln_relay_msg_free(m);
        }
    }
    free(r->ctxs);
    r->ctxs = NULL;
    r->nctx = r->ctxcap = 0;
}
