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
 * Listening: one socket per address the lanes use (this host's card, and loopback for the
 * ranks of this host), never INADDR_ANY; on MLN_STRIPE_PORT + the rank's index on its host when
 * that is set (firewalls), else on a free port.
 *
 * Accepting (src/link: the handshake): a connection from an address that is no rank's host is
 * closed before a byte is read.  It is a lane only after its hello names this job (its id,
 * derived from the job key), this job's mode, this rank as its destination, a lane in range,
 * and a source rank whose address it comes from; and, but in mode none, after its response to
 * our challenge proves the job key for this very hello and challenge; only then is its lane
 * number taken (a stranger replaying a hello takes nothing).  The connector checks our
 * challenge the same way before it sends a frame.  Accepted connections must finish within
 * TCP_HELLO_TIMEOUT_S; at most TCP_MAX_PENDING wait at once (the oldest goes first); while the
 * process is out of descriptors the listener rests.  The listeners are drained even while no
 * striped message is in flight, every TCP_HOUSEKEEPING_S.
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
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

/* ---- sockets ----------------------------------------------------------------------------- */

int mln_tcp_notsent_share(const mln_stripe_t *s, int lanes)
{
    const uint64_t total = s->cfg->stripe_notsent; /* at most 1 GiB (config.c) */
    uint64_t each = total / (uint64_t)(lanes > 0 ? lanes : 1);

    if (each < TCP_NOTSENT_MIN)
        each = total < TCP_NOTSENT_MIN ? total : TCP_NOTSENT_MIN;
    return (int)each;
}

void mln_tcp_notsent_set(int fd, int value)
{
    /* a kernel without the option (before 3.12) leaves the lane as it was */
    if (setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &value, sizeof(value)) == -1)
        MLN_DEBUG("tcp: TCP_NOTSENT_LOWAT %d refused: %s", value, strerror(errno));
}

mln_status_t mln_tcp_tune(const mln_stripe_t *s, int fd)
{
    mln_status_t st = MLN_OK;
    const int timeout = (int)s->cfg->stripe_timeout, one = 1, size = (int)s->cfg->stripe_sockbuf;
    const int notsent = mln_tcp_notsent_share(s, INT_MAX); /* a new lane: the least share */
    /* keepalive: 3 probes over the second half of the timeout, after an idle first half, so
     * that a silent peer's lanes end by the timeout (whole seconds: at least 1 s each) */
    const int count = 3;
    int intvl = timeout / (2 * count) > 0 ? timeout / (2 * count) : 1, idle;

    if (intvl > 32767)
        intvl = 32767;
    idle = timeout - count * intvl > 0 ? timeout - count * intvl : 1;
    if (idle > 32767)
        idle = 32767;
    MLN_SYS_CHECK(setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)), st, out);
    MLN_SYS_CHECK(setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)), st, out);
    MLN_SYS_CHECK(setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle)), st, out);
    MLN_SYS_CHECK(setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl)), st, out);
    MLN_SYS_CHECK(setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count)), st, out);
    /* chunks wait in our queues, not the kernel's (docs/STRIPE.md "Dynamic scheduling"): a new
     * lane starts at the least share, and the engine gives it its share of MLN_STRIPE_NOTSENT
     * once it carries chunks (lane_tcp.c lanes_notsent) */
    if (notsent > 0)
        mln_tcp_notsent_set(fd, notsent);
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

/* A listener on addr:*port (*port 0: a free one, set here); the socket or -1 (errno). */
static int listen_on(const mln_stripe_t *s, uint32_t addr, uint16_t *port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = *port, .sin_addr.s_addr = addr};
    socklen_t len = sizeof(sa);
    const int one = 1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

    if (fd < 0)
        return -1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == -1 ||
        mln_tcp_tune(s, fd) != MLN_OK || /* accepted sockets inherit buffers, cc */
        bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == -1 || listen(fd, SOMAXCONN) == -1 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) == -1) {
        const int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    *port = sa.sin_port;
    return fd;
}

static void listeners_close(mln_tcp_state_t *t)
{
    while (t->nlfd > 0)
        close(t->lfds[--t->nlfd]);
}

/* The listeners, all on one port: the card's addresses, and loopback unless MLN_STRIPE_IFACE
 * names the interface (same-host peers use loopback then, tcp_ready).  With no port asked for,
 * the first address picks one and a clash on another address starts over. */
