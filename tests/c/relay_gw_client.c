/*
 * relay_gw_client.c - a stand-in for the ranks of a run, for mln-gateway's tests
 * (tests/python/test_relay_gateway.py): it speaks the relays' wire (relay_io.c) as ranks do,
 * without MPI.  Trunk 0 of 1; the secret from MLN_GRID_SECRET, the mode from MLN_LINK_*.
 *
 *   relay_gw_client pingpong SITES ADDR_A ADDR_B [SIZE [COUNT]]
 *       the first rank of site 0 at gateway ADDR_A and the first rank of site 1 at ADDR_B:
 *       COUNT times DATA (SIZE bytes, checked) one way and DATA back (a round trip), then
 *       ACK, MATCHED, BYE from both; prints "pingpong: ... one-way median U us"; exit 0
 *   relay_gw_client failwait SITES ADDR_A ADDR_B
 *       the same two ranks, one round trip, then "connected" on stdout; waits (20 s) for a
 *       FAIL or ABORT on the first rank's link: prints "FAIL <text>", exit 0; else exit 1
 *   relay_gw_client hello SITES RANK ADDR
 *       RANK's handshake with ADDR: "up" and exit 0, or "refused: WHY" and exit 1
 */
#include "relay/relay_int.h"

#include "mln_core.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct client {
    mln_relay_sites_t sites;
    mln_link_job_t job;
} client_t;

static int die(const char *what, const char *why)
{
    fprintf(stderr, "relay_gw_client: %s: %s\n", what, why);
    exit(1);
}

static void parse_addr(const char *text, struct sockaddr_in *sa)
{
    const char *colon = strrchr(text, ':');
    char host[64];

    if (colon == NULL || (size_t)(colon - text) >= sizeof(host))
        die("not ADDR:PORT", text);
    memcpy(host, text, (size_t)(colon - text));
    host[colon - text] = '\0';
    memset(sa, 0, sizeof(*sa));
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)atoi(colon + 1));
    if (inet_pton(AF_INET, host, &sa->sin_addr) != 1)
        die("not an IPv4 address", host);
}

/* Rank `rank`'s connection to the gateway of its site at addr; 1 up, 0 refused (c->why). */
static int rank_connect(client_t *cl, mln_relay_conn_t *c, int rank, const char *addr)
{
    struct sockaddr_in sa;
    const int one = 1, site = mln_relay_site_of(&cl->sites, rank);
    int fd = socket(AF_INET, SOCK_STREAM, 0), r = 0;

    parse_addr(addr, &sa);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == -1)
        die("connect", strerror(errno));
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    mln_relay_conn_connect(c, fd, &cl->job, mln_relay_endpoints(cl->sites.nranks, cl->sites.nsites),
                           rank, mln_relay_gw_id(cl->sites.nranks, site, 0), 0, 1, 10.0);
    while ((r = mln_relay_conn_handshake(c)) == 0) {
        struct pollfd p = {.fd = fd, .events = mln_relay_conn_events(c)};
        poll(&p, 1, 100);
    }
    c->scope = (mln_relay_scope_t){
        .nranks = cl->sites.nranks, .trunks = 1, .from_rank = -1, .to_rank = rank};
    return r == 1;
}

/* Writes everything queued on c (blocking). */
static void flush(mln_relay_conn_t *c)
{
    while (c->head != NULL) {
        struct pollfd p = {.fd = c->fd, .events = POLLOUT};
        if (mln_relay_conn_write(c) < 0)
            die("write", c->why);
        if (c->head != NULL)
            poll(&p, 1, 100);
    }
}

static void send_frame(mln_relay_conn_t *c, mln_relay_hdr_t h, const void *payload)
{
    mln_relay_oframe_t f = {.h = h, .payload = payload};

    mln_relay_conn_queue(c, &f);
    flush(c);
}

