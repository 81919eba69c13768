/*
 * tcp_conn.c - connections of the tcp lanes: the listener, connecting without blocking,
 * hellos, and what counts as a failed peer.
 *
 * Connecting: the first striped message from A to B starts MLN_STRIPE_LANES non-blocking
 * connects to B's first address (loopback first on the same host) and returns at once; the
 * progress loop finishes them (hello sent as each one completes) or moves on to the next
 * address after an error or TCP_CONNECT_TIMEOUT_S.  If no address works, the messages that
 * proposed tcp lanes move to the mpi lanes at their CTS (SWITCH, stripe_ctl.c).  No call ever
 * blocks in connect, and a signal (EINTR) is no failure.
 *
 * Accepting: a connection is a lane only after its hello {magic, lane, lanes, src, dst, job
 * nonce} names this job (the nonce is random per mln_init), this rank as its destination, and
 * a lane index not taken.  Accepted connections must say hello within TCP_HELLO_TIMEOUT_S; at
 * most TCP_MAX_PENDING wait at once (the oldest goes first); while the process is out of
 * descriptors the listener rests.  The listener is drained even while no striped message is
 * in flight, every TCP_HOUSEKEEPING_S.
 *
 * Failures are decided on evidence about the peer, never on the local process having been
 * busy elsewhere: an error, a reset or (on a lane that carried frames) an end of stream; or
 * the kernel's view: keepalive probes (idle lanes) and retransmissions (lanes with data) left
 * unanswered by the peer's host for MLN_STRIPE_TIMEOUT (ETIMEDOUT, MLN_ERR_TIMEOUT).  A peer
 * that computes for an hour is alive: its kernel answers.
 */
#define _GNU_SOURCE /* accept4, IFF_* */
#include "lane_tcp_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/filter.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- sockets ----------------------------------------------------------------------------- */

mln_status_t mln_tcp_tune(const mln_stripe_t *s, int fd)
{
    mln_status_t st = MLN_OK;
    const int timeout = (int)s->cfg->stripe_timeout, one = 1, size = (int)s->cfg->stripe_sockbuf;
    /* keepalive: idle for half the timeout, then 4 probes over the other half */
    int idle = timeout / 2 > 0 ? timeout / 2 : 1, count = 4, intvl;

    if (idle > 32767)
        idle = 32767;
    intvl = (timeout - idle) / count > 0 ? (timeout - idle) / count : 1;
    if (intvl > 32767)
        intvl = 32767;
    MLN_SYS_CHECK(setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)), st, out);
    MLN_SYS_CHECK(setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)), st, out);
    MLN_SYS_CHECK(setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle)), st, out);
    MLN_SYS_CHECK(setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl)), st, out);
    MLN_SYS_CHECK(setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count)), st, out);
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
static void local_card(const mln_stripe_t *s, tcp_card_t *card)
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

/* The job nonce: 64 bits from the kernel's random source (never time or pid). */
static mln_status_t make_nonce(uint64_t *out)
{
    for (size_t got = 0; got < sizeof(*out);) {
        ssize_t n = getrandom((char *)out + got, sizeof(*out) - got, 0);
        if (n < 0 && errno != EINTR) {
            MLN_ERROR("getrandom failed: %s", strerror(errno));
            return MLN_ERR_SYS;
        }
        got += n > 0 ? (size_t)n : 0;
    }
    return MLN_OK;
}