static mln_status_t listen_local(mln_stripe_t *s, mln_tcp_state_t *t, tcp_card_t *mine)
{
    uint32_t addrs[TCP_MAX_ADDRS + 1];
    int naddrs = 0, index = 0;
    char text[INET_ADDRSTRLEN];

    local_card(s, mine);
    if (s->cfg->stripe_addr[0] && mine->naddrs == 0) {
        MLN_ERROR("MLN_STRIPE_IFACE: no IPv4 address on interface '%s'", s->cfg->stripe_addr);
        return MLN_ERR_CONFIG;
    }
    if (!s->cfg->stripe_addr[0])
        addrs[naddrs++] = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < mine->naddrs; i++)
        addrs[naddrs++] = mine->addrs[i];
    for (int r = 0; r < s->wrank; r++)
        index += s->host_of[r] == s->host_of[s->wrank];
    for (int attempt = 0; attempt < 16; attempt++) {
        uint16_t port = s->cfg->stripe_port ? htons((uint16_t)(s->cfg->stripe_port + index)) : 0;
        int fd = -1, i;
        if (s->cfg->stripe_port && s->cfg->stripe_port + index > 65535) {
            MLN_ERROR("MLN_STRIPE_PORT %lld + %d (this rank's index on its host) is past 65535",
                      (long long)s->cfg->stripe_port, index);
            return MLN_ERR_CONFIG;
        }
        for (i = 0; i < naddrs; i++) {
            if ((fd = listen_on(s, addrs[i], &port)) < 0)
                break;
            t->lfds[t->nlfd++] = fd;
        }
        if (fd >= 0) {
            mine->port = port;
            return MLN_OK;
        }
        listeners_close(t);
        if (errno == EADDRINUSE && !s->cfg->stripe_port && i > 0)
            continue; /* the free port of the first address is taken on another: again */
        inet_ntop(AF_INET, &addrs[i], text, sizeof(text));
        MLN_ERROR("tcp lanes: cannot listen on %s:%u: %s%s", text, (unsigned)ntohs(port),
                  strerror(errno),
                  errno == EADDRINUSE && s->cfg->stripe_port ? " (MLN_STRIPE_PORT: the port is "
                                                               "taken)"
                                                             : "");
        return MLN_ERR_SYS;
    }
    MLN_ERROR("tcp lanes: no port free on all of this host's %d lane addresses", naddrs);
    return MLN_ERR_SYS;
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
        t->cards = calloc((size_t)s->wsize, sizeof(*t->cards));
        t->peers = calloc((size_t)s->wsize, sizeof(*t->peers));
        t->in_broken = calloc((size_t)s->wsize, sizeof(int));
    }
    if (t == NULL || t->cards == NULL || t->peers == NULL || t->in_broken == NULL) {
        MLN_ERROR("tcp lanes: out of memory for %d ranks", s->wsize);
        st = MLN_ERR_NOMEM;
    }
    if (st == MLN_OK)
        st = mln_link_job_init(&t->job, s->cfg);
    if (st == MLN_OK)
        st = listen_local(s, t, &mine);
    /* every rank learns whether all could listen before the collectives that need it */
    bad = st != MLN_OK;
    if (MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD) != MPI_SUCCESS)
        return st != MLN_OK ? st : MLN_ERR_MPI;
    if (any_bad)
        return st != MLN_OK ? st : MLN_ERR_PEER; /* that rank logged why */
    MLN_MPI_CHECK(MPI_Allgather(&mine, (int)sizeof(mine), MPI_BYTE, t->cards, (int)sizeof(mine),
                                MPI_BYTE, MPI_COMM_WORLD),
                  st, out);
    {
        MPI_Comm world = MPI_COMM_WORLD;
        MLN_CHECK(mln_link_job_share(&t->job, s->cfg, &world), st, out);
    }
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
        free(o->seal);
        mln_link_wipe(&o->link);
    }
    free(p->out);
    p->out = NULL;
    p->nout = p->nup = p->active = p->burst = 0;
    p->notsent_lanes = p->notsent_nup = 0; /* new lanes get theirs again */
    p->bs.on = 0;
}

