/*
 * relay_rank_test.c - the rank side of the relays (src/relay/relay.h) without MPI and without
 * the real gateway: a forked child plays every gateway of two sites (a: rank 0; b: ranks 1, 2)
 * with relay_io.c's connections, and forwards each frame to its destination rank on the trunk
 * it came by, each trunk t delayed by t * 2 ms (so that the frames of a striped message
 * arrive out of order across trunks).  It checks every pair's credit (units in flight never
 * above the window) and that every rank said BYE.  The three ranks live in the parent.
 *
 * Covered: small and large messages interleaved in both directions through 1, 2 and 4 trunks
 * (every byte, per-pair order, two contexts), synchronous sends (MATCHED), the tightest window,
 * a slow trunk taking fewer chunks (per-trunk ACKs),
 * ABORT and FAIL reaching the fatal handler, a gateway lost, a frame delivered twice (protocol
 * error), and mln_relay_open's failures (no gateway, another secret, bad settings).
 * With RELAY_TEST_GATEWAY=path/to/mln-gateway the same traffic also runs through real gateways
 * (see real_gateways()).
 */
#define _GNU_SOURCE
#include "mln_test.h"
#include "relay/relay.h"
#include "relay/relay_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define SECRET "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
#define OTHER_SECRET "ff0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
#define NRANKS 3
#define SITES "a:1,b:2"
#define TAG_FAIL 1000001 /* the fake gateways send FAIL to every rank */
#define TAG_DROP 1000002 /* they close every connection of the frame's trunk */
#define TAG_DUP 1000003  /* they deliver the frame twice */
#define TAG_SLOW 1000004 /* trunk 0 holds the frame SLOW_S longer (a slow WAN path) */
#define SLOW_S 0.3

static int site_of(int rank)
{
    return rank == 0 ? 0 : 1;
}

/* ---- the fake gateways (the child) ------------------------------------------------------- */

typedef struct gw_frame {
    mln_relay_oframe_t f;
    double at; /* released then */
    struct gw_frame *next;
} gw_frame_t;

typedef struct gw_conn {
    mln_relay_conn_t c;
    int site, trunk, rank; /* rank: once up */
    int used, bye;
    gw_frame_t *held, *held_tail;
} gw_conn_t;

typedef struct gw {
    mln_link_job_t job;
    int trunks;
    uint64_t window;
    int lfd[2][MLN_RELAY_MAX_TRUNKS];
    gw_conn_t conns[64];
    int by_rank[NRANKS][MLN_RELAY_MAX_TRUNKS];            /* index + 1 */
    uint64_t sent[NRANKS][NRANKS];                        /* credit units, every trunk */
    uint64_t acked[NRANKS][NRANKS][MLN_RELAY_MAX_TRUNKS]; /* per trunk, as its ACKs say */
    int byes, closed;
} gw_t;

static void gw_frame_done(void *cookie, int ok)
{
    (void)ok;
    free(cookie);
}

/* A copy of (h, payload) for conns[to], released after the trunk's delay. */
static void gw_hold(gw_t *g, int to, const mln_relay_hdr_t *h, const unsigned char *payload)
{
    gw_conn_t *d = &g->conns[to];
    gw_frame_t *f = calloc(1, sizeof(*f));

    MLN_TEST_ASSERT(f != NULL);
    f->f.h = *h;
    if (h->len) {
        f->f.own = malloc(h->len);
        MLN_TEST_ASSERT(f->f.own != NULL);
        memcpy(f->f.own, payload, h->len);
        f->f.payload = f->f.own;
    }
    f->f.done = gw_frame_done;
    f->f.cookie = f;
    f->at = mln_relay_now() + d->trunk * 0.002;
    if (d->held_tail)
        d->held_tail->next = f;
    else
        d->held = f;
    d->held_tail = f;
}

static void gw_send_fail(gw_t *g)
{
    static const char text[] = "multilane grid: gateway 0 of site b lost its peer: the run "
                               "cannot go on";
    for (int i = 0; i < 64; i++) {
        gw_conn_t *d = &g->conns[i];
        if (d->used && d->c.state == MLN_RELAY_CONN_UP) {
            mln_relay_hdr_t h = {.type = MLN_RELAY_FAIL,
                                 .trunk = (uint16_t)d->trunk,
                                 .dst = MLN_RELAY_ALL,
                                 .src = mln_relay_gw_id(NRANKS, d->site, d->trunk),
                                 .len = sizeof(text) - 1};
            gw_hold(g, i, &h, (const unsigned char *)text);
        }
    }
}

static void gw_close(gw_t *g, int i)
{
    gw_conn_t *d = &g->conns[i];

    while (d->held) {
        gw_frame_t *f = d->held;
        d->held = f->next;
        free(f->f.own);
        free(f);
    }
    d->held_tail = NULL;
    mln_relay_conn_close(&d->c, NULL);
    if (d->rank >= 0 && g->by_rank[d->rank][d->trunk] == i + 1)
        g->by_rank[d->rank][d->trunk] = 0;
    d->used = 0;
    g->closed++;
}

