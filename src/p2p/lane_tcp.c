/*
 * lane_tcp.c - tcp lanes: the library's own N TCP connections per peer (ALGORITHMS.md S1).
 *
 * Every rank listens on one socket; the listen addresses are exchanged through MPI at
 * mln_init.  Lanes are one-way: the first striped message from A to B makes A connect
 * MLN_STRIPE_LANES sockets to B, each opening with a hello frame {magic, lane, A, job nonce}.
 * A chunk is a frame {magic, length, message id, offset} plus its payload, which the receiver
 * reads straight into the user's buffer at that offset (no reassembly copy).
 *
 * Scheduling is dynamic (S4): a lane takes the next chunk when it has less than two queued,
 * and the lane with the least queued bytes goes first, so a slow lane gets fewer chunks
 * instead of setting the pace (NCCL's equal split waits for its slowest socket).
 *
 * Cost of n bytes over L lanes of window-limited bandwidth b = W / RTT each:
 *   T = RTT / 2 + n / min(L b, link)     (plus the header and CTS, see stripe.c)
 *
 * Failures (S7): EOF, a reset or a write error on any lane to or from a peer closes all of
 * that peer's lanes in that direction and completes the requests that use them with
 * MLN_ERR_PEER; later messages to that peer use the mpi lane.  Frames whose message id is
 * unknown or whose range falls outside the message are MLN_ERR_DATA.
 */
#define _GNU_SOURCE /* accept4, ppoll, IFF_* */
#include "stripe_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define TCP_FRAME_MAGIC 0x4d4c4e46u /* "MLNF" */
#define TCP_HELLO_MAGIC 0x4d4c4e48u /* "MLNH" */
#define TCP_MAX_ADDRS 4
#define TCP_CONNECT_TIMEOUT_MS 10000
#define TCP_READ_BUDGET (8u << 20) /* bytes read from one socket per pass */

typedef struct tcp_frame {
    uint32_t magic;
    uint32_t len;
    uint64_t msg_id;
    uint64_t offset;
} tcp_frame_t;

typedef struct tcp_hello {
    uint32_t magic;
    uint32_t lane;
    int32_t src;
    uint32_t pad;
    uint64_t nonce;
} tcp_hello_t;

/* What every rank publishes at mln_init. */
typedef struct tcp_card {
    uint16_t port;
    uint16_t naddrs;
    uint32_t addrs[TCP_MAX_ADDRS]; /* IPv4, network order */
} tcp_card_t;

typedef struct tcp_chunk {
    mln_req_t *req;
    uint64_t off;
    uint64_t sent; /* frame + payload bytes written */
    tcp_frame_t frame;
    struct tcp_chunk *next;
} tcp_chunk_t;

typedef struct tcp_out {
    int fd;
    int lane;
    tcp_chunk_t *head, *tail;
    int nqueued;
    uint64_t queued_bytes;
    uint64_t written; /* payload bytes, for MLN_STRIPE_FAULT */
} tcp_out_t;

typedef struct tcp_peer {
    tcp_out_t *out; /* NULL until the first striped message to this peer */
    int nout;
} tcp_peer_t;

enum { IN_HELLO, IN_FRAME, IN_PAYLOAD, IN_DISCARD };

typedef struct tcp_in {
    int fd;
    int src;
    int state;
    unsigned char hb[sizeof(tcp_frame_t)];
    size_t hgot;
    mln_req_t *req;
    char *dst;
    uint64_t left;
} tcp_in_t;

struct mln_tcp_state {
    int lfd;
    uint64_t nonce;
    tcp_card_t *cards; /* by world rank */
    tcp_peer_t *peers; /* by world rank: our lanes to them */
    int *in_broken;    /* by world rank: their lanes to us failed */
    tcp_in_t **ins;
    int nin, cap_in;
    struct pollfd *pfds;
    int cap_pfds;
    int fault_lane; /* MLN_STRIPE_FAULT */
    uint64_t fault_bytes;
    int fault_armed;
};

/* ---- set-up ------------------------------------------------------------------------------ */