void mln_tcp_close(mln_stripe_t *s)
{
    mln_tcp_state_t *t = s->tcp;

    if (t == NULL)
        return;
    for (int p = 0; t->peers && p < s->wsize; p++)
        mln_tcp_out_lanes_close(&t->peers[p]);
    while (t->nin > 0)
        mln_tcp_in_drop(t, t->nin - 1);
    mln_tcp_stash_drop(t, -1);
    listeners_close(t);
    mln_link_job_wipe(&t->job);
    free(t->ins);
    free(t->pfds);
    free(t->cards);
    free(t->peers);
    free(t->in_broken);
    free(t);
    s->tcp = NULL;
}

/* ---- connecting -------------------------------------------------------------------------- */

/* Starts a non-blocking connect of lane p->nout to the address of attempt p->attempt; 0 when it
 * could not even start. */
static int lane_start(mln_stripe_t *s, int peer)
{
    tcp_peer_t *p = &s->tcp->peers[peer];
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = s->tcp->cards[peer].port,
                             .sin_addr.s_addr = p->tries[p->attempt]};
    /* MLN_STRIPE_IFACE: from that interface's address, the one the peer admits lanes from */
    const struct sockaddr_in from = {.sin_family = AF_INET,
                                     .sin_addr.s_addr = s->tcp->cards[s->wrank].addrs[0]};
    const int bind_from = s->cfg->stripe_addr[0] != '\0';
    tcp_out_t *o = &p->out[p->nout];

    *o = (tcp_out_t){.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0),
                     .lane = p->nout};
    if (o->fd < 0 || mln_tcp_tune(s, o->fd) != MLN_OK ||
        (bind_from && bind(o->fd, (const struct sockaddr *)&from, sizeof(from)) == -1) ||
        (connect(o->fd, (struct sockaddr *)&sa, sizeof(sa)) == -1 && errno != EINPROGRESS)) {
        if (o->fd >= 0)
            close(o->fd);
        return 0;
    }
    p->nout++;
    return 1;
}

/* Starts the non-blocking connects of attempt p->attempt: the lanes a peer starts with
 * (MLN_STRIPE_LANES, or auto's first level); 0 when one could not even start. */
static int attempt_start(mln_stripe_t *s, int peer)
{
    tcp_peer_t *p = &s->tcp->peers[peer];
    const int nlanes = mln_tcp_auto_first(s);

    for (p->nout = 0; p->nout < nlanes;) {
        if (!lane_start(s, peer)) {
            while (p->nout > 0)
                close(p->out[--p->nout].fd);
            return 0;
        }
    }
    p->deadline = mln_stripe_now() + TCP_CONNECT_TIMEOUT_S;
    return 1;
}

int mln_tcp_grow(mln_stripe_t *s, int peer, int want)
{
    tcp_peer_t *p = &s->tcp->peers[peer];
    const int from = p->nout;

    if (p->state != PEER_UP || p->grow_stop)
        return 0;
    if (want > p->cap)
        want = p->cap;
    while (p->nout < want && lane_start(s, peer))
        ;
    if (p->nout == from) {
        p->grow_stop = 1;
        return 0;
    }
    MLN_DEBUG("tcp: opening lanes %d-%d to world rank %d", from, p->nout - 1, peer);
    p->grow_deadline = mln_stripe_now() + TCP_CONNECT_TIMEOUT_S;
    return 1;
}

/* Lanes [p->nup, p->nout) did not all open: they are closed (none carried a frame) and the peer
 * opens no more; it keeps the lanes it has. */
