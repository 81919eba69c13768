/*
 * relay_rank.c - a rank's side of the relays (relay.h, docs/RELAY.md): messages out as frames
 * with per-pair credit over the connections to the site's gateways (one per trunk, made by
 * relay_open.c), progress, abort and close; frames in: relay_recv.c.  No MPI.
 *
 *   isend(dst, n) --> pair (me, dst): seq, credit --> n < STRIPE_MIN: frames <= CHUNK on the
 *                     pair's trunk (lo * 31 + hi) % K (lo, hi: the pair's ranks), in order
 *                 --> else: chunks of mln_sched_chunk(n, K) to the trunk that would have our
 *                     credit on it acknowledged soonest, unacknowledged units over its pace
 *                     (stripe_trunk, through mln_sched_pick, depth 2: the tcp lanes'
 *                     scheduler, lane_sched.c; receivers acknowledge per trunk)
 *   frames in --> per source: message seq's buffer (allocated at its first frame), payload
 *                 at its offset --> complete and next in seq order: the arrived list of its
 *                 context; ACK (cumulative credit units) every WINDOW / 4 and at each message's
 *                 end; MATCHED when a sync message is taken
 *
 * Credit: a DATA frame costs len + MLN_RELAY_FRAME_COST units; a pair never has more than
 * MLN_RELAY_WINDOW units unacknowledged over all trunks (every rank of a run must use the same
 * window: the receiver acknowledges each trunk's units every WINDOW / 4 / K of its own, on that
 * trunk).  Frames reference the user's buffer (no
 * copy on the way out); a send is done when its frames are written (and MATCHED came: sync).
 *
 * Cost of n bytes over K trunks of bandwidth b each through 2 gateways:
 *   T = 3 hops of latency + n / min(K b, WAN, window / RTT)
 */
#define _GNU_SOURCE /* ppoll */
#include "relay_rank_int.h"

#include "p2p/lane_sched.h"
#include "mln_core.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

/* ---- fatal events ------------------------------------------------------------------------ */

void mln_relay_fail(mln_relay_t *r, int code, const char *fmt, ...)
{
    char line[MLN_RELAY_TEXT_MAX + 256];
    va_list ap;

    if (r->dead)
        return;
    r->dead = 1;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (r->fatal_fn != NULL) {
        r->fatal_fn(code, line, r->fatal_arg); /* must not return; a test's may */
        return;
    }
    fprintf(stderr, "%s\n", line);
    fflush(stderr);
    exit(code);
}

/* The connection of trunk t died (read or write -1): fatal unless the rank is leaving. */
static void conn_lost(mln_relay_t *r, int t)
{
    mln_relay_conn_t *c = &r->conns[t];

    if (!r->closing)
        mln_relay_fail(r, 1,
                       "multilane grid: gateway %d of site %s lost (%s): the run cannot go on", t,
                       r->sites.name[r->site], c->why[0] ? c->why : "connection closed");
    r->gone[t] = 1;
    mln_relay_conn_close(c, NULL);
}

/* ---- frames out -------------------------------------------------------------------------- */

static void frame_done(void *cookie, int ok)
{
    relay_frame_t *rf = cookie;
    mln_relay_send_t *s = rf->send;

    if (s != NULL) {
        s->frames_done++;
        if (!ok && s->st == MLN_OK)
            s->st = MLN_ERR_PEER;
    }
    free(rf);
}

/* Queues a frame with header h (trunk set here) and len payload bytes at payload on trunk t;
 * own: payload is a copy of the library's, freed with the frame.  0: no memory. */
int mln_relay_queue(mln_relay_t *r, int t, const mln_relay_hdr_t *h, const unsigned char *payload,
                    unsigned char *own, mln_relay_send_t *s)
{
    relay_frame_t *rf;

    if (r->gone[t]) {
        free(own);
        return 1; /* closing: that gateway is gone, the frame with it */
    }
    rf = calloc(1, sizeof(*rf));
    if (rf == NULL) {
        free(own);
        return 0;
    }
    rf->f.h = *h;
    rf->f.h.trunk = (uint16_t)t;
    rf->f.payload = payload;
    rf->f.own = own;
    rf->f.done = frame_done;
    rf->f.cookie = rf;
    rf->send = s;
    mln_relay_conn_queue(&r->conns[t], &rf->f);
    r->stats.frames_out[t]++;
    return 1;
}