/* Listening socket and card; collective afterwards whatever happened here, so no rank hangs. */
static mln_status_t listen_local(mln_stripe_t *s, mln_tcp_state_t *t, tcp_card_t *mine)
{
    mln_status_t st = MLN_OK;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
    socklen_t len = sizeof(sa);
    int one = 1;

    local_card(s, mine);
    if (s->cfg->stripe_addr[0] && mine->naddrs == 0) {
        MLN_ERROR("MLN_STRIPE_IFACE: no IPv4 address on interface '%s'", s->cfg->stripe_addr);
        return MLN_ERR_CONFIG;
    }
    if (s->cfg->stripe_addr[0])
        sa.sin_addr.s_addr = mine->addrs[0];
    MLN_SYS_CHECK(t->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), st, out);
    MLN_SYS_CHECK(setsockopt(t->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)), st, out);
    MLN_CHECK(mln_tcp_tune(s, t->lfd), st, out); /* accepted sockets inherit buffers, cc */
    MLN_SYS_CHECK(bind(t->lfd, (struct sockaddr *)&sa, sizeof(sa)), st, out);
    MLN_SYS_CHECK(listen(t->lfd, SOMAXCONN), st, out);
    MLN_SYS_CHECK(getsockname(t->lfd, (struct sockaddr *)&sa, &len), st, out);
    mine->port = sa.sin_port;
out:
    return st;
}

mln_status_t mln_tcp_open(mln_stripe_t *s)
{
    mln_status_t st = MLN_OK;
    mln_tcp_state_t *t;
    tcp_card_t mine = {0};
    int bad = 0, any_bad = 0;

    t = calloc(1, sizeof(*t));
    if (t != NULL) {
        s->tcp = t;
        t->lfd = -1;
        t->cards = calloc((size_t)s->wsize, sizeof(*t->cards));
        t->peers = calloc((size_t)s->wsize, sizeof(*t->peers));
        t->in_broken = calloc((size_t)s->wsize, sizeof(int));
    }
    if (t == NULL || t->cards == NULL || t->peers == NULL || t->in_broken == NULL) {
        MLN_ERROR("tcp lanes: out of memory for %d ranks", s->wsize);
        st = MLN_ERR_NOMEM;
    }
    if (st == MLN_OK)
        st = listen_local(s, t, &mine);
    if (st == MLN_OK && s->wrank == 0)
        st = make_nonce(&t->nonce);
    /* every rank learns whether all could listen before the collectives that need it */
    bad = st != MLN_OK;
    if (MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD) != MPI_SUCCESS)
        return st != MLN_OK ? st : MLN_ERR_MPI;
    if (any_bad)
        return st != MLN_OK ? st : MLN_ERR_PEER; /* that rank logged why */
    MLN_MPI_CHECK(MPI_Allgather(&mine, (int)sizeof(mine), MPI_BYTE, t->cards, (int)sizeof(mine),
                                MPI_BYTE, MPI_COMM_WORLD),
                  st, out);
    MLN_MPI_CHECK(MPI_Bcast(&t->nonce, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD), st, out);
    for (int r = 0; r < s->wsize; r++) /* from other ranks: never trusted past its array */
        if (t->cards[r].naddrs > TCP_MAX_ADDRS)
            t->cards[r].naddrs = TCP_MAX_ADDRS;
out:
    return st;
}

void mln_tcp_out_lanes_close(tcp_peer_t *p)
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

void mln_tcp_close(mln_stripe_t *s)
{
    mln_tcp_state_t *t = s->tcp;

    if (t == NULL)
        return;
    for (int p = 0; t->peers && p < s->wsize; p++)
        mln_tcp_out_lanes_close(&t->peers[p]);
    for (int i = 0; i < t->nin; i++) {
        close(t->ins[i]->fd);
        free(t->ins[i]);
    }
    mln_tcp_stash_drop(t, -1);
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

/* Starts the non-blocking connects of attempt p->attempt; 0 when none could even start. */
static int attempt_start(mln_stripe_t *s, int peer)
{
    tcp_peer_t *p = &s->tcp->peers[peer];
    const int nlanes = (int)s->cfg->stripe_lanes;
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = s->tcp->cards[peer].port,
                             .sin_addr.s_addr = p->tries[p->attempt]};

    for (p->nout = 0; p->nout < nlanes; p->nout++) {
        tcp_out_t *o = &p->out[p->nout];
        *o = (tcp_out_t){.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0),
                         .lane = p->nout};
        if (o->fd < 0 || mln_tcp_tune(s, o->fd) != MLN_OK ||
            (connect(o->fd, (struct sockaddr *)&sa, sizeof(sa)) == -1 && errno != EINPROGRESS)) {
            if (o->fd >= 0)
                close(o->fd);
            while (p->nout > 0)
                close(p->out[--p->nout].fd);
            return 0;
        }
    }
    p->deadline = mln_stripe_now() + TCP_CONNECT_TIMEOUT_S;
    return 1;
}

