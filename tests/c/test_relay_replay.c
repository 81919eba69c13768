/*
 * test_relay_replay.c - replayed bytes on the relays' links (src/relay/relay_io.c over the
 * link layer's handshake, docs/RELAY.md "Handshake: two links over one socket"), without MPI.
 * An eavesdropper sits on a genuine connection (a tap between two socketpairs) and records
 * every byte each way; then it replays them:
 *
 *   1. the connector's hello and its response | challenge, to a fresh listener: refused
 *      (the listener's fresh nonce makes the old response wrong);
 *   2. the listener's challenge | hello and its response, to a fresh connector: refused (the
 *      connector's fresh nonce makes the old challenge wrong);
 *   3. frames of one connection into another connection of the same two endpoints, after
 *      its own genuine handshake: refused (each connection's keys come from its nonces);
 *   4. a frame of a connection once more into the same connection: refused (the sequence
 *      number in its tag).
 *
 * In modes auth (with and without the payload MAC) and aead; mode none proves nothing and is
 * not tested here.  Each refusal must kill the connection with its one line in c->why.
 */
#include "relay/relay_int.h"

#include "mln_test.h"

#include <errno.h>
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
#define RANK 1
#define TAPE_MAX (4u << 20)

static int gw(void)
{
    return mln_relay_gw_id(NRANKS, 0, 1); /* gateway (site 0, trunk 1): rank 1's site */
}

static void nap_us(long us)
{
    const struct timespec ts = {.tv_sec = 0, .tv_nsec = us * 1000};
    nanosleep(&ts, NULL);
}

/* What the eavesdropper recorded, one direction. */
typedef struct tape {
    unsigned char *b;
    size_t n;
} tape_t;

/* A connection through a tap: c (connector, fd cs[0]) <-> cs[1] TAP ls[0] <-> l (listener,
 * fd ls[1]); the tap forwards every byte and records it. */
typedef struct tapped {
    mln_relay_conn_t c, l;
    int tap_c, tap_l; /* the tap's ends */
    tape_t c2l, l2c;
} tapped_t;

static void tape_add(tape_t *t, const unsigned char *p, size_t n)
{
    MLN_TEST_ASSERT(t->n + n <= TAPE_MAX);
    memcpy(t->b + t->n, p, n);
    t->n += n;
}

static void send_all(int fd, const unsigned char *p, size_t n)
{
    while (n > 0) {
        const ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
            nap_us(50);
            continue;
        }
        MLN_TEST_ASSERT(k > 0);
        p += k;
        n -= (size_t)k;
    }
}

/* Moves what is waiting at the tap, recording it; the bytes moved. */
static size_t tap_pump(tapped_t *t)
{
    unsigned char buf[65536];
    size_t moved = 0;
    ssize_t k;

    while ((k = recv(t->tap_c, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
        tape_add(&t->c2l, buf, (size_t)k);
        send_all(t->tap_l, buf, (size_t)k);
        moved += (size_t)k;
    }
    while ((k = recv(t->tap_l, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
        tape_add(&t->l2c, buf, (size_t)k);
        send_all(t->tap_c, buf, (size_t)k);
        moved += (size_t)k;
    }
    return moved;
}

static void tapped_open(tapped_t *t, const mln_link_job_t *job)
{
    int cs[2], ls[2];

    memset(t, 0, sizeof(*t));
    t->c2l.b = malloc(TAPE_MAX);
    t->l2c.b = malloc(TAPE_MAX);
    MLN_TEST_ASSERT(t->c2l.b != NULL && t->l2c.b != NULL);
    MLN_TEST_ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, cs) == 0);
    MLN_TEST_ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, ls) == 0);
    t->tap_c = cs[1];
    t->tap_l = ls[0];
    mln_relay_conn_connect(&t->c, cs[0], job, mln_relay_endpoints(NRANKS, NSITES), RANK, gw(), 1,
                           TRUNKS, 5.0);
    mln_relay_conn_accept(&t->l, ls[1], job, mln_relay_endpoints(NRANKS, NSITES), gw(), 5.0);
}