/* The next frame on c within timeout_ms; 1, or 0 (timeout), or -1 (the link died). */
static int recv_frame(mln_relay_conn_t *c, mln_relay_hdr_t *h, const unsigned char **pl,
                      int timeout_ms)
{
    for (int waited = 0;; waited += 10) {
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        const int r = mln_relay_conn_read(c, h, pl);
        if (r != 0)
            return r;
        if (waited >= timeout_ms)
            return 0;
        poll(&p, 1, 10);
    }
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One message r0 -> r1 of size bytes (checked), and back; the round trip's seconds. */
static double round_trip(mln_relay_conn_t *c0, mln_relay_conn_t *c1, int r0, int r1, uint32_t size,
                         uint64_t seq, unsigned char *buf)
{
    mln_relay_hdr_t h = {
        .type = MLN_RELAY_DATA, .dst = r1, .src = r0, .seq = seq, .total = size, .len = size};
    mln_relay_hdr_t got;
    const unsigned char *pl;
    const double t0 = mln_relay_now();

    for (uint32_t i = 0; i < size; i++)
        buf[i] = (unsigned char)(i + seq);
    send_frame(c0, h, buf);
    if (recv_frame(c1, &got, &pl, 10000) != 1)
        die("no DATA at the second rank", c1->why);
    if (got.type != MLN_RELAY_DATA || got.src != r0 || got.seq != seq || got.len != size ||
        (size && memcmp(pl, buf, size) != 0))
        die("DATA", "not what was sent");
    h.dst = r0;
    h.src = r1;
    send_frame(c1, h, buf);
    if (recv_frame(c0, &got, &pl, 10000) != 1 || got.type != MLN_RELAY_DATA || got.src != r1)
        die("no DATA back at the first rank", c0->why);
    return mln_relay_now() - t0;
}

int main(int argc, char **argv)
{
    static client_t cl;
    mln_config_t cfg;
    unsigned char secret[32];
    char err[256];
    const char *why = NULL;
    mln_relay_conn_t c0, c1;

    if (argc < 5)
        die("usage", "pingpong|failwait SITES ADDR_A ADDR_B | hello SITES RANK ADDR");
    if (mln_config_load(NULL, NULL, &cfg, err, sizeof(err)) != MLN_OK)
        die("config", err);
    if (mln_relay_sites_parse(argv[2], &cl.sites, &why) != MLN_OK || cl.sites.nsites < 2)
        die("sites", why ? why : "two sites at least");
    if (mln_relay_secret_from_env(secret) != MLN_OK ||
        mln_relay_job_init(&cl.job, secret, cfg.link_security, cfg.link_cipher,
                           cfg.link_payload_mac, cl.sites.nranks, cl.sites.nsites) != MLN_OK)
        die("secret", "MLN_GRID_SECRET");
    if (strcmp(argv[1], "hello") == 0) {
        const int up = rank_connect(&cl, &c0, atoi(argv[3]), argv[4]);
        if (up)
            puts("up");
        else
            printf("refused: %s\n", c0.why);
        mln_relay_conn_close(&c0, NULL);
        mln_link_job_wipe(&cl.job);
        return up ? 0 : 1;
    }
    {
        const int r0 = cl.sites.first[0], r1 = cl.sites.first[1];
        const uint32_t size = argc > 5 ? (uint32_t)atoi(argv[5]) : 1000;
        const int count = argc > 6 ? atoi(argv[6]) : 100;
        unsigned char *buf = malloc(size ? size : 1);
        double *t = calloc((size_t)(count > 0 ? count : 1), sizeof(double));
        mln_relay_hdr_t h, got;
        const unsigned char *pl;

        if (buf == NULL || t == NULL || size > MLN_RELAY_FRAME_MAX)
            die("size", "too large");
        if (!rank_connect(&cl, &c0, r0, argv[3]) || !rank_connect(&cl, &c1, r1, argv[4]))
            die("handshake", c0.why[0] ? c0.why : c1.why);
        if (strcmp(argv[1], "failwait") == 0) {
            round_trip(&c0, &c1, r0, r1, 16, 0, buf);
            puts("connected");
            fflush(stdout);
            for (;;) {
                const int r = recv_frame(&c0, &got, &pl, 20000);
                if (r == 1 && (got.type == MLN_RELAY_FAIL || got.type == MLN_RELAY_ABORT)) {
                    printf("FAIL %.*s\n", (int)got.len, (const char *)pl);
                    mln_relay_conn_close(&c0, NULL);
                    mln_relay_conn_close(&c1, NULL);
                    mln_link_job_wipe(&cl.job);
                    free(buf);
                    free(t);
                    return 0;
                }
                if (r != 1)
                    die("no FAIL", r == 0 ? "timeout" : c0.why);
            }
        }
        for (int i = 0; i < count; i++)
            t[i] = round_trip(&c0, &c1, r0, r1, size, (uint64_t)i, buf);
        qsort(t, (size_t)count, sizeof(double), cmp_double);
        /* ACK and MATCHED the way back, then BYE from both */
        h = (mln_relay_hdr_t){.type = MLN_RELAY_ACK, .dst = r0, .src = r1, .offset = 12345};
        send_frame(&c1, h, NULL);
        if (recv_frame(&c0, &got, &pl, 10000) != 1 || got.type != MLN_RELAY_ACK ||
            got.offset != 12345)
            die("no ACK", c0.why);
        h = (mln_relay_hdr_t){.type = MLN_RELAY_MATCHED, .dst = r0, .src = r1, .seq = 7};
        send_frame(&c1, h, NULL);
        if (recv_frame(&c0, &got, &pl, 10000) != 1 || got.type != MLN_RELAY_MATCHED || got.seq != 7)
            die("no MATCHED", c0.why);
        h = (mln_relay_hdr_t){.type = MLN_RELAY_BYE, .dst = MLN_RELAY_ALL, .src = r0};
        send_frame(&c0, h, NULL);
        h.src = r1;
        send_frame(&c1, h, NULL);
        mln_relay_conn_close(&c0, NULL);
        mln_relay_conn_close(&c1, NULL);
        printf("pingpong: %d round trips of %u bytes through 2 gateways, one-way median %.1f us, "
               "min %.1f us\n",
               count, size, count ? t[count / 2] * 1e6 / 2 : 0.0, count ? t[0] * 1e6 / 2 : 0.0);
        free(buf);
        free(t);
    }
    mln_link_job_wipe(&cl.job);
    return 0;
}
