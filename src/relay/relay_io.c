/*
 * relay_io.c - one relay connection (relay_int.h), either end, without blocking: the two-way
 * handshake as a step function with a deadline, frames read and opened as they arrive, and a
 * queue of frames sealed as each starts out and written with one sendmsg for many.  No MPI:
 * ranks (relay_rank.c) and gateways (gateway.c) share it.
 *
 * Handshake: the link layer's links are one-way, so a connection makes two, the second in the
 * other direction, interleaved so that it costs two round trips, not three (C the connector,
 * L the listener; hello 72 bytes, challenge 72, response 40):
 *
 *   C -> L  hello1                          (C's link: C seals, L opens)
 *   L -> C  challenge1 | hello2             (L's link: L seals, C opens)
 *   C -> L  response1  | challenge2         C's link up at C
 *   L -> C  response2                       both links up at L; at C once this arrives
 *
 * Mode none: C -> L hello1, L -> C hello2, and both are up (nothing is proven).  Each end
 * reads exactly the bytes of its step, so frames that follow stay in the socket.
 *
 * Frames: [header 56][head tag][payload len][body tag when len > 0] (tags per the job's
 * mode).  The reader authenticates the header (head tag) before it parses it against the
 * link's scope, and reads the payload only once the header allows it; it reads ahead into a
 * buffer of IBUF_BYTES (many small frames per recv), large payloads straight into c->rbuf.
 */
#include "relay_int.h"

#include "mln_core.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define IBUF_BYTES (64u << 10) /* read-ahead buffer */
#define DIRECT_MIN (16u << 10) /* payload left from this size on: straight into c->rbuf */
#define RBUF_MIN (64u << 10)   /* the payload buffer's smallest size */
#define WRITE_IOV 64           /* iovecs per sendmsg (4 per frame) */

/* Handshake steps: what the step waits for before its processing. */
enum {
    HS_C_CHALLENGE = 1, /* connector: challenge1 | hello2 (none: hello2) */
    HS_C_RESPONSE,      /* connector: response2 */
    HS_L_HELLO,         /* listener: hello1 */
    HS_L_RESPONSE,      /* listener: response1 | challenge2 */
    HS_L_DONE           /* listener: its last bytes are out */
};

double mln_relay_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void fail_queue(mln_relay_conn_t *c);