/* The attempt in progress failed: the next address, or the lanes to peer are lost. */
static void attempt_failed(mln_stripe_t *s, int peer, const char *why)
{
    tcp_peer_t *p = &s->tcp->peers[peer];
    char text[INET_ADDRSTRLEN];

    inet_ntop(AF_INET, &p->tries[p->attempt], text, sizeof(text));
    MLN_DEBUG("tcp: cannot connect to world rank %d at %s:%u: %s", peer, text,
              (unsigned)ntohs(s->tcp->cards[peer].port), why);
    while (p->nout > 0)
        close(p->out[--p->nout].fd);
    while (++p->attempt < p->ntries)
        if (attempt_start(s, peer))
            return;
    MLN_WARN("tcp: no lanes to world rank %d (%d addresses tried; set MLN_STRIPE_IFACE?): its "
             "striped messages use mpi lanes",
             peer, p->ntries);
    free(p->out);
    p->out = NULL;
    p->state = PEER_FAILED;
    mln_stripe_tcp_lost(s, peer, MLN_ERR_PEER);
}

int mln_tcp_ready(mln_stripe_t *s, int peer)
{
    mln_tcp_state_t *t = s->tcp;
    tcp_peer_t *p = &t->peers[peer];
    const tcp_card_t *card = &t->cards[peer];

    if (p->state != PEER_NONE)
        return p->state != PEER_FAILED;
    p->ntries = 0;
    if (s->host_of[peer] == s->host_of[s->wrank] && !s->cfg->stripe_addr[0])
        p->tries[p->ntries++] = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < card->naddrs; i++)
        p->tries[p->ntries++] = card->addrs[i];
    p->out = calloc((size_t)s->cfg->stripe_lanes, sizeof(*p->out));
    if (p->out == NULL) {
        p->state = PEER_FAILED;
        return 0;
    }
    p->state = PEER_CONNECTING;
    for (p->attempt = 0; p->attempt < p->ntries; p->attempt++)
        if (attempt_start(s, peer))
            return 1;
    free(p->out);
    p->out = NULL;
    p->state = PEER_FAILED;
    MLN_WARN("tcp: no lanes to world rank %d: striping over MPI instead", peer);
    return 0;
}

/* Lane o of peer became writable while connecting: connected (hello out) or failed. */
static int lane_connected(mln_stripe_t *s, int peer, tcp_out_t *o)
{
    const tcp_peer_t *p = &s->tcp->peers[peer];
    tcp_hello_t hello = {.magic = TCP_HELLO_MAGIC,
                         .lane = (uint32_t)o->lane,
                         .nlanes = (uint32_t)p->nout,
                         .src = s->wrank,
                         .dst = peer,
                         .nonce = s->tcp->nonce};
    int err = 0;
    socklen_t len = sizeof(err);

    if (getsockopt(o->fd, SOL_SOCKET, SO_ERROR, &err, &len) == -1)
        err = errno;
    if (err != 0) {
        errno = err;
        return -1;
    }
    /* a fresh socket takes 32 bytes at once */
    if (send(o->fd, &hello, sizeof(hello), MSG_NOSIGNAL | MSG_DONTWAIT) != sizeof(hello))
        return -1;
    o->connected = 1;
    return 1;
}

