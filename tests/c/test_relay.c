/*
 * test_relay.c - the relays' wire (src/relay/relay_wire.c, relay_io.c) without MPI: the
 * header's layout and every check of its parser, the sites and the secret, and connections
 * over a socketpair: the two-way handshake in modes none, auth (with and without the payload
 * MAC) and aead, frames of every size both ways, and what must kill a connection: another
 * secret, a truncated frame, a len beyond its bounds, a forged src, a flipped byte.
 */
#include "relay/relay_int.h"

#include "mln_test.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define NRANKS 4
#define NSITES 2
#define TRUNKS 2

static void nap_us(long us)
{
    const struct timespec ts = {.tv_sec = 0, .tv_nsec = us * 1000};
    nanosleep(&ts, NULL);
}

/* ---- the header ---------------------------------------------------------------------------- */

static mln_relay_scope_t any_scope(void)
{
    return (mln_relay_scope_t){.nranks = NRANKS, .trunks = TRUNKS, .from_rank = -1, .to_rank = -1};
}

static mln_relay_hdr_t data_hdr(void)
{
    return (mln_relay_hdr_t){.type = MLN_RELAY_DATA,
                             .flags = MLN_RELAY_F_SYNC | MLN_RELAY_F_LAST,
                             .trunk = 1,
                             .dst = 3,
                             .src = 0,
                             .context = 7,
                             .tag = 42,
                             .seq = 5,
                             .total = 1000,
                             .offset = 900,
                             .len = 100};
}

static int hdr_eq(const mln_relay_hdr_t *a, const mln_relay_hdr_t *b)
{
    return a->type == b->type && a->flags == b->flags && a->trunk == b->trunk && a->dst == b->dst &&
           a->src == b->src && a->context == b->context && a->tag == b->tag && a->seq == b->seq &&
           a->total == b->total && a->offset == b->offset && a->len == b->len;
}

/* 1 when h, encoded, parses under sc (and then decodes to h); *why set when not. */
static int parses(const mln_relay_hdr_t *h, const mln_relay_scope_t *sc, const char **why)
{
    unsigned char w[MLN_RELAY_HDR_BYTES];
    mln_relay_hdr_t got;

    mln_relay_hdr_encode(h, w);
    if (!mln_relay_hdr_parse(w, sizeof(w), sc, &got, why))
        return 0;
    MLN_TEST_ASSERT(hdr_eq(&got, h));
    return 1;
}

static void test_layout(void)
{
    const mln_relay_hdr_t h = data_hdr();
    const mln_relay_scope_t sc = any_scope();
    unsigned char w[MLN_RELAY_HDR_BYTES], x[MLN_RELAY_HDR_BYTES];
    mln_relay_hdr_t got;
    const char *why = NULL;

    mln_relay_hdr_encode(&h, w);
    /* little-endian at the documented offsets, whatever the host */
    MLN_TEST_ASSERT(w[0] == 0x4d && w[1] == 0x4c && w[2] == 0x4e && w[3] == 0x46);
    MLN_TEST_ASSERT(w[4] == MLN_RELAY_VERSION && w[5] == MLN_RELAY_DATA && w[6] == 3 && w[7] == 0);
    MLN_TEST_ASSERT(w[8] == 1 && w[9] == 0 && w[10] == 0 && w[11] == 0);
    MLN_TEST_ASSERT(w[12] == 3 && w[16] == 0 && w[20] == 7 && w[24] == 42 && w[28] == 100);
    MLN_TEST_ASSERT(w[32] == 5 && w[40] == 0xe8 && w[41] == 0x03 && w[48] == 0x84 && w[49] == 3);
    MLN_TEST_ASSERT(mln_relay_hdr_parse(w, sizeof(w), &sc, &got, &why) == 1 && why == NULL);
    mln_relay_hdr_encode(&got, x);
    MLN_TEST_ASSERT(memcmp(w, x, sizeof(w)) == 0);
    /* every reserved byte, the magic, the version; a short or long buffer */
    for (int i = 0; i < MLN_RELAY_HDR_BYTES; i++) {
        if (i != 0 && i != 4 && i != 7 && i != 10 && i != 11)
            continue;
        memcpy(x, w, sizeof(w));
        x[i] ^= 0x10;
        MLN_TEST_ASSERT(mln_relay_hdr_parse(x, sizeof(x), &sc, &got, &why) == 0 && why != NULL);
    }
    MLN_TEST_ASSERT(mln_relay_hdr_parse(w, sizeof(w) - 1, &sc, &got, &why) == 0);
    MLN_TEST_ASSERT(mln_relay_hdr_parse(w, sizeof(w), NULL, &got, &why) == 0);
    /* type 0 and past the last */
    memcpy(x, w, sizeof(w));
    x[5] = 0;
    MLN_TEST_ASSERT(mln_relay_hdr_parse(x, sizeof(x), &sc, &got, &why) == 0);
    x[5] = MLN_RELAY_TYPES;
    MLN_TEST_ASSERT(mln_relay_hdr_parse(x, sizeof(x), &sc, &got, &why) == 0);
}

