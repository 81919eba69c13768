/*
 * lane_tcp.c - tcp lanes: the library's own N TCP connections per peer (ALGORITHMS.md S1).
 *
 * Every rank listens on one socket; the listen addresses are exchanged through MPI at
 * mln_init.  Lanes are one-way: the first striped message from A to B makes A open
 * MLN_STRIPE_LANES connections to B (tcp_conn.c: without blocking, each with a hello).  A
 * chunk is a frame {magic, length, message id, offset} plus its payload, which the receiver
 * reads straight into the user's buffer at that offset (no reassembly copy).  It checks every
 * frame against the message before a byte lands: offset on the chunk grid, length of that
 * chunk, and each chunk once.  An END frame {message id} says that a lane carries no more of a
 * message that failed.  A send's first chunks go before the CTS, as early frames (tcp_early.c:
 * the receiver keeps those aside whose header has not matched yet).
 *
 * Scheduling is dynamic (S4, lane_sched.c): a lane takes the next chunk when it has less than
 * two queued, and the lane with the least queued bytes goes first, so a slow lane gets fewer
 * chunks instead of setting the pace (NCCL's equal split waits for its slowest socket).
 *
 * Cost of n bytes over L lanes of window-limited bandwidth b = W / RTT each:
 *   T = RTT / 2 + n / min(L b, link)     (plus the header and CTS, see stripe.c)
 *
 * Failures (S7, tcp_conn.c): a lane that fails closes all lanes of that peer in that
 * direction; messages with bytes on them fail (MLN_ERR_PEER, or MLN_ERR_TIMEOUT when the
 * peer's host stopped answering), those without move to the mpi lanes, and so do later ones.
 * Frames that do not fit their message close that peer's lanes with MLN_ERR_DATA.
 */
#define _GNU_SOURCE /* ppoll */
#include "lane_tcp_int.h"
#include "lane_sched.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* ---- sending ----------------------------------------------------------------------------- */

static void chunk_append(tcp_out_t *o, tcp_chunk_t *c)
{
    c->next = NULL;
    if (o->tail)
        o->tail->next = c;
    else
        o->head = c;
    o->tail = c;
    o->nqueued++;
    o->queued_bytes += c->frame.len;
}

/* Takes r's chunks of which no byte went out off lane o (early ones too when `early`); a sealed
 * one has its place in the link's sequence and goes out whole. */
static void out_take_back(tcp_out_t *o, const mln_req_t *r, int early)
{
    for (tcp_chunk_t **pc = &o->head; *pc;) {
        tcp_chunk_t *c = *pc;
        if (c->req != r || c->sent > 0 || c->sealed ||
            (!early && c->frame.magic == TCP_EARLY_MAGIC)) {
            pc = &c->next;
            continue;
        }
        *pc = c->next;
        o->nqueued--;
        o->queued_bytes -= c->frame.len;
        free(c);
    }
    o->tail = NULL;
    for (tcp_chunk_t *c = o->head; c; c = c->next)
        o->tail = c;
}

/* Hands chunks of [r->next_off, end) to the lanes, least queued bytes first: to lanes with
 * fewer than `depth` chunks queued; 0 when one could not be had (no memory: retried). */
static int tcp_hand_out(tcp_peer_t *p, mln_req_t *r, uint64_t end, int depth, uint32_t magic)
{
    while (r->next_off < end) {
        const int pick = MLN_SCHED_PICK(tcp_out_t, p->out, mln_tcp_lanes_now(p), depth);
        tcp_out_t *best;
        tcp_chunk_t *c;
        uint64_t len;

        if (pick < 0)
            return 1;
        best = &p->out[pick];
        c = calloc(1, sizeof(*c));
        if (c == NULL)
            return 0;
        len = end - r->next_off < r->chunk ? end - r->next_off : r->chunk;
        c->req = r;
        c->off = r->next_off;
        c->frame = (tcp_frame_t){.magic = magic,
                                 .len = (uint32_t)len, /* chunk <= 1 GiB */
                                 .msg_id = r->msg_id,
                                 .offset = r->next_off};
        r->next_off += len;
        chunk_append(best, c);
    }
    return 1;
}

/* Hands chunks of `r` to the lanes with room (two queued at most). */
static void tcp_send_fill(mln_stripe_t *s, mln_req_t *r)
{
    tcp_peer_t *p = &s->tcp->peers[r->peer_world];

    if (p->state == PEER_UP)
        tcp_hand_out(p, r, r->accept, 2, TCP_FRAME_MAGIC);
}