int mln_tcp_connect_progress(mln_stripe_t *s, const struct pollfd *pfds, int n)
{
    mln_tcp_state_t *t = s->tcp;
    const double now = mln_stripe_now();
    int moved = 0;

    for (int peer = 0; peer < s->wsize; peer++) {
        tcp_peer_t *p = &t->peers[peer];
        int up = 1, failed = 0;

        if (p->state != PEER_CONNECTING)
            continue;
        for (int i = 0; i < p->nout && !failed; i++) {
            tcp_out_t *o = &p->out[i];
            if (o->connected)
                continue;
            for (int k = 0; k < n; k++) {
                if (pfds[k].fd != o->fd || !(pfds[k].revents & (POLLOUT | POLLERR | POLLHUP)))
                    continue;
                if (lane_connected(s, peer, o) < 0)
                    failed = 1;
                moved = 1;
                break;
            }
            up &= o->connected;
        }
        if (failed) {
            attempt_failed(s, peer, strerror(errno));
        } else if (up) {
            char text[INET_ADDRSTRLEN];
            inet_ntop(AF_INET, &p->tries[p->attempt], text, sizeof(text));
            MLN_DEBUG("tcp: %d lanes to world rank %d via %s:%u", p->nout, peer, text,
                      (unsigned)ntohs(t->cards[peer].port));
            p->state = PEER_UP;
        } else if (now > p->deadline) {
            attempt_failed(s, peer, "timed out");
            moved = 1;
        }
    }
    return moved;
}

/* ---- failures ---------------------------------------------------------------------------- */

void mln_tcp_out_lost(mln_stripe_t *s, int peer, mln_status_t st)
{
    tcp_peer_t *p = &s->tcp->peers[peer];

    mln_tcp_out_lanes_close(p);
    p->state = PEER_FAILED;
    mln_stripe_tcp_lost(s, peer, st);
}

void mln_tcp_in_drop(mln_tcp_state_t *t, int i)
{
    close(t->ins[i]->fd);
    free(t->ins[i]);
    t->ins[i] = t->ins[--t->nin];
}

/*
 * src's lanes to us failed.  All of them are closed (so that src sees it too) and src sends
 * us tcp frames no more.  Receives that had bytes land fail with st: their stream is cut.
 * Receives with nothing landed yet wait for src's word: SWITCH (mpi lanes) or SABORT, which
 * src sends once it sees its lanes closed; when the peer's host is gone (st is
 * MLN_ERR_TIMEOUT) no word will come and they fail too.
 */
void mln_tcp_in_lost(mln_stripe_t *s, int src, mln_status_t st)
{
    mln_tcp_state_t *t = s->tcp;
    mln_req_t *next;

    t->in_broken[src] = 1;
    for (int i = t->nin - 1; i >= 0; i--)
        if (t->ins[i]->src == src)
            mln_tcp_in_drop(t, i);
    mln_tcp_stash_drop(t, src); /* early frames of messages that cannot complete now */
    for (mln_req_t *r = s->active; r; r = next) {
        next = r->next;
        if (!r->is_send && r->kind == MLN_LANE_TCP && r->peer_world == src &&
            r->state == MLN_REQ_DATA && (r->bytes_done > 0 || st == MLN_ERR_TIMEOUT))
            mln_stripe_req_fail(s, r, st);
    }
}

/* ---- accepting --------------------------------------------------------------------------- */

int mln_tcp_hello_check(mln_stripe_t *s, tcp_in_t *in)
{
    mln_tcp_state_t *t = s->tcp;
    tcp_hello_t h;

    memcpy(&h, in->hb, sizeof(h));
    if (h.magic != TCP_HELLO_MAGIC || h.nonce != t->nonce || h.src < 0 || h.src >= s->wsize ||
        h.dst != s->wrank || h.nlanes == 0 || h.nlanes > 64 || h.lane >= h.nlanes) {
        MLN_WARN("tcp: a connection that is not a lane of this job to this rank: closed");
        return 0;
    }
    if (t->in_broken[h.src]) {
        MLN_DEBUG("tcp: lane %u from world rank %d after its lanes failed: closed", h.lane, h.src);
        return 0;
    }
    for (int i = 0; i < t->nin; i++) {
        tcp_in_t *old = t->ins[i];
        if (old == in || old->src != h.src || old->lane != (int)h.lane)
            continue;
        if (old->used) {
            MLN_WARN("tcp: a second lane %u from world rank %d: closed", h.lane, h.src);
            return 0;
        }
        /* left over from an attempt src gave up: expired, its end is no news */
        *old = (tcp_in_t){.fd = old->fd, .src = -1, .lane = -1, .state = IN_HELLO};
    }
    in->src = h.src;
    in->lane = (int)h.lane;
    return 1;
}

