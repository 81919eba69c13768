/*
 * gateway.c - mln-gateway's loop (docs/RELAY.md "The gateway"): one process per front-end
 * and trunk joins its site's ranks (inside address) to the gateways of the same trunk at every
 * other site (WAN address), full mesh, and forwards frames between them.
 *
 *   rank r of site a --inside--> gateway (a, t) ==WAN==> gateway (b, t) --inside--> rank q
 *
 * One thread, epoll, level-triggered, blocking waits bounded by the nearest deadline (never a
 * busy loop).  A frame is read whole (relay_io.c opens and checks it against the link's
 * scope), its payload copied into a buffer of its own (or the connection's buffer taken, for
 * large ones), queued on the link towards its destination and written at once: no batching
 * timer, TCP_NODELAY everywhere.  Cost per frame: two copies at most (socket -> buffer ->
 * socket) plus the link layer's seal and open.
 *
 * Memory: frames queued towards one destination (a local rank, a peer gateway) are bounded by
 * the credit the ranks may have in flight there, MLN_RELAY_WINDOW per pair, plus slack for
 * ACK and MATCHED; a link that pushes past it breaks the credit rule and is closed.
 *
 * Failures: a peer gateway lost (or never there by --timeout), a local rank lost without BYE
 * (or never there), a protocol breach: FAIL (one line) to every local rank and every peer
 * gateway, then the gateway flushes (bounded), ends its links and exits 1.  ABORT from a rank
 * goes to every other local rank and every peer gateway (which hands it to its ranks only).
 * Every rank of the site said BYE and left, every peer gateway said BYE or left: exit 0.
 */
#define _GNU_SOURCE /* accept4 */
#include "gateway_int.h"

#include "mln_core.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#define GW_MAX_PENDING 64        /* accepted connections in their handshake, at most */
#define GW_STEAL_MIN (32u << 10) /* payloads from this size on: the connection's buffer */
#define GW_FLUSH_S 5.0           /* ending: flushing what is queued, at most (and --timeout) */
#define GW_RETRY_MIN_S 0.05      /* connecting to a peer gateway: first retry, doubling ... */
#define GW_RETRY_MAX_S 1.0       /* ... up to this */
#define GW_SLACK ((uint64_t)MLN_RELAY_FRAME_MAX + 65536u * MLN_RELAY_FRAME_COST)

enum { LK_INSIDE = 1, LK_WAN, LK_OUT, LK_RANK, LK_PEER };
/* a local rank's, a peer gateway's state */
enum { ST_NONE = 0, ST_UP, ST_BYE, ST_GONE };

typedef struct gw_link {
    mln_relay_conn_t c;
    int kind;            /* LK_*: accepted inside / on the WAN (handshake), connecting out, up */
    int dest;            /* LK_RANK, LK_PEER, LK_OUT: its destination index */
    int dead;            /* closed: freed at the end of the loop's turn */
    int shut;            /* ending: our side is shut down */
    uint32_t registered; /* the epoll events asked for */
} gw_link_t;

/* A destination: local rank i (i < site size), or peer site s (size + s). */
typedef struct gw_dest {
    gw_link_t *link;                 /* up, or NULL */
    mln_relay_oframe_t *head, *tail; /* frames waiting for it to come */
    uint64_t queued, cap;            /* credit units queued towards it, and the bound */
    int state;                       /* ST_* */
    double retry_at, retry_wait;     /* a peer we connect to: the next attempt */
    char last_why[200];              /* a peer we connect to: why the last attempt failed */
    uint64_t frames_in, frames_out, bytes_in, bytes_out;
} gw_dest_t;

typedef struct gw_frame {
    mln_relay_oframe_t f;
    struct gw *gw;
    int dest;
    uint64_t cost;
} gw_frame_t;

typedef struct gw {
    const gw_opts_t *o;
    const mln_relay_sites_t *s;
    mln_link_job_t job;
    int ep, lfd_in, lfd_wan, sfd;
    int me, nranks, endpoints, first, size, ndest;
    gw_dest_t *dest;
    gw_link_t **links;
    int nlinks, cap_links;
    double start;
    int ending;           /* 0, or the exit status once FAIL or ABORT went out */
    double end_at;        /* ending: exit by then */
    int byes_sent;        /* every rank said BYE: BYE went to the peer gateways */
    int warned_handshake; /* a failed handshake was logged */
    uint64_t dropped;
} gw_t;

/* ---- names for log lines ------------------------------------------------------------------- */

static const char *dest_name(const gw_t *g, int d, char *buf, size_t len)
{
    if (d < g->size)
        snprintf(buf, len, "rank %d of site %s", g->first + d, g->s->name[g->o->site]);
    else
        snprintf(buf, len, "the gateway of site %s (trunk %d)", g->s->name[d - g->size],
                 g->o->trunk);
    return buf;
}