/* Early chunks [0, bytes) of a send waiting for its CTS, queued at once (at most one per lane
 * by the engine's choice of bytes): all of them, or none while the lanes are not up. */
static uint64_t tcp_send_early(mln_stripe_t *s, mln_req_t *r, uint64_t bytes)
{
    tcp_peer_t *p = &s->tcp->peers[r->peer_world];

    if (p->state != PEER_UP || mln_tcp_lanes_now(p) == 0 || r->next_off != 0)
        return 0;
    if (!tcp_hand_out(p, r, bytes, INT32_MAX, TCP_EARLY_MAGIC)) { /* no memory: take back */
        for (int i = 0; i < p->nup; i++)
            out_take_back(&p->out[i], r, 1);
        r->next_off = 0;
        return 0;
    }
    return bytes;
}

/* The head chunk of lane o is sealed (src/link) as it starts out, so that the link's sequence
 * numbers follow the wire: its tags, and in mode aead its payload encrypted into o->seal.  A
 * fault (MLN_STRIPE_FAULT tamper, forge) spoils it after sealing, as an attacker on the path
 * would.  0 when there is no memory for o->seal. */
static int chunk_seal(mln_stripe_t *s, tcp_out_t *o, tcp_chunk_t *c)
{
    const mln_link_job_t *j = &s->tcp->job;
    const uint64_t len = c->frame.len;
    const void *in = c->req != NULL && len > 0 ? c->req->buf + c->off : NULL;

    c->own = len > 0 && (j->mode == MLN_LINK_AEAD || o->tamper == MLN_FAULT_TAMPER);
    if (c->own && o->seal_cap < len) {
        unsigned char *b = realloc(o->seal, (size_t)len);
        if (b == NULL)
            return 0;
        o->seal = b;
        o->seal_cap = (size_t)len;
    }
    mln_link_seal(&o->link, &c->frame, sizeof(c->frame), c->tag[0], in,
                  j->mode == MLN_LINK_AEAD ? o->seal : NULL, (size_t)len, c->tag[1]);
    if (c->own && j->mode != MLN_LINK_AEAD)
        memcpy(o->seal, in, (size_t)len);
    if (o->tamper == MLN_FAULT_TAMPER && len > 0) {
        o->seal[len / 2] ^= 0x10; /* one bit of the payload, on the wire only */
        o->tamper = MLN_FAULT_NONE;
    } else if (o->tamper == MLN_FAULT_FORGE) {
        c->frame.offset ^= 1ull << 40; /* one bit of the header */
        o->tamper = MLN_FAULT_NONE;
    }
    c->sealed = 1;
    return 1;
}

/* Payload bytes of a frame {head, len, total bytes on the wire} counted once `sent` of it went
 * out: those written, but the last one only when the whole frame is (see out_write). */
static uint64_t payload_out(uint64_t sent, uint64_t head, uint64_t len, uint64_t total)
{
    const uint64_t n = sent > head ? (sent - head < len ? sent - head : len) : 0;

    return n == len && sent < total ? len - 1 : n;
}