void mln_relay_queue_ctl(mln_relay_t *r, int t, int type, int dst, uint64_t seq, uint64_t offset)
{
    const mln_relay_hdr_t h = {
        .type = (uint8_t)type, .dst = dst, .src = r->me, .seq = seq, .offset = offset};

    if (t < 0)
        t = mln_relay_pair_trunk(r, r->me, dst);
    if (!mln_relay_queue(r, t, &h, NULL, NULL, NULL))
        mln_relay_fail(r, 1, "multilane grid: rank %d: no memory for a control frame", r->me);
}

/* The trunk for the next chunk of a striped message: the one that would have our credit on it
 * acknowledged soonest, out[t] / rate[t] (earliest completion: each trunk at its own pace over
 * the WAN, not an equal share set by the slowest, and the trunks of a message end together),
 * among those with fewer than two chunks waiting for their socket; idle ones in turn.  A trunk
 * whose rate is not known yet counts at the mean of those known (all unknown: bytes alone).
 * -1: every trunk full. */
typedef struct trunk_load {
    uint64_t queued_bytes; /* when our credit on the trunk is acknowledged, in ns (or bytes) */
    int nqueued;           /* chunks waiting for its socket */
} trunk_load_t;

static int stripe_trunk(const mln_relay_t *r)
{
    trunk_load_t load[MLN_RELAY_MAX_TRUNKS];
    double known = 0, mean;
    int nknown = 0;

    for (int t = 0; t < r->trunks; t++)
        if (r->rate[t] > 0) {
            known += r->rate[t];
            nknown++;
        }
    mean = nknown ? known / nknown : 0;
    for (int t = 0; t < r->trunks; t++) {
        const double rate = r->rate[t] > 0 ? r->rate[t] : mean;

        load[t].queued_bytes = rate > 0 ? (uint64_t)((double)r->out[t] / rate * 1e9) : r->out[t];
        load[t].nqueued = r->conns[t].nqueued;
    }
    return MLN_SCHED_PICK_FROM(trunk_load_t, load, r->trunks, 2, r->turn);
}

/* Hands out the frames of pair p's sends, oldest first, as its credit (and for striped
 * messages the trunks' depth) allows; a send whose frames are all out leaves the queue. */
static int pump_pair(mln_relay_t *r, relay_tx_t *p)
{
    int moved = 0;

    while (p->head != NULL && !r->dead) {
        mln_relay_send_t *s = p->head;
        const uint64_t len = s->n - s->next_off < s->chunk ? s->n - s->next_off : s->chunk;
        const uint64_t cost = len + MLN_RELAY_FRAME_COST;
        mln_relay_hdr_t h;
        int t;

        if (s->handed_all) {
            p->head = s->next;
            if (p->head == NULL)
                p->tail = NULL;
            s->next = NULL;
            continue;
        }
        if (p->sent - p->acked + cost > r->window)
            break; /* waits for an ACK */
        t = s->striped ? stripe_trunk(r) : mln_relay_pair_trunk(r, r->me, s->dst);
        if (t < 0)
            break; /* every trunk holds two chunks: waits for a write */
        h = (mln_relay_hdr_t){.type = MLN_RELAY_DATA,
                              .flags = s->sync ? MLN_RELAY_F_SYNC : 0,
                              .dst = s->dst,
                              .src = r->me,
                              .context = s->context,
                              .tag = s->tag,
                              .seq = s->seq,
                              .total = s->n,
                              .offset = s->next_off,
                              .len = (uint32_t)len};
        if (s->next_off + len == s->n)
            h.flags |= MLN_RELAY_F_LAST;
        if (!mln_relay_queue(r, t, &h, len ? s->buf + s->next_off : NULL, NULL, s)) {
            mln_relay_fail(r, 1, "multilane grid: rank %d: no memory for a frame", r->me);
            break;
        }
        if (s->striped)
            r->turn = t + 1;
        s->frames_out++;
        s->next_off += len;
        s->handed_all = s->next_off == s->n;
        if (r->out[t] == 0)
            r->ack_at[t] = mln_relay_now(); /* busy from now on: its rate counts from here */
        p->sent += cost;
        p->t_sent[t] += cost;
        r->out[t] += cost;
        moved = 1;
    }
    return moved;
}