/* ---- sockets ------------------------------------------------------------------------------- */

/* TCP_NODELAY; keepalive; on the WAN also TCP_USER_TIMEOUT: a dead front-end is noticed
 * within about --timeout. */
static void tune(const gw_t *g, int fd, int wan)
{
    const int one = 1, count = 3,
              timeout = (int)(g->o->timeout + 0.5) > 0 ? (int)(g->o->timeout + 0.5) : 1;
    const int intvl = timeout / (2 * count) > 0 ? timeout / (2 * count) : 1;
    const int idle = timeout - count * intvl > 0 ? timeout - count * intvl : 1;
    const unsigned user_ms = (unsigned)timeout * 1000u;

    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == -1 ||
        setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) == -1 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle)) == -1 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl)) == -1 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count)) == -1 ||
        (wan && setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_ms, sizeof(user_ms)) == -1))
        MLN_WARN("socket options: %s", strerror(errno));
}

static int listen_on(struct sockaddr_in *sa)
{
    const int one = 1;
    socklen_t len = sizeof(*sa);
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == -1 ||
        bind(fd, (struct sockaddr *)sa, sizeof(*sa)) == -1 || listen(fd, SOMAXCONN) == -1 ||
        getsockname(fd, (struct sockaddr *)sa, &len) == -1) {
        const int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    return fd;
}

static int ep_add(gw_t *g, int fd, uint32_t events, void *ptr)
{
    struct epoll_event ev = {.events = events, .data.ptr = ptr};

    return epoll_ctl(g->ep, EPOLL_CTL_ADD, fd, &ev);
}

/* ---- links --------------------------------------------------------------------------------- */

static gw_link_t *link_new(gw_t *g, int kind, int fd)
{
    gw_link_t *l;

    if (g->nlinks == g->cap_links) {
        const int cap = g->cap_links ? 2 * g->cap_links : 32;
        gw_link_t **links = realloc(g->links, (size_t)cap * sizeof(*links));
        if (links == NULL)
            return NULL;
        g->links = links;
        g->cap_links = cap;
    }
    l = calloc(1, sizeof(*l));
    if (l == NULL)
        return NULL;
    l->kind = kind;
    l->dest = -1;
    l->c.fd = fd;
    if (ep_add(g, fd, EPOLLIN, l) == -1) {
        free(l);
        return NULL;
    }
    l->registered = EPOLLIN;
    g->links[g->nlinks++] = l;
    return l;
}

static void link_close(gw_t *g, gw_link_t *l, const char *why)
{
    if (l->dead)
        return;
    l->dead = 1;
    if (l->dest >= 0 && g->dest[l->dest].link == l) {
        gw_dest_t *d = &g->dest[l->dest];
        d->link = NULL;
        d->frames_in += l->c.frames_in;
        d->frames_out += l->c.frames_out;
        d->bytes_in += l->c.bytes_in;
        d->bytes_out += l->c.bytes_out;
    }
    if (l->c.fd >= 0)
        epoll_ctl(g->ep, EPOLL_CTL_DEL, l->c.fd, NULL);
    mln_relay_conn_close(&l->c, why); /* queued frames: done(0) */
}

/* Frees the links closed during this turn of the loop. */
static void links_reap(gw_t *g)
{
    int k = 0;

    for (int i = 0; i < g->nlinks; i++) {
        if (g->links[i]->dead)
            free(g->links[i]);
        else
            g->links[k++] = g->links[i];
    }
    g->nlinks = k;
}

/* ---- frames -------------------------------------------------------------------------------- */

static void frame_done(void *cookie, int ok)
{
    gw_frame_t *gf = cookie;

    (void)ok;
    gf->gw->dest[gf->dest].queued -= gf->cost;
    free(gf);
}

static void pending_drop(gw_t *g, gw_dest_t *d)
{
    while (d->head != NULL) {
        mln_relay_oframe_t *f = d->head;
        d->head = f->next;
        free(f->own);
        g->dropped++;
        frame_done(f->cookie, 0);
    }
    d->tail = NULL;
}