void mln_tcp_accept(mln_stripe_t *s)
{
    mln_tcp_state_t *t = s->tcp;
    const double now = mln_stripe_now();

    if (now < t->accept_paused)
        return;
    for (;;) {
        int fd = accept4(t->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        tcp_in_t *in;
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* the connection stays queued and the listener readable: rest, no busy loop */
                MLN_WARN("tcp: cannot accept a lane: %s (the listener rests for %.1f s)",
                         strerror(errno), TCP_HOUSEKEEPING_S);
                t->accept_paused = now + TCP_HOUSEKEEPING_S;
            }
            return;
        }
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
        if (in == NULL || mln_tcp_tune(s, fd) != MLN_OK) {
            free(in);
            close(fd);
            return;
        }
        in->fd = fd;
        in->src = -1;
        in->lane = -1;
        in->state = IN_HELLO;
        in->deadline = now + TCP_HELLO_TIMEOUT_S;
        t->ins[t->nin++] = in;
        mln_tcp_pending_expire(s, now);
    }
}

void mln_tcp_pending_expire(mln_stripe_t *s, double now)
{
    mln_tcp_state_t *t = s->tcp;
    int pending = 0, oldest = -1;

    for (int i = t->nin - 1; i >= 0; i--) {
        tcp_in_t *in = t->ins[i];
        if (in->state != IN_HELLO)
            continue;
        if (now > in->deadline) {
            MLN_DEBUG("tcp: a connection said no hello within %.0f s: closed", TCP_HELLO_TIMEOUT_S);
            mln_tcp_in_drop(t, i);
            continue;
        }
        pending++;
        if (oldest < 0 || in->deadline < t->ins[oldest]->deadline)
            oldest = i;
    }
    if (pending > TCP_MAX_PENDING) {
        if (!t->warned) /* once: a flood must not flood the log too */
            MLN_WARN("tcp: more than %d connections without a hello: the oldest are closed",
                     TCP_MAX_PENDING);
        t->warned = 1;
        mln_tcp_in_drop(t, oldest);
    }
}

/* ---- the kernel's evidence --------------------------------------------------------------- */

/* Has the peer's host left this lane unanswered for limit_ms?  A live host answers every
 * retransmission and every zero-window probe within a round trip, however long its process
 * sleeps (a full receive buffer is answered with a zero window).  But the kernel waits longer
 * and longer between retransmissions and between probes (the wait doubles each time, up to
 * two minutes), so a live host may go unheard for longer than the limit: time since the last
 * acknowledgement is no evidence on its own.  Evidence is that time together with
 * TCP_UNANSWERED transmissions in a row left unanswered (one lost packet is no death): probes
 * (tcpi_probes counts those sent since the last acknowledgement), or retransmissions counted
 * since the last acknowledgement we saw arrive (tcpi_total_retrans then and now; those sent
 * before we first saw that acknowledgement are not counted, so a process that was away learns
 * later, never wrongly). */
static int tcp_unanswered(tcp_out_t *o, const struct tcp_info *ti, double now, unsigned limit_ms)
{
    const double ack_at = now - ti->tcpi_last_ack_recv / 1000.0;

    if (ack_at > o->ack_at + 0.010) { /* an acknowledgement we had not seen (jiffies: 10 ms) */
        o->ack_at = ack_at;
        o->retrans_at_ack = ti->tcpi_total_retrans;
    }
    if (ti->tcpi_last_ack_recv < limit_ms)
        return 0;
    return ti->tcpi_probes >= TCP_UNANSWERED ||
           (ti->tcpi_retransmits >= 1 &&
            ti->tcpi_total_retrans - o->retrans_at_ack >= TCP_UNANSWERED);
}