static void test_fields(void)
{
    const mln_relay_scope_t sc = any_scope();
    mln_relay_scope_t rs = any_scope();
    mln_relay_hdr_t h;
    const char *why = NULL;

    h = data_hdr();
    MLN_TEST_ASSERT(parses(&h, &sc, &why));
    h.trunk = TRUNKS; /* trunk < trunks */
    MLN_TEST_ASSERT(!parses(&h, &sc, &why) && strstr(why, "trunk"));
    h = data_hdr();
    h.flags = 4;
    MLN_TEST_ASSERT(!parses(&h, &sc, &why));
    h = data_hdr();
    h.dst = NRANKS;
    MLN_TEST_ASSERT(!parses(&h, &sc, &why));
    h.dst = MLN_RELAY_ALL;
    MLN_TEST_ASSERT(!parses(&h, &sc, &why));
    h = data_hdr();
    h.src = -1;
    MLN_TEST_ASSERT(!parses(&h, &sc, &why));
    h = data_hdr();
    h.tag = -1;
    MLN_TEST_ASSERT(!parses(&h, &sc, &why));
    /* offset + len <= total <= MSG_MAX; len <= FRAME_MAX; overflow-safe */
    h = data_hdr();
    h.offset = 901;
    MLN_TEST_ASSERT(!parses(&h, &sc, &why) && strstr(why, "total"));
    h.offset = UINT64_MAX - 10;
    MLN_TEST_ASSERT(!parses(&h, &sc, &why));
    h = data_hdr();
    h.total = MLN_RELAY_MSG_MAX + 1;
    h.offset = 0;
    MLN_TEST_ASSERT(!parses(&h, &sc, &why));
    h.total = MLN_RELAY_MSG_MAX;
    h.offset = MLN_RELAY_MSG_MAX - 100;
    MLN_TEST_ASSERT(parses(&h, &sc, &why));
    h.len = MLN_RELAY_FRAME_MAX + 1;
    h.offset = 0;
    MLN_TEST_ASSERT(!parses(&h, &sc, &why) && strstr(why, "FRAME_MAX"));
    h.len = MLN_RELAY_FRAME_MAX;
    MLN_TEST_ASSERT(parses(&h, &sc, &why));
    h = data_hdr(); /* an empty message */
    h.total = h.offset = h.len = 0;
    MLN_TEST_ASSERT(parses(&h, &sc, &why));

    /* ACK: len 0, offset any, no tag / total / seq / flags */
    h = (mln_relay_hdr_t){.type = MLN_RELAY_ACK, .dst = 1, .src = 2, .offset = 123456789};
    MLN_TEST_ASSERT(parses(&h, &sc, &why));
    h.len = 1;
    MLN_TEST_ASSERT(!parses(&h, &sc, &why));
    h.len = 0;
    h.seq = 1;
    MLN_TEST_ASSERT(!parses(&h, &sc, &why));
    h.seq = 0;
    h.tag = 3;
    MLN_TEST_ASSERT(!parses(&h, &sc, &why));
    h.tag = 0;
    h.flags = MLN_RELAY_F_SYNC;
    MLN_TEST_ASSERT(!parses(&h, &sc, &why));
    /* MATCHED: seq any, nothing else */
    h = (mln_relay_hdr_t){.type = MLN_RELAY_MATCHED, .dst = 1, .src = 2, .seq = 99};
    MLN_TEST_ASSERT(parses(&h, &sc, &why));
    h.offset = 1;
    MLN_TEST_ASSERT(!parses(&h, &sc, &why));
    h.offset = 0;
    h.total = 1;
    MLN_TEST_ASSERT(!parses(&h, &sc, &why));
    /* ABORT: dst ALL, any tag, text bounded */
    h = (mln_relay_hdr_t){
        .type = MLN_RELAY_ABORT, .dst = MLN_RELAY_ALL, .src = 2, .tag = -5, .len = 10};
    MLN_TEST_ASSERT(parses(&h, &sc, &why));
    h.len = MLN_RELAY_TEXT_MAX + 1;
    MLN_TEST_ASSERT(!parses(&h, &sc, &why));
    h.len = 10;
    h.dst = 1;
    MLN_TEST_ASSERT(!parses(&h, &sc, &why));
    h.dst = MLN_RELAY_ALL;
    h.context = 1;
    MLN_TEST_ASSERT(!parses(&h, &sc, &why));
    /* FAIL: from a gateway id only, on a gateway link only */
    h = (mln_relay_hdr_t){.type = MLN_RELAY_FAIL,
                          .dst = MLN_RELAY_ALL,
                          .src = mln_relay_gw_id(NRANKS, 1, 1),
                          .len = 20};
    MLN_TEST_ASSERT(parses(&h, &sc, &why));
    h.src = mln_relay_gw_id(NRANKS, 1, TRUNKS); /* a trunk the run has not */
    MLN_TEST_ASSERT(!parses(&h, &sc, &why));
    h.src = 1;
    MLN_TEST_ASSERT(!parses(&h, &sc, &why));
    h.src = mln_relay_gw_id(NRANKS, 0, 0);
    rs.peer_gw = mln_relay_gw_id(NRANKS, 1, 0);
    MLN_TEST_ASSERT(!parses(&h, &rs, &why) && strstr(why, "gateway of this link"));
    h.src = rs.peer_gw;
    MLN_TEST_ASSERT(parses(&h, &rs, &why));
    rs = any_scope();
    rs.from_rank = 1;
    MLN_TEST_ASSERT(!parses(&h, &rs, &why) && strstr(why, "FAIL from a rank"));
    /* BYE: from a rank on its link, from a gateway on a gateway link */
    h = (mln_relay_hdr_t){.type = MLN_RELAY_BYE, .dst = MLN_RELAY_ALL, .src = 1};
    MLN_TEST_ASSERT(parses(&h, &rs, &why));
    MLN_TEST_ASSERT(!parses(&h, &sc, &why));
    h.src = mln_relay_gw_id(NRANKS, 0, 1);
    MLN_TEST_ASSERT(parses(&h, &sc, &why));
    h.len = 1;
    MLN_TEST_ASSERT(!parses(&h, &sc, &why));

    /* a rank's link: src must be that rank (a forged src), dst ranges */
    rs = any_scope();
    rs.from_rank = 0;
    h = data_hdr();
    MLN_TEST_ASSERT(parses(&h, &rs, &why));
    h.src = 1;
    MLN_TEST_ASSERT(!parses(&h, &rs, &why) && strstr(why, "src does not belong"));
    rs = any_scope();
    rs.to_rank = 2;
    h = data_hdr();
    MLN_TEST_ASSERT(!parses(&h, &rs, &why));
    h.dst = 2;
    MLN_TEST_ASSERT(parses(&h, &rs, &why));
    /* a WAN link from site 0 (ranks 0-1) to site 1 (ranks 2-3) */
    rs = any_scope();
    rs.src_first = 0;
    rs.src_count = 2;
    rs.dst_first = 2;
    rs.dst_count = 2;
    h = data_hdr();
    MLN_TEST_ASSERT(parses(&h, &rs, &why));
    h.src = 2;
    MLN_TEST_ASSERT(!parses(&h, &rs, &why));
    h.src = 1;
    h.dst = 1;
    MLN_TEST_ASSERT(!parses(&h, &rs, &why));
    /* no scope numbers: nothing passes */
    rs = (mln_relay_scope_t){0};
    h = data_hdr();
    MLN_TEST_ASSERT(!parses(&h, &rs, &why));
}