static mln_status_t tune_socket(mln_stripe_t *s, int fd)
{
    mln_status_t st = MLN_OK;
    int one = 1, size = (int)s->cfg->stripe_sockbuf;

    MLN_SYS_CHECK(setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)), st, out);
    if (size > 0) {
        MLN_SYS_CHECK(setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size)), st, out);
        MLN_SYS_CHECK(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size)), st, out);
    }
    if (s->cfg->stripe_congestion[0] != '\0' &&
        setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, s->cfg->stripe_congestion,
                   (socklen_t)strlen(s->cfg->stripe_congestion)) == -1) {
        MLN_ERROR("MLN_STRIPE_CONGESTION: the kernel refuses '%s': %s (see "
                  "/proc/sys/net/ipv4/tcp_allowed_congestion_control)",
                  s->cfg->stripe_congestion, strerror(errno));
        st = MLN_ERR_CONFIG;
    }
out:
    return st;
}

/* This host's IPv4 addresses (MLN_STRIPE_IFACE: that interface only; else not loopback). */
static void local_card(mln_stripe_t *s, tcp_card_t *card)
{
    struct ifaddrs *ifs = NULL;
    const char *want = s->cfg->stripe_addr;

    if (getifaddrs(&ifs) == -1)
        return;
    for (struct ifaddrs *i = ifs; i && card->naddrs < TCP_MAX_ADDRS; i = i->ifa_next) {
        if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP))
            continue;
        if (want[0] ? strcmp(i->ifa_name, want) != 0 : (i->ifa_flags & IFF_LOOPBACK) != 0)
            continue;
        card->addrs[card->naddrs++] = ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
    }
    freeifaddrs(ifs);
}

static mln_status_t parse_fault(mln_stripe_t *s, mln_tcp_state_t *t)
{
    unsigned long long bytes = 0;
    int lane = 0, used = 0;

    if (s->cfg->stripe_fault[0] == '\0')
        return MLN_OK;
    if (sscanf(s->cfg->stripe_fault, "reset:%d:%llu%n", &lane, &bytes, &used) != 2 ||
        s->cfg->stripe_fault[used] != '\0' || lane < 0 || lane >= s->cfg->stripe_lanes) {
        MLN_ERROR("MLN_STRIPE_FAULT: invalid value '%s' (expected reset:LANE:BYTES with LANE "
                  "below MLN_STRIPE_LANES)",
                  s->cfg->stripe_fault);
        return MLN_ERR_CONFIG;
    }
    t->fault_lane = lane;
    t->fault_bytes = bytes;
    t->fault_armed = 1;
    return MLN_OK;
}

static mln_status_t tcp_open(mln_stripe_t *s)
{
    mln_status_t st = MLN_OK;
    mln_tcp_state_t *t;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
    socklen_t len = sizeof(sa);
    tcp_card_t mine = {0};
    int one = 1;

    t = calloc(1, sizeof(*t));
    if (t == NULL)
        return MLN_ERR_NOMEM;
    s->tcp = t;
    t->lfd = -1;
    t->cards = calloc((size_t)s->wsize, sizeof(*t->cards));
    t->peers = calloc((size_t)s->wsize, sizeof(*t->peers));
    t->in_broken = calloc((size_t)s->wsize, sizeof(int));
    if (t->cards == NULL || t->peers == NULL || t->in_broken == NULL) {
        st = MLN_ERR_NOMEM;
        goto out;
    }
    MLN_CHECK(parse_fault(s, t), st, out);
    local_card(s, &mine);
    if (s->cfg->stripe_addr[0] && mine.naddrs == 0) {
        MLN_ERROR("MLN_STRIPE_IFACE: no IPv4 address on interface '%s'", s->cfg->stripe_addr);
        st = MLN_ERR_CONFIG;
        goto out;
    }
    if (s->cfg->stripe_addr[0])
        sa.sin_addr.s_addr = mine.addrs[0];
    MLN_SYS_CHECK(t->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), st, out);
    MLN_SYS_CHECK(setsockopt(t->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)), st, out);
    MLN_CHECK(tune_socket(s, t->lfd), st, out); /* accepted sockets inherit buffers, cc */
    MLN_SYS_CHECK(bind(t->lfd, (struct sockaddr *)&sa, sizeof(sa)), st, out);
    MLN_SYS_CHECK(listen(t->lfd, SOMAXCONN), st, out);
    MLN_SYS_CHECK(getsockname(t->lfd, (struct sockaddr *)&sa, &len), st, out);
    mine.port = sa.sin_port;