/* A frame from rank conns[i]: checks the credit, forwards it. */
static void gw_frame(gw_t *g, int i, const mln_relay_hdr_t *h, const unsigned char *payload)
{
    const int t = h->trunk;

    uint64_t acked = 0;

    switch (h->type) {
    case MLN_RELAY_DATA:
        g->sent[h->src][h->dst] += h->len + MLN_RELAY_FRAME_COST;
        for (int k = 0; k < g->trunks; k++)
            acked += g->acked[h->src][h->dst][k];
        if (g->sent[h->src][h->dst] - acked > g->window) {
            fprintf(stderr, "fake gateway: pair %d -> %d has %llu units in flight (window %llu)\n",
                    h->src, h->dst, (unsigned long long)(g->sent[h->src][h->dst] - acked),
                    (unsigned long long)g->window);
            _exit(3);
        }
        if (h->tag == TAG_FAIL) {
            gw_send_fail(g);
            return;
        }
        if (h->tag == TAG_DROP) {
            for (int k = 0; k < 64; k++)
                if (g->conns[k].used && g->conns[k].trunk == t)
                    gw_close(g, k);
            return;
        }
        if (h->tag == TAG_DUP && g->by_rank[h->dst][t] > 0)
            gw_hold(g, g->by_rank[h->dst][t] - 1, h, payload);
        if (h->tag == TAG_SLOW && t == 0 && g->by_rank[h->dst][t] > 0) {
            gw_hold(g, g->by_rank[h->dst][t] - 1, h, payload);
            g->conns[g->by_rank[h->dst][t] - 1].held_tail->at += SLOW_S;
            return;
        }
        /* fall through */
    case MLN_RELAY_MATCHED:
    case MLN_RELAY_ACK:
        if (h->type == MLN_RELAY_ACK) {
            if (h->offset < g->acked[h->dst][h->src][t]) {
                fprintf(stderr, "fake gateway: an ACK of trunk %d went back\n", t);
                _exit(3);
            }
            g->acked[h->dst][h->src][t] = h->offset;
        }
        if (g->by_rank[h->dst][t] == 0)
            return; /* its connection is closed */
        gw_hold(g, g->by_rank[h->dst][t] - 1, h, payload);
        return;
    case MLN_RELAY_ABORT:
        for (int k = 0; k < 64; k++)
            if (g->conns[k].used && g->conns[k].rank != h->src && g->conns[k].trunk == t &&
                g->conns[k].c.state == MLN_RELAY_CONN_UP)
                gw_hold(g, k, h, payload);
        return;
    case MLN_RELAY_BYE:
        g->conns[i].bye = 1;
        g->byes++;
        gw_close(g, i); /* as the real gateway does: the rank's linger ends */
        return;
    default:
        _exit(6);
    }
}

static void gw_accept(gw_t *g, int site, int t)
{
    int fd = accept4(g->lfd[site][t], NULL, NULL, SOCK_NONBLOCK);

    if (fd < 0)
        return;
    for (int i = 0; i < 64; i++) {
        gw_conn_t *d = &g->conns[i];
        if (d->used)
            continue;
        memset(d, 0, sizeof(*d));
        d->used = 1;
        d->site = site;
        d->trunk = t;
        d->rank = -1;
        mln_relay_conn_accept(&d->c, fd, &g->job, mln_relay_endpoints(NRANKS, 2),
                              mln_relay_gw_id(NRANKS, site, t), 10.0);
        return;
    }
    close(fd);
}

/* The child's life: until every rank's connections closed, or 60 s, or the parent is gone.
 * Exit 0: every connection closed after its BYE, every pair within its credit. */