static void grow_failed(mln_stripe_t *s, int peer, const char *why)
{
    tcp_peer_t *p = &s->tcp->peers[peer];

    MLN_DEBUG("tcp: more lanes to world rank %d did not open (%s): it keeps %d", peer, why, p->nup);
    while (p->nout > p->nup) {
        tcp_out_t *o = &p->out[--p->nout];
        if (o->fd >= 0)
            close(o->fd);
        mln_link_wipe(&o->link);
    }
    p->grow_stop = 1;
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
    p->cap = mln_stripe_lanes_cap(s); /* a hello names this count: room for every lane */
    p->out = calloc((size_t)p->cap, sizeof(*p->out));
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

/* Lane o of peer became writable while connecting: connected (hello out; in mode none the lane
 * is up) or failed (-1, errno). */
static int lane_connected(mln_stripe_t *s, int peer, tcp_out_t *o)
{
    const tcp_peer_t *p = &s->tcp->peers[peer];
    const mln_link_hello_t h = {
        .lane = (uint32_t)o->lane, .nlanes = (uint32_t)p->cap, .src = s->wrank, .dst = peer};
    unsigned char hello[MLN_LINK_HELLO_BYTES];
    int err = 0;
    socklen_t len = sizeof(err);

    if (getsockopt(o->fd, SOL_SOCKET, SO_ERROR, &err, &len) == -1)
        err = errno;
    if (err != 0) {
        errno = err;
        return -1;
    }
    if (mln_link_hello_make(&o->link, &s->tcp->job, &h, hello) != MLN_OK) {
        errno = EIO;
        return -1;
    }
    /* a fresh socket takes the hello at once */
    if (send(o->fd, hello, sizeof(hello), MSG_NOSIGNAL | MSG_DONTWAIT) != sizeof(hello))
        return -1;
    o->hello_sent = 1;
    if (s->tcp->job.mode == MLN_LINK_NONE) {
        mln_link_plain(&o->link, &s->tcp->job);
        o->connected = 1;
    }
    return 1;
}

/* Lane o waits for its listener's challenge: 1 when it came and proved the job key (our
 * response is out, the lane is up), 0 while it has not come whole, -1 when the lane failed
 * (*why says how). */
static int lane_challenge(int peer, tcp_out_t *o, const char **why)
{
    unsigned char resp[MLN_LINK_RESPONSE_BYTES];
    const ssize_t n = recv(o->fd, o->hb + o->hgot, sizeof(o->hb) - o->hgot, MSG_DONTWAIT);

    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return 0;
    if (n <= 0) {
        *why = n == 0 ? "closed in the handshake (it did not admit our hello)" : strerror(errno);
        return -1;
    }
    o->hgot += (size_t)n;
    if (o->hgot < sizeof(o->hb))
        return 0;
    if (!mln_link_challenge_check(&o->link, o->hb, o->hgot, resp)) {
        MLN_ERROR("tcp: the listener of world rank %d does not prove this job's key (lane %d): "
                  "not that rank; its address is not used",
                  peer, o->lane);
        *why = "the handshake failed";
        return -1;
    }
    if (send(o->fd, resp, sizeof(resp), MSG_NOSIGNAL | MSG_DONTWAIT) != sizeof(resp)) {
        *why = strerror(errno);
        return -1;
    }
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
        int up = 1, failed = 0, grown = 0;
        const int growing = p->state == PEER_UP && p->nup < p->nout;

        if (p->state != PEER_CONNECTING && !growing)
            continue;
        const char *why = NULL;

        for (int i = growing ? p->nup : 0; i < p->nout && !failed; i++) {
            tcp_out_t *o = &p->out[i];
            if (o->connected)
                continue;
            for (int k = 0; k < n; k++) {
                if (pfds[k].fd != o->fd ||
                    !(pfds[k].revents &
                      (o->hello_sent ? POLLIN | POLLERR | POLLHUP : POLLOUT | POLLERR | POLLHUP)))
                    continue;
                if (!o->hello_sent) {
                    if (lane_connected(s, peer, o) < 0) {
                        failed = 1;
                        why = strerror(errno);
                    }
                } else if (lane_challenge(peer, o, &why) < 0) {
                    failed = 1;
                }
                moved = grown = 1;
                break;
            }
            up &= o->connected;
        }
        if (growing) {
            while (!failed && p->nup < p->nout && p->out[p->nup].connected)
                p->nup++;
            if (failed)
                grow_failed(s, peer, why);
            else if (p->nup < p->nout && now > p->grow_deadline && !grown)
                grow_failed(s, peer, "timed out");
            continue;
        }
        if (failed) {
            attempt_failed(s, peer, why);
        } else if (up) {
            char text[INET_ADDRSTRLEN];
            inet_ntop(AF_INET, &p->tries[p->attempt], text, sizeof(text));
            MLN_DEBUG("tcp: %d lanes to world rank %d via %s:%u", p->nout, peer, text,
                      (unsigned)ntohs(t->cards[peer].port));
            p->state = PEER_UP;
            p->nup = p->active = p->nout;
            mln_tcp_auto_start(s, peer, now);
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
    free(t->ins[i]->stage);
    mln_link_wipe(&t->ins[i]->link);
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

size_t mln_tcp_wire_head(const mln_tcp_state_t *t)
{
    return sizeof(tcp_frame_t) + mln_link_head_tag(&t->job);
}

static int is_loopback(uint32_t addr)
{
    return (ntohl(addr) >> 24) == 127;
}

/* Is addr one that world rank r's lanes come from (r < 0: any rank's)?  Loopback is a rank of
 * this host's. */
static int rank_address(const mln_stripe_t *s, int r, uint32_t addr)
{
    const mln_tcp_state_t *t = s->tcp;

    for (int q = r < 0 ? 0 : r; q < (r < 0 ? s->wsize : r + 1); q++) {
        if (is_loopback(addr) && s->host_of[q] == s->host_of[s->wrank])
            return 1;
        for (int i = 0; i < t->cards[q].naddrs; i++)
            if (t->cards[q].addrs[i] == addr)
                return 1;
    }
    return 0;
}

/* The lane is admitted: src and lane are its (a left-over of an attempt src gave up yields). */
static int lane_admit(mln_stripe_t *s, tcp_in_t *in)
{
    mln_tcp_state_t *t = s->tcp;
    const mln_link_hello_t *h = &in->hello;

    if (t->in_broken[h->src]) {
        MLN_DEBUG("tcp: lane %u from world rank %d after its lanes failed: closed", h->lane,
                  h->src);
        return 0;
    }
    for (int i = 0; i < t->nin; i++) {
        tcp_in_t *old = t->ins[i];
        if (old == in || old->src != h->src || old->lane != (int)h->lane)
            continue;
        if (old->used) {
            MLN_WARN("tcp: a second lane %u from world rank %d: closed", h->lane, h->src);
            return 0;
        }
        /* left over from an attempt src gave up: expired, its end is no news */
        old->src = -1;
        old->lane = -1;
        old->state = IN_HELLO;
        old->hgot = 0;
    }
    in->src = h->src;
    in->lane = (int)h->lane;
    in->state = IN_FRAME;
    in->hgot = 0;
    return 1;
}

int mln_tcp_hello_check(mln_stripe_t *s, tcp_in_t *in)
{
    mln_tcp_state_t *t = s->tcp;
    unsigned char challenge[MLN_LINK_CHALLENGE_BYTES];
    char text[INET_ADDRSTRLEN];
    const char *why = NULL;

    inet_ntop(AF_INET, &in->addr, text, sizeof(text));
    if (!mln_link_hello_parse(&t->job, in->hb, sizeof(in->hb), s->wsize, s->wrank, &in->hello,
                              &why)) {
        MLN_WARN("tcp: a connection from %s that is not a lane of this job to this rank (%s): "
                 "closed",
                 text, why);
        return 0;
    }
    if (!rank_address(s, in->hello.src, in->addr)) {
        MLN_WARN("tcp: a hello from %s names world rank %d, whose lanes do not come from there: "
                 "closed",
                 text, in->hello.src);
        return 0;
    }
    if (t->job.mode == MLN_LINK_NONE) {
        mln_link_plain(&in->link, &t->job);
        return lane_admit(s, in);
    }
    if (mln_link_challenge_make(&in->link, &t->job, in->hb, challenge) != MLN_OK ||
        send(in->fd, challenge, sizeof(challenge), MSG_NOSIGNAL | MSG_DONTWAIT) !=
            sizeof(challenge))
        return 0;
    in->state = IN_RESPONSE;
    in->hgot = 0;
    return 1;
}

int mln_tcp_response_check(mln_stripe_t *s, tcp_in_t *in)
{
    char text[INET_ADDRSTRLEN];

    if (!mln_link_response_check(&in->link, in->hb, MLN_LINK_RESPONSE_BYTES)) {
        inet_ntop(AF_INET, &in->addr, text, sizeof(text));
        MLN_WARN("tcp: a connection from %s naming world rank %d lane %u does not prove the "
                 "keys of this job and of that rank (a replayed or forged hello): closed",
                 text, in->hello.src, in->hello.lane);
        return 0;
    }
    return lane_admit(s, in);
}

void mln_tcp_accept(mln_stripe_t *s)
{
    mln_tcp_state_t *t = s->tcp;
    const double now = mln_stripe_now();

    if (now < t->accept_paused)
        return;
    for (int k = 0; k < t->nlfd;) {
        struct sockaddr_in sa;
        socklen_t salen = sizeof(sa);
        int fd = accept4(t->lfds[k], (struct sockaddr *)&sa, &salen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        tcp_in_t *in;
        if (fd < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            k++; /* this listener is drained */
            continue;
        }
        if (fd < 0 && (errno == EINTR || errno == ECONNABORTED))
            continue;
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* the connection stays queued and the listener readable: rest, no busy loop */
                MLN_WARN("tcp: cannot accept a lane: %s (the listener rests for %.1f s)",
                         strerror(errno), TCP_HOUSEKEEPING_S);
                t->accept_paused = now + TCP_HOUSEKEEPING_S;
            }
            return;
        }
        if (sa.sin_family != AF_INET || !rank_address(s, -1, sa.sin_addr.s_addr)) {
            char text[INET_ADDRSTRLEN];
            inet_ntop(AF_INET, &sa.sin_addr, text, sizeof(text));
            if (!t->warned_stranger) /* once: a scan must not flood the log */
                MLN_WARN("tcp: a connection from %s, no rank's address: closed unread (said "
                         "once)",
                         text);
            t->warned_stranger = 1;
            close(fd);
            continue;
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
        in->addr = sa.sin_addr.s_addr;
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
        if (in->state != IN_HELLO && in->state != IN_RESPONSE)
            continue;
        if (now > in->deadline) {
            MLN_DEBUG("tcp: a connection did not finish its handshake within %.0f s: closed",
                      TCP_HELLO_TIMEOUT_S);
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
    /* a look every eighth of the timeout (at most every second): the verdict comes at most
     * that long after the timeout */
    const double period = s->cfg->stripe_timeout / 8.0 < TCP_EVIDENCE_PERIOD_S
                              ? s->cfg->stripe_timeout / 8.0
                              : TCP_EVIDENCE_PERIOD_S;

    for (int peer = 0; peer < s->wsize; peer++) {
        tcp_peer_t *p = &t->peers[peer];
        if (p->state != PEER_UP || now - p->checked < period)
            continue;
        p->checked = now;
        for (int i = 0; i < p->nup; i++) {
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

/* ---- for reports ------------------------------------------------------------------------ */

const char *mln_link_cipher_in_use(void)
{
    const mln_stripe_t *s = mln_stripe_engine();

    if (s == NULL || s->tcp == NULL)
        return NULL;
    return s->tcp->job.mode == MLN_LINK_NONE ? "none" : mln_link_cipher_name(s->tcp->job.cipher);
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

/* The hello this rank would send on lane `lane` (of MLN_STRIPE_LANES) to peer_world, into out
 * (a stranger replays it in a test); 0, or -1. */
int mln_tcp_test_hello(mln_stripe_t *s, int peer_world, int lane, unsigned char *out)
{
    const mln_link_hello_t h = {.lane = (uint32_t)lane,
                                .nlanes = (uint32_t)mln_stripe_lanes_cap(s),
                                .src = s->wrank,
                                .dst = peer_world};
    mln_link_t l;
    const mln_status_t st = mln_link_hello_make(&l, &s->tcp->job, &h, out);

    mln_link_wipe(&l);
    return st == MLN_OK ? 0 : -1;
}

/* The connector's half of a test lane's handshake, on a thread of its own: the listener
 * answers only when its rank makes progress, which the test's rank may be waiting for. */
typedef struct test_answer {
    int fd; /* a dup of the test's descriptor, closed here */
    mln_link_t link;
} test_answer_t;

static void *test_answer(void *arg)
{
    test_answer_t *a = arg;
    unsigned char challenge[MLN_LINK_CHALLENGE_BYTES], resp[MLN_LINK_RESPONSE_BYTES];

    if (recv(a->fd, challenge, sizeof(challenge), MSG_WAITALL) == sizeof(challenge) &&
        mln_link_challenge_check(&a->link, challenge, sizeof(challenge), resp))
        (void)!send(a->fd, resp, sizeof(resp), MSG_NOSIGNAL);
    close(a->fd);
    mln_link_wipe(&a->link);
    free(a);
    return NULL;
}

/* A blocking connection to peer_world's listener (loopback on the same host, else its first
 * address), as a test's forged lanes make it; the fd, or -1. */
static int test_dial(const mln_stripe_t *s, int peer_world)
{
    const tcp_card_t *card = &s->tcp->cards[peer_world];
    const struct sockaddr_in sa = {.sin_family = AF_INET,
                                   .sin_port = card->port,
                                   .sin_addr.s_addr = s->host_of[peer_world] == s->host_of[s->wrank]
                                                          ? htonl(INADDR_LOOPBACK)
                                                          : card->addrs[0]};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd >= 0 && connect(fd, (const struct sockaddr *)&sa, sizeof(sa)) == -1) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* A connection to peer's listener (blocking, loopback or its first address) that opens with
 * a hello naming lane/nlanes/dst and, when the listener admits that hello, answers its
 * challenge as a lane would (from a thread: within 10 s).  A test forges lanes with it.  The
 * fd (closed by the listener when it refused the hello), or -1. */
int mln_tcp_test_connect(mln_stripe_t *s, int peer_world, int lane, int nlanes, int dst_world)
{
    const mln_link_hello_t h = {
        .lane = (uint32_t)lane, .nlanes = (uint32_t)nlanes, .src = s->wrank, .dst = dst_world};
    const struct timeval wait = {.tv_sec = 10};
    unsigned char hello[MLN_LINK_HELLO_BYTES];
    test_answer_t *a = NULL;
    pthread_attr_t attr;
    pthread_t th;
    int fd = test_dial(s, peer_world), ok;

    if (fd < 0)
        return -1;
    if (lane < 0)
        return fd;
    a = calloc(1, sizeof(*a));
    ok = a != NULL && mln_link_hello_make(&a->link, &s->tcp->job, &h, hello) == MLN_OK &&
         send(fd, hello, sizeof(hello), MSG_NOSIGNAL) == sizeof(hello);
    if (ok && s->tcp->job.mode != MLN_LINK_NONE) {
        a->fd = dup(fd);
        ok = a->fd >= 0 && setsockopt(a->fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait)) == 0 &&
             pthread_attr_init(&attr) == 0;
        if (ok) {
            pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
            ok = pthread_create(&th, &attr, test_answer, a) == 0;
            pthread_attr_destroy(&attr);
            if (ok)
                return fd; /* the thread owns a */
        }
        if (a->fd >= 0)
            close(a->fd);
    }
    free(a);
    if (!ok) {
        close(fd);
        return -1;
    }
    return fd;
}

/* A rank that holds the job key but not `claimed`'s secret key opens a lane to peer_world in
 * claimed's name: its hello, then (the challenge cannot be checked: the pair key differs) a
 * response of zeros.  2 when the challenge did check (an impostor could go on), 1 when the
 * listener closed the connection within 10 s, 0 when it did not, -1 when no connection. */
int mln_tcp_test_impostor(mln_stripe_t *s, int peer_world, int claimed)
{
    const mln_link_hello_t h = {
        .lane = 0, .nlanes = (uint32_t)mln_stripe_lanes_cap(s), .src = claimed, .dst = peer_world};
    const struct timeval wait = {.tv_sec = 10};
    unsigned char hello[MLN_LINK_HELLO_BYTES], challenge[MLN_LINK_CHALLENGE_BYTES];
    unsigned char resp[MLN_LINK_RESPONSE_BYTES] = {0}, b;
    mln_link_t l;
    int fd = test_dial(s, peer_world), rc = 0;

    if (fd < 0)
        return -1;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait)) == -1 ||
        mln_link_hello_make(&l, &s->tcp->job, &h, hello) != MLN_OK ||
        send(fd, hello, sizeof(hello), MSG_NOSIGNAL) != sizeof(hello)) {
        close(fd);
        return -1;
    }
    if (recv(fd, challenge, sizeof(challenge), MSG_WAITALL) == sizeof(challenge)) {
        if (mln_link_challenge_check(&l, challenge, sizeof(challenge), resp))
            rc = 2;
        (void)!send(fd, resp, sizeof(resp), MSG_NOSIGNAL);
    }
    if (rc == 0)
        rc = recv(fd, &b, 1, 0) == 0 ? 1 : 0;
    mln_link_wipe(&l);
    close(fd);
    return rc;
}