static void test_sites_secret_job(void)
{
    mln_relay_sites_t s;
    const char *why = NULL;
    static const char *const bad[] = {"",     "a",         "a:",      "a:0",         "A:1",  "1a:1",
                                      "a:1,", ",a:1",      "a:1,a:2", "abcdefghi:1", "a:-1", "a: 1",
                                      "a:1x", "a:9999999", "a-b:1",   "a:1,,b:1"};
    unsigned char secret[32], k1[32];
    mln_link_job_t j1, j2;

    MLN_TEST_ASSERT(mln_relay_sites_parse("a:2,b:3,c9:1", &s, &why) == MLN_OK);
    MLN_TEST_ASSERT(s.nsites == 3 && s.nranks == 6 && s.first[1] == 2 && s.size[1] == 3);
    MLN_TEST_ASSERT(strcmp(s.name[2], "c9") == 0 && s.first[2] == 5);
    MLN_TEST_ASSERT(mln_relay_site_of(&s, 0) == 0 && mln_relay_site_of(&s, 1) == 0);
    MLN_TEST_ASSERT(mln_relay_site_of(&s, 2) == 1 && mln_relay_site_of(&s, 4) == 1);
    MLN_TEST_ASSERT(mln_relay_site_of(&s, 5) == 2 && mln_relay_site_of(&s, 6) == -1);
    MLN_TEST_ASSERT(mln_relay_site_of(&s, -1) == -1);
    MLN_TEST_ASSERT(mln_relay_site_index(&s, "b") == 1 && mln_relay_site_index(&s, "d") == -1);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        why = NULL;
        if (mln_relay_sites_parse(bad[i], &s, &why) != MLN_ERR_CONFIG || why == NULL) {
            fprintf(stderr, "sites '%s' accepted\n", bad[i]);
            exit(1);
        }
    }

    unsetenv("MLN_GRID_SECRET");
    MLN_TEST_ASSERT(mln_relay_secret_from_env(secret) == MLN_ERR_CONFIG);
    setenv("MLN_GRID_SECRET", "00112233", 1);
    MLN_TEST_ASSERT(mln_relay_secret_from_env(secret) == MLN_ERR_CONFIG);
    MLN_TEST_ASSERT(getenv("MLN_GRID_SECRET") == NULL);
    setenv("MLN_GRID_SECRET", "0g112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
           1);
    MLN_TEST_ASSERT(mln_relay_secret_from_env(secret) == MLN_ERR_CONFIG);
    setenv("MLN_GRID_SECRET", "00112233445566778899aabbccddeeff00112233445566778899AABBCCDDEEFF",
           1);
    MLN_TEST_ASSERT(mln_relay_secret_from_env(secret) == MLN_OK);
    MLN_TEST_ASSERT(getenv("MLN_GRID_SECRET") == NULL);
    MLN_TEST_ASSERT(secret[0] == 0x00 && secret[1] == 0x11 && secret[31] == 0xff);

    MLN_TEST_ASSERT(mln_relay_job_init(&j1, secret, MLN_LINK_AUTH, MLN_LINK_CIPHER_AUTO, 0, 4, 2) ==
                    MLN_OK);
    MLN_TEST_ASSERT(j1.cipher == MLN_LINK_CIPHER_CHACHA && j1.pks == NULL);
    memcpy(k1, j1.key, 32);
    MLN_TEST_ASSERT(
        mln_relay_job_init(&j2, secret, MLN_LINK_AEAD, MLN_LINK_CIPHER_CHACHA, 1, 4, 2) == MLN_OK);
    MLN_TEST_ASSERT(memcmp(j1.key, j2.key, 32) == 0 && memcmp(j1.id, j2.id, 16) == 0);
    MLN_TEST_ASSERT(memcmp(j1.key, secret, 32) != 0);
    secret[5] ^= 1;
    MLN_TEST_ASSERT(mln_relay_job_init(&j2, secret, MLN_LINK_AUTH, MLN_LINK_CIPHER_AUTO, 0, 4, 2) ==
                    MLN_OK);
    MLN_TEST_ASSERT(memcmp(k1, j2.key, 32) != 0 && memcmp(j1.id, j2.id, 16) != 0);
    MLN_TEST_ASSERT(mln_relay_job_init(&j2, secret, 7, MLN_LINK_CIPHER_AUTO, 0, 4, 2) != MLN_OK);
}