static void gw_run(gw_t *g)
{
    const double end = mln_relay_now() + 60;

    while (mln_relay_now() < end && getppid() != 1) {
        struct pollfd pfd[2 * MLN_RELAY_MAX_TRUNKS + 64];
        int who[2 * MLN_RELAY_MAX_TRUNKS + 64], n = 0, held = 0;

        for (int s = 0; s < 2; s++)
            for (int t = 0; t < g->trunks; t++) {
                pfd[n] = (struct pollfd){.fd = g->lfd[s][t], .events = POLLIN};
                who[n++] = -1 - (s * MLN_RELAY_MAX_TRUNKS + t);
            }
        for (int i = 0; i < 64; i++) {
            if (!g->conns[i].used)
                continue;
            held |= g->conns[i].held != NULL;
            pfd[n] = (struct pollfd){.fd = g->conns[i].c.fd,
                                     .events = mln_relay_conn_events(&g->conns[i].c)};
            who[n++] = i;
        }
        poll(pfd, (nfds_t)n, held ? 1 : 20);
        for (int k = 0; k < n; k++) {
            if (who[k] < 0 && (pfd[k].revents & POLLIN)) {
                const int st = -1 - who[k];
                gw_accept(g, st / MLN_RELAY_MAX_TRUNKS, st % MLN_RELAY_MAX_TRUNKS);
            }
        }
        for (int i = 0; i < 64; i++) {
            gw_conn_t *d = &g->conns[i];
            mln_relay_hdr_t h;
            const unsigned char *payload;
            int rc;

            if (!d->used)
                continue;
            if (d->c.state == MLN_RELAY_CONN_HANDSHAKE) {
                rc = mln_relay_conn_handshake(&d->c);
                if (rc < 0) {
                    gw_close(g, i);
                    continue;
                }
                if (rc == 0)
                    continue;
                MLN_TEST_ASSERT(site_of(d->c.peer) == d->site && d->c.trunk == d->trunk);
                d->rank = d->c.peer;
                g->by_rank[d->rank][d->trunk] = i + 1;
                d->c.scope = (mln_relay_scope_t){
                    .nranks = NRANKS, .trunks = g->trunks, .from_rank = d->rank, .to_rank = -1};
            }
            while (d->used && (rc = mln_relay_conn_read(&d->c, &h, &payload)) == 1)
                gw_frame(g, i, &h, payload);
            if (d->used && rc < 0) {
                if (!d->bye)
                    fprintf(stderr, "fake gateway: rank %d trunk %d: %s\n", d->rank, d->trunk,
                            d->c.why);
                gw_close(g, i);
            }
        }
        for (int i = 0; i < 64; i++) {
            gw_conn_t *d = &g->conns[i];
            while (d->used && d->held && d->held->at <= mln_relay_now()) {
                gw_frame_t *f = d->held;
                d->held = f->next;
                if (d->held == NULL)
                    d->held_tail = NULL;
                mln_relay_conn_queue(&d->c, &f->f);
            }
            if (d->used && d->c.head && mln_relay_conn_write(&d->c) < 0)
                gw_close(g, i);
        }
        if (g->byes == NRANKS * g->trunks) {
            _exit(0);
        }
    }
    _exit(g->byes == NRANKS * g->trunks ? 0 : 4);
}

static int hexval(char c)
{
    return c <= '9' ? c - '0' : c - 'a' + 10;
}

/* Forks the fake gateways for `trunks` trunks with `secret`; sets MLN_GRID_GATEWAYS for each
 * site into gws[site]. */