static void tapped_close(tapped_t *t)
{
    mln_relay_conn_close(&t->c, NULL);
    mln_relay_conn_close(&t->l, NULL);
    close(t->tap_c);
    close(t->tap_l);
    free(t->c2l.b);
    free(t->l2c.b);
}

static void scopes(mln_relay_conn_t *c, mln_relay_conn_t *l)
{
    l->scope =
        (mln_relay_scope_t){.nranks = NRANKS, .trunks = TRUNKS, .from_rank = RANK, .to_rank = -1};
    c->scope =
        (mln_relay_scope_t){.nranks = NRANKS, .trunks = TRUNKS, .from_rank = -1, .to_rank = RANK};
}

/* The genuine handshake through the tap: both up; the tapes hold exactly its bytes. */
static void tapped_handshake(tapped_t *t)
{
    int a = 0, b = 0;

    for (int i = 0; i < 20000 && (a != 1 || b != 1); i++) {
        a = mln_relay_conn_handshake(&t->c);
        b = mln_relay_conn_handshake(&t->l);
        MLN_TEST_ASSERT(a >= 0 && b >= 0);
        if (tap_pump(t) == 0 && i > 100)
            nap_us(50);
    }
    MLN_TEST_ASSERT(a == 1 && b == 1);
    MLN_TEST_ASSERT(tap_pump(t) == 0);
    scopes(&t->c, &t->l);
}

/* A plain pair over one socketpair (no tap), up. */
static void pair_up(mln_relay_conn_t *c, mln_relay_conn_t *l, const mln_link_job_t *job)
{
    int sv[2], a = 0, b = 0;

    MLN_TEST_ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
    mln_relay_conn_connect(c, sv[0], job, mln_relay_endpoints(NRANKS, NSITES), RANK, gw(), 1,
                           TRUNKS, 5.0);
    mln_relay_conn_accept(l, sv[1], job, mln_relay_endpoints(NRANKS, NSITES), gw(), 5.0);
    for (int i = 0; i < 20000 && (a != 1 || b != 1); i++) {
        a = mln_relay_conn_handshake(c);
        b = mln_relay_conn_handshake(l);
        MLN_TEST_ASSERT(a >= 0 && b >= 0);
        if (i > 100)
            nap_us(50);
    }
    MLN_TEST_ASSERT(a == 1 && b == 1);
    scopes(c, l);
}

/* Drives a lone end's handshake until it ends (1 up, -1 refused), or at most `tries` steps
 * while it waits (0). */
static int handshake_alone(mln_relay_conn_t *x, int tries)
{
    int r = 0;

    for (int i = 0; i < tries && r == 0; i++) {
        r = mln_relay_conn_handshake(x);
        if (r == 0 && i > 20)
            nap_us(50);
    }
    return r;
}

/* Reads at `to` until it dies: its why must contain `want`; no frame may come first. */
static void expect_death(mln_relay_conn_t *to, const char *want)
{
    mln_relay_hdr_t h;
    const unsigned char *pl;
    int r = 0;

    for (int i = 0; i < 2000 && r == 0; i++) {
        r = mln_relay_conn_read(to, &h, &pl);
        if (r == 0)
            nap_us(100);
    }
    if (r != -1 || strstr(to->why, want) == NULL) {
        fprintf(stderr, "expected a death with '%s': read %d, why '%s'\n", want, r, to->why);
        exit(1);
    }
}

/* Sends `n` DATA frames (seq 0.., 1000 bytes each) from rank to gateway through the tap, and
 * reads them at the listener. */