/* ---- connections --------------------------------------------------------------------------- */

typedef struct pair {
    mln_link_job_t jc, jl; /* the connector's and the listener's job (another secret: differ) */
    mln_relay_conn_t c, l; /* rank 1 (site 0) -> gateway (1, 1): trunk 1 of 2 */
} pair_t;

static const int RANK = 1;

static int gw(void)
{
    return mln_relay_gw_id(NRANKS, 0, 1);
}

/* Both ends' handshakes to their end: 1 both up, -1 one failed (the other may not know). */
static int handshake(pair_t *p)
{
    for (int i = 0; i < 20000; i++) {
        const int a = mln_relay_conn_handshake(&p->c), b = mln_relay_conn_handshake(&p->l);
        if (a < 0 || b < 0)
            return -1;
        if (a == 1 && b == 1)
            return 1;
        if (i > 100)
            nap_us(100);
    }
    return 0;
}

static void pair_open(pair_t *p, int mode, int pmac, int other_secret)
{
    unsigned char secret[32];
    int sv[2];

    memset(p, 0, sizeof(*p));
    for (int i = 0; i < 32; i++)
        secret[i] = (unsigned char)(i * 13 + 1);
    MLN_TEST_ASSERT(mln_relay_job_init(&p->jc, secret, mode, MLN_LINK_CIPHER_AUTO, pmac, NRANKS,
                                       NSITES) == MLN_OK);
    secret[0] ^= (unsigned char)other_secret;
    MLN_TEST_ASSERT(mln_relay_job_init(&p->jl, secret, mode, MLN_LINK_CIPHER_AUTO, pmac, NRANKS,
                                       NSITES) == MLN_OK);
    MLN_TEST_ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
    mln_relay_conn_connect(&p->c, sv[0], &p->jc, mln_relay_endpoints(NRANKS, NSITES), RANK, gw(), 1,
                           TRUNKS, 5.0);
    mln_relay_conn_accept(&p->l, sv[1], &p->jl, mln_relay_endpoints(NRANKS, NSITES), gw(), 5.0);
}