out:
    /* Collective even after a local failure, so that no rank hangs: port 0 = failed. */
    if (st != MLN_OK)
        mine.port = 0;
    if (MPI_Allgather(&mine, (int)sizeof(mine), MPI_BYTE, t->cards, (int)sizeof(mine), MPI_BYTE,
                      MPI_COMM_WORLD) != MPI_SUCCESS &&
        st == MLN_OK)
        st = MLN_ERR_MPI;
    if (s->wrank == 0)
        t->nonce = ((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid() ^ (uint64_t)(uintptr_t)t;
    if (MPI_Bcast(&t->nonce, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD) != MPI_SUCCESS && st == MLN_OK)
        st = MLN_ERR_MPI;
    for (int r = 0; st == MLN_OK && r < s->wsize; r++)
        if (t->cards[r].port == 0)
            st = MLN_ERR_PEER; /* that rank logged why */
    return st;
}

/* Closes our lanes to one peer and drops their queued chunks. */
static void out_lanes_close(tcp_peer_t *p)
{
    for (int i = 0; i < p->nout; i++) {
        tcp_out_t *o = &p->out[i];
        while (o->head) {
            tcp_chunk_t *c = o->head;
            o->head = c->next;
            free(c);
        }
        if (o->fd >= 0)
            close(o->fd);
    }
    free(p->out);
    p->out = NULL;
    p->nout = 0;
}

static void tcp_close(mln_stripe_t *s)
{
    mln_tcp_state_t *t = s->tcp;

    if (t == NULL)
        return;
    for (int p = 0; t->peers && p < s->wsize; p++)
        out_lanes_close(&t->peers[p]);
    for (int i = 0; i < t->nin; i++) {
        close(t->ins[i]->fd);
        free(t->ins[i]);
    }
    if (t->lfd >= 0)
        close(t->lfd);
    free(t->ins);
    free(t->pfds);
    free(t->cards);
    free(t->peers);
    free(t->in_broken);
    free(t);
    s->tcp = NULL;
}

/* ---- connecting -------------------------------------------------------------------------- */

/* A connected, tuned, non-blocking socket to addr:port, or -1. */
static int connect_one(mln_stripe_t *s, uint32_t addr, uint16_t port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = port, .sin_addr.s_addr = addr};
    struct pollfd pfd;
    int fd, err = 0;
    socklen_t len = sizeof(err);

    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    if (tune_socket(s, fd) != MLN_OK)
        goto fail;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == -1) {
        if (errno != EINPROGRESS)
            goto fail;
        pfd.fd = fd;
        pfd.events = POLLOUT;
        if (poll(&pfd, 1, TCP_CONNECT_TIMEOUT_MS) != 1 ||
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == -1 || err != 0)
            goto fail;
    }
    return fd;
fail:
    close(fd);
    return -1;
}