/* Writes what the socket takes; returns 1 when bytes moved, -1 when the lane failed. */
static int out_write(mln_stripe_t *s, int peer, tcp_out_t *o)
{
    const size_t ht = mln_link_head_tag(&s->tcp->job), bt = mln_link_body_tag(&s->tcp->job);
    int moved = 0;

    if (o->hold_until > 0 && mln_stripe_now() < o->hold_until)
        return 0; /* MLN_STRIPE_FAULT split */
    o->hold_until = 0;
    while (o->head) {
        tcp_chunk_t *c = o->head;
        const uint64_t len = c->frame.len, head = sizeof(c->frame) + ht;
        const uint64_t total = head + len + (len > 0 ? bt : 0);
        struct iovec iov[4];
        struct msghdr msg = {.msg_iov = iov};
        uint64_t skip = c->sent;
        ssize_t n;

        if (!c->sealed && !chunk_seal(s, o, c)) {
            MLN_WARN("tcp lane %d to world rank %d: no memory to seal a frame", o->lane, peer);
            return -1;
        }
        {
            const struct {
                const void *p;
                uint64_t n;
            } part[4] = {{&c->frame, sizeof(c->frame)},
                         {c->tag[0], ht},
                         {c->own ? (const void *)o->seal
                                 : (const void *)(c->req ? c->req->buf + c->off : NULL),
                          len},
                         {c->tag[1], len > 0 ? bt : 0}};
            /* MLN_STRIPE_FAULT split: this write stops where the frame's payload ends */
            const int split =
                o->tamper == MLN_FAULT_SPLIT && len > 0 && bt > 0 && c->sent < head + len;
            for (int k = 0; k < (split ? 3 : 4); k++) {
                if (skip >= part[k].n) {
                    skip -= part[k].n;
                    continue;
                }
                iov[msg.msg_iovlen++] =
                    (struct iovec){(char *)part[k].p + skip, (size_t)(part[k].n - skip)};
                skip = 0;
            }
        }
        n = sendmsg(o->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                return moved;
            MLN_WARN("tcp lane %d to world rank %d: %s", o->lane, peer, strerror(errno));
            return -1;
        }
        moved = 1;
        {
            /* payload bytes among those written: [head, head + len) of the frame, the last one
             * counted only with the frame's last byte (its payload tag): a send is done only
             * once every frame of it is out whole */
            const uint64_t a = c->sent, z = c->sent + (uint64_t)n;
            const uint64_t before = payload_out(a, head, len, total);
            const uint64_t after = payload_out(z, head, len, total);
            c->sent = z;
            if (c->req != NULL) {
                o->written += after - before;
                mln_stripe_req_progress(s, c->req, after - before);
            }
        }
        if (o->tamper == MLN_FAULT_SPLIT && len > 0 && bt > 0 && c->sent == head + len) {
            o->tamper = MLN_FAULT_NONE;
            o->hold_until = mln_stripe_now() + 0.2; /* the payload tag waits 0.2 s */
            return moved;
        }
        switch (mln_fault_lane_strikes(&s->fault, o->lane, o->written)) {
        case MLN_FAULT_RESET: {
            struct linger lg = {.l_onoff = 1, .l_linger = 0};
            MLN_WARN("MLN_STRIPE_FAULT: resetting tcp lane %d to world rank %d after %llu bytes",
                     o->lane, peer, (unsigned long long)o->written);
            setsockopt(o->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
            return -1;
        }
        case MLN_FAULT_MUTE:
            mln_tcp_mute(o, peer);
            break;
        case MLN_FAULT_SPLIT:
            MLN_WARN("MLN_STRIPE_FAULT: the next payload tag on tcp lane %d to world rank %d "
                     "goes out 0.2 s after its payload (after %llu bytes)",
                     o->lane, peer, (unsigned long long)o->written);
            o->tamper = MLN_FAULT_SPLIT;
            break;
        case MLN_FAULT_TAMPER:
        case MLN_FAULT_FORGE:
            MLN_WARN("MLN_STRIPE_FAULT: the next frame on tcp lane %d to world rank %d has one "
                     "bit of its %s flipped after sealing (after %llu bytes)",
                     o->lane, peer, s->fault.kind == MLN_FAULT_TAMPER ? "payload" : "header",
                     (unsigned long long)o->written);
            o->tamper = (int)s->fault.kind;
            break;
        default:
            break;
        }
        if (c->sent == total) {
            o->head = c->next;
            if (o->head == NULL)
                o->tail = NULL;
            o->nqueued--;
            o->queued_bytes -= c->frame.len;
            free(c);
        }
    }
    return moved;
}

/*
 * A send failed: its chunks not begun leave the queues, but for early ones (its receiver
 * counts on every early frame); a chunk half written is finished (the stream must stay whole;
 * the user's buffer is still ours until the request is DONE).  If any chunk of it was handed
 * out, every lane then carries an END frame for it.  Returns the number of END frames, which
 * the receiver waits for.
 */
static uint64_t tcp_send_abort(mln_stripe_t *s, mln_req_t *r)
{
    tcp_peer_t *p = &s->tcp->peers[r->peer_world];
    uint64_t ends = 0;

    if (p->state != PEER_UP || r->next_off == 0)
        return 0;
    for (int i = 0; i < p->nup; i++) { /* (auto may have used more lanes than it does now) */
        tcp_out_t *o = &p->out[i];
        tcp_chunk_t *end = calloc(1, sizeof(*end));
        out_take_back(o, r, 0);
        if (end == NULL) { /* the receiver cannot count this lane out: break the lanes */
            mln_tcp_out_lost(s, r->peer_world, MLN_ERR_NOMEM);
            return 0;
        }
        end->frame = (tcp_frame_t){.magic = TCP_END_MAGIC, .msg_id = r->msg_id};
        chunk_append(o, end);
        ends++;
    }
    return ends;
}

/* ---- receiving --------------------------------------------------------------------------- */

/* A frame header from in->src: where its payload goes (in->req and in->dst, or a stash entry
 * for an early frame whose header has not matched), after every check; 0 for a frame that does
 * not fit any message (the caller closes src's lanes), -1 when that was said already. */
static int frame_accept(mln_stripe_t *s, tcp_in_t *in, const tcp_frame_t *f)
{
    mln_req_t *r = mln_stripe_find_recv(s, in->src, f->msg_id);
    uint64_t index, lands;

    if (f->magic == TCP_END_MAGIC) { /* news for a failed message, or for one already gone */
        if (r != NULL && r->kind == MLN_LANE_TCP)
            r->ends++;
        in->state = IN_FRAME;
        return 1;
    }
    if (r == NULL && f->magic == TCP_EARLY_MAGIC) /* its header has not matched yet */
        return mln_tcp_stash_begin(s, in, f) ? 1 : -1;
    if (r == NULL)
        return 0;
    index = mln_tcp_frame_index(r, f->magic, f->offset, f->len);
    if (index == TCP_BAD_INDEX)
        return 0;
    r->got[index / 8] |= (uint8_t)(1u << (index % 8));
    lands = mln_tcp_frame_lands(r, f->offset, f->len);
    in->req = r;
    in->stash = NULL;
    in->early = f->magic == TCP_EARLY_MAGIC;
    in->dst = r->buf + f->offset;
    in->left = lands > 0 ? lands : f->len;
    in->skip = lands > 0 ? f->len - lands : 0;
    in->state = lands > 0 ? IN_PAYLOAD : IN_DISCARD; /* past a truncating receive's end */
    return 1;
}

/* The frame in hand is read whole: an early one counts for its receive, a stashed one goes to
 * its receive if that has matched meanwhile.  0 when that closed src's lanes (in is gone). */
static int frame_end(mln_stripe_t *s, tcp_in_t *in)
{
    tcp_stash_t *e = in->stash;
    const int src = in->src;

    if (in->req != NULL && in->early)
        in->req->early_left--;
    in->state = IN_FRAME;
    in->hgot = 0;
    in->req = NULL;
    in->stash = NULL;
    in->early = 0;
    if (e != NULL && !mln_tcp_stash_done(s, src, e)) {
        mln_tcp_in_lost(s, src, MLN_ERR_DATA);
        return 0;
    }
    return 1;
}

/* A frame failed the link's check: src's lanes are closed, its requests fail (MLN_ERR_DATA). */
static void frame_refused(mln_stripe_t *s, tcp_in_t *in, const tcp_frame_t *f, const char *what)
{
    MLN_ERROR("tcp: a frame from world rank %d on lane %d fails its %s check (MLN_LINK_SECURITY="
              "%s; message %llu, offset %llu): tampered or not from that rank; its lanes are "
              "closed",
              in->src, in->lane, what, mln_link_mode_name(s->tcp->job.mode),
              (unsigned long long)f->msg_id, (unsigned long long)f->offset);
    mln_tcp_in_lost(s, in->src, MLN_ERR_DATA);
}

/* A frame's header came whole (in->hb): checked by the link, then against its message
 * (frame_accept); a payload whose integrity the link checks is read whole into in->stage
 * first (IN_SEALED).  1 when in reads on, 0 when src's lanes were closed (in is gone). */
static int frame_head(mln_stripe_t *s, tcp_in_t *in)
{
    const mln_link_job_t *j = &s->tcp->job;
    tcp_frame_t f;
    int ok;

    memcpy(&f, in->hb, sizeof(f));
    in->hgot = 0;
    if (!mln_link_open_head(&in->link, in->hb, sizeof(f), in->hb + sizeof(f))) {
        frame_refused(s, in, &f, "header");
        return 0;
    }
    in->used = 1;
    ok = frame_accept(s, in, &f);
    if (ok <= 0) {
        if (ok == 0)
            MLN_ERROR("tcp: bad frame from world rank %d (message %llu, offset %llu, length %u): "
                      "its lanes are closed",
                      in->src, (unsigned long long)f.msg_id, (unsigned long long)f.offset, f.len);
        mln_tcp_in_lost(s, in->src, MLN_ERR_DATA);
        return 0;
    }
    if (f.len > 0 && mln_link_body_sealed(j) && in->state != IN_FRAME) {
        const size_t need = (size_t)f.len + mln_link_body_tag(j);
        if (in->stage_cap < need) {
            unsigned char *b = realloc(in->stage, need);
            if (b == NULL) {
                MLN_ERROR("tcp: no memory for a frame of %u bytes from world rank %d: its lanes "
                          "are closed",
                          f.len, in->src);
                mln_tcp_in_lost(s, in->src, MLN_ERR_NOMEM);
                return 0;
            }
            in->stage = b;
            in->stage_cap = need;
        }
        in->frame = f;
        in->lands = in->state == IN_PAYLOAD ? in->left : 0;
        in->left = need;
        in->skip = 0;
        in->state = IN_SEALED;
    }
    return 1;
}

/* A sealed payload came whole (in->stage): its tag checked (aead: decrypted) before any byte
 * of it goes on to its receive or stash entry.  1, or 0 when src's lanes were closed. */
static int sealed_done(mln_stripe_t *s, tcp_in_t *in)
{
    mln_req_t *r = in->req;
    const uint64_t len = in->frame.len;
    uint64_t landed = 0;

    if (!mln_link_open_body(&in->link, &in->frame, sizeof(in->frame), in->stage, (size_t)len,
                            in->stage + len)) {
        frame_refused(s, in, &in->frame, "payload");
        return 0;
    }
    if (in->lands > 0 && (r != NULL || in->stash != NULL)) {
        memcpy(in->dst, in->stage, (size_t)in->lands);
        landed = in->stash == NULL ? in->lands : 0;
    }
    if (!frame_end(s, in))
        return 0;
    if (r != NULL)
        mln_stripe_req_progress(s, r, landed);
    return 1;
}

/* Everything read and a frame just ended: the kernel acknowledges now what it would hold back
 * for up to 40 ms (a delayed ACK of a message's last segment).  The sender's auto times a lone
 * message to its last byte acknowledged (tcp_auto.c); a late ACK would hide that time. */
static void ack_now(int fd)
{
    const int one = 1;

    (void)setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
}

/* Reads from one in-lane; returns 1 when bytes moved, -1 when it must be dropped, 0 also
 * when src's lanes were closed (in is gone then). */
static int in_read(mln_stripe_t *s, tcp_in_t *in)
{
    uint64_t budget = TCP_READ_BUDGET;
    int moved = 0;

    while (budget > 0) {
        ssize_t n;
        if (in->state == IN_SEALED) {
            const size_t want = in->left < budget ? (size_t)in->left : (size_t)budget;
            const size_t at = (size_t)(in->frame.len + mln_link_body_tag(&s->tcp->job) - in->left);
            n = recv(in->fd, in->stage + at, want, MSG_DONTWAIT);
            if (n > 0) {
                moved = 1;
                budget -= (uint64_t)n;
                in->left -= (uint64_t)n;
                if (in->left == 0 && !sealed_done(s, in))
                    return 0; /* in was freed */
                continue;
            }
        } else if (in->state == IN_PAYLOAD || in->state == IN_DISCARD) {
            char sink[4096];
            size_t want = in->left < budget ? (size_t)in->left : (size_t)budget;
            char *into = in->state == IN_PAYLOAD ? in->dst : sink;
            if (in->state == IN_DISCARD && want > sizeof(sink))
                want = sizeof(sink);
            n = recv(in->fd, into, want, MSG_DONTWAIT);
            if (n > 0) {
                mln_req_t *r = in->req;
                const uint64_t landed =
                    in->state == IN_PAYLOAD && in->stash == NULL ? (uint64_t)n : 0;
                int ended = 0;
                moved = 1;
                budget -= (uint64_t)n;
                in->left -= (uint64_t)n;
                if (in->state == IN_PAYLOAD)
                    in->dst += n;
                if (in->left == 0 && in->state == IN_PAYLOAD && in->skip > 0) {
                    in->state = IN_DISCARD; /* the rest of an early chunk the receive cuts */
                    in->left = in->skip;
                    in->skip = 0;
                } else if (in->left == 0) {
                    ended = 1;
                    if (!frame_end(s, in))
                        return 0; /* in was freed */
                }
                if (r != NULL && (landed > 0 || ended))
                    mln_stripe_req_progress(s, r, landed);
                continue;
            }
        } else {
            const size_t want = in->state == IN_HELLO      ? MLN_LINK_HELLO_BYTES
                                : in->state == IN_RESPONSE ? MLN_LINK_RESPONSE_BYTES
                                                           : mln_tcp_wire_head(s->tcp);
            n = recv(in->fd, in->hb + in->hgot, want - in->hgot, MSG_DONTWAIT);
            if (n > 0) {
                moved = 1;
                in->hgot += (size_t)n;
                if (in->hgot < want)
                    continue;
                if (in->state == IN_HELLO || in->state == IN_RESPONSE) {
                    const int ok = in->state == IN_HELLO ? mln_tcp_hello_check(s, in)
                                                         : mln_tcp_response_check(s, in);
                    if (!ok)
                        return -1;
                    in->hgot = 0;
                    continue;
                }
                if (!frame_head(s, in))
                    return 0; /* in was freed */
                continue;
            }
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            if (moved && errno != EINTR && in->state == IN_FRAME && in->hgot == 0)
                ack_now(in->fd);
            return moved;
        }
        /* end of stream or error */
        if (in->state == IN_HELLO || in->state == IN_RESPONSE || in->src < 0)
            return -1; /* never a lane (or one src gave up before using it) */
        if (n == 0 && !in->used && in->state == IN_FRAME && in->hgot == 0) {
            MLN_DEBUG("tcp: an unused lane from world rank %d closed", in->src);
            return -1; /* no news about any message */
        }
        MLN_WARN("tcp: lane %d from world rank %d failed: %s", in->lane, in->src,
                 n == 0 ? "closed by the peer" : strerror(errno));
        mln_tcp_in_lost(s, in->src, n < 0 && errno == ETIMEDOUT ? MLN_ERR_TIMEOUT : MLN_ERR_PEER);
        return 0; /* in was freed */
    }
    return moved;
}

/* ---- progress ---------------------------------------------------------------------------- */

/*
 * Each lane's TCP_NOTSENT_LOWAT: MLN_STRIPE_NOTSENT split over the lanes that take the peer's
 * chunks (at least TCP_NOTSENT_MIN each), set again when their count changes.  Bytes a lane's
 * kernel holds unsent are its alone: at a message's end the others wait for them, so what the
 * lanes hold together, not each, must stay small (32 lanes of 256 KiB on wan-lossy, each at ~30
 * Mbit/s: 65 ms of tail; the 10 MiB stream over tcp:32 went from 680-810 Mbit/s to 830-870 with
 * 16 KiB a lane).  A lane at a larger share of the link needs more to stay busy between two
 * passes of the engine, and has it: the fewer the lanes, the larger their share.  The lanes that
 * take chunks are a lone message's where auto gave it a count of its own (a ping-pong's reply on 32
 * lanes split 256 KiB over the streaming level's 4 before: 64 KiB a lane, half the message on the
 * first lanes to be written, and 1 MiB took 26-40 ms on wan-lossy where `tcp:32` takes 20-25).
 */
static void lanes_notsent(const mln_stripe_t *s, tcp_peer_t *p)
{
    const int now = mln_tcp_lanes_now(p);
    const int value = mln_tcp_notsent_share(s, now);

    if (value == 0 || (p->notsent_lanes == now && p->notsent_nup == p->nup))
        return;
    for (int i = 0; i < p->nup; i++)
        mln_tcp_notsent_set(p->out[i].fd, value);
    p->notsent_lanes = now;
    p->notsent_nup = p->nup;
}

/* 1 while a tcp lane has work: a striped message in flight over tcp, or lanes being opened. */
static int tcp_busy(const mln_stripe_t *s)
{
    for (const mln_req_t *r = s->active; r; r = r->next)
        if (r->kind == MLN_LANE_TCP &&
            (r->state == MLN_REQ_DATA || r->state == MLN_REQ_CTS || r->state == MLN_REQ_ABORT))
            return 1;
    return 0;
}

/* Idle: no system call at all on most passes, so that plain MPI messages wait in a loop as
 * lean as MPI's own; every TCP_HOUSEKEEPING_S the listener is drained and hellos read, so
 * that connections nobody finishes cannot pile up. */
static void tcp_housekeeping(mln_stripe_t *s)
{
    mln_tcp_state_t *t = s->tcp;
    const double now = mln_stripe_now();

    if (now - t->housekept < TCP_HOUSEKEEPING_S)
        return;
    t->housekept = now;
    mln_tcp_accept(s);
    for (int i = t->nin - 1; i >= 0; i--)
        if ((t->ins[i]->state == IN_HELLO || t->ins[i]->state == IN_RESPONSE) &&
            in_read(s, t->ins[i]) < 0)
            mln_tcp_in_drop(t, i);
    mln_tcp_pending_expire(s, now);
}

/* Is the out-lane at fd ended by its peer?  (recv == 0: an orderly end; errno is not set
 * then, so it must not be looked at.) */
static int out_ended(int fd)
{
    char b;
    const ssize_t n = recv(fd, &b, 1, MSG_DONTWAIT);

    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* The out-lane with this fd, or NULL. */
static tcp_out_t *out_of(mln_tcp_state_t *t, int wsize, int fd, int *peer)
{
    for (int p = 0; p < wsize; p++)
        for (int i = 0; i < t->peers[p].nout; i++)
            if (t->peers[p].out[i].fd == fd) {
                *peer = p;
                return &t->peers[p].out[i];
            }
    return NULL;
}

static int tcp_progress(mln_stripe_t *s, int timeout_us)
{
    mln_tcp_state_t *t = s->tcp;
    int n = 0, moved = 0, need = t->nlfd + t->nin;
    const int listen = mln_stripe_now() >= t->accept_paused;
    struct timespec ts = {timeout_us / 1000000, (long)(timeout_us % 1000000) * 1000L};

    if (!tcp_busy(s)) {
        tcp_housekeeping(s);
        mln_tcp_auto_idle(s, mln_stripe_now());
        return 0;
    }
    for (int p = 0; p < s->wsize; p++)
        need += t->peers[p].nout;
    if (need > t->cap_pfds) {
        struct pollfd *pf = realloc(t->pfds, (size_t)need * sizeof(*pf));
        if (pf == NULL)
            return 0;
        t->pfds = pf;
        t->cap_pfds = need;
    }
    /* Write first: queued chunks go out without waiting for poll. */
    for (int p = 0; p < s->wsize; p++) {
        tcp_peer_t *peer = &t->peers[p];
        if (peer->state == PEER_UP)
            lanes_notsent(s, peer);
        for (int i = 0; peer->state == PEER_UP && i < peer->nout; i++) {
            const int rc = peer->out[i].head ? out_write(s, p, &peer->out[i]) : 0;
            if (rc < 0) {
                mln_tcp_out_lost(s, p, MLN_ERR_PEER);
                moved = 1;
                break;
            }
            moved |= rc;
        }
    }
    for (int k = 0; k < t->nlfd; k++)
        t->pfds[n++] = (struct pollfd){.fd = listen ? t->lfds[k] : -1, .events = POLLIN};
    for (int i = 0; i < t->nin; i++)
        t->pfds[n++] = (struct pollfd){.fd = t->ins[i]->fd, .events = POLLIN};
    for (int p = 0; p < s->wsize; p++)
        for (int i = 0; i < t->peers[p].nout; i++) {
            const tcp_out_t *o = &t->peers[p].out[i];
            t->pfds[n++] =
                (struct pollfd){.fd = o->fd,
                                .events = (short)(o->connected    ? POLLIN | (o->head ? POLLOUT : 0)
                                                  : o->hello_sent ? POLLIN
                                                                  : POLLOUT)};
        }
    if (ppoll(t->pfds, (nfds_t)n, &ts, NULL) > 0) {
        const int nl = t->nlfd, nin = t->nin;
        for (int k = 0; k < nl; k++)
            if (t->pfds[k].revents & POLLIN) {
                mln_tcp_accept(s); /* (it drains every listener) */
                break;
            }
        /* Readable in-lanes (index nl + i of pfds is ins[i] as they were at poll time). */
        for (int i = nin - 1; i >= 0; i--) {
            if (nl + i >= n || !(t->pfds[nl + i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            if (i >= t->nin || t->pfds[nl + i].fd != t->ins[i]->fd)
                continue; /* the list changed under us (a peer failed): next pass */
            const int rc = in_read(s, t->ins[i]);
            if (rc < 0)
                mln_tcp_in_drop(t, i);
            moved |= rc != 0;
        }
        moved |= mln_tcp_connect_progress(s, t->pfds, n);
        /* Out-lanes: writable, or readable = the peer ended or reset it. */
        for (int k = nl + nin; k < n; k++) {
            int p = -1;
            tcp_out_t *o;
            if (!t->pfds[k].revents || t->pfds[k].fd < 0)
                continue;
            o = out_of(t, s->wsize, t->pfds[k].fd, &p);
            if (o == NULL || !o->connected || t->peers[p].state != PEER_UP)
                continue;
            if ((t->pfds[k].revents & (POLLIN | POLLHUP | POLLERR)) && out_ended(o->fd)) {
                MLN_DEBUG("tcp: lane %d to world rank %d ended by the peer", o->lane, p);
                mln_tcp_out_lost(s, p, errno == ETIMEDOUT ? MLN_ERR_TIMEOUT : MLN_ERR_PEER);
                moved = 1;
                continue;
            }
            if (t->pfds[k].revents & POLLOUT) {
                const int rc = out_write(s, p, o);
                if (rc < 0)
                    mln_tcp_out_lost(s, p, MLN_ERR_PEER);
                moved |= rc != 0;
            }
        }
    } else {
        moved |= mln_tcp_connect_progress(s, t->pfds, 0); /* deadlines */
    }
    mln_tcp_evidence(s, mln_stripe_now());
    mln_tcp_auto_step(s, mln_stripe_now());
    mln_tcp_pending_expire(s, mln_stripe_now());
    return moved;
}

/* ---- the engine's hooks ------------------------------------------------------------------ */

static mln_status_t tcp_recv_post(mln_stripe_t *s, mln_req_t *r)
{
    (void)s;
    return mln_tcp_got_alloc(r); /* (one with early frames has it since its header came) */
}

/* Quiet: a send has no chunk left on a lane (a half-written one is finished); a receive has
 * every early frame, and all its bytes, or an END from every lane the sender named, or sent
 * no CTS (only early frames come then); or no lanes from src are left. */
static int tcp_quiet(mln_stripe_t *s, mln_req_t *r)
{
    mln_tcp_state_t *t = s->tcp;

    if (r->is_send) {
        const tcp_peer_t *p = &t->peers[r->peer_world];
        for (int i = 0; i < p->nout; i++)
            for (const tcp_chunk_t *c = p->out[i].head; c; c = c->next)
                if (c->req == r)
                    return 0;
        return 1;
    }
    if (t->in_broken[r->peer_world])
        return 1;
    if (r->early_left > 0) /* each early frame comes, whatever happened */
        return 0;
    return !r->cts || r->bytes_done >= r->accept ||
           (r->peer_count_known && r->peer_count != MLN_COUNT_UNKNOWN && r->ends >= r->peer_count);
}

/* A request goes away: no lane may keep pointing into it. */
static void tcp_req_free(mln_stripe_t *s, mln_req_t *r)
{
    mln_tcp_state_t *t = s->tcp;

    if (t == NULL || r->kind != MLN_LANE_TCP || r->peer_world < 0)
        return;
    if (!r->is_send) {
        for (int i = 0; i < t->nin; i++)
            if (t->ins[i]->req == r && t->ins[i]->state == IN_SEALED) {
                t->ins[i]->req = NULL; /* read on to check its tag; nothing lands */
                t->ins[i]->lands = 0;
            } else if (t->ins[i]->req == r) {
                tcp_in_t *in = t->ins[i];
                in->req = NULL;
                in->left += in->skip;
                in->skip = 0;
                in->state = IN_DISCARD; /* the rest of that frame is dropped */
            }
        free(r->got);
        r->got = NULL;
        return;
    }
    /* only mln_finalize frees a send with chunks queued (never when it is waited for): a
     * half-written frame breaks the stream, so those lanes go */
    tcp_peer_t *p = &t->peers[r->peer_world];
    for (int i = 0; i < p->nout; i++)
        for (const tcp_chunk_t *c = p->out[i].head; c; c = c->next)
            if (c->req == r) {
                MLN_WARN("tcp: a striped send to world rank %d (message %llu) went away with "
                         "frames of it still queued: its lanes are closed",
                         r->peer_world, (unsigned long long)r->msg_id);
                mln_tcp_out_lanes_close(p);
                p->state = PEER_FAILED;
                s->tcp_failed[r->peer_world] = 1;
                return;
            }
}

const mln_lane_ops_t mln_lane_tcp_ops = {
    .name = "tcp",
    .kind = MLN_LANE_TCP,
    .open = mln_tcp_open,
    .ready = mln_tcp_ready,
    .recv_post = tcp_recv_post,
    .send_fill = tcp_send_fill,
    .progress = tcp_progress,
    .send_abort = tcp_send_abort,
    .quiet = tcp_quiet,
    .req_free = tcp_req_free,
    .close = mln_tcp_close,
    .send_early = tcp_send_early,
    .recv_early = mln_tcp_recv_early,
};