/* The connection is dead: why, and every queued frame fails.  The socket stays open. */
static void die(mln_relay_conn_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void die(mln_relay_conn_t *c, const char *fmt, ...)
{
    va_list ap;

    if (c->state == MLN_RELAY_CONN_DEAD)
        return;
    c->state = MLN_RELAY_CONN_DEAD;
    va_start(ap, fmt);
    vsnprintf(c->why, sizeof(c->why), fmt, ap);
    va_end(ap);
    fail_queue(c);
}

/* ---- handshake ----------------------------------------------------------------------------- */

void mln_relay_conn_connect(mln_relay_conn_t *c, int fd, const mln_link_job_t *job, int endpoints,
                            int me, int peer, int trunk, int trunks, double timeout_s)
{
    const mln_link_hello_t h = {
        .lane = (uint32_t)trunk, .nlanes = (uint32_t)trunks, .src = me, .dst = peer};

    *c = (mln_relay_conn_t){.fd = fd,
                            .state = MLN_RELAY_CONN_HANDSHAKE,
                            .job = job,
                            .me = me,
                            .peer = peer,
                            .trunk = trunk,
                            .trunks = trunks,
                            .is_connector = 1,
                            .endpoints = endpoints,
                            .hs_step = HS_C_CHALLENGE,
                            .hs_len = MLN_LINK_HELLO_BYTES,
                            .hs_want = job->mode == MLN_LINK_NONE ? MLN_LINK_HELLO_BYTES
                                                                  : MLN_RELAY_HS_BYTES,
                            .hs_deadline = mln_relay_now() + timeout_s};
    if (mln_link_hello_make(&c->tx, job, &h, c->hs_out) != MLN_OK)
        die(c, "no hello could be made");
}

void mln_relay_conn_accept(mln_relay_conn_t *c, int fd, const mln_link_job_t *job, int endpoints,
                           int me, double timeout_s)
{
    *c = (mln_relay_conn_t){.fd = fd,
                            .state = MLN_RELAY_CONN_HANDSHAKE,
                            .job = job,
                            .me = me,
                            .peer = -1,
                            .trunk = -1,
                            .endpoints = endpoints,
                            .hs_step = HS_L_HELLO,
                            .hs_want = MLN_LINK_HELLO_BYTES,
                            .hs_deadline = mln_relay_now() + timeout_s};
}

/* The next step: send hs_out[0, len), then wait for `want` bytes. */
static void hs_next(mln_relay_conn_t *c, int step, size_t len, size_t want)
{
    c->hs_step = step;
    c->hs_len = len;
    c->hs_sent = 0;
    c->hs_want = want;
    c->hs_got = 0;
}

/* Connector: the listener's hello (the second link's) names this connection; 1 or 0. */
static int hello_back_ok(mln_relay_conn_t *c, const unsigned char *in)
{
    mln_link_hello_t h;
    const char *why = NULL;

    if (!mln_link_hello_parse(c->job, in, MLN_LINK_HELLO_BYTES, c->endpoints, c->me, &h, &why)) {
        die(c, "the peer's hello is refused: %s", why);
        return 0;
    }
    if (h.src != c->peer || (int)h.lane != c->trunk || (int)h.nlanes != c->trunks) {
        die(c, "the peer's hello names endpoint %d trunk %u of %u, not %d trunk %d of %d", h.src,
            h.lane, h.nlanes, c->peer, c->trunk, c->trunks);
        return 0;
    }
    return 1;
}

/* Processes a step whose bytes are all in and out: 1 up, 0 go on, -1 failed. */
static int hs_process(mln_relay_conn_t *c)
{
    const int none = c->job->mode == MLN_LINK_NONE;
    mln_link_hello_t h;
    const char *why = NULL;

    switch (c->hs_step) {
    case HS_C_CHALLENGE:
        if (none) {
            if (!hello_back_ok(c, c->hs_buf))
                return -1;
            mln_link_plain(&c->tx, c->job);
            mln_link_plain(&c->rx, c->job);
            break;
        }
        if (!mln_link_challenge_check(&c->tx, c->hs_buf, MLN_LINK_CHALLENGE_BYTES, c->hs_out)) {
            die(c, "the peer does not prove the run's secret (another MLN_GRID_SECRET?)");
            return -1;
        }
        if (!hello_back_ok(c, c->hs_buf + MLN_LINK_CHALLENGE_BYTES))
            return -1;
        if (mln_link_challenge_make(&c->rx, c->job, c->hs_buf + MLN_LINK_CHALLENGE_BYTES,
                                    c->hs_out + MLN_LINK_RESPONSE_BYTES) != MLN_OK) {
            die(c, "no challenge could be made");
            return -1;
        }
        hs_next(c, HS_C_RESPONSE, MLN_LINK_RESPONSE_BYTES + MLN_LINK_CHALLENGE_BYTES,
                MLN_LINK_RESPONSE_BYTES);
        return 0;
    case HS_C_RESPONSE:
        if (!mln_link_response_check(&c->rx, c->hs_buf, MLN_LINK_RESPONSE_BYTES)) {
            die(c, "the peer's response does not prove the run's secret");
            return -1;
        }
        break;
    case HS_L_HELLO:
        if (!mln_link_hello_parse(c->job, c->hs_buf, MLN_LINK_HELLO_BYTES, c->endpoints, c->me, &h,
                                  &why) ||
            h.src == c->me) {
            die(c, "a hello refused: %s", why ? why : "from this endpoint itself");
            return -1;
        }
        c->peer = h.src;
        c->trunk = (int)h.lane;
        c->trunks = (int)h.nlanes;
        {
            const mln_link_hello_t back = {
                .lane = h.lane, .nlanes = h.nlanes, .src = c->me, .dst = h.src};
            const size_t at = none ? 0 : MLN_LINK_CHALLENGE_BYTES;
            if ((!none &&
                 mln_link_challenge_make(&c->rx, c->job, c->hs_buf, c->hs_out) != MLN_OK) ||
                mln_link_hello_make(&c->tx, c->job, &back, c->hs_out + at) != MLN_OK) {
                die(c, "no challenge or hello could be made");
                return -1;
            }
        }
        if (none) {
            mln_link_plain(&c->rx, c->job);
            mln_link_plain(&c->tx, c->job);
            hs_next(c, HS_L_DONE, MLN_LINK_HELLO_BYTES, 0);
        } else {
            hs_next(c, HS_L_RESPONSE, MLN_RELAY_HS_BYTES,
                    MLN_LINK_RESPONSE_BYTES + MLN_LINK_CHALLENGE_BYTES);
        }
        return 0;
    case HS_L_RESPONSE:
        if (!mln_link_response_check(&c->rx, c->hs_buf, MLN_LINK_RESPONSE_BYTES)) {
            die(c, "endpoint %d does not prove the run's secret (another MLN_GRID_SECRET?)",
                c->peer);
            return -1;
        }
        if (!mln_link_challenge_check(&c->tx, c->hs_buf + MLN_LINK_RESPONSE_BYTES,
                                      MLN_LINK_CHALLENGE_BYTES, c->hs_out)) {
            die(c, "endpoint %d's challenge is not of this run", c->peer);
            return -1;
        }
        hs_next(c, HS_L_DONE, MLN_LINK_RESPONSE_BYTES, 0);
        return 0;
    case HS_L_DONE:
        break;
    default:
        die(c, "handshake in no known step");
        return -1;
    }
    c->state = MLN_RELAY_CONN_UP;
    memset(c->hs_buf, 0, sizeof(c->hs_buf));
    memset(c->hs_out, 0, sizeof(c->hs_out));
    return 1;
}

/* Why a socket call failed, for c->why. */
static const char *sock_error(int err)
{
    return err == ECONNRESET ? "connection reset by peer" : strerror(err);
}

int mln_relay_conn_handshake(mln_relay_conn_t *c)
{
    if (c->state == MLN_RELAY_CONN_UP)
        return 1;
    if (c->state != MLN_RELAY_CONN_HANDSHAKE)
        return -1;
    for (;;) {
        if (c->hs_sent < c->hs_len) {
            const ssize_t n = send(c->fd, c->hs_out + c->hs_sent, c->hs_len - c->hs_sent,
                                   MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                break;
            if (n < 0) {
                die(c, "%s%s", c->hs_connected ? "" : "cannot connect: ", sock_error(errno));
                return -1;
            }
            c->hs_sent += (size_t)n;
            c->hs_connected = 1;
            continue;
        }
        if (c->hs_got < c->hs_want) {
            const ssize_t n =
                recv(c->fd, c->hs_buf + c->hs_got, c->hs_want - c->hs_got, MSG_DONTWAIT);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                break;
            if (n <= 0) {
                die(c, "%s during the handshake (a wrong secret, mode or endpoint?)",
                    n == 0 ? "closed by the peer" : sock_error(errno));
                return -1;
            }
            c->hs_got += (size_t)n;
            continue;
        }
        const int r = hs_process(c);
        if (r != 0)
            return r;
    }
    if (mln_relay_now() > c->hs_deadline) {
        die(c, "no handshake within its time (%s)",
            c->hs_connected ? "the peer stalls" : "not connected");
        return -1;
    }
    return 0;
}

short mln_relay_conn_events(const mln_relay_conn_t *c)
{
    switch (c->state) {
    case MLN_RELAY_CONN_HANDSHAKE:
        return c->hs_sent < c->hs_len ? POLLOUT : POLLIN;
    case MLN_RELAY_CONN_UP:
        return (short)(POLLIN | (c->head != NULL ? POLLOUT : 0));
    default:
        return 0;
    }
}

/* ---- reading ------------------------------------------------------------------------------- */

/* Moves up to want - *got bytes from the read-ahead buffer to dst + *got. */
static void take(mln_relay_conn_t *c, unsigned char *dst, size_t want, size_t *got)
{
    size_t k = c->ibuf_len - c->ibuf_pos;

    if (k > want - *got)
        k = want - *got;
    if (k == 0)
        return;
    memcpy(dst + *got, c->ibuf + c->ibuf_pos, k);
    c->ibuf_pos += k;
    *got += k;
}

/* The header and its tag are in: open and parse them, make room for the payload; 0 dead. */
static int head_in(mln_relay_conn_t *c)
{
    const char *why = NULL;

    if (!mln_link_open_head(&c->rx, c->rhead, MLN_RELAY_HDR_BYTES,
                            c->rhead + MLN_RELAY_HDR_BYTES)) {
        die(c, "a frame that fails its header's tag (forged, replayed or corrupt)");
        return 0;
    }
    if (!mln_relay_hdr_parse(c->rhead, MLN_RELAY_HDR_BYTES, &c->scope, &c->rcur, &why)) {
        die(c, "a malformed frame: %s", why);
        return 0;
    }
    if (c->rcur.len > c->rbuf_cap) {
        const size_t cap = c->rcur.len < RBUF_MIN ? RBUF_MIN : c->rcur.len;
        free(c->rbuf);
        c->rbuf = malloc(cap);
        c->rbuf_cap = c->rbuf ? cap : 0;
        if (c->rbuf == NULL) {
            die(c, "out of memory for a frame of %u bytes", (unsigned)c->rcur.len);
            return 0;
        }
    }
    c->rhave_head = 1;
    c->rbuf_got = 0;
    c->rtag_got = 0;
    return 1;
}

/* Takes what the read-ahead buffer has towards the frame: 1 whole, 0 more needed, -1 dead. */
static int assemble(mln_relay_conn_t *c)
{
    const size_t hl = MLN_RELAY_HDR_BYTES + mln_link_head_tag(c->job);
    const size_t bt = mln_link_body_tag(c->job);

    if (!c->rhave_head) {
        take(c, c->rhead, hl, &c->rhead_got);
        if (c->rhead_got < hl)
            return 0;
        if (!head_in(c))
            return -1;
    }
    take(c, c->rbuf, c->rcur.len, &c->rbuf_got);
    if (c->rbuf_got < c->rcur.len)
        return 0;
    if (c->rcur.len > 0) {
        take(c, c->rtag, bt, &c->rtag_got);
        if (c->rtag_got < bt)
            return 0;
        if (!mln_link_open_body(&c->rx, c->rhead, MLN_RELAY_HDR_BYTES, c->rbuf, c->rcur.len,
                                c->rtag)) {
            die(c, "a frame that fails its payload's tag (forged or corrupt)");
            return -1;
        }
    }
    c->rhave_head = 0;
    c->rhead_got = 0;
    c->frames_in++;
    c->bytes_in += c->rcur.len;
    return 1;
}

int mln_relay_conn_read(mln_relay_conn_t *c, mln_relay_hdr_t *h, const unsigned char **payload)
{
    if (c->state != MLN_RELAY_CONN_UP)
        return c->state == MLN_RELAY_CONN_DEAD ? -1 : 0;
    if (c->ibuf == NULL && (c->ibuf = malloc(IBUF_BYTES)) == NULL) {
        die(c, "out of memory for its read buffer");
        return -1;
    }
    for (;;) {
        const int r = assemble(c);
        unsigned char *dst = c->ibuf;
        size_t room = IBUF_BYTES;
        ssize_t n;

        if (r < 0)
            return -1;
        if (r > 0) {
            *h = c->rcur;
            *payload = c->rbuf;
            return 1;
        }
        /* the read-ahead buffer is empty: refill it, or read a large payload in place */
        c->ibuf_pos = c->ibuf_len = 0;
        if (c->rhave_head && c->rcur.len - c->rbuf_got >= DIRECT_MIN) {
            dst = c->rbuf + c->rbuf_got;
            room = c->rcur.len - c->rbuf_got;
        }
        n = recv(c->fd, dst, room, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (n == 0) {
            die(c, "%s",
                c->rhave_head || c->rhead_got ? "closed by the peer in the middle of a frame"
                                              : "closed by the peer");
            return -1;
        }
        if (n < 0) {
            die(c, "%s", sock_error(errno));
            return -1;
        }
        if (dst == c->ibuf)
            c->ibuf_len = (size_t)n;
        else
            c->rbuf_got += (size_t)n;
    }
}

/* ---- writing ------------------------------------------------------------------------------- */

static size_t frame_bytes(const mln_relay_conn_t *c, const mln_relay_oframe_t *f)
{
    return MLN_RELAY_HDR_BYTES + mln_link_head_tag(c->job) + f->h.len +
           (f->h.len > 0 ? mln_link_body_tag(c->job) : 0);
}

/* The bytes of f's payload as they go on the wire. */
static const unsigned char *frame_payload(const mln_relay_oframe_t *f)
{
    return f->sealed != NULL ? f->sealed : f->payload;
}

/* Frees what the frame owns and tells its owner (last: it may free f). */
static void frame_done(mln_relay_oframe_t *f, int ok)
{
    void (*done)(void *, int) = f->done;
    void *cookie = f->cookie;

    if (f->sealed != f->own)
        free(f->sealed);
    free(f->own);
    f->sealed = NULL;
    f->own = NULL;
    f->payload = NULL;
    if (done != NULL)
        done(cookie, ok);
}

static mln_relay_oframe_t *pop(mln_relay_conn_t *c)
{
    mln_relay_oframe_t *f = c->head;

    c->head = f->next;
    if (c->head == NULL)
        c->tail = NULL;
    c->nqueued--;
    c->queued_bytes -= f->h.len;
    return f;
}

static void fail_queue(mln_relay_conn_t *c)
{
    while (c->head != NULL)
        frame_done(pop(c), 0);
}

/* Seals f with the tx link: its place in the link's sequence is now. 0: no memory. */
static int seal(mln_relay_conn_t *c, mln_relay_oframe_t *f)
{
    unsigned char *out = NULL;

    mln_relay_hdr_encode(&f->h, f->wire);
    if (c->job->mode == MLN_LINK_AEAD && f->h.len > 0) {
        if (f->own != NULL && f->own == f->payload) {
            out = f->own; /* ours: encrypted in place */
        } else {
            out = malloc(f->h.len);
            if (out == NULL)
                return 0;
        }
        f->sealed = out;
    }
    mln_link_seal(&c->tx, f->wire, MLN_RELAY_HDR_BYTES, f->tag[0], f->payload, out, f->h.len,
                  f->tag[1]);
    f->is_sealed = 1;
    return 1;
}

void mln_relay_conn_queue(mln_relay_conn_t *c, mln_relay_oframe_t *f)
{
    f->next = NULL;
    f->sent = 0;
    f->is_sealed = 0;
    f->sealed = NULL;
    if (c->state == MLN_RELAY_CONN_DEAD) {
        frame_done(f, 0);
        return;
    }
    if (c->tail)
        c->tail->next = f;
    else
        c->head = f;
    c->tail = f;
    c->nqueued++;
    c->queued_bytes += f->h.len;
}

/* Adds the segment [p, p + n) less the first *skip bytes of it to iov. */
static void seg(struct iovec *iov, int *niov, const void *p, size_t n, size_t *skip)
{
    if (*skip >= n) {
        *skip -= n;
        return;
    }
    iov[*niov].iov_base = (unsigned char *)(uintptr_t)p + *skip;
    iov[*niov].iov_len = n - *skip;
    (*niov)++;
    *skip = 0;
}

int mln_relay_conn_write(mln_relay_conn_t *c)
{
    const size_t ht = mln_link_head_tag(c->job), bt = mln_link_body_tag(c->job);
    int moved = 0;

    if (c->state != MLN_RELAY_CONN_UP)
        return c->state == MLN_RELAY_CONN_DEAD ? -1 : 0;
    while (c->head != NULL) {
        struct iovec iov[WRITE_IOV];
        struct msghdr msg = {.msg_iov = iov};
        int niov = 0;
        size_t want = 0;
        ssize_t n;

        for (mln_relay_oframe_t *f = c->head; f != NULL && niov + 4 <= WRITE_IOV; f = f->next) {
            size_t skip = f->sent;
            if (!f->is_sealed && !seal(c, f)) {
                die(c, "out of memory to seal a frame of %u bytes", (unsigned)f->h.len);
                return -1;
            }
            seg(iov, &niov, f->wire, MLN_RELAY_HDR_BYTES, &skip);
            seg(iov, &niov, f->tag[0], ht, &skip);
            if (f->h.len > 0) {
                seg(iov, &niov, frame_payload(f), f->h.len, &skip);
                seg(iov, &niov, f->tag[1], bt, &skip);
            }
            want += frame_bytes(c, f) - f->sent;
        }
        msg.msg_iovlen = (size_t)niov;
        n = sendmsg(c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (n < 0) {
            die(c, "%s", sock_error(errno));
            return -1;
        }
        moved = 1;
        for (size_t left = (size_t)n; left > 0 && c->head != NULL;) {
            mln_relay_oframe_t *f = c->head;
            const size_t rest = frame_bytes(c, f) - f->sent;
            if (left < rest) {
                f->sent += left;
                break;
            }
            left -= rest;
            c->frames_out++;
            c->bytes_out += f->h.len;
            frame_done(pop(c), 1);
            if (c->state != MLN_RELAY_CONN_UP) /* its owner closed it from done */
                return -1;
        }
        if ((size_t)n < want)
            break; /* the socket is full */
    }
    return moved;
}

void mln_relay_conn_close(mln_relay_conn_t *c, const char *why)
{
    if (why != NULL && (c->state != MLN_RELAY_CONN_DEAD || c->why[0] == '\0'))
        snprintf(c->why, sizeof(c->why), "%s", why);
    c->state = MLN_RELAY_CONN_DEAD;
    fail_queue(c);
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    free(c->rbuf);
    free(c->ibuf);
    c->rbuf = c->ibuf = NULL;
    c->rbuf_cap = 0;
    c->ibuf_pos = c->ibuf_len = 0;
    mln_link_wipe(&c->tx);
    mln_link_wipe(&c->rx);
    memset(c->hs_buf, 0, sizeof(c->hs_buf));
    memset(c->hs_out, 0, sizeof(c->hs_out));
}