static void frames_through(tapped_t *t, int n)
{
    static unsigned char payload[1000];
    mln_relay_oframe_t fs[8];
    mln_relay_hdr_t h;
    const unsigned char *pl;
    int got = 0, r;

    MLN_TEST_ASSERT(n <= 8);
    for (size_t i = 0; i < sizeof(payload); i++)
        payload[i] = (unsigned char)(i * 7);
    for (int i = 0; i < n; i++) {
        fs[i] = (mln_relay_oframe_t){.h = {.type = MLN_RELAY_DATA,
                                           .trunk = 1,
                                           .dst = 3,
                                           .src = RANK,
                                           .tag = 5,
                                           .seq = (uint64_t)i,
                                           .total = sizeof(payload),
                                           .len = sizeof(payload)},
                                     .payload = payload};
        mln_relay_conn_queue(&t->c, &fs[i]);
    }
    for (int k = 0; k < 20000 && got < n; k++) {
        MLN_TEST_ASSERT(mln_relay_conn_write(&t->c) >= 0);
        tap_pump(t);
        while ((r = mln_relay_conn_read(&t->l, &h, &pl)) == 1) {
            MLN_TEST_ASSERT(h.seq == (uint64_t)got && memcmp(pl, payload, sizeof(payload)) == 0);
            got++;
        }
        MLN_TEST_ASSERT(r == 0);
        if (got < n && k > 100)
            nap_us(50);
    }
    MLN_TEST_ASSERT(got == n && t->c.head == NULL);
}