/* Opens the lanes to `peer` (first striped message); 0 when they cannot be opened. */
static int tcp_ready(mln_stripe_t *s, int peer)
{
    mln_tcp_state_t *t = s->tcp;
    tcp_peer_t *p = &t->peers[peer];
    const tcp_card_t *card = &t->cards[peer];
    uint32_t tries[TCP_MAX_ADDRS + 1];
    int ntries = 0, nlanes = (int)s->cfg->stripe_lanes, fd = -1;
    char text[INET_ADDRSTRLEN];

    if (p->out != NULL)
        return 1;
    if (s->host_of[peer] == s->host_of[s->wrank] && !s->cfg->stripe_addr[0])
        tries[ntries++] = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < card->naddrs; i++)
        tries[ntries++] = card->addrs[i];
    p->out = calloc((size_t)nlanes, sizeof(*p->out));
    if (p->out == NULL)
        return 0;
    for (int a = 0; a < ntries; a++) {
        for (p->nout = 0; p->nout < nlanes; p->nout++) {
            tcp_hello_t hello = {.magic = TCP_HELLO_MAGIC,
                                 .lane = (uint32_t)p->nout,
                                 .src = s->wrank,
                                 .nonce = t->nonce};
            fd = connect_one(s, tries[a], card->port);
            if (fd < 0 || send(fd, &hello, sizeof(hello), MSG_NOSIGNAL) != sizeof(hello)) {
                if (fd >= 0)
                    close(fd);
                break;
            }
            p->out[p->nout] = (tcp_out_t){.fd = fd, .lane = p->nout};
        }
        inet_ntop(AF_INET, &tries[a], text, sizeof(text));
        if (p->nout == nlanes) {
            MLN_DEBUG("tcp: %d lanes to world rank %d via %s:%u", nlanes, peer, text,
                      (unsigned)ntohs(card->port));
            return 1;
        }
        MLN_DEBUG("tcp: cannot connect to world rank %d at %s:%u: %s", peer, text,
                  (unsigned)ntohs(card->port), strerror(errno));
        while (p->nout > 0)
            close(p->out[--p->nout].fd);
    }
    MLN_WARN("tcp: no lanes to world rank %d (%d addresses tried; set MLN_STRIPE_IFACE?)", peer,
             ntries);
    free(p->out);
    p->out = NULL;
    return 0;
}

/* ---- failures ---------------------------------------------------------------------------- */

/* Our lanes to `peer` are gone: fail the sends that use them; later ones go over MPI. */
static void fail_out_peer(mln_stripe_t *s, int peer, mln_status_t st)
{
    mln_req_t *r, *next;

    out_lanes_close(&s->tcp->peers[peer]);
    s->tcp_failed[peer] = 1;
    for (r = s->active; r; r = next) {
        next = r->next;
        if (r->is_send && r->kind == MLN_LANE_TCP && r->peer_world == peer &&
            (r->state == MLN_REQ_CTS || r->state == MLN_REQ_DATA))
            mln_stripe_req_fail(s, r, st);
    }
}

static void in_drop(mln_tcp_state_t *t, int i)
{
    close(t->ins[i]->fd);
    free(t->ins[i]);
    t->ins[i] = t->ins[--t->nin];
}

/* `src`'s lanes to us failed: close them all and fail the receives that wait on them. */
static void fail_in_peer(mln_stripe_t *s, int src, mln_status_t st)
{
    mln_tcp_state_t *t = s->tcp;
    mln_req_t *r, *next;

    t->in_broken[src] = 1;
    for (int i = t->nin - 1; i >= 0; i--)
        if (t->ins[i]->src == src)
            in_drop(t, i);
    for (r = s->active; r; r = next) {
        next = r->next;
        if (!r->is_send && r->kind == MLN_LANE_TCP && r->peer_world == src &&
            r->state == MLN_REQ_DATA)
            mln_stripe_req_fail(s, r, st);
    }
}

/* ---- the engine's hooks ------------------------------------------------------------------ */

static mln_status_t tcp_recv_post(mln_stripe_t *s, mln_req_t *r)
{
    if (s->tcp->in_broken[r->peer_world]) {
        mln_stripe_req_fail(s, r, MLN_ERR_PEER);
        return MLN_OK;
    }
    return MLN_OK;
}

/* Hands chunks of `r` to the lanes with room, least queued bytes first. */
static void tcp_send_fill(mln_stripe_t *s, mln_req_t *r)
{
    tcp_peer_t *p = &s->tcp->peers[r->peer_world];

    while (r->next_off < r->accept && p->out) {
        tcp_out_t *best = NULL;
        tcp_chunk_t *c;
        uint64_t len;

        for (int i = 0; i < p->nout; i++)
            if (p->out[i].nqueued < 2 && (!best || p->out[i].queued_bytes < best->queued_bytes))
                best = &p->out[i];
        if (best == NULL)
            return;
        c = calloc(1, sizeof(*c));
        if (c == NULL)
            return; /* retried on the next pass */
        len = r->accept - r->next_off < r->chunk ? r->accept - r->next_off : r->chunk;
        c->req = r;
        c->off = r->next_off;
        c->frame = (tcp_frame_t){.magic = TCP_FRAME_MAGIC,
                                 .len = (uint32_t)len,
                                 .msg_id = r->msg_id,
                                 .offset = r->next_off};
        r->next_off += len;
        if (best->tail)
            best->tail->next = c;
        else
            best->head = c;
        best->tail = c;
        best->nqueued++;
        best->queued_bytes += len;
    }
}