void mln_tcp_evidence(mln_stripe_t *s, double now)
{
    mln_tcp_state_t *t = s->tcp;
    const unsigned limit_ms = (unsigned)s->cfg->stripe_timeout * 1000u;

    for (int peer = 0; peer < s->wsize; peer++) {
        tcp_peer_t *p = &t->peers[peer];
        if (p->state != PEER_UP || now - p->checked < TCP_EVIDENCE_PERIOD_S)
            continue;
        p->checked = now;
        for (int i = 0; i < p->nout; i++) {
            struct tcp_info ti;
            socklen_t len = sizeof(ti);
            if (getsockopt(p->out[i].fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == -1)
                continue;
            if (tcp_unanswered(&p->out[i], &ti, now, limit_ms)) {
                MLN_ERROR("tcp: world rank %d's host acknowledged nothing on lane %d for %u ms "
                          "(MLN_STRIPE_TIMEOUT %lld s; %u probes, %u retransmissions "
                          "unanswered): its lanes are closed",
                          peer, i, ti.tcpi_last_ack_recv, (long long)s->cfg->stripe_timeout,
                          (unsigned)ti.tcpi_probes,
                          (unsigned)(ti.tcpi_total_retrans - p->out[i].retrans_at_ack));
                mln_tcp_out_lost(s, peer, MLN_ERR_TIMEOUT);
                break;
            }
        }
    }
}

/* MLN_STRIPE_FAULT=mute: a classic BPF program that keeps nothing, so the kernel drops every
 * segment arriving on this lane before TCP sees it: the peer's acknowledgements never arrive. */
void mln_tcp_mute(tcp_out_t *o, int peer)
{
    struct sock_filter drop = BPF_STMT(BPF_RET | BPF_K, 0);
    struct sock_fprog prog = {.len = 1, .filter = &drop};

    MLN_WARN("MLN_STRIPE_FAULT: tcp lane %d to world rank %d hears nothing more after %llu bytes",
             o->lane, peer, (unsigned long long)o->written);
    if (setsockopt(o->fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) == -1)
        MLN_WARN("MLN_STRIPE_FAULT: SO_ATTACH_FILTER: %s", strerror(errno));
}

/* ---- for tests --------------------------------------------------------------------------- */

int mln_tcp_listen_port(const mln_stripe_t *s)
{
    return s && s->tcp ? (int)ntohs(s->tcp->cards[s->wrank].port) : -1;
}

int mln_tcp_lanes_up(const mln_stripe_t *s, int peer_world)
{
    return s && s->tcp && peer_world >= 0 && peer_world < s->wsize &&
           s->tcp->peers[peer_world].state == PEER_UP;
}

/* A connection to peer's listener (blocking, loopback or its first address) that opens with
 * a hello naming lane/nlanes/dst: a test forges lanes with it.  The fd, or -1. */
int mln_tcp_test_connect(mln_stripe_t *s, int peer_world, int lane, int nlanes, int dst_world)
{
    const tcp_card_t *card = &s->tcp->cards[peer_world];
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = card->port,
                             .sin_addr.s_addr = s->host_of[peer_world] == s->host_of[s->wrank]
                                                    ? htonl(INADDR_LOOPBACK)
                                                    : card->addrs[0]};
    tcp_hello_t hello = {.magic = TCP_HELLO_MAGIC,
                         .lane = (uint32_t)lane,
                         .nlanes = (uint32_t)nlanes,
                         .src = s->wrank,
                         .dst = dst_world,
                         .nonce = s->tcp->nonce};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == -1 ||
        (lane >= 0 && send(fd, &hello, sizeof(hello), MSG_NOSIGNAL) != sizeof(hello))) {
        close(fd);
        return -1;
    }
    return fd;
}