/* Hands out what the pairs with sends waiting may send now. */
static int pump(mln_relay_t *r)
{
    int moved = 0;

    for (relay_tx_t **pp = &r->active; *pp != NULL;) {
        relay_tx_t *p = *pp;

        moved |= pump_pair(r, p);
        if (p->head == NULL) {
            *pp = p->next_active;
            p->next_active = NULL;
            p->active = 0;
        } else {
            pp = &p->next_active;
        }
    }
    return moved;
}

/* Writes what the sockets take; 1 when bytes moved. */
static int write_all(mln_relay_t *r)
{
    int moved = 0;

    for (int t = 0; t < r->trunks && !r->dead; t++) {
        mln_relay_conn_t *c = &r->conns[t];
        int rc;

        if (r->gone[t] || c->head == NULL)
            continue;
        rc = mln_relay_conn_write(c);
        if (rc < 0)
            conn_lost(r, t);
        moved |= rc != 0;
    }
    return moved;
}

/* ---- sending ------------------------------------------------------------------------------ */

mln_status_t mln_relay_isend(mln_relay_t *r, int dst, uint32_t context, int tag, const void *buf,
                             uint64_t n, int sync, mln_relay_send_t **out)
{
    mln_relay_send_t *s;
    relay_tx_t *p;
    int dsite;

    if (r == NULL || out == NULL || tag < 0 || (buf == NULL && n > 0) || n > MLN_RELAY_MSG_MAX)
        return MLN_ERR_ARG;
    dsite = mln_relay_site_of(&r->sites, dst);
    if (dsite < 0 || dsite == r->site)
        return MLN_ERR_ARG; /* only ranks of other sites go through the gateways */
    if (r->dead || r->closing)
        return r->dead ? MLN_ERR_PEER : MLN_ERR_STATE;
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return MLN_ERR_NOMEM;
    p = &r->tx[dst];
    *s = (mln_relay_send_t){.dst = dst,
                            .context = context,
                            .tag = tag,
                            .sync = sync != 0,
                            .buf = buf,
                            .n = n,
                            .seq = p->next_seq++,
                            .striped = n >= r->stripe_min && r->trunks > 1,
                            .chunk = r->chunk};
    if (n >= r->stripe_min)
        r->bulk_at = mln_relay_now();
    if (s->striped) {
        /* chunks no larger than a window shared by four frames per trunk: a pair's credit (its
         * window over every trunk) must keep every trunk busy (1 MiB frames over 8 trunks in an
         * 8 MiB window left one or two idle: a 64 MiB message at ~0.65 of 16 MiB's), and the
         * trunks end a message within a chunk's time of each other (512 KiB: 34 ms at 125
         * Mbit/s, ~0.06 of a 64 MiB message over 8 trunks) */
        const uint64_t min = r->chunk < 65536 ? r->chunk : 65536;
        uint64_t max = r->window / (4u * (uint64_t)r->trunks);

        max = max < min ? min : max > r->chunk ? r->chunk : max;
        s->chunk = mln_sched_chunk(n, r->trunks, 4, min, max);
    }
    /* every live send, for mln_relay_close; the pair's queue; the sync list */
    s->all_next = r->sends;
    if (r->sends)
        r->sends->all_prev = s;
    r->sends = s;
    if (p->tail)
        p->tail->next = s;
    else
        p->head = s;
    p->tail = s;
    if (s->sync) {
        s->sync_next = p->sync_wait;
        p->sync_wait = s;
    }
    if (!p->active) {
        p->active = 1;
        p->next_active = r->active;
        r->active = p;
    }
    r->stats.msgs_out++;
    r->stats.bytes_out += n;
    if (pump(r))
        write_all(r);
    *out = s;
    return MLN_OK;
}

static void send_free(mln_relay_t *r, mln_relay_send_t *s)
{
    if (s->all_prev)
        s->all_prev->all_next = s->all_next;
    else
        r->sends = s->all_next;
    if (s->all_next)
        s->all_next->all_prev = s->all_prev;
    free(s);
}