/* Writes what the socket takes; returns 1 when bytes moved, -1 when the lane failed. */
static int out_write(mln_stripe_t *s, int peer, tcp_out_t *o)
{
    mln_tcp_state_t *t = s->tcp;
    int moved = 0;

    while (o->head) {
        tcp_chunk_t *c = o->head;
        uint64_t flen = sizeof(c->frame), total = flen + c->frame.len;
        struct iovec iov[2];
        struct msghdr msg = {.msg_iov = iov};
        ssize_t n;

        if (c->sent < flen) {
            iov[msg.msg_iovlen++] =
                (struct iovec){(char *)&c->frame + c->sent, (size_t)(flen - c->sent)};
            iov[msg.msg_iovlen++] = (struct iovec){c->req->buf + c->off, c->frame.len};
        } else {
            iov[msg.msg_iovlen++] =
                (struct iovec){c->req->buf + c->off + (c->sent - flen), (size_t)(total - c->sent)};
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
            uint64_t before = c->sent > flen ? c->sent - flen : 0;
            c->sent += (uint64_t)n;
            uint64_t after = c->sent > flen ? c->sent - flen : 0;
            o->written += after - before;
            mln_stripe_req_progress(s, c->req, after - before);
        }
        if (t->fault_armed && o->lane == t->fault_lane && o->written >= t->fault_bytes) {
            struct linger lg = {.l_onoff = 1, .l_linger = 0};
            t->fault_armed = 0;
            MLN_WARN("MLN_STRIPE_FAULT: resetting tcp lane %d to world rank %d after %llu bytes",
                     o->lane, peer, (unsigned long long)o->written);
            setsockopt(o->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
            return -1;
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

/* Reads from one in-lane; returns 1 when bytes moved, -1 when it must be dropped. */
static int in_read(mln_stripe_t *s, tcp_in_t *in)
{
    mln_tcp_state_t *t = s->tcp;
    uint64_t budget = TCP_READ_BUDGET;
    int moved = 0;

    while (budget > 0) {
        ssize_t n;
        if (in->state == IN_PAYLOAD || in->state == IN_DISCARD) {
            char sink[65536];
            size_t want = in->left < budget ? (size_t)in->left : (size_t)budget;
            char *into = in->state == IN_PAYLOAD ? in->dst : sink;
            if (in->state == IN_DISCARD && want > sizeof(sink))
                want = sizeof(sink);
            n = recv(in->fd, into, want, MSG_DONTWAIT);
            if (n > 0) {
                moved = 1;
                budget -= (uint64_t)n;
                in->left -= (uint64_t)n;
                if (in->state == IN_PAYLOAD) {
                    mln_req_t *r = in->req;
                    in->dst += n;
                    if (in->left == 0) {
                        in->state = IN_FRAME;
                        in->hgot = 0;
                        in->req = NULL;
                    }
                    mln_stripe_req_progress(s, r, (uint64_t)n);
                } else if (in->left == 0) {
                    in->state = IN_FRAME;
                    in->hgot = 0;
                }
                continue;
            }
        } else {
            size_t want = (in->state == IN_HELLO ? sizeof(tcp_hello_t) : sizeof(tcp_frame_t));
            n = recv(in->fd, in->hb + in->hgot, want - in->hgot, MSG_DONTWAIT);
            if (n > 0) {
                moved = 1;
                in->hgot += (size_t)n;
                if (in->hgot < want)
                    continue;
                in->hgot = 0;
                if (in->state == IN_HELLO) {
                    tcp_hello_t h;
                    memcpy(&h, in->hb, sizeof(h));
                    if (h.magic != TCP_HELLO_MAGIC || h.nonce != t->nonce || h.src < 0 ||
                        h.src >= s->wsize) {
                        MLN_WARN("tcp: a connection that is not a lane of this job: closed");
                        return -1;
                    }
                    in->src = h.src;
                    in->state = IN_FRAME;
                    continue;
                }
                tcp_frame_t f;
                memcpy(&f, in->hb, sizeof(f));
                mln_req_t *r = mln_stripe_find_recv(s, in->src, f.msg_id);
                if (f.magic != TCP_FRAME_MAGIC || r == NULL || r->kind != MLN_LANE_TCP ||
                    f.len == 0 || f.offset > r->accept || f.len > r->accept - f.offset) {
                    MLN_ERROR("tcp: bad frame from world rank %d (message %llu, offset %llu, "
                              "length %u): its lanes are closed",
                              in->src, (unsigned long long)f.msg_id, (unsigned long long)f.offset,
                              f.len);
                    fail_in_peer(s, in->src, MLN_ERR_DATA);
                    return 0; /* in was freed */
                }
                in->req = r;
                in->dst = r->buf + f.offset;
                in->left = f.len;
                in->state = IN_PAYLOAD;
                continue;
            }
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return moved;
        /* EOF or error */
        if (in->state == IN_HELLO)
            return -1;
        MLN_DEBUG("tcp: lane from world rank %d: %s", in->src,
                  n == 0 ? "closed by the peer" : strerror(errno));
        {
            int active = 0;
            for (mln_req_t *r = s->active; r; r = r->next)
                if (!r->is_send && r->kind == MLN_LANE_TCP && r->peer_world == in->src &&
                    r->state == MLN_REQ_DATA)
                    active = 1;
            if (active || n < 0 || in->state != IN_FRAME || in->hgot != 0)
                MLN_WARN("tcp: lane from world rank %d failed (%s) with data pending", in->src,
                         n == 0 ? "closed" : strerror(errno));
        }
        fail_in_peer(s, in->src, MLN_ERR_PEER);
        return 0; /* in was freed */
    }
    return moved;
}

static void tcp_accept(mln_stripe_t *s)
{
    mln_tcp_state_t *t = s->tcp;

    for (;;) {
        int fd = accept4(t->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        tcp_in_t *in;
        if (fd < 0)
            return;
        if (t->nin == t->cap_in) {
            int cap = t->cap_in ? 2 * t->cap_in : 16;
            tcp_in_t **ins = realloc(t->ins, (size_t)cap * sizeof(*ins));
            if (ins == NULL) {
                close(fd);
                return;
            }
            t->ins = ins;
            t->cap_in = cap;
        }
        in = calloc(1, sizeof(*in));
        if (in == NULL) {
            close(fd);
            return;
        }
        in->fd = fd;
        in->src = -1;
        in->state = IN_HELLO;
        t->ins[t->nin++] = in;
    }
}

/* 1 while a tcp lane has work: a striped receive or chunks waiting to go out. */
static int tcp_busy(const mln_stripe_t *s)
{
    for (const mln_req_t *r = s->active; r; r = r->next)
        if (r->kind == MLN_LANE_TCP && (r->state == MLN_REQ_DATA || r->state == MLN_REQ_CTS))
            return 1;
    return 0;
}

static int tcp_progress(mln_stripe_t *s, int timeout_us)
{
    mln_tcp_state_t *t = s->tcp;
    int n = 0, moved = 0, need = 1 + t->nin;
    struct timespec ts = {timeout_us / 1000000, (long)(timeout_us % 1000000) * 1000L};

    /* Nothing striped in flight: no system call at all, so that plain MPI messages wait in a
     * loop as lean as MPI's own.  (Connections and hellos queue in the kernel meanwhile; a
     * frame only ever follows a CTS, that is an active receive.) */
    if (!tcp_busy(s))
        return 0;

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
        for (int i = 0; i < peer->nout; i++) {
            int rc = peer->out[i].head ? out_write(s, p, &peer->out[i]) : 0;
            if (rc < 0) {
                fail_out_peer(s, p, MLN_ERR_PEER);
                moved = 1;
                break;
            }
            moved |= rc;
        }
    }
    t->pfds[n++] = (struct pollfd){.fd = t->lfd, .events = POLLIN};
    for (int i = 0; i < t->nin; i++)
        t->pfds[n++] = (struct pollfd){.fd = t->ins[i]->fd, .events = POLLIN};
    for (int p = 0; p < s->wsize; p++)
        for (int i = 0; i < t->peers[p].nout; i++)
            t->pfds[n++] = (struct pollfd){
                .fd = t->peers[p].out[i].fd,
                .events = (short)(POLLIN | (t->peers[p].out[i].head ? POLLOUT : 0))};
    if (ppoll(t->pfds, (nfds_t)n, &ts, NULL) <= 0)
        return moved;
    if (t->pfds[0].revents & POLLIN)
        tcp_accept(s);
    /* Readable in-lanes (index i of pfds is ins[i - 1] as they were at poll time). */
    for (int i = t->nin - 1; i >= 0; i--) {
        if (i + 1 >= n || !(t->pfds[i + 1].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        if (i >= t->nin || t->pfds[i + 1].fd != t->ins[i]->fd)
            continue; /* the list changed under us (a peer failed): next pass */
        int rc = in_read(s, t->ins[i]);
        if (rc < 0)
            in_drop(t, i);
        moved |= rc != 0;
    }
    /* Out-lanes: writable, or readable = the peer closed or reset. */
    for (int k = 1 + t->nin; k < n; k++) {
        if (!t->pfds[k].revents)
            continue;
        for (int p = 0; p < s->wsize; p++) {
            tcp_peer_t *peer = &t->peers[p];
            for (int i = 0; i < peer->nout; i++) {
                if (peer->out[i].fd != t->pfds[k].fd)
                    continue;
                if (t->pfds[k].revents & (POLLIN | POLLHUP | POLLERR)) {
                    char b;
                    if (recv(peer->out[i].fd, &b, 1, MSG_DONTWAIT) <= 0 && errno != EAGAIN) {
                        MLN_DEBUG("tcp: lane %d to world rank %d closed by the peer", i, p);
                        fail_out_peer(s, p, MLN_ERR_PEER);
                        return 1;
                    }
                }
                if (t->pfds[k].revents & POLLOUT) {
                    int rc = out_write(s, p, &peer->out[i]);
                    if (rc < 0) {
                        fail_out_peer(s, p, MLN_ERR_PEER);
                        return 1;
                    }
                    moved |= rc;
                }
            }
        }
    }
    return moved;
}

/* A request is freed: no lane may keep pointing into it. */
static void tcp_req_free(mln_stripe_t *s, mln_req_t *r)
{
    mln_tcp_state_t *t = s->tcp;

    if (t == NULL || r->kind != MLN_LANE_TCP || r->peer_world < 0)
        return;
    if (!r->is_send) {
        for (int i = 0; i < t->nin; i++)
            if (t->ins[i]->req == r) {
                t->ins[i]->req = NULL;
                t->ins[i]->state = IN_DISCARD; /* the rest of that frame is dropped */
            }
        return;
    }
    tcp_peer_t *p = &t->peers[r->peer_world];
    for (int i = 0; i < p->nout; i++) {
        tcp_out_t *o = &p->out[i];
        for (tcp_chunk_t **pc = &o->head; *pc;) {
            tcp_chunk_t *c = *pc;
            if (c->req != r) {
                pc = &c->next;
                continue;
            }
            if (c->sent > 0) { /* half-written frame: the stream cannot go on */
                fail_out_peer(s, r->peer_world, MLN_ERR_PEER);
                return;
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
}

const mln_lane_ops_t mln_lane_tcp_ops = {
    .name = "tcp",
    .kind = MLN_LANE_TCP,
    .open = tcp_open,
    .ready = tcp_ready,
    .recv_post = tcp_recv_post,
    .send_fill = tcp_send_fill,
    .progress = tcp_progress,
    .req_free = tcp_req_free,
    .close = tcp_close,
};