static void fail_run(gw_t *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void link_lost(gw_t *g, gw_link_t *l);

/* Queues gf towards its destination and writes at once; the frame is the link's then. */
static void deliver(gw_t *g, gw_frame_t *gf)
{
    gw_dest_t *d = &g->dest[gf->dest];

    d->queued += gf->cost;
    if (d->link == NULL) {
        gf->f.next = NULL;
        if (d->tail)
            d->tail->next = &gf->f;
        else
            d->head = &gf->f;
        d->tail = &gf->f;
        return;
    }
    mln_relay_conn_queue(&d->link->c, &gf->f);
    if (mln_relay_conn_write(&d->link->c) < 0)
        link_lost(g, d->link);
}

/* A frame of ours for destination d: header h, payload (len bytes) copied or `owned`. */
static gw_frame_t *frame_make(gw_t *g, int d, const mln_relay_hdr_t *h, const void *payload,
                              unsigned char *owned)
{
    gw_frame_t *gf = calloc(1, sizeof(*gf));

    if (gf == NULL) {
        free(owned);
        return NULL;
    }
    if (owned == NULL && h->len > 0) {
        owned = malloc(h->len);
        if (owned == NULL) {
            free(gf);
            return NULL;
        }
        memcpy(owned, payload, h->len);
    }
    gf->f.h = *h;
    gf->f.own = owned;
    gf->f.payload = owned;
    gf->f.done = frame_done;
    gf->f.cookie = gf;
    gf->gw = g;
    gf->dest = d;
    gf->cost = h->len + MLN_RELAY_FRAME_COST;
    return gf;
}

/* A control frame (ABORT, FAIL, BYE) with text to destination d (when it may still come). */
static void send_control(gw_t *g, int d, const mln_relay_hdr_t *h, const void *text)
{
    gw_frame_t *gf;

    if (g->dest[d].state == ST_GONE || (d >= g->size && d - g->size == g->o->site))
        return;
    gf = frame_make(g, d, h, text, NULL);
    if (gf == NULL) {
        MLN_ERROR("out of memory for a frame");
        return;
    }
    deliver(g, gf);
}

static void fail_run(gw_t *g, const char *fmt, ...)
{
    char line[MLN_RELAY_TEXT_MAX], text[MLN_RELAY_TEXT_MAX + 128];
    va_list ap;
    size_t len;
    mln_relay_hdr_t h = {
        .type = MLN_RELAY_FAIL, .trunk = (uint16_t)g->o->trunk, .dst = MLN_RELAY_ALL, .src = g->me};

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (g->ending) {
        MLN_INFO("after the end: %s", line);
        return;
    }
    MLN_ERROR("%s: the run cannot go on (FAIL to the ranks and the peer gateways)", line);
    /* the line every rank prints as it comes (relay.h): which gateway, what, and the verdict */
    snprintf(text, sizeof(text), "multilane grid: gateway %d of site %s: %s: the run cannot go on",
             g->o->trunk, g->s->name[g->o->site], line);
    len = strlen(text);
    h.len = (uint32_t)(len < MLN_RELAY_TEXT_MAX ? len : MLN_RELAY_TEXT_MAX);
    g->ending = GW_EXIT_FAILED;
    g->end_at = mln_relay_now() + (g->o->timeout < GW_FLUSH_S ? g->o->timeout : GW_FLUSH_S);
    for (int d = 0; d < g->ndest; d++) /* (those in their handshake get it once up) */
        send_control(g, d, &h, text);
}

/* The link is gone (its conn died or is to be closed): what that means for the run. */
static void link_lost(gw_t *g, gw_link_t *l)
{
    char name[96], why[200];
    const int d = l->dest;

    if (l->dead)
        return;
    snprintf(why, sizeof(why), "%s", l->c.why[0] ? l->c.why : "closed");
    link_close(g, l, NULL);
    if (l->kind == LK_INSIDE || l->kind == LK_WAN) { /* said once: a scan must not flood */
        MLN_LOG_AT(g->warned_handshake ? MLN_LOG_INFO : MLN_LOG_WARN,
                   "a connection on the %s address failed its handshake: %s%s",
                   l->kind == LK_INSIDE ? "inside" : "WAN", why,
                   g->warned_handshake ? "" : " (said once)");
        g->warned_handshake = 1;
        return;
    }
    if (l->kind == LK_OUT) { /* connecting to a peer: again, unless it refused us */
        gw_dest_t *p = &g->dest[d];
        snprintf(p->last_why, sizeof(p->last_why), "%s", why);
        if (l->c.hs_connected) {
            fail_run(g, "%s refused this gateway (%s)", dest_name(g, d, name, sizeof(name)), why);
            return;
        }
        p->retry_wait = p->retry_wait > 0 ? 2 * p->retry_wait : GW_RETRY_MIN_S;
        if (p->retry_wait > GW_RETRY_MAX_S)
            p->retry_wait = GW_RETRY_MAX_S;
        p->retry_at = mln_relay_now() + p->retry_wait;
        MLN_DEBUG("%s: %s (again in %.2f s)", dest_name(g, d, name, sizeof(name)), why,
                  p->retry_wait);
        return;
    }
    dest_name(g, d, name, sizeof(name));
    if (g->dest[d].state == ST_BYE || g->ending) {
        MLN_DEBUG("%s left (%s)", name, why);
        g->dest[d].state = ST_GONE;
        pending_drop(g, &g->dest[d]);
        return;
    }
    g->dest[d].state = ST_GONE;
    pending_drop(g, &g->dest[d]);
    if (strstr(why, "closed by the peer") == why && why[strlen("closed by the peer")] == '\0')
        snprintf(why, sizeof(why), "closed without BYE");
    fail_run(g, "%s lost (%s)", name, why);
}

/* A breach of the rules by link l: one line, the link closed (and the run fails with it). */
static void breach(gw_t *g, gw_link_t *l, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void breach(gw_t *g, gw_link_t *l, const char *fmt, ...)
{
    char name[96];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(l->c.why, sizeof(l->c.why), fmt, ap);
    va_end(ap);
    MLN_WARN("%s: %s: its link is closed", dest_name(g, l->dest, name, sizeof(name)), l->c.why);
    link_lost(g, l);
}

/* DATA, ACK, MATCHED: to the link of dst's rank here, or to dst's site's gateway. */
static void route(gw_t *g, gw_link_t *from, const mln_relay_hdr_t *h, const unsigned char *pl)
{
    const int site = mln_relay_site_of(g->s, h->dst);
    const int d = site == g->o->site ? h->dst - g->first : g->size + site;
    gw_dest_t *dd = &g->dest[d];
    unsigned char *owned = NULL;
    gw_frame_t *gf;
    char name[96];

    if (site < 0 || (from->kind == LK_PEER && site != g->o->site)) {
        breach(g, from, "a frame for rank %d, which this link cannot reach", h->dst);
        return;
    }
    if (dd->state == ST_GONE || g->ending) {
        g->dropped++; /* for a rank that left: as mln_relay_close says */
        return;
    }
    if (dd->queued + h->len + MLN_RELAY_FRAME_COST > dd->cap) {
        breach(g, from, "credit violation: %llu bytes queued for %s (bound %llu)",
               (unsigned long long)dd->queued, dest_name(g, d, name, sizeof(name)),
               (unsigned long long)dd->cap);
        return;
    }
    if (h->len >= GW_STEAL_MIN) { /* take the connection's buffer: no copy */
        owned = from->c.rbuf;
        from->c.rbuf = NULL;
        from->c.rbuf_cap = 0;
    }
    gf = frame_make(g, d, h, pl, owned);
    if (gf == NULL) {
        fail_run(g, "gateway out of memory");
        return;
    }
    deliver(g, gf);
}

static void on_frame(gw_t *g, gw_link_t *l, const mln_relay_hdr_t *h, const unsigned char *pl)
{
    char name[96], text[MLN_RELAY_TEXT_MAX + 1];

    if (h->trunk != g->o->trunk) {
        breach(g, l, "a frame of trunk %u on trunk %d", (unsigned)h->trunk, g->o->trunk);
        return;
    }
    switch (h->type) {
    case MLN_RELAY_DATA:
    case MLN_RELAY_ACK:
    case MLN_RELAY_MATCHED:
        route(g, l, h, pl);
        return;
    case MLN_RELAY_BYE:
        g->dest[l->dest].state = ST_BYE;
        MLN_DEBUG("%s said BYE", dest_name(g, l->dest, name, sizeof(name)));
        return;
    case MLN_RELAY_ABORT:
    case MLN_RELAY_FAIL:
        break;
    default:
        return;
    }
    /* ABORT from a rank: the other local ranks and every peer gateway; from a peer gateway,
     * and FAIL: the local ranks only */
    memcpy(text, pl, h->len);
    text[h->len] = '\0';
    for (char *p = text; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    if (!g->ending)
        MLN_ERROR("%s %s: %s", h->type == MLN_RELAY_ABORT ? "ABORT from" : "FAIL from",
                  dest_name(g, l->dest, name, sizeof(name)), text);
    for (int d = 0; d < g->ndest; d++)
        if (d != l->dest && (d < g->size || (h->type == MLN_RELAY_ABORT && l->kind == LK_RANK)))
            send_control(g, d, h, pl);
    if (!g->ending) {
        g->ending = GW_EXIT_FAILED;
        g->end_at = mln_relay_now() + (g->o->timeout < GW_FLUSH_S ? g->o->timeout : GW_FLUSH_S);
    }
}

/* ---- connections up ------------------------------------------------------------------------ */

/* A handshake done: is the far end welcome here?  Then it becomes its destination's link. */
static void link_up(gw_t *g, gw_link_t *l)
{
    const gw_opts_t *o = g->o;
    const int peer = l->c.peer;
    const int gw_site = peer >= g->nranks ? (peer - g->nranks) / MLN_RELAY_MAX_TRUNKS : -1;
    int d = -1;
    gw_dest_t *dd;
    char name[96];

    if (l->c.trunk != o->trunk || l->c.trunks != o->trunks) {
        MLN_WARN("endpoint %d came for trunk %d of %d (this is trunk %d of %d): closed", peer,
                 l->c.trunk, l->c.trunks, o->trunk, o->trunks);
    } else if (l->kind == LK_INSIDE) {
        if (peer >= g->first && peer - g->first < g->size)
            d = peer - g->first;
        else
            MLN_WARN("endpoint %d on the inside address is no rank of site %s: closed", peer,
                     g->s->name[o->site]);
    } else if (l->kind == LK_WAN) {
        if (gw_site >= 0 && gw_site < o->site &&
            peer == mln_relay_gw_id(g->nranks, gw_site, o->trunk))
            d = g->size + gw_site;
        else
            MLN_WARN("endpoint %d on the WAN address is no gateway of a lower site on trunk %d: "
                     "closed",
                     peer, o->trunk);
    } else {
        d = l->dest; /* LK_OUT: the peer we dialled (relay_io.c checked its hello) */
    }
    if (d >= 0 && g->dest[d].state != ST_NONE) {
        MLN_WARN("endpoint %d connected twice: the second is closed", peer);
        d = -1;
    }
    if (d < 0) {
        link_close(g, l, "not welcome");
        return;
    }
    dd = &g->dest[d];
    l->dest = d;
    l->kind = d < g->size ? LK_RANK : LK_PEER;
    l->c.scope = (mln_relay_scope_t){
        .nranks = g->nranks, .trunks = o->trunks, .from_rank = -1, .to_rank = -1};
    if (d < g->size) {
        l->c.scope.from_rank = peer;
    } else {
        const int s = d - g->size;
        l->c.scope.src_first = g->s->first[s];
        l->c.scope.src_count = g->s->size[s];
        l->c.scope.dst_first = g->first;
        l->c.scope.dst_count = g->size;
        l->c.scope.peer_gw = mln_relay_gw_id(g->nranks, s, o->trunk);
        tune(g, l->c.fd, 1);
    }
    dd->link = l;
    dd->state = ST_UP;
    MLN_INFO("%s is up", dest_name(g, d, name, sizeof(name)));
    while (dd->head != NULL) { /* what waited for it */
        mln_relay_oframe_t *f = dd->head;
        dd->head = f->next;
        mln_relay_conn_queue(&l->c, f);
    }
    dd->tail = NULL;
    if (l->c.head != NULL && mln_relay_conn_write(&l->c) < 0)
        link_lost(g, l);
}

static void accept_all(gw_t *g, int lfd, int kind)
{
    for (;;) {
        const int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        gw_link_t *l, *oldest = NULL;
        int pending = 0;

        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                MLN_WARN("accept: %s", strerror(errno));
            return;
        }
        tune(g, fd, kind == LK_WAN);
        for (int i = 0; i < g->nlinks; i++) {
            gw_link_t *p = g->links[i];
            if (p->dead || (p->kind != LK_INSIDE && p->kind != LK_WAN))
                continue;
            pending++;
            if (oldest == NULL || p->c.hs_deadline < oldest->c.hs_deadline)
                oldest = p;
        }
        if (pending >= GW_MAX_PENDING && oldest != NULL) {
            MLN_WARN("more than %d connections in their handshake: the oldest is closed",
                     GW_MAX_PENDING);
            link_close(g, oldest, "too many handshakes");
        }
        l = link_new(g, kind, fd);
        if (l == NULL) {
            close(fd);
            MLN_WARN("no room for a connection: closed");
            continue;
        }
        mln_relay_conn_accept(&l->c, fd, &g->job, g->endpoints, g->me, g->o->timeout);
    }
}

/* Dials peer site s (a higher one). */
static void dial(gw_t *g, int s)
{
    const int d = g->size + s;
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    const double left = g->start + g->o->timeout - mln_relay_now();
    gw_link_t *l;

    g->dest[d].retry_at = 0;
    if (fd < 0) {
        fail_run(g, "no socket for the gateway of site %s: %s", g->s->name[s], strerror(errno));
        return;
    }
    tune(g, fd, 1);
    if (connect(fd, (const struct sockaddr *)&g->o->peer[s], sizeof(g->o->peer[s])) == -1 &&
        errno != EINPROGRESS) {
        snprintf(g->dest[d].last_why, sizeof(g->dest[d].last_why), "%s", strerror(errno));
        close(fd);
        g->dest[d].retry_at = mln_relay_now() + GW_RETRY_MAX_S;
        return;
    }
    l = link_new(g, LK_OUT, fd);
    if (l == NULL) {
        close(fd);
        fail_run(g, "out of memory");
        return;
    }
    mln_relay_conn_connect(&l->c, fd, &g->job, g->endpoints, g->me,
                           mln_relay_gw_id(g->nranks, s, g->o->trunk), g->o->trunk, g->o->trunks,
                           left > 0.1 ? left : 0.1);
    l->dest = d;
    g->dest[d].state = ST_NONE;
}

/* ---- the loop ------------------------------------------------------------------------------ */

static void on_link(gw_t *g, gw_link_t *l, uint32_t events)
{
    mln_relay_hdr_t h;
    const unsigned char *pl;
    int r;

    if (l->c.state == MLN_RELAY_CONN_HANDSHAKE) {
        r = mln_relay_conn_handshake(&l->c);
        if (r < 0) {
            link_lost(g, l);
            return;
        }
        if (r == 0)
            return;
        link_up(g, l);
        if (l->dead)
            return;
    }
    if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) {
        if (mln_relay_conn_write(&l->c) < 0) {
            link_lost(g, l);
            return;
        }
    }
    while (!l->dead && (r = mln_relay_conn_read(&l->c, &h, &pl)) == 1) {
        if (!g->ending || h.type == MLN_RELAY_BYE)
            on_frame(g, l, &h, pl);
    }
    if (!l->dead && r < 0) {
        if (strstr(l->c.why, "malformed") || strstr(l->c.why, "fails its"))
            MLN_WARN("endpoint %d: %s: its link is closed", l->c.peer, l->c.why);
        link_lost(g, l);
    }
}

/* Registers what each link waits for now (only where it changed). */
static void sync_events(gw_t *g)
{
    for (int i = 0; i < g->nlinks; i++) {
        gw_link_t *l = g->links[i];
        uint32_t want;
        struct epoll_event ev;
        if (l->dead)
            continue;
        want = (uint32_t)mln_relay_conn_events(&l->c);
        if (l->shut)
            want &= ~(uint32_t)EPOLLOUT;
        if (want == l->registered)
            continue;
        ev = (struct epoll_event){.events = want, .data.ptr = l};
        if (epoll_ctl(g->ep, EPOLL_CTL_MOD, l->c.fd, &ev) == 0)
            l->registered = want;
    }
}

/* Deadlines, dialling, the end; the wait until the next deadline (ms, -1: none). */
static int housekeeping(gw_t *g, int *done)
{
    const double now = mln_relay_now();
    double next = -1;
    int all_left = 1, flushed = 1, open_links = 0, peer_waits = 0;
    char name[96];

#define NEXT(t) (next = (next < 0 || (t) < next) ? (t) : next)
    for (int i = 0; i < g->nlinks; i++) {
        gw_link_t *l = g->links[i];
        if (l->dead)
            continue;
        if (l->c.state == MLN_RELAY_CONN_HANDSHAKE) {
            if (now > l->c.hs_deadline)
                on_link(g, l, 0); /* it dies of its deadline */
            else
                NEXT(l->c.hs_deadline);
        }
    }
    for (int d = 0; d < g->ndest && !g->ending; d++) {
        gw_dest_t *dd = &g->dest[d];
        const int s = d - g->size;
        if (dd->state != ST_NONE || dd->link != NULL)
            continue;
        if (now >= g->start + g->o->timeout) {
            if (s >= 0 && s > g->o->site && dd->last_why[0])
                fail_run(g, "%s: not reached within %.0f s (%s)",
                         dest_name(g, d, name, sizeof(name)), g->o->timeout, dd->last_why);
            else
                fail_run(g, "%s never connected within %.0f s", dest_name(g, d, name, sizeof(name)),
                         g->o->timeout);
            break;
        }
        NEXT(g->start + g->o->timeout);
        if (s >= 0 && s > g->o->site) {
            int dialling = 0;
            for (int i = 0; i < g->nlinks; i++)
                dialling |=
                    !g->links[i]->dead && g->links[i]->kind == LK_OUT && g->links[i]->dest == d;
            if (!dialling && now >= dd->retry_at)
                dial(g, s);
            else if (!dialling)
                NEXT(dd->retry_at);
        }
    }
    /* every rank said BYE: so do we, to the peers */
    for (int d = 0; d < g->size; d++)
        all_left &= g->dest[d].state == ST_BYE || g->dest[d].state == ST_GONE;
    if (all_left && !g->byes_sent && !g->ending) {
        const mln_relay_hdr_t h = {.type = MLN_RELAY_BYE,
                                   .trunk = (uint16_t)g->o->trunk,
                                   .dst = MLN_RELAY_ALL,
                                   .src = g->me};
        g->byes_sent = 1;
        for (int d = g->size; d < g->ndest; d++)
            if (g->dest[d].link != NULL)
                send_control(g, d, &h, NULL);
    }
    if (!g->ending) {
        int clean = g->byes_sent;
        for (int d = 0; d < g->ndest && clean; d++)
            clean = d - g->size == g->o->site || g->dest[d].state == ST_GONE ||
                    (d >= g->size && g->dest[d].state == ST_BYE && g->dest[d].link == NULL) ||
                    (d >= g->size && g->dest[d].state == ST_BYE && g->dest[d].link->c.head == NULL);
        if (clean) {
            MLN_INFO("every rank of site %s said BYE, and every peer gateway: done",
                     g->s->name[g->o->site]);
            *done = GW_EXIT_OK;
            return 0;
        }
        return next < 0 ? -1 : (int)((next - now) * 1000.0) + 1;
    }
    /* ending: flush (also to peer gateways still in their handshake: FAIL waits for them),
     * then shut our side down, then wait for the far ends to close */
    for (int d = g->size; d < g->ndest; d++)
        peer_waits |= g->dest[d].head != NULL;
    for (int i = 0; i < g->nlinks; i++) {
        const gw_link_t *l = g->links[i];
        if (l->dead)
            continue;
        if (l->c.state == MLN_RELAY_CONN_UP) {
            open_links++;
            flushed &= l->c.head == NULL;
        } else if (peer_waits && (l->kind == LK_OUT || l->kind == LK_WAN)) {
            flushed = 0;
        }
    }
    if (flushed)
        for (int i = 0; i < g->nlinks; i++) {
            gw_link_t *l = g->links[i];
            if (!l->dead && !l->shut) {
                l->shut = 1;
                shutdown(l->c.fd, SHUT_WR);
            }
        }
    if ((flushed && open_links == 0) || now >= g->end_at) {
        *done = g->ending;
        return 0;
    }
    NEXT(g->end_at);
    return (int)((next - now) * 1000.0) + 1;
#undef NEXT
}

static void summary(gw_t *g)
{
    char line[2048], name[96];
    size_t n = 0;

    for (int d = 0; d < g->ndest; d++) {
        gw_dest_t *dd = &g->dest[d];
        if (dd->link != NULL) {
            dd->frames_in += dd->link->c.frames_in;
            dd->frames_out += dd->link->c.frames_out;
            dd->bytes_in += dd->link->c.bytes_in;
            dd->bytes_out += dd->link->c.bytes_out;
        }
        if (d - g->size == g->o->site || n >= sizeof(line) - 1)
            continue;
        n +=
            (size_t)snprintf(line + n, sizeof(line) - n,
                             "%s%s in %llu frames %llu B, out %llu "
                             "frames %llu B",
                             n ? "; " : "", dest_name(g, d, name, sizeof(name)),
                             (unsigned long long)dd->frames_in, (unsigned long long)dd->bytes_in,
                             (unsigned long long)dd->frames_out, (unsigned long long)dd->bytes_out);
    }
    MLN_INFO("summary: %s; dropped %llu", line, (unsigned long long)g->dropped);
}

/* a * b, at most UINT64_MAX - GW_SLACK */
static uint64_t mul_cap(uint64_t a, uint64_t b)
{
    const uint64_t top = UINT64_MAX - GW_SLACK;

    return b != 0 && a > top / b ? top : a * b;
}

static int gw_setup(gw_t *g, const unsigned char secret[32])
{
    const gw_opts_t *o = g->o;
    struct sockaddr_in in = o->listen_at, wan = o->wan_at;
    char a1[INET_ADDRSTRLEN], a2[INET_ADDRSTRLEN];
    sigset_t mask;

    g->nranks = g->s->nranks;
    g->first = g->s->first[o->site];
    g->size = g->s->size[o->site];
    g->me = mln_relay_gw_id(g->nranks, o->site, o->trunk);
    g->endpoints = mln_relay_endpoints(g->nranks, g->s->nsites);
    g->ndest = g->size + g->s->nsites;
    g->dest = calloc((size_t)g->ndest, sizeof(*g->dest));
    if (g->dest == NULL) {
        MLN_ERROR("out of memory for %d ranks", g->size);
        return GW_EXIT_FAILED;
    }
    for (int d = 0; d < g->ndest; d++) /* the credit the ranks may have in flight there */
        g->dest[d].cap =
            GW_SLACK + (d < g->size ? mul_cap(o->window, (uint64_t)(g->nranks - g->size))
                                    : mul_cap(o->window, (uint64_t)g->size *
                                                             (uint64_t)g->s->size[d - g->size]));
    g->dest[g->size + o->site].state = ST_GONE; /* no link to itself */
    if (mln_relay_job_init(&g->job, secret, o->mode, o->cipher, o->payload_mac, g->nranks,
                           g->s->nsites) != MLN_OK)
        return GW_EXIT_USAGE;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    signal(SIGPIPE, SIG_IGN);
    if (sigprocmask(SIG_BLOCK, &mask, NULL) == -1 ||
        (g->sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC)) < 0 ||
        (g->ep = epoll_create1(EPOLL_CLOEXEC)) < 0) {
        MLN_ERROR("signalfd or epoll: %s", strerror(errno));
        return GW_EXIT_FAILED;
    }
    g->lfd_in = listen_on(&in);
    if (g->lfd_in >= 0)
        g->lfd_wan = listen_on(&wan);
    inet_ntop(AF_INET, &in.sin_addr, a1, sizeof(a1));
    inet_ntop(AF_INET, &wan.sin_addr, a2, sizeof(a2));
    if (g->lfd_in < 0 || g->lfd_wan < 0) {
        MLN_ERROR("cannot listen on %s:%u: %s", g->lfd_in < 0 ? a1 : a2,
                  (unsigned)ntohs(g->lfd_in < 0 ? in.sin_port : wan.sin_port), strerror(errno));
        return GW_EXIT_USAGE;
    }
    if (ep_add(g, g->lfd_in, EPOLLIN, &g->lfd_in) == -1 ||
        ep_add(g, g->lfd_wan, EPOLLIN, &g->lfd_wan) == -1 ||
        ep_add(g, g->sfd, EPOLLIN, &g->sfd) == -1) {
        MLN_ERROR("epoll_ctl: %s", strerror(errno));
        return GW_EXIT_FAILED;
    }
    printf("ready site=%s trunk=%d listen=%s:%u wan=%s:%u\n", g->s->name[o->site], o->trunk, a1,
           (unsigned)ntohs(in.sin_port), a2, (unsigned)ntohs(wan.sin_port));
    fflush(stdout);
    MLN_INFO("%s, %s, %d ranks here of %d in %d sites, window %llu",
             mln_link_mode_name(g->job.mode),
             g->job.mode == MLN_LINK_NONE ? "no cipher" : mln_link_cipher_name(g->job.cipher),
             g->size, g->nranks, g->s->nsites, (unsigned long long)o->window);
    g->start = mln_relay_now();
    return -1;
}