int mln_relay_send_test(mln_relay_t *r, mln_relay_send_t *s, mln_status_t *st)
{
    int done;

    if (r == NULL || s == NULL)
        return 0;
    done = s->handed_all && s->frames_done == s->frames_out &&
           (!s->sync || s->matched || s->st != MLN_OK);
    if (!done && !r->dead)
        return 0;
    if (st != NULL)
        *st = done ? s->st : MLN_ERR_PEER;
    if (s->sync && !s->matched) { /* off the pair's MATCHED list */
        for (mln_relay_send_t **q = &r->tx[s->dst].sync_wait; *q; q = &(*q)->sync_next) {
            if (*q == s) {
                *q = s->sync_next;
                break;
            }
        }
    }
    if (!done) {
        /* the run is over and the send's frames may still be queued: it is freed at close */
        s->orphan = 1;
        return 1;
    }
    send_free(r, s);
    return 1;
}

/* ---- progress ---------------------------------------------------------------------------- */

/* Reads every whole frame of trunk t; 1 when any came. */
static int read_trunk(mln_relay_t *r, int t)
{
    mln_relay_conn_t *c = &r->conns[t];
    mln_relay_hdr_t h;
    const unsigned char *payload;
    int moved = 0, rc = 0, n = 0;

    r->read_more[t] = 0;
    while (!r->dead && !r->gone[t] && (rc = mln_relay_conn_read(c, &h, &payload)) == 1) {
        moved = 1;
        r->stats.frames_in[t]++;
        mln_relay_on_frame(r, t, &h, payload);
        if (++n == 1024) { /* others' turn: the rest on the next call */
            r->read_more[t] = 1;
            break;
        }
    }
    if (rc < 0 && !r->gone[t])
        conn_lost(r, t);
    return moved;
}

int mln_relay_progress(mln_relay_t *r, int wait_us)
{
    struct pollfd pfd[MLN_RELAY_MAX_TRUNKS];
    struct timespec ts = {.tv_sec = 0, .tv_nsec = 0};
    int moved = 0, more = 0, n;

    if (r == NULL || r->dead)
        return 0;
    for (int t = 0; t < r->trunks; t++) {
        pfd[t].fd = r->gone[t] ? -1 : r->conns[t].fd;
        pfd[t].events = r->gone[t] ? 0 : mln_relay_conn_events(&r->conns[t]);
        pfd[t].revents = 0;
        more |= r->read_more[t];
    }
    if (wait_us > 0 && !more) {
        ts.tv_sec = wait_us / 1000000;
        ts.tv_nsec = (long)(wait_us % 1000000) * 1000;
    }
    n = ppoll(pfd, (nfds_t)r->trunks, &ts, NULL);
    if (n < 0 && errno != EINTR)
        MLN_DEBUG("relay: ppoll: %s", strerror(errno));
    for (int t = 0; t < r->trunks && !r->dead; t++)
        if (r->read_more[t] || (n > 0 && (pfd[t].revents & (POLLIN | POLLERR | POLLHUP))))
            moved |= read_trunk(r, t);
    /* writes free depth and credit comes with ACKs: hand out, write, again while it moves */
    for (int round = 0; round < 4 && !r->dead; round++) {
        int w = write_all(r), p = pump(r);

        moved |= w | p;
        if (!w && !p)
            break;
    }
    return moved;
}

void mln_relay_on_fatal(mln_relay_t *r, mln_relay_fatal_fn fn, void *arg)
{
    if (r == NULL)
        return;
    r->fatal_fn = fn;
    r->fatal_arg = arg;
}

void mln_relay_abort(mln_relay_t *r, int code, const char *line)
{
    const size_t len = line ? strnlen(line, MLN_RELAY_TEXT_MAX) : 0;
    double until;

    if (r == NULL)
        return;
    r->closing = 1; /* a gateway closing on us now is no news */
    for (int t = 0; t < r->trunks; t++) {
        mln_relay_hdr_t h = {.type = MLN_RELAY_ABORT,
                             .dst = MLN_RELAY_ALL,
                             .src = r->me,
                             .tag = code,
                             .len = (uint32_t)len};
        unsigned char *own = len ? malloc(len) : NULL;

        if (len && own == NULL)
            continue;
        if (len)
            memcpy(own, line, len);
        mln_relay_queue(r, t, &h, own, own, NULL);
    }
    until = mln_relay_now() + 1.0;
    while (mln_relay_now() < until && !r->dead) {
        int left = 0;
        struct pollfd pfd[MLN_RELAY_MAX_TRUNKS];

        write_all(r);
        for (int t = 0; t < r->trunks; t++) {
            left |= !r->gone[t] && r->conns[t].head != NULL;
            pfd[t].fd = !r->gone[t] && r->conns[t].head ? r->conns[t].fd : -1;
            pfd[t].events = POLLOUT;
        }
        if (!left)
            break;
        poll(pfd, (nfds_t)r->trunks, 10);
    }
}