static void pair_up(pair_t *p, int mode, int pmac)
{
    pair_open(p, mode, pmac, 0);
    MLN_TEST_ASSERT(handshake(p) == 1);
    MLN_TEST_ASSERT(p->l.peer == RANK && p->l.trunk == 1 && p->l.trunks == TRUNKS);
    /* what each end may send: the rank's link; the gateway to that rank */
    p->l.scope =
        (mln_relay_scope_t){.nranks = NRANKS, .trunks = TRUNKS, .from_rank = RANK, .to_rank = -1};
    p->c.scope =
        (mln_relay_scope_t){.nranks = NRANKS, .trunks = TRUNKS, .from_rank = -1, .to_rank = RANK};
}

static void pair_close(pair_t *p)
{
    mln_relay_conn_close(&p->c, NULL);
    mln_relay_conn_close(&p->l, NULL);
    mln_link_job_wipe(&p->jc);
    mln_link_job_wipe(&p->jl);
}

static int ndone, nfailed;

static void count_done(void *cookie, int ok)
{
    (void)cookie;
    if (ok)
        ndone++;
    else
        nfailed++;
}

/* Sends h with n pattern bytes from `from` and reads it at `to` (interleaved: any size). */
static void exchange(mln_relay_conn_t *from, mln_relay_conn_t *to, mln_relay_hdr_t h, int own)
{
    unsigned char *buf = malloc(h.len ? h.len : 1);
    mln_relay_oframe_t f = {.h = h, .done = count_done};
    mln_relay_hdr_t got;
    const unsigned char *pl = NULL;
    const int before = ndone;
    int r = 0;

    MLN_TEST_ASSERT(buf != NULL);
    for (uint32_t i = 0; i < h.len; i++)
        buf[i] = (unsigned char)(i * 7 + h.len);
    f.payload = buf;
    if (own) { /* the connection frees it (aead: sealed in place) */
        f.own = malloc(h.len ? h.len : 1);
        MLN_TEST_ASSERT(f.own != NULL);
        memcpy(f.own, buf, h.len);
        f.payload = f.own;
    }
    mln_relay_conn_queue(from, &f);
    for (int i = 0; i < 100000 && r == 0; i++) {
        MLN_TEST_ASSERT(mln_relay_conn_write(from) >= 0);
        r = mln_relay_conn_read(to, &got, &pl);
    }
    MLN_TEST_ASSERT(r == 1);
    MLN_TEST_ASSERT(ndone == before + 1 && from->head == NULL && from->queued_bytes == 0);
    MLN_TEST_ASSERT(hdr_eq(&got, &h));
    MLN_TEST_ASSERT(h.len == 0 || memcmp(pl, buf, h.len) == 0);
    MLN_TEST_ASSERT(mln_relay_conn_read(to, &got, &pl) == 0);
    free(buf);
}