static void test_mode(int mode, int pmac)
{
    unsigned char secret[32];
    mln_link_job_t job;
    tapped_t t;
    tape_t hs_c2l, hs_l2c, frames;
    mln_relay_conn_t c2, l2;
    int sv[2];

    for (int i = 0; i < 32; i++)
        secret[i] = (unsigned char)(i * 29 + 3);
    MLN_TEST_ASSERT(mln_relay_job_init(&job, secret, mode, MLN_LINK_CIPHER_AUTO, pmac, NRANKS,
                                       NSITES) == MLN_OK);

    /* a genuine connection, recorded: its handshake, then 3 frames rank -> gateway */
    tapped_open(&t, &job);
    tapped_handshake(&t);
    MLN_TEST_ASSERT(t.c2l.n ==
                    MLN_LINK_HELLO_BYTES + MLN_LINK_RESPONSE_BYTES + MLN_LINK_CHALLENGE_BYTES);
    MLN_TEST_ASSERT(t.l2c.n ==
                    MLN_LINK_CHALLENGE_BYTES + MLN_LINK_HELLO_BYTES + MLN_LINK_RESPONSE_BYTES);
    hs_c2l = (tape_t){.b = malloc(t.c2l.n), .n = t.c2l.n};
    hs_l2c = (tape_t){.b = malloc(t.l2c.n), .n = t.l2c.n};
    MLN_TEST_ASSERT(hs_c2l.b != NULL && hs_l2c.b != NULL);
    memcpy(hs_c2l.b, t.c2l.b, t.c2l.n);
    memcpy(hs_l2c.b, t.l2c.b, t.l2c.n);
    t.c2l.n = 0;
    frames_through(&t, 3);
    frames = (tape_t){.b = malloc(t.c2l.n), .n = t.c2l.n};
    MLN_TEST_ASSERT(frames.b != NULL && frames.n > 3 * 1000);
    memcpy(frames.b, t.c2l.b, t.c2l.n);

    /* 1. the connector's hello, then its response | challenge, to a fresh listener */
    MLN_TEST_ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
    mln_relay_conn_accept(&l2, sv[1], &job, mln_relay_endpoints(NRANKS, NSITES), gw(), 5.0);
    send_all(sv[0], hs_c2l.b, MLN_LINK_HELLO_BYTES);
    MLN_TEST_ASSERT(handshake_alone(&l2, 50) == 0); /* the hello is genuine: it answers ... */
    {
        unsigned char back[MLN_LINK_CHALLENGE_BYTES + MLN_LINK_HELLO_BYTES];
        size_t got = 0;
        for (int i = 0; i < 20000 && got < sizeof(back); i++) {
            const ssize_t k = recv(sv[0], back + got, sizeof(back) - got, MSG_DONTWAIT);
            if (k > 0)
                got += (size_t)k;
            else
                nap_us(50);
        }
        MLN_TEST_ASSERT(got == sizeof(back));
        /* ... with a challenge of a fresh nonce: not the recorded one */
        MLN_TEST_ASSERT(memcmp(back, hs_l2c.b, MLN_LINK_CHALLENGE_BYTES) != 0);
    }
    send_all(sv[0], hs_c2l.b + MLN_LINK_HELLO_BYTES, hs_c2l.n - MLN_LINK_HELLO_BYTES);
    MLN_TEST_ASSERT(handshake_alone(&l2, 20000) == -1);
    MLN_TEST_ASSERT(strstr(l2.why, "does not prove the run's secret") != NULL);
    printf("test_relay_replay: mode %s%s: a replayed hello + response: refused (%s)\n",
           mln_link_mode_name(mode), pmac ? " + payload MAC" : "", l2.why);
    mln_relay_conn_close(&l2, NULL);
    close(sv[0]);

    /* 2. the listener's challenge | hello, then its response, to a fresh connector */
    MLN_TEST_ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
    mln_relay_conn_connect(&c2, sv[0], &job, mln_relay_endpoints(NRANKS, NSITES), RANK, gw(), 1,
                           TRUNKS, 5.0);
    MLN_TEST_ASSERT(handshake_alone(&c2, 50) == 0); /* its hello (a fresh nonce) is out */
    send_all(sv[1], hs_l2c.b, hs_l2c.n);
    MLN_TEST_ASSERT(handshake_alone(&c2, 20000) == -1);
    MLN_TEST_ASSERT(strstr(c2.why, "the peer does not prove the run's secret") != NULL);
    printf("test_relay_replay: mode %s%s: a replayed challenge + response: refused (%s)\n",
           mln_link_mode_name(mode), pmac ? " + payload MAC" : "", c2.why);
    mln_relay_conn_close(&c2, NULL);
    close(sv[1]);

    /* 3. the recorded frames into another connection of the same two ends, after its own
     * genuine handshake: its first frame has the same seq (0), but another key */
    pair_up(&c2, &l2, &job);
    send_all(c2.fd, frames.b, frames.n);
    expect_death(&l2, "fails its header's tag");
    printf("test_relay_replay: mode %s%s: frames of another connection: refused (%s)\n",
           mln_link_mode_name(mode), pmac ? " + payload MAC" : "", l2.why);
    mln_relay_conn_close(&c2, NULL);
    mln_relay_conn_close(&l2, NULL);
    /* and the other way: the gateway's side of that pair gets the recorded handshake's
     * listener bytes as frames: nothing of it parses as a frame sealed for this link */
    pair_up(&c2, &l2, &job);
    send_all(l2.fd, hs_l2c.b, hs_l2c.n);
    expect_death(&c2, "fails its header's tag");
    mln_relay_conn_close(&c2, NULL);
    mln_relay_conn_close(&l2, NULL);

    /* 4. the recorded frames once more into their own connection: seq 3 is expected, the
     * first replayed frame is seq 0 */
    send_all(t.tap_l, frames.b, frames.n);
    expect_death(&t.l, "fails its header's tag");
    printf("test_relay_replay: mode %s%s: a frame replayed into its own connection: refused "
           "(%s)\n",
           mln_link_mode_name(mode), pmac ? " + payload MAC" : "", t.l.why);

    tapped_close(&t);
    free(hs_c2l.b);
    free(hs_l2c.b);
    free(frames.b);
    mln_link_job_wipe(&job);
}

int main(void)
{
    test_mode(MLN_LINK_AUTH, 0);
    test_mode(MLN_LINK_AUTH, 1);
    test_mode(MLN_LINK_AEAD, 0);
    puts("test_relay_replay: ok");
    return 0;
}