int mln_relay_bulk(const mln_relay_t *r)
{
    return r != NULL && r->bulk_at > 0 && mln_relay_now() - r->bulk_at < MLN_RELAY_BULK_S;
}

void mln_relay_get_stats(const mln_relay_t *r, mln_relay_stats_t *out)
{
    if (r != NULL && out != NULL)
        *out = r->stats;
}

/* ---- closing ----------------------------------------------------------------------------- */

/* 1 while a frame of ours waits to be written, or a send to be handed out. */
static int anything_queued(const mln_relay_t *r)
{
    if (r->active != NULL)
        return 1;
    for (int t = 0; t < r->trunks; t++)
        if (!r->gone[t] && r->conns[t].head != NULL)
            return 1;
    return 0;
}

void mln_relay_close(mln_relay_t *r)
{
    double deadline;

    if (r == NULL)
        return;
    deadline = mln_relay_now() + r->timeout;
    r->closing = 1;
    while (!r->dead && anything_queued(r) && mln_relay_now() < deadline)
        mln_relay_progress(r, 10000);
    for (int t = 0; t < r->trunks && !r->dead; t++) {
        const mln_relay_hdr_t h = {.type = MLN_RELAY_BYE, .dst = MLN_RELAY_ALL, .src = r->me};
        mln_relay_queue(r, t, &h, NULL, NULL, NULL);
    }
    while (!r->dead && anything_queued(r) && mln_relay_now() < deadline)
        mln_relay_progress(r, 10000);
    /* our side is done; read until each gateway closes (at most a second), so that no byte of
     * ours is lost to a reset when the socket closes with bytes unread */
    for (int t = 0; t < r->trunks; t++)
        if (!r->gone[t])
            shutdown(r->conns[t].fd, SHUT_WR);
    deadline = mln_relay_now() + 1.0 < deadline ? mln_relay_now() + 1.0 : deadline;
    for (;;) {
        int open = 0;
        for (int t = 0; t < r->trunks; t++)
            open += !r->gone[t];
        if (!open || r->dead || mln_relay_now() >= deadline)
            break;
        mln_relay_progress(r, 10000);
    }
    for (int t = 0; t < r->trunks; t++)
        if (!r->gone[t])
            mln_relay_conn_close(&r->conns[t], "closed");
    /* every frame is done now (conn_close failed what was queued): the sends can go */
    while (r->sends != NULL)
        send_free(r, r->sends);
    mln_relay_recv_free(r);
    mln_link_job_wipe(&r->job);
    free(r->tx);
    free(r->rx);
    free(r->credit);
    free(r);
}

/* ---- the run ------------------------------------------------------------------------------ */

int mln_relay_rank(const mln_relay_t *r)
{
    return r->me;
}

int mln_relay_size(const mln_relay_t *r)
{
    return r->sites.nranks;
}

int mln_relay_site(const mln_relay_t *r)
{
    return r->site;
}

int mln_relay_nsites(const mln_relay_t *r)
{
    return r->sites.nsites;
}

int mln_relay_site_of_rank(const mln_relay_t *r, int rank)
{
    return mln_relay_site_of(&r->sites, rank);
}

int mln_relay_site_first(const mln_relay_t *r, int site)
{
    return site >= 0 && site < r->sites.nsites ? r->sites.first[site] : -1;
}

int mln_relay_site_size(const mln_relay_t *r, int site)
{
    return site >= 0 && site < r->sites.nsites ? r->sites.size[site] : 0;
}

const char *mln_relay_site_name(const mln_relay_t *r, int site)
{
    return site >= 0 && site < r->sites.nsites ? r->sites.name[site] : NULL;
}

int mln_relay_trunks(const mln_relay_t *r)
{
    return r->trunks;
}