/* Reads at `to` until it dies; its why must contain `want`. */
static void expect_death(mln_relay_conn_t *to, const char *want)
{
    mln_relay_hdr_t got;
    const unsigned char *pl;
    int r = 0;

    for (int i = 0; i < 1000 && r == 0; i++) {
        r = mln_relay_conn_read(to, &got, &pl);
        if (r == 0)
            nap_us(100);
    }
    if (r != -1 || strstr(to->why, want) == NULL) {
        fprintf(stderr, "expected a death with '%s': read %d, why '%s'\n", want, r, to->why);
        exit(1);
    }
}

static void test_modes(void)
{
    static const int modes[][2] = {
        {MLN_LINK_NONE, 0}, {MLN_LINK_AUTH, 0}, {MLN_LINK_AUTH, 1}, {MLN_LINK_AEAD, 0}};
    static const uint32_t sizes[] = {0, 1, 100, 20000, 70000, MLN_RELAY_FRAME_MAX};

    for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
        pair_t p;
        mln_relay_hdr_t h;
        pair_up(&p, modes[m][0], modes[m][1]);
        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
            h = (mln_relay_hdr_t){.type = MLN_RELAY_DATA,
                                  .trunk = 1,
                                  .dst = 3,
                                  .src = RANK,
                                  .tag = (int)i,
                                  .seq = i,
                                  .total = sizes[i] + 5,
                                  .offset = 5,
                                  .len = sizes[i]};
            exchange(&p.c, &p.l, h, (int)(i & 1)); /* rank -> gateway */
            h.dst = RANK;
            h.src = 2;
            exchange(&p.l, &p.c, h, (int)(i & 1) ^ 1); /* gateway -> rank */
        }
        h = (mln_relay_hdr_t){
            .type = MLN_RELAY_ACK, .trunk = 0, .dst = 2, .src = RANK, .offset = 9};
        exchange(&p.c, &p.l, h, 0);
        h = (mln_relay_hdr_t){.type = MLN_RELAY_FAIL, .dst = MLN_RELAY_ALL, .src = gw(), .len = 12};
        exchange(&p.l, &p.c, h, 1);
        /* many small frames queued at once go out in one write and come in one by one */
        {
            mln_relay_oframe_t fs[100];
            mln_relay_hdr_t got;
            const unsigned char *pl;
            static const unsigned char text[8] = "abcdefg";
            int n = 0;
            for (int i = 0; i < 100; i++) {
                fs[i] = (mln_relay_oframe_t){
                    .h = {.type = MLN_RELAY_DATA, .dst = 0, .src = RANK, .total = 8, .len = 8},
                    .payload = text,
                    .done = count_done};
                fs[i].h.seq = (uint64_t)i;
                mln_relay_conn_queue(&p.c, &fs[i]);
            }
            MLN_TEST_ASSERT(p.c.nqueued == 100 && p.c.queued_bytes == 800);
            for (int k = 0; k < 10000 && n < 100; k++) {
                int r;
                MLN_TEST_ASSERT(mln_relay_conn_write(&p.c) >= 0);
                while ((r = mln_relay_conn_read(&p.l, &got, &pl)) == 1) {
                    MLN_TEST_ASSERT(got.seq == (uint64_t)n && memcmp(pl, text, 8) == 0);
                    n++;
                }
                MLN_TEST_ASSERT(r == 0);
            }
            MLN_TEST_ASSERT(n == 100 && p.c.nqueued == 0);
        }
        MLN_TEST_ASSERT(p.l.frames_in == 107 && p.c.frames_in == 7);
        /* a frame queued and then the connection closed: done(0) */
        {
            const int failed = nfailed;
            mln_relay_oframe_t f = {.h = h, .done = count_done};
            f.h.len = 0;
            mln_relay_conn_queue(&p.l, &f);
            pair_close(&p);
            MLN_TEST_ASSERT(nfailed == failed + 1);
        }
    }
}