static pid_t gw_start(int trunks, const char *secret, uint64_t window, char gws[2][512])
{
    static gw_t g; /* the child's, large */
    unsigned char key[32];
    pid_t pid;

    memset(&g, 0, sizeof(g));
    g.trunks = trunks;
    g.window = window;
    for (int s = 0; s < 2; s++) {
        gws[s][0] = '\0';
        for (int t = 0; t < trunks; t++) {
            struct sockaddr_in a = {.sin_family = AF_INET,
                                    .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
            socklen_t len = sizeof(a);
            int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
            MLN_TEST_ASSERT(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
            MLN_TEST_ASSERT(listen(fd, 16) == 0);
            MLN_TEST_ASSERT(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
            g.lfd[s][t] = fd;
            snprintf(gws[s] + strlen(gws[s]), 512 - strlen(gws[s]), "%s127.0.0.1:%d", t ? "," : "",
                     ntohs(a.sin_port));
        }
    }
    for (int i = 0; i < 32; i++)
        key[i] = (unsigned char)(hexval(secret[2 * i]) * 16 + hexval(secret[2 * i + 1]));
    pid = fork();
    MLN_TEST_ASSERT(pid >= 0);
    if (pid == 0) {
        mln_config_t cfg;
        MLN_TEST_ASSERT(mln_config_load(NULL, NULL, &cfg, NULL, 0) == MLN_OK);
        MLN_TEST_ASSERT(mln_relay_job_init(&g.job, key, cfg.link_security, cfg.link_cipher,
                                           cfg.link_payload_mac, NRANKS, 2) == MLN_OK);
        gw_run(&g);
    }
    for (int s = 0; s < 2; s++)
        for (int t = 0; t < trunks; t++)
            close(g.lfd[s][t]);
    return pid;
}

/* The child's exit status (-1: killed). */
static int gw_wait(pid_t pid, int kill_it)
{
    int status = 0;

    if (kill_it)
        kill(pid, SIGTERM);
    MLN_TEST_ASSERT(waitpid(pid, &status, 0) == pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* ---- the ranks (the parent) -------------------------------------------------------------- */

typedef struct fatal {
    int hit, code;
    char line[1024];
} fatal_t;

static void on_fatal(int code, const char *line, void *arg)
{
    fatal_t *f = arg;

    if (f->hit++ == 0) {
        f->code = code;
        snprintf(f->line, sizeof(f->line), "%s", line);
    }
}

static mln_relay_t *rank_open(int rank, char gws[2][512], fatal_t *fatal,
                              const mln_relay_opts_t *opts, const char *secret)
{
    mln_relay_t *r = NULL;
    const int site = site_of(rank);

    setenv("MLN_GRID_SITES", SITES, 1);
    setenv("MLN_GRID_SITE", site ? "b" : "a", 1);
    setenv("MLN_GRID_GATEWAYS", gws[site], 1);
    setenv("MLN_GRID_SECRET", secret, 1);
    MLN_TEST_ASSERT(mln_relay_open(site ? rank - 1 : 0, opts, &r) == MLN_OK);
    MLN_TEST_ASSERT(getenv("MLN_GRID_SECRET") == NULL); /* read and forgotten */
    MLN_TEST_ASSERT(mln_relay_rank(r) == rank && mln_relay_size(r) == NRANKS);
    MLN_TEST_ASSERT(mln_relay_site(r) == site && mln_relay_nsites(r) == 2);
    MLN_TEST_ASSERT(mln_relay_site_first(r, 1) == 1 && mln_relay_site_size(r, 1) == 2);
    MLN_TEST_ASSERT(strcmp(mln_relay_site_name(r, 1), "b") == 0);
    MLN_TEST_ASSERT(mln_relay_site_of_rank(r, 2) == 1 && mln_relay_site_of_rank(r, 3) == -1);
    memset(fatal, 0, sizeof(*fatal));
    mln_relay_on_fatal(r, on_fatal, fatal);
    return r;
}

static unsigned char pattern(int src, int dst, int idx, uint64_t off)
{
    return (unsigned char)(src * 71 + dst * 13 + idx * 7 + off * 31 + (off >> 9));
}

/* The traffic test: every cross-site pair sends nmsg messages of the sizes below, contexts
 * alternating, every fifth synchronous; every message is checked whole and in pair order. */
#define NPAIRS 4
static const int pair_src[NPAIRS] = {0, 0, 1, 2}, pair_dst[NPAIRS] = {1, 2, 0, 0};
static const uint64_t sizes[] = {
    0,      1,      100,     4096,          65535, 65543,           200000, 262143,
    262144, 300001, 1 << 20, (3 << 20) + 5, 17,    (9 << 20) + 333, 5};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static void traffic(mln_relay_t *r[NRANKS], int rounds, fatal_t *fatal)
{
    const int nmsg = rounds * (int)NSIZES;
    unsigned char **bufs[NPAIRS];
    mln_relay_send_t **sends[NPAIRS];
    int sends_left = NPAIRS * nmsg, recv_left = NPAIRS * nmsg;
    int64_t next[NRANKS][NRANKS][2]; /* [dst][src][context]: the last seq taken */
    const double end = mln_relay_now() + 120;

    memset(next, 0xff, sizeof(next));
    for (int p = 0; p < NPAIRS; p++) {
        bufs[p] = calloc((size_t)nmsg, sizeof(*bufs[p]));
        sends[p] = calloc((size_t)nmsg, sizeof(*sends[p]));
        MLN_TEST_ASSERT(bufs[p] && sends[p]);
        for (int i = 0; i < nmsg; i++) {
            const uint64_t n = sizes[i % NSIZES];
            bufs[p][i] = malloc(n ? n : 1);
            MLN_TEST_ASSERT(bufs[p][i] != NULL);
            for (uint64_t k = 0; k < n; k++)
                bufs[p][i][k] = pattern(pair_src[p], pair_dst[p], i, k);
        }
    }
    /* interleaved: message i of every pair, then i + 1 */
    for (int i = 0; i < nmsg; i++)
        for (int p = 0; p < NPAIRS; p++)
            MLN_TEST_ASSERT(mln_relay_isend(r[pair_src[p]], pair_dst[p], (uint32_t)(i & 1), i,
                                            bufs[p][i], sizes[i % NSIZES], i % 5 == 4,
                                            &sends[p][i]) == MLN_OK);
    while (sends_left > 0 || recv_left > 0) {
        MLN_TEST_ASSERT(mln_relay_now() < end);
        for (int q = 0; q < NRANKS; q++) {
            MLN_TEST_ASSERT(fatal[q].hit == 0);
            mln_relay_progress(r[q], q == 0 ? 200 : 0);
            for (uint32_t ctx = 0; ctx < 2; ctx++) {
                mln_relay_msg_t *m;
                while ((m = mln_relay_arrived(r[q], ctx)) != NULL) {
                    int p = 0;
                    while (p < NPAIRS && !(pair_src[p] == m->src && pair_dst[p] == q))
                        p++;
                    MLN_TEST_ASSERT(p < NPAIRS && m->tag < nmsg && m->context == ctx);
                    MLN_TEST_ASSERT((int64_t)m->seq == m->tag && (m->tag & 1) == (int)ctx);
                    MLN_TEST_ASSERT((int64_t)m->seq > next[q][m->src][ctx]); /* pair order */
                    next[q][m->src][ctx] = (int64_t)m->seq;
                    MLN_TEST_ASSERT(m->len == sizes[m->tag % NSIZES]);
                    MLN_TEST_ASSERT(m->sync == (m->tag % 5 == 4));
                    MLN_TEST_ASSERT(m->len == 0 || memcmp(m->data, bufs[p][m->tag], m->len) == 0);
                    mln_relay_take(r[q], m);
                    mln_relay_msg_free(m);
                    recv_left--;
                }
            }
        }
        for (int p = 0; p < NPAIRS; p++) {
            for (int i = 0; i < nmsg; i++) {
                mln_status_t st = MLN_ERR_INTERNAL;
                if (sends[p][i] && mln_relay_send_test(r[pair_src[p]], sends[p][i], &st)) {
                    MLN_TEST_ASSERT(st == MLN_OK);
                    sends[p][i] = NULL;
                    sends_left--;
                }
            }
        }
    }
    for (int p = 0; p < NPAIRS; p++) {
        for (int i = 0; i < nmsg; i++)
            free(bufs[p][i]);
        free(bufs[p]);
        free(sends[p]);
    }
}

static void run_traffic(int trunks, uint64_t window, uint64_t chunk, uint64_t stripe_min,
                        int rounds, int from_env)
{
    char gws[2][512];
    fatal_t fatal[NRANKS];
    mln_relay_t *r[NRANKS];
    mln_relay_opts_t o = {.window = window,
                          .chunk = chunk,
                          .stripe_min = stripe_min,
                          .timeout = 10,
                          .link_mode = MLN_LINK_AUTH,
                          .link_cipher = MLN_LINK_CIPHER_AUTO};
    pid_t gw = gw_start(trunks, SECRET, window, gws);
    mln_relay_stats_t st;
    const double t0 = mln_relay_now();

    for (int q = 0; q < NRANKS; q++)
        r[q] = rank_open(q, gws, &fatal[q], from_env ? NULL : &o, SECRET);
    MLN_TEST_ASSERT(mln_relay_trunks(r[0]) == trunks);
    traffic(r, rounds, fatal);
    mln_relay_get_stats(r[0], &st);
    MLN_TEST_ASSERT(st.msgs_out == 2u * rounds * NSIZES && st.msgs_in == 2u * rounds * NSIZES);
    for (int t = 0; t < trunks; t++) /* large messages striped over every trunk */
        MLN_TEST_ASSERT(st.frames_out[t] > 0 && st.frames_in[t] > 0);
    for (int q = 0; q < NRANKS; q++)
        mln_relay_close(r[q]);
    MLN_TEST_ASSERT(gw_wait(gw, 0) == 0); /* credit kept, every BYE seen */
    printf("relay_rank_test: traffic, %d trunk(s), window %llu, chunk %llu: ok (%.2f s)\n", trunks,
           (unsigned long long)window, (unsigned long long)chunk, mln_relay_now() - t0);
}

/* A synchronous send completes only once the receiver took the message. */
static void run_sync(void)
{
    char gws[2][512];
    fatal_t fatal[NRANKS];
    mln_relay_t *r[NRANKS];
    pid_t gw = gw_start(2, SECRET, 8u << 20, gws);
    static unsigned char buf[300000];
    mln_relay_send_t *s;
    mln_relay_msg_t *m = NULL;
    mln_status_t st = MLN_ERR_INTERNAL;
    double until;

    for (int q = 0; q < NRANKS; q++)
        r[q] = rank_open(q, gws, &fatal[q], NULL, SECRET);
    MLN_TEST_ASSERT(mln_relay_isend(r[2], 0, 5, 42, buf, sizeof(buf), 1, &s) == MLN_OK);
    until = mln_relay_now() + 0.3;
    while (mln_relay_now() < until) {
        mln_relay_progress(r[2], 100);
        mln_relay_progress(r[0], 100);
    }
    m = mln_relay_arrived(r[0], 5);
    MLN_TEST_ASSERT(m != NULL && m->sync && m->src == 2 && m->tag == 42 && m->next == NULL);
    MLN_TEST_ASSERT(mln_relay_send_test(r[2], s, &st) == 0); /* not matched yet */
    mln_relay_take(r[0], m);
    MLN_TEST_ASSERT(mln_relay_arrived(r[0], 5) == NULL);
    mln_relay_msg_free(m);
    until = mln_relay_now() + 5;
    while (!mln_relay_send_test(r[2], s, &st)) {
        MLN_TEST_ASSERT(mln_relay_now() < until);
        mln_relay_progress(r[0], 100);
        mln_relay_progress(r[2], 100);
    }
    MLN_TEST_ASSERT(st == MLN_OK);
    /* bad arguments */
    MLN_TEST_ASSERT(mln_relay_isend(r[2], 1, 0, 0, buf, 1, 0, &s) == MLN_ERR_ARG); /* same site */
    MLN_TEST_ASSERT(mln_relay_isend(r[2], 3, 0, 0, buf, 1, 0, &s) == MLN_ERR_ARG);
    MLN_TEST_ASSERT(mln_relay_isend(r[2], 0, 0, -1, buf, 1, 0, &s) == MLN_ERR_ARG);
    for (int q = 0; q < NRANKS; q++)
        mln_relay_close(r[q]);
    MLN_TEST_ASSERT(gw_wait(gw, 0) == 0);
    printf("relay_rank_test: sync: ok\n");
}

/* A trunk that the WAN serves slowly takes fewer chunks of a striped message: the fake
 * gateways hold trunk 0's frames SLOW_S longer, and read every trunk's frames at once (so the
 * rank's own sockets never back up: only the ACKs tell which trunk is slow).  An equal share
 * would give trunk 0 a quarter of the frames. */
static void run_slow_trunk(void)
{
    char gws[2][512];
    fatal_t fatal[NRANKS];
    mln_relay_t *r[NRANKS];
    pid_t gw = gw_start(4, SECRET, 8u << 20, gws);
    const uint64_t n = 32u << 20;
    unsigned char *buf = malloc(n);
    mln_relay_send_t *s;
    mln_relay_msg_t *m = NULL;
    mln_status_t st = MLN_ERR_INTERNAL;
    mln_relay_stats_t stats;
    uint64_t others = 0;
    const double end = mln_relay_now() + 20;

    MLN_TEST_ASSERT(buf != NULL);
    for (uint64_t i = 0; i < n; i++)
        buf[i] = pattern(0, 1, 0, i);
    for (int q = 0; q < NRANKS; q++)
        r[q] = rank_open(q, gws, &fatal[q], NULL, SECRET);
    MLN_TEST_ASSERT(mln_relay_isend(r[0], 1, 0, TAG_SLOW, buf, n, 0, &s) == MLN_OK);
    while (m == NULL) {
        MLN_TEST_ASSERT(mln_relay_now() < end);
        mln_relay_progress(r[0], 100);
        mln_relay_progress(r[1], 100);
        m = mln_relay_arrived(r[1], 0);
    }
    MLN_TEST_ASSERT(m->len == n && m->tag == TAG_SLOW && memcmp(m->data, buf, n) == 0);
    mln_relay_take(r[1], m);
    mln_relay_msg_free(m);
    while (!mln_relay_send_test(r[0], s, &st))
        mln_relay_progress(r[0], 100);
    MLN_TEST_ASSERT(st == MLN_OK);
    mln_relay_get_stats(r[0], &stats);
    for (int t = 1; t < 4; t++)
        others += stats.frames_out[t];
    printf("relay_rank_test: slow trunk: frames per trunk %llu %llu %llu %llu\n",
           (unsigned long long)stats.frames_out[0], (unsigned long long)stats.frames_out[1],
           (unsigned long long)stats.frames_out[2], (unsigned long long)stats.frames_out[3]);
    MLN_TEST_ASSERT(stats.frames_out[0] > 0 && 2 * 3 * stats.frames_out[0] < others);
    for (int q = 0; q < NRANKS; q++)
        mln_relay_close(r[q]);
    MLN_TEST_ASSERT(gw_wait(gw, 0) == 0);
    free(buf);
    printf("relay_rank_test: slow trunk: ok\n");
}

/* Progresses every rank until each of `who` had its fatal event (5 s at most). */
static void until_fatal(mln_relay_t *r[NRANKS], fatal_t *fatal, const int *who, int n)
{
    const double end = mln_relay_now() + 5;

    for (;;) {
        int left = 0;
        for (int k = 0; k < n; k++)
            left += fatal[who[k]].hit == 0;
        if (left == 0)
            return;
        MLN_TEST_ASSERT(mln_relay_now() < end);
        for (int q = 0; q < NRANKS; q++)
            mln_relay_progress(r[q], 100);
    }
}

/* ABORT, FAIL, a lost gateway and a frame delivered twice: the fatal handler, one line. */
static void run_fatal(int which)
{
    char gws[2][512];
    fatal_t fatal[NRANKS];
    mln_relay_t *r[NRANKS];
    pid_t gw = gw_start(2, SECRET, 8u << 20, gws);
    static unsigned char buf[200000];
    mln_relay_send_t *s = NULL;
    mln_status_t st = MLN_OK;
    const int all[] = {0, 1, 2}, others[] = {0, 2};

    for (int q = 0; q < NRANKS; q++)
        r[q] = rank_open(q, gws, &fatal[q], NULL, SECRET);
    switch (which) {
    case 0:
        mln_relay_abort(r[1], 7, "boom\n");
        until_fatal(r, fatal, others, 2);
        for (int k = 0; k < 2; k++) {
            MLN_TEST_ASSERT(fatal[others[k]].code == 7);
            MLN_TEST_ASSERT(strcmp(fatal[others[k]].line,
                                   "multilane grid: rank 1 of site b called MPI_Abort(7): boom") ==
                            0);
        }
        break;
    case 1:
        MLN_TEST_ASSERT(mln_relay_isend(r[0], 1, 0, TAG_FAIL, buf, 10, 0, &s) == MLN_OK);
        until_fatal(r, fatal, all, 3);
        for (int q = 0; q < NRANKS; q++)
            MLN_TEST_ASSERT(fatal[q].code == 1 && strstr(fatal[q].line, "lost its peer: the run"));
        break;
    case 2:
        MLN_TEST_ASSERT(mln_relay_isend(r[0], 2, 0, TAG_DROP, buf, 10, 0, &s) == MLN_OK);
        until_fatal(r, fatal, all, 3);
        for (int q = 0; q < NRANKS; q++) {
            char want[96];
            snprintf(want, sizeof(want), "multilane grid: gateway %d of site %s lost (",
                     (0 * 31 + 2) % 2, q ? "b" : "a");
            MLN_TEST_ASSERT(fatal[q].code == 1 && strstr(fatal[q].line, want) == fatal[q].line);
            MLN_TEST_ASSERT(strstr(fatal[q].line, "): the run cannot go on"));
        }
        break;
    default:
        MLN_TEST_ASSERT(mln_relay_isend(r[1], 0, 0, TAG_DUP, buf, sizeof(buf), 0, &s) == MLN_OK);
        until_fatal(r, fatal, all, 1);
        MLN_TEST_ASSERT(strstr(fatal[0].line, "a bad frame from rank 1 (message 0)"));
        break;
    }
    /* after a fatal event every send is over, with an error, and close frees everything */
    if (s != NULL && which != 1)
        MLN_TEST_ASSERT(mln_relay_send_test(r[which == 3 ? 1 : 0], s, &st) == 1);
    for (int q = 0; q < NRANKS; q++) {
        printf("relay_rank_test: fatal %d, rank %d: code %d: %s\n", which, q, fatal[q].code,
               fatal[q].line);
        mln_relay_close(r[q]);
    }
    gw_wait(gw, 1);
}

/* mln_relay_open's failures: settings, no gateway, another secret. */
static void run_open_errors(void)
{
    char gws[2][512];
    mln_relay_t *r = NULL;
    mln_relay_opts_t o = {.window = 1 << 20, .chunk = 1 << 20, .stripe_min = 0, .timeout = 1};
    double t0;
    pid_t gw;

    unsetenv("MLN_GRID_SITES");
    MLN_TEST_ASSERT(!mln_relay_wanted());
    MLN_TEST_ASSERT(mln_relay_open(0, NULL, &r) == MLN_ERR_CONFIG);
    setenv("MLN_GRID_SITES", SITES, 1);
    MLN_TEST_ASSERT(mln_relay_wanted());
    setenv("MLN_GRID_SITE", "c", 1);
    MLN_TEST_ASSERT(mln_relay_open(0, NULL, &r) == MLN_ERR_CONFIG);
    setenv("MLN_GRID_SITE", "b", 1);
    MLN_TEST_ASSERT(mln_relay_open(2, NULL, &r) == MLN_ERR_CONFIG); /* b has 2 ranks */
    setenv("MLN_GRID_GATEWAYS", "127.0.0.1", 1);
    MLN_TEST_ASSERT(mln_relay_open(0, NULL, &r) == MLN_ERR_CONFIG);
    setenv("MLN_RELAY_WINDOW", "128K", 1);
    MLN_TEST_ASSERT(mln_relay_open(0, NULL, &r) == MLN_ERR_CONFIG); /* < chunk + 64 */
    unsetenv("MLN_RELAY_WINDOW");
    MLN_TEST_ASSERT(mln_relay_open(0, &o, &r) == MLN_ERR_CONFIG); /* window < chunk + 64 */
    o.window = 2 << 20;

    /* nobody listens: refused until the timeout */
    gw = gw_start(1, SECRET, 1, gws);
    gw_wait(gw, 1); /* its ports are closed now */
    setenv("MLN_GRID_GATEWAYS", gws[1], 1);
    setenv("MLN_GRID_SECRET", SECRET, 1);
    t0 = mln_relay_now();
    MLN_TEST_ASSERT(mln_relay_open(0, &o, &r) == MLN_ERR_TIMEOUT && r == NULL);
    MLN_TEST_ASSERT(mln_relay_now() - t0 > 0.9 && mln_relay_now() - t0 < 3);

    /* gateways of another run */
    gw = gw_start(2, OTHER_SECRET, 1, gws);
    setenv("MLN_GRID_GATEWAYS", gws[1], 1);
    setenv("MLN_GRID_SECRET", SECRET, 1);
    o.timeout = 5;
    t0 = mln_relay_now();
    MLN_TEST_ASSERT(mln_relay_open(0, &o, &r) == MLN_ERR_PEER && r == NULL);
    MLN_TEST_ASSERT(mln_relay_now() - t0 < 3);
    gw_wait(gw, 1);
    printf("relay_rank_test: open errors: ok\n");
}

/* ---- real gateways (RELAY_TEST_GATEWAY=path/to/mln-gateway) ------------------------------- */

/* Starts mln-gateway for (site, trunk); its "ready ... listen=A wan=B" line into listen, wan. */
static pid_t real_gateway(const char *exe, int trunks, const char *site, int trunk,
                          const char *peer, char listen[64], char wan[64])
{
    int out[2];
    pid_t pid;
    char line[256] = "", tr[16], ntr[16];
    FILE *fp;

    MLN_TEST_ASSERT(pipe(out) == 0);
    snprintf(tr, sizeof(tr), "%d", trunk);
    snprintf(ntr, sizeof(ntr), "%d", trunks);
    pid = fork();
    MLN_TEST_ASSERT(pid >= 0);
    if (pid == 0) {
        const char *argv[20] = {exe,           "--site", site,          "--trunk",   tr,
                                "--trunks",    ntr,      "--sites",     SITES,       "--listen",
                                "127.0.0.1:0", "--wan",  "127.0.0.1:0", "--timeout", "20",
                                "--log",       "warn",   NULL,          NULL,        NULL};
        if (peer != NULL) {
            argv[17] = "--peer";
            argv[18] = peer;
        }
        dup2(out[1], 1);
        close(out[0]);
        close(out[1]);
        setenv("MLN_GRID_SECRET", SECRET, 1);
        execv(exe, (char *const *)argv);
        _exit(127);
    }
    close(out[1]);
    fp = fdopen(out[0], "r");
    MLN_TEST_ASSERT(fp != NULL && fgets(line, sizeof(line), fp) != NULL);
    fclose(fp);
    MLN_TEST_ASSERT(sscanf(line, "ready site=%*s trunk=%*d listen=%63s wan=%63s", listen, wan) ==
                    2);
    return pid;
}

/* The traffic test through 2 * trunks real gateways (each exits 0 once every rank said BYE);
 * abort: rank 1 calls MPI_Abort instead, which must reach ranks 0 and 2 (gateways exit 1). */
static void run_real(const char *exe, int trunks, int abort)
{
    char gws[2][512] = {"", ""}, listen[64], wan[64], peer[96];
    pid_t pids[2 * MLN_RELAY_MAX_TRUNKS];
    fatal_t fatal[NRANKS];
    mln_relay_t *r[NRANKS];
    const double t0 = mln_relay_now();

    for (int t = 0; t < trunks; t++) { /* b first: a's gateways connect to b's */
        pids[trunks + t] = real_gateway(exe, trunks, "b", t, NULL, listen, wan);
        snprintf(gws[1] + strlen(gws[1]), 512 - strlen(gws[1]), "%s%s", t ? "," : "", listen);
        snprintf(peer, sizeof(peer), "b=%s", wan);
        pids[t] = real_gateway(exe, trunks, "a", t, peer, listen, wan);
        snprintf(gws[0] + strlen(gws[0]), 512 - strlen(gws[0]), "%s%s", t ? "," : "", listen);
    }
    for (int q = 0; q < NRANKS; q++)
        r[q] = rank_open(q, gws, &fatal[q], NULL, SECRET);
    if (abort) {
        const int others[] = {0, 2};
        mln_relay_abort(r[1], 9, "bye now");
        until_fatal(r, fatal, others, 2);
        for (int k = 0; k < 2; k++)
            MLN_TEST_ASSERT(fatal[others[k]].code == 9 &&
                            strcmp(fatal[others[k]].line, "multilane grid: rank 1 of site b called "
                                                          "MPI_Abort(9): bye now") == 0);
    } else {
        traffic(r, 2, fatal);
    }
    for (int q = 0; q < NRANKS; q++)
        mln_relay_close(r[q]);
    for (int i = 0; i < 2 * trunks; i++)
        MLN_TEST_ASSERT(gw_wait(pids[i], 0) == (abort ? 1 : 0));
    printf("relay_rank_test: %s through %d real gateways: ok (%.2f s)\n",
           abort ? "MPI_Abort" : "traffic", 2 * trunks, mln_relay_now() - t0);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    setenv("MLN_LOG", "error", 1);
    run_open_errors();
    run_sync();
    run_traffic(1, 8u << 20, 1u << 20, 256u << 10, 2, 1);
    run_traffic(2, 1u << 20, 256u << 10, 128u << 10, 2, 0);
    run_traffic(4, 8u << 20, 1u << 20, 256u << 10, 2, 0);
    run_traffic(4, 65536 + MLN_RELAY_FRAME_COST, 65536, 0, 1, 0); /* the tightest window */
    run_slow_trunk();
    for (int which = 0; which < 4; which++)
        run_fatal(which);
    if (getenv("RELAY_TEST_GATEWAY") != NULL && getenv("RELAY_TEST_GATEWAY")[0] != '\0') {
        run_real(getenv("RELAY_TEST_GATEWAY"), 1, 0);
        run_real(getenv("RELAY_TEST_GATEWAY"), 3, 0);
        run_real(getenv("RELAY_TEST_GATEWAY"), 2, 1);
    } else {
        puts("relay_rank_test: real gateways skipped (RELAY_TEST_GATEWAY not set)");
    }
    puts("relay_rank_test: ok");
    return 0;
}