static void gw_teardown(gw_t *g)
{
    if (g->dest != NULL)
        summary(g);
    for (int i = 0; i < g->nlinks; i++)
        link_close(g, g->links[i], NULL);
    links_reap(g);
    for (int d = 0; g->dest != NULL && d < g->ndest; d++)
        pending_drop(g, &g->dest[d]);
    if (g->lfd_in >= 0)
        close(g->lfd_in);
    if (g->lfd_wan >= 0)
        close(g->lfd_wan);
    if (g->sfd >= 0)
        close(g->sfd);
    if (g->ep >= 0)
        close(g->ep);
    mln_link_job_wipe(&g->job);
    free(g->links);
    free(g->dest);
}

int mln_gw_run(const gw_opts_t *o, const unsigned char secret[32])
{
    gw_t g = {.o = o, .s = &o->sites, .ep = -1, .lfd_in = -1, .lfd_wan = -1, .sfd = -1};
    int done = gw_setup(&g, secret);

    while (done < 0) {
        struct epoll_event evs[64];
        const int wait_ms = housekeeping(&g, &done);
        int n;

        if (done >= 0)
            break;
        sync_events(&g);
        links_reap(&g);
        n = epoll_wait(g.ep, evs, 64, wait_ms);
        if (n < 0 && errno != EINTR) {
            MLN_ERROR("epoll_wait: %s", strerror(errno));
            done = GW_EXIT_FAILED;
        }
        for (int i = 0; i < n && done < 0; i++) {
            void *p = evs[i].data.ptr;
            if (p == &g.lfd_in) {
                accept_all(&g, g.lfd_in, LK_INSIDE);
            } else if (p == &g.lfd_wan) {
                accept_all(&g, g.lfd_wan, LK_WAN);
            } else if (p == &g.sfd) {
                struct signalfd_siginfo si;
                if (read(g.sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                    mln_log_write(MLN_LOG_WARN, __FILE__, __LINE__, "stopped by %s",
                                  si.ssi_signo == SIGINT ? "SIGINT" : "SIGTERM");
                    done = GW_EXIT_OK;
                }
            } else if (!((gw_link_t *)p)->dead) {
                on_link(&g, p, evs[i].events);
            }
        }
    }
    gw_teardown(&g);
    return done;
}