/* A header sealed by hand with the sender's tx link (a sender that holds the key but breaks
 * the rules), then pad bytes of payload. */
static void send_raw(mln_relay_conn_t *from, const unsigned char hdr[MLN_RELAY_HDR_BYTES],
                     size_t pad)
{
    unsigned char tag[MLN_LINK_TAG_BYTES], btag[MLN_LINK_TAG_BYTES], zeros[64] = {0};

    mln_link_seal(&from->tx, hdr, MLN_RELAY_HDR_BYTES, tag, NULL, NULL, 0, btag);
    MLN_TEST_ASSERT(send(from->fd, hdr, MLN_RELAY_HDR_BYTES, 0) == MLN_RELAY_HDR_BYTES);
    if (mln_link_head_tag(from->job))
        MLN_TEST_ASSERT(send(from->fd, tag, sizeof(tag), 0) == sizeof(tag));
    if (pad)
        MLN_TEST_ASSERT(send(from->fd, zeros, pad, 0) == (ssize_t)pad);
}

static void test_failures(void)
{
    static const int modes[] = {MLN_LINK_NONE, MLN_LINK_AUTH, MLN_LINK_AEAD};

    /* another secret: the listener refuses the hello, the connector sees it closed */
    for (size_t m = 1; m < 3; m++) {
        pair_t p;
        int a = 0, b = 0;
        pair_open(&p, modes[m], 0, 1);
        for (int i = 0; i < 1000 && (a == 0 || b == 0); i++) {
            if (a == 0)
                a = mln_relay_conn_handshake(&p.c);
            if (b == 0)
                b = mln_relay_conn_handshake(&p.l);
            if (b < 0 && p.l.fd >= 0) { /* the listener's owner closes it */
                MLN_TEST_ASSERT(strstr(p.l.why, "another job") != NULL);
                mln_relay_conn_close(&p.l, NULL);
            }
            nap_us(50);
        }
        MLN_TEST_ASSERT(a == -1 && b == -1);
        MLN_TEST_ASSERT(strstr(p.c.why, "closed by the peer during the handshake") != NULL);
        pair_close(&p);
    }
    /* a handshake that stalls: past its deadline */
    {
        pair_t p;
        pair_open(&p, MLN_LINK_AUTH, 0, 0);
        p.l.hs_deadline = mln_relay_now() - 1;
        MLN_TEST_ASSERT(mln_relay_conn_handshake(&p.l) == -1 && strstr(p.l.why, "no handshake"));
        pair_close(&p);
    }
    for (size_t m = 0; m < 3; m++) {
        pair_t p;
        mln_relay_hdr_t h = {
            .type = MLN_RELAY_DATA, .dst = 0, .src = RANK, .total = 100, .len = 100};
        unsigned char w[MLN_RELAY_HDR_BYTES];

        /* a truncated frame: its header, half its payload, then the end */
        pair_up(&p, modes[m], 0);
        mln_relay_hdr_encode(&h, w);
        send_raw(&p.c, w, 50);
        shutdown(p.c.fd, SHUT_WR);
        expect_death(&p.l, "in the middle of a frame");
        pair_close(&p);
        /* len beyond MLN_RELAY_FRAME_MAX (and beyond total), properly sealed */
        pair_up(&p, modes[m], 0);
        h.len = MLN_RELAY_FRAME_MAX + 1;
        h.total = (uint64_t)MLN_RELAY_FRAME_MAX * 4;
        mln_relay_hdr_encode(&h, w);
        send_raw(&p.c, w, 0);
        expect_death(&p.l, "a malformed frame: len beyond");
        pair_close(&p);
        pair_up(&p, modes[m], 0);
        h.len = 0xffffffffu;
        h.total = 10;
        mln_relay_hdr_encode(&h, w);
        send_raw(&p.c, w, 0);
        expect_death(&p.l, "a malformed frame: offset + len beyond total");
        pair_close(&p);
        /* a forged src: rank 1's link carries a frame of rank 0 */
        pair_up(&p, modes[m], 0);
        h = (mln_relay_hdr_t){.type = MLN_RELAY_DATA, .dst = 3, .src = 0, .total = 4, .len = 4};
        mln_relay_hdr_encode(&h, w);
        send_raw(&p.c, w, 4);
        expect_death(&p.l, "src does not belong");
        pair_close(&p);
        /* a FAIL from a rank */
        pair_up(&p, modes[m], 0);
        h = (mln_relay_hdr_t){.type = MLN_RELAY_FAIL, .dst = MLN_RELAY_ALL, .src = gw(), .len = 0};
        mln_relay_hdr_encode(&h, w);
        send_raw(&p.c, w, 0);
        expect_death(&p.l, "FAIL from a rank");
        pair_close(&p);
        /* a byte flipped on the way (not in mode none: nothing would notice a payload) */
        if (modes[m] != MLN_LINK_NONE) {
            pair_up(&p, modes[m], 0);
            h = (mln_relay_hdr_t){.type = MLN_RELAY_DATA, .dst = 3, .src = RANK, .total = 4};
            mln_relay_hdr_encode(&h, w);
            w[32] ^= 1; /* seq, after sealing */
            {
                unsigned char tag[MLN_LINK_TAG_BYTES], b2[MLN_LINK_TAG_BYTES];
                unsigned char w2[MLN_RELAY_HDR_BYTES];
                mln_relay_hdr_encode(&h, w2);
                mln_link_seal(&p.c.tx, w2, sizeof(w2), tag, NULL, NULL, 0, b2);
                MLN_TEST_ASSERT(send(p.c.fd, w, sizeof(w), 0) == sizeof(w));
                MLN_TEST_ASSERT(send(p.c.fd, tag, sizeof(tag), 0) == sizeof(tag));
            }
            expect_death(&p.l, "fails its header's tag");
            pair_close(&p);
        }
        /* the peer goes away between frames */
        pair_up(&p, modes[m], 0);
        close(p.c.fd);
        p.c.fd = -1;
        expect_death(&p.l, "closed by the peer");
        MLN_TEST_ASSERT(strstr(p.l.why, "middle") == NULL);
        pair_close(&p);
    }
}

int main(void)
{
    test_layout();
    test_fields();
    test_sites_secret_job();
    test_modes();
    test_failures();
    puts("test_relay: ok");
    return 0;
}
